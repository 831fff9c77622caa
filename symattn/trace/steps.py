"""The step table: every step's name, formula (text and LaTeX), meaning and section title, as data.

The Trace names its steps from this table and the document takes its section
titles from it, so a step is described in one place.  ``{src}`` in a formula
is the matrix keys and values come from (``X``, or ``X_kv`` in cross-attention).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

import sympy

from symattn.problem.problem import Problem
from symattn.trace.backward_steps import backward_on, backward_table
from symattn.vocab import StepName, StepKind


@dataclass(frozen=True)
class StepSpec:
    """How one step is written and what it means."""

    formula: str
    latex: str
    meaning: str
    title: str
    symbol: str = ""              # the LaTeX name of the step's matrix, when its formula has none


STEPS: dict[str, StepSpec] = {
    "X": StepSpec("X", "X", "the token embeddings, one row per token", "Embeddings"),
    "W_q": StepSpec("W_q", "W_{q}", "the learned projection to queries", "Query projection"),
    "W_k": StepSpec("W_k", "W_{k}", "the learned projection to keys", "Key projection"),
    "W_v": StepSpec("W_v", "W_{v}", "the learned projection to values", "Value projection"),
    "X_kv": StepSpec("X_kv", r"X_{kv}", "the embeddings the keys and values come from",
                     "Key/value embeddings"),
    "Q": StepSpec("Q = X·W_q", r"Q = X W_q", "what each token is looking for", "Queries"),
    "K": StepSpec("K = {src}·W_k", r"K = {src_tex} W_k", "what each token offers", "Keys"),
    "V": StepSpec("V = {src}·W_v", r"V = {src_tex} W_v", "what each token passes on", "Values"),
    "Q given": StepSpec("Q (given)", "Q", "the queries", "Queries"),
    "K given": StepSpec("K (given)", "K", "the keys", "Keys"),
    "V given": StepSpec("V (given)", "V", "the values", "Values"),
    "scores": StepSpec("scores = Q·Kᵀ", r"S = Q K^\top", "how well query i matches key j (dot products)",
                       "Scores"),
    "scaled": StepSpec("scaled = {scale}", r"\frac{{S}}{{\sqrt{{d_k}}}}",
                       "scores scaled so they do not grow with the width d_k", "Scaled scores"),
    "masked": StepSpec("masked = scaled, −∞ where the mask blocks",
                       r"\tilde S = \text{scaled}, -\infty \text{ where blocked}",
                       "blocked positions get −∞, so their weight is exactly 0", "Masking"),
    "shifted": StepSpec("shifted = scaled − max of its row", r"\text{scaled}_{ij} - \max_k \text{scaled}_{ik}",
                        "the stability trick: the same weights, no large exponents",
                        "Softmax, with the max-subtraction trick"),
    "exp": StepSpec("exp = e^shifted", r"e^{\text{shifted}}", "positive, in (0, 1], 1 at the row maximum",
                    "Exponentials"),
    "row_sum": StepSpec("row_sum = Σ_j exp", r"\sum_j e^{\text{shifted}_{ij}}",
                        "the softmax denominator of each row", "Row sums"),
    "weights": StepSpec("weights = exp / row_sum",
                        r"A = \operatorname{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)",
                        "how much each query takes from each key; each row sums to 1", "Attention weights"),
    "output": StepSpec("output = weights·V", r"O = A V", "each token's weighted average of the value rows",
                       "Output"),
}

# With a sink logit s: one more softmax column, dropped after the softmax
SINK_STEPS: dict[str, StepSpec] = {
    "row_sum": StepSpec("row_sum = Σ_j exp + e^(sink − max)",
                        r"\sum_j e^{\text{shifted}_{ij}} + e^{s - \max_k \text{scaled}_{ik}}",
                        "the softmax denominator of each row, with the sink's term",
                        "Row sums, with the sink"),
    "weights": StepSpec("weights = exp / row_sum",
                        r"A_{ij} = \frac{e^{\text{shifted}_{ij}}}{\text{row\_sum}_i}",
                        "how much each query takes from each key; each row sums to less than 1 "
                        "(the sink's column is dropped)", "Attention weights"),
}

# ALiBi and soft-capping (symattn.problem.keys.logits): the steps between the scaled scores and the
# softmax; {slope}, {cap} and the distance are filled in by spec()
LOGIT_STEPS: dict[str, StepSpec] = {
    "bias": StepSpec("bias = −{slope}·{distance}", r"B_{{ij}} = -{slope_tex} \cdot {distance_tex}",
                     "ALiBi's linear bias: a key farther from the query gets a lower logit",
                     "ALiBi bias"),
    "biased": StepSpec("biased = scaled + bias", r"\text{scaled} + B",
                       "the scaled scores with the bias added: the logits the softmax takes",
                       "Biased scores"),
    "capped": StepSpec("capped = {cap}·tanh({logit} / {cap})",
                       r"{cap_tex} \tanh\left(\frac{{\text{{{logit}}}}}{{{cap_tex}}}\right)",
                       "soft-capped logits: smoothly kept inside (−c, c); tanh is increasing, so "
                       "the order and the ties stay", "Soft-capped logits"),
}

# With RoPE: the queries and keys rotated pair by pair, then the scores from them
ROPE_STEPS: dict[str, StepSpec] = {
    "Q_rot": StepSpec("Q_rot = Q rotated: each pair (x, y) ↦ (x·cos φ − y·sin φ, x·sin φ + y·cos φ), "
                      "φ = p·θ_i", r"Q_{\text{rot}} = Q\,R(p\theta)^\top",
                      "each query rotated by its position p, pair i by the angle p·θ_i",
                      "Rotated queries (RoPE)"),
    "K_rot": StepSpec("K_rot = K rotated: each pair (x, y) ↦ (x·cos φ − y·sin φ, x·sin φ + y·cos φ), "
                      "φ = p·θ_i", r"K_{\text{rot}} = K\,R(p\theta)^\top",
                      "each key rotated by its position p, pair i by the angle p·θ_i",
                      "Rotated keys (RoPE)"),
    "scores": StepSpec("scores = Q_rot·K_rotᵀ", r"S = Q_{\text{rot}} K_{\text{rot}}^\top",
                       "how well rotated query i matches rotated key j: it depends on the "
                       "positions only through their difference", "Scores"),
}

# Online softmax (tiles = B): one column per key block; running_output_{b} is one step per block
ONLINE_STEPS: dict[str, StepSpec] = {
    "running_max": StepSpec("running_max = max of the scaled scores seen so far",
                            r"m_{ib} = \max_{j \le \text{block } b} \text{scaled}_{ij}",
                            "the running maximum after each block of keys (−∞ while none is allowed)",
                            "Running maximum"),
    "rescale": StepSpec("rescale = e^(m_(b−1) − m_b), 1 for the first block",
                        r"\text{rescale}_{ib} = e^{m_{i,b-1} - m_{ib}}",
                        "how much the earlier sums shrink when the maximum grows (1 when it does not)",
                        "Rescale factors"),
    "running_sum": StepSpec("running_sum = rescale·previous + Σ_(block) e^(scaled − running_max)",
                            r"l_{ib} = \text{rescale}_{ib}\, l_{i,b-1} + \sum_{j \in b} e^{\text{scaled}_{ij} - m_{ib}}",
                            "the softmax denominator of the keys seen so far, against the running maximum",
                            "Running sums"),
    "running_output_{b}": StepSpec(
        "running_output_{b} = rescale·previous + Σ_(block {b}) e^(scaled − running_max)·V",
        r"O^{{({b})}}_{{i}} = \text{{rescale}}_{{i{b}}}\,O^{{({b_prev})}}_{{i}} + \sum_{{j \in {b}}} e^{{\text{{scaled}}_{{ij}} - m_{{i{b}}}}} V_j",
        "the unnormalised output after block {b}: divided by running_sum it is the output so far",
        "Running output after block {b}"),
}

# KV-cache decoding (decode = { prefill = P }): the steps of the token at position {t}
DECODE_STEPS: dict[str, StepSpec] = {
    "q": StepSpec("decode_{t}_q = x_{t}·W_q", r"q_{{{t}}} = x_{{{t}}} W_q", "the new token's query (only its own row is projected)", "Query"),
    "k": StepSpec("decode_{t}_k = x_{t}·W_k", r"k_{{{t}}} = x_{{{t}}} W_k", "the new token's key, appended to the cache", "Key"),
    "v": StepSpec("decode_{t}_v = x_{t}·W_v", r"v_{{{t}}} = x_{{{t}}} W_v", "the new token's value, appended to the cache", "Value"),
    "K_cache": StepSpec("decode_{t}_K_cache = [K cache; k_{t}]", r"K^{{\text{{cache}}}}_{{{t}}}",
                        "the keys of tokens 0..{t}: the cache after appending", "Key cache"),
    "V_cache": StepSpec("decode_{t}_V_cache = [V cache; v_{t}]", r"V^{{\text{{cache}}}}_{{{t}}}",
                        "the values of tokens 0..{t}: the cache after appending", "Value cache"),
    "scores": StepSpec("decode_{t}_scores = q_{t}·K_cacheᵀ", r"q_{{{t}}} (K^{{\text{{cache}}}}_{{{t}}})^\top",
                       "the new query against every cached key", "Scores"),
    "logits": StepSpec("decode_{t}_logits = the logits of decode_{t}_scores (scale, ALiBi's bias by "
                       "absolute positions, the soft-cap)",
                       r"z_{{{t}}} = \text{{logits}}(q_{{{t}}} (K^{{\text{{cache}}}}_{{{t}}})^\top)",
                       "what the new token's softmax takes: as row {t} of the full logits", "Logits"),
    "weights": StepSpec("decode_{t}_weights = softmax(scale·decode_{t}_scores)",
                        r"\operatorname{{softmax}}(\text{{scale}} \cdot q_{{{t}}} (K^{{\text{{cache}}}}_{{{t}}})^\top)",
                        "how much the new token takes from each cached token", "Weights"),
    "output": StepSpec("decode_{t}_output = decode_{t}_weights·V_cache", r"o_{{{t}}} = a_{{{t}}} V^{{\text{{cache}}}}_{{{t}}}",
                       "the new token's output: the last row of causal attention", "Output"),
}


#: The work counts of the decode steps (symattn.trace.decode.work_counts), one row
WORK_SPEC = StepSpec("decode_work = [rows with cache, rows without, dot products with cache, without, "
                     "cache elements]", r"\text{work}",
                     "projected rows and score dot products of the decode steps with and without the "
                     "KV cache, and the numbers the cache holds at the end, L·(d_k + d_v)",
                     "Work counts")


#: the backward pass (symattn.trace.backward), filled in per problem by backward_on
BACKWARD_STEPS: dict[str, StepSpec] = backward_table(StepSpec)


def variant_spec(name: str) -> StepSpec | None:
    """The table's entry for a step a variant adds (its block or token filled in), else None."""
    import re

    if name in BACKWARD_STEPS:
        return BACKWARD_STEPS[name]
    if name in ONLINE_STEPS:
        return ONLINE_STEPS[name]
    if name == "decode_work":
        return WORK_SPEC
    found = re.fullmatch(r"running_output_(\d+)", name)
    if found:
        b = int(found.group(1))
        entry = ONLINE_STEPS["running_output_{b}"]
        if b == 0:      # the first block: nothing before it to rescale
            return StepSpec("running_output_0 = Σ_(block 0) e^(scaled − running_max)·V",
                            r"O^{(0)}_{i} = \sum_{j \in 0} e^{\text{scaled}_{ij} - m_{i0}} V_j",
                            entry.meaning.format(b=0), entry.title.format(b=0))
        return StepSpec(entry.formula.format(b=b), entry.latex.format(b=b, b_prev=b - 1),
                        entry.meaning.format(b=b), entry.title.format(b=b))
    found = re.fullmatch(r"decode_(\d+)_(\w+)", name)
    if found and found.group(2) in DECODE_STEPS:
        t, entry = int(found.group(1)), DECODE_STEPS[found.group(2)]
        return StepSpec(entry.formula.format(t=t), entry.latex.format(t=t), entry.meaning.format(t=t),
                        entry.title.format(t=t))
    return None


