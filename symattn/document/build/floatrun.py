"""A whole dump's report (``symattn floatref-run``) as a document: the verdict, a heat map of
the worst error per layer and head, the histograms, the failing heads, the worst entries
with their certified exact values and the hard-case pattern of their row, the bad shards.

The numbers are the :class:`~symattn.floatrun.RunReport`'s own; this module only decides
what a reader sees, so index.html, the text listing and LaTeX hold the same sections.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from symattn.document.blocks import Note, Report, Section, Table
from symattn.floatrun.patterns import KEY, NONE, QUERY

if TYPE_CHECKING:
    from symattn.floatrun.report import RunReport

__all__ = ["build_run_document"]

#: worst entries listed over the whole dump
WORST_SHOWN = 20
#: lines of the per-head failing rows table in the page (summary.json has every one)
ROW_GROUPS_SHOWN = 200
ROLE_NAMES = {"out": "output", "lse": "log-sum-exp", "dq": "dQ", "dk": "dK", "dv": "dV"}


def _shade(ulp: float | None, top: float) -> int | None:
    """Percent of colour on a log scale: 0 ulp white, ``top`` ulp or more darkest."""
    if ulp is None or not math.isfinite(ulp):
        return None
    return max(0, min(100, round(100 * math.log2(1 + ulp) / math.log2(1 + top))))


def _summary(r: "RunReport") -> Section:
    o = r.options
    gate = "no --max-ulp gate" if r.max_ulp is None else f"--max-ulp {r.max_ulp:g}"
    lines = [f"{r.verdict.upper()}: {len(r.heads)} shards, {len(r.failing)} over {gate}, {len(r.bad)} bad input",
             f"dump {r.dump}; dtype {o.get('dtype') or 'from the files'}, causal {o.get('causal') or 'no'}, "
             f"rows {o.get('rows')} (seed {o.get('seed')})",
             "errors in ulps of the exact value; the output's errors are proved from enclosures of the exact "
             "value (to within each head's resolution), the gradients' and the LSE's measured from the "
             "correctly rounded value (to within 0.5 ulp); a head fails when an error less its resolution "
             "exceeds the gate"]
    sampled = [h for h in r.heads if isinstance(h.get("rows"), dict) and "risky" in h["rows"]]
    if sampled:
        reasons = sorted({reason for h in sampled for reason in h["rows"]["risky"]})
        counts = sorted({(h["rows"]["count"], h["rows"]["of"]) for h in sampled})
        lines.append(f"rows checked in {len(sampled)} heads: {', '.join(f'{c} of {n}' for c, n in counts[:4])}"
                     f" (a seeded sample{' plus the risky rows: ' + ', '.join(reasons) if reasons else ''})")
    if r.run:
        sent = "; the inputs read by the client and sent to the workers" if r.run.get("inputs") else ""
        lines.append(f"run: {r.run.get('engine')}, {r.run.get('computed', 0)} shards computed, "
                     f"{r.run.get('reused', 0)} reused from an earlier run{sent}")
    if isinstance(chosen := r.run.get("blocks"), dict):
        split = ", ".join(f"{name} {n}" for name, n in list(chosen["split"].items())[:8])
        more = f" and {len(chosen['split']) - 8} more" if len(chosen["split"]) > 8 else ""
        whole = f"; whole for the backward: {len(chosen['whole_for_backward'])} heads" if chosen["whole_for_backward"] else ""
        lines.append(f"--blocks auto (about {chosen['target_seconds']:g} s a shard, {chosen['workers']} worker{'s' if chosen['workers'] != 1 else ''}): "
                     f"{chosen['shards']} shards; row blocks per head: {split + more if split else 'none split'}{whole}")
    return Section("summary", "Summary", tuple(Note((line,)) for line in lines))


def _heat(r: "RunReport", role: str) -> Table | None:
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for h in r.heads:
        t = (h.get("tensors") or {}).get(role)
        if t is not None:
            cells[(h["layer"], h["head"])] = t
    if not cells:
        return None
    layers = sorted({h["layer"] for h in r.heads})
    heads = sorted({h["head"] for h in r.heads})
    top = max(16.0, 4 * (r.max_ulp or 4))
    bad = {(h["layer"], h["head"]) for h in r.bad}
    rows, shades = [], []
    for layer in layers:
        row: list[str] = [f"L{layer}"]
        shade: list[int | None] = [None]
        for head in heads:
            t = cells.get((layer, head))
            if t is None:
                row.append("bad" if (layer, head) in bad else "—")
                shade.append(None)
            else:
                row.append(f"{t['max_ulp']:.3g}" + (" ✗" if t.get("exceeds") else ""))
                shade.append(_shade(t["max_ulp"], top))
        rows.append(tuple(row))
        shades.append(tuple(shade))
    rounded = any(t.get("reference") == "correctly rounded" for t in cells.values())
    name = ROLE_NAMES.get(role, role)
    what = f"worst distance of {name} from its correctly rounded value" if rounded else f"worst |error| of {name}"
    # a short caption: a long one widens the table past the page and hides its last columns
    return Table(f"{what} (ulps), per layer and head",
                 ("layer", *(f"H{h}" for h in heads)), tuple(rows), numeric=(False,) + (True,) * len(heads),
                 shades=tuple(shades),
                 legend=("the exact error is within 0.5 ulp of the distance shown; " if rounded else "")
                 + f"shading: 0 ulp white to {top:g} ulp or more darkest (log scale); "
                   "✗ over the gate; bad: the shard's input was refused")


def _histograms(r: "RunReport") -> Table | None:
    from symattn.floatref.ulp import BIN_EDGES

    hists = r.histograms()
    if not hists:
        return None
    bins = [f"({lo:g}, {hi:g}]" if lo else f"[0, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]
    roles = list(hists)
    biggest = {role: max(max(hists[role]), 1) for role in roles}
    rows = tuple((b, *(str(hists[role][k]) for role in roles)) for k, b in enumerate(bins))
    shades = tuple((None, *(round(100 * math.log1p(hists[role][k]) / math.log1p(biggest[role]))
                            for role in roles)) for k in range(len(bins)))
    return Table("entries per |error| bin (ulps), every head", ("|error| (ulp)", *(ROLE_NAMES.get(x, x) for x in roles)),
                 rows, numeric=(False,) + (True,) * len(roles), shades=shades,
                 legend="shading: the count on a log scale, per column")


def _failing(r: "RunReport") -> Table | None:
    rows = []
    for h in r.failing:
        for role, t in h["tensors"].items():
            if t.get("exceeds"):
                f = t.get("failing_rows")
                rows.append((h["shard"], ROLE_NAMES.get(role, role), f"{t['max_ulp']:.4g}", f"{t['mean_ulp']:.3g}",
                             f"{t['correctly_rounded']}/{t['entries']}",
                             "—" if f is None else f"{f['count']} ({f['axis']} rows)"))
    if not rows:
        return None
    return Table("", ("shard", "tensor", "max ulp", "mean ulp", "correctly rounded", "failing rows"), tuple(rows),
                 numeric=(False, False, True, True, True, True))


def _worst(r: "RunReport") -> Table | None:
    found = []
    for h in r.heads:
        for role, t in (h.get("tensors") or {}).items():
            for w in t["worst"]:
                found.append((abs(float(w["ulps"])), h["shard"], role, w, t["reference"]))
    if not found:
        return None
    found.sort(key=lambda x: (-x[0], x[1], x[2]))
    rows = tuple((shard, ROLE_NAMES.get(role, role), str(w["index"]), w.get("shown", w["float"]), w["exact"], w["ulps"],
                  w.get("relative") or "—", ", ".join(w.get("pattern") or []) or "—")
                 for _, shard, role, w, ref in found[:WORST_SHOWN])
    return Table("exact values and errors certified", ("shard", "tensor", "entry", "kernel", "exact", "error (ulp)", "relative",
                                     "row pattern"), rows,
                 numeric=(False, False, False, True, True, True, True, False), prose=7)


def _runs(runs: list[list[int]], most: int = 6) -> str:
    shown = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs[:most])
    return shown + (f", … ({len(runs) - most} more runs in summary.json)" if len(runs) > most else "")


def _by_pattern(r: "RunReport") -> tuple[Table, ...]:
    """Every failing row's pattern: over the whole dump (which patterns fail, in how many heads),
    then head by head (at most ROW_GROUPS_SHOWN lines here; summary.json has every one)."""
    total: dict[tuple[str, str], list[Any]] = {}
    lines = []
    incomplete = False
    for h in r.failing:
        for role, t in h["tensors"].items():
            f = t.get("failing_rows")
            if not t.get("exceeds") or not f:
                continue
            incomplete |= not f["complete"]
            for name, g in f["patterns"].items():
                agg = total.setdefault((role, name), [0, 0, 0, 0.0])
                agg[0] += g["count"]
                agg[1] += g["of"]
                agg[2] += 1
                agg[3] = max(agg[3], g["max_ulp"])
                lines.append((h["shard"], ROLE_NAMES.get(role, role), name, f"{g['count']} of {g['of']}",
                              f"{g['max_ulp']:.4g}", _runs(g["rows"])))
    if not total:
        return ()
    order = {n: k for k, n in enumerate(QUERY + KEY + (NONE,))}
    rows = tuple((ROLE_NAMES.get(role, role), name, str(n), str(of), str(heads), f"{top:.4g}")
                 for (role, name), (n, of, heads, top) in sorted(total.items(), key=lambda x: (
                     list(ROLE_NAMES).index(x[0][0]) if x[0][0] in ROLE_NAMES else 99, order.get(x[0][1], 99))))
    note = "; rows under 0.5 ulp are not kept, so a gate below 0.5 lists only the rows over it" if incomplete else ""
    dump = Table("failing rows per hard-case pattern, every failing head",
                 ("tensor", "pattern", "failing rows", "of", "heads", "worst ulp"), rows,
                 numeric=(False, False, True, True, True, True),
                 legend="a row matching several patterns counts in each; of: the failing heads' rows with the "
                        f"pattern (dK and dV: key rows){note}")
    shown = tuple(lines[:ROW_GROUPS_SHOWN])
    more = f" (the first {ROW_GROUPS_SHOWN} of {len(lines)}; summary.json has them all)" if len(lines) > ROW_GROUPS_SHOWN else ""
    heads = Table(f"each failing head's failing rows by pattern{more}",
                  ("shard", "tensor", "pattern", "failing rows", "worst ulp", "rows"), shown,
                  numeric=(False, False, False, True, True, False), prose=5)
    return dump, heads


def build_run_document(report: "RunReport") -> Report:
    """The run's report as a document (index.html, the text listing)."""
    sections = [_summary(report)]
    roles = sorted({role for h in report.heads for role in (h.get("tensors") or {})},
                   key=lambda x: list(ROLE_NAMES).index(x) if x in ROLE_NAMES else 99)
    heat = tuple(t for role in roles if (t := _heat(report, role)) is not None)
    if heat:
        sections.append(Section("heatmap", "Worst error per layer and head", heat))
    for key, title, table in (("histograms", "Errors in ulps", _histograms(report)),
                              ("failing", "Failing heads", _failing(report)),
                              ("worst", "Worst entries", _worst(report))):
        if table is not None:
            sections.append(Section(key, title, (table,)))
        if key == "failing" and (grouped := _by_pattern(report)):
            sections.append(Section("patterns", "Failing rows by hard-case pattern", grouped))
    if report.bad:
        sections.append(Section("bad", "Bad shards (refused; the others were checked)", (Table(
            "", ("shard", "error"), tuple((h["shard"], h["error"]) for h in report.bad), prose=1),)))
    return Report(f"floatref-run: {report.dump}", tuple(sections),
                  meta={"kind": "floatref-run", "status": report.status}, show_title=True)
