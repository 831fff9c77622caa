"""A plain Trace holds no reference cycle: dropped, it is freed by reference counting (with its
engine's caches), not left for the cyclic collector, which the certification moves its results
past (symattn.trace.stepcert._collector_paused).  Its steps still behave as before."""

from __future__ import annotations

import gc
import math
import weakref

import symattn as sa
from symattn.trace.stepcert import _collector_paused

_INPUTS = {"Q": [["1", "0.5"], ["0", "-1"]], "K": [["1", "0"], ["0.5", "1"]], "V": [["2"], ["-1"]]}


def test_a_dropped_trace_is_freed_without_the_cyclic_collector():
    was = gc.isenabled()
    gc.disable()
    try:
        trace = sa.Trace(sa.Problem(**_INPUTS))
        weights = trace.step("weights").decimals(3)
        engine = weakref.ref(trace.engine)
        gone = weakref.ref(trace)
        del trace
        assert gone() is None and engine() is None
        assert [str(x) for x in weights[0]] == ["0.5", "0.5"]            # scores 1 and 1: a tie
        w = 1 / (1 + math.exp(-1 / math.sqrt(2)))                       # row 1: scores 0 and −1
        assert [str(x) for x in weights[1]] == [f"{w:.3f}", f"{1 - w:.3f}"]
    finally:
        if was:
            gc.enable()


def test_steps_outlive_their_trace_and_keep_one_identity_while_held():
    step = sa.Trace(sa.Problem(**_INPUTS)).step("weights")     # the trace itself is not kept
    assert [str(x) for x in step.decimals(3)[0]] == ["0.5", "0.5"]
    trace = step._trace
    assert trace.step("weights") is step and trace.weights is step and trace["weights"] is step
    assert [s.name for s in trace][-2:] == ["weights", "output"]
    assert trace.step("scores").matrix is trace.step("scores").matrix     # built once per trace
    assert trace.step("scores")[0, 1] == sa.Trace(sa.Problem(**_INPUTS)).step("scores").matrix[0, 1]


def test_the_collector_is_on_after_a_step_and_still_off_when_it_was_off():
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        with _collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
    gc.enable()
