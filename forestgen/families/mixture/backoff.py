"""Back-off of a leaf mixture toward the column marginals, weighed on held-out rows (issue 37).

An averaged forest is a mixture of trees, ``q(x) = (1/B) sum_b sum_l cvg_bl prod_j f_blj(x_j)``
(ARF Eq. 1). A tree that never splits has one leaf holding every training row, so under the
learner's own leaf models it is ``prod_j f_j(x_j)``: the product of the column marginals as
that learner models them (a discrete column's pmf exactly; a numeric column's leaf law fitted
to all its values). Adding it as one more tree of weight ``λ``,

    p(x) = (1 - λ) q(x) + λ prod_j f_j(x_j),

keeps the model one leaf mixture whose leaf weights sum to one, so its density integrates to
one and ``sample``, ``log_prob`` (missing entries marginalised), conditionals, ``expect``,
imputation and ``to_torch`` answer for it unchanged. ``λ`` is chosen on held-out rows
(:func:`held_out_weight`): the learner is fitted once on 80% of the rows (of at most 1,000,
:func:`forestgen.tuning.held_out_split`) with the extra tree, the two components' log
densities of the other 20% are computed once, and of :data:`WEIGHTS` (0, the paper's model,
first: ties keep it) the one with the highest mean held-out log-likelihood of the mixture is
kept. A forest that cuts a small table into leaves of two rows (ARF on quine: held-out
log-likelihood -8.29 against -7.64 for the column marginals) then backs off toward the
marginals as far as the held-out rows ask, and no further.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import LeafCells, TreeRecord

__all__ = ["WEIGHTS", "add_root_tree", "component_log_probs", "best_weight",
           "held_out_weight"]

#: back-off weights ``λ`` compared on held-out rows (0, no back-off, first: ties keep it)
WEIGHTS = (0.0, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)


def root_tree(forest: ForestArrays) -> ForestArrays:
    """A one-tree forest whose tree never splits (its root is its one leaf), with an
    unbounded stored cell (every level allowed) where ``forest`` stores its leaf cells."""
    cells = None
    if len(forest.cell_lower):
        d = forest.cell_lower.shape[1]
        cells = LeafCells(np.full((1, d), -np.inf), np.full((1, d), np.inf),
                          np.ones((1, forest.cell_mask.shape[1]), bool))
    rec = TreeRecord(feature=np.array([-1], np.int32), threshold=np.array([np.nan]),
                     nan_left=np.zeros(1, np.uint8), left=np.array([-1], np.int32),
                     right=np.array([-1], np.int32), cat_off=np.array([-1], np.int64),
                     cat_left=np.zeros(0, np.uint8), cells=cells)
    return ForestArrays.from_trees([rec], forest.n_levels)


def add_root_tree(forest: ForestArrays, leaves: np.ndarray, log_weight: np.ndarray,
                  weight: float) -> tuple[ForestArrays, np.ndarray, np.ndarray]:
    """``(forest, leaves, log_weight)`` with the root-only tree appended as the last tree:
    the training rows' leaves ``[n, B + 1]`` (every row in the new leaf) and the leaf
    log-weights ``log(1 - weight) + log_weight`` then ``log(weight)``. The forest's per-node
    class weights (a splitter output the queries do not read) are dropped."""
    out = ForestArrays.concat([forest, root_tree(forest)])
    root = np.full((len(leaves), 1), forest.n_leaves, leaves.dtype)
    return (out, np.hstack([leaves, root]),
            np.r_[math.log1p(-weight) + np.asarray(log_weight, float), math.log(weight)])


def component_log_probs(model, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row log densities (``floor=None``: exact) of ``X`` under the two components of a
    model fitted with the root-only tree as its last tree: the forest alone (its leaf weights
    renormalised) and the root-only tree alone (the product of its column marginals)."""
    lw = np.asarray(model.leaf_log_weight_, float)
    root = int(model.forest_.leaf_offsets[-2])
    forest_w = lw.copy()
    forest_w[root:] = -np.inf
    forest_w -= np.logaddexp.reduce(forest_w[:root])
    root_w = np.full_like(lw, -np.inf)
    root_w[root:] = 0.0
    out = []
    try:
        for w in (forest_w, root_w):
            model.leaf_log_weight_ = w
            out.append(np.asarray(model.log_prob(X, floor=None), float))
    finally:
        model.leaf_log_weight_ = lw
    return out[0], out[1]


def best_weight(lp_forest: np.ndarray, lp_root: np.ndarray, floor: float,
                weights=WEIGHTS) -> tuple[float, list[float]]:
    """``(λ, mean held-out log-likelihood per weight)``: the weight of ``weights`` whose
    mixture ``log((1 - λ) e^lp_forest + λ e^lp_root)`` has the highest mean, each row floored
    at ``floor`` (a row outside the support scores the same under every weight); ties go to
    the first."""
    scores = []
    for w in weights:
        a = np.log1p(-w) + lp_forest if w < 1 else np.full_like(lp_forest, -np.inf)
        b = math.log(w) + lp_root if w > 0 else np.full_like(lp_root, -np.inf)
        mix = np.logaddexp(a, b)
        scores.append(float(np.mean(np.maximum(mix, floor))))
    return float(weights[int(np.argmax(scores))]), scores


def held_out_weight(model, X: Any, kinds: Any, seed: np.random.SeedSequence,
                    param: str = "marginal_weight", fit_kwargs: dict | None = None
                    ) -> tuple[float, dict[str, float]]:
    """``(λ, {weight: held-out score})`` for ``model`` (unfitted): a copy with ``param`` =
    0.5 (the root-only tree present; its weight does not change either component) fitted on
    the fitting rows of :func:`forestgen.tuning.held_out_split` and its two components scored
    on the others (:func:`component_log_probs`, :func:`best_weight`; the floor is the model's
    ``density_floor`` times the uniform density on its support). Fewer than 10 rows, or a fit
    that fails: 0 (no back-off)."""
    from sklearn.base import clone

    from forestgen.data.frames import take_rows
    from forestgen.data.support import support_log_volume
    from forestgen.tuning import held_out_split

    split = held_out_split(len(X), seed)
    if split is None:
        return 0.0, {}
    fit, val = split
    m = clone(model).set_params(**{param: 0.5, "random_state": seed.spawn(1)[0],
                                   "progress": False})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(take_rows(X, fit), kinds=kinds, **(fit_kwargs or {}))
            lp_f, lp_r = component_log_probs(m, take_rows(X, val))
    except (ValueError, RuntimeError, FloatingPointError):
        return 0.0, {}
    floor = math.log(m.density_floor or 1e-5) - support_log_volume(m.encoder_.schema)
    w, scores = best_weight(lp_f, lp_r, floor)
    return w, dict(zip(map(str, WEIGHTS), scores))
