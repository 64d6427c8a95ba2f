"""Mixture ensembler: ``q(x) = sum_b (1/B) sum_l cvg_bl prod_j f_blj(x_j)`` (ARF Eq. 1).

Leaf log-weights are ``log cvg - log B`` over all leaves of all trees, so one logsumexp over
the leaves a row reaches gives the log density — for a complete row one leaf per tree, for a row
with NaN entries every leaf consistent with its observed entries (exact marginalisation).
"""

from __future__ import annotations

import numpy as np

from forestgen.ensemble.base import Ensembler
from forestgen.logsumexp import logsumexp, segment_logsumexp
from forestgen.registry import register


@register("ensembler", "mixture")
class MixtureEnsembler(Ensembler):
    """Leaf weights ``coverage / B`` (the share of a tree's training weight in each leaf,
    trees weighted equally) and the per-row logsumexp of the reached leaves' scores."""

    normalised = True
    serves = frozenset({"leaf mixture"})
    logsumexp_combine = True

    def leaf_log_weights_from_counts(self, cnt: np.ndarray, leaf_tree: np.ndarray,
                                     n_trees: int) -> np.ndarray:
        """``log(coverage / B)`` per leaf from the (weighted) training-row count of each leaf,
        e.g. merged over the partitions of a table."""
        per_tree = np.bincount(leaf_tree, weights=cnt, minlength=n_trees)
        if np.any(per_tree <= 0):
            bad = int(np.nonzero(per_tree <= 0)[0][0])
            raise ValueError(f"tree {bad} has no rows to compute leaf coverage from")
        cvg = cnt / per_tree[leaf_tree]
        with np.errstate(divide="ignore"):
            return np.log(cvg) - np.log(n_trees)

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row logsumexp over CSR segments ``pair_scores[ptr[i]:ptr[i+1]]`` (``[P]``, or
        ``[P, K]`` combined per column: GeF's class posteriors)."""
        return segment_logsumexp(ptr, pair_scores)

    def combine_dense(self, scores: np.ndarray) -> np.ndarray:
        """Per-row logsumexp of ``scores [B, m]`` (complete rows: one leaf per tree)."""
        return logsumexp(scores, axis=0)
