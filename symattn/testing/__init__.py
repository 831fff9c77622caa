"""A test gate for attention kernels: pytest assertions against the correctly rounded reference.

``assert_attention_close(out, Q, K, V, is_causal=True, max_ulp=4)`` passes when every entry
of a kernel's output is within ``max_ulp`` units in the last place of the exact value, and
otherwise fails with an AssertionError naming the worst entries (their exact and correctly
rounded values), a histogram of the errors in ULPs and each worst row's conditioning, and,
when the candidate matches a neighbouring convention instead (the other causal alignment,
the other LSE base), says so.  Inputs are numpy arrays, or torch tensors on any device when
torch is installed (copied to the CPU; torch is never imported here).

The backward assertion (``assert_attention_grads_close``) joins it once floatref has exact
gradients (issue 21).
"""

from symattn.testing.attention import AttentionMismatch, assert_attention_close

__all__ = ["AttentionMismatch", "assert_attention_close"]
