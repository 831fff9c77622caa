"""JSON exact strings are written simply (issue 25): tied exponentials combined, small algebraic
entries expanded, and each still reads back (sympify) to the engine's exact value."""

import sympy

import symattn as sa
from symattn.document.trace_json import exact_row


def test_tied_exponentials_are_combined_and_read_back():
    t = sa.attend(sa.Problem(Q=[[1], [0]], K=[[1], [1], [0]], V=[[1], [2], [3]]))
    assert exact_row(t, t.row_sum, 0) == ["2 + exp(-1)"]
    assert exact_row(t, t.output, 0) == ["(3 + 3*exp(-1))/(2 + exp(-1))"]
    for name in ("row_sum", "weights", "output"):
        step = t.step(name)
        for i in range(2):
            for j, text in enumerate(exact_row(t, step, i)):
                assert sympy.simplify(sympy.sympify(text) - step[i, j]) == 0, (name, i, j, text)


def test_small_algebraic_entries_are_expanded():
    t = sa.attend(sa.Problem(Q=[["sqrt(2)", "1"]], K=[["1/4", "1"]], V=[[1]], scale="1/2"))
    text = exact_row(t, t.scaled, 0)[0]
    assert text == "1/2 + sqrt(2)/8"
    assert sympy.sympify(text) == t.scaled[0, 0].expand()
