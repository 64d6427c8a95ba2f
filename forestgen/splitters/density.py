"""Density-tree splitters (no labels): best-first density trees and random midpoint partitions."""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, Splitter, TreeData, resolve_max_features
from forestgen.tree.criteria import DENSITY, USER, criterion_code
from forestgen.tree.grow_density import (
    DensityColumns,
    DensityRule,
    grow_density_tree,
    grow_density_tree_with,
)
from forestgen.tree.grow_midpoint import (
    KIND_NOMINAL,
    KIND_NUMERIC,
    KIND_ORDERED,
    grow_midpoint_tree,
)
from forestgen.tree.record import LeafCells, TreeRecord, path_cells


def root_mask(data: TreeData, n_nom: int) -> np.ndarray:
    """The root box's nominal level mask (uint8 ``[n_nom]``): ``data.root_mask``, else every
    level."""
    if data.root_mask is None:
        return np.ones(n_nom, np.uint8)
    return np.ascontiguousarray(data.root_mask, np.uint8)


def column_layout(nominal: np.ndarray, n_levels: np.ndarray):
    """``kind`` codes (numeric / ordered discrete / nominal), level counts, nominal offsets of
    the leaf-mask layout, and the number of nominal levels."""
    d = len(nominal)
    kind = np.where(nominal, KIND_NOMINAL, np.where(n_levels > 0, KIND_ORDERED, KIND_NUMERIC))
    nlev = np.where(n_levels > 0, np.maximum(n_levels, 1), 0).astype(np.int64)
    nom_off = np.full(d, -1, np.int64)
    acc = 0
    for j in range(d):
        if nominal[j]:
            nom_off[j] = acc
            acc += int(nlev[j])
    return kind.astype(np.int64), nlev, nom_off, acc


@register("splitter", "density")
class DensitySplitter(Splitter):
    """Best-first density estimation tree (Ram & Gray 2011; DEF, Bravo 2025 App. B): the open
    leaf with the largest gain of ``[data mass P, reference mass V]`` is split until
    ``limits.max_leaves`` (default 256) or no gain exceeds ``1e-12``.

    criterion : ``"kl"`` (likelihood gain), ``"ise"``, ``"energy"``, a registered criterion
        name, or an ``@numba.njit`` ``gain(left, right)`` of ``[P, V]`` child masses.

    Needs ``TreeData.vref``, ``n_levels``, ``box_lo``/``box_hi``. Leaf cells are the path boxes
    clipped to the root box; ``leaf_mass`` is each leaf's weighted share of the rows.
    """

    labelled = False
    needs = frozenset({"Xb", "n_bins", "nominal", "thresholds", "vref", "n_levels", "box_lo",
                       "box_hi"})

    def __init__(self, *, criterion: Any = "kl"):
        self.criterion = criterion

    def grow(self, data: TreeData, y, w, rng, limits: GrowLimits) -> TreeRecord:
        from forestgen import registry

        data.require(self, "vref", "n_levels", "box_lo", "box_hi")
        crit = self.criterion
        if isinstance(crit, str) and crit not in DENSITY:
            crit = registry.get("criterion", crit)
        code = criterion_code(crit)
        kernel = grow_density_tree_with(crit) if code == USER else grow_density_tree
        kind, nlev, nom_off, n_nom = column_layout(data.nominal, data.n_levels)
        max_leaves = 256 if limits.max_leaves is None else int(limits.max_leaves)
        if max_leaves < 1:
            raise ValueError(f"max_leaves must be >= 1, got {max_leaves}")
        cols = DensityColumns(data.n_bins.astype(np.int64), data.nominal.astype(np.bool_),
                              np.asarray(nom_off, np.int64), data.vref)
        rule = DensityRule(max(code, 0), resolve_max_features(limits.max_features, data.d),
                           float(limits.min_samples_leaf))
        feat, tb, left, right, cat_rows, mass, _vol = kernel(
            data.Xb, np.asarray(w, np.float64), cols, n_nom, root_mask(data, n_nom), rule,
            max_leaves, rng)
        thr = np.zeros(len(feat))
        for node in np.nonzero(feat >= 0)[0]:
            j = feat[node]
            if not data.nominal[j]:
                thr[node] = data.thresholds[j][tb[node]]
        rec = TreeRecord.from_nominal_rows(feat, thr, left, right, cat_rows, nlev, data.nominal,
                                           leaf_mass=mass[feat < 0])
        lo, hi, mask = path_cells(rec, data.d, np.where(data.nominal, nlev, 0))
        rec.cells = LeafCells(np.clip(lo, data.box_lo, data.box_hi),
                              np.clip(hi, data.box_lo, data.box_hi),
                              mask & root_mask(data, n_nom).astype(bool))
        return rec.check()


@register("splitter", "midpoint")
class MidpointSplitter(Splitter):
    """Random midpoint partition of RFDE (Wen & Hang 2022, Alg. 1;
    :mod:`forestgen.tree.grow_midpoint`): every cell is halved at the midpoint of a random
    splittable column, to depth ``limits.max_depth``, ignoring the data except to skip empty
    cells (path compression). The tree's hashed seed is the first draw of its Generator.

    Needs ``TreeData.Z``, ``n_levels``, ``box_lo``/``box_hi``. Returns the exact depth-``p``
    cells (which path compression makes smaller than the path boxes) and ``leaf_mass``, the
    share of the in-bag rows in each cell.
    """

    labelled = False
    needs = frozenset({"Z", "n_levels", "box_lo", "box_hi", "max_depth"})
    #: why the rule takes no split criterion (RFDE declares it as ruled out)
    NO_CRITERION = ("the random midpoint rule splits each cell at the midpoint of a column "
                    "drawn at random, independently of the data (Wen & Hang 2022, Algorithm "
                    "1), and RFDE's consistency rate rests on that independence; a split "
                    "criterion would make it another estimator (DEF grows density trees with "
                    "one: DEF(criterion=...))")

    def __init__(self, *, criterion: Any = None):
        if criterion is not None:
            raise ValueError(f"MidpointSplitter takes no criterion: {self.NO_CRITERION}")

    def grow(self, data: TreeData, y, w, rng, limits: GrowLimits) -> TreeRecord:
        data.require(self, "Z", "n_levels", "box_lo", "box_hi")
        if limits.max_depth is None or limits.max_depth < 0:
            raise ValueError("MidpointSplitter needs a depth: GrowLimits.max_depth >= 0")
        seed = np.int64(rng.integers(0, 2**63 - 1))
        kind, nlev, nom_off, n_nom = column_layout(data.nominal, data.n_levels)
        Z = np.ascontiguousarray(data.Z[np.asarray(w) > 0])
        feat, thr, left, right, cat_rows, llo, lhi, lmask, lcnt, _code = grow_midpoint_tree(
            Z, kind, data.box_lo, data.box_hi, root_mask(data, n_nom), nlev, nom_off, n_nom, seed,
            int(limits.max_depth))
        rec = TreeRecord.from_nominal_rows(
            feat, thr, left, right, cat_rows, nlev, data.nominal,
            cells=LeafCells(llo, lhi, lmask.astype(bool)),
            leaf_mass=lcnt / max(len(Z), 1))
        return rec.check()
