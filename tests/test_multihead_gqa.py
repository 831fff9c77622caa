"""Multi-head files with Q, K and V per head (the GQA exercise), the grouped-query mapping
i // (h / h_kv) and the mistake gqa-tiled (i mod h_kv), against float64 written here."""

import json
import math
import random

import pytest

import symattn as sa
from symattn.cli import main
from symattn.errors import ProblemError
from symattn.heads.heads import MultiHeadProblem, attend_heads, heads_example_text, load_heads_example
from symattn.heads.check import GQA_TILED, HeadsChecker

np = pytest.importorskip("numpy")


def float_heads(Qs, Ks, Vs, kv_of, scale=None, causal=False):
    """Each query head's weights and output in float64, head i reading K, V number kv_of[i]."""
    weights, outputs = [], []
    for i, Q in enumerate(Qs):
        Q, K, V = (np.array(a, dtype=np.float64) for a in (Q, Ks[kv_of[i]], Vs[kv_of[i]]))
        S = Q @ K.T * (1 / math.sqrt(Q.shape[1]) if scale is None else scale)
        if causal:
            S = np.where(np.tril(np.ones(S.shape, dtype=bool)), S, -np.inf)
        E = np.exp(S - S.max(axis=1, keepdims=True))
        A = E / E.sum(axis=1, keepdims=True)
        weights.append(A)
        outputs.append(A @ V)
    return weights, outputs


def as_float(rows):
    return np.array([[float(d.as_fraction()) for d in row] for row in rows])


def toml_matrix(M):
    return "[" + ", ".join("[" + ", ".join(str(x) for x in row) + "]" for row in M) + "]"


@pytest.mark.parametrize("seed, heads, kv_heads, layout", [
    (1, 4, 2, "kv_head"), (2, 2, 1, "top"), (3, 6, 3, "kv_head"), (4, 3, 3, "own"), (5, 4, 1, "top")])
