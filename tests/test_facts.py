"""Facts: proved in general (symbols) and checked exactly on the lesson example."""

import json
import subprocess
import sys

import pytest
import sympy

import symattn as sa
from symattn import facts
from symattn.facts import Claims
from clirun import cli

LESSON = sa.load_example("i-love-cats")


@pytest.fixture(scope="module")
def lesson():
    return sa.attend(LESSON)


@pytest.mark.parametrize("name", list(facts.FACTS))
def test_each_fact_holds_on_the_lesson(lesson, name):
    proof = facts.prove(name, lesson)
    assert proof.holds is True
    assert proof.fact == name
    assert proof.general, "every fact has a general argument"
    assert proof.checks, "and exact checks on the problem"
    assert name in proof.text() and name.replace("_", r"\_") in proof.latex()
    assert proof.to_json()["holds"] is True


@pytest.mark.parametrize("name", list(facts.FACTS))
def test_each_fact_holds_in_general_without_a_problem(name):
    proof = facts.prove(name)
    assert proof.holds is True
    assert proof.scope == "general"


def test_rows_sum_to_one_shows_the_certified_weights(lesson):
    proof = facts.prove("rows-sum-to-one", lesson)
    assert "row 'I': 0.136 + 0.432 + 0.432 → Σ = 1 exactly" in proof.text()


def test_a_false_claim_is_reported_false_with_its_counterexample(lesson):
    # 0.14 + 0.43 + 0.48 = 1.05: more than 3 · 0.005 from 1, so no rounding explains it
    claims = Claims.from_mapping({"weights": [[0.14, 0.43, 0.48], [0.001, 0.909, 0.09],
                                              [0.007, 0.755, 0.238]]})
    proof = facts.prove("rows-sum-to-one", lesson, claims)
    assert proof.holds is False
    assert proof.counterexample["row"] == "I"
    assert proof.counterexample["claimed"] == ["0.14", "0.43", "0.48"]
    assert proof.counterexample["sum"] == "1.05"
    assert proof.counterexample["sum_decimal"] == "1.05"
    assert proof.counterexample["within"] == "0.015"
    assert "✗ FAILS" in proof.text()
    assert "claimed row 'I': 0.14 + 0.43 + 0.48 = 1.05 ≠ 1" in proof.text()


def test_a_true_claim_holds(lesson):
    claims = Claims.from_mapping({"weights": [["1/4", "1/4", "1/2"]] * 3})
    assert facts.prove("rows-sum-to-one", lesson, claims).holds is True


def test_claimed_weight_outside_the_interval_fails():
    claims = Claims.from_mapping({"weights": [[0, 1, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]})
    proof = facts.prove("weights-in-open-interval", None, claims)
    assert proof.holds is False
    assert proof.counterexample == {"row": 0, "key": 0, "claimed": "0", "expected": "in (0, 1)"}


def test_masked_weights_are_exactly_zero_and_a_claim_otherwise_fails():
    trace = sa.attend(sa.load_example("i-love-cats-causal"))
    assert trace.weights[0, 1] == 0 and trace.weights[0, 2] == 0 and trace.weights[1, 2] == 0
    assert trace.weights[0, 0] == 1
    proof = facts.prove("weights-in-open-interval", trace)
    assert proof.holds
    assert "2 masked weight(s) exactly 0" in proof.text()
    bad = Claims.from_mapping({"weights": [[1, 0, 0], [0.4, 0.5, 0.1], [0.2, 0.3, 0.5]]})
    proof = facts.prove("weights-in-open-interval", trace, bad)
    assert proof.holds is False
    assert proof.counterexample["expected"] == "0 (masked)"
    assert proof.counterexample["claimed"] == "0.1"        # as written, not 1/10


def test_convex_hull_rejects_a_claimed_output_outside_the_values(lesson):
    V = lesson.V.matrix
    assert [min(V.col(c)) for c in range(3)] == [1, 2, 0]
    assert [max(V.col(c)) for c in range(3)] == [2, 8, 3]
    claims = Claims.from_mapping({"output": [[1.86, 6.32, 1.70], [2.0, 8.5, 0.27], [1.99, 7.48, 0.74]]})
    proof = facts.prove("convex-hull", lesson, claims)
    assert proof.holds is False
    assert proof.counterexample["row"] == "love" and proof.counterexample["column"] == 1
    assert proof.counterexample["max"] == "8"


def test_temperature_limits_on_the_lesson(lesson):
    proof = facts.prove("temperature-limits", lesson)
    limits = proof.data["limits"]
    assert limits["I"]["weights_hot"] == ["0", "1/2", "1/2"]  # 'love' and 'cats' tie at 4
    assert limits["I"]["output_hot"] == ["2", "7", "3/2"]
    assert limits["cats"]["weights_hot"] == ["0", "1", "0"]
    assert limits["cats"]["output_cold"] == ["5/3", "16/3", "2"]  # the mean of V
    V = lesson.V.matrix
    assert [sum(V.col(c)) / 3 for c in range(3)] == [sympy.Rational(5, 3), sympy.Rational(16, 3), 2]


def test_variance_of_the_unscaled_problem_is_d_k():
    proof = facts.prove("variance-d_k", sa.load_example("i-love-cats-unscaled"))
    assert proof.holds
    assert "Var(scale·q·k) = 3 (not 1" in proof.text()


def test_causal_prefix_is_not_applicable_to_cross_attention():
    proof = facts.prove("causal-prefix", sa.load_example("soft-dictionary"))
    assert proof.holds and "needs self-attention" in proof.text()


def test_permutation_equivariance_on_a_causal_problem_notes_the_mask():
    proof = facts.prove("permutation-equivariance", sa.load_example("i-love-cats-causal"))
    assert proof.holds and "no longer causal" in proof.text()


def test_general_symbolic_helpers():
    s = facts.symbol_vector("s", 3)
    p = facts.softmax(s)
    assert sympy.simplify(sum(p)) == 1
    c = sympy.Symbol("c", real=True)
    assert all(sympy.simplify(a - b) == 0 for a, b in zip(facts.softmax([x + c for x in s]), p))


def test_latex_escapes_plain_notes():
    text = facts.prove("causal-prefix", sa.load_example("soft-dictionary")).latex()
    assert "$$" not in text


def _run(*args):
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args)


