"""Worksheet templates: named problems with hand-friendly numbers, one per variant of attention.

``symattn worksheet --template rope`` makes the template's own sheet (version A);
with ``--versions N --seed S`` it makes N random versions of the same shape, each
keeping the variant (``worksheet_random.spec_from_problem``), and the sheet asks
the variant's own steps (``worksheet_questions.default_questions``).  A template is
an ordinary problem file: ``template_text(name)`` is a starting point for a
teacher's own (``symattn worksheet my-rope.toml --versions 30 --seed 1`` keeps its
variant keys the same way).

The numbers are chosen so every step can be worked by hand: RoPE turns by
multiples of π/2 and π/3 (cosines 0, ±1, ±1/2, sines ±√3/2), d_k = 4 wherever the
scale matters (1/√4 = 1/2), one or two decode steps after a short prompt, two key
blocks of two in the online softmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from symattn.errors import ProblemError

if TYPE_CHECKING:
    from symattn.problem.problem import Problem

__all__ = ["Template", "TEMPLATES", "template_names", "template_text", "load_template"]


@dataclass(frozen=True)
class Template:
    """One worksheet template: its name, one line on what it teaches, and its problem file."""

    name: str
    about: str
    toml: str


def _t(name: str, about: str, body: str) -> Template:
    return Template(name, about, f'about = "{about}"\n{body.strip()}\n')


TEMPLATES: dict[str, Template] = {t.name: t for t in (
    _t("plain", "Scaled dot-product attention, the lesson's shape (d_k = 4, so the scale is 1/2).", """
title = "Scaled dot-product attention"
tokens = ["I", "love", "cats"]
Q = [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]]
K = [[-1, 0, 0, 1], [0, 0, 1, 1], [0, -1, 0, -1]]
V = [[1, 0], [0, 1], [1, 1]]
"""),
    _t("rope", "RoPE with θ = π/2 and π/3: every angle is a multiple of π/2 or π/3, so each rotated "
               "entry is short (0, ±1, ±1/2, ±√3/2 times the inputs).", """
title = "RoPE by hand: quarter and sixth turns"
tokens = ["I", "love", "cats"]
rope = { layout = "interleaved", theta = ["pi/2", "pi/3"] }
Q = [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]]
K = [[-1, 0, 0, 1], [0, 0, 1, 1], [0, -1, 0, -1]]
V = [[1, 0], [0, 1], [1, 1]]
"""),
    _t("alibi", "ALiBi with slope 1/2, causal: bias −(i − j)/2 on the scaled scores.", """
title = "ALiBi by hand: slope 1/2"
tokens = ["I", "love", "cats"]
mask = "causal"
alibi = { slope = "1/2" }
Q = [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]]
K = [[-1, 0, 0, 1], [0, 0, 1, 1], [0, -1, 0, -1]]
V = [[1, 0], [0, 1], [1, 1]]
"""),
    _t("window", "A sliding window of W = 2 keys (Mistral's convention: itself and the one before).", """
title = "Sliding window by hand: W = 2"
tokens = ["the", "cat", "sat", "down"]
mask = { window = 2 }
Q = [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1], [1, 0, 0, 1]]
K = [[-1, 0, 0, 1], [0, 0, 1, 1], [0, -1, 0, -1], [1, 0, 1, 0]]
V = [[1, 0], [0, 1], [1, 1], [2, 0]]
"""),
    _t("sink", "A sink logit s = 0, the off-by-one softmax: +1 in every denominator.", """
title = "Off-by-one softmax by hand: sink 0"
tokens = ["I", "love", "cats"]
sink = 0
Q = [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]]
K = [[-1, 0, 0, 1], [0, 0, 1, 1], [0, -1, 0, -1]]
V = [[1, 0], [0, 1], [1, 1]]
"""),
    _t("kv-cache", "KV-cache decoding: a 3-token prompt, then one decode step against the cache.", """
title = "KV-cache decoding by hand"
tokens = ["I", "love", "cats", "too"]
decode = { prefill = 3 }
X = [[1, 0], [0, 1], [1, 1], [2, 0]]
W_q = [[1, 0, 1, 0], [0, 1, 1, -1]]
W_k = [[1, 1, 0, 0], [0, 1, -1, 1]]
W_v = [[1, 0], [1, 1]]
"""),
    _t("backward", "The backward pass by hand: two tokens, d_k = 4 (scale 1/2) and dL/dO given; "
                   "dV, dP, D, dS, dQ and dK.", """
title = "The backward pass by hand"
tokens = ["I", "cats"]
Q = [[0, 1, 0, -1], [0, 1, -1, 0]]
K = [[-1, 1, 0, 1], [0, -1, 0, 0]]
V = [[0, 2], [1, 1]]
backward = { grad_output = [[1, -1], [1, 0]] }
"""),
    _t("online-softmax", "FlashAttention's online softmax with two key blocks of two: running "
                         "maximum, rescale, running sum.", """
title = "Online softmax by hand: two blocks"
tokens = ["q1", "q2"]
key_tokens = ["k1", "k2", "k3", "k4"]
scale = 1
tiles = 2
Q = [[1, 0], [1, 1]]
K = [[2, 0], [0, 1], [1, 2], [-1, 0]]
V = [[1, 0], [0, 1], [1, 1], [2, 0]]
"""),
)}


def template_names() -> list[str]:
    """The names of the worksheet templates."""
    return list(TEMPLATES)


def template_text(name: str) -> str:
    """The problem file of a template (its version A)."""
    if name not in TEMPLATES:
        raise ProblemError(f"no worksheet template {name!r}; the templates are {', '.join(TEMPLATES)}")
    return TEMPLATES[name].toml


def load_template(name: str) -> "Problem":
    """A template's problem (its version A)."""
    from symattn.problem.problem import Problem   # loaded here: --help lists templates without SymPy

    return Problem.from_toml_text(template_text(name), source=f"template {name!r}")
