"""Session-wide teardown: the one Chromium the browser tests share (tests/browser.py)."""


def pytest_sessionfinish(session, exitstatus):
    import sys

    harness = sys.modules.get("browser")       # imported only when a browser test ran
    if harness is not None:
        harness.close_shared_browser()


def pytest_collection_finish(session):
    """Fewer, cheaper garbage collections for the in-process tests: the objects alive after
    collection (sympy, numpy, the test modules) are frozen out of the collector, and a
    collection runs every 50,000 allocations instead of 700.  The exports and grading
    allocate millions of short-lived Fractions; the default spent ~15% of their CPU in the
    collector.  Subprocesses (the fuzz worker, the CLI tests) keep Python's defaults."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
