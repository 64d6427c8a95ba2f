"""Generative Forests trained by GF.Boost (Nock & Guillame-Bert, "Generative Forests", 2023).
Spec: ``shared/papers/generative_forests.md``.

A generative forest's density lives on the partition induced by *all* its trees: cell ``C``
(one leaf per tree, intersected) carries the training mass ``R(C)`` spread uniformly,
``q(x) = R(C(x)) / μ(C(x))`` (spec §1.4). GF.Boost grows ``n_trees`` trees jointly: at each of
``n_iter`` iterations it splits the heaviest leaf over all trees with the predicate that most
lowers the Bayes risk of telling the data from the uniform measure, summed over every cell inside
that leaf (spec §2.3-2.5; :class:`~forestgen.families.intersection.splitter.BayesRiskSplitter`).

The fitted partition is compiled into one tree whose leaves are the cells
(:class:`~forestgen.families.intersection.ensembler.IntersectionEnsembler`), with leaf weight
``R(C)`` and uniform leaves on the cell (``cell_uniform`` / ``uniform_levels``), so ``forest_``,
``leaf_log_weight_`` and ``leaf_models_`` describe the model *exactly* and every shared query is
exact: ``log_prob`` (NaN entries marginalised), ``sample`` (cell ∝ ``R(C)``, then uniform: the
fast form of the paper's star-node sampler, spec §3.2), conditional sampling, ``predict_proba``,
``to_torch``, ``save``/``load``. The individual trees are kept in ``trees_``. :meth:`GFBoost.impute`
follows the paper's walk over the trees, which backs off to a coarser region where the data run
out (:mod:`~forestgen.families.intersection.backoff`; ``walk="exact"``: the exact conditional); for
it the model keeps each training row's cell fragments and missing pattern (spec §1.6: a GF keeps
its data).

Measure convention of ``log_prob``: Lebesgue on continuous columns, counting on discrete ones
(categorical, bool, ordinal integers); wide integer columns are numeric with each integer owning
a unit interval, so their density equals the pmf under the counting measure.

Support (spec §4.1, §6.6). The paper's ``q_G`` is zero in every cell without training rows; with
many trees nearly every held-out row falls in such a cell. ``smoothing = ε`` (default ``1e-3``)
mixes in the uniform density on the training box, ``(1 - ε) q_G + ε / μ(X)``, exactly: the
compiled tree also holds the empty regions between the cells, so the smoothed model is still one
partition with one mass per leaf, and density, marginals, sampling, conditionals, imputation and
``to_torch`` all answer for it. ``smoothing=0`` is the paper's model. Rows outside the training
box have density zero; :meth:`log_prob` floors them at ``density_floor`` times the uniform
density on the box, as :class:`~forestgen.families.mixture.rfde.RFDE` and DEF do.
"""

from __future__ import annotations

import heapq
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen.base import GenerativeForest
from forestgen.data.encoder import TableEncoder
from forestgen.data.metadata import constrain
from forestgen.families import INTERSECTION
from forestgen.families.boxes import (
    apply_floor,
    box_log_volume,
    column_layout,
    fit_cell_leaves,
    root_box,
    root_mask,
)
from forestgen.families.intersection.cells import CellTable
from forestgen.families.intersection.ensembler import IntersectionEnsembler
from forestgen.families.intersection.region_atoms import RegionAtoms, region_leaves
from forestgen.families.intersection.splitter import CANDIDATES, LOSSES, BayesRiskSplitter
from forestgen.inference.conditions import blank_rows, check_on_empty
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.grow_midpoint import KIND_NOMINAL, KIND_ORDERED
from forestgen.tree.record import TreeRecord
from forestgen.validation import (
    check_choice,
    check_int,
    check_real,
    seed_sequence,
)

#: pseudo-rows of the prior on GF.Boost's shares at spike levels (``_spike_levels``)
SPIKE_PRIOR = 1.0
#: most draws per round of EOGT's rejection sampler (more when the rows asked for need it)
REJECTION_BATCH = 1 << 18
#: EOGT evidence walks kept for reuse within one conditional sampling call
SHARED_WALKS = 4


