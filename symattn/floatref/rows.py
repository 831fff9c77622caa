"""The arb path of floatref: the rows float64 enclosures leave undecided, from the floats.

Every float is m·2^e, so a matrix of floats is an integer matrix times one
power of two (:func:`dyadic_matrix`), and the scores q·k of the undecided
rows are exact integers from one ``fmpz_mat`` product.  Per row, at a
precision of the one loop (:func:`symattn.numbers.precision.precisions`):
t_j = s·d_j·2^g + m_j as balls (one ``arb_mat`` scaling), w_j = e^(t_j − c)
(c: any exact number; the row's largest midpoint), and Σ w_j·[v_j | 1] in
one ``arb_mat`` product, which gives the row sum Z and the output numerators
together.  An entry is decided when its whole ball rounds to one value of
the format; the rest go round again at twice the precision.  Cost: per
undecided row, O(S·(E + Ev)); per head only turning K and V into integers.

Which values are rational (rounded exactly with integers, never by balls):
the scores t_j are algebraic (s is a float or 1/√E, d and m rational), and by
Lindemann–Weierstrass e^(y_1), …, e^(y_n) for distinct algebraic y are
linearly independent over the algebraic numbers.  Group a row's allowed
keys by equal t.  A weight e^(t_j)/Σ_k e^(t_k) is then rational only when
there is one group (every weight 1/count); an output Σ_g e^(y_g)·S_g /
Σ_g n_g·e^(y_g) (S_g the group's sum of v, n_g its size) is algebraic only
when every S_g − o·n_g is 0, that is when every group has the same mean of
v, and is then that mean.  Everything else is transcendental, never on a
rounding boundary, and the balls decide it, except an output a finite sentinel
mask puts within e^(−1e9) of a boundary, which no ball sees: decided by the
sign of its distance to the boundary (:mod:`symattn.floatref.ties`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import flint

from symattn.floatref.binary import BinaryFormat, round_ball, round_fraction
from symattn.floatref.errors import FloatRefError
from symattn.floatref.ties import decide_by_sign
from symattn.numbers.precision import precision, precisions, undecided

#: the arb path holds K and V of one head as integers: at most this many entries (S·(E + Ev))
MAX_KEY_ENTRIES = 1 << 25
#: arb balls held at once (rows of one chunk × keys)
CHUNK_ENTRIES = 1 << 18


def dyadic_matrix(a) -> tuple[list[list[int]], int]:
    """Integers N and an exponent g with a = N·2^g exactly (``a``: a 2-D float64 array)."""
    import numpy as np

    a = np.ascontiguousarray(a, dtype=np.float64)
    nz = a[a != 0]
    if nz.size == 0:
        return [[0] * a.shape[1] for _ in range(a.shape[0])], 0
    m, e = np.frexp(nz)                                   # nz = m·2^e, 1/2 ≤ |m| < 1
    sig = np.abs(np.ldexp(m, 53)).astype(np.int64)        # the 53-bit significand, exactly
    low = np.frexp((sig & -sig).astype(np.float64))[1] - 1  # its trailing zero bits
    g = int((e - 53 + low).min())
    top = int(e.max())
    if top - g <= 62:                                     # every integer fits in int64
        return np.ldexp(a, -g).astype(np.int64).tolist(), g
    rows = []
    for row in a.tolist():
        out = []
        for x in row:
            n, d = x.as_integer_ratio()                   # d a power of two dividing 2^-g
            out.append(_shift(n, d, g))
        rows.append(out)
    return rows, g


def _shift(n: int, d: int, g: int) -> int:
    """n/d · 2^-g, an integer (d is a power of two, n/d a multiple of 2^g)."""
    k = -g - (d.bit_length() - 1)
    return n << k if k >= 0 else n >> -k


def _scale_parts(pr) -> tuple[Fraction | None, object]:
    """(the scale as a Fraction when it is rational, else None; the exact scale)."""
    s = pr.scale
    if isinstance(s, Fraction):
        return s, s
    if getattr(s, "is_Rational", False):
        return Fraction(int(s.p), int(s.q)), s
    return None, s


def _scale_ball(exact) -> flint.arb:
    if isinstance(exact, Fraction):
        return flint.arb(flint.fmpq(exact.numerator, exact.denominator))
    # the default scale 1/√E (a SymPy expression): the one irrational scale normalise makes
    import sympy

    radicand = sympy.Integer(1) / exact ** 2
    if not radicand.is_Integer:  # pragma: no cover - normalise only makes 1/√E
        raise FloatRefError(f"scale {exact} is not a float or 1/√E")
    return flint.arb(int(radicand)).rsqrt()


def decide_all(pr, w, w_ok, o, o_ok, fmt: BinaryFormat) -> int:
    """Fill every undecided entry in place (arrays (B..., L, ·)); returns how many there were.

    Heads that share K and V (grouped-query heads, broadcast batch dimensions) share
    the integer K and V."""
    import numpy as np

    from symattn.limits import MAX_FLOAT_ARB_ENTRIES

    pending = int((~w_ok).sum() + (~o_ok).sum())
    if pending > MAX_FLOAT_ARB_ENTRIES:
        raise FloatRefError(f"{pending:,} entries lie on or too near a rounding boundary of {fmt.name} for "
                            f"float64 to decide, over the cap of {MAX_FLOAT_ARB_ENTRIES:,} decided exactly "
                            f"(MAX_FLOAT_ARB_ENTRIES, about 50 µs each); check fewer heads or rows at a time")
    groups: dict[tuple, list[tuple]] = {}
    for idx in np.ndindex(*pr.batch):
        if w_ok[idx].all() and o_ok[idx].all():
            continue
        key: tuple[int, ...] = (hash(pr.K[idx].tobytes()), hash(pr.V[idx].tobytes()))
        while key in groups and not (np.array_equal(pr.K[groups[key][0]], pr.K[idx])
                                     and np.array_equal(pr.V[groups[key][0]], pr.V[idx])):
            key = key + (len(key),)                      # a hash collision: another group
        groups.setdefault(key, []).append(idx)
    S, E, Ev = pr.K.shape[-2], pr.Q.shape[-1], pr.V.shape[-1]
    if groups and S * (E + Ev) > MAX_KEY_ENTRIES:
        count = int((~w_ok).sum() + (~o_ok).sum())
        raise FloatRefError(f"{count} entries lie too near a rounding boundary for float64 and need "
                            f"the arb path, which holds one head's K and V as integers: at most "
                            f"{MAX_KEY_ENTRIES:,} entries S·(E + Ev); these heads have "
                            f"{S:,}·({E} + {Ev}) = {S * (E + Ev):,}")
    count = 0
    for members in groups.values():
        pairs = [(idx, i) for idx in members
                 for i in np.nonzero(~w_ok[idx].all(axis=1) | ~o_ok[idx].all(axis=1))[0].tolist()]
        cols = sorted({c for idx, i in pairs for c in np.nonzero(~o_ok[idx][i])[0].tolist()})
        count += _Head(pr, members[0], pairs, cols, fmt).decide(w, w_ok, o, o_ok)
    return count


def enclosures(pr, idx: tuple, rows: list[int], step: str, prec: int) -> list[list]:
    """Arb balls (at ``prec`` bits) of every entry of the given rows of one head's step
    ('weights' or 'output'); rational entries (a blocked weight 0, a tied row's 1/n, an
    output equal to every group's mean) are exact points.  For reports, not decisions."""
    pairs = [(idx, i) for i in rows]
    Ev = pr.V.shape[-1]
    head = _Head(pr, idx, pairs, list(range(Ev)) if step == "output" else [], None)
    D, g = head.scores(pairs)
    drows = D.tolist()
    known = []
    for r, (_, i) in enumerate(pairs):
        allowed = None if pr.allowed is None else pr.allowed[idx][i]
        add = None if pr.additive is None else pr.additive[idx][i]
        k = head._rational(drows[r], g, allowed, add, list(range(len(head.cols))))
        known.append(k["weights"] if step == "weights" else k["output"])
    with precision(prec):
        W, N = head.balls_of(pairs, D, g, list(range(len(pairs))), full=True)
        scale = flint.arb(2) ** head.gv
        out = []
        for r in range(len(pairs)):
            Z = N[r, N.ncols() - 1]
            if step == "weights":
                row = [e / (Z * scale) for e in W[r]]
                if known[r] is not None:                 # one group: every allowed weight 1/n
                    one = flint.arb(flint.fmpq(known[r].numerator, known[r].denominator))
                    row = [one if not (e == 0) else e for e in W[r]]
            else:
                row = [N[r, k] / Z if known[r][k] is None else
                       flint.arb(flint.fmpq(known[r][k].numerator, known[r][k].denominator))
                       for k in range(Ev)]
            out.append(row)
    return out


def rational_entry(pr, idx: tuple, i: int, step: str, c: int) -> Fraction | None:
    """The exact value of one entry when it is rational (see the module docstring), else None."""
    allowed = None if pr.allowed is None else pr.allowed[idx][i]
    if step == "weights" and allowed is not None and not allowed[c]:
        return Fraction(0)
    head = _Head(pr, idx, [(idx, i)], [c] if step == "output" else [], None)
    D, g = head.scores([(idx, i)])
    add = None if pr.additive is None else pr.additive[idx][i]
    known = head._rational(D.tolist()[0], g, allowed, add, [0] if step == "output" else [])
    return known["weights"] if step == "weights" else known["output"][0]


class _Products:
    """Σ_j w_j·[v_j | 1]_k·2^-gv for the (row, k) pairs asked for, computed once each."""

    def __init__(self, head: "_Head", W: list, rows: list[int]) -> None:
        self.head, self.W = head, W
        self.cache: dict[tuple[int, int], flint.arb] = {}
        self.rowmats: dict[int, flint.arb_mat] = {}

    def __getitem__(self, key: tuple[int, int]) -> flint.arb:
        if key not in self.cache:
            row, k = key
            if row not in self.rowmats:
                self.rowmats[row] = flint.arb_mat([self.W[row]])
            self.cache[key] = (self.rowmats[row] * self.head.column(k))[0, 0]
        return self.cache[key]


class _Head:
    """The integer K and V of one (K, V) pair and the undecided rows that read them."""

    def __init__(self, pr, idx0: tuple, pairs: list, cols: list[int], fmt: BinaryFormat | None) -> None:
        import numpy as np

        self.pr, self.pairs, self.fmt = pr, pairs, fmt
        K, V = pr.K[idx0], pr.V[idx0]
        self.cols = cols
        kn, self.gk = dyadic_matrix(K)
        self.KT = flint.fmpz_mat(kn).transpose()
        vn, gv = dyadic_matrix(V[:, self.cols]) if self.cols else ([[] for _ in range(K.shape[0])], 0)
        shift = max(gv, 0)                               # keep 2^gv ≤ 1 so the 1-column is an integer
        self.gv = gv - shift
        self.vn = [[x << shift for x in row] for row in vn]
        self.vf = np.asarray(V[:, self.cols], dtype=np.float64).reshape(K.shape[0], len(self.cols))
        one = 1 << -self.gv
        self.VN = flint.fmpz_mat([row + [one] for row in self.vn])   # [V | 1]·2^-gv
        self.s_rational, self.s_exact = _scale_parts(pr)
        self.digits = 0 if fmt is None else math.ceil(fmt.p * math.log10(2)) + 2

    def _format(self) -> BinaryFormat:
        """The format decisions round to (a head built for :func:`enclosures` has none)."""
        if self.fmt is None:  # pragma: no cover - enclosures() never decides
            raise FloatRefError("internal: this head was built for enclosures, not decisions")
        return self.fmt

    def column(self, k: int) -> flint.arb_mat:
        """Column k of [V | 1]·2^-gv as an S × 1 arb_mat (exact integers; kept per head)."""
        if not hasattr(self, "_columns"):
            self._columns: dict[int, flint.arb_mat] = {}
        if k not in self._columns:
            one = 1 << -self.gv
            self._columns[k] = flint.arb_mat(len(self.vn), 1, [one] * len(self.vn) if k == len(self.cols)
                                             else [row[k] for row in self.vn])
        return self._columns[k]

    def scores(self, pairs) -> tuple:
        """The exact scores of the rows as an fmpz_mat D and g: q·k = D·2^g."""
        import numpy as np

        qn, gq = dyadic_matrix(np.stack([self.pr.Q[idx][i] for idx, i in pairs]))
        return flint.fmpz_mat(qn) * self.KT, gq + self.gk

    def decide(self, w, w_ok, o, o_ok) -> int:
        S = self.pr.K.shape[-2]
        step = max(1, CHUNK_ENTRIES // max(S, 1))
        count = 0
        for a in range(0, len(self.pairs), step):
            count += self._chunk(self.pairs[a:a + step], w, w_ok, o, o_ok)
        return count

    def _chunk(self, pairs, w, w_ok, o, o_ok) -> int:
        import numpy as np

        pr, fmt = self.pr, self._format()
        count = sum(int((~w_ok[idx][i]).sum() + (~o_ok[idx][i]).sum()) for idx, i in pairs)
        D, g = self.scores(pairs)                        # exact scores ·2^-g
        drows = D.tolist()
        todo = []                                        # (row r, step, column, where to write)
        for r, (idx, i) in enumerate(pairs):
            allowed = None if pr.allowed is None else pr.allowed[idx][i]
            add = None if pr.additive is None else pr.additive[idx][i]
            ocols = np.nonzero(~o_ok[idx][i])[0].tolist()
            known = self._rational(drows[r], g, allowed, add, [self.cols.index(c) for c in ocols])
            for c in np.nonzero(~w_ok[idx][i])[0].tolist():
                if allowed is not None and not allowed[c]:
                    value = 0.0
                elif known["weights"] is not None:
                    value = round_fraction(known["weights"], fmt)
                else:
                    todo.append((r, "weights", c, idx + (i, c)))
                    continue
                w[idx + (i, c)] = value + 0.0
                w_ok[idx + (i, c)] = True
            for c in ocols:
                k = self.cols.index(c)
                if known["output"][k] is not None:
                    o[idx + (i, c)] = round_fraction(known["output"][k], fmt) + 0.0
                    o_ok[idx + (i, c)] = True
                else:
                    todo.append((r, "output", k, idx + (i, c)))
        for prec in precisions(self.digits):
            if not todo:
                break
            with precision(prec):
                todo = self._balls(pairs, D, g, todo, w, w_ok, o, o_ok)
        if todo:                                         # on a boundary to within 2^-65,000
            todo = self._by_sign(pairs, drows, g, todo, o, o_ok)
        if todo:
            r, step, k, where = todo[0]
            raise undecided(f"{step}{list(where)}", f"the {fmt.name} rounding", prec,
                            "it may sit exactly on a rounding boundary")
        return count

    def _by_sign(self, pairs, drows, g: int, todo, o, o_ok) -> list:
        """The outputs a finite mask puts within e^(−1e9) of a rounding boundary, decided by
        the sign of their distance to it (:func:`symattn.floatref.ties.decide_by_sign`);
        returns the items still undecided."""
        pr, fmt = self.pr, self._format()
        scale = _scale_ball(self.s_exact)
        rest = []
        for item in todo:
            r, step, k, at = item
            idx, i = pairs[r]
            if step != "output":
                rest.append(item)
                continue
            drow = drows[r]
            allowed = None if pr.allowed is None else pr.allowed[idx][i]
            add = None if pr.additive is None else pr.additive[idx][i]
            live = list(range(len(drow))) if allowed is None else [j for j in range(len(drow)) if allowed[j]]
            key = self.exponent_key(drow, g, add)

            def t_of(js: list[int], drow=drow, add=add, live=live) -> list:
                sg = scale * flint.arb(2) ** g           # at the caller's precision; js index live
                return [sg * drow[live[j]] + (flint.arb(float(add[live[j]])) if add is not None else 0)
                        for j in js]

            values = [Fraction(self.vn[j][k]) * Fraction(2) ** self.gv for j in live]
            value = decide_by_sign([key(j) for j in live], t_of, values, fmt)
            if value is None:
                rest.append(item)
                continue
            o[at] = value + 0.0
            o_ok[at] = True
        return rest

    def _rational(self, drow, g: int, allowed, add, ks: list[int]) -> dict:
        """The row's rational values (Fractions), None where a value is transcendental:
        the weights (one value for the row) and the output columns ``ks`` (indices in cols)."""
        import numpy as np

        keys = np.arange(len(drow)) if allowed is None else np.nonzero(allowed)[0]
        key = self.exponent_key(drow, g, add)
        if add is None or self.s_rational is None:
            # the common case first: every allowed key's exponent distinct (no ties), seen
            # with one set; then no weight is rational (unless one key) and an output is
            # rational only when its value column is constant over the keys
            if add is not None or self.s_rational == 0:
                tags = [key(j) for j in keys.tolist()]
            else:                                        # the exponent's tag is the score
                tags = drow if allowed is None else [drow[j] for j in keys.tolist()]
            if len(set(tags)) == len(tags):
                output = {k: None if (self.vf[keys, k] != self.vf[keys[0], k]).any() else
                          Fraction(self.vn[int(keys[0])][k]) * Fraction(2) ** self.gv for k in ks}
                return {"weights": Fraction(1) if len(tags) == 1 else None, "output": output}
        label: dict = {}
        labels = np.array([label.setdefault(key(j), len(label)) for j in keys.tolist()])
        ngroups = len(label)
        weights = Fraction(1, len(keys)) if ngroups == 1 else None
        output = {}
        counts = np.bincount(labels, minlength=ngroups)
        for k in ks:
            v = self.vf[keys, k]
            if ngroups == len(keys):                     # every group one key: rational iff v is constant
                if (v != v[0]).any():
                    output[k] = None
                    continue
            else:                                        # a float screen first: the group means differ
                means = np.bincount(labels, weights=v, minlength=ngroups) / counts
                tol = 4 * len(keys) * 2.0 ** -53 * float(np.abs(v).max())   # ≥ every float sum's error
                if means.max() - means.min() > 2 * tol:
                    output[k] = None
                    continue
            sums = [0] * ngroups
            for j, lab in zip(keys.tolist(), labels.tolist()):
                sums[lab] += self.vn[j][k]
            n0 = int(counts[0])
            same = all(sums[h] * n0 == sums[0] * int(counts[h]) for h in range(ngroups))
            output[k] = Fraction(sums[0], n0) * Fraction(2) ** self.gv if same else None
        return {"weights": weights, "output": output}

    def exponent_key(self, drow, g: int, add):
        """key(j): a hashable tag, equal for two keys exactly when their t_j are equal."""
        if self.s_rational is None:                      # s irrational: t_j = t_k iff d and m agree
            return (lambda j: drow[j]) if add is None else (lambda j: (drow[j], float(add[j])))
        if add is None:
            return (lambda j: drow[j]) if self.s_rational else (lambda j: 0)
        s2 = self.s_rational * Fraction(2) ** g
        return lambda j: s2 * int(drow[j]) + Fraction(float(add[j]))

    def balls_of(self, pairs, D, g: int, rows: list[int], full: bool = False) -> tuple[list, Any]:
        """At the current precision: the rows' e^(t_j − c) (0 where blocked) and
        Σ_j e^(t_j − c)·[v_j | 1]·2^-gv: one arb_mat product for every column when ``full``,
        else only the (row, column) pairs asked for, each one 1 × S by S × 1 product."""
        pr = self.pr
        T = flint.arb_mat(D) * (_scale_ball(self.s_exact) * flint.arb(2) ** g)
        trows = T.tolist()
        # without an additive mask the row's largest t_j is at its largest (or, for a negative
        # scale, smallest) integer score: found among integers, not among balls
        drows = D.tolist() if pr.additive is None else None
        pick = min if isinstance(self.s_exact, Fraction) and self.s_exact < 0 else max
        W = []
        for r in rows:
            idx, i = pairs[r]
            allowed = None if pr.allowed is None else pr.allowed[idx][i]
            add = None if pr.additive is None else pr.additive[idx][i]
            t = trows[r]
            if add is not None:
                t = [x + flint.arb(float(m)) if m else x for x, m in zip(t, add.tolist())]
            live = range(len(t)) if allowed is None else [j for j in range(len(t)) if allowed[j]]
            if drows is None:
                c = max(t[j].mid() for j in live)
            else:                                        # any c gives the same weights
                d = drows[r]
                c = t[pick(live, key=d.__getitem__)].mid()
            e = [flint.arb(0)] * len(t)
            for j in live:
                e[j] = (t[j] - c).exp()
            W.append(e)
        if full:
            return W, flint.arb_mat(W) * flint.arb_mat(self.VN)
        return W, _Products(self, W, rows)

    def _balls(self, pairs, D, g: int, todo, w, w_ok, o, o_ok) -> list:
        """One round at the current precision: decide what the balls decide; return the rest."""
        fmt = self._format()
        rows = sorted({t[0] for t in todo})
        W, N = self.balls_of(pairs, D, g, rows)
        ncols = len(self.cols)
        where = {r: k for k, r in enumerate(rows)}
        scale = flint.arb(2) ** self.gv
        rest = []
        for item in todo:
            r, step, k, at = item
            row = where[r]
            Z = N[row, ncols]                              # Σ w · 2^-gv
            if step == "weights":
                ball = W[row][k] / (Z * scale)
                values, ok = w, w_ok
            else:
                ball = N[row, k] / Z
                values, ok = o, o_ok
            value = round_ball(ball, fmt)
            if value is None:
                rest.append(item)
                continue
            values[at] = value + 0.0
            ok[at] = True
        return rest
