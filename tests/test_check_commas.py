"""symattn check: figures written with decimal commas, read by the rule grade uses.

The right values are an independent float64 computation of the lesson
(hand-typed inputs), rounded half up with Python's decimal module and written
with decimal commas; the ambiguous edges (a lone "0,5"; "1,2" for one entry
and for two; commas mixed with decimal commas; neither reading fitting) are
tried at both sizes of target.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest

from symattn.check.figfile import load_figures
from symattn.cli import main

X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
W_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], float)
W_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], float)
W_v = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], float)
Q, K, V = X @ W_q, X @ W_k, X @ W_v
Z = Q @ K.T / np.sqrt(3)
E = np.exp(Z - Z.max(axis=1, keepdims=True))
WEIGHTS = E / E.sum(axis=1, keepdims=True)
OUTPUT = WEIGHTS @ V


def comma(x: float, places: int) -> str:
    return str(Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)).replace(".", ",")


def verdicts(tmp_path: Path, figures: list[tuple[str, str]]):
    body = 'example = "i-love-cats"\n' + "".join(
        f'[[figure]]\ntarget = "{t}"\ntext = """{x}"""\n' for t, x in figures)
    path = tmp_path / "figures.toml"
    path.write_text(body, encoding="utf-8")
    return load_figures(path).check()


def test_a_row_with_decimal_commas_and_semicolons_is_right(tmp_path):
    row = "; ".join(comma(w, 3) for w in WEIGHTS[0])
    assert row == "0,136; 0,432; 0,432"
    out_row = "; ".join(comma(o, 2) for o in OUTPUT[1])
    [v, w] = verdicts(tmp_path, [("weights[I]", row), ("output[love]", out_row)])
    assert v.code == "rounded" and [e.written for e in v.entries] == ["0.136", "0.432", "0.432"]
    assert w.code == "rounded"


def test_a_matrix_with_decimal_commas_rows_by_lines(tmp_path):
    text = "\n".join("; ".join(comma(w, 2) for w in row) for row in WEIGHTS)
    [v] = verdicts(tmp_path, [("weights", text)])
    assert v.code == "rounded" and len(v.entries) == 9


def test_a_lone_decimal_comma_for_one_entry(tmp_path):
    [v] = verdicts(tmp_path, [("weights[I, I]", comma(WEIGHTS[0, 0], 3))])
    assert v.code == "rounded" and v.message.startswith("0.136 is weights[I, I]")


def test_percent_with_decimal_commas(tmp_path):
    text = "; ".join(comma(100 * w, 1) + "%" for w in WEIGHTS[0])
    assert text == "13,6%; 43,2%; 43,2%"
    [v] = verdicts(tmp_path, [("weights[I]", text)])
    assert v.code == "rounded"


def test_a_named_mistake_through_decimal_commas(tmp_path):
    """The unscaled weights (no √d_k), written with decimal commas, are named as the mistake."""
    Zu = Q @ K.T
    Eu = np.exp(Zu - Zu.max(axis=1, keepdims=True))
    unscaled = (Eu / Eu.sum(axis=1, keepdims=True))[0]
    [v] = verdicts(tmp_path, [("weights[I]", "; ".join(comma(w, 3) for w in unscaled))])
    assert v.code == "mistake" and v.mistake == "unscaled"


def test_the_target_decides_a_lone_comma(tmp_path):
    """'1,2' for one entry is the decimal 1.2 (here the scaled score, named as the mistake of
    giving another step's value); '2,4,4' for three entries is three integers, also in an
    expression target."""
    one, three, expr = verdicts(tmp_path, [("weights[I, I]", "1,2"), ("scores[I]", "2,4,4"),
                                           ("scores[I] - scores[I, I] + 2", "2,4,4")])
    assert round(Z[0, 0], 1) == 1.2
    assert one.code == "mistake" and one.mistake == "wrong-step" and "1.2 is what" in one.message
    assert three.code == "exact" and [e.written for e in three.entries] == ["2", "4", "4"]
    assert expr.code == "exact"


def test_one_comma_two_readings_by_size(tmp_path):
    """'0,5' is the decimal 0.5 for one entry and the two entries 0 and 5 for two."""
    from symattn.check.spreadsheet import figure_commas

    assert figure_commas("0,5", 1, "x") == "0.5"
    assert figure_commas("0,5", 2, "x") == "0,5"
    assert figure_commas("0,5; 1,5", 2, "x") == "0.5, 1.5"
    assert figure_commas("1,2; 3,4", 4, "x") == "1,2; 3,4"      # a 2×2 matrix of integers
    assert figure_commas("0.136, 0.432", 2, "x") == "0.136, 0.432"
    assert figure_commas("2,4,4", 3, "x") == "2,4,4"


@pytest.mark.parametrize("text, words", [
    ("0,136, 0,432, 0,432", "mixes decimal commas with commas between entries"),
    ("0,5; 0,25", "has 4 entries with commas between them, or 2 with decimal commas, but "
                  "weights[I] has 3"),
])
def test_ambiguous_commas_are_a_clear_invalid(tmp_path, text, words):
    [v] = verdicts(tmp_path, [("weights[I]", text)])
    assert v.code == "invalid" and words in v.message and "shape" not in v.message


def test_cli_exit_and_one_line_per_figure(tmp_path, capsys):
    path = tmp_path / "f.toml"
    path.write_text('example = "i-love-cats"\n[[figure]]\ntarget = "weights[I]"\n'
                    'text = "0,136; 0,432; 0,432"\n', encoding="utf-8")
    assert main(["check", str(path)]) == 0
    assert "0.136, 0.432, 0.432" in capsys.readouterr().out
    path.write_text('example = "i-love-cats"\n[[figure]]\ntarget = "weights[I]"\n'
                    'text = "0,5; 0,25"\n', encoding="utf-8")
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "decimal commas" in out and "Traceback" not in out
