"""A kernel's gradients against the correctly rounded ones (``symattn floatref --grad-output``) as a
document: what was compared, per gradient the distances (in ulps, and relative to the largest
entry and to each entry's scale), a histogram, the worst entries certified with their rows'
conditioning, and the ``--max-ulp`` verdict.

The numbers are the :class:`~symattn.testing.gradients.GradsReport`'s own; this module only
decides what a reader sees, so text, LaTeX and HTML list the same sections.  The ``--json``
contract is ``GradsReport.to_json`` (key "backward").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from symattn.document.blocks import Note, Report, Section, Table

if TYPE_CHECKING:
    from symattn.testing.gradients import GradsReport

__all__ = ["build_grads_document", "grads_gate_line"]

_DIGITS = {"float64": 17, "float32": 9, "float16": 5, "bfloat16": 4, "float8_e4m3fn": 3, "float8_e5m2": 3}


def grads_gate_line(report: "GradsReport", max_ulp: float) -> str:
    """The ``--max-ulp`` verdict for the gradients."""
    unit = "ulp of scale" if report.ulp_scale == "magnitude" else "ulp"
    over = {n: k for n, k in report.over.items() if k}
    worst = max(report.max_ulps.values(), default=0.0)
    if over:
        which = ", ".join(f"{n} {k}" for n, k in over.items())
        return f"FAIL: entries proved more than {max_ulp:g} {unit} away ({which}); max {worst:.4g} {unit}"
    return f"PASS: no gradient entry is proved more than {max_ulp:g} {unit} away (max {worst:.4g} {unit})"


def _bins() -> list[str]:
    from symattn.floatref.ulp import BIN_EDGES

    return [f"({lo:g}, {hi:g}]" if lo else f"[0, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]


def build_grads_document(report: "GradsReport", *, max_ulp: float | None = None, against: str | None = None,
                         beside: tuple[str, ...] = ()) -> Report:
    """The gradient report as a document; ``max_ulp`` adds the verdict as its last section.
    ``against`` names the reference when it is not the usual one (an fp8 recipe); ``beside``:
    lines of a section after the distances (the true gradients beside a recipe's)."""
    r = report
    unit = "ulps of each entry's scale (the sum of the absolute values of its terms)" \
        if r.ulp_scale == "magnitude" else "ulps of each exact entry"
    against = against or ("the recipe on the kernel's own saved O and LSE (--conditional)" if r.reference.conditional
                          else "the exact gradients")
    about = [f"{r.fmt} dQ, dK, dV against {against}, every reference entry correctly rounded (proved)",
             f"distances from the correctly rounded values in {unit}; the exact error is within ½ of it"]
    for g in r.grads.values():
        about.append(f"{g.name}: {g.entries} entries, max {g.max_ulps:.4g}; max |error| {g.max_abs:.3g} = "
                     f"{g.normwise:.3g} of max |{g.name}|, {g.of_scale:.3g} of the entry's scale")
    cond = r.reference.condition
    if cond is not None and cond.size:
        about.append(f"rows' condition κ (the cancellation in dP − D) up to {float(cond.max()):.3g}: "
                     "a row with a large κ has a large relative error in a right kernel too; an entry's "
                     "κ is its scale / |exact| (the correctly rounded values are in --json)")
    sections = [Section("summary", "Summary", tuple(Note((line,)) for line in about))]
    names = tuple(r.grads)
    rows = tuple((b,) + tuple(str(r.grads[n].histogram[k]) for n in names) for k, b in enumerate(_bins()))
    sections.append(Section("histogram", "Distances", (Table(
        "", ("|distance|",) + names, rows, numeric=(False,) + (True,) * len(names)),)))
    digits = _DIGITS.get(r.fmt, 17)
    worst = tuple((f"{g.name}[{','.join(str(i) for i in w.index)}]", f"{w.got:.{digits}g}", w.exact,
                   f"{w.distance:.3g}",
                   f"{w.kappa_entry:.3g}, {w.kappa_row:.3g}")
                  for g in r.grads.values() for w in g.worst)
    if worst:
        sections.append(Section("worst", "Worst entries", (Table(
            "exact: certified decimals; κ: the entry's, its rows'",
            ("entry", f"{r.fmt} value", "exact", "distance", "κ entry, row"), worst,
            numeric=(False,) + (True,) * 4),)))
    if beside:
        sections.append(Section("beside", "Beside: the true gradients", tuple(Note((line.strip(),)) for line in beside)))
    if max_ulp is not None:
        sections.append(Section("gate", "Verdict", (Note((grads_gate_line(r, max_ulp),)),)))
    return Report(f"Errors of {r.fmt} SDPA gradients", tuple(sections),
                  meta={"kind": "floatref-grads", "exceeds": None if max_ulp is None else not r.passed},
                  show_title=True)
