"""The run's report: every head's verdict against --max-ulp, as data (summary.json's contract).

A tensor fails when its largest error, less its resolution, exceeds ``max_ulp`` (the
errors are proved to within the resolution: ``ULPReport.exceeds``'s rule).  The report
holds no timings, so a serial run and a Dask run of the same dump give the same
``heads``, entry for entry; how the run went (engine, computed, reused) is under ``run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from symattn.floatrun.dump import BadShard
from symattn.floatrun.patterns import failing_rows, merge_over
from symattn.floatrun.runner import Outcome

KIND = "symattn floatref-run"
_HEAD_KEYS = ("shard", "layer", "head", "status", "dtype", "causal", "rows", "tensors", "error")


def exceeds(tensor: dict[str, Any], max_ulp: float | None) -> bool:
    return max_ulp is not None and tensor["max_ulp"] - tensor["resolution"] > max_ulp


@dataclass(frozen=True)
class RunReport:
    """What ``floatref-run`` found: per head, per tensor; the bad shards; the verdict."""

    dump: str
    options: dict[str, Any]
    max_ulp: float | None
    heads: tuple[dict[str, Any], ...]
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def bad(self) -> list[dict[str, Any]]:
        return [h for h in self.heads if h["status"] != "ok"]

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [h for h in self.heads if h["status"] == "ok" and h["exceeds"]]

    @property
    def status(self) -> int:
        """0 every head within max_ulp, 1 some head over it, 2 some shard was bad input."""
        return 2 if self.bad else 1 if self.failing else 0

    @property
    def verdict(self) -> str:
        return {0: "pass", 1: "fail", 2: "bad input"}[self.status]

    def worst(self) -> dict[str, Any] | None:
        """The head and tensor with the largest error."""
        best = None
        for h in self.heads:
            for role, t in (h.get("tensors") or {}).items():
                if best is None or t["max_ulp"] > best[2]["max_ulp"]:
                    best = (h, role, t)
        return None if best is None else {"shard": best[0]["shard"], "tensor": best[1],
                                          "max_ulp": best[2]["max_ulp"]}

    def histograms(self) -> dict[str, list[int]]:
        """Counts per |error| bin, summed over the heads, per tensor."""
        out: dict[str, list[int]] = {}
        for h in self.heads:
            for role, t in (h.get("tensors") or {}).items():
                got = out.setdefault(role, [0] * len(t["histogram"]))
                out[role] = [a + b for a, b in zip(got, t["histogram"])]
        return out

    def to_json(self) -> dict[str, Any]:
        from symattn.floatref.ulp import BIN_EDGES

        bins = [f"({lo:g}, {hi:g}]" if lo else f"[0, {hi:g}]" for lo, hi in zip(BIN_EDGES, BIN_EDGES[1:])]
        return {"kind": KIND, "dump": self.dump, "options": self.options, "max_ulp": self.max_ulp,
                "verdict": self.verdict,
                "shards": {"total": len(self.heads), "ok": len(self.heads) - len(self.bad),
                           "failing": len(self.failing), "bad": len(self.bad)},
                "worst": self.worst(), "bins": bins, "histograms": self.histograms(),
                "heads": list(self.heads), "run": self.run}

    def end_line(self, where: str | None = None) -> str:
        """The one line a run ends with."""
        w = self.worst()
        worst = f"; max {w['max_ulp']:.4g} ulp ({w['tensor']} of {w['shard']})" if w else ""
        gate = "" if self.max_ulp is None else f" over --max-ulp {self.max_ulp:g}"
        done, heads = self.run.get("computed", 0) + self.run.get("reused", 0), len(self.heads)
        count = f"{heads} heads in {done} shards" if done > heads else f"{heads} shards"   # --blocks
        return (f"floatref-run: {self.verdict.upper()}: {count} ({self.run.get('computed', 0)} "
                f"computed, {self.run.get('reused', 0)} reused), {len(self.failing)} failing{gate}, "
                f"{len(self.bad)} bad{worst}" + (f"; report in {where}" if where else ""))


def _head(result: dict[str, Any], max_ulp: float | None) -> dict[str, Any]:
    head = {k: result[k] for k in _HEAD_KEYS if k in result}
    tensors: dict[str, dict[str, Any]] = {role: dict(t) for role, t in (head.get("tensors") or {}).items()}
    if "tensors" in head:
        head["tensors"] = tensors
    for t in tensors.values():
        t["exceeds"] = exceeds(t, max_ulp)
        over = t.pop("rows_over", None)          # the shard's kept rows: the report keeps those over the gate
        if max_ulp is not None and over is not None:
            t["failing_rows"] = failing_rows(over, t["resolution"], result.get("patterns"), max_ulp)
    head["exceeds"] = any(t["exceeds"] for t in tensors.values())
    head["max_ulp"] = max((t["max_ulp"] for t in tensors.values()), default=None)
    return head


def _merge_tensors(parts: list[dict[str, Any]], worst: int) -> dict[str, Any]:
    """One tensor's summary over a head's row blocks (each entry is in exactly one block)."""
    entries = sum(t["entries"] for t in parts)
    found = sorted((w for t in parts for w in t["worst"]), key=lambda w: -abs(float(w["ulps"])))
    return {"entries": entries, "max_ulp": max(t["max_ulp"] for t in parts),
            "mean_ulp": sum(t["mean_ulp"] * t["entries"] for t in parts) / entries if entries else 0.0,
            "resolution": max(t["resolution"] for t in parts),
            "correctly_rounded": sum(t["correctly_rounded"] for t in parts),
            "histogram": [sum(c) for c in zip(*(t["histogram"] for t in parts))],
            "skipped_rows": sum(t["skipped_rows"] for t in parts), "reference": parts[0]["reference"],
            "worst": found[:worst], "rows_over": merge_over([t["rows_over"] for t in parts])}


def merge_blocks(results: list[dict[str, Any]], worst: int) -> list[dict[str, Any]]:
    """The row blocks of each head as one head (a bad block makes its head bad)."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["layer"], r["head"]), []).append(r)
    out = []
    for (layer, head), parts in groups.items():
        if len(parts) == 1:
            out.append(parts[0])
            continue
        base = {"shard": f"L{layer}.H{head}", "layer": layer, "head": head}
        bad = [p for p in parts if p["status"] != "ok"]
        if bad:
            out.append({**base, "status": "bad", "error": bad[0]["error"]})
            continue
        live = [p for p in parts if p["tensors"]]     # a block past the last row has no tensors
        roles = [role for role in (live[0]["tensors"] if live else {}) if all(role in p["tensors"] for p in live)]
        out.append({**base, "status": "ok", "dtype": parts[0]["dtype"], "causal": parts[0]["causal"],
                    "patterns": live[0]["patterns"] if live else None,
                    "rows": {"rule": f"{len(parts)} row blocks", "count": sum(p["rows"]["count"] for p in parts),
                             "of": parts[0]["rows"]["of"]},
                    "tensors": {role: _merge_tensors([p["tensors"][role] for p in live], worst) for role in roles}})
    return out


def build_report(dump: str, options: dict[str, Any], max_ulp: float | None, outcome: Outcome,
                 refused: list[BadShard]) -> RunReport:
    """The report of a run: its shards' results and the files refused while planning."""
    merged = merge_blocks(outcome.results, int(options.get("worst", 5)))
    heads = [_head(dict(r), max_ulp) for r in merged]
    for b in refused:
        layer, head = (int(x) for x in b.name[1:].split(".H"))
        heads.append({"shard": b.name, "layer": layer, "head": head, "status": "bad", "error": b.error,
                      "exceeds": False, "max_ulp": None})
    heads.sort(key=lambda h: (h["layer"], h["head"]))
    run = {"engine": outcome.ran_on, "computed": outcome.computed, "reused": outcome.reused}
    if outcome.dashboard:
        run["dashboard"] = outcome.dashboard
    if outcome.blocks is not None:
        run["blocks"] = outcome.blocks
    if outcome.shipped:
        run["inputs"] = "read by the client and sent to the workers"
    return RunReport(dump, options, max_ulp, tuple(heads), run)