def test_cli_json_lists_every_fact():
    done = _run("facts", "--example", "i-love-cats-causal", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [o["fact"] for o in out] == list(facts.FACTS)
    assert all(o["holds"] is True for o in out)


def test_cli_false_claim_exits_1(tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text("weights = [[0.14, 0.43, 0.48], [0.001, 0.909, 0.090], [0.007, 0.755, 0.238]]\n")
    done = _run("facts", "--claims", str(path), "--fact", "rows-sum-to-one", "--json")
    assert done.returncode == 1
    (out,) = json.loads(done.stdout)
    assert out["holds"] is False and out["counterexample"]["sum"] == "1.05"


@pytest.mark.parametrize("args, words", [
    (("--fact", "nope"), "no such fact"),
    (("--claims", "missing.toml"), "no such file"),
    (("--general", "--example", "i-love-cats"), "--general"),
])
def test_cli_bad_input_is_one_line_exit_2(args, words):
    done = _run("facts", *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and words in done.stderr and "Traceback" not in done.stderr


def test_cli_claims_of_the_wrong_shape(tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text("weights = [[0.5, 0.5]]\n")
    done = _run("facts", "--claims", str(path))
    assert done.returncode == 2 and "claimed weights is 1×2" in done.stderr


def test_gqa_fact_on_a_grouped_problem():
    from symattn.heads.heads import MultiHeadProblem

    problem = MultiHeadProblem.from_dict({
        "X": [[1, 0, 2], [0, 1, 1], [2, 1, 0]], "heads": 4, "kv_heads": 2,
        "W_q": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], "W_k": [[1, 0], [0, 1], [1, 1]],
        "W_v": [[1, 2], [0, 1], [3, 0]], "W_o": [[1], [2], [3], [4]]})
    assert problem.kv_of == (0, 0, 1, 1)
    proof = facts.prove("gqa-equals-repeated-heads", problem)
    assert proof.holds and "4 query heads over 2 key/value head(s)" in proof.text()
    repeated = problem.repeated_kv()
    assert repeated.kv_heads == 4 and repeated.kv_of == (0, 1, 2, 3)


@pytest.fixture(scope="module")
def symbolic():
    """All-symbol Q, K, V through the engine (issue 5, part 1)."""
    return sa.attend(sa.Problem(Q=sa.symbol_matrix("q", 2, 2), K=sa.symbol_matrix("k", 2, 2),
                                V=sa.symbol_matrix("v", 2, 1)))


@pytest.mark.parametrize("name", list(facts.FACTS))
def test_each_fact_holds_on_a_symbolic_problem(symbolic, name):
    proof = facts.prove(name, symbolic)
    assert proof.holds is True
    assert proof.checks


def test_general_proofs_run_the_engine_on_symbols():
    for name in ("rows-sum-to-one", "convex-hull", "causal-prefix", "permutation-equivariance"):
        text = facts.prove(name).text()
        assert "the engine on all-symbol" in text and "(verified)" in text


def test_symbolic_rows_sum_to_one_identically(symbolic):
    total = symbolic.weights[0, 0] + symbolic.weights[0, 1]
    assert sympy.simplify(total) == 1
    assert symbolic.weights[0, 0].free_symbols == {sympy.Symbol(n, real=True) for n in
                                                   ("q00", "q01", "k00", "k01", "k10", "k11")}


ODD_TOML = r'''title = "Odd names"
tokens = ["plain", "a_b&c%d", "$#{}~^\\"]
Q = [[1, 0], [0, 1], [1, 1]]
K = [[1, 0], [0, 1], [1, 1]]
V = [[1, 2], [0, 1], [3, 0]]
'''
# row 'a_b&c%d' sums to 1.5 (past 3 · 0.05); output['$#{}~^\', 1] = 9.5 is above max V[:, 1] = 2
ODD_CLAIMS = '''weights = [[0.2, 0.3, 0.5], [0.5, 0.5, 0.5], [0.2, 0.3, 0.5]]
output = [[1.5, 1.5], [1.2, 0.9], [1.5, 9.5]]
'''


def _need_tex():
    import os
    import shutil

    missing = [p for p in ("pdflatex", "pdftotext") if shutil.which(p) is None]
    if missing:
        reason = f"{' and '.join(missing)} not on PATH (TeX Live and poppler-utils)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)


def test_facts_latex_compiles_with_tex_special_characters_in_names(tmp_path):
    """issue 8, item 5: \\texttt{variance-d_k} did not compile (an unescaped _)."""
    _need_tex()
    from symattn.document.pdf import compile_tex
    from symattn.document.trace_latex import document

    (tmp_path / "odd.toml").write_text(ODD_TOML, encoding="utf-8")
    (tmp_path / "claims.toml").write_text(ODD_CLAIMS, encoding="utf-8")
    done = _run("facts", str(tmp_path / "odd.toml"), "--claims", str(tmp_path / "claims.toml"),
                "--latex", "-o", str(tmp_path / "facts.tex"))
    assert done.returncode == 1, done.stderr           # two claimed facts fail
    # issue 10: the facts document printed; --latex is still the body to paste (the fact's name,
    # escaped, titles its section), --format latex the complete document around it
    fragment = (tmp_path / "facts.tex").read_text(encoding="utf-8")
    assert r"\documentclass" not in fragment
    assert r"variance-d\_k: " in fragment and r"\verb" not in fragment
    whole = _run("facts", str(tmp_path / "odd.toml"), "--claims", str(tmp_path / "claims.toml"),
                 "--format", "latex").stdout
    assert whole.startswith(r"\documentclass") and fragment in whole
    pdf = tmp_path / "facts.pdf"
    pdf.write_bytes(compile_tex(document(fragment), "facts"))
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    for name in facts.FACTS:
        assert name in text, name
    assert "Counterexample: row = a_b&c%d" in text
    assert "row = $#{}" in text and "sum = 1.5" in text and "claimed = 9.5" in text


# -- issue 25: facts on a sink combined with ALiBi and a soft-cap ---------------------------

SINK_ALIBI_CAP = dict(Q=[[1, 0], [0, 1], [1, 1]], K=[[1, 0], [0, 1], [1, 1]], V=[[1, 2], [3, 4], [5, 6]],
                      sink=0, alibi={"slope": "1/2"}, softcap=5, mask="causal")


def _float_weights(sink: bool) -> list[list[float]]:
    """The weights in float64, written for this test: scores/√2, ALiBi −(i − j)/2, 5·tanh(x/5),
    causal, then the softmax with (or without) the sink logit 0 in the denominator."""
    import math

    Q = SINK_ALIBI_CAP["Q"]
    rows = []
    for i in range(3):
        logits = [5 * math.tanh((sum(a * b for a, b in zip(Q[i], Q[j])) / math.sqrt(2) - (i - j) / 2) / 5)
                  for j in range(i + 1)]
        total = sum(math.exp(x) for x in logits) + (math.exp(0) if sink else 0)
        rows.append([math.exp(x) / total for x in logits])
    return rows


def test_a_one_key_row_with_a_sink_is_in_the_open_interval():
    weights = _float_weights(sink=True)
    assert 0 < weights[0][0] < 1                       # the sink takes part of row 0's one key
    proof = facts.weights_in_open_interval(sa.attend(sa.Problem(**SINK_ALIBI_CAP)))
    assert proof.holds and "the sink takes the rest of the row" in proof.checks[0].text


def test_the_sink_forms_agree_with_alibi_and_a_soft_cap():
    with_sink, plain = _float_weights(sink=True), _float_weights(sink=False)
    for row_s, row_p in zip(with_sink, plain):         # renormalised by 1/(1 + e^σ/Σ e^x), σ = 0
        share = sum(row_s) / sum(row_p)
        assert all(abs(a - b * share) < 1e-12 for a, b in zip(row_s, row_p))
    proof = facts.sink_forms_agree(sa.attend(sa.Problem(**SINK_ALIBI_CAP)))
    assert proof.holds and all("(exactly)" in line.text for line in proof.checks)


def test_temperature_says_which_logits_it_multiplies():
    problem = dict(SINK_ALIBI_CAP)
    del problem["sink"]
    proof = facts.temperature_limits(sa.attend(sa.Problem(**problem)))
    assert proof.holds and proof.checks[0].text.startswith(
        "τ multiplies the logits the softmax takes, here the capped ones (after the soft-cap)")
    plain = facts.temperature_limits(sa.attend(sa.load_example("i-love-cats")))
    assert not plain.checks[0].text.startswith("τ multiplies")
