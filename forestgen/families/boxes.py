"""Box cells shared by the partition learners (RFDE, DEF, GF.Boost, EOGT): the column layout
of a box, the root box of the training rows, uniform-in-cell leaf models, the defensive uniform
component and the density floor relative to the box."""

from __future__ import annotations

import math
import warnings

import numpy as np

from forestgen.data.support import over_log_volumes
from forestgen.leaves.base import ColumnCell
from forestgen.leaves.cell_uniform import CellUniformLeaf
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.leaves.uniform_levels import UniformLevelsLeaf, spike_levels
from forestgen.splitters.density import column_layout as _layout
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import LeafCells, TreeRecord


def discrete_levels(schema) -> tuple[np.ndarray, np.ndarray]:
    """Nominal mask and level counts (at least 1 for discrete columns, 0 for numeric ones)."""
    nominal = np.array([c.is_discrete and c.is_nominal for c in schema.columns], bool)
    nlev = np.array([max(c.n_levels, 1) if c.is_discrete else 0 for c in schema.columns],
                    np.int64)
    return nominal, nlev


def column_layout(schema) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``kind`` codes (numeric / ordered discrete / nominal), level counts, nominal offsets."""
    return _layout(*discrete_levels(schema))


def root_box(Z: np.ndarray, schema, margin: float = 0.0, fixed: dict | None = None):
    """Root box in encoded units: per-column training ``[min, max]`` widened by ``margin``
    times the range (spec §1.1 ``minmax``), or the user's ``fixed`` bounds. Integer-valued
    numeric columns get ``±0.5`` (each integer owns a unit interval), a constant column
    ``±0.5``; the lower face is moved one ulp down so the training minimum lies inside the
    half-open cell ``(lo, hi]``. Discrete columns span their support
    (:attr:`~forestgen.data.schema.ColumnSpec.support`, the levels seen in training): an
    ordered column ``(first - 0.5, last + 0.5]``, a nominal one ``(-0.5, k-0.5]`` with the
    levels of :func:`root_mask`."""
    d = schema.d
    lo = np.empty(d)
    hi = np.empty(d)
    fixed = fixed or {}
    for j, spec in enumerate(schema.columns):
        if spec.is_discrete:
            seen = np.flatnonzero(spec.support) if not spec.is_nominal else [0, spec.n_levels - 1]
            lo[j], hi[j] = seen[0] - 0.5, seen[-1] + 0.5
            continue
        if spec.name in fixed:
            a, b = (float(v) for v in fixed[spec.name])
            if not (np.isfinite(a) and np.isfinite(b) and b > a):
                raise ValueError(f"box for column {spec.name!r} must be finite with lower < "
                                 f"upper, got {fixed[spec.name]!r}")
            col = Z[:, j]
            if np.any((col < a) | (col > b)):
                raise ValueError(f"training values of column {spec.name!r} lie outside the "
                                 f"fixed box [{a}, {b}]")
            lo[j], hi[j] = np.nextafter(a, -np.inf), b
            continue
        a, b = float(np.nanmin(Z[:, j])), float(np.nanmax(Z[:, j]))
        if spec.kind == "integer":
            a, b = a - 0.5, b + 0.5
        elif b <= a:
            a, b = a - 0.5, b + 0.5
        r = b - a
        lo[j] = np.nextafter(a - margin * r, -np.inf)
        hi[j] = b + margin * r
    return lo, hi


def root_mask(schema, width: int | None = None) -> np.ndarray:
    """The root box's levels of the nominal columns (uint8, laid out as
    :func:`column_layout`'s offsets, padded with ones to ``width``): the levels seen in
    training (:attr:`~forestgen.data.schema.ColumnSpec.support`). A declared level no row
    takes lies outside the box, like a value outside a numeric column's observed range."""
    parts = [c.support for c in schema.columns if c.is_discrete and c.is_nominal]
    out = np.concatenate(parts).astype(np.uint8) if parts else np.zeros(0, np.uint8)
    if width is not None and width > len(out):
        out = np.r_[out, np.ones(width - len(out), np.uint8)]
    return out


