"""Grow a forest: one splitter call per tree in one thread pool, one Generator per tree.

This is the only place trees are grown. Seeding: a learner turns its ``random_state`` into a
:class:`numpy.random.SeedSequence` (:func:`forestgen.validation.seed_sequence`) and spawns one
Generator per tree (:func:`tree_generators`), so results are identical for any ``n_jobs``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from forestgen.parallel import thread_map
from forestgen.splitters.base import GrowLimits, Splitter, TreeData
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import TreeRecord


@njit(cache=True, nogil=True)
def _leaf_of_rows(feature, row_node, out):
    """``out[i]``: the tree-local leaf id (leaves counted in node order) of node
    ``row_node[i]``; False (``out`` unfinished) when some ``row_node`` entry is not a leaf's
    node id (the check :meth:`TreeRecord.check` makes of ``row_node``, in the same pass)."""
    n = feature.shape[0]
    local = np.empty(n + 1, np.int32)  # -1: not a leaf (entry n: ids outside 0..n-1)
    local[n] = -1
    k = 0
    for node in range(n):
        leaf = feature[node] < 0
        local[node] = k if leaf else -1
        k += np.int32(leaf)
    for i in range(row_node.shape[0]):
        r = row_node[i]
        v = local[r if 0 <= r < n else n]
        if v < 0:
            return False
        out[i] = v
    return True


def tree_generators(seed_seq: np.random.SeedSequence, n_trees: int) -> list[np.random.Generator]:
    return [np.random.Generator(np.random.PCG64(s)) for s in seed_seq.spawn(n_trees)]


def map_trees(fn: Callable[[int], Any], n_trees: int, n_jobs: int | None) -> list:
    """``[fn(b) for b in range(n_trees)]`` on ``n_jobs`` threads (kernels release the GIL)."""
    return thread_map(fn, n_trees, n_jobs)


def grow_forest(
    splitter: Splitter,
    data: TreeData,
    y: np.ndarray | None,
    weights: np.ndarray | Callable[[int], np.ndarray],
    rngs: list[np.random.Generator],
    limits: GrowLimits,
    *,
    n_levels: np.ndarray | None = None,
    n_jobs: int | None = -1,
    on_tree_done: Callable[[], None] | None = None,
) -> ForestArrays:
    """Grow ``len(rngs)`` trees; tree ``b`` uses row weights ``weights[b]`` and ``rngs[b]``.

    ``weights`` is a ``[B, n]`` array, or a function of ``b`` called in tree ``b``'s task just
    before it grows (e.g. a bootstrap drawn from ``rngs[b]``: the same draws as drawing every
    tree's weights first, without holding ``[B, n]`` weights). ``n_levels``: level count of each
    nominal column in the forest (default: from ``data``). ``on_tree_done`` is called (under a
    lock) after each tree, e.g. to advance a progress bar.
    """
    return grow_forest_routed(splitter, data, y, weights, rngs, limits, n_levels=n_levels,
                              n_jobs=n_jobs, on_tree_done=on_tree_done)[0]


def grow_forest_routed(
    splitter: Splitter,
    data: TreeData,
    y: np.ndarray | None,
    weights: np.ndarray | Callable[[int], np.ndarray],
    rngs: list[np.random.Generator],
    limits: GrowLimits,
    *,
    n_levels: np.ndarray | None = None,
    n_jobs: int | None = -1,
    on_tree_done: Callable[[], None] | None = None,
    on_routed: Callable[[int, TreeRecord, np.ndarray], None] | None = None,
) -> tuple[ForestArrays, np.ndarray | None]:
    """:func:`grow_forest`, and with ``data.route_rows`` the global leaf id each row of
    ``data`` reaches in each tree, ``[n, B]`` int32 (what ``forest.apply`` of the rows gives),
    from the splitters' ``row_node``; ``None`` when a splitter does not give it (or without
    ``route_rows``). The leaves are tree-major in memory (the transpose of a C-contiguous
    ``[B, n]``: each tree writes one contiguous row, not a column of stride ``4 B``).

    ``on_routed(b, record, local)``, if given, is called in tree ``b``'s task (on the pool's
    threads, concurrently with other trees' tasks) once its rows are routed: ``local [n]``
    holds each row's tree-local leaf id (leaves counted in node order, the order of
    ``record``'s leaf nodes), ``record`` the tree (its ``class_weight`` still there). Not
    called for a tree whose splitter does not route its rows."""
    lock = threading.Lock()
    n = data.Xb.shape[1] if data.Xb is not None else len(data.Z)
    if y is None:
        y = np.zeros(n, np.int64)
    B = len(rngs)
    get_w = weights if callable(weights) else weights.__getitem__
    row_leaf = np.empty((B, n), np.int32) if data.route_rows else None  # tree-major
    routed = np.zeros(B, bool)

    grow_one = splitter.tree_grower(data, y, limits)  # per-forest setup, once

    def one(b: int) -> TreeRecord:
        t = grow_one(get_w(b), rngs[b])
        if not isinstance(t, TreeRecord):
            raise TypeError(f"{type(splitter).__name__}.grow must return a TreeRecord, got "
                            f"{type(t).__name__}")
        route = row_leaf is not None and t.row_node is not None
        t.check(rows=not route, n_features=data.d)  # (routed rows: checked as leaves are listed)
        if route:
            if t.row_node.dtype.kind not in "iu" or not _leaf_of_rows(
                    t.feature, t.row_node, row_leaf[b]):
                raise ValueError("TreeRecord.row_node must hold a leaf's node id for every row")
            routed[b] = True
            if on_routed is not None:
                on_routed(b, t, row_leaf[b])
        t.row_node = None
        if on_tree_done is not None:
            with lock:
                on_tree_done()
        return t

    trees = map_trees(one, B, n_jobs)
    if n_levels is None:
        n_levels = np.where(data.nominal, data.n_bins, 0)
    forest = ForestArrays.from_trees(trees, n_levels)
    if row_leaf is not None:
        if routed.all():
            row_leaf += forest.leaf_offsets[:-1, None].astype(np.int32)
            row_leaf = row_leaf.T
        else:
            row_leaf = None
    return forest, row_leaf
