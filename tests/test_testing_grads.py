"""The backward gate (issue 21, scope 6): ``assert_attention_grads_close`` accepts a right float64
backward and rejects deliberately wrong ones written here (dK without its transpose, D forgotten,
the scale missing, top-left where bottom-right was asked), with messages that name the worst
entries, their exact values, a histogram and the rows' conditioning.

The kernels are plain numpy float64 backward passes written for the test from the formulas
(P = softmax(s·Q·Kᵀ), dV = Pᵀ·dO, dP = dO·Vᵀ, D = rowsum(dO∘O), dS = P∘(dP − D), dQ = s·dS·K,
dK = s·dSᵀ·Q); the exact values they are judged against are checked independently in
tests/test_floatref_backward.py and tests/test_floatref_conditional.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

from symattn.floatref.errors import FloatRefError
from symattn.testing import AttentionGradsMismatch, assert_attention_grads_close


def backward(Q, K, V, dO, *, causal=None, bug=None, dtype=np.float64):
    """A float64 backward; ``bug`` one of 'no-transpose', 'no-D', 'no-scale'; ``causal`` an alignment."""
    Q, K, V, dO = (x.astype(np.float64) for x in (Q, K, V, dO))
    s = 1 / np.sqrt(Q.shape[-1])
    t = s * Q @ np.swapaxes(K, -1, -2)
    if causal is not None:
        L, S = t.shape[-2:]
        t = np.where(np.tril(np.ones((L, S), bool), k=0 if causal == "top_left" else S - L), t, -np.inf)
    P = np.exp(t - t.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    O = P @ V  # noqa: E741
    dV = np.swapaxes(P, -1, -2) @ dO
    dP = dO @ np.swapaxes(V, -1, -2)
    D = 0.0 if bug == "no-D" else (dO * O).sum(-1, keepdims=True)
    dS = P * (dP - D)
    k = 1.0 if bug == "no-scale" else s
    dQ = k * dS @ K
    dK = k * (dS @ Q if bug == "no-transpose" else np.swapaxes(dS, -1, -2) @ Q)
    return dQ.astype(dtype), dK.astype(dtype), dV.astype(dtype)


def _inputs(L=4, S=4, E=3, seed=0, heads=2):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((heads, L, E)), rng.standard_normal((heads, S, E)),
            rng.standard_normal((heads, S, 2)), rng.standard_normal((heads, L, 2)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_right_float64_backward_passes(seed):
    Q, K, V, dO = _inputs(seed=seed)
    report = assert_attention_grads_close(*backward(Q, K, V, dO), Q, K, V, dO, max_ulp=8)
    assert report.fmt == "float64" and all(m <= 8.5 for m in report.max_ulps.values())
    assert sum(report.histograms["dQ"]) == Q.size


def test_a_right_float32_backward_passes_and_a_causal_one():
    Q, K, V, dO = (x.astype(np.float32) for x in _inputs(L=3, S=5, seed=4))
    grads = backward(Q, K, V, dO, causal="bottom_right", dtype=np.float32)
    assert_attention_grads_close(*grads, Q, K, V, dO, is_causal=True, causal_align="bottom_right", max_ulp=2)


@pytest.mark.parametrize("bug, what", [("no-transpose", "dK"), ("no-D", "dQ"), ("no-scale", "dQ")])
def test_wrong_backwards_are_rejected(bug, what):
    Q, K, V, dO = _inputs()
    with pytest.raises(AttentionGradsMismatch) as info:
        assert_attention_grads_close(*backward(Q, K, V, dO, bug=bug), Q, K, V, dO, max_ulp=8)
    text = str(info.value)
    assert f"- {what}: " in text and "worst entries" in text and "κ_row = " in text
    assert re.search(rf"{what}\[\d, \d, \d\]: got -?[\d.e+-]+, exact -?[\d.e+-]+, correctly rounded", text)
    assert f"{what} |distance| in ulps of scale: " in text
    if bug == "no-transpose":
        assert "- dQ" not in text and "- dV" not in text     # only dK is wrong


def test_the_exact_value_shown_is_the_reference():
    Q, K, V, dO = _inputs(seed=3)
    with pytest.raises(AttentionGradsMismatch) as info:
        assert_attention_grads_close(*backward(Q, K, V, dO, bug="no-scale"), Q, K, V, dO, worst=1)
    m = re.search(r"(dQ\[(\d), (\d), (\d)\]): got (\S+), exact (\S+), correctly rounded (\S+);", str(info.value))
    index = tuple(int(m.group(k)) for k in (2, 3, 4))
    right = backward(Q, K, V, dO)[0][index]
    assert float(m.group(6)) == pytest.approx(right, rel=1e-14)        # the exact value, 20 digits
    assert float(m.group(7)) == pytest.approx(right, rel=1e-15)
    assert float(m.group(5)) == pytest.approx(right * np.sqrt(3), rel=1e-15)   # the kernel's, unscaled


def test_top_left_where_bottom_right_was_asked_is_rejected_and_named():
    Q, K, V, dO = _inputs(L=3, S=5, seed=5)
    grads = backward(Q, K, V, dO, causal="top_left")
    with pytest.raises(AttentionGradsMismatch, match="the kernel aligns the causal diagonal top-left"):
        assert_attention_grads_close(*grads, Q, K, V, dO, is_causal=True, causal_align="bottom_right")
    assert_attention_grads_close(*grads, Q, K, V, dO, is_causal=True, causal_align="top_left")


def test_shapes_transposes_and_nan_are_named():
    Q, K, V, dO = _inputs(L=4, S=5)
    dq, dk, dv = backward(Q, K, V, dO)
    with pytest.raises(AttentionGradsMismatch, match=r"dK has shape \(2, 3, 5\), but the gradient's is "
                                                     r"\(2, 5, 3\) \(the transpose's shape"):
        assert_attention_grads_close(dq, np.swapaxes(dk, -1, -2), dv, Q, K, V, dO)
    dv = dv.copy()
    dv[1, 2, 0] = np.nan
    with pytest.raises(AttentionGradsMismatch, match=r"dV: 1 entries are inf or NaN, first at \[1, 2, 0\]"):
        assert_attention_grads_close(dq, dk, dv, Q, K, V, dO)
    with pytest.raises(FloatRefError, match="ulp_scale is 'row'"):
        assert_attention_grads_close(dq, dk, dv, Q, K, V, dO, ulp_scale="row")


def test_entry_ulps_are_stricter_than_the_scale():
    """The default measures in ulps of each entry's scale: a right float64 backward that cancels
    fails ulps of the entry itself (its relative error near a small entry is large)."""
    for seed in range(6):
        Q, K, V, dO = _inputs(seed=seed, L=6, S=5, E=4)
        grads = backward(Q, K, V, dO)
        assert_attention_grads_close(*grads, Q, K, V, dO, max_ulp=8)
        try:
            assert_attention_grads_close(*grads, Q, K, V, dO, max_ulp=8, ulp_scale="entry")
        except AttentionGradsMismatch as err:
            assert "ulp from the correctly rounded value" in str(err)
            return
    raise AssertionError("no seed made a cancelling entry")


class FakeTensor:
    """Duck-typed as a torch tensor on a device (torch is not installed here)."""

    def __init__(self, a):
        self.a, self.dtype = a, f"torch.{a.dtype}"

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a


def test_torch_like_tensors_and_the_conditional_reference():
    """The kernel's own float32 forward O and lse, given: its float64 backward from them passes
    the conditional gate at 2 ulp, and the gradient-level gate sees a different reference."""
    Q, K, V, dO = (x.astype(np.float32) for x in _inputs(seed=6))
    s = 1 / np.sqrt(3)
    t = s * Q.astype(np.float64) @ np.swapaxes(K, -1, -2)
    lse = np.log(np.exp(t).sum(-1)).astype(np.float32)
    P = np.exp(t - lse.astype(np.float64)[..., None])
    O = (P @ V).astype(np.float32)  # noqa: E741
    dP = dO.astype(np.float64) @ np.swapaxes(V, -1, -2)
    dS = P * (dP - (dO * O.astype(np.float64)).sum(-1, keepdims=True))
    grads = [(s * dS @ K).astype(np.float32), (s * np.swapaxes(dS, -1, -2) @ Q).astype(np.float32),
             (np.swapaxes(P, -1, -2) @ dO).astype(np.float32)]
    tensors = [FakeTensor(x) for x in grads + [Q, K, V, dO]]
    report = assert_attention_grads_close(*tensors, given={"out": FakeTensor(O), "lse": lse}, max_ulp=2)
    assert report.reference.conditional and report.fmt == "float32"


def test_gqa_kernels_judged_without_given():
    """A GQA backward (2 query heads per kv head; dK, dV summed over each group) passes; the
    same kernel with the scale missing fails, its worst dK entries certified from the summed balls."""
    Q, _, _, dO = _inputs(heads=4, seed=7)
    _, K, V, _ = _inputs(heads=2, seed=8)

    def gqa(bug=None):
        dq, dk, dv = backward(Q, np.repeat(K, 2, 0), np.repeat(V, 2, 0), dO, bug=bug)
        return dq, dk.reshape(2, 2, 4, 3).sum(1), dv.reshape(2, 2, 4, 2).sum(1)

    assert_attention_grads_close(*gqa(), Q, K, V, dO, enable_gqa=True)
    with pytest.raises(AttentionGradsMismatch) as info:
        assert_attention_grads_close(*gqa("no-scale"), Q, K, V, dO, enable_gqa=True)
    right = gqa()[1]
    m = re.search(r"dK\[(\d), (\d), (\d)\]: got \S+, exact (\S+),", str(info.value))
    assert float(m.group(4)) == pytest.approx(right[tuple(int(m.group(k)) for k in (1, 2, 3))], rel=1e-13)
