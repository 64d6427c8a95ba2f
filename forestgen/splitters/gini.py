"""Gini impurity splitter (Breiman et al. 1984) on class-labelled rows, via the Numba grower."""

from __future__ import annotations

import numpy as np

from forestgen.registry import register
from forestgen.splitters.base import BinnedData, Splitter, resolve_max_features
from forestgen.tree.grow import grow_tree


@register("splitter", "gini")
class GiniSplitter(Splitter):
    """Histogram Gini splits; nominal columns by level subsets, NaN to the better side.

    Parameters
    ----------
    max_features : ``"sqrt"`` (default, ⌊√d⌋ as in Breiman's RF and ARF), ``"log2"``, ``None``,
        int or fraction — candidate features drawn per node.
    max_depth : maximum depth (``None``: unlimited).
    min_samples_leaf : minimum weighted rows in each child.
    min_impurity_decrease : a split must reduce weighted Gini by more than this.
    """

    def __init__(self, *, max_features="sqrt", max_depth: int | None = None,
                 min_samples_leaf: float = 1.0, min_impurity_decrease: float = 0.0):
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease

    def grow(self, data: BinnedData, y, w, rng, *, n_classes, min_class_leaf=None):
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0 or None, got {self.max_depth}")
        if self.min_samples_leaf <= 0:
            raise ValueError(f"min_samples_leaf must be > 0, got {self.min_samples_leaf}")
        mcl = np.zeros(n_classes) if min_class_leaf is None else np.asarray(min_class_leaf, float)
        out = grow_tree(
            data.Xb, data.n_bins.astype(np.int64), data.nominal.astype(np.bool_),
            np.asarray(y, np.int64), np.asarray(w, np.float64), int(n_classes),
            -1 if self.max_depth is None else int(self.max_depth),
            float(self.min_samples_leaf), mcl,
            resolve_max_features(self.max_features, data.d),
            float(self.min_impurity_decrease), rng,
        )
        keys = ("feature", "thr_bin", "nan_left", "left", "right", "cat_off", "cat_left",
                "node_value")
        return dict(zip(keys, out))
