"""Ensembler contract: how the trees' outputs combine into one distribution."""

from __future__ import annotations

import numpy as np


class Ensembler:
    """Base class. ``log_prob_pairs`` turns per-(row, leaf) log scores into per-row log densities.

    ``normalised`` says whether the combination is a normalised density (a mixture) or an
    unnormalised energy whose normaliser must be estimated (NRGBoost). The shared queries that
    sum leaf mixtures (``log_prob``, leaf posteriors, the torch scoring) check it through
    :meth:`~forestgen.base.GenerativeForest.require_normalised` and refuse an unnormalised one.
    """

    normalised: bool = True

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row combination of CSR segments ``pair_scores[ptr[i]:ptr[i+1]]`` (all leaves a
        row reaches) into a log density; ``pair_scores`` may be ``[P, K]`` (K score columns,
        e.g. one per class, combined column by column into ``[n, K]``)."""
        raise NotImplementedError

    def combine_dense(self, scores: np.ndarray) -> np.ndarray:
        """Per-row combination of ``scores [B, m]`` (one leaf per tree, complete rows)."""
        m = scores.shape[1]
        return self.combine(np.arange(m + 1) * scores.shape[0], scores.T.ravel())

    def get_params(self) -> dict:
        return dict(vars(self))