def test_direct_heads_match_float64(seed, heads, kv_heads, layout):
    rng = random.Random(seed)
    n, d = 3, 2
    rand = lambda r, c: [[rng.randint(-3, 3) for _ in range(c)] for _ in range(r)]  # noqa: E731
    Qs = [rand(n, d) for _ in range(heads)]
    Ks, Vs = [rand(n, d) for _ in range(kv_heads)], [rand(n, d) for _ in range(kv_heads)]
    causal = seed % 2 == 1
    text = 'tokens = ["a", "b", "c"]\n' + ('mask = "causal"\n' if causal else "")
    if layout == "top":
        text += f"K = {toml_matrix(Ks[0])}\nV = {toml_matrix(Vs[0])}\n"
    text += "".join(f"[[head]]\nQ = {toml_matrix(Q)}\n"
                    + (f"K = {toml_matrix(Ks[h])}\nV = {toml_matrix(Vs[h])}\n" if layout == "own" else "")
                    for h, Q in enumerate(Qs))
    if layout == "kv_head":
        text += "".join(f"[[kv_head]]\nK = {toml_matrix(K)}\nV = {toml_matrix(V)}\n" for K, V in zip(Ks, Vs))
    problem = MultiHeadProblem.from_toml_text(text)
    group = heads // kv_heads
    assert problem.kv_of == tuple(i // group for i in range(heads))       # PyTorch enable_gqa
    result = attend_heads(problem)
    weights, outputs = float_heads(Qs, Ks, Vs, problem.kv_of, causal=causal)
    for h, trace in enumerate(result.traces):
        assert np.allclose(as_float(trace.weights.decimals(15)), weights[h], rtol=1e-12, atol=1e-13)
        assert np.allclose(as_float(trace.output.decimals(15)), outputs[h], rtol=1e-12, atol=1e-13)
    # the tiled problem: head i reads key/value head i mod kv_heads
    tiled = attend_heads(problem.tiled())
    tw, to = float_heads(Qs, Ks, Vs, [i % kv_heads for i in range(heads)], causal=causal)
    for h, trace in enumerate(tiled.traces):
        assert np.allclose(as_float(trace.output.decimals(15)), to[h], rtol=1e-12, atol=1e-13)


def test_gqa_exercise_by_hand():
    p = load_heads_example("gqa-exercise")
    assert (p.heads, p.kv_heads, p.kv_of, p.direct) == (4, 2, (0, 0, 1, 1), True)
    r = attend_heads(p)
    e = math.e
    # head 0: q = [1, 0] against K0 rows [1, 0], [0, 1], [0, 0]: scores 1, 0, 0 -> e/(e + 2), 1/(e + 2), 1/(e + 2)
    assert [str(x) for x in r.head(0).weights.decimals(3)[0]] == ["0.576", "0.212", "0.212"]
    assert f"{e / (e + 2):.3f}" == "0.576" and f"{1 / (e + 2):.3f}" == "0.212"
    # output: 0.576·[2, 0] + 0.212·[0, 2] + 0.212·[1, 1] = [(2e + 1)/(e + 2), 3/(e + 2)]
    assert [str(x) for x in r.head(0).output.decimals(3)[0]] == ["1.36", "0.636"]
    assert f"{(2 * e + 1) / (e + 2):.2f}" == "1.36" and f"{3 / (e + 2):.3f}" == "0.636"
    # head 2 (q = [1, 1]) reads K1 rows [0, 0], [1, 0], [0, 1]: scores 0, 1, 1
    assert [str(x) for x in r.head(2).weights.decimals(3)[0]] == ["0.155", "0.422", "0.422"]
    # tiled, head 1 (q = [0, 1]) reads K1, V1: scores 0, 0, 1, output (4 + 2e)/(2 + e) = 2 exactly
    t = attend_heads(p.tiled())
    import sympy

    assert [sympy.simplify(x - 2) for x in t.head(1).output.matrix] == [0, 0]
    assert [str(x) for x in t.head(1).output.decimals(3)[0]] == ["2", "2"]


def test_gqa_tiled_is_named_and_right_figures_stay_right():
    checker = HeadsChecker(load_heads_example("gqa-exercise"))
    v = checker.check("head 1: output", "2, 2")
    assert v.code == "mistake" and v.mistake == GQA_TILED and "i // 2" in v.message
    assert checker.check("head 2: weights", "0.422, 0.422, 0.155").mistake == GQA_TILED
    assert checker.check("head 2: weights", "0.155, 0.422, 0.422").code == "rounded"
    assert checker.check("head 1: output", "0.636, 1.36").right
    # heads 0 and 3 read the same key/value head either way: no gqa-tiled to name
    assert checker.check("head 3: output", "2.84, 1.16").right
    assert checker.check("head 0: output", "0.64, 1.4").mistake != GQA_TILED
    assert checker.check("head 9: output", "1").code == "invalid"
    assert "head H: TARGET" in checker.check("output", "1").message


def test_single_head_mistakes_are_named_inside_a_head():
    # default scale 1/√2: a figure computed without the scale is 'unscaled', through the head's checker
    text = "tokens = [\"a\", \"b\"]\n[[head]]\nQ = [[1, 2], [0, 1]]\n[[head]]\nQ = [[2, 0], [1, 1]]\n" \
           "[[kv_head]]\nK = [[1, 0], [2, 1]]\nV = [[1, 0], [0, 3]]\n"
    p = MultiHeadProblem.from_toml_text(text)
    w, _ = float_heads([[[2, 0], [1, 1]]], [[[1, 0], [2, 1]]], [[[1, 0], [0, 3]]], [0], scale=1)
    written = ", ".join(f"{x:.3f}" for x in w[0][0])
    assert HeadsChecker(p).check("head 1: weights[a]", written).mistake == "unscaled"


@pytest.mark.parametrize("text, words", [
    ('X = [[1]]\n[[head]]\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n', "leave out X"),
    ('K = [[1]]\n[[head]]\nQ = [[1]]\n', "both K and V"),
    ('K = [[1]]\nV = [[1]]\n[[head]]\nQ = [[1]]\nK = [[1]]\n', "K, V are at the top"),
    ('[[head]]\nQ = [[1]]\n[[kv_head]]\nK = [[1]]\nW_v = [[1]]\n', "exactly K and V"),
    ('[[head]]\nQ = [[1]]\n', "K is missing"),
    ('[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\n[[head]]\nQ = [[1]]\n[[kv_head]]\nK = [[1]]\nV = [[1]]\n'
     '[[kv_head]]\nK = [[1]]\nV = [[1]]\n', "not a multiple"),
    ('[[head]]\nQ = [[1, 0]]\n[[kv_head]]\nK = [[1]]\nV = [[1]]\n', "head 0"),
])
def test_direct_file_errors_are_one_line(text, words):
    with pytest.raises(ProblemError) as exc:
        MultiHeadProblem.from_toml_text(text)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_cli_example_show_figures_and_formats(capsys, tmp_path):
    assert main(["heads", "--example", "gqa-exercise", "--show"]) == 0
    assert capsys.readouterr().out == heads_example_text("gqa-exercise")
    assert main(["heads", "--example", "gqa-exercise", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [h["kv_head"] for h in data["per_head"]] == [0, 0, 1, 1]
    assert data["per_head"][0]["weights"]["decimal"] == [["0.576", "0.212", "0.212"]]
    assert main(["heads", "--example", "gqa-exercise", "--figure", "head 1: output", "2, 2"]) == 1
    out = capsys.readouterr().out
    assert "mistake: gqa-tiled" in out and "1 figure" in out
    assert main(["heads", "--example", "gqa-exercise", "--figure", "head 1: output", "0.636, 1.36",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["verdict"] == "rounded"
    assert main(["heads", "--example", "gqa-exercise", "--figure", "head 1: output", "2, 2",
                 "--format", "html", "-o", str(tmp_path / "v.html")]) == 1
    assert "gqa-tiled" in (tmp_path / "v.html").read_text(encoding="utf-8")
    assert main(["heads", "--example", "nope"]) == 2
    assert "gqa-exercise" in capsys.readouterr().err


def test_gqa_exercise_latex_compiles(tmp_path, capsys):
    from test_latex import overfull_boxes
    from test_pdf import need_tex

    need_tex()
    assert main(["heads", "--example", "gqa-exercise", "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert "reads key/value head 1" in tex
    assert [x for x in overfull_boxes(tex, tmp_path) if x > 5] == []
