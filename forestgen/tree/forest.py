"""Grow a forest: one splitter call per tree, in a thread pool, with per-tree generators."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from forestgen.splitters.base import BinnedData, Splitter
from forestgen.tree.arrays import ForestArrays


def default_n_jobs(n_jobs: int | None) -> int:
    if n_jobs is None or n_jobs == 0:
        return 1
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return int(n_jobs)


def tree_generators(seed_seq: np.random.SeedSequence, n_trees: int) -> list[np.random.Generator]:
    return [np.random.Generator(np.random.PCG64(s)) for s in seed_seq.spawn(n_trees)]


def grow_forest(
    splitter: Splitter,
    data: BinnedData,
    y: np.ndarray,
    weights: np.ndarray,
    rngs: list[np.random.Generator],
    *,
    n_classes: int,
    min_class_leaf: np.ndarray | None = None,
    n_jobs: int | None = -1,
    on_tree_done: Callable[[], None] | None = None,
) -> ForestArrays:
    """Grow ``len(weights)`` trees; tree ``b`` uses row weights ``weights[b]`` and ``rngs[b]``.

    Trees are independent units, so the result is identical for any ``n_jobs``.
    ``on_tree_done`` is called (under a lock) after each tree, e.g. to advance a progress bar.
    """
    n_trees = len(weights)
    lock = threading.Lock()

    def one(b: int) -> dict:
        t = splitter.grow(data, y, weights[b], rngs[b], n_classes=n_classes,
                          min_class_leaf=min_class_leaf)
        if on_tree_done is not None:
            with lock:
                on_tree_done()
        return _to_thresholds(t, data)

    jobs = min(default_n_jobs(n_jobs), n_trees)
    if jobs <= 1:
        trees = [one(b) for b in range(n_trees)]
    else:
        with ThreadPoolExecutor(jobs) as ex:
            trees = list(ex.map(one, range(n_trees)))
    n_levels = np.where(data.nominal, data.n_bins, 0)
    return ForestArrays.from_trees(trees, n_levels)


def _to_thresholds(t: dict, data: BinnedData) -> dict:
    feature = t["feature"]
    thr = np.full(len(feature), np.nan)
    for node in np.nonzero((feature >= 0) & (t["cat_off"] < 0))[0]:
        thr[node] = data.thresholds[feature[node]][t["thr_bin"][node]]
    out = dict(t)
    out["threshold"] = thr
    return out
