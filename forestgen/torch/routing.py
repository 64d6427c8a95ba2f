"""Routing complete rows to their leaves for the torch layer (no gradient: leaf choice is
piecewise constant).

* CPU tensors go through the forest's own compiled kernel
  (:meth:`~forestgen.tree.arrays.ForestArrays.apply`): tree-major, cache-blocked, exact.
* Other devices walk a *packed* layout built once per device and dtype: per node a feature, a
  threshold and the pair of child ids ``child2[2 * node + go_right]``, leaves pointing to
  themselves with threshold ``+inf`` (a complete row always goes "left", so finished walks stay
  put and no per-level mask is needed). Nominal splits read ``go_right`` from one table row per
  split node with ``k + 1`` entries, the last for codes the split has never seen (they follow
  ``nan_left``, as in :mod:`forestgen.tree.kernels`). One level costs four gathers over the
  ``[n, B]`` walk state (two more with nominal splits); levels run to the forest's depth.

Thresholds are rounded to the working dtype by :func:`~forestgen.leaves.base.edges_to`
(down where the model cuts between training values, to nearest where it cuts on them), so a
float32 row routes as the float64 row it holds or was rounded from (CPU float32 rows walk the
compiled kernel over the same rounded thresholds: :func:`routing_forest`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from forestgen.leaves.base import edges_to
from forestgen.tree.arrays import ForestArrays


def max_depth(forest: ForestArrays) -> int:
    """Number of split levels of the deepest tree."""
    feature = np.asarray(forest.feature)
    depth = 0
    frontier = np.asarray(forest.roots, np.int64)
    while True:
        frontier = frontier[feature[frontier] >= 0]
        if frontier.size == 0:
            return depth
        frontier = np.concatenate([forest.left[frontier], forest.right[frontier]]).astype(np.int64)
        depth += 1


@dataclass
class PackedTrees:
    """The packed layout on one device / dtype (see the module docstring)."""

    roots: torch.Tensor  # long [B]
    feature: torch.Tensor  # long [N] (0 at leaves)
    threshold: torch.Tensor  # float [N] (+inf at leaves)
    child2: torch.Tensor  # long [2N]
    node_leaf: torch.Tensor  # long [N]
    cat_row: torch.Tensor  # long [N], -1 unless a nominal split
    cat_right: torch.Tensor  # bool [M']
    n_levels: torch.Tensor  # float [d] (0 for non-nominal columns)
    depth: int

    @classmethod
    def build(cls, forest: ForestArrays, d: int, device: torch.device,
              dtype: torch.dtype, at_values: bool = False) -> PackedTrees:
        npdt = np.float32 if dtype == torch.float32 else np.float64
        feat = np.asarray(forest.feature, np.int64)
        leaf = feat < 0
        N = len(feat)
        node = np.arange(N, dtype=np.int64)
        child2 = np.empty((N, 2), np.int64)
        child2[:, 0] = np.where(leaf, node, forest.left)
        child2[:, 1] = np.where(leaf, node, forest.right)
        thr = edges_to(np.where(leaf, np.inf, forest.threshold), npdt, at_values)
        n_lev = np.zeros(d, np.int64)
        n_lev[: len(forest.n_levels)] = np.asarray(forest.n_levels, np.int64)
        cat_off = np.asarray(forest.cat_off, np.int64)
        cats = np.flatnonzero(cat_off >= 0)
        cat_row = np.full(N, -1, np.int64)
        rows = []
        acc = 0
        for i in cats:  # one row of k + 1 go-right flags per nominal split node
            k = int(n_lev[feat[i]])
            left = forest.cat_left[cat_off[i]: cat_off[i] + k].astype(bool)
            rows.append(np.r_[~left, not forest.nan_left[i]])
            cat_row[i] = acc
            acc += k + 1
        cat_right = np.concatenate(rows) if rows else np.zeros(1, bool)

        def T(a, dt):
            return torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)

        return cls(roots=T(forest.roots, torch.long), feature=T(np.maximum(feat, 0), torch.long),
                   threshold=T(thr, dtype), child2=T(child2.ravel(), torch.long),
                   node_leaf=T(forest.node_leaf, torch.long), cat_row=T(cat_row, torch.long),
                   cat_right=T(cat_right, torch.bool), n_levels=T(n_lev, dtype),
                   depth=max_depth(forest))

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Global leaf ids ``[n, B]`` of complete rows ``x [n, d]`` (no NaN)."""
        n = x.shape[0]
        B = self.roots.shape[0]
        node = self.roots.unsqueeze(0).expand(n, B).contiguous()
        has_cat = bool(self.cat_row.numel()) and bool((self.n_levels > 0).any())
        if has_cat:
            k = self.n_levels
            valid = (x >= 0) & (x < k) & (x == torch.floor(x))
            code = torch.where(valid, x, k.expand_as(x)).long()  # k = "never seen"
        for _ in range(self.depth):
            f = self.feature[node]
            go = torch.gather(x, 1, f) > self.threshold[node]
            if has_cat:
                row = self.cat_row[node]
                nominal = row >= 0
                flag = self.cat_right[torch.where(nominal, row + torch.gather(code, 1, f), 0)]
                go = torch.where(nominal, flag, go)
            node = self.child2[2 * node + go]
        return self.node_leaf[node]


def routing_forest(forest: ForestArrays, dtype: torch.dtype,
                   at_values: bool = False) -> ForestArrays:
    """``forest`` with its thresholds rounded to ``dtype`` (:func:`edges_to`, held as float64):
    the compiled kernels walk float32 rows on it as the packed layout does."""
    if dtype == torch.float64:
        return forest
    thr = edges_to(forest.threshold, np.float32, at_values).astype(np.float64)
    return dataclasses.replace(forest, threshold=thr)


def route(forest: ForestArrays, packed, x: torch.Tensor) -> torch.Tensor:
    """Global leaf ids ``[n, B]`` (long, on ``x``'s device) of complete rows ``x [n, d]``.

    ``forest``: :func:`routing_forest` for ``x``'s dtype; ``packed`` is a zero-argument
    callable returning the :class:`PackedTrees` for ``x``'s device and dtype; it is only called
    off the CPU."""
    if x.device.type == "cpu":
        Z = x.detach().to(torch.float64).numpy()
        return torch.from_numpy(forest.apply(Z).astype(np.int64))
    return packed().apply(x.detach())
