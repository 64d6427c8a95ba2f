"""Histogram splitters on class-labelled rows: Gini, entropy or a user ``@njit`` gain."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np

from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, Splitter, TreeData, resolve_max_features
from forestgen.tree.criteria import LABELLED, USER, criterion_code
from forestgen.tree.grow_impurity import (
    LabelledRows,
    bin_thresholds,
    grow_rule,
    grow_tree,
    grow_tree_with,
    workspace,
)
from forestgen.tree.record import TreeRecord


@register("splitter", "impurity")
class ImpuritySplitter(Splitter):
    """Best histogram split of ``max_features`` random columns per node, grown depth-first
    (:mod:`forestgen.tree.grow_impurity`); nominal columns by level subsets, NaN to the better
    side.

    criterion : ``"gini"`` (Breiman et al. 1984), ``"entropy"``, the name of a registered
        criterion, or an ``@numba.njit`` ``gain(left, right)`` of per-class child weights.
    min_gain : a split must gain more than this (for Gini: the weighted impurity decrease).
    """

    labelled = True
    needs = frozenset({"Xb", "n_bins", "nominal", "thresholds"})

    def __init__(self, *, criterion: Any = "gini", min_gain: float = 0.0):
        self.criterion = criterion
        self.min_gain = min_gain

    def _kernel(self):
        from forestgen import registry

        crit = self.criterion
        if isinstance(crit, str) and crit not in LABELLED:
            crit = registry.get("criterion", crit)
        code = criterion_code(crit)
        return (grow_tree_with(crit), USER) if code == USER else (grow_tree, code)

    def grow(self, data: TreeData, y, w, rng, limits: GrowLimits) -> TreeRecord:
        return self._grower(data, y, limits)(w, rng)

    def tree_grower(self, data: TreeData, y, limits: GrowLimits):
        """:meth:`Splitter.tree_grower`: the limits checked and the rows, rule and kernel set
        up once per forest; each tree converts only its weights."""
        if type(self).grow is not ImpuritySplitter.grow:  # a subclass growing its own way
            return super().tree_grower(data, y, limits)
        return self._grower(data, y, limits)

    def _grower(self, data: TreeData, y, limits: GrowLimits):
        if limits.max_depth is not None and limits.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0 or None, got {limits.max_depth}")
        if not limits.min_samples_leaf > 0:
            raise ValueError(f"min_samples_leaf must be > 0, got {limits.min_samples_leaf}")
        kernel, code = self._kernel()
        C = int(limits.n_classes)
        mcl = (np.zeros(C) if limits.min_class_leaf is None
               else np.asarray(limits.min_class_leaf, float))
        Xb = data.Xb
        if Xb.dtype.itemsize < 4 and C > 1 << (8 * Xb.dtype.itemsize):
            Xb = Xb.astype(np.uint32)  # the grower keeps class labels in a code slot
        n_bins = data.n_bins.astype(np.int64)
        nominal = data.nominal.astype(np.bool_)
        y = np.asarray(y, np.int64)
        rule = grow_rule(C, -1 if limits.max_depth is None else limits.max_depth,
                         limits.min_samples_leaf, mcl,
                         resolve_max_features(limits.max_features, data.d), self.min_gain, code)
        route = bool(data.route_rows)
        flat, off = data.threshold_table
        # each thread's buffers, reused by its trees of this forest (the same trees; a
        # fresh buffer per tree costs its page faults again: ~140 MB a tree at 1M rows)
        local = threading.local()

        def grow_one(w, rng) -> TreeRecord:
            rows = LabelledRows(Xb, n_bins, nominal, y, np.asarray(w, np.float64))
            ws = getattr(local, "ws", None)
            if ws is None:
                n = Xb.shape[1]
                ws = local.ws = workspace(Xb, C, n, n if route else 0)
            feat, thr_bin, nan_left, left, right, cat_off, cat_left, value, row_node = kernel(
                rows, rule, rng, route, ws)
            thr, ok = bin_thresholds(feat, thr_bin, cat_off, flat, off)
            if not ok:
                raise IndexError("grow_tree returned a threshold bin outside its column's bins")
            return TreeRecord(feature=feat, threshold=thr, nan_left=nan_left, left=left,
                              right=right, cat_off=cat_off, cat_left=cat_left,
                              class_weight=value, row_node=row_node if route else None)

        return grow_one


class _FixedCriterion(ImpuritySplitter):
    """An :class:`ImpuritySplitter` whose criterion is fixed by the subclass."""

    fixed: ClassVar[str] = "gini"

    def __init__(self, *, min_gain: float = 0.0):
        super().__init__(criterion=self.fixed, min_gain=min_gain)

    def get_params(self) -> dict:
        return {"min_gain": self.min_gain}


@register("splitter", "gini")
class GiniSplitter(_FixedCriterion):
    """:class:`ImpuritySplitter` with the Gini criterion (ARF, GeF)."""

    fixed = "gini"


@register("splitter", "entropy")
class EntropySplitter(_FixedCriterion):
    """:class:`ImpuritySplitter` with the entropy (information gain) criterion."""

    fixed = "entropy"
