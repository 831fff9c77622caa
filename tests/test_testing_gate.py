"""symattn.testing.assert_attention_close and floatref.hard_cases (issue 21): a right kernel
passes every hard case, and each deliberately wrong kernel fails on the case built for it,
with a message that names the worst entries, their exact values, a ULP histogram, the row's
conditioning, and the convention the candidate matches instead.

The kernels are written here: FlashAttention's online softmax over key blocks of 64 (float64
arithmetic, P rounded to float32 as a kernel's exp gives it), the output rounded to float16
— so their own error is about 2^-12 of a float16 ulp of Σ p·|v|, and each planted bug is
one switch."""

import functools
import math

import pytest

from symattn import floatref as fr
from symattn.floatref.binary import BINARY_FORMATS, round_array
from symattn.testing import AttentionMismatch, assert_attention_close

np = pytest.importorskip("numpy")

SHAPE = dict(dtype="float16", heads=2, L=128, E=16)


def kernel(Q, K, V, *, is_causal=False, causal_align="top_left", attn_mask=None, enable_gqa=False,
           m0=-math.inf, reset_max=False, rescale=True, gqa_map="repeat", p_fp8=False, block=64,
           arith=np.float64):
    """Online-softmax attention (1, H, L, E): scores, sums and P·V in float64, each P entry
    rounded to float32 as a kernel's exp gives it (so it underflows below 2^-149 as real
    kernels' do; ``arith=np.float32``: all of it in float32); returns (output in float16, lse
    in float32)."""
    f = arith
    Q, K, V = (np.asarray(a, dtype=f) for a in (Q, K, V))
    H, L, E = Q.shape[1], Q.shape[2], Q.shape[3]
    S = K.shape[2]
    out = np.zeros((1, H, L, V.shape[3]), f)
    lse = np.zeros((1, H, L), f)
    Q, K, V = (np.asarray(a, dtype=f) for a in (Q, K, V))
    allowed = np.ones((L, S), bool)
    if is_causal:
        allowed = np.tril(allowed, k=0 if causal_align == "top_left" else S - L)
    if attn_mask is not None:
        allowed = allowed & attn_mask
    for h in range(H):
        kv = h
        if enable_gqa:
            group = H // K.shape[1]
            kv = h // group if gqa_map == "repeat" else h % K.shape[1]
        s = (Q[0, h] @ K[0, kv].T) * f(1 / math.sqrt(E))
        s = np.where(allowed, s, f(-np.inf))
        m = np.full(L, m0, f)
        lsum = np.zeros(L, f)
        o = np.zeros((L, V.shape[3]), f)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for a in range(0, S, block):
                sb = s[:, a:a + block]
                m_new = np.maximum(m, sb.max(axis=1))
                if reset_max:                          # flash-attention#2082: a masked block's max → 0
                    m_new = np.where(np.isneginf(m_new), f(0), m_new)
                alpha = np.where(np.isneginf(m), f(0), np.exp(m - m_new)).astype(f)
                p = np.where(np.isneginf(sb), 0, np.exp(sb - m_new[:, None])).astype(np.float32).astype(f)
                if rescale:
                    lsum = alpha * lsum + p.sum(axis=1, dtype=f)
                    o = alpha[:, None] * o + p @ V[0, kv, a:a + block]
                else:                                  # the classic: forgot to rescale by e^(m_old − m_new)
                    lsum = lsum + p.sum(axis=1, dtype=f)
                    o = o + p @ V[0, kv, a:a + block]
                m = m_new
            if p_fp8:                                  # P rounded to e4m3 before P·V, not renormalised
                P = np.where(np.isneginf(s), 0, np.exp(s - m[:, None])) / lsum[:, None]
                P = round_array(P.astype(np.float64), BINARY_FORMATS["float8_e4m3fn"]).astype(f)
                o, lsum = P @ V[0, kv], np.ones(L, f)
            out[0, h] = o / lsum[:, None]
            lse[0, h] = m + np.log(lsum)
    return out.astype(np.float16), lse.astype(np.float32)


@functools.lru_cache(maxsize=1)
def cases():
    return {c.name: c for c in fr.hard_cases(**SHAPE)}