@register("learner", "gfboost")
class GFBoost(GenerativeForest):
    """Generative forest grown by GF.Boost.

    Parameters
    ----------
    n_trees : ``T`` (default 50; the paper's lifelike runs use 500 and 200).
    n_iter : ``J``, total number of splits over all trees (default 200; paper 2000 and 500).
        The first ``T`` splits turn every root into a stump (heaviest leaf first).
    loss : ``"matusita"`` (default, as the reference code), ``"log"`` or ``"square"``.
    prior : ``π``, the weight of the data against the uniform measure (default 0.5).
    candidates : ``"observed"`` (default: leaf values and cell bounds, spec §2.6 [rec]) or
        ``"grid100"`` (100 evenly spaced thresholds, the reference code).
    max_candidates : cap on observed thresholds per column and leaf (default 255).
    min_rows : training weight each child of a split must receive (default 1).
    missing : how a training row missing a split column is routed (spec §2.7):
        ``"fractional"`` (default) splits it into two fragments weighted by the children's volume
        shares, down to fragments of 1/8 of a row, which then go to one side at random with
        that probability; ``"random_hard"`` (the reference code) always sends the whole row to
        one side at random. See :class:`~forestgen.families.intersection.cells.CellTable`.
    smoothing : ``ε`` in ``[0, 1)``, weight of the uniform density on the training box in the
        model (default ``1e-3``; ``0``: the paper's exact ``q_G``, zero in empty cells), or
        ``"auto"``: the Good-Turing estimate of the chance that a new row falls in an empty
        cell (training mass in cells holding at most one row), which maximises held-out
        likelihood better but, when most cells hold one row, makes samples nearly uniform.
        The value used is ``smoothing_``.
    density_floor : densities below ``density_floor`` times the uniform density on the box
        (rows outside the training box) are reported as that by :meth:`log_prob` (default
        ``1e-5``, as RFDE/DEF; ``None``: the honest ``-inf``; ``log_prob_encoded`` never floors).
    progress : print a progress line on stderr.
    random_state : seeds the random side of missing-value fragments; without missing values
        training is deterministic (ties go to the lowest tree, node and column).

    Notes
    -----
    Training is single-threaded, so results do not depend on the thread count.
    """

    model_family = INTERSECTION

    method_name = "GF"
    _approx = False
    cuts_at_values = True  # splits at observed values

    def __init__(self, *, n_trees: int = 50, n_iter: int = 200, loss: str = "matusita",
                 prior: float = 0.5, candidates: str = "observed", max_candidates: int = 255,
                 min_rows: float = 1.0, missing: str = "fractional", smoothing: float = 1e-3,
                 density_floor: float | None = 1e-5, progress: bool = False,
                 random_state: Any = None):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    def validate_params(self) -> None:
        super().validate_params()
        check_int("n_iter", self.n_iter, 0)
        check_choice("loss", self.loss, LOSSES)
        check_real("prior", self.prior, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("candidates", self.candidates, CANDIDATES)
        check_int("max_candidates", self.max_candidates, 2)
        check_real("min_rows", self.min_rows, 0.0, low_open=True)
        check_choice("missing", self.missing, ("fractional", "random_hard"))
        if self.smoothing != "auto":
            check_real("smoothing", self.smoothing, 0.0, 1.0, high_open=True)

    def _splitter(self) -> BayesRiskSplitter:
        return BayesRiskSplitter(loss=self.loss, prior=self.prior, candidates=self.candidates,
                                 max_candidates=self.max_candidates, min_rows=self.min_rows,
                                 approx=self._approx)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None):
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        splitter = self._splitter()
        self.encoder_ = TableEncoder(kinds=kinds).fit(X)
        Z = self.encoder_.transform(X)
        schema = self.encoder_.schema
        for j, spec in enumerate(schema.columns):
            if np.isnan(Z[:, j]).all():
                raise ValueError(f"column {spec.name!r} has no observed value")
        kind, nlev, nom_off, n_nom = column_layout(schema)
        integer = (kind == KIND_ORDERED) | np.array(
            [s.kind == "integer" and not s.is_discrete for s in schema.columns], bool)
        lo, hi = root_box(Z, schema)
        self.box_lo_, self.box_hi_ = lo, hi
        seed = int(seed_sequence(self.random_state).generate_state(1, np.uint64)[0] >> 1)
        table = CellTable(Z, kind, nlev, nom_off, n_nom, integer, lo, hi, int(self.n_trees),
                          int(self.n_iter), approx=self._approx,
                          min_fragment=1.0 / 8 if self.missing == "fractional" else np.inf,
                          seed=seed, root_mask=root_mask(schema))
        self.risk_path_ = self._boost(table, splitter)
        self.n_splits_ = len(self.risk_path_) - 1
        self._finish(table, schema, kind, nlev, nom_off)
        return self

    def _boost(self, table: CellTable, splitter: BayesRiskSplitter) -> list[float]:
        """Alg. 4: ``n_iter`` times split the heaviest splittable leaf over all trees."""
        heap = [(-table.nR[t], t, t) for t in range(table.n_trees)]
        heapq.heapify(heap)
        risk = splitter.risk(table.R, table.U)
        path = [risk]
        J = int(self.n_iter)
        bar = ProgressBar(type(self).__name__, J, self.progress, unit="splits")
        while len(path) <= J and heap:
            w, t, node = heapq.heappop(heap)
            gain, j, thr, mask = splitter.best_split(table, node)
            if j < 0:
                continue  # no admissible split: the leaf stays a leaf
            cells = table.cells_of(node).copy()
            before = splitter.risk(table.cR[cells], table.cU[cells])
            left, right = table.split(node, j, thr, mask)
            for child in (left, right):
                heapq.heappush(heap, (-table.nR[child], t, child))
            cells = np.r_[table.cells_of(left), table.cells_of(right)]
            risk += splitter.risk(table.cR[cells], table.cU[cells]) - before
            path.append(risk)
            bar.step()
        bar.close(f"{table.n_cells} cells")
        return path

    def _finish(self, table: CellTable, schema, kind, nlev, nom_off) -> None:
        n_levels = np.where(kind == KIND_NOMINAL, nlev, 0)
        self.smoothing_ = float(self.smoothing) if self.smoothing != "auto" else min(
            0.99, float(table.R[table.R * table.m_total <= 1 + 1e-9].sum()))
        self.forest_, self.leaf_log_weight_, leaf_cell, (lo, hi, mask) = (
            IntersectionEnsembler().compile(table, n_levels, self.smoothing_))
        R = np.where(leaf_cell >= 0, table.R[np.maximum(leaf_cell, 0)], 0.0)
        self.cell_mass_ = R / R.sum()
        self.leaf_models_ = fit_cell_leaves(schema, lo, hi, mask, nom_off,
                                            self.cell_mass_ * table.m_total)
        self.trees_ = ForestArrays.from_trees(_tree_dicts(table, kind, nom_off, nlev), n_levels)
        self.cell_lo_, self.cell_hi_, self.cell_mask_ = lo, hi, mask.astype(bool)
        self.n_train_ = int(table.m_total)
        self._keep_incomplete_rows(table, leaf_cell)
        self._point_masses(schema, table.Z)

    def _point_masses(self, schema, Z: np.ndarray) -> None:
        """Cells with point-mass components: a numeric column with atoms (values holding a
        large share of the rows, ``ColumnSpec.atoms``, e.g. zero inflation) gets in every
        cell the share of the cell's training weight at each atom
        (:class:`~forestgen.leaves.point_mass.PointMassLeaf` over the uniform leaf), so
        samples, densities (counting measure at the atoms) and imputations keep the spikes
        that a uniform cell would smear. The share is of the leaf's whole weight: fragments
        of rows missing the column (uniform over it, spec §2.7) count as its continuous
        part; the smoothing component has the column's overall atom shares (so a held-out
        row at an atom keeps a positive density in an empty region)."""
        rows, leaf = self.fragments_[:, 0], self.fragments_[:, 1]
        L = len(self.cell_mass_)
        eps = self.smoothing_
        fw = (1.0 - eps) * self.fragment_weight_ / self.fragment_weight_.sum()
        uniform = np.maximum(np.exp(self.leaf_log_weight_) - (1.0 - eps) * self.cell_mass_, 0)
        self._spike_levels(schema, Z, rows, leaf, fw, uniform)
        for j, spec in enumerate(schema.columns):
            if not spec.atoms or spec.is_discrete:
                continue
            xj = Z[rows, j]
            seen = ~np.isnan(xj)
            share = [float(fw[seen & (xj == a)].sum() / fw[seen].sum()) for a in spec.atoms]
            rest = 1.0 - sum(share)
            # box_lo_ lies below every value: a stand-in for the continuous part
            x = np.r_[np.where(seen, xj, self.box_lo_[j]), np.full(L, self.box_lo_[j]),
                      np.repeat(spec.atoms, L)]
            w = np.r_[fw, rest * uniform, np.concatenate([a * uniform for a in share])]
            lv = np.r_[leaf, np.tile(np.arange(L), 1 + len(share))]
            pm = PointMassLeaf(base=self.leaf_models_[j], atoms=spec.atoms)
            self.leaf_models_[j] = pm.fit_masses(x, lv, L, w)

    def _spike_levels(self, schema, Z, rows, leaf, fw, uniform) -> None:
        """Integer (and discrete-valued float) columns coded as levels keep their spike
        levels (:func:`~forestgen.leaves.uniform_levels.spike_levels`, adult's
        ``education-num = 9``): each cell gives each spike level its training weight's share
        there and spreads the rest uniformly over its other levels
        (:class:`~forestgen.leaves.uniform_levels.UniformLevelsLeaf` ``atoms``, as RFDE and
        DEF), shrunk toward the column's shares with :data:`SPIKE_PRIOR` pseudo-rows (RFDE and
        DEF's default ``prior_strength``: a cell of one row at the spike would otherwise give
        its other levels nothing; adult held-out LL -49.2 without, -47.0 with, -48.1 with
        uniform cells). Fragments of rows missing the column and the smoothing component are
        uniform over the cell's levels (pseudo-rows on every allowed level), so each leaf's
        pmf is that of its whole mass and the density stays exactly normalised."""
        from forestgen.leaves.base import ColumnCell
        from forestgen.leaves.uniform_levels import UniformLevelsLeaf, spike_levels

        L = len(self.cell_mass_)
        for j, spec in enumerate(schema.columns):
            if not (spec.is_discrete and spec.kind in ("integer", "continuous")):
                continue
            k = max(spec.n_levels, 1)
            spikes = spike_levels(Z[:, j], k)
            if not spikes:
                continue
            xj = Z[rows, j]
            seen = ~np.isnan(xj)
            flat = uniform + np.bincount(leaf[~seen], weights=fw[~seen], minlength=L)
            codes = np.arange(k)
            allowed = ((codes[None, :] > self.cell_lo_[:, j, None])
                       & (codes[None, :] <= self.cell_hi_[:, j, None]))
            pl, pc = np.nonzero(allowed)
            share = flat / np.maximum(allowed.sum(1), 1)
            cell = ColumnCell(lower=self.cell_lo_[:, j], upper=self.cell_hi_[:, j],
                              allowed=allowed, data_min=0.0, data_max=k - 1.0, n_levels=k)
            prior = SPIKE_PRIOR / self.n_train_  # weights are shares of the training rows
            self.leaf_models_[j] = UniformLevelsLeaf(atoms=spikes, prior=prior).fit(
                np.r_[xj[seen], pc.astype(float)], np.r_[leaf[seen], pl], cell,
                np.r_[fw[seen], share[pl]])

    def _keep_incomplete_rows(self, table: CellTable, leaf_cell: np.ndarray) -> None:
        """What the imputation walk needs of the training data (spec §1.6: a GF keeps its
        data): every row fragment's leaf and weight (sorted by leaf), each row's missing
        pattern, and the values of the rows with missing entries (to recognise a training row
        being imputed and leave it out, spec §4.2)."""
        rows, cells, w = table.row_fragments()
        leaf_of_cell = np.full(table.n_cells, -1, np.int64)
        held = np.flatnonzero(leaf_cell >= 0)
        leaf_of_cell[leaf_cell[held]] = held
        leaf = leaf_of_cell[cells]
        order = np.lexsort((rows, leaf))
        self.fragments_ = np.column_stack([rows[order], leaf[order]])
        self.fragment_weight_ = w[order]
        self.row_missing_ = np.isnan(table.Z)
        incomplete = self.row_missing_.any(1)
        self.incomplete_rows_ = table.Z[incomplete]
        self.incomplete_ids_ = np.flatnonzero(incomplete)

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Boxes and training masses ``R`` of the leaves of ``forest_`` (in leaf order): the
        cells of the joint partition (``R > 0``) and the empty regions between them
        (``R = 0``). ``(lo, hi)`` intervals ``(lo, hi]`` per ordered column (encoded units),
        allowed-level mask per nominal column (offsets of
        :func:`~forestgen.families.mixture.rfde.column_layout`)."""
        self._check_fitted()
        return self.cell_lo_, self.cell_hi_, self.cell_mask_, self.cell_mass_

    @property
    def n_cells_(self) -> int:
        """Number of cells of the joint partition holding training mass."""
        self._check_fitted()
        return int((self.cell_mass_ > 0).sum())

    def cell_risk(self) -> float:
        """Bayes risk ``Σ_C J_π(R(C), U(C))`` of the fitted partition (spec §2.2)."""
        self._check_fitted()
        held = self.cell_mass_ > 0
        return self._splitter().risk(self.cell_mass_[held], self._cell_volume_share()[held])

    def _cell_volume_share(self) -> np.ndarray:
        """``U(L)``: each leaf's share of the root box measure."""
        logu = np.zeros(self.forest_.n_leaves)
        kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
        for j, lm in enumerate(self.leaf_models_):
            if lm.discrete:  # allowed levels of the cell (whatever the leaf's pmf)
                k = int(nlev[j])
                if kind[j] == KIND_NOMINAL:
                    cnt = self.cell_mask_[:, nom_off[j]: nom_off[j] + k].sum(1)
                else:
                    codes = np.arange(k)
                    cnt = ((codes[None, :] > self.cell_lo_[:, j, None])
                           & (codes[None, :] <= self.cell_hi_[:, j, None])).sum(1)
                logu += np.log(cnt / self.encoder_.schema.columns[j].support.sum())
            else:
                lm = getattr(lm, "base_", lm)  # a point-mass column: its uniform part
                logu += np.log((lm.hi_ - lm.lo_) / (self.box_hi_[j] - self.box_lo_[j]))
        return np.exp(logu)

    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row (see the module notes on the measure). Densities below
        ``density_floor`` times the uniform density on the box (rows outside the training box;
        empty cells when ``smoothing`` is below the floor) are reported as that unless
        ``floor=None`` (honest ``-inf``) or another ``floor`` is given."""
        out = super().log_prob(X, conditions)
        if conditions is not None:
            return out
        return apply_floor(out, self.density_floor if floor == "default" else floor,
                           box_log_volume(self.encoder_.schema, self.box_lo_, self.box_hi_))

    # ------------------------------------------------------------------ imputation
    def impute(self, X, method: str = "max_density", n_imputations: int = 1,
               random_state=None, walk: str = "backoff", score: str = "exact",
               within: str = "rows"):
        """Fill missing entries (paper §7.2).

        ``walk="backoff"`` (default): the paper's walk over the trees
        (:mod:`~forestgen.families.intersection.backoff`): nodes on observed columns follow the row
        and stop at a side without training mass (keeping the coarser region), nodes on missing
        columns split the region; a training row being imputed is left out of the masses.
        ``method="max_density"`` draws the missing entries uniformly in the region of highest
        density (``score="exact"``: mass over the region's measure; ``"reference"``: over its
        measure on the missing columns only, as the reference code; ties at random),
        ``"sample"`` picks a region with probability proportional to its mass over its
        measure on the observed columns (``"reference"``: to its mass), ``"expectation"`` the
        mean / most probable level under those region probabilities.

        ``walk="exact"``: the model's exact conditional (smoothing included):
        ``"max_density"`` is a uniform draw in the compatible leaf of highest conditional
        density, ``"sample"`` an exact conditional draw, ``"expectation"`` the conditional mean
        / mode. Large forests put each training row in a cell of its own, where the exact
        conditional of a masked training row is its own cell: the back-off walk avoids that.
        """
        from forestgen.inference.api import impute

        check_choice("walk", walk, ("backoff", "exact"))
        check_choice("score", score, ("exact", "reference"))
        check_choice("within", within, ("rows", "uniform"))
        filler = None
        if walk == "backoff":
            def filler(Z, miss, meth, rng):
                return self._backoff_fill(Z, miss, meth, rng, score, within)
        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state, filler=filler)

    def _backoff_fill(self, Z: np.ndarray, miss: np.ndarray, method: str,
                      rng: np.random.Generator, score: str, within: str) -> np.ndarray:
        from forestgen.families.intersection.backoff import (
            backoff_regions,
            log_measure,
            piece_draw,
            piece_mean,
            region_pieces,
        )

        if not hasattr(self, "fragments_"):
            raise ValueError("GFBoost.impute(walk='backoff') needs the training fragments, "
                             "which this model (saved by an older version) lacks; refit it or "
                             "use walk='exact'")
        kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
        f = self.trees_
        frow, fleaf = self.fragments_[:, 0], self.fragments_[:, 1]
        fw = self.fragment_weight_
        L = len(self.cell_mass_)
        base = np.bincount(fleaf, weights=fw, minlength=L)
        ptr = np.searchsorted(fleaf, np.arange(L + 1))
        atoms = self._cell_atoms()
        values = {j: v for j, (v, _) in atoms.items()}
        same = self._incomplete_index()
        cmask = np.ascontiguousarray(self.cell_mask_, np.uint8)
        data = (frow, fleaf, fw, ptr, self.row_missing_, (self.cell_lo_, self.cell_hi_, cmask))
        args = (f.feature.astype(np.int64), f.threshold, f.left.astype(np.int64),
                f.right.astype(np.int64), f.cat_off, f.cat_left, f.roots.astype(np.int64),
                np.ascontiguousarray(self.cell_hi_), cmask)
        box = (self.box_lo_, self.box_hi_)
        box_mask = root_mask(self.encoder_.schema, cmask.shape[1])
        out = Z.copy()
        for i in np.flatnonzero(miss.any(1)):
            x = Z[i].copy()
            mass, own = base, same.get(_row_key(x), ())
            if len(own):  # the imputed training row itself is left out
                sel = np.isin(frow, own)
                mass = base.copy()
                np.subtract.at(mass, fleaf[sel], fw[sel])
                mass[mass < 1e-9] = 0.0
            R, lo, hi, mask, pool, start, count = backoff_regions(x, *args, mass, nom_off,
                                                                  nlev, *box, box_mask)
            if not len(R):  # no training mass at all: the whole box
                R, lo, hi = np.ones(1), self.box_lo_[None, :], self.box_hi_[None, :]
                mask = box_mask[None, :].copy()
                pool, start, count = np.zeros(0, np.int64), np.zeros(1, np.int64), \
                    np.zeros(1, np.int64)
            cols = np.flatnonzero(miss[i])
            lw = np.log(R)
            if score == "exact":
                lw -= log_measure(lo, hi, mask, np.flatnonzero(~np.isnan(x)), kind, nom_off,
                                  nlev, *box)
            p = np.exp(lw - lw.max())
            dens = lw - log_measure(lo, hi, mask, cols, kind, nom_off, nlev, *box)
            parts = [(j,) for j in cols] if method == "expectation" else [tuple(cols)]
            for use in parts:  # pieces informed on these columns
                preg, pin, plo, phi, pmask, share = region_pieces(
                    R, lo, hi, mask, pool, start, count, data, own, use, atoms, within)
                if method == "expectation":
                    w = p[preg] * pin
                    out[i, use[0]] = piece_mean(use[0], w / w.sum(), plo, phi, pmask, share,
                                                values, kind, nom_off, nlev)
                    continue
                cand = np.unique(preg)
                if method == "max_density":
                    d = dens[cand]
                    best = cand[d >= d.max() - 1e-12 * abs(d.max())]
                    r = int(best[rng.integers(len(best))])
                else:
                    r = int(cand[_pick(p[cand], rng)])
                ps = np.flatnonzero(preg == r)
                k = int(ps[_pick(pin[ps], rng)])
                drawn = piece_draw(plo[k], phi[k], pmask[k], cols, kind, nom_off, nlev,
                                   {j: a[k] for j, a in share.items()}, values, rng)
                for j, v in drawn.items():
                    out[i, j] = v
        return out

    def _incomplete_index(self) -> dict:
        """Encoded training rows with missing entries -> their row ids."""
        out: dict = {}
        for k, r in zip(self.incomplete_ids_, self.incomplete_rows_):
            out.setdefault(_row_key(r), []).append(int(k))
        return out

    def _cell_atoms(self) -> dict:
        """``{column: (atoms, shares [leaves, atoms])}`` of numeric columns with point
        masses (their leaves are :class:`~forestgen.leaves.point_mass.PointMassLeaf`)."""
        return {j: (np.asarray(lm.atoms, float), lm.mass_)
                for j, lm in enumerate(self.leaf_models_) if isinstance(lm, PointMassLeaf)}

    # ------------------------------------------------------------------ persistence
    def _extra_arrays(self):
        out = {"box_lo": self.box_lo_, "box_hi": self.box_hi_,
               "risk_path": np.asarray(self.risk_path_)}
        for k in ("cell_lo_", "cell_hi_", "cell_mask_", "cell_mass_"):
            if hasattr(self, k):
                out[k[:-1]] = getattr(self, k)
        out.update(self.trees_.to_arrays("trees."))
        for k in _DATA_ARRAYS:
            if hasattr(self, k + "_"):
                out[k] = getattr(self, k + "_")
        return out

    def _extra_meta(self):
        return {"n_train": int(self.n_train_), "smoothing": getattr(self, "smoothing_", 0.0)}

    def _restore_extra(self, arrays, meta):
        self.box_lo_ = arrays["box_lo"]
        self.box_hi_ = arrays["box_hi"]
        self.risk_path_ = list(arrays["risk_path"])
        self.n_splits_ = len(self.risk_path_) - 1
        self.trees_ = ForestArrays.from_arrays(arrays, "trees.")
        self.n_train_ = int(meta["n_train"])
        self.smoothing_ = float(meta.get("smoothing", 0.0))
        for k in ("cell_lo", "cell_hi", "cell_mask", "cell_mass"):
            if k in arrays:
                setattr(self, k + "_", arrays[k])
        for k in _DATA_ARRAYS:
            if k in arrays:
                setattr(self, k + "_", arrays[k])
        if "cell_mass" not in arrays:  # files before smoothing: leaf weights are the masses
            self.cell_mass_ = np.exp(self.leaf_log_weight_)


def _evidence_row(ev, i: int) -> tuple[np.ndarray, dict]:
    """Row ``i`` of parsed evidence: its values (NaN: none) and ``{column: constraint}``, a
    closed range ``(a, b)`` (encoded units, infinite ends open) or a level mask."""
    x = ev.point[i].copy()
    cons: dict = {}
    for j in np.flatnonzero(ev.interval_active()[i]):
        a, b = ev.lo[i, j], ev.hi[i, j]
        cons[int(j)] = (-np.inf if np.isnan(a) else a, np.inf if np.isnan(b) else b)
    for j, (act, mk) in ev.sets.items():
        if act[i]:
            cons[int(j)] = np.asarray(mk[i], bool)
    return x, cons


def _evidence_key(ev, i: int) -> bytes:
    """Hashable key of evidence row ``i``."""
    x, cons = _evidence_row(ev, i)
    return _row_key(x) + b"|" + _constraints_key(cons)


def _constraints_key(cons: dict) -> bytes:
    """Hashable key of ranges / level sets ``{column: constraint}``."""
    return b"|".join(np.int64(j).tobytes() + np.asarray(c, float).tobytes()
                     for j, c in sorted(cons.items()))


def _level_routes(f: ForestArrays, j: int, k: int) -> np.ndarray:
    """``[k]``: a class per level of nominal column ``j``, equal for levels that every split
    on the column sends the same way."""
    nodes = np.flatnonzero((f.feature == j) & (f.cat_off >= 0))
    if not len(nodes):
        return np.zeros(k)
    sides = f.cat_left[f.cat_off[nodes][:, None] + np.arange(k)[None, :]]
    return np.unique(sides.T, axis=0, return_inverse=True)[1].ravel().astype(float)


def _logsumexp(w: np.ndarray) -> float:
    return float(np.logaddexp.reduce(w)) if len(w) else -np.inf


def _row_key(x: np.ndarray) -> bytes:
    """Hashable key of an encoded row (NaN entries compare equal)."""
    nan = np.isnan(x)
    return nan.tobytes() + np.where(nan, 0.0, x).tobytes()


_DATA_ARRAYS = ("fragments", "fragment_weight", "row_missing", "incomplete_rows",
                "incomplete_ids")


def _pick(w: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with probability proportional to ``w``."""
    c = np.cumsum(w)
    return min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), len(w) - 1)