# Sections of a derivation that are not one step
SECTION_TITLES = {"inputs": "Inputs", "softmax": "Softmax, with the max-subtraction trick",
                  "checks": "Checks, proved for this instance"}


def spec(name: str, problem: Problem) -> StepSpec:
    """The table's entry for a step of this problem, its placeholders filled in."""
    if name in LOGIT_STEPS:
        return _logit_spec(name, problem)
    if name in ROPE_STEPS and (problem.rope is not None or name != "scores"):
        return ROPE_STEPS[name]
    variant = None if name in STEPS else variant_spec(name)
    if variant is not None:
        return _variant_on(variant, name, problem)
    given = name in StepName.of_kind(StepKind.PROJECTION) and not problem.projected
    entry = STEPS[f"{name} given" if given else name]
    cross = "X_kv" in problem.inputs
    if name == "scaled":
        latex = (r"\frac{S}{\sqrt{d_k}}" if problem.default_scale
                 else rf"{sympy.latex(problem.scale)} \cdot S")
        return StepSpec(f"scaled = {scale_formula(problem)}", latex, entry.meaning, entry.title,
                        symbol=r"\tilde S")
    logit = logit_step(problem)
    if logit != "scaled" and name in StepName.span(StepName.MASKED, StepName.ROW_SUM):
        return _on_logits(STEPS[name] if problem.sink is None or name not in SINK_STEPS
                          else SINK_STEPS[name], logit)
    if logit != "scaled" and name == "weights":
        entry = SINK_STEPS[name] if problem.sink is not None else entry
        return StepSpec(entry.formula, rf"A = \operatorname{{softmax}}(\text{{{logit}}})",
                        entry.meaning, entry.title)
    if problem.sink is not None and name in SINK_STEPS:
        return SINK_STEPS[name]
    if "{src" in entry.formula or "{src" in entry.latex:
        src = "X_kv" if cross else "X"
        return StepSpec(entry.formula.format(src=src), entry.latex.format(src_tex=r"X_{kv}" if cross else "X"),
                        entry.meaning, entry.title)
    return entry


