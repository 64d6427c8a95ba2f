"""Ensembler contract: how the trees' outputs combine into one distribution."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forestgen.component import Component
from forestgen.logsumexp import logsumexp


class Ensembler(Component):
    """Base class of the ``ensembler`` slot.

    ``serves`` names the model families whose learners can take it (``"leaf mixture"``:
    ARF, GeF, RFDE, DEF, and GF.Boost's sampler side; ``"intersection"``: GF.Boost's cell
    compilation; ``"energy"``: NRGBoost); a learner checks it at construction. What each family
    calls:

    * ``"leaf mixture"`` — :meth:`leaf_log_weights_from_counts` (leaf log-weights from the
      training weight in each leaf; every learner of the family computes its weights through
      it), :meth:`combine` and :meth:`combine_dense` (per-row log density from per-(row, leaf)
      scores that already include the leaf weights);
    * ``"intersection"`` — ``compile(table, n_levels, smoothing)`` (the joint cells as one
      tree, :class:`~forestgen.families.intersection.ensembler.IntersectionEnsembler`) and
      :meth:`combine`;
    * ``"energy"`` — the additive energy of NRGBoost
      (:class:`~forestgen.families.energy.ensembler.AdditiveEnergy`), built from the data by
      the learner (``cls(grid, log_q0)``).

    ``normalised`` says whether the combination is a normalised density (a mixture) or an
    unnormalised energy whose normaliser must be estimated (NRGBoost). The shared queries that
    sum leaf mixtures (``log_prob``, leaf posteriors, the torch scoring) check it through
    :meth:`~forestgen.base.GenerativeForest.require_normalised` and refuse an unnormalised one.
    ``logsumexp_combine`` (not inherited: a subclass that changes :meth:`combine` combines
    otherwise unless it says so) declares that :meth:`combine` is the plain logsumexp of the
    scores, which the fused marginal walk (:mod:`forestgen.inference.marginal_walk`) computes
    on its own; without it the model's ``log_prob`` goes through :meth:`combine`. (A leaf
    mixture's density is the logsumexp of its leaf scores whatever the leaf weights, so the
    torch scoring, which sums the same weighted leaves, holds for any mixture ensembler.)

    Parameters are keyword arguments of ``__init__`` stored under their own names
    (:meth:`get_params`), so a learner copies an instance per fit and saves it by its registry
    name and parameters.
    """

    normalised: ClassVar[bool] = True
    serves: ClassVar[frozenset] = frozenset()
    logsumexp_combine: ClassVar[bool] = False
    not_inherited = ("logsumexp_combine",)

    def leaf_log_weights_from_counts(self, cnt: np.ndarray, leaf_tree: np.ndarray,
                                     n_trees: int) -> np.ndarray:
        """Leaf-mixture families: log-weight of every leaf from its (weighted) training count
        ``cnt [L]``, the tree of each leaf and the number of trees; the weights of the whole
        forest must sum to one."""
        raise NotImplementedError(f"{type(self).__name__} does not weigh mixture leaves")

    def leaf_log_weights(self, leaves: np.ndarray, n_leaves: int, leaf_tree: np.ndarray,
                         n_trees: int, mask: np.ndarray | None = None,
                         sample_weight: np.ndarray | None = None) -> np.ndarray:
        """:meth:`leaf_log_weights_from_counts` of the training rows that fall in ``leaves
        [n, B]`` (``mask [n, B]`` restricts a tree's count, e.g. to out-of-bag rows)."""
        n, B = leaves.shape
        if mask is None and sample_weight is None:  # counts: no [n, B] weights, no copy of
            # the leaves in C order (a sum of ones is the count, exactly, in any order)
            cnt = np.bincount(leaves.ravel(order="K"), minlength=n_leaves).astype(np.float64)
            return self.checked_log_weights(cnt, leaf_tree, n_trees)
        w = np.ones((n, B)) if sample_weight is None else np.broadcast_to(
            np.asarray(sample_weight, float)[:, None], (n, B)).copy()
        if mask is not None:
            w = w * mask
        cnt = np.bincount(leaves.ravel(), weights=w.ravel(), minlength=n_leaves)
        return self.checked_log_weights(cnt, leaf_tree, n_trees)

    def checked_log_weights(self, cnt: np.ndarray, leaf_tree: np.ndarray, n_trees: int
                            ) -> np.ndarray:
        """:meth:`leaf_log_weights_from_counts`, checked: one log-weight per leaf, none NaN or
        ``+inf``, and (a ``normalised`` ensembler) weights summing to one over the forest, so
        that the mixture is a density; raises ``ValueError`` naming the ensembler."""
        lw = np.asarray(self.leaf_log_weights_from_counts(cnt, leaf_tree, n_trees), np.float64)
        name = f"{type(self).__name__}.leaf_log_weights_from_counts"
        if lw.shape != (len(cnt),) or np.isnan(lw).any() or (lw == np.inf).any():
            raise ValueError(f"{name} must return one log-weight per leaf ({len(cnt)}), none "
                             f"NaN or +inf; got shape {lw.shape}")
        if self.normalised:
            total = float(np.exp(logsumexp(lw)))
            if not abs(total - 1.0) <= 1e-9:
                raise ValueError(f"{name}: the leaf weights sum to {total:.6g} over the "
                                 f"forest; a mixture's must sum to one")
        return lw

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row combination of CSR segments ``pair_scores[ptr[i]:ptr[i+1]]`` (all leaves a
        row reaches) into a log density; ``pair_scores`` may be ``[P, K]`` (K score columns,
        e.g. one per class, combined column by column into ``[n, K]``)."""
        raise NotImplementedError

    def combine_dense(self, scores: np.ndarray) -> np.ndarray:
        """Per-row combination of ``scores [B, m]`` (one leaf per tree, complete rows)."""
        m = scores.shape[1]
        return self.combine(np.arange(m + 1) * scores.shape[0], scores.T.ravel())
