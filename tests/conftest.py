"""Session-wide teardown: the one Chromium the browser tests share (tests/browser.py)."""


def pytest_sessionfinish(session, exitstatus):
    import sys

    harness = sys.modules.get("browser")       # imported only when a browser test ran
    if harness is not None:
        harness.close_shared_browser()
