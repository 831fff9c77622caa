"""Multi-head, grouped- and multi-query attention: exact heads through the engine,
checked against an independent float64 computation written here with numpy."""

import json
import random
import subprocess
import sys

import pytest
import sympy

import symattn as sa
from symattn.heads.heads import DEMO_TOML, MultiHeadProblem, attend_heads
from clirun import cli

np = pytest.importorskip("numpy")


def numpy_mha(X, Wq, Wk, Wv, Wo, heads, kv_heads, mask=None):
    """Textbook multi-head attention in float64 (independent of symattn)."""
    X, Wq, Wk, Wv = (np.array(a, dtype=np.float64) for a in (X, Wq, Wk, Wv))
    dq, dkv = Wq.shape[1] // heads, Wk.shape[1] // kv_heads
    dv = Wv.shape[1] // kv_heads
    outs, weights = [], []
    for h in range(heads):
        g = h // (heads // kv_heads)
        Q = X @ Wq[:, h * dq:(h + 1) * dq]
        K = X @ Wk[:, g * dkv:(g + 1) * dkv]
        V = X @ Wv[:, g * dv:(g + 1) * dv]
        S = Q @ K.T / np.sqrt(dq)
        if mask is not None:
            S = np.where(np.array(mask, dtype=bool), S, -np.inf)
        S = S - S.max(axis=1, keepdims=True)
        A = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
        weights.append(A)
        outs.append(A @ V)
    concat = np.concatenate(outs, axis=1)
    out = concat @ np.array(Wo, dtype=np.float64) if Wo is not None else concat
    return concat, out, np.mean(weights, axis=0)


def as_float(rows):
    return np.array([[float(d.as_fraction()) for d in row] for row in rows])


