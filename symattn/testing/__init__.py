"""A test gate for attention kernels: pytest assertions against the correctly rounded reference.

``assert_attention_close(out, Q, K, V, is_causal=True, max_ulp=4)`` passes when every entry
of a kernel's output is within ``max_ulp`` units in the last place of the exact value, and
otherwise fails with an AssertionError naming the worst entries (their exact and correctly
rounded values), a histogram of the errors in ULPs and each worst row's conditioning, and,
when the candidate matches a neighbouring convention instead (the other causal alignment,
the other LSE base), says so.  Inputs are numpy arrays, or torch tensors on any device when
torch is installed (copied to the CPU; torch is never imported here).

``assert_attention_grads_close(dq, dk, dv, Q, K, V, dO, max_ulp=8)`` does the same for a
kernel's backward against the correctly rounded gradients (or, with ``given=``, against the
recipe on the kernel's own saved O and LSE), in ulps of each entry's scale by default.
"""

from symattn.testing.attention import AttentionMismatch, assert_attention_close
from symattn.testing.gradients import AttentionGradsMismatch, GradsReport, assert_attention_grads_close

__all__ = ["AttentionGradsMismatch", "AttentionMismatch", "GradsReport", "assert_attention_close",
           "assert_attention_grads_close"]
