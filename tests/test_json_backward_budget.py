"""The JSON view of a backward problem has a budget (symattn.limits.MAX_JSON_BACKWARD_TERMS).

The exact strings of the backward steps grow like n·m²·d (every weight is written with its
row's denominator, and d_V, d_K sum over every row): 16 × 16 with d = 16 took 39 s for
4.3 MB, and a 64-token problem would run for hours before MAX_JSON_BYTES could stop it.  So
their terms are counted from the shapes before any gradient is built, and past the cap
``explain --format json`` refuses with one line, exit 2, nothing written; ``--decimal-only``
(the certified decimals, from arb matrix products) still works at any size the problem caps allow.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import symattn as sa
from symattn import limits
from symattn.document import trace_json
from symattn.errors import ProblemError
from symattn.examples import load_example
from symattn.trace.backward import BACKWARD_STEP_ORDER
from clirun import cli

BACKWARD_NAMES = {step.value for step in BACKWARD_STEP_ORDER}


def _matrix(rng: random.Random, rows: int, cols: int) -> list[list[str]]:
    return [[str(rng.randint(-9, 9) / 10) for _ in range(cols)] for _ in range(rows)]


def _problem(n: int, m: int, d: int, seed: int = 0, **extra) -> sa.Problem:
    rng = random.Random(seed)
    extra.setdefault("backward", {"loss": "sum"})
    return sa.Problem(Q=_matrix(rng, n, d), K=_matrix(rng, m, d), V=_matrix(rng, m, d), **extra)


def _built_gradients(trace: sa.Trace) -> int:
    """Exact backward entries made so far (the memo of symattn.trace.backward)."""
    return sum(len(v) for k, v in vars(trace.backward).items() if k.startswith("_memo_"))


def test_the_cap_is_exact_at_the_edge_and_refuses_before_any_gradient(monkeypatch):
    trace = sa.Trace(_problem(4, 4, 2))
    terms = trace_json.backward_json_terms(trace)
    monkeypatch.setattr(limits, "MAX_JSON_BACKWARD_TERMS", terms - 1)
    with pytest.raises(ProblemError, match="MAX_JSON_BACKWARD_TERMS") as refused:
        trace_json.render_json(trace, 3)
    assert f"{terms:,} exponential terms" in str(refused.value) and "--decimal-only" in str(refused.value)
    assert _built_gradients(trace) == 0            # refused from the shapes alone
    monkeypatch.setattr(limits, "MAX_JSON_BACKWARD_TERMS", terms)
    data = json.loads(trace_json.render_json(trace, 3))
    assert data["steps"]["d_K"]["exact"][0][0] and _built_gradients(trace) > 0
    # --decimal-only spells no exact gradient: no such cap
    monkeypatch.setattr(limits, "MAX_JSON_BACKWARD_TERMS", 0)
    assert "exact" not in json.loads(trace_json.render_json(trace, 3, decimal_only=True))["steps"]["d_K"]


CASES = {
    "plain, loss sum": dict(n=6, m=6, d=3),
    "cross-attention, half-squared error": dict(
        n=4, m=7, d=2, backward={"loss": "half-squared-error", "target": [["0.5", "0"]] * 4}),
    "causal, dO given": dict(n=6, m=6, d=4, mask="causal", backward={"grad_output": [[1, 0, -1, 2]] * 6}),
    "a sink": dict(n=5, m=5, d=2, sink="1/2"),
    "projected (the example)": None,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_count_follows_what_is_written(name):
    """The count stands for bytes: 4 to 40 bytes of exact strings a term (5 to 21 measured)."""
    case = CASES[name]
    if case is None:
        trace = sa.Trace(load_example("backward"))
    else:
        case = dict(case)
        trace = sa.Trace(_problem(case.pop("n"), case.pop("m"), case.pop("d"), **case))
    data = json.loads(trace_json.render_json(trace, 3))
    written = sum(len(json.dumps(step["exact"])) for key, step in data["steps"].items() if key in BACKWARD_NAMES)
    terms = trace_json.backward_json_terms(trace)
    assert 4 * terms <= written <= 40 * terms, (terms, written)


def test_a_large_backward_problem_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path):
    rng = random.Random(1)
    n, d = 64, 16
    text = "".join(f"{name} = {json.dumps(_matrix(rng, n, d))}\n" for name in ("Q", "K", "V"))
    path = tmp_path / "big.toml"
    path.write_text(text + 'backward = { loss = "sum" }\n', encoding="utf-8")
    out = tmp_path / "o.json"
    done = cli("explain", str(path), "--format", "json", "-o", str(out))
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("symattn: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "MAX_JSON_BACKWARD_TERMS" in done.stderr and "--decimal-only" in done.stderr
    assert not out.exists()
    done = cli("explain", str(path), "--format", "json", "--decimal-only", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["steps"]["d_K"]["shape"] == [n, d] and "exact" not in data["steps"]["d_K"]