@pytest.mark.parametrize("seed, heads, kv_heads", [(1, 2, 2), (2, 4, 2), (3, 4, 1), (4, 3, 3), (5, 2, 1)])
def test_multihead_and_gqa_equal_an_independent_float64_computation(seed, heads, kv_heads):
    rng = random.Random(seed)
    n, d_model, d = 3, 4, 2
    rand = lambda r, c: [[rng.randint(-3, 3) for _ in range(c)] for _ in range(r)]  # noqa: E731
    X, Wq, Wk, Wv = rand(n, d_model), rand(d_model, heads * d), rand(d_model, kv_heads * d), \
        rand(d_model, kv_heads * d)
    Wo = [[sympy.Rational(rng.randint(-4, 4), 2) for _ in range(3)] for _ in range(heads * d)]
    mask = "causal" if seed % 2 else None
    result = attend_heads(X=X, W_q=Wq, W_k=Wk, W_v=Wv, W_o=Wo, heads=heads, kv_heads=kv_heads, mask=mask)
    concat, out, avg = numpy_mha(X, Wq, Wk, Wv, [[float(x) for x in r] for r in Wo], heads, kv_heads,
                                 mask=[[j <= i for j in range(n)] for i in range(n)] if mask else None)
    assert np.allclose(as_float(result.concat_decimals(15)), concat, rtol=1e-12, atol=1e-12)
    assert np.allclose(as_float(result.output_decimals(15)), out, rtol=1e-12, atol=1e-12)
    assert np.allclose(as_float(result.average_weights_decimals(15)), avg, rtol=1e-12, atol=1e-12)
    assert result.problem.kv_of == tuple(i // (heads // kv_heads) for i in range(heads))


def test_head_zero_of_the_demo_is_the_lesson():
    result = attend_heads(MultiHeadProblem.from_toml_text(DEMO_TOML))
    lesson = sa.attend(sa.load_example("i-love-cats"))
    assert result.head(0).weights.matrix == lesson.weights.matrix
    assert result.head(1).K.matrix == lesson.K.matrix  # the shared key/value head
    # W_o = [I/2; I/2]: the output is the mean of the two heads, exactly
    assert sympy.simplify(result.output[0, 0] - (result.concat[0, 0] + result.concat[0, 3]) / 2) == 0
    assert [str(d) for d in result.output_decimals(3)[0]] == ["1.92", "6.97", "1.10"]  # (1.8639 + 1.9853)/2 = 1.9246


def test_tables_with_kv_heads_equal_split_projections():
    X = [[1, 0], [0, 1], [1, 1]]
    tables = {"X": X, "head": [{"W_q": [[1, 0], [0, 1]]}, {"W_q": [[0, 1], [1, 0]]}],
              "kv_head": [{"W_k": [[1, 1], [0, 1]], "W_v": [[2, 0], [0, 3]]}]}
    split = {"X": X, "heads": 2, "kv_heads": 1, "W_q": [[1, 0, 0, 1], [0, 1, 1, 0]],
             "W_k": [[1, 1], [0, 1]], "W_v": [[2, 0], [0, 3]]}
    a = attend_heads(MultiHeadProblem.from_dict(tables))
    b = attend_heads(MultiHeadProblem.from_dict(split))
    assert a.concat == b.concat
    assert a.average_weights == b.average_weights


@pytest.mark.parametrize("data, words", [
    ({"X": [[1]], "heads": 3, "kv_heads": 2, "W_q": [[1, 1, 1]], "W_k": [[1, 1]], "W_v": [[1, 1]]},
     "heads = 3 is not a multiple of kv_heads = 2"),
    ({"X": [[1]], "heads": 2, "W_q": [[1, 1, 1]], "W_k": [[1, 1]], "W_v": [[1, 1]]},
     "W_q has 3 columns, not a multiple of heads = 2"),
    ({"X": [[1]], "heads": 1, "W_q": [[1]], "W_k": [[1]], "W_v": [[1]], "W_o": [[1], [2]]},
     "W_o has 2 rows but the concatenated heads have 1 columns"),
    ({"X": [[1]], "head": [{"W_q": [[1]]}]}, "head 0: W_k is missing"),
    ({"X": [[1]], "heads": 1, "W_q": [[1]], "W_k": [[1]], "W_v": [[1]], "nope": 1}, "unknown key 'nope'"),
    ({"X": [[1, 2]], "heads": 1, "W_q": [[1]], "W_k": [[1]], "W_v": [[1]]},
     "head 0: W_q has 1 rows but X has 2 columns"),
])
def test_loader_errors_are_one_line(data, words):
    with pytest.raises(sa.ProblemError) as err:
        MultiHeadProblem.from_dict(data)
    assert words in str(err.value) and "\n" not in str(err.value)


def _run(*args):
    """The command line in-process (tests/clirun.py): no new interpreter to start."""
    return cli(*args)


def test_cli_heads_text_and_json():
    done = _run("heads")
    assert done.returncode == 0, done.stderr
    assert "multi-query attention, 2 query heads over 1 key/value head" in done.stdout
    assert "   I    ⎡    0.136  0.432   0.432 ⎤" in done.stdout  # head 0 is the lesson
    data = json.loads(_run("heads", "--json", "--digits", "5").stdout)
    assert data["heads"] == 2 and data["kv_heads"] == 1
    assert data["per_head"][0]["weights"]["decimal"][0] == ["0.13613", "0.43194", "0.43194"]
    assert data["output"]["shape"] == [3, 3]


def test_cli_heads_bad_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('X = [[1]]\nheads = 2\nW_q = [[1, 1]]\nW_k = [[1]]\nW_v = [[1]]\n')
    done = _run("heads", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "W_k has 1 columns, not a multiple of kv_heads = 2" in done.stderr


def test_facts_on_a_multihead_file(tmp_path):
    path = tmp_path / "mqa.toml"
    path.write_text(DEMO_TOML)
    done = _run("facts", str(path), "--fact", "gqa-equals-repeated-heads", "--json")
    assert done.returncode == 0, done.stderr
    (out,) = json.loads(done.stdout)
    assert out["holds"] is True and "2 query heads over 1 key/value head" in out["checks"][0]


def test_latex_view_shows_the_certified_decimals(capsys):
    """The LaTeX is the heads document printed (issue 10: one document, every format);
    --format latex is a complete document, --latex (as before) its body, which the notebook shows."""
    from symattn import cli
    from symattn.document.build.heads import build_heads_document
    from symattn.document.formats import print_document

    result = attend_heads(MultiHeadProblem.from_toml_text(DEMO_TOML))
    tex = print_document(build_heads_document(result), "latex")
    assert "A_0 \\approx" in tex and "\\text{I} & 0.136 & 0.432 & 0.432 \\\\" in tex
    assert "\\text{love} & 0.000890 & 0.909 & 0.0903 \\\\" in tex
    assert "\\text{I} & 1.92 & 6.97 & 1.10 \\\\" in tex           # concat·W_o, row I
    assert tex.count("\\begin{array}") == 2 * 2 + 3
    body = print_document(build_heads_document(result), "latex", fragment=True)
    assert result._repr_latex_() == body and body in tex
    for argv, want in ((["heads", "--format", "latex"], tex), (["heads", "--latex"], body),
                       (["heads", "--format", "latex", "--fragment"], body)):
        assert cli.main(argv) == 0
        assert capsys.readouterr().out == want


def test_tex_numbers_use_powers_of_ten():
    from symattn.numbers.certify import certify
    from symattn.document.blocks import Decimal
    from symattn.document.printers.latex import LatexPrinter

    assert LatexPrinter().print(Decimal(certify(sympy.Rational(114, 10**9), 3))) == r"1.14 \times 10^{-7}"
    assert LatexPrinter().print(Decimal(certify(sympy.Rational(432, 1000), 3))) == "0.432"


def test_symbols_pass_through_every_head():
    result = attend_heads(X=sa.symbol_matrix("x", 2, 2), W_q=[[1, 0], [0, 1]], W_k=[[1, 0], [0, 1]],
                          W_v=[[1, 0], [0, 1]], heads=2)
    x00, x10 = sympy.symbols("x00 x10", real=True)
    expected = (x00 * sympy.exp(x00 ** 2) + x10 * sympy.exp(x00 * x10)) / (
        sympy.exp(x00 ** 2) + sympy.exp(x00 * x10))
    assert sympy.simplify(result.concat[0, 0] - expected) == 0


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None, derandomize=True)
@given(data=st.data(), layout=st.sampled_from([(2, 2), (2, 1), (4, 2), (4, 1), (3, 1)]),
       n=st.integers(1, 3), d=st.integers(1, 2))
def test_random_heads_match_float64(data, layout, n, d):
    heads, kv_heads = layout
    entry = st.integers(-3, 3)
    mat = lambda r, c: data.draw(st.lists(st.lists(entry, min_size=c, max_size=c),  # noqa: E731
                                          min_size=r, max_size=r))
    d_model = 3
    X, Wq, Wk, Wv = mat(n, d_model), mat(d_model, heads * d), mat(d_model, kv_heads * d), mat(d_model, kv_heads * d)
    Wo = mat(heads * d, 2)
    result = attend_heads(X=X, W_q=Wq, W_k=Wk, W_v=Wv, W_o=Wo, heads=heads, kv_heads=kv_heads)
    concat, out, avg = numpy_mha(X, Wq, Wk, Wv, Wo, heads, kv_heads)
    assert np.allclose(as_float(result.output_decimals(15)), out, rtol=1e-11, atol=1e-11)
    assert np.allclose(as_float(result.average_weights_decimals(15)), avg, rtol=1e-11, atol=1e-11)


def test_the_default_scale_is_written_as_the_lesson_writes_it():
    """1/√3 in every view, as explain's text and LaTeX write it (SymPy's canonical √3/3 before)."""
    from clirun import cli

    text = cli("heads").stdout
    assert "scale 1/√3." in text and "√3/3" not in text
    page = cli("heads", "--format", "html").stdout
    assert "scale <math><mfrac><mn>1</mn><msqrt><mn>3</mn></msqrt></mfrac></math>" in page
    page = cli("explain", "--format", "html").stdout
    assert "<mo>=</mo><mfrac><mn>1</mn><msqrt><mn>3</mn></msqrt></mfrac></mrow></math>.</p>" in page