def _tree_dicts(table: CellTable, kind, nom_off, nlev) -> list[TreeRecord]:
    """The table's trees as tree-local records for :meth:`ForestArrays.from_trees`."""
    out = []
    for t in range(table.n_trees):
        order = [t]
        q = 0
        while q < len(order):  # breadth-first: parents before children
            node = order[q]
            if table.nfeat[node] >= 0:
                order += [int(table.nleft[node]), int(table.nright[node])]
            q += 1
        order = np.asarray(order, np.int64)
        local = {int(g): i for i, g in enumerate(order)}
        feat = table.nfeat[order].copy()
        left = np.array([local.get(int(g), -1) for g in table.nleft[order]], np.int64)
        right = np.array([local.get(int(g), -1) for g in table.nright[order]], np.int64)
        cat_off = np.full(len(order), -1, np.int64)
        parts, acc = [], 0
        for i, g in enumerate(order):
            j = feat[i]
            if j >= 0 and kind[j] == KIND_NOMINAL:
                cat_off[i] = acc
                parts.append(table.nsplit[g, nom_off[j]: nom_off[j] + nlev[j]])
                acc += int(nlev[j])
        out.append(TreeRecord(
            feature=np.asarray(feat, np.int32), threshold=table.nthr[order].astype(np.float64),
            nan_left=np.ones(len(order), np.uint8), left=left.astype(np.int32),
            right=right.astype(np.int32), cat_off=cat_off,
            cat_left=np.concatenate(parts).astype(np.uint8) if parts else np.zeros(0, np.uint8),
            class_weight=table.nR[order][:, None].astype(np.float64)))
    return out


