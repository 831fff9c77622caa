"""The page's downloads: the derivation as LaTeX, PDF, HTML or JSON, a worksheet folder as a zip.

Each is what the CLI writes for the same problem (``symattn explain --format latex|html|json``,
``explain --pdf``, ``symattn worksheet``), made in a worker (:mod:`.workers`, under the time
and memory budget) and answered as bytes: nothing is written to disk but the temporary
folder the project's PDF path (:func:`symattn.document.pdf.compile_tex`) makes and removes.
The file's name comes from the problem's title, so :func:`disposition` escapes it.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any
from urllib.parse import quote

from symattn.classroom.worksheets.choices import SheetChoices
from symattn.errors import ProblemError

__all__ = ["DOWNLOADS", "NO_TEX", "derivation_file", "disposition", "worksheet_zip"]

#: kind → (file extension, Content-Type)
DOWNLOADS = {"latex": ("tex", "application/x-tex; charset=utf-8"),
             "pdf": ("pdf", "application/pdf"),
             "html": ("html", "text/html; charset=utf-8"),
             "json": ("json", "application/json; charset=utf-8"),
             "worksheet": ("zip", "application/zip")}
NO_TEX = ("a PDF needs pdflatex or latexmk on the server's PATH (Debian: apt-get install "
          "texlive-latex-extra latexmk): download the LaTeX instead")

_SOURCE = "problem"


def _trace(data: dict[str, Any]) -> Any:
    from symattn.problem.problem import Problem
    from symattn.trace.trace import Trace

    return Trace(Problem.from_dict(data, source=_SOURCE))


def derivation_file(data: dict[str, Any], kind: str, digits: int = 3, places: int | None = None,
                    rows: tuple[int, ...] | None = None) -> bytes:
    """The derivation of a problem table as ``explain`` writes it: ``latex`` (a whole
    document), ``pdf`` (that document compiled), ``html`` (one page) or ``json``; at
    ``digits`` or ``places`` and with ``rows`` worked by hand, as ``explain --digits N
    --places N --rows I,J`` (the page's view, so a download is the derivation shown)."""
    from symattn.document.trace_latex import LatexOptions
    from symattn.numbers.certify import Rounding
    from symattn.trace.trace import IndexError_

    trace = _trace(data)
    rounding = Rounding(places=places) if places is not None else Rounding(digits=digits)
    options = LatexOptions(rounding=rounding, rows=rows)
    try:
        return _render(trace, kind, digits, places, options)
    except IndexError_ as exc:
        raise ProblemError(f"row {', '.join(map(str, rows or ()))}: {exc}; choose another row") from None


def _render(trace: Any, kind: str, digits: int, places: int | None, options: Any) -> bytes:
    if kind == "json":
        from symattn.document.trace_json import render_json

        worked = None
        if options.rows:         # explain --rows: the JSON names the rows worked by hand
            step = trace.step("scores")
            worked = [step.row_labels[step.row_index(r)] for r in options.rows]
        return render_json(trace, digits, places=places, worked_rows=worked).encode()
    if kind == "html":
        from symattn.document.build.trace import build_document
        from symattn.document.printers.html import print_html

        return print_html(build_document(trace, options.document_options())).encode()
    from symattn.document.trace_latex import render_latex

    tex = render_latex(trace, options)
    if kind == "latex":
        return tex.encode()
    if kind == "pdf":
        from symattn.document.pdf import compile_tex

        return compile_tex(tex, "derivation")
    raise ProblemError(f"no download named {kind!r}: the downloads are {', '.join(DOWNLOADS)}")


def worksheet_zip(data: dict[str, Any], choices: SheetChoices | None = None) -> bytes:
    """The folder ``symattn worksheet`` writes for ``choices`` (its flags: versions and seed,
    template, questions, points, layout, paper, format, ``--pdf``, …) as a zip made in memory:
    sheets, keys, the versions' problem files, worksheet.json and its manifest.

    No template and no versions: the problem posted is version A, its file the page's TOML."""
    from symattn.classroom.worksheets.choices import sheet_plan
    from symattn.classroom.worksheets.sheets import manifest_text, worksheet_files

    choices = choices or SheetChoices()
    if choices.template:
        from symattn.classroom.worksheets.templates import load_template, template_text

        problem, toml = load_template(choices.template), template_text(choices.template)
    else:
        from symattn.serve.derive import toml_of

        problem, toml = _trace(data).problem, toml_of(data)
    versions, options = sheet_plan(problem, toml, choices)
    files = {name: text.encode() for name, text in worksheet_files(versions, options).items()}
    if choices.pdf:
        from symattn.document.pdf import compile_tex

        for name in [n for n in files if n.endswith(".tex")]:
            files[name[:-4] + ".pdf"] = compile_tex(files[name].decode(), name[:-4])
    files["worksheet.txt"] = manifest_text(files["worksheet.txt"].decode(), files).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            archive.writestr(f"worksheet/{name}", files[name])
    return buffer.getvalue()


def disposition(title: object, extension: str) -> str:
    """``Content-Disposition: attachment`` naming the file after the problem's title.

    The plain ``filename`` keeps only letters, digits, ``-``, ``_`` and ``.`` (anything else
    becomes ``-``), so no quote, backslash, line break or path reaches the header; the title as
    written goes in ``filename*`` (RFC 6266, UTF-8, every other byte percent-escaped)."""
    text = " ".join(str(title or "").split())[:80].strip()
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "derivation"
    header = f'attachment; filename="{plain}.{extension}"'
    if text and text != plain:
        header += f"; filename*=UTF-8''{quote(text, safe='')}.{extension}"
    return header