_ELEMENT_INDEX = re.compile(r"_\{i[jb]?\}$")


def step_symbol(name: str, problem: Problem) -> str:
    """The LaTeX symbol a step's matrix is labelled by (``S``, ``A``, ``Q_{\\text{rot}}``).

    Derived from the step's entry, so every step the engine has gets one: the entry's own
    ``symbol``, else the left side of its LaTeX formula without an element index
    (``A_{ij} = …`` gives ``A``), else the formula itself when it is one name, else the
    step's name as text."""
    entry = spec(name, problem)
    if entry.symbol:
        return entry.symbol
    if " = " in entry.latex:
        return _ELEMENT_INDEX.sub("", entry.latex.split(" = ", 1)[0])
    if entry.latex and not any(c in entry.latex for c in " (+,"):
        return entry.latex
    return r"\text{" + name.replace("_", r"\_") + "}"


# With a sink logit s, online softmax starts from m = s, l = 1 (symattn.trace.online)
ONLINE_SINK_STEPS: dict[str, StepSpec] = {
    "running_max": StepSpec("running_max = max of the sink and the scaled scores seen so far",
                            r"m_{ib} = \max(s, \max_{j \le \text{block } b} \text{scaled}_{ij})",
                            "the running maximum after each block of keys; the sink logit s starts it",
                            "Running maximum"),
    "rescale": StepSpec("rescale = e^(m_(b−1) − m_b), m_(−1) = sink",
                        r"\text{rescale}_{ib} = e^{m_{i,b-1} - m_{ib}}, \; m_{i,-1} = s",
                        "how much the earlier sums shrink when the maximum grows (block 0: from the "
                        "sink's start m = s, l = 1)", "Rescale factors"),
    "running_sum": StepSpec("running_sum = rescale·previous + Σ_(block) e^(scaled − running_max), "
                            "starting from 1 (the sink)",
                            r"l_{ib} = \text{rescale}_{ib}\, l_{i,b-1} + \sum_{j \in b} "
                            r"e^{\text{scaled}_{ij} - m_{ib}}, \; l_{i,-1} = 1",
                            "the softmax denominator of the keys seen so far and the sink, against the "
                            "running maximum", "Running sums"),
}


