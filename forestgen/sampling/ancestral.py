"""Ancestral sampling from a leaf mixture (FORGE, Watson et al. 2023 Alg. 3): pick a leaf of
the whole forest with probability ``cvg / B`` (tree uniform, then leaf by coverage, in one
draw), then every column independently from its leaf model, mapped to the column's values
(the support policy of :mod:`forestgen.data.support`)."""

from __future__ import annotations

import numpy as np

from forestgen.registry import register
from forestgen.sampling.base import Sampler
from forestgen.sampling.support import draw_column


def draw_leaves(log_w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` leaf ids with probabilities ``exp(log_w)`` (normalised here), by inverse CDF."""
    w = np.exp(log_w - np.max(log_w))
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    idx = np.searchsorted(cdf, rng.random(n), side="right")
    return np.minimum(idx, len(cdf) - 1).astype(np.int64)


@register("sampler", "ancestral")
class AncestralSampler(Sampler):
    """``missing=True`` also blanks entries with the per-leaf missing rates the model learned
    (``missing_rate_``); the values are drawn first, so the same seed gives the same values
    with and without missingness. ``log_weight`` replaces the leaf weights by a leaf posterior
    (``-inf`` outside it): conditional and class-conditional draws go through this sampler."""

    serves = frozenset({"leaf mixture"})
    device_twin = True

    def draw_leaves(self, log_weight: np.ndarray, n: int, rng: np.random.Generator
                    ) -> np.ndarray:
        """``n`` leaf ids drawn independently with probabilities ``exp(log_weight)``
        (normalised here), by inverse CDF."""
        return draw_leaves(log_weight, n, rng)

    def sample(self, model, n, rng, missing: bool = False, within_support: bool = False,
               log_weight: np.ndarray | None = None):
        lw = model.leaf_log_weight_ if log_weight is None else log_weight
        leaf = self.draw_leaves(lw, n, rng)
        out = self.draw(model, leaf, rng, within_support)
        if missing:
            apply_missing(model, leaf, out, rng)
        return out

    def draw(self, model, leaf: np.ndarray, rng: np.random.Generator,
             within_support: bool = True) -> np.ndarray:
        """Every column independently from its leaf model in ``leaf [n]``: ``[n, d]``, mapped
        to the column's values (:func:`~forestgen.sampling.support.draw_column`).
        ``within_support`` is accepted for compatibility: every draw is in the support."""
        out = np.empty((len(leaf), len(model.leaf_models_)))
        for j in range(len(model.leaf_models_)):
            out[:, j] = draw_column(model, j, leaf, rng)
        return out


def apply_missing(model, leaf: np.ndarray, out: np.ndarray, rng: np.random.Generator) -> None:
    """Set ``out[i, j]`` to NaN with probability ``missing_rate_[leaf[i], k]`` (in place)."""
    cols = getattr(model, "missing_cols_", None)
    if cols is None or len(cols) == 0:
        return
    u = rng.random((len(leaf), len(cols)))
    hit = u < model.missing_rate_[leaf]
    for k, j in enumerate(cols):
        out[hit[:, k], j] = np.nan
