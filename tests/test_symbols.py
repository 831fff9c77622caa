"""Symbols as inputs: steps become formulas, and no ordering is assumed."""

import pytest
import sympy

import symattn as sa
from symattn.problem.matrix import symbol_matrix


def test_weights_are_formulas_of_the_symbols():
    q, k = symbol_matrix("q", 2, 2), symbol_matrix("k", 2, 2)
    trace = sa.attend(sa.Problem(Q=q, K=k, V=[[1, 0], [0, 1]]))
    s00 = (q[0, 0] * k[0, 0] + q[0, 1] * k[0, 1]) / sympy.sqrt(2)
    s01 = (q[0, 0] * k[1, 0] + q[0, 1] * k[1, 1]) / sympy.sqrt(2)
    expected = sympy.exp(s00) / (sympy.exp(s00) + sympy.exp(s01))
    assert sympy.simplify(trace.weights[0, 0] - expected) == 0
    # the row maximum is left open, and said to be
    assert trace.engine.open_rows == (0, 1)
    assert trace.shifted[0, 0].has(sympy.Max)
    # the formula specialises to the numbers
    values = {q[0, 0]: 1, q[0, 1]: 0, k[0, 0]: 2, k[0, 1]: 5, k[1, 0]: 0, k[1, 1]: 1}
    numeric = trace.weights[0, 0].subs(values)
    assert sympy.simplify(numeric - 1 / (1 + sympy.exp(-sympy.sqrt(2)))) == 0


def test_assumptions_decide_the_maximum_when_they_can():
    a = sympy.Symbol("a", positive=True)
    trace = sa.attend(sa.Problem(Q=[[a, 0]], K=[[1, 0], [0, 1]], V=[[1], [2]], scale=1))
    assert trace.engine.rows[0].argmax == 0           # a > 0 = the other score
    assert trace.weights[0, 0] == 1 / (1 + sympy.exp(-a))


def test_names_in_files_must_be_declared():
    text = 'Q = [["a", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n'
    with pytest.raises(sa.SymattnError, match="unknown name 'a' in Q\\[0\\]\\[0\\]"):
        sa.Problem.from_toml_text(text)
    with pytest.raises(sa.SymattnError, match="'a', which is not declared"):
        sa.Problem.from_toml_text('symbols = ["b"]\n' + text)
    problem = sa.Problem.from_toml_text('symbols = ["a"]\n' + text)
    assert {str(x) for x in problem.free_symbols} == {"a"}


def test_no_decimals_for_symbols_but_subs_gives_numbers():
    problem = sa.Problem.from_toml_text(
        'symbols = ["a"]\nQ = [["a", 1]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\nscale = 1\n')
    trace = sa.attend(problem)
    assert [str(d) for d in trace.V.decimals(3)[1]] == ["2"]     # V has no symbols
    with pytest.raises(sa.CertificationError, match="depends on the symbols a"):
        trace.weights.decimals(3)
    numeric = sa.attend(problem.subs({"a": 3}))
    # weights = e^3 / (e^3 + e^1) = 1 / (1 + e^-2)
    assert str(numeric.weights.decimal(0, 0, 6)) == "0.880797"


def test_text_view_shows_symbolic_steps_exactly():
    from symattn.document.trace_text import render_text

    q, k = symbol_matrix("q", 1, 2), symbol_matrix("k", 2, 2)
    text = render_text(sa.attend(sa.Problem(Q=q, K=k, V=[[1], [2]])))
    assert "Symbols: k00, k01, k10, k11, q00, q01" in text
    assert "The symbols leave the row maximum open" in text


def test_subs_keeps_the_mask_and_a_mask_reads_back():
    problem = sa.Problem.from_toml_text(
        'symbols = ["a"]\nQ = [["a", 1], [1, 0]]\nK = [[1, 0], [0, 1]]\nV = [[1], [2]]\n'
        'mask = "causal"\n')
    numeric = sa.attend(problem.subs({"a": 2}))
    assert [str(d) for d in numeric.weights.decimals(3)[0]] == ["1", "0"]
    # row 1: e^(1/√2) / (e^(1/√2) + 1)
    assert str(numeric.weights.decimal(1, 0, 4)) == "0.6698"  # 0.669761549...
    again = sa.Problem(Q=[[1], [2]], K=[[1], [1]], V=[[1], [2]], mask=problem.mask.tolist())
    assert again.mask.tolist() == [[1, 0], [1, 1]]