def _variant_on(entry: StepSpec, name: str, problem: Problem) -> StepSpec:
    """A variant step's entry on this problem's logits (biased, capped) and with its sink."""
    if name in BACKWARD_STEPS:
        return backward_on(entry, name, problem, StepSpec)
    if problem.sink is not None and name in ONLINE_SINK_STEPS:
        entry = ONLINE_SINK_STEPS[name]
    if name.startswith("decode_"):
        return _decode_on(entry, name, problem)
    logit = logit_step(problem)
    if logit == "scaled" or not (name in ONLINE_SINK_STEPS or name.startswith("running_output_")):
        return entry
    return _on_logits(entry, logit)


def _decode_on(entry: StepSpec, name: str, problem: Problem) -> StepSpec:
    """A decode step's entry with a rolling-buffer window, its logits and its sink."""
    import re

    found = re.fullmatch(r"decode_(\d+)_(\w+)", name)
    if found is None:          # decode_work: the counts, the same for every mask
        return entry
    t, part = int(found.group(1)), found.group(2)
    if part in ("K_cache", "V_cache") and problem.window is not None:
        first = max(0, t - problem.window[0] + 1)
        what = "keys" if part == "K_cache" else "values"
        return StepSpec(entry.formula, entry.latex,
                        f"the {what} of tokens {first}..{t}: the rolling buffer after appending and "
                        f"evicting (window W = {problem.window[0]})", entry.title)
    if part == "output" and problem.window is not None:
        return StepSpec(entry.formula, entry.latex, "the new token's output: row {t} of sliding-window "
                        "attention".format(t=t), entry.title)
    if part == "weights":
        logits = "decode_{t}_logits".format(t=t) if (problem.alibi is not None or
                                                      problem.softcap is not None) else None
        formula = f"softmax({logits or entry.formula.split('softmax(')[1][:-1]}"
        formula += ", sink)" if problem.sink is not None else ")"
        meaning = entry.meaning + ("; with the sink's term in the denominator, so they sum to less "
                                   "than 1" if problem.sink is not None else "")
        return StepSpec(f"decode_{t}_weights = {formula}",
                        entry.latex if logits is None else rf"\operatorname{{softmax}}(z_{{{t}}})",
                        meaning, entry.title)
    return entry


