"""``TreeRecord``: what a splitter returns for one tree (tree-local node ids, encoded units)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass
class LeafCells:
    """Exact cells of a tree's leaves, in node-id order: numeric/ordered intervals
    ``(lower, upper]`` ``[n_leaves, d]`` and nominal level masks ``[n_leaves, n_nominal_levels]``
    (columns laid out as in :meth:`ForestArrays.boxes`)."""

    lower: np.ndarray
    upper: np.ndarray
    mask: np.ndarray


def _bad_links_numpy(feature, left, right, row_node) -> int:
    """:func:`_bad_links` for node arrays of any dtype."""
    n = len(feature)
    internal = feature >= 0
    for code, a in ((1, left), (2, right)):
        if np.any(internal & ((a <= 0) | (a >= n))) or np.any(~internal & (a != -1)):
            return code
    if len(row_node) and (row_node.min() < 0 or row_node.max() >= n
                          or np.any(feature[row_node] >= 0)):
        return 3
    return 0


@njit(cache=True, nogil=True)
def _bad_children(feature, a):
    """Whether some internal node's child id ``a`` lies outside ``1..n-1`` or a leaf's is not
    -1."""
    n = feature.shape[0]
    for i in range(n):
        if feature[i] >= 0:
            if a[i] <= 0 or a[i] >= n:
                return True
        elif a[i] != -1:
            return True
    return False


@njit(cache=True, nogil=True)
def _bad_links(feature, left, right, row_node):
    """0 when every internal node's ``left`` / ``right`` child id lies in ``1..n-1``, every
    leaf's is -1 and every ``row_node`` entry is a leaf's id; else 1 (``left`` bad), 2
    (``right``) or 3 (``row_node``), checked in that order."""
    if _bad_children(feature, left):
        return 1
    if _bad_children(feature, right):
        return 2
    n = feature.shape[0]
    for i in range(row_node.shape[0]):
        r = row_node[i]
        if r < 0 or r >= n or feature[r] >= 0:
            return 3
    return 0


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

    def check(self, *, rows: bool = True, n_features: int | None = None) -> TreeRecord:
        """Validate shapes and links; raises ``ValueError`` naming the bad field. ``rows=False``
        leaves ``row_node`` to the caller (a forest checks it while it reads it); with
        ``n_features`` every split's column id must lie in ``0..n_features-1``, and a numeric
        split's threshold must be a number (the kernels that route rows trust both)."""
        n = self.n_nodes
        for name in ("threshold", "nan_left", "left", "right", "cat_off"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"TreeRecord.{name} has {len(getattr(self, name))} entries, "
                                 f"feature has {n}")
        internal = self.feature >= 0
        if n_features is not None and np.any(self.feature[internal] >= n_features):
            raise ValueError(f"TreeRecord.feature holds column id "
                             f"{int(self.feature[internal].max())} for a table of {n_features} "
                             f"columns")
        numeric = internal & (np.asarray(self.cat_off) < 0)
        if np.isnan(np.asarray(self.threshold, np.float64)[numeric]).any():
            raise ValueError("TreeRecord.threshold is NaN at a numeric split")
        if np.any(internal & (np.asarray(self.cat_off) >= len(self.cat_left))):
            raise ValueError("TreeRecord.cat_off points past cat_left at a nominal split")
        rows = self.row_node if rows and self.row_node is not None else self.feature[:0]
        arrays = (self.feature, self.left, self.right, rows)
        if all(a.dtype.kind in "iu" for a in arrays):  # one compiled pass over the links
            bad = _bad_links(*arrays)
        else:
            bad = _bad_links_numpy(*arrays)
        if bad in (1, 2):
            raise ValueError(f"TreeRecord.{('left', 'right')[bad - 1]} must hold child ids in "
                             f"1..{n - 1} at internal nodes and -1 at leaves")
        if bad == 3:
            raise ValueError("TreeRecord.row_node must hold a leaf's node id for every row")
        for name in ("class_weight", "node_mass"):
            if getattr(self, name) is not None and len(getattr(self, name)) != n:
                raise ValueError(f"TreeRecord.{name} must have one row per node")
        if self.cells is None and self.leaf_mass is None:
            return self
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
