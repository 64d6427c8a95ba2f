"""Energy splitter: NRGBoost's trees on the shared :class:`Splitter`/:class:`TreeRecord` contract.

NRGBoost (Bravo, ICLR 2025, Sec. 3; spec ``nrgboost_def.md`` §3.2-3.6): each tree contrasts the
data mass ``P`` of a cell with the current model's mass ``Q``, read from weighted model samples
or, in round one, analytically from the product measure ``q0``. The kernel and its rules (ratio
constraint, zero-gain root split, balanced ties) are in :mod:`forestgen.families.energy.grow`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen.families.energy.grow import (
    ColumnGrid,
    SplitRule,
    grow_energy_tree,
    grow_energy_tree_with,
)
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, Splitter, TreeData, resolve_max_features
from forestgen.tree.criteria import DENSITY, USER, criterion_code
from forestgen.tree.record import TreeRecord


def grid_data(grid, data_codes: np.ndarray, model_codes: np.ndarray | None = None,
              model_weight: np.ndarray | None = None, q0: np.ndarray | None = None) -> TreeData:
    """:class:`TreeData` on a :class:`~forestgen.families.energy.grid.Grid`: ``data_codes [d, N]``
    (int32 codes, feature-major) and the model mass, either model-sample codes ``[d, M]`` with
    weights ``[M]`` (summing to one) or the flat product-measure pmfs ``q0`` (offsets
    ``grid.code_offsets``; stored per column in ``vref``)."""
    d = grid.d
    vref = None
    if q0 is not None:
        off, nc = grid.code_offsets, grid.n_codes
        vref = np.zeros((d, int(nc.max(initial=1))))
        for j in range(d):
            vref[j, :nc[j]] = q0[off[j]:off[j + 1]]
    return TreeData(Xb=np.ascontiguousarray(data_codes, np.int32),
                    n_bins=grid.n_values.astype(np.int64), nominal=~grid.ordered,
                    thresholds=grid.split_thresholds(),
                    n_levels=np.where(grid.discrete, grid.n_values, 0).astype(np.int64),
                    vref=vref, has_missing=grid.has_missing.astype(np.bool_),
                    model_codes=None if model_codes is None
                    else np.ascontiguousarray(model_codes, np.int32),
                    model_weight=None if model_weight is None
                    else np.asarray(model_weight, np.float64))


@register("splitter", "energy")
class EnergySplitter(Splitter):
    """Best-first energy tree (see the module docstring).

    criterion : ``"energy"`` (NRGBoost's gain ``½ Σ P²/Q``, default), ``"kl"`` (greedy
        multiplicative boosting, App. C), ``"ise"``, a registered criterion name, or an
        ``@numba.njit`` ``gain(left, right)`` of ``[P, Q]`` child masses.
    max_ratio : ``R``, the largest ``P/Q`` of a child (default 2; ``None`` disables it).

    Grows on grid data (:func:`grid_data`: codes, ``has_missing`` and either
    ``model_codes``/``model_weight`` or the product measure ``q0`` in ``vref``) or on any
    binned :class:`TreeData` with a reference mass ``vref`` (the analytic case; a missing code
    gets no reference mass). ``w``: row weights, used as shares of their sum (the data mass).
    ``limits.max_leaves`` (default 256) and ``limits.max_features`` shape the tree. The
    record's ``threshold`` is the top of the last left code in encoded units
    (``-inf`` when only the missing code goes left); ``node_mass`` holds ``[P, Q]`` per node.
    """

    labelled = False
    needs = frozenset({"Xb", "n_bins", "nominal", "thresholds", "n_levels", "has_missing"})

    def __init__(self, *, criterion: Any = "energy", max_ratio: float | None = 2.0):
        self.criterion = criterion
        self.max_ratio = max_ratio

    def _check(self) -> None:
        r = self.max_ratio
        if r is not None and not (isinstance(r, (int, float)) and r > 1):
            raise ValueError(f"max_ratio must be > 1 or None, got {r!r}")

    def grow(self, data: TreeData, y, w, rng, limits: GrowLimits) -> TreeRecord:
        from forestgen import registry

        self._check()
        analytic = data.model_codes is None
        if analytic:
            data.require(self, "vref")
        crit = self.criterion
        if isinstance(crit, str) and crit not in DENSITY:
            crit = registry.get("criterion", crit)
        code = criterion_code(crit)
        kernel = grow_energy_tree_with(crit) if code == USER else grow_energy_tree
        max_leaves = 256 if limits.max_leaves is None else int(limits.max_leaves)
        if max_leaves < 2:
            raise ValueError(f"max_leaves must be >= 2, got {max_leaves}")
        d = data.d
        Xb = np.ascontiguousarray(data.Xb, np.int32)
        n_bins = np.asarray(data.n_bins, np.int64)
        has_missing = data.has_missing if data.has_missing is not None \
            else (Xb == n_bins[:, None]).any(axis=1)
        n_codes = n_bins + has_missing
        off = np.r_[0, np.cumsum(n_codes)].astype(np.int64)
        if analytic:  # per-code q0 (zero for a missing code the reference mass lacks)
            Xq, wq = np.zeros((d, 0), np.int32), np.zeros(0)
            vref = np.zeros((d, max(int(n_codes.max()), data.vref.shape[1])))
            vref[:, :data.vref.shape[1]] = data.vref
            q0 = np.concatenate([vref[j, :n_codes[j]] for j in range(d)])
        else:
            Xq, wq, q0 = data.model_codes, data.model_weight, np.zeros(1)
        w = np.asarray(w, np.float64)
        if abs(w.sum() - 1.0) > 1e-9:  # masses are shares of the (in-bag) rows
            w = w / w.sum()
        R = np.inf if self.max_ratio is None else float(self.max_ratio)
        grid = ColumnGrid(n_codes, n_bins, np.asarray(has_missing, np.bool_),
                          np.asarray(~data.nominal, np.bool_), off, np.asarray(q0, np.float64),
                          bool(analytic))
        rule = SplitRule(max(code, 0), R, resolve_max_features(limits.max_features, d))
        feat, thr, nan_left, left, right, cat_rows, P, Q = kernel(
            Xb, w, Xq, wq, grid, rule, max_leaves, rng)
        n = len(feat)
        internal = np.nonzero(feat >= 0)[0]
        nominal = data.nominal[feat[internal]]
        threshold = np.zeros(n)  # ordered splits: the top of the last left code (-1: -inf)
        for j in np.unique(feat[internal[~nominal]]):
            at = internal[~nominal][feat[internal[~nominal]] == j]
            threshold[at] = np.r_[data.thresholds[j], -np.inf][thr[at]]
        at = internal[nominal]  # nominal splits: their value codes' row; missing -> nan_left
        nv = n_bins[feat[at]]
        cat_off = np.full(n, -1, np.int64)
        cat_off[at] = np.cumsum(nv) - nv
        cat_left = cat_rows[at][np.arange(cat_rows.shape[1]) < nv[:, None]]
        nan_left[at] = np.where(has_missing[feat[at]],
                                cat_rows[at, np.minimum(nv, cat_rows.shape[1] - 1)], 1)
        is_leaf = feat < 0
        return TreeRecord(feature=feat, threshold=threshold, nan_left=nan_left, left=left,
                          right=right, cat_off=cat_off, cat_left=cat_left,
                          leaf_mass=P[is_leaf], node_mass=np.stack([P, Q], axis=1)).check()
