"""PyTorch autograd in float64 against the engine's certified gradients (issue 20, "Done means":
optional; skipped where torch is not installed).  Each problem's loss is built in torch from the
same plain numbers, ``backward()`` gives dQ, dK, dV (or dW_q, dW_k, dW_v), and each entry must lie
within float64's error of symattn's certified 15-digit decimal."""

from __future__ import annotations

import tomllib
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from symattn.numbers.certify import CertifiedDecimal, Rounding  # noqa: E402
from symattn.problem.problem import Problem  # noqa: E402
from symattn.trace.trace import Trace  # noqa: E402

PROBLEMS = {
    "given-dO": """tokens = ["I", "cats"]
Q = [[0, 1, 0, -1], [0, 1, -1, 0]]
K = [[-1, 1, 0, 1], [0, -1, 0, 0]]
V = [[0, 2], [1, 1]]
backward = { grad_output = [[1, -1], [1, 0]] }
""",
    "causal-sum": """tokens = ["a", "b", "c"]
mask = "causal"
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 1], [0, 1], [1, -1]]
V = [[1, 0, 2], [0, 1, 1], [1, 1, 0]]
backward = { loss = "sum" }
""",
    "projected-squared-error": """tokens = ["a", "b"]
X = [[1, 0], [1, 1]]
W_q = [[1, 0], [0, 1]]
W_k = [[0, 1], [1, -1]]
W_v = [[1, 2], [0, 1]]
backward = { loss = "half-squared-error", target = [[1, 0], ["1/2", 2]] }
""",
}


def tensor(rows) -> "torch.Tensor":
    return torch.tensor([[float(Fraction(str(x))) for x in row] for row in rows], dtype=torch.float64,
                        requires_grad=True)


def torch_gradients(data: dict) -> dict[str, "torch.Tensor"]:
    leaves = {k: tensor(data[k]) for k in ("X", "W_q", "W_k", "W_v", "Q", "K", "V") if k in data}
    if "X" in leaves:
        X = leaves["X"]
        Q, K, V = X @ leaves["W_q"], X @ leaves["W_k"], X @ leaves["W_v"]
    else:
        Q, K, V = leaves["Q"], leaves["K"], leaves["V"]
    z = Q @ K.T / Q.shape[1] ** 0.5
    if data.get("mask") == "causal":
        blocked = torch.triu(torch.ones_like(z, dtype=torch.bool), diagonal=1)
        z = z.masked_fill(blocked, float("-inf"))
    out = torch.softmax(z, dim=1) @ V
    b = data["backward"]
    if "grad_output" in b:
        out.backward(tensor(b["grad_output"]).detach())
    elif "target" in b:
        (0.5 * ((out - tensor(b["target"]).detach()) ** 2).sum()).backward()
    else:
        out.sum().backward()
    names = {"X": "d_X", "W_q": "d_W_q", "W_k": "d_W_k", "W_v": "d_W_v", "Q": "d_Q", "K": "d_K", "V": "d_V"}
    return {names[k]: t.grad for k, t in leaves.items() if k != "X"}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_autograd_float64_agrees_with_the_certified_gradients(name):
    text = PROBLEMS[name]
    trace = Trace(Problem.from_toml_text(text, source=name))
    grads = torch_gradients(tomllib.loads(text))
    assert grads
    for step, grad in grads.items():
        decimals = trace.step(step).decimals(Rounding(digits=15))
        for i, row in enumerate(decimals):
            for j, d in enumerate(row):
                assert isinstance(d, CertifiedDecimal)
                exact = float(d.as_fraction())
                assert abs(float(grad[i, j]) - exact) <= 1e-13 * max(1.0, abs(exact)), (name, step, i, j)