def test_hard_cases_are_named_deterministic_and_typed():
    a, b = list(fr.hard_cases(**SHAPE)), list(fr.hard_cases(**SHAPE))
    names = [c.name for c in a]
    assert names == ["max_far_from_rest", "near_ties", "near_overflow", "first_block_masked",
                     "all_below_sentinel", "v_ones", "midpoint_ties", "causal_bottom_right",
                     "causal_top_left", "gqa_middle_heads", "lse_offset"]
    for x, y in zip(a, b):
        assert all(np.array_equal(p, q) for p, q in ((x.Q, y.Q), (x.K, y.K), (x.V, y.V)))
        assert x.Q.dtype == np.float16 and x.about
    other = next(iter(fr.hard_cases(**SHAPE, seed=1)))
    assert not np.array_equal(other.Q, a[0].Q)
    with pytest.raises(fr.FloatRefError, match="dtype is 'float8'"):
        next(fr.hard_cases(dtype="float8"))
    with pytest.raises(fr.FloatRefError, match="L = 16"):
        next(fr.hard_cases(L=16))


def test_hard_cases_known_answers():
    c = cases()
    ones = c["v_ones"].reference()
    assert (ones.output == 1).all()                                  # exactly 1
    mid = c["midpoint_ties"].reference()
    assert (mid.output == 1).all() and mid.arb_entries >= mid.output.size   # midpoints, to the even 1
    br, tl = c["causal_bottom_right"], c["causal_top_left"]
    assert br.Q.shape[2] * 2 == br.K.shape[2] and br.options["causal_align"] == "bottom_right"
    assert not np.array_equal(br.reference().output, br.reference(causal_align="top_left").output)
    assert tl.options == {"is_causal": True, "causal_align": "top_left"}
    first = c["first_block_masked"].reference(return_lse=True)
    assert np.all(first.lse < -100)                                   # logits near −120
    low = c["all_below_sentinel"].reference(return_lse=True, lse_dtype="float32")
    assert np.all(low.lse < -5e4) and np.isfinite(low.output).all()
    off = c["lse_offset"].reference(return_lse=True, lse_dtype="float32")
    assert np.all(off.lse2 - off.lse > 2)                             # base matters: lse·(1/ln2 − 1) > 2


def test_right_kernel_passes_every_hard_case():
    for name, case in cases().items():
        out, lse = kernel(case.Q, case.K, case.V, **case.options)
        report = assert_attention_close(out, case.Q, case.K, case.V, max_ulp=4, lse=lse,
                                        ulp_scale="magnitude", **case.options)
        assert report.entries, name


@pytest.mark.parametrize("case,bug,expect", [
    ("causal_bottom_right", dict(causal_align="top_left"), "'top_left' causal mask's output"),
    ("all_below_sentinel", dict(m0=-5e4), "inf or NaN where the exact value is finite"),
    ("first_block_masked", dict(reset_max=True), "inf or NaN where the exact value is finite"),
    ("max_far_from_rest", dict(rescale=False), "worst entries"),
    ("gqa_middle_heads", dict(gqa_map="tile"), "worst entries"),
    ("v_ones", dict(p_fp8=True), "worst entries"),
])
def test_wrong_kernels_fail(case, bug, expect):
    c = cases()[case]
    out, lse = kernel(c.Q, c.K, c.V, **{**c.options, **bug})
    with pytest.raises(AttentionMismatch, match="does not match the correctly rounded reference") as err:
        assert_attention_close(out, c.Q, c.K, c.V, max_ulp=4, ulp_scale="magnitude", **c.options)
    assert expect in str(err.value)
    right, _ = kernel(c.Q, c.K, c.V, **c.options)
    assert_attention_close(right, c.Q, c.K, c.V, max_ulp=4, ulp_scale="magnitude", **c.options)


def test_entry_ulps_show_the_conditioning_of_cancelling_outputs():
    # a float32 kernel on near_ties: outputs near 0 that cancel (κ ~ 10⁵) are many ulps of their
    # own from the exact value, and only a fraction of an ulp of Σ p·|v|
    c = cases()["near_ties"]
    out, _ = kernel(c.Q, c.K, c.V, arith=np.float32)
    with pytest.raises(AttentionMismatch) as err:
        assert_attention_close(out, c.Q, c.K, c.V, max_ulp=4)
    worst = [t for t in str(err.value).splitlines() if t.startswith("    [")]
    assert worst and all(float(t.rsplit("κ = ", 1)[1]) > 100 for t in worst)
    assert_attention_close(out, c.Q, c.K, c.V, max_ulp=4, ulp_scale="magnitude")


