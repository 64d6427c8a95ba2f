"""Numba helpers shared by the tree growers: candidate features, in-place row partition, node
arrays, in-bag rows and the best-first frontier."""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.np.random.generator_core import next_uint32
from numba.np.random.random_methods import buffered_bounded_lemire_uint32


@njit(cache=True, nogil=True)
def draw_candidates(feats, mtry, rng):
    """Partial Fisher-Yates: afterwards ``feats[:mtry]`` are this node's candidate features.

    ``feats`` is a permutation of ``0..d-1`` kept across nodes (no reset needed: a partial
    shuffle of any permutation gives a uniform draw without replacement). Step ``t`` swaps in
    ``t + rng.integers(0, d - t)``, drawn as :func:`bounded_int` does (the same numbers)."""
    d = feats.shape[0]
    for t in range(min(mtry, d)):
        s = t + bounded_int(rng, d - t)
        tmp = feats[t]
        feats[t] = feats[s]
        feats[s] = tmp


@njit(cache=True, nogil=True, inline="always")
def bounded_int(rng, high):
    """``rng.integers(0, high)`` for ``1 <= high <= 2**32``: the same draw from the same
    stream (Lemire's bounded 32-bit method, as Numba's and NumPy's ``integers`` take it for
    such ranges) without the one-element array that ``integers`` allocates per call."""
    r = np.int64(high) - 1
    if r == 0:
        return 0
    if r == 0xFFFFFFFF:
        return np.int64(next_uint32(rng.bit_generator))
    return np.int64(buffered_bounded_lemire_uint32(rng.bit_generator, r))


@njit(cache=True, nogil=True, inline="always")
def bounded_int_bits(bitgen, high):
    """:func:`bounded_int` from the Generator's ``bit_generator`` (taken once by a caller
    that draws many: reading the attribute is an atomic reference-count pair per draw)."""
    r = np.int64(high) - 1
    if r == 0:
        return 0
    if r == 0xFFFFFFFF:
        return np.int64(next_uint32(bitgen))
    return np.int64(buffered_bounded_lemire_uint32(bitgen, r))


@njit(cache=True, nogil=True)
def in_bag(w):
    """Ids of the rows with positive weight, in order (rows of weight 0 take no part in a
    tree, not even in the order in which its sums are taken)."""
    m = 0
    for i in range(w.shape[0]):
        if w[i] > 0:
            m += 1
    idx = np.empty(m, np.int64)
    m = 0
    for i in range(w.shape[0]):
        if w[i] > 0:
            idx[m] = i
            m += 1
    return idx


@njit(cache=True, nogil=True)
def partition(idx, start, end, codes, go_left):
    """Reorder ``idx[start:end]`` so rows whose code goes left (``go_left[codes[row]]``, a
    table over the split column's codes) come first; returns the split point."""
    i = start
    j = end - 1
    while i <= j:
        row = idx[i]
        if go_left[codes[row]]:
            i += 1
        else:
            idx[i] = idx[j]
            idx[j] = row
            j -= 1
    return i


@njit(cache=True, nogil=True)
def binned_sides(go_left, nb, is_nominal, level_set, off, thr_bin, nan_left):
    """``go_left[code]`` (codes ``0..nb``) of a split on a binned column: code ``nb`` is
    missing (follows ``nan_left``); nominal levels go left where ``level_set[off + code] ==
    1``; ordered codes go left iff ``code <= thr_bin``."""
    for code in range(nb):
        go_left[code] = level_set[off + code] == 1 if is_nominal else code <= thr_bin
    go_left[nb] = nan_left


@njit(cache=True, nogil=True)
def new_tree(max_nodes, width):
    """Node arrays of a tree under construction: ``feature`` (-1 = leaf), ``left``/``right``
    (-1 = none) and a per-node row of ``width`` level flags (1 = goes left)."""
    return (np.full(max_nodes, -1, np.int32), np.full(max_nodes, -1, np.int32),
            np.full(max_nodes, -1, np.int32), np.zeros((max_nodes, width), np.uint8))


@njit(cache=True, nogil=True)
def new_frontier(max_nodes, width):
    """Best-first growers' per-node state: the best split's gain, feature, threshold and level
    row, and whether the node is an open leaf."""
    return (np.full(max_nodes, -np.inf), np.full(max_nodes, -1, np.int64),
            np.full(max_nodes, -1, np.int64), np.zeros((max_nodes, width), np.uint8),
            np.zeros(max_nodes, np.bool_))


@njit(cache=True, nogil=True)
def pop_best(is_open, g_best, n_nodes, min_gain):
    """Close and return the open leaf whose best split gains most, above ``min_gain`` (the
    first such leaf on ties); -1 if none."""
    node = -1
    bg = min_gain
    for c in range(n_nodes):
        if is_open[c] and g_best[c] > bg:
            bg = g_best[c]
            node = c
    if node >= 0:
        is_open[node] = False
    return node
