"""The closed vocabularies as enums (issue 19, item 4): they cover the tables, their queries give
the lists they replaced, and they write exactly the strings they replaced (JSON, str, format, repr).
"""

from __future__ import annotations

import json

import pytest

import symattn as sa
from symattn.trace import steps as table
from symattn.trace.trace import attend
from symattn.vocab import StepName, StepKind, kind_of

SINGLE_HEAD = ("i-love-cats", "alibi", "backward", "i-love-cats-causal", "kv-cache", "off-by-one-softmax",
               "online-softmax", "rope", "sliding-window", "softcap")


# -- StepName: the step table and the traces --------------------------------------------------------

def table_names() -> set[str]:
    """Every step name the step table describes (its ``Q given`` rows are Q's, its templates patterns)."""
    names = {k.removesuffix(" given") for k in table.STEPS}
    for extra in (table.SINK_STEPS, table.LOGIT_STEPS, table.ROPE_STEPS, table.ONLINE_SINK_STEPS,
                  table.BACKWARD_STEPS):
        names |= set(extra)
    names |= {k for k in table.ONLINE_STEPS if "{" not in k}
    return names | {"decode_work"}


def test_every_step_of_the_table_is_a_member_and_every_member_is_in_the_table():
    assert table_names() == {s.value for s in StepName}


def test_every_step_of_every_example_has_a_kind():
    for name in SINGLE_HEAD:
        trace = attend(sa.load_example(name))
        unnamed = [s for s in trace.step_names if kind_of(s) is None]
        assert unnamed == [], (name, unnamed)
    assert kind_of("running_output_3") is StepKind.ONLINE
    assert kind_of("decode_4_K_cache") is StepKind.DECODE
    assert kind_of("weight") is None and kind_of("running_output_") is None


def test_the_order_is_the_traces_order():
    """StepName.order is the order each trace holds its steps in (X_kv, listed with the data, aside)."""
    for name in SINGLE_HEAD:
        members = [StepName(s) for s in attend(sa.load_example(name)).step_names
                   if s in StepName.__members__.values() and s != "X_kv"]
        assert [s.order for s in members] == sorted(s.order for s in members), name


def test_the_queries_give_the_lists_they_replaced():
    """Each query against the hand-kept tuple it replaced, written out here independently."""
    assert StepName.span(StepName.SCALED, StepName.OUTPUT) == ("scaled", "masked", "shifted", "exp", "row_sum",
                                                  "weights", "output")
    assert StepName.span(StepName.SCORES, StepName.OUTPUT) == ("scores", "scaled", "masked", "shifted", "exp",
                                                  "row_sum", "weights", "output")
    assert StepName.span(StepName.EXP, StepName.OUTPUT) == ("exp", "row_sum", "weights", "output")
    assert StepName.span(StepName.MASKED, StepName.ROW_SUM) == ("masked", "shifted", "exp", "row_sum")
    assert StepName.span(StepName.SCALED, StepName.SHIFTED) == ("scaled", "masked", "shifted")
    assert StepName.of_kind(StepKind.LOGIT) == ("bias", "biased", "capped")
    assert StepName.of_kind(StepKind.EMBEDDING, StepKind.WEIGHT) == ("X", "X_kv", "W_q", "W_k", "W_v")
    assert StepName.of_kind(StepKind.PROJECTION) == ("Q", "K", "V")
    assert set(StepName.of_kind(StepKind.ROTATION, StepKind.LOGIT, StepKind.ONLINE)) == {
        "Q_rot", "K_rot", "bias", "biased", "capped", "running_max", "rescale", "running_sum"}
    assert set(StepName.plain()) == {"X", "W_q", "W_k", "W_v", "X_kv", "Q", "K", "V", "scores", "scaled",
                                 "masked", "shifted", "exp", "row_sum", "weights", "output"}
    assert StepName.backward() == ("lse", "loss", "d_output", "d_V", "d_weights", "row_dot", "d_logits",
                               "d_scores", "d_Q_rot", "d_K_rot", "d_Q", "d_K", "d_sink", "d_W_q", "d_W_k",
                               "d_W_v", "d_X", "d_X_kv")
    assert set(StepName.of_kind(StepKind.GRADIENT)) == set(StepName.backward()) - {"lse", "loss"}


def test_a_span_leaves_out_the_variant_steps_between():
    assert "bias" not in StepName.span(StepName.SCALED, StepName.OUTPUT)
    assert "Q_rot" not in StepName.span(StepName.Q, StepName.SCORES)
    assert StepName.span(StepName.OUTPUT, StepName.SCORES) == ()


@pytest.mark.parametrize("member, text", [(StepName.X_KV, "X_kv"), (StepName.SCORES, "scores"),
                                          (StepName.D_W_Q, "d_W_q")])
def test_a_step_writes_its_string(member, text):
    assert member == text and hash(member) == hash(text) and StepName(text) is member
    assert json.dumps(member) == json.dumps(text)
    assert json.dumps({member: [member]}, ensure_ascii=False) == json.dumps({text: [text]})
    assert (str(member), f"{member}", f"{member:>8}", "{}".format(member), "%s" % member) == (
        text, text, f"{text:>8}", text, text)
    assert repr(member) == repr(text) and f"{member!r}" == repr(text)


