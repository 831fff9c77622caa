"""The JSON view's exact strings read back, through sympify, to the exact values."""

import json

import pytest
import sympy

import symattn as sa
from symattn.document.trace_json import exact_strings, render_json

CASES = {
    "lesson": lambda: sa.load_example("i-love-cats"),
    "causal": lambda: sa.load_example("i-love-cats-causal"),
    "soft-dictionary": lambda: sa.load_example("soft-dictionary-sharpness-5"),
    "surds and a tie": lambda: sa.Problem(Q=[["sqrt(2)", "-1/3"], [0, 0]],
                                          K=[[1, 0], ["1/2", "3/4"], [0, 1]],
                                          V=[["-0.5", 2], [1, "sqrt(3)"], [0, "-7/4"]]),
}


def _same(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a == b:
        return True
    difference = sympy.simplify(a - b)
    return difference == 0


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_exact_strings_read_back_to_the_exact_values(case):
    trace = sa.attend(CASES[case]())
    for step in trace.steps:
        strings = exact_strings(trace, step)
        for i, row in enumerate(step.rows()):
            for j, value in enumerate(row):
                # sympify reads OUR output here, never user input
                assert _same(sympy.sympify(strings[i][j]), value), (step.name, i, j)


def test_json_document_shape():
    trace = sa.attend(CASES["causal"]())
    data = json.loads(render_json(trace, 4))
    assert data["mask"] == "causal" and data["digits"] == 4
    assert data["steps"]["masked"]["exact"][0][1] == "-oo"
    assert data["steps"]["weights"]["exact"][0] == ["1", "0", "0"]
    assert data["steps"]["row_sum"]["shape"] == [3, 1]
    assert data["steps"]["weights"]["decimal"][2] == ["0.007445", "0.7547", "0.2378"]
