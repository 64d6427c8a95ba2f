"""Missing entries of synthetic rows: each entry blank with its column's missing rate among the
training rows of the leaf it is read from, nested columns kept nested.

A column whose training rows are missing only where its parent's are
(:func:`forestgen.data.rules.missing_parents`) is blanked only in rows where the parent is
blank, with probability ``rate_k / rate_p`` there, both rates read from one leaf (a learner
with one leaf per row reads every column there; one with a tree per column reads a nested
group's rates in the leaf of its root column, :func:`nesting_roots`): the column's share of
blank rows in that leaf stays ``rate_k`` (the training counts nest leaf by leaf, so
``rate_k <= rate_p``), siblings stay independent given the parent, and columns missing in the
same training rows are missing in the same synthetic rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["blank", "nesting_roots"]


def blank(u: np.ndarray, own: np.ndarray, parent_rate: np.ndarray,
          parent: np.ndarray | None) -> np.ndarray:
    """Which entries to blank, ``[n, K]``: ``u`` uniforms, ``own[:, k]`` column ``k``'s missing
    rate in each row's leaf, ``parent_rate[:, k]`` its parent's rate in that same leaf (any
    value where ``parent[k] < 0``); ``parent`` as :func:`~forestgen.data.rules.missing_parents`
    (``None``: every column independent, as in model files written before nesting was kept)."""
    hit = u < own
    if parent is None or not (np.asarray(parent) >= 0).any():
        return hit
    parent = np.asarray(parent, np.int64)
    done = parent < 0

    def settle(k: int) -> None:
        p = int(parent[k])
        if not done[p]:
            settle(p)
        hit[:, k] = hit[:, p] & (u[:, k] * parent_rate[:, k] < own[:, k])
        done[k] = True

    for k in range(len(parent)):
        if not done[k]:
            settle(k)
    return hit


def nesting_roots(parent: np.ndarray | None, k: int | None = None) -> np.ndarray:
    """The root of each column's nesting tree (itself where ``parent[k] < 0``; ``parent`` as
    :func:`~forestgen.data.rules.missing_parents`, ``None``: every column its own root, ``k``
    columns given by ``len(parent)``)."""
    if parent is None:
        return np.arange(0 if k is None else k)
    root = np.asarray(parent, np.int64).copy()
    own = root < 0
    root[own] = np.flatnonzero(own)
    while True:
        up = root[root]
        if np.array_equal(up, root):
            return root
        root = up
