"""The float64 enclosures of the backward (floatref/backfast.py, issue 21 scope 7).

Two checks: every enclosure [mid − rad, mid + rad] holds the exact entry (the recipe written in
mpmath at 60 digits, tests/test_floatref_conditional.py), and the references with the fast path
equal those without it (arb balls for every entry) bit for bit, on random and crafted problems."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from symattn.floatref import backfast
from symattn.floatref.backward import correctly_rounded_backward
from symattn.floatref.binary import BINARY_FORMATS
from symattn.floatref.sdpa import normalise

from test_floatref_conditional import _kernel_forward, _rounded, recipe


def _problem(seed, H=2, L=5, S=6, E=3, Ev=4, group=1, dtype=np.float32):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((H, L, E)).astype(dtype)
    K = rng.standard_normal((H // group, S, E)).astype(dtype)
    V = rng.standard_normal((H // group, S, Ev)).astype(dtype)
    dO = rng.standard_normal((H, L, Ev)).astype(dtype)
    return Q, K, V, dO


CASES = ["plain", "causal_top_left", "causal_bottom_right", "gqa", "bool_mask", "additive", "sentinel", "scale"]


def _case(case, seed):
    group = 2 if case == "gqa" else 1
    Q, K, V, dO = _problem(seed, H=4 if case == "gqa" else 2, group=group)
    H, L, S = Q.shape[0], Q.shape[1], K.shape[1]
    kw: dict = {}
    allowed = additive = None
    if case.startswith("causal"):
        align = case[len("causal_"):]
        kw = dict(is_causal=True, causal_align=align)
        allowed = np.broadcast_to(np.tril(np.ones((L, S), bool), k=0 if align == "top_left" else S - L), (H, L, S))
    elif case == "gqa":
        kw = dict(enable_gqa=True)
    elif case == "bool_mask":
        allowed = np.random.default_rng(seed + 7).random((H, L, S)) < 0.7
        allowed[:, :, 0] = True
        kw = dict(attn_mask=allowed)
    elif case == "additive":
        additive = np.random.default_rng(seed + 7).standard_normal((H, L, S)).astype(np.float32)
        kw = dict(attn_mask=additive)
    elif case == "sentinel":
        allowed = np.broadcast_to(np.tril(np.ones((L, S), bool)), (H, L, S))
        kw = dict(is_causal=True, mask_value=-5e4)
        additive = np.where(allowed, 0.0, -5e4)
        allowed = None
    elif case == "scale":
        kw = dict(scale=0.3)
    Ok, lse = _kernel_forward(Q, K, V, "float32", allowed=allowed, additive=additive, group=group,
                              scale=kw.get("scale"))
    return (Q, K, V, dO, Ok, lse), kw, dict(allowed=allowed, additive=additive, group=group, scale=kw.get("scale"))


@pytest.mark.parametrize("case", CASES)
def test_every_enclosure_holds_the_exact_entry(case):
    (Q, K, V, dO, Ok, lse), kw, rk = _case(case, 3)
    exact = recipe(Q, K, V, dO, Ok, lse, **rk)
    sdpa = {k: v for k, v in kw.items() if k in ("attn_mask", "is_causal", "causal_align", "mask_value",
                                                  "enable_gqa", "scale")}
    pr = normalise(Q, K, V, **sdpa)
    group = rk["group"]
    per_head = {}
    for h in range(Q.shape[0]):
        idx = (h,)
        al = None if pr.allowed is None else np.asarray(pr.allowed[idx])
        ad = None if pr.additive is None else np.asarray(pr.additive[idx])
        P, RP = backfast.given_probabilities(pr.Q[idx], pr.K[idx], al, ad, lse[h].astype(float),
                                             pr.scale_f, pr.scale_err)
        Dm, RD = backfast.row_dots(dO[h].astype(float), Ok[h].astype(float))
        per_head[idx] = backfast.grads(pr.Q[idx], pr.K[idx], pr.V[idx], dO[h].astype(float), P, RP, Dm, RD,
                                       pr.scale_f, pr.scale_err)
    checked = 0
    with mpmath.workdps(60):
        for name, ref in zip(("dQ", "dK", "dV"), exact):
            _check_refined(per_head, name, ref, Q.shape[0], group, pr, dO)
            lead = Q.shape[0] if name == "dQ" else Q.shape[0] // group
            for h in range(lead):
                owners = [(h,)] if name == "dQ" else [(h * group + k,) for k in range(group)]
                mid, rad = backfast.group_sum([per_head[o][name] for o in owners])
                assert np.isfinite(rad).all()
                for (r, c), m in np.ndenumerate(mid):
                    err = abs(ref[h][r][c] - mpmath.mpf(float(m)))
                    assert err <= rad[r, c], (name, h, r, c, err, rad[r, c])
                    assert rad[r, c] <= 1e-10 * (1 + abs(float(m))) + 1e-300   # and it is tight
                    checked += 1
    assert checked > 100


def _check_refined(per_head, name, ref, H, group, pr, dO):
    """The exact-sum enclosures of backfast.refine hold the exact entries too (every entry)."""
    for h in range(H if name == "dQ" else H // group):
        owners = [(h,)] if name == "dQ" else [(h * group + k,) for k in range(group)]
        for o in owners:
            per_head[o]["inputs"] = (pr.Q[o], pr.K[o], dO[o].astype(float))
        n, m = per_head[owners[0]][name][0].shape
        rows, cols = np.divmod(np.arange(n * m), m)
        mid, rad = backfast.refine(per_head, owners, name, rows, cols, (pr.scale_f, pr.scale_err))
        for k in range(rows.size):
            assert abs(ref[h][rows[k]][cols[k]] - mpmath.mpf(float(mid[k]))) <= rad[k], (name, k)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("case", CASES)
def test_fast_path_equals_the_arb_path(case, dtype):
    for seed in range(3):
        (Q, K, V, dO, Ok, lse), kw, _ = _case(case, seed)
        given = {"out": Ok, "lse": lse}
        fast = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, given=given, **kw)
        slow = correctly_rounded_backward(Q, K, V, dO, dtype=dtype, given=given, fast_path=False, **kw)
        for name in ("dQ", "dK", "dV"):
            assert np.array_equal(getattr(fast, name), getattr(slow, name)), (case, dtype, seed, name)


def test_fast_path_agrees_with_mpmath():
    (Q, K, V, dO, Ok, lse), kw, rk = _case("causal_bottom_right", 11)
    g = correctly_rounded_backward(Q, K, V, dO, dtype="bfloat16", given={"out": Ok, "lse": lse}, **kw)
    for name, ref in zip(("dQ", "dK", "dV"), recipe(Q, K, V, dO, Ok, lse, **rk)):
        assert np.array_equal(getattr(g, name), _rounded(ref, "bfloat16")), name


def test_crafted_entries_go_to_the_exact_path():
    """V = ones with O exactly 1: every dS is exactly 0, no enclosure decides (it straddles 0), and
    the exact path gives +0; a midpoint dV (lse = the only score, dV = 1 + 2^-24) is rounded exactly."""
    Q, K, _, dO = _problem(5, H=1, L=3, S=3, E=2, Ev=2)
    V = np.ones((1, 3, 2), np.float32)
    _, lse = _kernel_forward(Q, K, V, "float32")
    ones = np.ones((1, 3, 2), np.float32)
    pr = normalise(Q, K, V)
    known, _ = backfast.decide_given(pr, dO.astype(float), ones.astype(float), lse.astype(float),
                                  BINARY_FORMATS["float32"], 1, pr.batch)
    assert not known["dQ"][1].any() and not known["dK"][1].any()
    g = correctly_rounded_backward(Q, K, V, dO, given={"out": ones, "lse": lse})
    assert (g.dQ == 0).all() and (g.dK == 0).all() and not np.signbit(g.dQ).any()
    Q1 = np.array([[[1.0], [1.0]]], np.float32)
    K1 = np.array([[[0.5], [0.25]]], np.float32)
    V1 = np.array([[[1.0], [2.0]]], np.float32)
    mask = np.array([[[True, False], [True, False]]])
    dO1 = np.array([[[1.0], [2.0 ** -24]]], np.float32)
    given = {"out": np.ones((1, 2, 1), np.float32), "lse": np.array([[0.5, 0.5]], np.float32)}
    pr = normalise(Q1, K1, V1, attn_mask=mask, scale=1.0)
    known, _ = backfast.decide_given(pr, dO1.astype(float), given["out"].astype(float), given["lse"].astype(float),
                                  BINARY_FORMATS["float32"], 1, pr.batch)
    assert not known["dV"][1][0, 0, 0]                      # the midpoint 1 + 2^-24: not decided in float64
    g1 = correctly_rounded_backward(Q1, K1, V1, dO1, scale=1.0, attn_mask=mask, given=given)
    assert g1.dV[0, 0, 0] == 1.0 and g1.dV[0, 1, 0] == 0.0


def test_most_entries_are_decided_by_float64():
    Q, K, V, dO = _problem(2, H=1, L=64, S=64, E=16, Ev=16)
    Ok, lse = _kernel_forward(Q, K, V, "float32")
    pr = normalise(Q, K, V)
    known, _ = backfast.decide_given(pr, dO.astype(float), Ok.astype(float), lse.astype(float),
                                  BINARY_FORMATS["float32"], 1, pr.batch)
    for name, (_, ok) in known.items():
        assert ok.mean() > 0.99, name


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_lse_fast_path_equals_the_arb_path(dtype, monkeypatch):
    """floatref/lsefast.py decides most rows; the LSE (base e and 2) equals the arb path's on
    random rows, causal both alignments, additive masks (shifted or not) and one-key rows."""
    from symattn.floatref import lse as lse_module
    from symattn.floatref import lsefast

    fmt = BINARY_FORMATS[dtype]
    rng = np.random.default_rng(4)
    Q = rng.standard_normal((2, 6, 3)).astype(np.float32)
    K = rng.standard_normal((2, 8, 3)).astype(np.float32)
    add = rng.standard_normal((2, 6, 8)).astype(np.float32)
    problems = [normalise(Q, K, K), normalise(Q, K, K, is_causal=True),
                normalise(Q, K, K, is_causal=True, causal_align="bottom_right"),
                normalise(Q, K, K, attn_mask=add), normalise(Q, K, K, attn_mask=np.minimum(add, 0.0) - 3.0),
                normalise(Q, K, K, is_causal=True, mask_value=-1e9)]
    decided = 0
    for pr in problems:
        fast = lse_module.log_sum_exp(pr, fmt)
        decided += sum(int(lsefast.decide_lse(pr, idx, fmt)[2].sum()) for idx in np.ndindex(*pr.batch))
        with monkeypatch.context() as m:
            m.setattr(lsefast, "decide_lse", lambda pr, idx, fmt: (0, 0, np.zeros((2, pr.Q.shape[-2]), bool)))
            slow = lse_module.log_sum_exp(pr, fmt)
        for a, b in zip(fast, slow):
            assert np.array_equal(a, b)
    assert decided >= 96            # all but the two problems whose mask shift c_m ≠ 0 (arb path)
