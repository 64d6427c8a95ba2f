"""Inequalities between numeric columns that hold in every training row (``low <= high``).

A table often carries an order its columns never break: a ``mean`` never above the ``worst``
(breast cancer), LDL never above total cholesterol, a diagnosis never after death. A learner
that models the columns' joint law loosely breaks such an order in a few per cent of its
samples, and a reader sees at once that those rows are fake. :func:`find_inequalities` finds
the orders worth keeping; the encoder keeps them as :class:`~forestgen.data.rules.Inequality`
constraints marked ``detected``, which every learner then keeps exactly as it keeps a declared
one (rejection in samples, zero density outside, the density divided by the constraints'
probability; :mod:`forestgen.inference.rules`).

An order is kept only where it says something:

* it holds in every row where both columns are observed (ties allowed: ``<=``);
* the columns' ranges overlap (``max(low) > min(high)``), else the columns' own supports, which
  samples keep, already imply it;
* its bound is reached: at least ``MIN_TIES`` rows have ``low == high`` at a value above
  the smaller of the two columns' minima (a shared floor, such as two zero-inflated columns
  both 0, says nothing). An order that is only a tendency (iris's petal length below its
  sepal length; a standard error below its mean) keeps a margin in every row, and a new row
  may break it: a kept rule would give that row probability zero;
* it is unlikely by chance: under independence of the two columns, with ``p`` the probability
  that a random ``low`` exceeds a random ``high`` (computed exactly from the two empirical
  marginals), all ``n`` rows keeping it has probability ``(1 - p) ** n``, which must be below
  ``CHANCE`` (``1e-3``). An order the marginals almost imply (``p`` tiny) is left alone: a
  model rarely breaks it;
* neither column is determined by a mapping, the two columns are not equal in every row (an
  equality is not an inequality), and an order implied by two kept ones (``a <= b <= c``
  implies ``a <= c``) is dropped.
"""

from __future__ import annotations

import math

import numpy as np

from forestgen.data.rules import Inequality, numbers

__all__ = ["CHANCE", "MAX_COLUMNS", "MIN_TIES", "detected_inequalities", "find_inequalities",
           "violation_chance"]

#: an order is kept only when all rows keeping it by chance has at most this probability
CHANCE = 1e-3
#: rows that must reach the bound (``low == high`` above a shared floor)
MIN_TIES = 2
#: columns beyond this many candidates are not searched (the search is quadratic in them)
MAX_COLUMNS = 300
_SCREEN_ROWS = 2_000


def violation_chance(low: np.ndarray, high: np.ndarray) -> float:
    """``P(L > H)`` for ``L`` and ``H`` drawn independently from the empirical laws of ``low``
    and ``high`` (finite values)."""
    hs = np.sort(high)
    below = np.searchsorted(hs, low, side="left")  # high values strictly below each low
    return float(below.sum()) / (low.size * hs.size)


def find_inequalities(columns: list[np.ndarray], candidates: list[int],
                      groups: list[int] | None = None) -> list[tuple[int, int]]:
    """Pairs ``(low, high)`` of column indices with ``columns[low] <= columns[high]`` in every
    row where both are finite, kept by the rules of this module's docstring.

    ``columns[j]``: column ``j``'s values as floats (NaN = missing); ``candidates``: the
    columns that may take part; ``groups[j]``: a unit group, only columns of one group are
    compared (e.g. dates with dates).
    """
    cand = [j for j in candidates if np.isfinite(columns[j]).sum() >= 2][:MAX_COLUMNS]
    if len(cand) < 2:
        return []
    grp = groups if groups is not None else [0] * len(columns)
    X = np.column_stack([columns[j] for j in cand]).astype(np.float64)
    n = len(X)
    rng = np.random.default_rng(0)
    screen = X[rng.choice(n, _SCREEN_ROWS, replace=False)] if n > _SCREEN_ROWS else X
    fin = np.isfinite(screen)
    lo_max = np.nanmax(np.where(np.isfinite(X), X, np.nan), axis=0)
    hi_min = np.nanmin(np.where(np.isfinite(X), X, np.nan), axis=0)
    found: list[tuple[int, int]] = []
    for i in range(len(cand)):
        with np.errstate(invalid="ignore"):
            ok = ((screen[:, [i]] <= screen) | ~fin[:, [i]] | ~fin).all(axis=0)
        ok[i] = False
        for k in np.flatnonzero(ok & (lo_max[i] > hi_min)):
            a, b = cand[i], cand[k]
            if grp[a] != grp[b]:
                continue
            x, y = columns[a], columns[b]
            both = np.isfinite(x) & np.isfinite(y)
            x, y = x[both], y[both]
            if x.size < 2 or not (x <= y).all() or (x == y).all():
                continue
            floor = min(x.min(), y.min())
            if int(((x == y) & (x > floor)).sum()) < MIN_TIES:
                continue
            p = violation_chance(x, y)
            if p <= 0.0 or x.size * math.log1p(-min(p, 1.0 - 1e-15)) >= math.log(CHANCE):
                continue
            found.append((a, b))
    return _reduce(found)


def _reduce(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Drop the pairs implied by two others (``a <= b`` and ``b <= c`` imply ``a <= c``)."""
    edges = set(pairs)
    above: dict[int, set[int]] = {}
    for a, b in pairs:
        above.setdefault(a, set()).add(b)
    return [(a, c) for a, c in pairs
            if not any(c in above.get(b, ()) for b in above.get(a, ()) if b != c)
            and (a, c) in edges]


def detected_inequalities(Z: np.ndarray, schema, determined: set[int],
                          declared: list) -> list[Inequality]:
    """The inequalities :func:`find_inequalities` finds in the encoded training rows ``Z``
    among the numeric, date, duration and integer-level columns (each compared only with its
    own kind; dates on a month scale only with those of the same anchor), leaving out
    ``determined`` columns and orders ``declared`` already keeps."""
    units = {"datetime": 1, "timedelta": 2}
    scales: dict[tuple, int] = {}
    cand, groups = [], [0] * schema.d
    for j, s in enumerate(schema.columns):
        if j in determined:
            continue
        if s.is_discrete and not (s.ordinal and s.kind != "categorical"):
            continue
        groups[j] = next((g for k, g in units.items() if str(s.dtype).startswith(k)), 0)
        if s.month_anchor is not None or s.wall_clock:  # (another scale: compared only
            groups[j] = scales.setdefault((s.month_anchor, s.wall_clock),  # with its own)
                                          len(units) + 1 + len(scales))
        cand.append(j)
    if len(cand) < 2:
        return []
    V = numbers(Z, schema)
    have = {(c.low, c.high) for c in declared if isinstance(c, Inequality)}
    return [Inequality(a, b, detected=True)
            for a, b in find_inequalities([V[:, j] for j in range(schema.d)], cand, groups)
            if (a, b) not in have]
