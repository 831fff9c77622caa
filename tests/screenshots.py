"""Screenshots of the HTML pages for docs/formats.md, taken in headless Chromium.

Run by hand (not a test): ``python3 tests/screenshots.py [OUTDIR]`` writes
PNGs (default docs/images/) of the lesson's page, its softmax and heat-map
sections with a focused cell's popup, and the causal example's masked
weights.  It uses the same harness as tests/test_html.py (network off).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import symattn as sa  # noqa: E402
from browser import Browser, chromium_path  # noqa: E402
from symattn.document.build import build_document  # noqa: E402
from symattn.document.printers.html import print_html  # noqa: E402

WIDTH = 1000


def _page(example: str, folder: Path) -> Path:
    path = folder / f"{example}.html"
    path.write_text(print_html(build_document(sa.attend(sa.load_example(example)))), encoding="utf-8")
    return path


def _section(shown, ident: str, out: Path, focus_cell: int | None = None) -> None:
    """A screenshot of one section (``sec-<key>``), optionally with a heat-map cell focused."""
    page = shown.page
    section = page.locator(f"#sec-{ident}")
    if focus_cell is not None:
        section.locator("table.heatmap td[tabindex='0']").nth(focus_cell).focus()
    x, y, w, h = section.evaluate(
        "e => { const r = e.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; }")
    extra = 60 if focus_cell is not None else 0          # room for the popup below the map
    page.screenshot(path=str(out), full_page=True,
                    clip={"x": x - 10, "y": y - 10, "width": w + 20, "height": h + 20 + extra})
    print(out)


def main(outdir: Path) -> None:
    executable = chromium_path()
    if executable is None:
        sys.exit("screenshots need Debian's chromium (apt-get install chromium)")
    outdir.mkdir(parents=True, exist_ok=True)
    browser = Browser(executable)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            lesson = browser.open(_page("i-love-cats", folder))
            lesson.assert_clean()
            lesson.page.set_viewport_size({"width": WIDTH, "height": 1000})
            lesson.page.screenshot(path=str(outdir / "lesson-html.png"))
            print(outdir / "lesson-html.png")
            _section(lesson, "scaled", outdir / "lesson-html-scaled.png")
            _section(lesson, "softmax", outdir / "lesson-html-softmax.png")
            _section(lesson, "weights", outdir / "lesson-html-heatmap.png", focus_cell=1)
            lesson.close()
            causal = browser.open(_page("i-love-cats-causal", folder))
            causal.assert_clean()
            causal.page.set_viewport_size({"width": WIDTH, "height": 1000})
            _section(causal, "weights", outdir / "causal-html-heatmap.png")
            causal.close()
    finally:
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent / "docs" / "images")