def drop_missing_rows(Z: np.ndarray, schema, who: str) -> np.ndarray:
    """The complete rows of ``Z``, with a warning naming how many rows were dropped and the
    columns whose missing values caused it (the learner's trees take complete rows only; the
    root box is taken from every row before this, so a value seen only in a dropped row is
    still in range)."""
    miss = np.isnan(Z)
    keep = ~miss.any(axis=1)
    if not keep.any():
        raise ValueError(f"{who}: every training row has a missing value; nothing to fit")
    if not keep.all():
        cols = [schema.columns[j].name for j in np.flatnonzero(miss.any(axis=0))]
        warnings.warn(f"{who} fits its trees on complete rows: {int((~keep).sum())} of {len(Z)} "
                      f"training rows have a missing value (columns {cols}) and are left out; "
                      f"ARF, GeF, GFBoost, EOGT and NRGBoost model missing values",
                      UserWarning, stacklevel=3)
    return Z[keep]


def fit_cell_leaves(schema, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray,
                    nom_off: np.ndarray, count: np.ndarray, shapes: list | None = None) -> list:
    """Uniform-in-cell leaf models from finite per-leaf boxes (numeric: Lebesgue on
    ``(lo, hi]``; discrete: uniform over the allowed levels). ``shapes`` (per column, or
    ``None``): a numeric column's ``(edges, cdf)`` gives its leaves that law restricted to
    each cell instead (:func:`shaped_cdf`,
    :class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`)."""
    L = len(lo)
    leaf = np.arange(L)
    x = np.zeros(L)
    models = []
    for j, spec in enumerate(schema.columns):
        if spec.is_discrete:
            k = max(spec.n_levels, 1)
            if nom_off[j] >= 0:
                allowed = mask[:, nom_off[j]:nom_off[j] + k].astype(bool)
            else:
                codes = np.arange(k)
                allowed = (codes[None, :] > lo[:, j, None]) & (codes[None, :] <= hi[:, j, None])
            cell = ColumnCell(lower=lo[:, j], upper=hi[:, j], allowed=allowed,
                              data_min=0.0, data_max=k - 1.0, n_levels=k)
            lm = UniformLevelsLeaf()
        else:
            cell = ColumnCell(lower=lo[:, j], upper=hi[:, j], allowed=None,
                              data_min=float(spec.lower), data_max=float(spec.upper))
            shape = None if shapes is None else shapes[j]
            if shape is None:
                lm = CellUniformLeaf()
            else:
                from forestgen.leaves.marginal_cell import MarginalCellLeaf

                lm = MarginalCellLeaf(edges=shape[0], cdf=shape[1])
        lm.fit(x, leaf, cell, count.astype(float))
        models.append(lm)
    return models


