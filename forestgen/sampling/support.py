"""Draw one column from its leaf model in the model's support (:mod:`forestgen.data.support`).

Every leaf model's density already lives inside the column's support (leaf cells end at its
latent range), so a draw is the leaf's own draw, mapped to a value by the column's one rounding
map (:func:`~forestgen.data.support.to_support`: the grid point nearest the latent, kept in the
observed range). An interval condition is the latent interval whose values lie in it
(:func:`~forestgen.data.support.latent_interval`); draws are clipped to its least and greatest
value, so bounds hold to the ulp. :func:`draw_mean` is the mean of that same law.
"""

from __future__ import annotations

import numpy as np

from forestgen.data.support import interval_ends, latent_range, rounded_mean, to_support

__all__ = ["draw_column", "draw_column_uniform", "draw_mean", "leaf_cells"]


def draw_column(model, j: int, leaf: np.ndarray, rng: np.random.Generator,
                lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                levels: np.ndarray | None = None) -> np.ndarray:
    """Encoded draws of column ``j`` from ``leaf``; ``lo``/``hi``: an interval condition
    ``(lo, hi]`` on the latent as evidence stores it (numeric columns), ``levels``: a
    level-set condition (discrete columns)."""
    lm = model.leaf_models_[j]
    spec = model.encoder_.schema.columns[j]
    if spec.is_discrete:
        return lm.sample(leaf, rng) if levels is None else lm.sample(leaf, rng, levels=levels)
    if lo is None and hi is None:
        return to_support(lm.sample(leaf, rng), spec)
    n = len(leaf)
    lo = np.full(n, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float), n)
    hi = np.full(n, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), n)
    z = to_support(lm.sample(leaf, rng, lo=lo, hi=hi), spec)
    a, b = interval_ends(spec, lo, hi)
    return np.where(a <= b, np.clip(z, a, np.maximum(a, b)), z)


def draw_column_uniform(model, j: int, leaf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """:func:`draw_column` (no condition) from the uniforms ``u`` its leaf model's ``sample``
    would draw (:meth:`~forestgen.leaves.base.LeafModel.sample_uniform`)."""
    lm = model.leaf_models_[j]
    spec = model.encoder_.schema.columns[j]
    if spec.is_discrete:
        return lm.sample_uniform(leaf, u)
    return to_support(lm.sample_uniform(leaf, u), spec)


def leaf_cells(lm, leaf: np.ndarray, spec) -> tuple[np.ndarray, np.ndarray]:
    """Each leaf's cell ``(lo, hi]`` for a numeric column: the fitted bounds of leaf models that
    keep them (``lo_``/``hi_``: truncated normal, uniform; a point-mass leaf's base), inside
    the column's latent range."""
    base = getattr(lm, "base_", lm)
    r_lo, r_hi = latent_range(spec)
    lo, hi = getattr(base, "lo_", None), getattr(base, "hi_", None)
    if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray):
        return np.maximum(lo[leaf], r_lo), np.minimum(hi[leaf], r_hi)
    return np.full(len(leaf), r_lo), np.full(len(leaf), r_hi)


def draw_mean(model, j: int, leaf: np.ndarray, lo: np.ndarray | None = None,
              hi: np.ndarray | None = None) -> np.ndarray:
    """Mean of :func:`draw_column`'s law for numeric column ``j`` in ``leaf`` (under an
    interval condition ``(lo, hi]``), so that ``expect``, ``impute`` and ``predict`` agree
    with the mean of draws: the leaf's mean, of the rounded values on a grid column
    (:func:`~forestgen.data.support.rounded_mean`)."""
    lm = model.leaf_models_[j]
    spec = model.encoder_.schema.columns[j]
    leaf = np.asarray(leaf, np.int64)
    n = len(leaf)
    a = np.full(n, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float), n)
    b = np.full(n, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), n)
    if lo is None and hi is None:
        out = np.asarray(lm.mean(leaf), np.float64)
    else:
        out = np.asarray(lm.mean_interval(leaf, a, b), np.float64)
    va, vb = interval_ends(spec, a, b)
    bad = ~np.isfinite(out)  # no mass the law can evaluate (a degenerate leaf):
    if bad.any():            # the leaf's own mean, kept inside the interval
        with np.errstate(invalid="ignore"):
            out = out.copy()
            out[bad] = np.clip(lm.mean(leaf[bad]), va[bad], vb[bad])
    if spec.has_grid:
        c_lo, c_hi = leaf_cells(lm, leaf, spec)
        out = rounded_mean(lm, spec, leaf, np.maximum(c_lo, a), np.minimum(c_hi, b), out)
    with np.errstate(invalid="ignore"):
        return np.clip(out, va, vb)
