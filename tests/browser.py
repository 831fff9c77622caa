"""A headless-Chromium harness for the HTML pages (Playwright for Python, Debian's chromium).

``playwright install`` downloads a browser, which cannot work offline, so
Playwright launches Debian's ``/usr/bin/chromium`` by ``executable_path``.
Every request other than the page's own file:// URL is aborted and recorded,
so a test can assert that a page fetched nothing; console errors and page
errors are collected too.  Outside CI the tests skip (saying why) when
Chromium or Playwright is missing; with CI=true that is a failure, because
.ci/run installs both.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
VIEWPORT = {"width": 1100, "height": 900}


def chromium_path() -> str | None:
    """Debian's Chromium, or one named by SYMATTN_CHROMIUM."""
    named = os.environ.get("SYMATTN_CHROMIUM")
    for candidate in ((named,) if named else ()) + CHROMIUM_PATHS:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def need_browser() -> str:
    """The Chromium path; skip (outside CI) or fail (CI=true) when Chromium or Playwright is missing."""
    missing = []
    path = chromium_path()
    if path is None:
        missing.append("chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install -e '.[test]')")
    if not missing:
        return path
    reason = f"browser tests need {' and '.join(missing)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}; .ci/run must install them")
    pytest.skip(reason)


@dataclass
class Rendered:
    """A page opened offline, with everything it tried to do."""

    page: object                     # playwright.sync_api.Page
    url: str
    requests: list[str] = field(default_factory=list)          # every request the page made
    blocked: list[str] = field(default_factory=list)           # requests aborted (anything but the page)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.page.context.close()

    def assert_clean(self) -> None:
        """No request left the page and nothing went wrong in it."""
        assert self.blocked == [], f"the page tried to fetch {self.blocked}"
        assert self.requests == [self.url], f"requests other than the page itself: {self.requests}"
        assert self.console_errors == [], self.console_errors
        assert self.page_errors == [], self.page_errors


class Browser:
    """One headless Chromium for a test module; :meth:`open` gives a fresh context per page."""

    def __init__(self, executable: str) -> None:
        from playwright.sync_api import sync_playwright
        self._manager = sync_playwright()
        self._playwright = self._manager.start()
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=executable, headless=True, args=["--no-sandbox"])
        except Exception:
            self._manager.__exit__(None, None, None)
            raise

    def open(self, path: Path, *, javascript: bool = True) -> Rendered:
        """Load a local HTML file with the network off; wait until it has loaded."""
        context = self.browser.new_context(java_script_enabled=javascript, viewport=VIEWPORT,
                                           offline=True)
        page = context.new_page()
        url = path.resolve().as_uri()
        rendered = Rendered(page, url)

        def route(r) -> None:
            if r.request.url == url:
                r.continue_()
            else:
                rendered.blocked.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page.on("request", lambda req: rendered.requests.append(req.url))
        page.on("console", lambda msg: msg.type == "error" and rendered.console_errors.append(msg.text))
        page.on("pageerror", lambda err: rendered.page_errors.append(str(err)))
        page.goto(url, wait_until="load")
        return rendered

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self._manager.__exit__(None, None, None)


_shared: Browser | None = None


def shared_browser() -> Browser:
    """The session's one Chromium: a launch costs ~1.3 s and a dozen modules open pages.
    Each :meth:`Browser.open` still gets a fresh context, so pages share nothing;
    tests/conftest.py closes it when the session ends."""
    global _shared
    if _shared is None:
        _shared = Browser(need_browser())
    return _shared


def close_shared_browser() -> None:
    global _shared
    if _shared is not None:
        try:
            _shared.close()
        finally:
            _shared = None
