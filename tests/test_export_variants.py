"""symattn export --to prairielearn on every variant (RoPE, ALiBi, soft-cap, sink, window,
tiles, decode) and every worksheet template: the question folder is written, its server.py
is imported from the folder and its generate/grade run as PrairieLearn calls them.

The outputs PrairieLearn compares against are cross-checked with an independent float64
computation of each variant written here from the problem file's own numbers (tomllib,
numpy); the question's labels are checked to be one per answer input.
"""

from __future__ import annotations

import importlib.util
import math
import tomllib
from decimal import ROUND_HALF_UP, Decimal
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from symattn.cli import main
from symattn.classroom.worksheets.templates import TEMPLATES
from symattn.examples import example_text

_ANGLES = {"pi/2": math.pi / 2, "pi/3": math.pi / 3, "pi/4": math.pi / 4, "pi/6": math.pi / 6}


def _fraction(text) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    num, _, den = str(text).partition("/")
    return float(num) / float(den or 1)


def _rotate(M: np.ndarray, thetas: list[float]) -> np.ndarray:
    """Interleaved RoPE: pair (2i, 2i+1) of row p turned by p·θ_i."""
    out = M.copy()
    for p in range(M.shape[0]):
        for i, theta in enumerate(thetas):
            c, s = math.cos(p * theta), math.sin(p * theta)
            x, y = M[p, 2 * i], M[p, 2 * i + 1]
            out[p, 2 * i], out[p, 2 * i + 1] = x * c - y * s, x * s + y * c
    return out


def float64_output(data: dict) -> np.ndarray:
    """Attention's output for a problem file's numbers, in float64, every variant here."""
    if "X" in data:
        X = np.array(data["X"], float)
        Q, K, V = (X @ np.array(data[w], float) for w in ("W_q", "W_k", "W_v"))
    else:
        Q, K, V = (np.array(data[k], float) for k in ("Q", "K", "V"))
    if "rope" in data:
        assert data["rope"]["layout"] == "interleaved"
        thetas = [_ANGLES[t] for t in data["rope"]["theta"]]
        Q, K = _rotate(Q, thetas), _rotate(K, thetas)
    n, m = Q.shape[0], K.shape[0]
    scale = _fraction(data["scale"]) if "scale" in data else 1 / math.sqrt(Q.shape[1])
    z = (Q @ K.T) * scale
    i, j = np.indices((n, m))
    allowed = np.ones((n, m), bool)
    if data.get("mask") == "causal" or "decode" in data:
        allowed = j <= i
    if isinstance(data.get("mask"), dict):
        allowed = (j <= i) & (j > i - data["mask"]["window"])
    if "alibi" in data:
        z = z - _fraction(data["alibi"]["slope"]) * (i - j)
    if "softcap" in data:
        c = float(data["softcap"])
        z = c * np.tanh(z / c)
    z = np.where(allowed, z, -np.inf)
    top = z.max(axis=1, keepdims=True)
    e = np.exp(z - top)
    total = e.sum(axis=1, keepdims=True)
    if "sink" in data:
        total = total + np.exp(float(data["sink"]) - top)
    return (e / total) @ V


def sig3(x: float) -> float:
    d = Decimal(repr(float(x)))
    if d == 0:
        return 0.0
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP))


def as_the_sheet_asks(x: float) -> str:
    """A right answer typed as the sheet asks, 3 significant digits with their trailing zeros
    (0.0500, not 0.05, which the sheet's rule calls right but coarser)."""
    d = Decimal(repr(float(x)))
    if d == 0:
        return "0"
    return format(d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_HALF_UP), "f")


class _Inputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag == "pl-matrix-component-input":
            self.inputs.append(dict(attrs))


def _server(folder: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"pl_variant_{name}", folder / "server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data(seed: int) -> dict:
    return {"params": {}, "correct_answers": {}, "submitted_answers": {}, "raw_submitted_answers": {},
            "format_errors": {}, "partial_scores": {}, "score": 0, "feedback": {},
            "variant_seed": seed, "options": {}}


def _outputs(correct: dict, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The output rows the question asks (``output``, or the decode steps' rows), and the
    reference's rows for them."""
    if "output" in correct:
        return np.array(correct["output"]), want
    asked = [t for t in range(want.shape[0]) if f"decode_{t}_output" in correct]
    assert asked
    return np.array([correct[f"decode_{t}_output"][0] for t in asked]), want[asked]


def _check_question(folder: Path, name: str, toml: str) -> None:
    data = tomllib.loads(toml)
    parser = _Inputs()
    parser.feed((folder / "question.html").read_text(encoding="utf-8"))
    server = _server(folder, name)
    generated = _data(7)
    server.generate(generated)
    correct = generated["correct_answers"]
    names = [a["answers-name"] for a in parser.inputs]
    assert names == list(correct), name           # one input per question, in order
    assert all(a["label"].startswith("$") and a["label"].endswith(" =$") and len(a["label"]) > 4
               for a in parser.inputs)
    got, want = _outputs(correct, float64_output(data))
    assert got.shape == want.shape, name
    assert np.array_equal(got, np.vectorize(sig3)(want)), (name, got, want)
    # grade: the right answers typed get no feedback; a wrong entry is judged, no traceback
    typed = _data(7)
    server.generate(typed)
    for step, matrix in correct.items():
        flat = [x for row in matrix for x in row]
        for k, x in enumerate(flat):
            typed["raw_submitted_answers"][f"{step}{k + 1}"] = as_the_sheet_asks(x)
    server.grade(typed)
    assert "symattn" not in typed["feedback"], typed["feedback"]
    first = next(iter(correct))
    typed["raw_submitted_answers"][f"{first}1"] = "123456"
    server.grade(typed)


VARIANTS = ["rope", "alibi", "softcap", "online-softmax", "kv-cache", "sliding-window",
            "off-by-one-softmax", "i-love-cats-causal"]


@pytest.mark.parametrize("example", VARIANTS)
def test_prairielearn_export_of_every_variant(tmp_path, example):
    out = tmp_path / "pl"
    assert main(["export", "--to", "prairielearn", "--example", example, "-o", str(out)]) == 0
    _check_question(out, example.replace("-", "_"), example_text(example))


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_prairielearn_export_of_every_template(tmp_path, template):
    sheets = tmp_path / "sheets"
    assert main(["worksheet", "--template", template, "-o", str(sheets)]) == 0
    out = tmp_path / "pl"
    assert main(["export", "--to", "prairielearn", str(sheets), "-o", str(out)]) == 0
    _check_question(out, "t_" + template.replace("-", "_"), TEMPLATES[template].toml)
