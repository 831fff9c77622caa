"""Errors beside ULPs (issue 25's floatref item): relative errors explode at outputs near 0, so the
forward report also gives max |y − x| / max |x| and max |y − x| / Σ_j w_j·|v_j| (the entry's scale).

Reference: a problem whose exact values are rationals worked here with Fractions (equal scores,
weights 1/2), so every figure is known exactly."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from symattn import floatref
from symattn.cli import main


def _problem():
    Q = np.zeros((1, 1), np.float32)
    K = np.zeros((2, 1), np.float32)
    V = np.array([[1.0, 4.0], [-1.0 + 2.0 ** -20, 4.0]], np.float32)
    # exact: O = ½·(v_0 + v_1) = [2^-21, 4]; the kernel is 2^-24 off on the cancelling entry
    out = np.array([[2.0 ** -21 + 2.0 ** -24, 4.0]], np.float32)
    return Q, K, V, out


def test_errors_relative_to_max_abs_and_to_the_scale():
    Q, K, V, out = _problem()
    r = floatref.ulp_report(out, Q, K, V)
    x = [Fraction(1, 2) * (Fraction(1) + Fraction(-1) + Fraction(1, 2 ** 20)), Fraction(4)]
    err = Fraction(float(out[0, 0])) - x[0]
    assert err == Fraction(1, 2 ** 24)
    assert r.max_relative == pytest.approx(float(err / x[0]))            # 0.125: explodes near 0
    assert r.max_ulps == pytest.approx(2.0 ** 20)                        # ulp(2^-21) = 2^-44 in float32
    assert r.max_error_of_max_abs == pytest.approx(float(err / 4), rel=1e-12)
    scale = Fraction(1, 2) * (1 + abs(Fraction(-1) + Fraction(1, 2 ** 20)))
    assert r.max_error_of_scale == pytest.approx(float(err / scale), rel=1e-12)
    data = r.to_json()
    assert data["max_error_relative_to_max_abs"] == r.max_error_of_max_abs
    assert data["max_error_relative_to_scale"] == r.max_error_of_scale


def test_a_correctly_rounded_output_has_small_scaled_errors_and_the_summary_says_so(tmp_path, capsys):
    Q, K, V, _ = _problem()
    ref = floatref.correctly_rounded(Q, K, V)
    r = floatref.ulp_report(ref.output, Q, K, V)
    assert r.max_error_of_max_abs == 0 and r.max_error_of_scale == 0      # both entries exact here
    Q, K, V, out = _problem()
    for name, a in zip(("Q", "K", "V", "out"), (Q, K, V, out)):
        np.save(tmp_path / f"{name}.npy", a)
    files = [str(tmp_path / f"{n}.npy") for n in "QKV"]
    assert main(["floatref", *files, "--candidate", str(tmp_path / "out.npy")]) == 0
    text = capsys.readouterr().out
    assert "max |error| relative to max |O| 1.49e-08, relative to the entry's scale Σ_j w_j·|v_j| 5.96e-08" in text
    assert main(["floatref", *files, "--candidate", str(tmp_path / "out.npy"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_error_relative_to_scale"] == pytest.approx(2.0 ** -24, rel=1e-6)
