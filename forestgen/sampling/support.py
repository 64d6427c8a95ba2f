"""Draw one column from its leaf model so that the *decoded* value stays in the support.

Synthetic values are kept inside the observed range of each numeric column (so non-negative
columns stay non-negative and a constant column stays constant), and a column whose training
values have at most a few decimals (or a datetime column holding whole days, hours or minutes) is
drawn on that grid: the value is snapped to a grid point
that the chosen leaf (and any interval condition) still contains, so decoding never moves a
sample into a region of zero density or out of the requested interval. Intervals are closed,
``low <= x <= high``, for every column kind (see :mod:`forestgen.inference`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["draw_column", "draw_mean", "snap_to_grid"]


def draw_column(model, j: int, leaf: np.ndarray, rng: np.random.Generator,
                lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                levels: np.ndarray | None = None) -> np.ndarray:
    """Encoded draws of column ``j`` from ``leaf``; ``lo``/``hi``: an interval condition
    ``(lo, hi]`` as evidence stores it (numeric columns; a closed ``[low, high]`` is stored
    with ``lo = nextafter(low, -inf)``), ``levels``: a level-set condition (discrete
    columns)."""
    lm = model.leaf_models_[j]
    spec = model.encoder_.schema.columns[j]
    if spec.is_discrete:
        return lm.sample(leaf, rng) if levels is None else lm.sample(leaf, rng, levels=levels)
    n = len(leaf)
    # the least value allowed: above the evidence's exclusive end, at or above the observed min
    want_lo = (np.full(n, -np.inf) if lo is None
               else np.nextafter(np.broadcast_to(np.asarray(lo, float), n), np.inf))
    want_hi = np.full(n, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), n)
    a = np.maximum(want_lo, spec.lower)
    b = np.minimum(want_hi, spec.upper)
    # a condition outside the observed range wins over the support restriction
    outside = ~(a <= b)
    a = np.where(outside, want_lo, a)
    b = np.where(outside, want_hi, b)
    x = lm.sample(leaf, rng, lo=np.nextafter(a, -np.inf), hi=b)
    if not spec.has_grid:
        return x
    return snap_to_grid(x, spec, a, b, lambda v: _in_leaf(lm, leaf, v))


def draw_mean(model, j: int, leaf: np.ndarray, lo: np.ndarray | None = None,
              hi: np.ndarray | None = None) -> np.ndarray:
    """Mean of :func:`draw_column`'s law for numeric column ``j`` in ``leaf``: the leaf's law
    restricted to the column's observed range (and an interval condition ``(lo, hi]``), so
    that ``expect``, ``impute`` and ``predict`` agree with the mean of draws (GeF's Gaussians
    on unbounded edge cells, and ARF's edge leaves, have tails past the range)."""
    lm = model.leaf_models_[j]
    spec = model.encoder_.schema.columns[j]
    leaf = np.asarray(leaf, np.int64)
    n = len(leaf)
    want_lo = np.full(n, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float), n)
    want_hi = np.full(n, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), n)
    if not hasattr(lm, "mean_interval"):
        return lm.mean(leaf)
    lower = np.nextafter(spec.lower, -np.inf) if np.isfinite(spec.lower) else -np.inf
    upper = spec.upper if np.isfinite(spec.upper) else np.inf
    a = np.maximum(want_lo, lower)
    b = np.minimum(want_hi, upper)
    outside = ~(a < b)  # a condition outside the observed range wins, as in draw_column
    a = np.where(outside, want_lo, a)
    b = np.where(outside, want_hi, b)
    if lo is None and hi is None and not np.isfinite(a).any() and not np.isfinite(b).any():
        return lm.mean(leaf)
    out = lm.mean_interval(leaf, a, b)
    bad = ~np.isfinite(out)  # no mass the restricted law can evaluate (a degenerate leaf):
    if bad.any():            # the leaf's own mean, kept inside the interval
        with np.errstate(invalid="ignore"):
            out[bad] = np.clip(lm.mean(leaf[bad]), a[bad], b[bad])
    return out


def _in_leaf(lm, leaf: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether each ``v`` has positive density in its leaf. Leaf models with fitted cell bounds
    (``lo_``/``hi_``: truncated normal, uniform) are checked with plain NumPy, which stays safe
    in forked DataLoader workers (parallel Numba kernels are not fork-safe)."""
    lo, hi = getattr(lm, "lo_", None), getattr(lm, "hi_", None)
    if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray):
        return (v > lo[leaf]) & (v <= hi[leaf])
    return np.isfinite(lm.log_prob(leaf, v))


def snap_to_grid(x: np.ndarray, spec, lo: np.ndarray, hi: np.ndarray,
                 inside) -> np.ndarray:
    """Move each ``x`` to a point of ``spec``'s grid (:meth:`ColumnSpec.to_grid`) in
    ``[lo, hi]`` where ``inside`` (a vectorised predicate) holds: the nearest one, else the grid
    point below or above. Where no neighbour satisfies ``inside`` (the leaf or region holds no
    grid point in ``[lo, hi]``), the nearest neighbour in ``[lo, hi]`` is taken: decoding would
    round ``x`` off the cell anyway, and this keeps it in the interval. Entries with no grid
    point in ``[lo, hi]`` at all keep ``x``."""
    out = x.copy()
    todo = np.ones(len(x), bool)
    cands = (spec.to_grid(x), spec.to_grid(x, "floor"), spec.to_grid(x, "ceil"))
    for check in (inside, None):
        for cand in cands:
            ok = todo & (cand >= lo) & (cand <= hi)
            if ok.any():
                idx = np.flatnonzero(ok)
                if check is not None:
                    idx = idx[check(cand)[idx]]
                out[idx] = cand[idx]
                todo[idx] = False
            if not todo.any():
                return out
    return out
