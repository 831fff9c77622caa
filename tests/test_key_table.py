"""The key table (symattn/problem/keys/table.py) is honoured everywhere a key must be known:
the unknown-key error, Problem's keywords, subs and rebuilt, the multi-head per-head and shared
keys, worksheet versions and the README's table of problem-file keys."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import sympy

from symattn.errors import ProblemError
from symattn.heads.heads import MULTIHEAD_KEYS, MultiHeadProblem
from symattn.heads.keys import VARIANT_KEYS
from symattn.problem.keys.table import (KEYS, KEY_NAMES, ParsedKeys, heads_shared_keys,
                                        per_head_keys, read_order, substitute, version_keys)
from symattn.problem.problem import PROBLEM_KEYS, Problem
from symattn.classroom.worksheets.versions import spec_from_problem, variant_values

ROOT = Path(__file__).resolve().parents[1]


def test_the_unknown_key_error_lists_every_key_of_the_table_in_its_order():
    assert PROBLEM_KEYS == KEY_NAMES == tuple(k.name for k in KEYS)
    with pytest.raises(ProblemError) as err:
        Problem.from_dict({"Q": [[1]], "K": [[1]], "V": [[1]], "bogus": 1}, source="f.toml")
    # the message users have seen since before the table (byte for byte)
    assert str(err.value) == (
        "f.toml: unknown key 'bogus'; the keys are title, about, X, W_q, W_k, W_v, X_kv, Q, K, V, "
        "tokens, key_tokens, scale, mask, rope, sink, alibi, softcap, symbols, tiles, decode, backward")
    for key in KEYS:
        assert f", {key.name}," in f", {str(err.value).split('the keys are ')[1]},"


def test_problem_takes_every_keyword_row_and_nothing_else():
    params = inspect.signature(Problem).parameters
    assert list(params) == [k.name for k in KEYS if k.keyword]
    assert all(params[k.name].default == k.default for k in KEYS if k.keyword)
    assert [k.name for k in KEYS if not k.keyword] == ["about"]
    with pytest.raises(TypeError, match=r"^Problem.__init__\(\) got an unexpected keyword argument 'sofcap'$"):
        Problem(Q=[[1]], K=[[1]], V=[[1]], sofcap=5)
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        Problem([[1]])   # type: ignore[misc]


def _numeric() -> Problem:
    return Problem(title="t", X=[[1, 0], [0, 1], [1, 1]], W_q=[[1, 0], [0, 1]], W_k=[[1, 1], [0, 1]],
                   W_v=[[1], [2]], tokens=["a", "b", "c"], scale="1/2", sink=0, softcap=5,
                   alibi={"slope": "1/4", "symmetric": True}, tiles=[1], decode={"prefill": 2},
                   backward={"loss": "sum"})


def _symbolic() -> Problem:
    return Problem(Q=[["a", 1], [0, 1]], K=[[1, 0], [1, "a"]], V=[[1], [2]], symbols=["a"],
                   scale="a/2", sink="a - 2", alibi={"slope": "a/8"}, softcap=3,
                   rope={"theta": ["pi/2"]}, mask="causal",
                   backward={"grad_output": [["a"], [1]]}, key_tokens=["k", "l"])


def test_each_reader_sets_only_typed_attributes_and_the_problem_has_them_all():
    # the table's own attributes and those a key family types beside its rows (LogitKeys)
    annotated = {a for cls in ParsedKeys.__mro__ for a in vars(cls).get("__annotations__", {})}
    assert {"tokens", "scale", "sink", "alibi", "softcap", "backward"} <= annotated
    for p in (_numeric(), _symbolic()):
        assert annotated <= set(vars(p)), annotated - set(vars(p))
    readers = {k.name for k in [*read_order(False), *read_order(True)]}
    assert readers == {k.name for k in KEYS if k.read is not None}
    assert readers == {k.name for k in KEYS if k.kind == "key"}
    # the order they are read in: decode before the mask it implies, RoPE before decode
    order = [k.name for k in [*read_order(False), *read_order(True)]]
    assert order.index("rope") < order.index("decode") < order.index("mask") < order.index("tiles")


def test_subs_replaces_the_symbols_of_every_key_and_keeps_the_rest():
    p = _symbolic()
    assert [str(x) for x in p.free_symbols] == ["a"]
    a = next(iter(p.free_symbols))          # a real symbol, as the safe parser makes it
    q = p.subs({"a": 2})
    # independent values: a = 2 by hand
    assert q.scale == 1 and q.sink == 0 and q.alibi is not None and q.alibi.slope == sympy.Rational(1, 4)
    assert q.Q_given == sympy.Matrix([[2, 1], [0, 1]]) and q.softcap == 3
    assert q.backward is not None and q.backward.value["grad_output"] == sympy.Matrix([[2], [1]])
    assert q.free_symbols == frozenset()
    for key in KEYS:
        getter = key.as_given or key.value
        if getter is None:
            continue
        want = substitute(getter(p), {a: 2}) if key.substitute else getter(p)
        assert getter(q) == want, key.name
    n = _numeric()
    m = n.subs({})
    assert (m.tiles, m.prefill, m.title, m.scale_given) == (n.tiles, n.prefill, "t", True)


def test_rebuilt_keeps_the_rows_it_must_and_drops_tiles_decode_and_title():
    for p in (_numeric(), _symbolic()):
        r = p.rebuilt()
        for key in KEYS:
            if key.value is not None and key.rebuilt:
                assert key.value(r) == key.value(p), key.name
        assert (r.tiles, r.prefill, r.title) == (None, None, None)
    p = _numeric()
    assert p.variant_keys == {"sink": 0, "alibi": {"slope": sympy.Rational(1, 4), "symmetric": True},
                              "softcap": 5}
    assert p.rebuilt(sink=None, softcap=None).variant_keys == {"sink": None, "softcap": None,
                                                               "alibi": p.variant_keys["alibi"]}


def test_multihead_files_take_the_per_head_and_shared_keys_of_the_table():
    assert VARIANT_KEYS == per_head_keys() == ("mask", "rope", "alibi", "softcap", "sink", "tiles", "decode")
    assert set(VARIANT_KEYS) <= set(MULTIHEAD_KEYS) and set(heads_shared_keys()) <= set(MULTIHEAD_KEYS)
    assert heads_shared_keys() == ("X_kv", "tokens", "key_tokens", "scale", "backward")
    plain = {"mask": "causal", "rope": {"theta": ["pi/2"]}, "alibi": {"slope": "1/2"}, "softcap": 4,
             "sink": 0, "tiles": 1, "decode": {"prefill": 1}}
    assert set(plain) == set(VARIANT_KEYS)
    base = {"X": [[1, 0], [0, 1], [1, 1]], "heads": 2, "W_q": [[1, 0, 0, 1], [0, 1, 1, 0]],
            "W_k": [[1, 0], [0, 1]], "W_v": [[1, 0], [1, 1]], "kv_heads": 1}
    for key, value in plain.items():      # each per-head key, set in one [[head]] table only
        if key == "decode":
            mh = MultiHeadProblem.from_dict({**base, "head": [{key: value}, {}]})
        else:
            mh = MultiHeadProblem.from_dict({**base, "head": [{}, {key: value}]})
        has = [getattr(p, "prefill" if key == "decode" else key) is not None for p in mh.head_problems]
        assert has == ([True, False] if key == "decode" else [False, True]), key
    with pytest.raises(ProblemError) as err:
        MultiHeadProblem.from_dict({**base, "head": [{"scale": 1}, {}]})
    assert str(err.value).endswith("a [[head]] table holds only the variant keys "
                                   "mask, rope, alibi, softcap, sink, tiles, decode")
    shared = MultiHeadProblem.from_dict({**base, "scale": "1/3", "tokens": ["x", "y", "z"]})
    assert all(p.scale == sympy.Rational(1, 3) and p.tokens == ("x", "y", "z") for p in shared.head_problems)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sofcap'"):
        MultiHeadProblem.split(X=[[1]], W_q=[[1]], W_k=[[1]], W_v=[[1]], heads=1, sofcap=3)


def test_worksheet_versions_keep_the_version_keys_in_their_order():
    assert [k.name for k in version_keys()] == ["alibi", "sink", "softcap", "tiles", "decode", "backward"]
    p = _numeric()
    assert variant_values(p) == (("alibi", {"slope": "1/4", "symmetric": True}), ("sink", 0),
                                 ("softcap", 5), ("tiles", [1]), ("decode", {"prefill": 2}),
                                 ("backward", {"loss": "sum"}))
    assert spec_from_problem(p).variants == variant_values(p)
    with_dO = Problem(Q=[[1, 0], [0, 1]], K=[[1, 0], [0, 1]], V=[[1, 2], [3, 4]],
                      backward={"grad_output": [[1, 0], [0, -1]]})
    assert variant_values(with_dO) == (("backward", {"grad_output": [[1, 0], [0, -1]]}),)
    plain_alibi = Problem(Q=[[1]], K=[[1]], V=[[1]], alibi={"slope": "1/2"})
    assert variant_values(plain_alibi) == (("alibi", {"slope": "1/2"}),)
    for key in KEYS:     # the keys versions draw or leave out themselves
        if not key.in_versions:
            assert key.name not in dict(variant_values(p))


def test_every_key_is_documented_in_the_readme_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Problem files", 1)[1].split("### Variants", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {name for line in rows for name in re.findall(r"`([A-Za-z_]+)`", line.split("|")[1])}
    assert set(KEY_NAMES) <= named, set(KEY_NAMES) - named


def test_the_heads_help_names_the_per_head_keys():
    """The help is built without importing SymPy, so it keeps its own words: they must match."""
    import argparse

    from symattn.commands.heads import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    help_text = " ".join(parser._subparsers._group_actions[0].choices["heads"].description.split())
    assert f"variant keys {', '.join(per_head_keys())} at the top" in help_text