@register("learner", "eogt")
class EOGT(GFBoost):
    """Ensemble of generative trees (paper §6; spec §1.6, §2.11, §3.4, §4.3).

    Trained like :class:`GFBoost` but scoring splits with approximate cell masses re-estimated
    from the split leaf's rows and volumes (spec §2.11), then *stripped of the data*: only the
    trees and their arc probabilities ``π_{ν→v} = R(v)/R(ν)`` are kept (``trees_.node_value``).

    Its law is defined by the star-node sampler with approximate branching (eq. (8)) in the
    iterative tree order, mixed like :class:`GFBoost`'s with ``smoothing`` times the uniform
    density on the box. :meth:`sample` draws from it exactly; :meth:`log_prob` is its exact
    density, with missing entries marginalised by walking both branches of every node on a
    missing column (:func:`~forestgen.families.intersection.regions.approx_regions`; a row needing
    more than ``max_regions`` regions gets NaN with a warning); :meth:`impute` (all three methods),
    :meth:`predict_proba`, :meth:`predict` and conditions (conditional :meth:`sample` and
    :meth:`log_prob`, exact; values, closed ranges and level sets, each weighting a region by
    its share of the range or set) use the same compatible regions; conditional evidence
    past ``max_regions`` is drawn exactly by rejection: draws of the law kept when they meet
    the ranges and sets, proposed by the walk forced to the point values
    (:mod:`~forestgen.families.intersection.forced`; on a column with point masses also kept with
    the region's atom share); only evidence that too few proposals meet raises (a dict) or
    leaves its row blank with a warning (per-row evidence); a per-row evidence pattern that
    went past ``max_regions`` is sampled first for the next rows. ``expect`` and ``to_torch`` raise
    ``NotImplementedError``.
    ``forest_`` holds the same trees with each leaf's reach probability and a uniform leaf (so
    each tree alone is a generative tree, and ``save``/``load`` work); it is not the EOGT's law
    for ``T > 1``.

    Point masses (issue 11): a numeric column with atoms (``ColumnSpec.atoms``, e.g. fair's
    ``affairs == 0``) is, inside each region, its atoms with the region's shares plus a
    uniform remainder (:mod:`~forestgen.families.intersection.region_atoms`); the shares are
    estimated from the training rows in the region, shrunk with ``prior_strength`` pseudo-rows
    (default 1) toward the column's share of the atom among its values in the region's interval,
    which regions without training rows take alone. For this the model keeps each non-empty cell's
    weight at the atoms (and the column's share of values between split faces), not the rows.
    Sampling, the density (counting measure at the atoms, exactly normalised), conditionals and
    imputation use them. Integer (and discrete-valued) columns coded as levels keep their spike
    levels (adult's ``education-num = 9``) the same way: a region gives each spike level its
    share and spreads the rest uniformly over its other levels.
    """

    model_family = INTERSECTION
    method_name = "EOGT"
    _approx = True
    #: per-row cap on the regions enumerated to marginalise missing entries
    max_regions = 100_000

    def __init__(self, *, n_trees: int = 50, n_iter: int = 200, loss: str = "matusita",
                 prior: float = 0.5, candidates: str = "observed", max_candidates: int = 255,
                 min_rows: float = 1.0, missing: str = "fractional", smoothing: float = 1e-3,
                 prior_strength: float = 1.0, density_floor: float | None = 1e-5,
                 progress: bool = False, random_state: Any = None):
        """Parameters: as :class:`GFBoost`, plus ``prior_strength`` (class docstring)."""

    @property
    def capabilities(self) -> frozenset:
        """``log_prob`` (with NaN marginals), ``sample``, conditional sampling and log density
        (values, ranges, level sets), ``impute`` and ``predict``; not ``expect`` or ``torch``."""
        return frozenset({"log_prob", "marginal", "sample", "conditional_sample",
                          "conditional_log_prob", "impute", "predict"})

    def _finish(self, table: CellTable, schema, kind, nlev, nom_off) -> None:
        n_levels = np.where(kind == KIND_NOMINAL, nlev, 0)
        self.smoothing_ = 0.0 if self.smoothing == "auto" else float(self.smoothing)
        self.trees_ = ForestArrays.from_trees(_tree_dicts(table, kind, nom_off, nlev), n_levels)
        self.forest_ = self.trees_
        self.n_train_ = int(table.m_total)
        self._layout = (kind, nlev, nom_off)
        geo = self._geometry()
        leaf_node = self.trees_.leaf_node
        m = table.m_total
        with np.errstate(divide="ignore"):
            self.leaf_log_weight_ = np.log(geo.weight[leaf_node] / m) - np.log(
                self.trees_.n_trees)
        self.leaf_models_ = fit_cell_leaves(schema, geo.lo[leaf_node], geo.hi[leaf_node],
                                            geo.mask[leaf_node].astype(np.uint8), nom_off,
                                            geo.weight[leaf_node])
        C = table.n_cells
        keys = region_leaves(self.trees_, table.clo[:C], table.chi[:C], table.cmask[:C],
                             nom_off, nlev)
        f = self.trees_
        faces = [np.unique(np.r_[f.threshold[f.feature == j], lo_j, hi_j])
                 for j, (lo_j, hi_j) in enumerate(zip(self.box_lo_, self.box_hi_))]
        self.region_atoms_ = RegionAtoms.fit(schema, table.Z, table.row_fragments(), keys,
                                             faces, float(self.prior_strength))

    def validate_params(self) -> None:
        super().validate_params()
        check_real("prior_strength", self.prior_strength, 0.0)
        if self.smoothing == "auto":
            raise ValueError("EOGT keeps no cell masses: smoothing='auto' needs GFBoost; "
                             "give a number")

    def _geometry(self):
        from forestgen.families.intersection.star import TreeGeometry

        if getattr(self, "_geo", None) is None:
            kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
            self._layout = (kind, nlev, nom_off)
            self._geo = TreeGeometry(self.trees_, self.box_lo_, self.box_hi_, nom_off, nlev,
                                     root_mask(self.encoder_.schema))
        return self._geo

    def _regions(self, x: np.ndarray):
        """Compatible regions of one encoded row with their log weight on the observed
        entries, ``log Q̂(C) - log μ_o(C_o)`` (times the atom shares of observed atom columns,
        :mod:`~forestgen.families.intersection.region_atoms`), and their atom shares; ``None`` past
        ``max_regions``."""
        from forestgen.families.intersection.regions import approx_regions

        reg = approx_regions(self._geometry(), x, self.box_lo_, self.box_hi_,
                             int(self.max_regions))
        if reg is None:
            return None
        lo, hi, mask = reg.lo, reg.hi, reg.mask
        lw = reg.log_q - reg.log_measure
        shares = self._region_shares(lo, hi, reg.leaves)
        if len(lw) and self._atoms():
            lw = lw + self._atoms().log_factor(x, shares, lo, hi)
        return lw, lo, hi, mask, shares

    def _atoms(self) -> RegionAtoms | None:
        """The per-region atom shares (``None`` for files saved before they existed)."""
        return getattr(self, "region_atoms_", None)

    def _region_shares(self, lo, hi, leaves) -> list[np.ndarray]:
        """Atom shares ``[m, A]`` per atom column of regions given by their boxes and their
        leaf in every tree."""
        atoms = self._atoms()
        if not atoms or not len(lo):
            return []
        return atoms.shares(atoms.region_ids(leaves), lo, hi)

    def _box_shares(self) -> list[np.ndarray]:
        """Atom shares of the smoothing component: the column's overall shares."""
        atoms = self._atoms()
        if not atoms:
            return []
        return atoms.shares(np.array([-1]), self.box_lo_[None, :], self.box_hi_[None, :])

    def _uniform_log_weight(self, x: np.ndarray) -> float:
        """``log ε - log μ_o(X_o)``: the smoothing component's weight on the observed entries."""
        from forestgen.families.intersection.regions import region_log_measures

        if self.smoothing_ <= 0:
            return -np.inf
        g = self._geometry()
        r0 = self.trees_.roots[0]
        out = math.log(self.smoothing_) - float(region_log_measures(
            g, g.lo[r0], g.hi[r0], g.mask[r0], np.flatnonzero(~np.isnan(x)))[0])
        if self._atoms():
            out += float(self._atoms().log_factor(x, self._box_shares(), g.lo[r0][None, :],
                                                  g.hi[r0][None, :])[0])
        return out

    def _too_many(self, rows: list[int], query: str) -> None:
        if rows:
            warnings.warn(f"EOGT {query}: {len(rows)} row(s) (first: {rows[0]}) need more than "
                          f"max_regions={self.max_regions} compatible regions to marginalise "
                          f"their missing entries; they get NaN", RuntimeWarning, stacklevel=3)

    def _row_keys(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Representative rows and the inverse map: the walk sees a row only through which
        side of every threshold (and box face) each entry lies, and a level only through the
        sides its splits send it to, so rows agreeing on that are answered once (e.g. the grid
        of a marginal's quadrature, or per-row evidence on an id column no tree splits)."""
        self._geometry()
        f = self.trees_
        nominal = self._layout[2] >= 0
        nlev = self._layout[1]
        atoms = self._atoms()
        atom_values = ({int(j): a for j, a in zip(atoms.columns, atoms.atoms)} if atoms
                       else {})
        keys = np.empty((len(Z), Z.shape[1] + len(atom_values)))
        box_mask = root_mask(self.encoder_.schema).astype(bool)
        for j in range(Z.shape[1]):
            col = Z[:, j]
            if nominal[j]:
                k = int(nlev[j])
                valid = (col >= 0) & (col < k) & (col == np.floor(col))
                # a level outside the box (no training row) is told apart like an invalid one
                o = self._layout[2][j]
                valid &= box_mask[o + np.where(valid, col, 0).astype(np.int64)]
                route = _level_routes(f, j, k)
                keys[:, j] = np.where(np.isnan(col), -2.0, np.where(
                    valid, route[np.where(valid, col, 0).astype(np.int64)], -3.0))
                continue
            faces = np.unique(np.r_[f.threshold[f.feature == j], self.box_lo_[j],
                                    self.box_hi_[j]])
            keys[:, j] = np.where(np.isnan(col), -2.0, np.searchsorted(faces, col, "left"))
        for k, (j, a) in enumerate(atom_values.items()):  # which atom, if any
            keys[:, Z.shape[1] + k] = (Z[:, j, None] == a[None, :]) @ np.arange(1, len(a) + 1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        return first, inverse.ravel()

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """Exact log density of EOGT's law; NaN entries are marginalised."""
        self._check_fitted()
        Z = np.asarray(Z, float)
        if len(Z) == 0:
            return np.zeros(0)
        first, inverse = self._row_keys(Z)
        return self._log_prob_rows(Z[first])[inverse]

    def _log_prob_rows(self, Z: np.ndarray) -> np.ndarray:
        out = np.empty(len(Z))
        big = []
        a = math.log1p(-self.smoothing_)
        for i, x in enumerate(Z):
            reg = self._regions(x)
            if reg is None:
                out[i] = np.nan
                big.append(i)
                continue
            lw = reg[0]
            tree_part = a + np.logaddexp.reduce(lw) if len(lw) else -np.inf
            inside = self._inside(x)
            out[i] = np.logaddexp(tree_part, self._uniform_log_weight(x)) if inside else -np.inf
        self._too_many(big, "log_prob")
        return out

    def _inside(self, x: np.ndarray) -> bool:
        obs = ~np.isnan(x)
        nom = self._layout[2] >= 0
        o = obs & ~nom
        if np.any(x[o] <= self.box_lo_[o]) or np.any(x[o] > self.box_hi_[o]):
            return False
        k = obs & nom
        if not np.all((x[k] >= 0) & (x[k] < self._layout[1][k]) & (x[k] == np.round(x[k]))):
            return False
        # a declared level without training rows lies outside the box (root_mask)
        box_mask = root_mask(self.encoder_.schema)
        return bool(np.all(box_mask[self._layout[2][k] + x[k].astype(np.int64)]))

    def sample_encoded(self, n: int, random_state=None, missing: bool = False) -> np.ndarray:
        from forestgen.families.intersection.star import approx_sample, draw_uniform
        from forestgen.validation import as_generator

        self._check_fitted()
        check_int("n", n, 0)
        rng = as_generator(random_state)
        geo = self._geometry()
        kind, nlev, nom_off = self._layout
        uni = rng.random(int(n)) < self.smoothing_
        out = np.empty((int(n), len(self.box_lo_)))
        out[~uni] = approx_sample(geo, kind, int((~uni).sum()), rng)
        r0 = self.trees_.roots[0]
        for i in np.flatnonzero(uni):
            out[i] = draw_uniform(geo.lo[r0], geo.hi[r0], geo.mask[r0], kind, nom_off, nlev,
                                  rng)
        self._place_atoms(out, uni, np.ones(out.shape[1], bool), rng)
        return constrain(out, self.schema_)

    def _place_atoms(self, out: np.ndarray, uni: np.ndarray, free: np.ndarray, rng) -> None:
        """Put the draws ``out`` (uniform in their regions; ``uni``: from the smoothing
        component) on the point masses of their region, in the columns ``free [d]`` (in place)."""
        atoms = self._atoms()
        if not atoms or not len(out):
            return
        shares, lo, hi = self._draw_shares(out, uni)
        atoms.draw(out, np.broadcast_to(free, out.shape), shares, lo, hi, rng)

    def _draw_shares(self, out: np.ndarray, uni: np.ndarray) -> tuple[list, np.ndarray,
                                                                      np.ndarray]:
        """Atom shares of the region of each draw (``uni``: the smoothing component's, the
        column's overall shares) and the regions' boxes on the atom columns (NaN elsewhere)."""
        atoms = self._atoms()
        geo = self._geometry()
        tree = np.flatnonzero(~uni)
        leaves = self.trees_.apply(out[tree])
        nodes = self.trees_.leaf_node[leaves]
        cols = atoms.columns
        lo = np.full(out.shape, np.nan)
        hi = lo.copy()
        lo[np.ix_(tree, cols)] = geo.lo[:, cols][nodes].max(1)
        hi[np.ix_(tree, cols)] = geo.hi[:, cols][nodes].min(1)
        lo[uni], hi[uni] = self.box_lo_, self.box_hi_
        rid = atoms.region_ids(leaves)
        shares = [np.empty((len(out), len(a))) for a in atoms.atoms]
        for s, t, b in zip(shares, atoms.shares(rid, lo[tree], hi[tree]), self._box_shares()):
            s[tree] = t
            s[uni] = b
        return shares, lo, hi

    def sample(self, n=None, random_state=None, conditions=None, on_empty=None,
               missing=True):
        """``n`` rows of EOGT's law; with ``conditions`` (the evidence language of
        :mod:`forestgen.inference`: values, closed intervals, level sets; a dict or a DataFrame
        of per-row evidence), exact draws from its conditional: a compatible region with
        probability proportional to its weight on the evidence, then uniform in the region cut
        to the evidence (atoms with the region's shares). Rows whose evidence has probability
        zero raise ``ZeroProbabilityError`` (``on_empty="unconditional"``: drawn from the
        law, ``"nan"``, the default for a per-row DataFrame: their given values and every other
        entry missing; with a warning)."""
        if conditions is None:
            return super().sample(n, random_state)
        from forestgen.validation import as_generator

        self._check_fitted()
        if on_empty is not None:
            check_on_empty(on_empty, False)
        ev, per_row, index = self._evidence(conditions, n, on_empty)
        on_empty = check_on_empty(on_empty, per_row)
        if not per_row:
            check_int("n", n, 0)
            ev = ev.broadcast(int(n))
        rng = as_generator(random_state)
        out = np.empty((ev.m, self.schema_.d))
        empty = []
        groups: dict = {}
        for i in range(ev.m):  # rows with the same evidence are walked once
            groups.setdefault(_evidence_key(ev, i), []).append(i)
        sig = self._row_keys(ev.point)[1] if ev.m else None
        walks: dict = {}
        big: list[int] = []
        overflow: set = set()  # evidence patterns whose regions went past max_regions
        for rows in groups.values():
            x, cons = _evidence_row(ev, rows[0])
            impossible = any(not np.asarray(c).any() for c in cons.values()
                             if not isinstance(c, tuple))  # an empty level set
            pattern = (np.isnan(x).tobytes(), tuple(sorted(cons)))
            if pattern in overflow and not impossible:  # likely too many again: sample first
                drawn = self._rejection_or_none(x, cons, len(rows), rng, rows[0], per_row)
                if drawn is not None:
                    out[rows] = drawn
                    continue
            reg = (np.full(1, -np.inf),) if impossible else self._shared_regions(
                walks, sig[rows[0]], x, cons)
            if reg is None:  # too many regions: rejection where the evidence allows it
                overflow.add(pattern)
                drawn = self._rejection_or_none(x, cons, len(rows), rng, rows[0], per_row)
                if drawn is not None:
                    out[rows] = drawn
                    continue
                if not per_row:
                    raise ValueError(f"EOGT conditional_sample: the evidence needs more than "
                                     f"max_regions={self.max_regions} regions")
                big += rows  # NaN for these rows; the others are drawn
                out[rows] = np.where(np.isnan(x), np.nan, x)
                continue
            w = reg[0]
            if not np.isfinite(w).any():
                if on_empty == "raise":
                    from forestgen.inference.conditions import ZeroProbabilityError

                    raise ZeroProbabilityError(f"EOGT conditional_sample: the evidence of row "
                                               f"{rows[0]} has probability zero")
                empty += rows
                out[rows] = self.sample_encoded(len(rows), rng)
                if on_empty == "nan":  # the given values; the rest is blanked below
                    out[rows] = np.where(np.isnan(x), out[rows], x)
                continue
            p = np.exp(w - w.max())
            cum = np.cumsum(p) / p.sum()
            for i in rows:
                k = min(int(np.searchsorted(cum, rng.random(), side="right")), len(p) - 1)
                out[i] = self._draw_evidence(x, cons, reg, k, rng)
        if empty:
            what = ("drawn unconditionally" if on_empty == "unconditional"
                    else "returned with their given values only")
            warnings.warn(f"EOGT conditional_sample: {len(empty)} row(s) (first: {empty[0]}) "
                          f"have evidence of probability zero; {what} (on_empty={on_empty!r})",
                          RuntimeWarning, stacklevel=2)
        if big:
            warnings.warn(f"EOGT conditional_sample: {len(big)} row(s) (first: {big[0]}) have "
                          f"evidence compatible with more than max_regions={self.max_regions} "
                          f"regions; they keep their given values and every other entry is "
                          f"missing (raise max_regions to draw them)", RuntimeWarning,
                          stacklevel=2)
            out[big] = np.where(np.isnan(out[big]), 0.0, out[big])  # placeholders, blanked
        df = self.encoder_.inverse_transform(constrain(out, self.schema_))
        blank = sorted((empty if on_empty == "nan" else []) + big)
        if blank:
            rows = np.asarray(blank, np.int64)
            df = blank_rows(df, rows, ~np.isnan(ev.point[rows]))
        if index is not None:
            df.index = index
        return df

    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density of EOGT's law (module notes of :class:`GFBoost` on the measure); with
        ``conditions`` (values, closed intervals, level sets), ``log p(x_free | evidence)``
        exactly, as the ratio of two marginals of the law (NaN entries marginalised)."""
        if conditions is None:
            return super().log_prob(X, floor=floor)
        self._check_fitted()
        Zx = self._encode(X, missing_columns="nan")
        ev, per_row, _ = self._evidence(conditions, None)
        if not per_row:
            ev = ev.broadcast(len(Zx))
        elif ev.m != len(Zx):
            raise ValueError(f"per-row conditions have {ev.m} rows but X has {len(Zx)}")
        out = np.empty(len(Zx))
        rows = [_evidence_row(ev, i) for i in range(len(Zx))]
        given = np.array([[j in cons for j in range(Zx.shape[1])] for _, cons in rows], bool)
        joint = np.where(np.isnan(ev.point) & ~given, Zx, ev.point) if len(Zx) else Zx
        sig_e, sig_j = (self._row_keys(ev.point)[1], self._row_keys(joint)[1]) if len(Zx) \
            else (None, None)
        cache: dict = {}  # log P by what the trees see of the evidence (and of the joint)
        big = []
        for i, (x, cons) in enumerate(rows):
            key = ("e", int(sig_e[i]), _constraints_key(cons))
            if key not in cache:
                reg = self._evidence_regions(x, cons)
                cache[key] = np.nan if reg is None else _logsumexp(reg[0])
            log_e = cache[key]
            if np.isneginf(log_e):
                from forestgen.inference.conditions import ZeroProbabilityError

                raise ZeroProbabilityError(f"EOGT conditional_log_prob: the evidence of row "
                                           f"{i} has probability zero")
            jkey = ("j", int(sig_j[i]), key[2])
            if jkey not in cache and not np.isnan(log_e):
                reg = self._evidence_regions(joint[i], cons)
                cache[jkey] = np.nan if reg is None else _logsumexp(reg[0])
            log_j = np.nan if np.isnan(log_e) else cache[jkey]
            if np.isnan(log_j):
                big.append(i)
                out[i] = np.nan
                continue
            out[i] = log_j - log_e
        self._too_many(big, "conditional_log_prob")
        return out

    def _rejection_or_none(self, x: np.ndarray, cons: dict, m: int, rng, row: int,
                           per_row: bool) -> np.ndarray | None:
        """``m`` exact draws by :meth:`_rejection_sample` for evidence whose compatible
        regions exceed ``max_regions``. Point values are forced in the walk
        (:mod:`~forestgen.families.intersection.forced`): a numeric value as a point, a value of a
        gridded column (integers, fixed decimals) as its grid cell, a level as itself; on a
        discrete column with spike levels it is a one-level mask kept when a draw satisfies
        it; on a numeric column with point masses the region's atom share weighs it
        (:meth:`_atom_accept`). ``None``, for per-row evidence, where too few draws satisfy
        the evidence."""
        from forestgen.inference.conditions import ZeroProbabilityError

        cons = dict(cons)
        atoms = self._atoms()
        atom_cols = set(map(int, atoms.columns)) if atoms else set()
        lo_e = np.full(len(x), np.nan)
        hi_e = lo_e.copy()
        weigh = np.ones(len(x), bool)
        empty = False
        for j in map(int, np.flatnonzero(~np.isnan(x))):
            spec = self.schema_.columns[j]
            c = cons.pop(j, None)
            if spec.is_discrete:
                mask = np.zeros(spec.n_levels, bool)
                mask[int(x[j])] = True
                if c is not None:
                    mask &= c
                empty |= not mask.any()
                if j in atom_cols:
                    cons[j] = mask
                else:
                    lo_e[j] = hi_e[j] = x[j]
                continue
            if c is not None:
                empty |= not c[0] <= x[j] <= c[1]
            lo_e[j] = hi_e[j] = x[j]
            if spec.has_grid:  # the encoded values that decode to x_j
                h = spec.step if spec.step is not None else 10.0 ** -spec.decimals
                lo_e[j], hi_e[j] = x[j] - h / 2, x[j] + h / 2
            if j in atom_cols:  # the region's atom share weighs it (_atom_accept)
                weigh[j] = not spec.has_grid and not np.isin(
                    x[j], atoms.atoms[list(atoms.columns).index(j)]).any()
        try:
            if empty:
                raise ZeroProbabilityError(f"EOGT conditional_sample: the evidence of row "
                                           f"{row} has probability zero")
            return self._rejection_sample(cons, m, rng, row, (lo_e, hi_e, weigh))
        except ZeroProbabilityError:
            if per_row:
                return None
            raise

    def _rejection_sample(self, cons: dict, m: int, rng, row: int,
                          forced: tuple | None = None) -> np.ndarray:
        """``m`` exact draws of the law given ranges / level sets (``cons``) and point values
        (``forced``: per-column bounds ``(lo, hi)``, NaN = none), by keeping the draws that
        satisfy the ranges and sets after decoding: draws of the law, or of its walk forced
        to the point values and accepted by their importance ratio
        (:func:`~forestgen.families.intersection.forced.forced_draws`)."""
        from forestgen.families.intersection.forced import forced_draws
        from forestgen.inference.conditions import ZeroProbabilityError

        given = forced is not None and not np.isnan(forced[0]).all()
        got, need, tried, batch = [], m, 0, 0
        limit = 1000 * m + 100_000
        while need > 0:  # batches grow geometrically: few Python rounds for rare evidence
            batch = min(max(256, 4 * need, 2 * batch), max(REJECTION_BATCH, 4 * need),
                        limit - tried)
            if given:
                Z, uni = forced_draws(self._geometry(), self._layout[0], forced[0], forced[1],
                                      batch, self.smoothing_, rng, forced[2])
                Z, uni = self._atom_accept(Z, uni, forced, rng)
                self._place_atoms(Z, uni, np.isnan(forced[0]), rng)
                Z = constrain(Z, self.schema_)
            else:
                Z = self.sample_encoded(batch, rng)
            ok = np.ones(len(Z), bool)
            for j, c in cons.items():
                v = Z[:, j]
                if isinstance(c, tuple):
                    spec = self.schema_.columns[j]
                    v = spec.to_grid(v) if spec.has_grid else v
                    ok &= (v >= c[0]) & (v <= c[1])
                else:
                    ok &= c[np.clip(v, 0, len(c) - 1).astype(np.int64)]
            got.append(Z[ok][:need])
            need -= len(got[-1])
            tried += batch
            if need > 0 and tried >= limit:
                raise ZeroProbabilityError(
                    f"EOGT conditional_sample: the evidence of row {row} holds fewer than "
                    f"{m - need + 1} of {tried} draws of the law and its compatible regions "
                    f"exceed max_regions={self.max_regions}")
        return np.vstack(got)

    def _atom_accept(self, Z: np.ndarray, uni: np.ndarray, forced: tuple, rng
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The forced draws kept with probability their region's factor on each forced atom
        column, which :func:`~forestgen.families.intersection.forced.forced_draws` leaves out or
        takes only in part: at a value off the atoms (a point), ``1 - Σ s``; at an atom ``a``,
        ``s_a``; at a grid value (interval ``I``), ``s_a [a decodes to it] + (1 - Σ s) |C_j ∩ I| /
        |C_j|`` — each at most 1, so the rejection stays exact."""
        atoms = self._atoms()
        lo_e, hi_e, weigh = forced
        cols = [(c, int(j)) for c, j in enumerate(atoms.columns) if not np.isnan(lo_e[j])] \
            if atoms else []
        if not cols or not len(Z):
            return Z, uni
        shares, lo, hi = self._draw_shares(Z, uni)
        keep = np.ones(len(Z))
        for c, j in cols:
            a, s = atoms.atoms[c], shares[c]
            rest = np.maximum(1.0 - s.sum(1), 0.0)
            if weigh[j]:  # a point off the atoms: the kernel took 1 / |C_j|
                keep *= rest
                continue
            hit = (a > lo_e[j]) & (a <= hi_e[j]) if lo_e[j] < hi_e[j] else a == lo_e[j]
            p = s[:, hit].sum(1)
            if lo_e[j] < hi_e[j]:
                cut = np.minimum(hi[:, j], hi_e[j]) - np.maximum(lo[:, j], lo_e[j])
                p = p + rest * np.clip(cut, 0.0, None) / (hi[:, j] - lo[:, j])
            keep *= p
        ok = rng.random(len(Z)) < keep
        return Z[ok], uni[ok]

    def _evidence(self, conditions, n, on_empty: str | None = "raise"):
        """Parsed evidence (:func:`~forestgen.inference.conditions.parse_conditions`), whether
        it is per row, and the index of a DataFrame of conditions."""
        from forestgen.inference.conditions import parse_conditions

        ev, per_row = parse_conditions(self, conditions, on_empty)
        if per_row and n is not None and n != ev.m:
            raise ValueError(f"with per-row conditions n must be None or {ev.m}, got {n!r}")
        return ev, per_row, conditions.index if per_row else None

    def _evidence_regions(self, x: np.ndarray, cons: dict):
        """The regions compatible with the values ``x`` (NaN: free), then the smoothing box,
        as ``(log w, lo, hi, mask, shares)``: ``log w`` the log probability (density on the
        valued columns) of the evidence in each, including the ranges / level sets ``cons``
        (``{column: (a, b)}`` closed, encoded units, or a level mask); ``None`` past
        ``max_regions``."""
        reg = self._regions(x)
        if reg is None:
            return None
        lw, lo, hi, mask, shares = reg
        g = self._geometry()
        r0 = self.trees_.roots[0]
        w = np.r_[math.log1p(-self.smoothing_) + lw,
                  self._uniform_log_weight(x) if self._inside(x) else -np.inf]
        lo, hi = np.vstack([lo, g.lo[r0]]), np.vstack([hi, g.hi[r0]])
        mask = np.vstack([mask, g.mask[r0]])
        shares = [np.vstack([a, b]) for a, b in zip(shares, self._box_shares())]
        for j, c in cons.items():
            with np.errstate(divide="ignore"):
                w = w + np.log(self._evidence_share(j, c, lo, hi, mask, shares))
        return w, lo, hi, mask, shares

    def _shared_regions(self, walks: dict, sig: int, x: np.ndarray, cons: dict):
        """:meth:`_evidence_regions` of ``x``, reused for evidence the trees cannot tell apart
        (the same :meth:`_row_keys` class ``sig`` and the same ranges / level sets); ``walks``
        keeps the last ``SHARED_WALKS`` of them."""
        key = (int(sig), _constraints_key(cons))
        if key not in walks:
            if len(walks) >= SHARED_WALKS:
                walks.pop(next(iter(walks)))
            walks[key] = self._evidence_regions(x, cons)
        return walks[key]

    def _effective_range(self, j: int, c) -> tuple[float, float]:
        """A closed range on numeric column ``j`` in encoded units; on an integer column the
        unit intervals of the integers it holds (each integer owns ``(v - 0.5, v + 0.5]``)."""
        a, b = float(c[0]), float(c[1])
        if self.schema_.columns[j].kind == "integer":
            return math.ceil(a) - 0.5, math.floor(b) + 0.5
        return a, b

    def _evidence_share(self, j: int, c, lo, hi, mask, shares) -> np.ndarray:
        """Probability of column ``j``'s range or level set within each region."""
        kind, nlev, nom_off = self._layout
        if kind[j] == 2:
            o = nom_off[j]
            m = mask[:, o: o + nlev[j]].astype(bool)
            return (m & c[None, :]).sum(1) / np.maximum(m.sum(1), 1)
        if kind[j] == 1:
            return self._level_pmf(j, lo, hi, shares) @ c.astype(float)
        a, b = self._effective_range(j, c)
        l, h = lo[:, j], hi[:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            cont = np.clip(np.minimum(h, b) - np.maximum(l, a), 0, None) / (h - l)
        atoms = self._atoms()
        if atoms and j in atoms.columns:
            ci = int(np.flatnonzero(atoms.columns == j)[0])
            s, av = shares[ci], atoms.atoms[ci]
            hit = ((av[None, :] > l[:, None]) & (av[None, :] <= h[:, None])
                   & (av[None, :] >= a) & (av[None, :] <= b))
            return (1.0 - s.sum(1)) * cont + (s * hit).sum(1)
        return cont

    def _draw_evidence(self, x, cons: dict, reg, k: int, rng) -> np.ndarray:
        """One draw in region ``k`` of :meth:`_evidence_regions`: the values of ``x``, each
        range / level set drawn inside it, the free columns as :meth:`_draw_in`."""
        from forestgen.sampling.support import snap_to_grid

        _, lo, hi, mask, shares = reg
        kind, nlev, nom_off = self._layout
        m = mask[k].copy()
        for j, c in cons.items():
            if kind[j] == 2:
                m[nom_off[j]: nom_off[j] + nlev[j]] &= c
        free = np.isnan(x)
        for j in cons:
            free[j] = False
        out = self._draw_in((lo[k], hi[k], m, [s[k] for s in shares]), free, rng)
        out = np.where(np.isnan(x), out, x)
        atoms = self._atoms()
        for j, c in cons.items():
            if kind[j] == 2:
                continue
            if kind[j] == 1:
                p = self._level_pmf(j, lo[k: k + 1], hi[k: k + 1],
                                    [s[k: k + 1] for s in shares])[0] * c
                out[j] = min(int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(),
                                                 "right")), len(p) - 1)
                continue
            a, b = self._effective_range(j, c)
            l, h = max(lo[k, j], a), min(hi[k, j], b)
            cont = max(h - l, 0.0) / (hi[k, j] - lo[k, j])
            vals, ws = [], []
            if atoms and j in atoms.columns:
                ci = int(np.flatnonzero(atoms.columns == j)[0])
                s = shares[ci][k]
                for v, sv in zip(atoms.atoms[ci], s):
                    if lo[k, j] < v <= hi[k, j] and a <= v <= b:
                        vals.append(v)
                        ws.append(sv)
                cont *= 1.0 - s.sum()
            ws.append(cont)
            pick = min(int(np.searchsorted(np.cumsum(ws) / sum(ws), rng.random(), "right")),
                       len(ws) - 1)
            if pick < len(vals):
                out[j] = vals[pick]
                continue
            v = l + (h - l) * rng.random()
            spec = self.schema_.columns[j]
            if spec.has_grid:  # decoding keeps the value inside the range and the region
                lo_k, hi_k = lo[k, j], hi[k, j]
                v = float(snap_to_grid(np.array([v]), spec, np.array([c[0]]),
                                       np.array([c[1]]),
                                       lambda u, a=lo_k, b=hi_k: (u > a) & (u <= b))[0])
            out[j] = v
        return out

    def _level_pmf(self, j: int, lo, hi, shares) -> np.ndarray:
        """``[m, k]``: the pmf of ordered level column ``j`` in regions ``(lo, hi]``: uniform
        over their codes, or with its spike levels' shares
        (:meth:`~forestgen.families.intersection.region_atoms.RegionAtoms.level_probs`)."""
        atoms = self._atoms()
        if atoms and j in atoms.columns:
            ci = int(np.flatnonzero(atoms.columns == j)[0])
            return atoms.level_probs(ci, shares[ci], lo[:, j], hi[:, j])
        codes = np.arange(self._layout[1][j])
        inside = (codes[None, :] > lo[:, j, None]) & (codes[None, :] <= hi[:, j, None])
        return inside / np.maximum(inside.sum(1), 1)[:, None]

    # ------------------------------------------------------------------ region queries
    def _choose(self, x: np.ndarray, reg, method: str, rng) -> tuple | None:
        """One region for ``x``'s missing entries: where the conditional density peaks
        (``"max_density"``, ties at random) or drawn from the conditional (``"sample"``,
        the smoothing component being the whole box); ``None`` if ``x`` has probability 0.
        Returns ``(lo, hi, mask, shares)`` (atom shares per atom column, ``[A]`` each)."""
        from forestgen.families.intersection.regions import region_log_measures

        g = self._geometry()
        lw, lo, hi, mask, shares = reg
        r0 = self.trees_.roots[0]
        box = (g.lo[r0], g.hi[r0], g.mask[r0], [s[0] for s in self._box_shares()])
        if method == "max_density":
            if not len(lw):
                return box if np.isfinite(self._uniform_log_weight(x)) and self._inside(x) \
                    else None
            miss = np.flatnonzero(np.isnan(x))
            score = lw - region_log_measures(g, lo, hi, mask, miss)
            fixed = self._densest_pieces(x, shares, lo, hi)
            if fixed is not None:
                score = score + fixed[0]
            best = np.flatnonzero(score == score.max())
            k = best[rng.integers(len(best))]
            return lo[k], hi[k], mask[k], ([s[k] for s in fixed[1]] if fixed is not None
                                           else [s[k] for s in shares])
        w = np.r_[math.log1p(-self.smoothing_) + lw,
                  self._uniform_log_weight(x) if self._inside(x) else -np.inf]
        if not np.isfinite(w).any():
            return None
        p = np.exp(w - w.max())
        k = int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(), side="right"))
        k = min(k, len(p) - 1)
        return box if k == len(lw) else (lo[k], hi[k], mask[k], [s[k] for s in shares])

    def _densest_pieces(self, x: np.ndarray, shares, lo, hi):
        """For maximum-density imputation of missing atom columns: in each region, the
        densest piece of each such column, an atom (its share, counting measure, as
        :meth:`log_prob`) or the continuous part (``(1 - Σ s) / |C_j|``). Returns the log
        gain over the continuous part's uniform density already in the score, and the
        shares forcing the draw onto that piece (one-hot on an atom, zero for the continuous
        part); ``None`` without missing atom columns."""
        atoms = self._atoms()
        if not atoms or not any(np.isnan(x[j]) for j in atoms.columns):
            return None
        gain = np.zeros(len(lo))
        forced = []
        with np.errstate(divide="ignore"):
            for c, (j, s) in enumerate(zip(atoms.columns, shares)):
                if not np.isnan(x[j]):
                    forced.append(s)
                    continue
                width = np.log(hi[:, j] - lo[:, j])
                if atoms.levels[c]:  # the most probable level; one-hot pmf onto it
                    p = atoms.level_probs(c, s, lo[:, j], hi[:, j])
                    pick = np.argmax(p, 1)
                    gain += np.log(p[np.arange(len(lo)), pick]) + width
                    spikes = atoms.atoms[c].astype(np.int64)
                    f = (pick[:, None] == spikes[None, :]).astype(float)
                    forced.append(f)  # off the spikes: shares 0, its other levels tie
                    continue
                opts = np.column_stack([np.log(s) + width[:, None],
                                        np.log(np.maximum(1 - s.sum(1), 0))])
                pick = np.argmax(opts, 1)  # relative to the score's -log |C_j|
                gain += opts[np.arange(len(lo)), pick]
                forced.append((pick[:, None] == np.arange(s.shape[1])[None, :]).astype(float))
        return gain, forced

    def _draw_in(self, pick: tuple, free: np.ndarray, rng) -> np.ndarray:
        """One draw in the region ``pick`` of :meth:`_choose`: uniform, then each free atom
        column on its atoms with the region's shares."""
        from forestgen.families.intersection.star import draw_uniform

        lo, hi, mask, shares = pick
        kind, nlev, nom_off = self._layout
        x = draw_uniform(lo, hi, mask, kind, nom_off, nlev, rng)[None, :]
        if shares:
            self._atoms().draw(x, free[None, :], [s[None, :] for s in shares], lo[None, :],
                               hi[None, :], rng)
        return x[0]

    def _level_probs(self, x: np.ndarray, j: int, reg) -> np.ndarray:
        """P(level of column ``j`` | observed entries of ``x``) from the regions."""
        lw, lo, hi, mask, shares = reg
        kind, nlev, nom_off = self._layout
        k = int(nlev[j])
        if kind[j] == 2:
            allowed = mask[:, nom_off[j]: nom_off[j] + k].astype(float)
            pmf = allowed / np.maximum(allowed.sum(1), 1)[:, None]
        else:
            pmf = self._level_pmf(j, lo, hi, shares)
        w = np.exp(math.log1p(-self.smoothing_) + lw - (lw.max() if len(lw) else 0.0))
        p = w @ pmf if len(lw) else np.zeros(k)
        u = self._uniform_log_weight(x)
        if np.isfinite(u) and self._inside(x):
            g = self._geometry()
            r0 = self.trees_.roots[0]
            box = (self._level_pmf(j, g.lo[r0][None, :], g.hi[r0][None, :], self._box_shares())[0]
                   if kind[j] == 1 else g.mask[r0][nom_off[j]: nom_off[j] + k]
                   / g.mask[r0][nom_off[j]: nom_off[j] + k].sum())
            p = p + np.exp(u - (lw.max() if len(lw) else 0.0)) * box
        return p / p.sum() if p.sum() > 0 else np.full(k, np.nan)

    def _mean(self, x: np.ndarray, j: int, reg) -> float:
        """Conditional mean of ordered column ``j`` (encoded units) from the regions."""
        lw, lo, hi, _, shares = reg
        g = self._geometry()
        r0 = self.trees_.roots[0]
        integer = self._layout[0][j] == 1
        atoms = self._atoms()
        spiky = bool(atoms) and j in atoms.columns

        def centre(a, b):
            return 0.5 * (np.floor(a) + 1 + np.floor(b)) if integer else 0.5 * (a + b)

        w = math.log1p(-self.smoothing_) + lw
        c = centre(lo[:, j], hi[:, j])
        if spiky and len(c):  # the region's point masses move its mean
            c = atoms.mean_shift(j, shares, c, lo[:, j], hi[:, j])
        u = self._uniform_log_weight(x)
        if np.isfinite(u) and self._inside(x):
            cb = float(centre(g.lo[r0, j], g.hi[r0, j]))
            cb = (float(atoms.mean_shift(j, self._box_shares(), np.array([cb]),
                                         g.lo[r0, j: j + 1], g.hi[r0, j: j + 1])[0])
                  if spiky else cb)
            w, c = np.r_[w, u], np.r_[c, cb]
        if not len(w):
            return np.nan
        w = np.exp(w - w.max())
        return float(np.dot(w, c) / w.sum())

    def impute_encoded(self, Z: np.ndarray, miss: np.ndarray, method: str,
                       rng: np.random.Generator) -> np.ndarray:
        """Fill ``Z[miss]`` (encoded rows) from EOGT's conditional: ``"max_density"``
        (uniform in the compatible region of highest density, paper §7.2 with approximation
        (8)), ``"sample"`` (exact conditional draw) or ``"expectation"`` (mean / mode).
        Rows of zero probability stay NaN (a warning names them)."""
        self._geometry()
        kind, nlev, nom_off = self._layout
        out = Z.copy()
        big, empty = [], []
        for i in np.flatnonzero(miss.any(1)):
            x = np.where(miss[i], np.nan, Z[i])
            reg = self._regions(x)
            if reg is None:
                big.append(int(i))
                continue
            cols = np.flatnonzero(miss[i])
            if method == "expectation":
                if not len(reg[0]) and not (self.smoothing_ > 0 and self._inside(x)):
                    empty.append(int(i))
                    continue
                for j in cols:
                    if kind[j] == 2:
                        out[i, j] = float(np.argmax(self._level_probs(x, j, reg)))
                    else:
                        v = self._mean(x, j, reg)
                        out[i, j] = round(v) if kind[j] == 1 else v
                continue
            pick = self._choose(x, reg, method, rng)
            if pick is None:
                empty.append(int(i))
                continue
            draw = self._draw_in(pick, miss[i], rng)
            out[i, cols] = draw[cols]
        self._too_many(big, "impute")
        if empty:
            warnings.warn(f"EOGT impute: {len(empty)} row(s) (first: {empty[0]}) have "
                          f"observed entries of probability zero; left missing",
                          RuntimeWarning, stacklevel=2)
        return out

    def impute(self, X, method="max_density", n_imputations=1, random_state=None):
        """Fill missing entries from EOGT's conditional (see :meth:`impute_encoded`)."""
        from forestgen.inference.api import impute

        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state, filler=self.impute_encoded)

    def predict_proba(self, X, target=None):
        """P(level of a discrete ``target`` | each row's other observed entries)."""
        self._check_fitted()
        j, Z = self._target_rows(X, target, "predict_proba")
        spec = self.schema_.columns[j]
        if not spec.is_discrete:
            raise ValueError(f"EOGT.predict_proba: column {spec.name!r} is numeric; use "
                             f"predict")
        P = np.full((len(Z), spec.n_levels), np.nan)
        big = []
        for i, x in enumerate(Z):
            reg = self._regions(x)
            if reg is None:
                big.append(i)
                continue
            P[i] = self._level_probs(x, j, reg)
        self._too_many(big, "predict_proba")
        empty = np.flatnonzero(np.isnan(P).all(1) & ~np.isin(np.arange(len(Z)), big))
        if len(empty):
            warnings.warn(f"EOGT predict_proba: {len(empty)} row(s) (first: {empty[0]}) have "
                          f"observed entries of probability zero; they get NaN",
                          RuntimeWarning, stacklevel=2)
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(P, index=index, columns=pd.Index(list(spec.categories), dtype=object))

    def predict(self, X, target=None):
        """Most probable level of a discrete ``target``; conditional mean of a numeric one."""
        self._check_fitted()
        j, Z = self._target_rows(X, target, "predict")
        spec = self.schema_.columns[j]
        index = X.index if isinstance(X, pd.DataFrame) else None
        if spec.is_discrete:
            P = self.predict_proba(X, target).to_numpy()
            code = np.where(np.isnan(P).any(1), np.nan, np.argmax(np.nan_to_num(P), 1))
            Zc = np.full((len(Z), self.schema_.d), np.nan)
            Zc[:, j] = code
            return self.encoder_.inverse_transform(Zc).iloc[:, j].set_axis(index) \
                if index is not None else self.encoder_.inverse_transform(Zc).iloc[:, j]
        vals = np.full(len(Z), np.nan)
        for i, x in enumerate(Z):
            reg = self._regions(x)
            if reg is not None:
                vals[i] = self._mean(x, j, reg)
        Zc = np.full((len(Z), self.schema_.d), np.nan)
        Zc[:, j] = vals
        return pd.Series(self.encoder_.inverse_transform(Zc).iloc[:, j].to_numpy(),
                         index=index, name=spec.name)

    def _target_rows(self, X, target, query: str):
        target = self._require_target(target, query)
        names = self.schema_.names
        if target not in names:
            raise ValueError(f"EOGT.{query}: unknown column {target!r}; columns: {names}")
        j = names.index(target)
        Z = self._encode(X, missing_columns="nan")
        Z[:, j] = np.nan
        return j, Z

    def _extra_arrays(self):
        out = super()._extra_arrays()
        if self._atoms() is not None:
            out.update(self.region_atoms_.to_arrays("region_atoms."))
        return out

    def _restore_extra(self, arrays, meta):
        super()._restore_extra(arrays, meta)
        self._geo = None
        if "region_atoms.columns" in arrays:
            self.region_atoms_ = RegionAtoms.from_arrays(arrays, "region_atoms.")