def test_explain_json_names_its_steps_with_the_plain_strings():
    from symattn.document.trace_json import trace_to_json

    trace = attend(sa.load_example("backward"))
    text = json.dumps(trace_to_json(trace, 3))
    assert '"d_W_q"' in text and '"d_X"' in text and "Step" not in text


# -- Verdict -----------------------------------------------------------------------------------

def test_the_verdict_codes_are_the_stable_ones_best_to_worst():
    from symattn.check import CODES, RIGHT
    from symattn.check.codes import Verdict
    from symattn.check.verdict import worst

    assert CODES == ("exact", "rounded", "last-digit", "mistake", "wrong", "invalid", "blank")
    assert tuple(Verdict) == CODES and RIGHT == {"exact", "rounded"}
    assert worst(["rounded", "mistake", "last-digit"]) == "mistake"
    assert [v.right for v in Verdict] == [True, True, False, False, False, False, False]


def test_the_checker_gives_verdict_members_that_write_the_old_json():
    from symattn.check import Checker
    from symattn.check.codes import Verdict

    lesson = Checker(sa.load_example("i-love-cats"))
    v = lesson.check("weights[love]", "0.00 / 0.98 / 0.02")
    assert v.code is Verdict.MISTAKE and [type(e.code) for e in v.entries] == [Verdict] * 3
    assert (v.code, v.mistake) == ("mistake", "unscaled") and repr(v.code) == "'mistake'"
    text = json.dumps(v.to_json(), ensure_ascii=False)
    assert '"verdict": "mistake", "mistake": "unscaled"' in text and "Verdict." not in text
    assert lesson.check("weights[love]", "0.00, 0.91, 0.09").code is Verdict.ROUNDED


# -- MistakeCode -------------------------------------------------------------------------------

def catalogue_tables() -> set[str]:
    """The codes the docstring tables of the catalog and of the variants' mistake modules list
    (a row: ``code``  the change)."""
    import re

    from symattn.check.mistakes import backward, catalog, logits, online, rope

    found = set()
    for module in (catalog, rope, online, logits, backward):
        found |= set(re.findall(r"^``([a-z0-9.\-_]+)``\s", module.__doc__ or "", re.M))
    return found


def test_every_catalogued_mistake_has_a_code_and_every_code_is_catalogued():
    from symattn.check.codes import MistakeCode, MistakeFamily
    from symattn.check.mistakes.backward import BACKWARD_CODES
    from symattn.check.mistakes.catalog import MISTAKE_CODES

    assert catalogue_tables() == set(MISTAKE_CODES) == {c.value for c in MistakeCode.catalogued()}
    assert len(MISTAKE_CODES) == 33 and set(BACKWARD_CODES) <= set(MISTAKE_CODES)
    assert BACKWARD_CODES == ("forgot-row-dot", "row-dot-as-row-sum", "dp-not-transposed",
                              "dv-not-transposed", "dk-not-transposed", "backward-unscaled",
                              "backward-scaled-twice", "unscaled-forward", "gradient-ascent")
    assert MistakeCode.of_family(MistakeFamily.GRADING, MistakeFamily.HEADS) == (
        "carried-forward", "other-version", "gqa-tiled")


@pytest.mark.parametrize("name", SINGLE_HEAD)
def test_every_mistake_the_catalog_builds_is_named_by_a_member(name):
    from symattn.check.codes import MistakeCode
    from symattn.check.mistakes.catalog import Mistakes

    mistakes = Mistakes(attend(sa.load_example(name)))
    built = [*mistakes.fixed, *mistakes.early_for(3)]
    assert built and all(type(m.code) is MistakeCode for m in built), name


def test_the_worksheets_sets_of_mistakes_are_the_ones_they_were():
    from symattn.classroom.worksheets.wrong_answers import SEPARATED, VARIANT_MISTAKES

    assert SEPARATED == {"unscaled", "scaled-by-d_k", "scaled-anyway", "transposed-scores", "softmax-over-columns",
                         "scaled-after-softmax", "values-from-keys", "transposed-output", "early-rounding",
                         "mask-after-softmax", "masked-by-zero", "window-off-by-one"}
    assert VARIANT_MISTAKES["rope"] == {"rope-layout", "rope-degrees", "rope-query-only", "rope-on-values"}


def test_a_named_mistake_writes_its_string():
    from symattn.check import Checker
    from symattn.check.codes import MistakeCode

    v = Checker(sa.load_example("i-love-cats")).check("weights[love]", "0.00 / 0.98 / 0.02")
    assert v.mistake is MistakeCode.UNSCALED and repr(v.mistake) == "'unscaled'"
    assert json.dumps({"mistake": v.mistake}) == '{"mistake": "unscaled"}'
    assert f"{MistakeCode.E_AS_2_7} {MistakeCode.SCALED_BY_D_K!r}" == "e-as-2.7 'scaled-by-d_k'"
