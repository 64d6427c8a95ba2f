"""``ForestArrays``: every tree of a fitted forest as one struct of flat arrays (DESIGN.md §3).

Nodes of all trees are concatenated with global ids; ``left``/``right`` hold global child ids
(-1 at leaves), ``node_leaf`` the global leaf id of a leaf node (-1 for internal nodes). Leaves
of tree ``b`` are ``leaf_offsets[b]:leaf_offsets[b+1]``. Nominal splits keep their left level set
as bytes in ``cat_left[cat_off[node] : cat_off[node] + n_levels[feature]]``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

import numpy as np
from numba import njit

from forestgen.tree.kernels import (
    EvidenceRows,
    ForestView,
    apply_kernel,
    boxes_kernel,
    column_box_kernel,
    walk_kernel,
    walk_once_kernel,
)
from forestgen.tree.record import TreeRecord

WALK_BLOCK = 256  # rows per block of the parallel tree walk (fewer when a call has few rows)


LEAF_ORDER_MIN = 4096  # pairs below which in_leaf_order evaluates in the given order


def in_leaf_order(fn, leaf: np.ndarray, *pair_arrays: np.ndarray) -> np.ndarray:
    """``fn(leaf, *pair_arrays)`` for (row, leaf) pairs, evaluated with the pairs sorted by
    leaf id and returned in the given order.

    ``fn`` must compute each pair's value from that pair alone (e.g. leaf log densities), so the
    result is the same array as a direct call; sorted lookups walk the per-leaf parameter
    tables in memory order instead of jumping across them once per pair (a row's pairs span
    every tree's slice of the tables).
    """
    if len(leaf) < LEAF_ORDER_MIN:
        return fn(leaf, *pair_arrays)
    order = np.argsort(leaf)
    vals = fn(leaf[order], *(a[order] for a in pair_arrays))
    out = np.empty_like(vals)
    out[order] = vals
    return out


@dataclass
class LeafBoxes:
    """Axis-aligned leaf cells: numeric interval ``(lower, upper]`` and nominal level masks."""

    lower: np.ndarray  # float64 [L, d]
    upper: np.ndarray  # float64 [L, d]
    mask: np.ndarray  # bool [L, n_nominal_levels]
    nom_off: np.ndarray  # int64 [d], -1 where the column is not nominal

    def levels(self, j: int, k: int) -> np.ndarray:
        """Allowed-level mask ``[L, k]`` of discrete column ``j`` (nominal mask or codes)."""
        if self.nom_off[j] >= 0:
            o = self.nom_off[j]
            return self.mask[:, o : o + k]
        return _code_levels(self.lower[:, j], self.upper[:, j], k)

    def column(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` ``[L]`` of column ``j``."""
        return self.lower[:, j], self.upper[:, j]


def _code_levels(lower: np.ndarray, upper: np.ndarray, k: int) -> np.ndarray:
    codes = np.arange(k)
    return (codes[None, :] > lower[:, None]) & (codes[None, :] <= upper[:, None])


class ColumnBoxes:
    """The leaf cells of a forest one column at a time (same values as :class:`LeafBoxes`):
    a fit that visits the columns in turn holds ``[L]`` bounds (and one ``[L, k]`` level mask)
    instead of ``[L, d]`` tables. The last column each thread asked for is kept (threads
    fitting different columns at once neither share nor evict each other's)."""

    def __init__(self, forest: ForestArrays, nominal_levels: np.ndarray):
        self.forest = forest
        self.nominal_levels = np.asarray(nominal_levels, np.int64)
        self._cached = threading.local()

    def _get(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        hit = getattr(self._cached, "hit", None)
        if hit is None or hit[0] != j:
            f = self.forest
            hit = (j, column_box_kernel(f.view(), f.n_leaves, j, int(self.nominal_levels[j])))
            self._cached.hit = hit
        return hit[1]

    def column(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` ``[L]`` of column ``j``."""
        lower, upper, _ = self._get(j)
        return lower, upper

    def levels(self, j: int, k: int) -> np.ndarray:
        """Allowed-level mask ``[L, k]`` of discrete column ``j`` (nominal mask or codes)."""
        lower, upper, mask = self._get(j)
        if self.nominal_levels[j] > 0:
            return mask[:, :k]
        return _code_levels(lower, upper, k)


@njit(cache=True, nogil=True)
def _global_ids(feature, left, right, cat_off, node_off, cat_start):
    """Turn the concatenated trees' tree-local ``left``, ``right`` and ``cat_off`` (in place)
    into global ids (-1 stays -1); return each node's global leaf id (-1 at internal nodes)
    and each tree's first leaf, ``[B + 1]``."""
    node_leaf = np.full(feature.shape[0], -1, np.int32)
    leaf_off = np.zeros(node_off.shape[0], np.int64)
    k = 0
    for b in range(node_off.shape[0] - 1):
        leaf_off[b] = k
        base = node_off[b]
        cbase = cat_start[b]
        for i in range(node_off[b], node_off[b + 1]):
            if feature[i] < 0:
                node_leaf[i] = k
                k += 1
            left[i] = left[i] + base if left[i] >= 0 else -1
            right[i] = right[i] + base if right[i] >= 0 else -1
            cat_off[i] = cat_off[i] + cbase if cat_off[i] >= 0 else -1
    leaf_off[node_off.shape[0] - 1] = k
    return node_leaf, leaf_off


@dataclass
class ForestArrays:
    feature: np.ndarray  # int32 [N], -1 at leaves
    threshold: np.ndarray  # float64 [N]
    nan_left: np.ndarray  # uint8 [N]
    left: np.ndarray  # int32 [N] global
    right: np.ndarray  # int32 [N] global
    cat_off: np.ndarray  # int64 [N], -1 unless a nominal split
    cat_left: np.ndarray  # uint8 [M]
    node_leaf: np.ndarray  # int32 [N]
    node_offsets: np.ndarray  # int64 [B+1]
    leaf_offsets: np.ndarray  # int64 [B+1]
    n_levels: np.ndarray  # int32 [d]; >0 for nominal columns (levels of their splits)
    node_value: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # [N, C] class weights
    # exact leaf cells where they differ from the path boxes (empty otherwise): [L, d], [L, M]
    cell_lower: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    cell_upper: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    cell_mask: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    leaf_mass: np.ndarray = field(default_factory=lambda: np.zeros(0))  # [L] (density trees)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_trees(cls, trees: list[TreeRecord], n_levels: np.ndarray) -> ForestArrays:
        """Concatenate per-tree records (tree-local ids). Optional outputs are kept when every
        record has them: class weights, exact leaf cells, leaf masses."""
        # one compiled pass over the concatenated nodes (not a handful of numpy calls per
        # tree): global leaf ids count the leaves before each node, children and level
        # offsets shift by their tree's start
        sizes = np.array([len(t.feature) for t in trees], np.int64)
        node_off = np.zeros(len(trees) + 1, np.int64)
        np.cumsum(sizes, out=node_off[1:])
        cat_sizes = np.zeros(len(trees) + 1, np.int64)
        np.cumsum(np.array([len(t.cat_left) for t in trees], np.int64), out=cat_sizes[1:])

        def cat(parts, dtype, empty):
            return np.concatenate(parts).astype(dtype, copy=False) if parts else empty

        feature = cat([t.feature for t in trees], np.int32, np.zeros(0, np.int32))
        left = cat([t.left for t in trees], np.int32, np.zeros(0, np.int32))
        right = cat([t.right for t in trees], np.int32, np.zeros(0, np.int32))
        cat_off = cat([t.cat_off for t in trees], np.int64, np.zeros(0, np.int64))
        node_leaf, leaf_off = _global_ids(feature, left, right, cat_off, node_off, cat_sizes)
        every = len(trees) > 0
        out = cls(
            feature=feature,
            threshold=cat([t.threshold for t in trees], np.float64, np.zeros(0)),
            nan_left=cat([t.nan_left for t in trees], np.uint8, np.zeros(0, np.uint8)),
            left=left,
            right=right,
            cat_off=cat_off,
            cat_left=cat([t.cat_left for t in trees], np.uint8, np.zeros(0, np.uint8)),
            node_leaf=node_leaf,
            node_offsets=node_off, leaf_offsets=leaf_off,
            n_levels=np.asarray(n_levels, np.int32),
        )
        if every and all(t.class_weight is not None for t in trees):
            out.node_value = np.concatenate([np.asarray(t.class_weight, np.float64)
                                             for t in trees])
        if every and all(t.cells is not None for t in trees):
            out.cell_lower = np.concatenate([t.cells.lower for t in trees]).astype(np.float64)
            out.cell_upper = np.concatenate([t.cells.upper for t in trees]).astype(np.float64)
            out.cell_mask = np.concatenate([t.cells.mask for t in trees]).astype(bool)
        if every and all(t.leaf_mass is not None for t in trees):
            out.leaf_mass = np.concatenate([t.leaf_mass for t in trees]).astype(np.float64)
        return out

    @classmethod
    def concat(cls, parts: list[ForestArrays]) -> ForestArrays:
        """The trees of ``parts`` in order, as one forest (global ids shifted). Optional
        outputs are kept when every part has them; every part must share ``n_levels``."""
        if not parts:
            raise ValueError("concat needs at least one forest")
        n_levels = parts[0].n_levels
        if any(not np.array_equal(p.n_levels, n_levels) for p in parts):
            raise ValueError("forests to concatenate must have the same n_levels")
        node_shift = np.cumsum([0] + [len(p.feature) for p in parts])
        leaf_shift = np.cumsum([0] + [p.n_leaves for p in parts])
        cat_shift = np.cumsum([0] + [len(p.cat_left) for p in parts])

        def shifted(name, shift, dtype):
            return np.concatenate([np.where(getattr(p, name) >= 0, getattr(p, name) + s, -1)
                                   for p, s in zip(parts, shift)]).astype(dtype)

        def offsets(name, shift):
            return np.concatenate([[0]] + [getattr(p, name)[1:] + s
                                           for p, s in zip(parts, shift)]).astype(np.int64)

        out = cls(
            feature=np.concatenate([p.feature for p in parts]),
            threshold=np.concatenate([p.threshold for p in parts]),
            nan_left=np.concatenate([p.nan_left for p in parts]),
            left=shifted("left", node_shift, np.int32),
            right=shifted("right", node_shift, np.int32),
            cat_off=shifted("cat_off", cat_shift, np.int64),
            cat_left=np.concatenate([p.cat_left for p in parts]),
            node_leaf=shifted("node_leaf", leaf_shift, np.int32),
            node_offsets=offsets("node_offsets", node_shift),
            leaf_offsets=offsets("leaf_offsets", leaf_shift),
            n_levels=n_levels,
        )
        for name in ("node_value", "cell_lower", "cell_upper", "cell_mask", "leaf_mass"):
            arrs = [getattr(p, name) for p in parts]
            if all(len(a) for a in arrs):  # a [L, 0] mask (no nominal column) is present
                setattr(out, name, np.concatenate(arrs))
        return out

    # ------------------------------------------------------------------ properties
    @property
    def n_trees(self) -> int:
        return len(self.node_offsets) - 1

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_offsets[-1])

    @property
    def roots(self) -> np.ndarray:
        return self.node_offsets[:-1].astype(np.int64)

    @property
    def leaf_tree(self) -> np.ndarray:
        """Tree index of every global leaf, int32 [L]."""
        return np.repeat(np.arange(self.n_trees, dtype=np.int32), np.diff(self.leaf_offsets))

    @property
    def leaf_node(self) -> np.ndarray:
        """Global node id of every leaf, int64 [L]."""
        nodes = np.nonzero(self.node_leaf >= 0)[0]
        return nodes[np.argsort(self.node_leaf[nodes], kind="stable")]

    @property
    def leaf_value(self) -> np.ndarray:
        """Per-leaf class weights seen while growing (``[L, C]``; empty if not recorded)."""
        if self.node_value.size == 0:
            return self.node_value
        return self.node_value[self.leaf_node]

    # ------------------------------------------------------------------ queries
    def view(self) -> ForestView:
        """The node arrays as the walk kernels take them."""
        return ForestView(self.feature, self.threshold, self.nan_left, self.left, self.right,
                          self.cat_off, self.cat_left, self.n_levels, self.roots,
                          self.node_leaf)

    def _args(self):
        return (self.feature, self.threshold, self.nan_left, self.left, self.right, self.cat_off,
                self.cat_left, self.n_levels)

    def apply(self, X: np.ndarray, n_trees: int | None = None) -> np.ndarray:
        """Global leaf id per row and tree, ``[n, n_trees]`` int32 (NaN follows nan_left);
        ``n_trees``: only the first trees."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        return apply_kernel(X, *self._args(), self.roots[:n_trees], self.node_leaf)

    def reach(self, X: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None,
              sets: dict | None = None, per_row: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(ptr, leaves)`` of all leaves consistent with each row, NaN = unknown.

        Optional evidence prunes the walk where ``X`` is NaN: interval evidence ``(lo, hi]``
        (``[n, d]``, NaN ``lo`` = none) and level sets ``sets[j] = (active [n], mask [n, k])``
        skip every subtree whose cell they exclude, so only leaves with non-zero evidence mass
        are listed (Numba, parallel over rows, same result at any thread count).

        ``per_row``: an expected bound on the mean number of leaves a row reaches; the leaves
        are then listed in one walk instead of two (counting, then filling), with the same
        result (a block of rows that overflows the bound is walked a second time).
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        n, d = X.shape
        max_nodes = int(np.diff(self.node_offsets).max()) if self.n_trees else 1
        none_f = np.zeros((0, d))
        lo_a = none_f if lo is None else np.ascontiguousarray(lo, np.float64)
        hi_a = none_f if hi is None else np.ascontiguousarray(hi, np.float64)
        if lo_a.shape[0] != hi_a.shape[0]:
            raise ValueError("reach: lo and hi must be given together")
        sact = np.zeros((0, d), bool)
        soff = np.zeros(d, np.int64)
        sk = np.zeros(d, np.int64)
        smask = np.zeros((n, 0), bool)
        if sets:
            sact = np.zeros((n, d), bool)
            parts, acc = [], 0
            for j, (a, mk) in sorted(sets.items()):
                sact[:, j] = a
                soff[j], sk[j] = acc, mk.shape[1]
                acc += mk.shape[1]
                parts.append(np.broadcast_to(mk, (n, mk.shape[1])))
            smask = np.ascontiguousarray(np.concatenate(parts, axis=1), bool)
        block = max(1, min(WALK_BLOCK, -(-n // 16)))  # >= 16 blocks to share among threads
        ev = EvidenceRows(X, lo_a, hi_a, sact, smask, soff, sk)
        if per_row is not None:
            return walk_once_kernel(ev, self.view(), max_nodes, block,
                                    int(min(max(per_row, 1), self.n_leaves)))
        return walk_kernel(ev, self.view(), max_nodes, block)

    def reach_chunks(self, X: np.ndarray, budget: int, rows: np.ndarray | None = None,
                     lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                     sets: dict | None = None):
        """:meth:`reach` over ``X[rows]`` (default all rows, in order) in consecutive chunks,
        yielding ``(chunk_rows, ptr, leaves)`` with about ``budget`` (row, leaf) pairs each.
        ``lo``, ``hi``, ``sets``: evidence over the rows of ``X`` (see :meth:`reach`).

        The first chunk is sized for the worst case (every row reaching every leaf); later ones
        follow the pairs per row seen so far (at most doubling), so rows that reach a few
        leaves per tree are batched by the thousand instead of one at a time.
        """
        rows = np.arange(len(X)) if rows is None else np.asarray(rows, np.int64)
        max_step = max(1, budget // max(self.n_trees, 1))
        step = max(1, budget // max(self.n_leaves, 1))
        bound = self.n_leaves  # first chunk: no row reaches more than every leaf
        i = 0
        while i < len(rows):
            idx = rows[i : i + step]
            sub = None if not sets else {j: (a[idx], mk[idx] if len(mk) == len(X) else mk)
                                          for j, (a, mk) in sets.items()}
            ptr, leaf = self.reach(X[idx], None if lo is None else lo[idx],
                                   None if hi is None else hi[idx], sub, per_row=bound)
            yield idx, ptr, leaf
            i += len(idx)
            per_row = max(len(leaf) / len(idx), 1.0)
            # one walk while each block of rows stays within 4x the mean so far (else two);
            # its buffer holds at most 4 * budget pairs
            bound = int(np.ceil(4 * per_row))
            step = int(min(max_step, 2 * len(idx), max(1.0, budget / per_row)))

    def boxes(self, d: int, nominal_levels: np.ndarray) -> LeafBoxes:
        """Exact leaf cells for ``d`` columns (``nominal_levels[j] > 0`` marks nominal column
        j): the stored cells where the splitter recorded them, else the root-path boxes."""
        nominal_levels = np.asarray(nominal_levels, np.int64)
        nom_off = np.full(d, -1, np.int64)
        acc = 0
        for j in range(d):
            if nominal_levels[j] > 0:
                nom_off[j] = acc
                acc += int(nominal_levels[j])
        if self.n_leaves and self.cell_lower.shape == (self.n_leaves, d):
            return LeafBoxes(self.cell_lower, self.cell_upper, self.cell_mask, nom_off)
        lower, upper, mask = boxes_kernel(self.view(), self.n_leaves, d, nom_off, acc)
        return LeafBoxes(lower, upper, mask, nom_off)

    def column_boxes(self, d: int, nominal_levels: np.ndarray) -> LeafBoxes | ColumnBoxes:
        """:meth:`boxes` for a caller that reads one column at a time (``column(j)``,
        ``levels(j, k)``): the stored cells where recorded, else :class:`ColumnBoxes`."""
        if self.n_leaves and self.cell_lower.shape == (self.n_leaves, d):
            return self.boxes(d, nominal_levels)
        return ColumnBoxes(self, nominal_levels)

    def depth(self) -> np.ndarray:
        """Depth of each tree."""
        out = np.zeros(self.n_trees, np.int64)
        depth = np.zeros(len(self.feature), np.int64)
        for b in range(self.n_trees):
            for node in range(self.node_offsets[b], self.node_offsets[b + 1]):
                if self.feature[node] >= 0:
                    depth[self.left[node]] = depth[node] + 1
                    depth[self.right[node]] = depth[node] + 1
            out[b] = depth[self.node_offsets[b] : self.node_offsets[b + 1]].max()
        return out

    # ------------------------------------------------------------------ persistence
    def to_arrays(self, prefix: str = "forest.") -> dict[str, np.ndarray]:
        return {prefix + f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, arrays, prefix: str = "forest.") -> ForestArrays:
        """Inverse of :meth:`to_arrays`; fields absent from older files keep their defaults."""
        return cls(**{f.name: np.asarray(arrays[prefix + f.name]) for f in fields(cls)
                      if prefix + f.name in arrays})
