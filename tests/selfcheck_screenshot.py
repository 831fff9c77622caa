"""A screenshot of the self-check page for docs/classroom.md, taken in headless Chromium.

Run by hand (not a test): ``python3 tests/selfcheck_screenshot.py [OUTDIR]`` writes
``selfcheck.png`` (default docs/images/): the lesson's page asking for the weights, with
four answers typed — the value of the "no √d_k" mistake, a right one with a decimal
comma, a right one rounded more coarsely than the sheet asks (0.43 for 0.432), and a wrong
one — each judged by the page.  Same harness as the tests (network off).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from browser import Browser, chromium_path  # noqa: E402
from symattn.classroom.answers import load_versions  # noqa: E402
from symattn.classroom.selfcheck import selfcheck_page  # noqa: E402


def main(outdir: Path) -> None:
    executable = chromium_path()
    if executable is None:
        sys.exit("screenshots need Debian's chromium (apt-get install chromium)")
    outdir.mkdir(parents=True, exist_ok=True)
    [v] = load_versions(None, "i-love-cats", None, ("weights",))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "selfcheck-A.html"
        path.write_text(selfcheck_page(v), encoding="utf-8")
        browser = Browser(executable)
        try:
            shown = browser.open(path)
            page = shown.page
            page.wait_for_selector("body[data-ready=true]")
            for target, text in (("weights[I, I]", "0.0634"), ("weights[I, love]", "0,432"),
                                 ("weights[I, cats]", "0.43"), ("weights[love, I]", "0.05")):
                box = page.locator(f'input[data-target="{target}"]')
                box.fill(text)
                box.press("Enter")
                page.wait_for_function("e => e.dataset.verdict", arg=box.element_handle())
            out = outdir / "selfcheck.png"
            page.set_viewport_size({"width": 900, "height": 900})
            page.screenshot(path=str(out), full_page=True)
            print(out)
            shown.assert_clean()
            shown.close()
        finally:
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "docs" / "images")
