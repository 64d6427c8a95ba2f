"""Grow a forest: one splitter call per tree in one thread pool, one Generator per tree.

This is the only place trees are grown. Seeding: a learner turns its ``random_state`` into a
:class:`numpy.random.SeedSequence` (:func:`forestgen.validation.seed_sequence`) and spawns one
Generator per tree (:func:`tree_generators`), so results are identical for any ``n_jobs``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from forestgen.splitters.base import GrowLimits, Splitter, TreeData
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import TreeRecord


def default_n_jobs(n_jobs: int | None) -> int:
    if n_jobs is None or n_jobs == 0:
        return 1
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return int(n_jobs)


def tree_generators(seed_seq: np.random.SeedSequence, n_trees: int) -> list[np.random.Generator]:
    return [np.random.Generator(np.random.PCG64(s)) for s in seed_seq.spawn(n_trees)]


def map_trees(fn: Callable[[int], Any], n_trees: int, n_jobs: int | None) -> list:
    """``[fn(b) for b in range(n_trees)]`` on the shared thread pool (kernels release the GIL)."""
    jobs = min(default_n_jobs(n_jobs), n_trees)
    if jobs <= 1:
        return [fn(b) for b in range(n_trees)]
    with ThreadPoolExecutor(jobs) as ex:
        return list(ex.map(fn, range(n_trees)))


def grow_forest(
    splitter: Splitter,
    data: TreeData,
    y: np.ndarray | None,
    weights: np.ndarray,
    rngs: list[np.random.Generator],
    limits: GrowLimits,
    *,
    n_levels: np.ndarray | None = None,
    n_jobs: int | None = -1,
    on_tree_done: Callable[[], None] | None = None,
) -> ForestArrays:
    """Grow ``len(weights)`` trees; tree ``b`` uses row weights ``weights[b]`` and ``rngs[b]``.

    ``n_levels``: level count of each nominal column in the forest (default: from ``data``).
    ``on_tree_done`` is called (under a lock) after each tree, e.g. to advance a progress bar.
    """
    lock = threading.Lock()
    if y is None:
        y = np.zeros(np.shape(weights)[1], np.int64)

    def one(b: int) -> TreeRecord:
        t = splitter.grow(data, y, weights[b], rngs[b], limits)
        if not isinstance(t, TreeRecord):
            raise TypeError(f"{type(splitter).__name__}.grow must return a TreeRecord, got "
                            f"{type(t).__name__}")
        t.check()
        if on_tree_done is not None:
            with lock:
                on_tree_done()
        return t

    trees = map_trees(one, len(weights), n_jobs)
    if n_levels is None:
        n_levels = np.where(data.nominal, data.n_bins, 0)
    return ForestArrays.from_trees(trees, n_levels)