def shaped_cdf(edges: np.ndarray, cdf: np.ndarray, weight: float, lo: float, hi: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(edges, cdf)`` of the law ``(1 - weight) Unif(lo, hi] + weight g`` on the root
    interval ``(lo, hi]`` of a numeric column, ``g`` the histogram ``(edges, cdf)`` (the
    column's marginal: :func:`~forestgen.families.mixture.backoff.column_histograms`); its
    first and last edges are moved onto ``lo`` / ``hi`` where rounding put them inside (a
    histogram fitted in scaled units, a face one ulp below a value), so that every leaf cell
    of the root box lies within the edges. With ``weight < 1`` or a strictly increasing
    ``cdf`` the result is strictly increasing: a density positive on the whole interval."""
    e = np.array(edges, float)
    c = np.array(cdf, float)
    e[0], e[-1] = min(e[0], lo), max(e[-1], hi)
    c = (1.0 - weight) * (e - e[0]) / (e[-1] - e[0]) + weight * c
    c[0], c[-1] = 0.0, 1.0
    return e, c


def box_leaves(model, Z: np.ndarray, boxes, count: np.ndarray,
               pair_weight: np.ndarray | None = None, shape: float = 0.0,
               hists: list | None = None) -> list:
    """Leaf models on the finite leaf cells ``boxes`` of ``model.forest_`` (RFDE, DEF): the
    paper's uniform-in-cell leaves from the leaf counts unless the model was given
    ``numeric_leaf`` / ``discrete_leaf``, which are fitted on the rows ``Z`` in their cells
    (``pair_weight``: per (row, tree) weights, e.g. bootstrap counts). A numeric column with
    point masses (``ColumnSpec.atoms``) adds each leaf's share of rows at each atom
    (:class:`~forestgen.leaves.point_mass.PointMassLeaf`); an integer or discrete-float column
    coded as levels does the same at its spike levels
    (:func:`~forestgen.leaves.uniform_levels.spike_levels`, :class:`UniformLevelsLeaf`
    ``atoms``). Those shares shrink toward the column's overall shares with the model's
    ``prior_strength`` pseudo-rows (a leaf of one row would otherwise give an atom, or the
    values off it, zero mass). ``shape`` ``μ > 0`` (``cell_shape``; the paper's leaves
    only): each numeric column's cells carry the law ``(1 - μ) Unif(root interval) + μ g_j``
    restricted to the cell, ``g_j`` the column's marginal histogram ``hists[j]`` on the root
    box (:func:`shaped_cdf`), instead of the uniform density on the cell."""
    if model.numeric_leaf is None and model.discrete_leaf is None:
        prior = model.atom_prior()
        schema = model.encoder_.schema
        shapes = None
        if shape > 0:
            shapes = [None if spec.is_discrete else
                      shaped_cdf(*hists[j], shape, model.box_lo_[j], model.box_hi_[j])
                      for j, spec in enumerate(schema.columns)]
        models = fit_cell_leaves(schema, boxes.lower, boxes.upper,
                                 boxes.mask.astype(np.uint8), boxes.nom_off, count, shapes)
        spiky = [j for j, spec in enumerate(schema.columns)
                 if spec.atoms and not spec.is_discrete]
        spiky_levels = {j: spike_levels(Z[:, j], spec.n_levels)
                        for j, spec in enumerate(schema.columns)
                        if spec.is_discrete and spec.kind in ("integer", "continuous")}
        spiky_levels = {j: a for j, a in spiky_levels.items() if a}
        if spiky or spiky_levels:
            leaves = model.forest_.apply(Z)
            flat = leaves.ravel()
            for j in spiky:
                pm = PointMassLeaf(base=models[j], atoms=schema.columns[j].atoms, prior=prior)
                inside = pm.atoms_inside(boxes.lower[:, j], boxes.upper[:, j])
                models[j] = pm.fit_masses(np.repeat(Z[:, j], leaves.shape[1]), flat,
                                          model.forest_.n_leaves, pair_weight, inside=inside)
            for j, atoms in spiky_levels.items():
                k = schema.columns[j].n_levels
                cell = ColumnCell(lower=boxes.lower[:, j], upper=boxes.upper[:, j],
                                  allowed=boxes.levels(j, k), data_min=0.0, data_max=k - 1.0,
                                  n_levels=k)
                models[j] = UniformLevelsLeaf(atoms=atoms, prior=prior).fit(
                    np.repeat(Z[:, j], leaves.shape[1]), flat, cell, pair_weight)
        return models
    return model.fit_leaves(Z, model.forest_.apply(Z), boxes,
                            model.numeric_leaf or "cell_uniform",
                            model.discrete_leaf or "uniform_levels", pair_weight)


def with_uniform_component(forest: ForestArrays, log_weight: np.ndarray, smoothing: float,
                           box_lo: np.ndarray, box_hi: np.ndarray, box_mask: np.ndarray,
                           ) -> tuple[ForestArrays, np.ndarray]:
    """The defensive mixture ``(1 - smoothing) · forest + smoothing · Unif(root box)`` (RFDE
    spec §3.2 [D]; the ``ε``-uniform component of the DEF spec §6.7; GF.Boost's ``smoothing``)
    as one more tree: a single leaf whose cell is the root box (nominal levels ``box_mask``,
    :func:`root_mask`), of weight ``log smoothing``,
    after the forest's leaves (weights scaled by ``1 - smoothing``). Its leaf models are
    fitted like the others (:func:`box_leaves`): uniform on the box, with every row in it, so a
    column's point masses keep their overall shares there. Density, sampling,
    conditionals, imputation and ``to_torch`` then answer for the smoothed model, still
    exactly normalised; held-out rows inside the box in cells no tree covers (or with a
    value no leaf gives mass to) keep a positive density. ``smoothing=0``: unchanged."""
    if smoothing <= 0:
        return forest, log_weight
    return (ForestArrays.concat([forest, box_tree(forest, box_lo, box_hi, box_mask)]),
            np.r_[math.log1p(-smoothing) + log_weight, math.log(smoothing)])


def box_tree(forest: ForestArrays, box_lo: np.ndarray, box_hi: np.ndarray,
             box_mask: np.ndarray) -> ForestArrays:
    """A one-tree forest laid out as ``forest`` (its level counts and cell-mask width) whose
    tree never splits: one leaf, of mass 1, whose stored cell is the root box (nominal levels
    ``box_mask``, :func:`root_mask`). The tree of :func:`with_uniform_component` and of the
    back-off toward the column marginals (:mod:`~forestgen.families.mixture.backoff`)."""
    n_mask = forest.cell_mask.shape[1] if forest.cell_mask.ndim == 2 else 0
    rec = TreeRecord(feature=np.array([-1], np.int32), threshold=np.zeros(1),
                     nan_left=np.ones(1, np.uint8), left=np.array([-1], np.int32),
                     right=np.array([-1], np.int32), cat_off=np.array([-1], np.int64),
                     cat_left=np.zeros(0, np.uint8),
                     cells=LeafCells(box_lo[None, :].copy(), box_hi[None, :].copy(),
                                     np.asarray(box_mask, bool)[None, :n_mask].copy()),
                     leaf_mass=np.ones(1)).check()
    return ForestArrays.from_trees([rec], forest.n_levels)


def box_column_log_volumes(schema, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per column, the log measure of the root box's side: its width for a numeric column,
    the number of levels in its support for a discrete one."""
    return np.array([math.log(int(spec.support.sum())) if spec.is_discrete
                     else math.log(hi[j] - lo[j]) for j, spec in enumerate(schema.columns)],
                    np.float64)


def box_log_volume(schema, lo: np.ndarray, hi: np.ndarray) -> float:
    """Log measure of the root box (``-log`` of the uniform density on the box): the sum of
    :func:`box_column_log_volumes`."""
    return float(box_column_log_volumes(schema, lo, hi).sum())


class BoxFloor:
    """The density floor of a learner with a root box (``box_lo_``, ``box_hi_``: RFDE, DEF,
    GF.Boost, EOGT): every row below ``density_floor`` times the uniform density on the box's
    sides of the columns its density is over is raised to it (:func:`apply_floor`)."""

    def floor_log_volumes(self) -> np.ndarray:
        """Per column, the log measure of the root box's side (:func:`box_column_log_volumes`)."""
        return box_column_log_volumes(self.encoder_.schema, self.box_lo_, self.box_hi_)

    def apply_density_floor(self, logp: np.ndarray, floor="default", over=None) -> np.ndarray:
        """Log densities ``logp`` floored as this learner's ``log_prob`` floors them: ``over``
        as in :func:`~forestgen.data.support.floor_zero_rows`; ``"default"``: the learner's
        ``density_floor``; ``None``: exact."""
        return apply_floor(logp, self.density_floor if floor == "default" else floor,
                           self.floor_log_volumes(), over)


def apply_floor(logp: np.ndarray, floor: float | None, log_volumes: np.ndarray,
                over=None) -> np.ndarray:
    """Floor log densities at ``floor`` times the uniform density on the root box's sides
    ``log_volumes`` (:func:`box_column_log_volumes`) of the columns each row's density is
    over: ``over`` as in :func:`~forestgen.data.support.floor_zero_rows` (a callable is
    called only when a row lies below the highest floor any set of columns gives); default
    every column. ``logp`` is ``[n]`` or ``[..., n]`` (rows last).

    Relative to the box, the floor is unit-free: on the unit cube it is the absolute ``floor``
    of the paper's Table 1, and on natural-scale data (prices in dollars, weights in grams) it
    does not swamp every density below an absolute ``1e-5``."""
    if floor is None:
        return logp
    vol = np.asarray(log_volumes, np.float64)
    if over is None:
        return np.maximum(logp, math.log(floor) - float(vol.sum()))
    if not (np.asarray(logp) < math.log(floor) - float(np.minimum(vol, 0.0).sum())).any():
        return logp
    return np.maximum(logp, math.log(floor) - over_log_volumes(vol, over))
