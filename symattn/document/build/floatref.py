"""A float kernel's error report (``symattn floatref``) as a document: what was compared,
the histogram of |error| in ulps, the heads, the worst entries certified, and the
``--max-ulp`` verdict.

The numbers are the :class:`~symattn.floatref.ulp.ULPReport`'s own (errors in
float64 with their resolution, the worst entries as certified decimals); this module
only decides what a reader sees, so text, LaTeX and HTML list the same sections.  The
terminal prints it as a listing (a :class:`Report`), as ``symattn floatref`` always
has.  The ``--format json`` contract stays ``ULPReport.to_json``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from symattn.document.blocks import Note, Report, Section, Table

if TYPE_CHECKING:
    from symattn.floatref.sdpa import SDPAReference
    from symattn.floatref.ulp import ULPReport

__all__ = ["build_floatref_document", "build_reference_document", "gate_line"]


def gate_line(report: "ULPReport", max_ulp: float) -> str:
    """The ``--max-ulp`` verdict: FAIL when some entry is proved to exceed it, else PASS."""
    if report.exceeds(max_ulp):
        return f"FAIL: max |error| {report.max_ulps:.4g} ulp exceeds --max-ulp {max_ulp:g}"
    return (f"PASS: no entry is proved to exceed --max-ulp {max_ulp:g} (max |error| "
            f"{report.max_ulps:.4g} ulp, each error figure certified to ±{report.resolution:.1g} ulp)")


def _bins() -> list[str]:
    from symattn.floatref.ulp import BIN_EDGES

    return [f"({lo:g}, {hi:g}]" if lo else f"[0, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]


def build_floatref_document(report: "ULPReport", *, max_ulp: float | None = None,
                            title: str | None = None) -> Report:
    """The report as a document; ``max_ulp`` adds the gate's verdict as its last section."""
    r = report
    about = [f"{r.fmt} {r.step} vs the exact values: {r.entries} entries, "
             f"{r.correctly_rounded} correctly rounded (proved)",
             f"max |error| {r.max_ulps:.4g} ulp, mean {r.mean_ulps:.4g} ulp, "
             f"max |relative error| {r.max_relative:.4g}",
             # beside the ULPs: errors that do not explode at entries near 0 (issue 25)
             f"max |error| relative to max |{'O' if r.step == 'output' else 'w'}| {r.max_error_of_max_abs:.3g}, "
             f"relative to the entry's scale {'Σ_j w_j·|v_j|' if r.step == 'output' else '(Σ w = 1)'} "
             f"{r.max_error_of_scale:.3g}",
             # the resolution is how well each error figure is known, not a bound on the errors
             "errors are measured from the exact value (a correctly rounded result is within "
             f"0.5 ulp of it); each error figure is certified to ±{r.resolution:.1g} ulp"]
    if r.skipped_rows:
        about.append(f"{r.skipped_rows} fully masked rows skipped (no exact value)")
    sections = [Section("summary", "Summary", tuple(Note((line,)) for line in about)),
                Section("histogram", "Errors in ulps", (Table(
                    "", ("|error| (ulp)", "entries"), tuple((b, str(n)) for b, n in zip(_bins(), r.histogram)),
                    numeric=(False, True)),))]
    if len(r.heads) > 1:
        rows = tuple((str(list(h.head)), f"{h.max_ulps:.4g}", f"{h.mean_ulps:.4g}", f"{h.max_relative:.3g}",
                      f"{h.correctly_rounded}/{h.entries}") for h in r.heads)
        sections.append(Section("heads", "Per head", (Table(
            "", ("head", "max ulp", "mean ulp", "max rel", "correct"), rows,
            numeric=(False, True, True, True, True)),)))
    if r.worst:
        rows = tuple((str(list(w.index)), r.shown(w), w.exact, w.ulps, w.relative or "—") for w in r.worst)
        caption = "worst entries (certified): the exact values and the errors are certified decimals"
        sections.append(Section("worst", "Worst entries", (Table(
            caption, ("entry", f"{r.fmt} value", "exact", "error (ulp)", "relative error"), rows,
            numeric=(False, True, True, True, True)),)))
    if max_ulp is not None:
        sections.append(Section("gate", "Verdict", (Note((gate_line(r, max_ulp),)),)))
    return Report(title or f"Errors of a {r.fmt} SDPA {r.step} in ulps", tuple(sections),
                  meta={"kind": "floatref", "exceeds": None if max_ulp is None else r.exceeds(max_ulp)},
                  show_title=title is not None)


def build_reference_document(ref: "SDPAReference", dtype: str, written: str) -> Report:
    """What ``--write-reference`` wrote (without ``--out``): the shapes and how the entries were decided."""
    line = (f"{dtype} reference of SDPA: output {tuple(ref.output.shape)}, weights {tuple(ref.weights.shape)}, "
            f"every entry correctly rounded ({ref.arb_entries} of {ref.entries} decided by arb balls); "
            f"written to {written}")
    masked = int(ref.fully_masked.sum())
    notes = [Note((line,))]
    if masked:
        notes.append(Note((f"{masked} fully masked rows are NaN (no exact value)",)))
    return Report(f"A correctly rounded {dtype} SDPA reference", (Section("reference", "Reference", tuple(notes)),),
                  meta={"kind": "floatref-reference"}, show_title=False)