def logit_step(problem: Problem) -> str:
    """The step the softmax takes: capped, biased or scaled."""
    if problem.softcap is not None:
        return "capped"
    return "biased" if problem.alibi is not None else "scaled"


def _on_logits(entry: StepSpec, logit: str) -> StepSpec:
    """A softmax step's entry with the logits in place of the scaled scores."""
    return StepSpec(entry.formula.replace("scaled", logit), entry.latex.replace("scaled", logit),
                    entry.meaning, entry.title)


def _logit_spec(name: str, problem: Problem) -> StepSpec:
    from symattn.exact.sympytext import unicode_text

    entry = LOGIT_STEPS[name]
    if name == "bias":
        alibi = problem.alibi
        assert alibi is not None         # a trace has a bias step only with ALiBi
        slope = unicode_text(alibi.slope)
        slope = slope if alibi.slope.is_Atom else f"({slope})"
        distance, distance_tex = ("|i − j|", "|i - j|") if alibi.symmetric else ("(i − j)", "(i - j)")
        return StepSpec(entry.formula.format(slope=slope, distance=distance),
                        entry.latex.format(slope_tex=sympy.latex(alibi.slope), distance_tex=distance_tex),
                        entry.meaning, entry.title)
    if name == "capped":
        logit = "biased" if problem.alibi is not None else "scaled"
        assert problem.softcap is not None   # ... and a capped step only with a soft-cap
        cap = unicode_text(problem.softcap)
        cap = cap if problem.softcap.is_Atom else f"({cap})"
        return StepSpec(entry.formula.format(cap=cap, logit=logit),
                        entry.latex.format(cap_tex=sympy.latex(problem.softcap), logit=logit),
                        entry.meaning, entry.title)
    return entry


def scale_form(problem: Problem) -> tuple[Fraction, int | None] | None:
    """The scale as ``c/√d_k`` (c rational), or a rational ``(c, None)``; None if neither."""
    if problem.scale.is_Rational:
        return Fraction(int(problem.scale.p), int(problem.scale.q)), None
    c = sympy.expand(problem.scale * sympy.sqrt(problem.d_k))
    if c.is_Rational:
        return Fraction(int(c.p), int(c.q)), problem.d_k
    return None


def scale_formula(problem: Problem) -> str:
    """How the scaling step is written: ``scores / √d_k``, ``5 · scores / √d_k``, ``scores``."""
    from symattn.exact.sympytext import unicode_text

    if problem.default_scale:
        return "scores / √d_k"
    form = scale_form(problem)
    if form is None:
        return f"{unicode_text(problem.scale)} · scores"
    c, radicand = form
    factor = "" if c == 1 else f"{_fraction_text(c)} · "
    if radicand is None:
        return f"{factor}scores" if factor else "scores (no scaling)"
    return f"{factor}scores / √d_k"


def _fraction_text(c: Fraction) -> str:
    sign = "−" if c < 0 else ""
    return f"{sign}{abs(c.numerator)}" + ("" if c.denominator == 1 else f"/{c.denominator}")
