"""``TreeRecord``: what a splitter returns for one tree (tree-local node ids, encoded units)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LeafCells:
    """Exact cells of a tree's leaves, in node-id order: numeric/ordered intervals
    ``(lower, upper]`` ``[n_leaves, d]`` and nominal level masks ``[n_leaves, n_nominal_levels]``
    (columns laid out as in :meth:`ForestArrays.boxes`)."""

    lower: np.ndarray
    upper: np.ndarray
    mask: np.ndarray


@dataclass
class TreeRecord:
    """One grown tree. Node arrays (length ``n_nodes``, tree-local ids, -1 where absent):
    ``feature`` (int32, -1 at leaves), ``threshold`` (float64, encoded units: left iff
    ``x <= threshold``), ``nan_left`` (uint8: where missing / unseen levels go), ``left`` /
    ``right`` (int32), ``cat_off`` (int64 offset into ``cat_left``, -1 unless a nominal split) and
    ``cat_left`` (uint8 bytes, 1 = level goes left, ``n_levels`` bytes per nominal split).

    Optional outputs (``None`` when the splitter does not produce them):
    ``class_weight`` ``[n_nodes, C]`` — in-bag weight of each class per node (labelled trees);
    ``cells`` — exact leaf cells when they differ from the path boxes (path compression,
    clipping to a root box); ``leaf_mass`` ``[n_leaves]`` — mass of each leaf (density trees);
    ``node_mass`` ``[n_nodes, 2]`` — data mass ``P`` and reference / model mass ``Q`` of every
    node (energy trees: what NRGBoost's leaf values and line search need); ``row_node`` ``[n]``
    — the node each row of the tree data reaches, in bag or out of it (int32; given when
    :attr:`~forestgen.splitters.base.TreeData.route_rows` asks for it).
    """

    feature: np.ndarray
    threshold: np.ndarray
    nan_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    cat_left: np.ndarray
    class_weight: np.ndarray | None = None
    cells: LeafCells | None = None
    leaf_mass: np.ndarray | None = None
    node_mass: np.ndarray | None = None
    row_node: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    @property
    def n_leaves(self) -> int:
        return int((self.feature < 0).sum())

    def check(self) -> TreeRecord:
        """Validate shapes and links; raises ``ValueError`` naming the bad field."""
        n = self.n_nodes
        for name in ("threshold", "nan_left", "left", "right", "cat_off"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"TreeRecord.{name} has {len(getattr(self, name))} entries, "
                                 f"feature has {n}")
        internal = self.feature >= 0
        for name in ("left", "right"):
            a = getattr(self, name)
            if np.any(internal & ((a <= 0) | (a >= n))) or np.any(~internal & (a != -1)):
                raise ValueError(f"TreeRecord.{name} must hold child ids in 1..{n - 1} at "
                                 "internal nodes and -1 at leaves")
        if self.row_node is not None and len(self.row_node) and (
                self.row_node.min() < 0 or self.row_node.max() >= n
                or np.any(self.feature[self.row_node] >= 0)):
            raise ValueError("TreeRecord.row_node must hold a leaf's node id for every row")
        for name in ("class_weight", "node_mass"):
            if getattr(self, name) is not None and len(getattr(self, name)) != n:
                raise ValueError(f"TreeRecord.{name} must have one row per node")
        nl = self.n_leaves
        if self.cells is not None and len(self.cells.lower) != nl:
            raise ValueError(f"TreeRecord.cells has {len(self.cells.lower)} rows for {nl} leaves")
        if self.leaf_mass is not None and len(self.leaf_mass) != nl:
            raise ValueError(f"TreeRecord.leaf_mass has {len(self.leaf_mass)} entries for "
                             f"{nl} leaves")
        return self

    @classmethod
    def from_nominal_rows(cls, feature, threshold, left, right, cat_rows, n_levels,
                          nominal, **optional) -> TreeRecord:
        """Record from per-node level rows ``cat_rows [n_nodes, max_levels]`` (growers that keep
        a nominal split's left set as a row); every missing value goes left."""
        n = len(feature)
        cat_off = np.full(n, -1, np.int64)
        parts = []
        acc = 0
        for node in np.nonzero(feature >= 0)[0]:
            j = feature[node]
            if nominal[j]:
                cat_off[node] = acc
                parts.append(cat_rows[node, :n_levels[j]])
                acc += int(n_levels[j])
        return cls(feature=np.asarray(feature, np.int32),
                   threshold=np.where(np.isnan(threshold), 0.0, threshold).astype(np.float64),
                   nan_left=np.ones(n, np.uint8), left=np.asarray(left, np.int32),
                   right=np.asarray(right, np.int32), cat_off=cat_off,
                   cat_left=np.concatenate(parts).astype(np.uint8) if parts
                   else np.zeros(0, np.uint8), **optional)


def path_cells(rec: TreeRecord, d: int, nominal_levels: np.ndarray):
    """The box each leaf's root path implies: ``lower, upper [n_leaves, d]`` and nominal masks
    (what :meth:`ForestArrays.boxes` computes for a whole forest), for one record."""
    from forestgen.tree.kernels import ForestView, boxes_kernel

    nominal_levels = np.asarray(nominal_levels, np.int64)
    nom_off = np.where(nominal_levels > 0, np.cumsum(nominal_levels) - nominal_levels, -1)
    is_leaf = rec.feature < 0
    node_leaf = np.full(rec.n_nodes, -1, np.int32)
    node_leaf[is_leaf] = np.arange(int(is_leaf.sum()), dtype=np.int32)
    view = ForestView(rec.feature, rec.threshold, rec.nan_left, rec.left, rec.right,
                      rec.cat_off, rec.cat_left, nominal_levels.astype(np.int32),
                      np.zeros(1, np.int64), node_leaf)
    return boxes_kernel(view, int(is_leaf.sum()), d, nom_off.astype(np.int64),
                        int(nominal_levels.sum()))