def test_base_two_lse_fails_with_a_hint():
    c = cases()["lse_offset"]
    out, lse = kernel(c.Q, c.K, c.V)
    assert_attention_close(out, c.Q, c.K, c.V, lse=lse)                     # base e: right
    with pytest.raises(AttentionMismatch) as err:
        assert_attention_close(out, c.Q, c.K, c.V, lse=(lse / np.float32(math.log(2))).astype(np.float32))
    text = str(err.value)
    assert "lse (base e (natural), float32)" in text and "mixes up the bases" in text
    assert_attention_close(out, c.Q, c.K, c.V, lse=(lse / np.float32(math.log(2))).astype(np.float32),
                           lse_base=2)


def test_failure_message_names_entries_exact_values_histogram_and_conditioning():
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3))
    ref = fr.correctly_rounded(Q, K, V, dtype="float32")
    assert_attention_close(ref.output, Q, K, V, max_ulp=0.5)          # the reference itself: ≤ ½ ulp
    bad = ref.output.copy()
    bad[1, 3, 2] = np.nextafter(np.nextafter(bad[1, 3, 2], np.float32(np.inf)) * np.float32(1.001), np.inf)
    with pytest.raises(AttentionMismatch) as err:
        assert_attention_close(bad, Q, K, V, max_ulp=4)
    text = str(err.value)
    assert "1 of 40 entries are more than 4 ulp from the exact value" in text
    line = next(t for t in text.splitlines() if t.strip().startswith("[1, 3, 2]"))
    assert f"correctly rounded {float(ref.output[1, 3, 2]):.9g}" in line and "exact " in line and "κ = " in line
    assert "|error| in ulps: [0, 0.5]: 39" in text
    assert err.value.report is not None and err.value.report.max_ulps > 4


def test_fully_masked_rows_and_shapes():
    q = np.ones((1, 3, 2), np.float32)
    k = np.ones((1, 1, 2), np.float32)
    v = np.full((1, 1, 2), 5.0, np.float32)
    opts = dict(is_causal=True, causal_align="bottom_right")
    nan = np.array([[[np.nan] * 2, [np.nan] * 2, [5.0, 5.0]]], np.float32)
    zero = np.nan_to_num(nan)
    assert_attention_close(nan, q, k, v, **opts)                      # not judged by default
    assert_attention_close(zero, q, k, v, **opts)
    assert_attention_close(zero, q, k, v, fully_masked="zero", **opts)
    with pytest.raises(AttentionMismatch, match="2 entries of fully masked rows are not nan|4 entries"):
        assert_attention_close(zero, q, k, v, fully_masked="nan", **opts)
    with pytest.raises(AttentionMismatch, match=r"shape \(1, 2, 2\), but SDPA's is \(1, 3, 2\)"):
        assert_attention_close(zero[:, :2], q, k, v, **opts)


def test_torch_like_tensors_are_converted_without_torch():
    class Tensor:                                      # what the gate needs of a torch tensor
        def __init__(self, a):
            self.a, self.dtype = a, f"torch.{a.dtype}"

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    ref = fr.correctly_rounded(Q, K, V, is_causal=True)
    assert_attention_close(Tensor(ref.output), Tensor(Q), Tensor(K), Tensor(V), is_causal=True)
    with pytest.raises(AttentionMismatch):
        assert_attention_close(Tensor(ref.output * np.float32(1.01)), Tensor(Q), Tensor(K), Tensor(V),
                               is_causal=True)


def test_real_torch_when_installed():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    Q, K, V = (torch.randn(1, 2, 8, 16, generator=g, dtype=torch.bfloat16) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(Q.float(), K.float(), V.float(),
                                                           is_causal=True).to(torch.bfloat16)
    assert_attention_close(out, Q, K, V, is_causal=True, max_ulp=4)
