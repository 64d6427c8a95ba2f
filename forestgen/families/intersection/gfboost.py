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
``R(C)`` and, with ``cell_shape="uniform"``, uniform leaves on the cell (``cell_uniform`` /
``uniform_levels``; the default shapes them by the marginals, see the departure below), so
``forest_``, ``leaf_log_weight_`` and ``leaf_models_`` describe the model *exactly* and every
shared query is exact: ``log_prob`` (NaN entries marginalised), ``sample`` (cell ∝ its weight,
then its leaf models: with uniform cells the fast form of the paper's star-node sampler, spec
§3.2), conditional sampling, ``predict_proba``,
``to_torch``, ``save``/``load``. The individual trees are kept in ``trees_``. :meth:`GFBoost.impute`
follows the paper's walk over the trees, which backs off to a coarser region where the data run
out (:mod:`~forestgen.families.intersection.backoff`; ``walk="exact"``: the exact conditional); for
it the model keeps each training row's cell fragments and missing pattern (spec §1.6: a GF keeps
its data).

Measure convention of ``log_prob``: Lebesgue on continuous columns, counting on discrete ones
(categorical, bool, ordinal integers); wide integer columns are numeric with each integer owning
a unit interval, so their density equals the pmf under the counting measure.

Support (spec §4.1, §6.6). The paper's ``q_G`` is zero in every cell without training rows; with
many trees nearly every held-out row falls in such a cell. ``smoothing = ε`` gives every leaf
``L`` of the compiled tree the weight ``(1 - ε) R(L) + ε T(L)``, uniform on the leaf: the
compiled tree also holds the empty regions between the cells, so the smoothed model is still one
partition with one mass per leaf, and density, marginals, sampling, conditionals, imputation and
``to_torch`` all answer for it exactly. ``smoothing=0`` is the paper's model.

*Departure from the paper (issue 37): a back-off toward the column marginals.* With the paper's
cells (``cell_shape="uniform"``) and the spec's §4.1 smoothing (``smooth_toward="uniform"``,
``T(L) = U(L)``, the leaf's share of the box's measure: the mixture ``(1 - ε) q_G + ε /
μ(X)``), GF.Boost at its defaults scored held-out rows of tips, quine and wine below the
product of the column marginals (``benchmarks/results/scaled_defaults_s43.md``): a held-out row
in an empty cell got only ``ε / μ(X)``, and a small forest's wide cells spread each column
flat. By default each column has a marginal
(:mod:`~forestgen.families.intersection.marginals`: a kernel-smoothed histogram of a numeric
column, a discrete column's pmf, on the box; on a numeric column with a grid, part of the mass
of each value seen twice or more stays on its grid cell, :data:`SPIKES`) and

* ``cell_shape="marginal"``: each leaf spreads its mass over its box by the product of the
  marginals restricted to the box (:class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`;
  the pmf over the levels the box allows), not uniformly;
* ``smooth_toward="marginals"``: ``T(L) = M(L) = prod_j P_j(L_j)``, the leaf's mass under the
  product of the marginals, so that with those leaves the smoothing component is exactly the
  product of the marginals (``ε = 1`` would be that product alone);
* ``smoothing="held_out"``: ``ε`` from :data:`SMOOTHINGS` chosen with the sizes, on the same
  held-out rows (the partition does not depend on ``ε``: each size is fitted once).

The leaves tile the box, ``M`` is a product measure and every leaf model is normalised on its
box, so the density integrates to one; sampling picks a leaf by its weight and draws each column
from its leaf model, the law ``log_prob`` scores, and every shared query stays exact.

Rows outside the training box have density zero; :meth:`log_prob` floors them at
``density_floor`` times the uniform density on the box, as
:class:`~forestgen.families.mixture.rfde.RFDE` and DEF do.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from forestgen import registry
from forestgen.base import GenerativeForest
from forestgen.data.encoder import TableEncoder
from forestgen.data.frames import take_rows
from forestgen.families import INTERSECTION
from forestgen.families.boxes import (
    BoxFloor,
    column_layout,
    fit_cell_leaves,
    root_box,
    root_mask,
)
from forestgen.families.intersection.cells import CellBoxes, CellTable
from forestgen.families.intersection.ensembler import volume_share
from forestgen.families.intersection.marginals import box_mass, fit_marginals, marginal_leaves
from forestgen.families.intersection.splitter import CANDIDATES, LOSSES, BayesRiskSplitter
from forestgen.inference.api import density_columns
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.modelfile import check_array, check_box, check_count, check_forest
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import Splitter
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


#: ``(n_trees, n_iter)`` settings compared on held-out rows when both are ``"auto"``
SIZES = ((5, 15), (10, 40), (25, 100), (50, 200))
#: what the smoothing component is (``smooth_toward``) and how each cell spreads its mass
#: over its box (``cell_shape``)
TOWARD = ("marginals", "uniform")
CELLS = ("marginal", "uniform")
#: smoothing weights compared on held-out rows when ``smoothing="held_out"`` (the first is
#: the former fixed default)
SMOOTHINGS = (1e-3, 0.01, 0.03, 0.1, 0.2, 0.4, 0.6, 0.8)
#: split x row x column evaluations an ``"auto"`` size may cost (200 splits on 5,000 x 20
#: rows took 55-74 CPU seconds on the 2-core machine; this allows 130 there)
SPLIT_BUDGET = 1.3e7
#: GF.Boost's marginals keep repeated grid values' mass on their grid cells
#: (:func:`~forestgen.families.intersection.marginals.grid_spikes`), as EOGT's
SPIKES = True


@register("learner", "gfboost")
class GFBoost(BoxFloor, GenerativeForest):
    """Generative forest grown by GF.Boost.

    Parameters
    ----------
    n_trees : ``T`` (the paper's lifelike runs use 500 and 200).
    n_iter : ``J``, total number of splits over all trees (paper 2000 and 500). The first ``T``
        splits turn every root into a stump (heaviest leaf first). ``"auto"`` (the default for
        both): the size of :data:`SIZES` (from ``T=5, J=15`` to ``T=50, J=200``, at most one
        split per two training rows and at most ``SPLIT_BUDGET / (rows x columns)`` splits)
        whose fit on 80% of the training rows (of 1,000 of them on a larger table) gives the
        other 20% the highest log-likelihood (:func:`forestgen.tuning.held_out_choice`; ``sizes_``
        records the scores), then fitted on all rows. The former fixed 50 trees and 200 splits
        cut small tables into cells of single rows (``tips``, 183 training rows: held-out
        log-likelihood -17.9 against -9.9 for the column marginals, ``predict_proba`` of
        ``day`` 0.15 accurate on held-out rows and 0.99 on training rows; the 5 trees and 15
        splits chosen then, with the uniform smoothing of weight ``1e-3``: -11.9 and 0.57,
        still below the marginals' log-likelihood, ``benchmarks/results/scaled_defaults.md``;
        with ``smoothing="held_out"`` toward the marginals the sizes and ``ε`` are chosen
        together).
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
    smoothing : ``ε`` in ``[0, 1)``, weight of the smoothing component (``smooth_toward``) in
        every leaf (``0``: the paper's exact ``q_G``, zero in empty cells; the former default
        was ``1e-3``), ``"held_out"`` (default): the weight of :data:`SMOOTHINGS` that gives
        held-out rows the highest log-likelihood, chosen with ``n_trees`` / ``n_iter``
        (``sizes_["smoothing_ll"]`` records the scores; with given sizes one extra fit on 80%
        of the rows), or ``"auto"``: the Good-Turing estimate of the chance that a new row
        falls in an empty cell (training mass in cells holding at most one row). The value
        used is ``smoothing_``.
    smooth_toward : ``"marginals"`` (default): each leaf's smoothing mass is its mass under
        the product of the column marginals; ``"uniform"``: its share of the box's measure
        (the spec's §4.1 smoothing). See the module notes.
    cell_shape : ``"marginal"`` (default): each leaf's mass spread over its box by the product
        of the column marginals restricted to it; ``"uniform"``: uniformly (the paper's
        ``R(C) / μ(C)``). ``cell_shape="uniform", smooth_toward="uniform", smoothing=1e-3`` is
        this learner's model before issue 37.
    density_floor : densities below ``density_floor`` times the uniform density on the box's
        sides of the columns the density is over
        (:func:`~forestgen.inference.density_columns`; rows outside the training box) are
        reported as that by :meth:`log_prob` (default ``1e-5``, as RFDE/DEF; ``None``: the
        honest ``-inf``; ``log_prob_encoded`` never floors).
    progress : print a progress line on stderr.
    random_state : seeds the random side of missing-value fragments and the held-out split of
        the ``"auto"`` sizes and ``"held_out"`` smoothing; with given sizes and a numeric
        ``smoothing`` and without missing values training is deterministic (ties go to the
        lowest tree, node and column).
    splitter : the split rule, a :class:`~forestgen.families.intersection.splitter.
        BayesRiskSplitter` (registry name, class or instance; a subclass may change the
        criterion). ``None``: the Bayes-risk rule with ``loss``, ``prior``, ``candidates``,
        ``max_candidates`` and ``min_rows`` above; a name or class is built with those; an
        instance keeps its own.
    ensembler : compiles the cell table (an ``Ensembler`` serving ``"intersection"``;
        ``None``: :class:`~forestgen.families.intersection.ensembler.IntersectionEnsembler`).
    sampler : draws from the compiled cells (a leaf-mixture ``Sampler``; ``None``:
        ancestral).
    numeric_leaf, discrete_leaf : ruled out (``ruled_out``): the cells' shape is
        ``cell_shape``.

    Notes
    -----
    Training is single-threaded, so results do not depend on the thread count.
    """

    model_family = INTERSECTION
    splitter_grows = "cell table"
    ruled_out = {slot: "a generative forest's density is R(C) / mu(C), uniform on each cell of "
                       "the joint partition of its trees (Nock & Guillame-Bert 2023, eq. (3)); "
                       "GF.Boost chooses the partition for that density, so a fitted leaf "
                       "model in the cells would be another model than the one boosted"
                 for slot in ("numeric_leaf", "discrete_leaf")}

    method_name = "GF"
    _approx = False
    cuts_at_values = True  # splits at observed values

    #: parameters whose default ``"auto"`` is chosen on held-out rows at fit
    AUTO_PARAMS = ("n_trees", "n_iter")

    def __init__(self, *, n_trees: int | str = "auto", n_iter: int | str = "auto",
                 loss: str = "matusita",
                 prior: float = 0.5, candidates: str = "observed", max_candidates: int = 255,
                 min_rows: float = 1.0, missing: str = "fractional",
                 smoothing: float | str = "held_out", smooth_toward: str = "marginals",
                 cell_shape: str = "marginal",
                 density_floor: float | None = 1e-5, progress: bool = False,
                 random_state: Any = None, splitter: Any = None, numeric_leaf: Any = None,
                 discrete_leaf: Any = None, ensembler: Any = None, sampler: Any = None):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    def validate_params(self) -> None:
        super().validate_params()
        if self.n_iter != "auto":
            check_int("n_iter", self.n_iter, 0)
        check_choice("loss", self.loss, LOSSES)
        check_real("prior", self.prior, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("candidates", self.candidates, CANDIDATES)
        check_int("max_candidates", self.max_candidates, 2)
        check_real("min_rows", self.min_rows, 0.0, low_open=True)
        check_choice("missing", self.missing, ("fractional", "random_hard"))
        if self.smoothing not in ("auto", "held_out"):
            check_real("smoothing", self.smoothing, 0.0, 1.0, high_open=True)
        check_choice("smooth_toward", self.smooth_toward, TOWARD)
        check_choice("cell_shape", self.cell_shape, CELLS)

    def _check_slots(self) -> None:
        super()._check_slots()
        spec = self.splitter
        if isinstance(spec, Splitter) and getattr(spec, "approx", self._approx) != self._approx:
            self._approx_mismatch(spec)

    def _approx_mismatch(self, splitter) -> None:
        who, masses = type(self).__name__, ("approximate" if self._approx else "exact")
        raise ValueError(f"{who}: splitter {type(splitter).__name__} has approx="
                         f"{splitter.approx}, but {who} scores splits with {masses} cell "
                         f"masses; pass approx={self._approx} or the class / registry name "
                         f"({who} builds it with approx={self._approx})")

    def _splitter(self) -> BayesRiskSplitter:
        """The split rule: the ``splitter`` parameter (a name or class built with this
        learner's ``loss``, ``prior``, ... ; an instance copied), by default the Bayes risk."""
        spec = BayesRiskSplitter if self.splitter is None else self.splitter
        out = registry.build("splitter", spec, Splitter, loss=self.loss, prior=self.prior,
                             candidates=self.candidates, max_candidates=self.max_candidates,
                             min_rows=self.min_rows, approx=self._approx)
        if getattr(out, "approx", self._approx) != self._approx:
            self._approx_mismatch(out)
        return out

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None):
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        n_trees, n_iter = self._sizes(X, kinds)
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
        table = CellTable(Z, kind, nlev, nom_off, n_nom, integer, lo, hi, n_trees,
                          n_iter, approx=self._approx,
                          min_fragment=1.0 / 8 if self.missing == "fractional" else np.inf,
                          seed=seed, root_mask=root_mask(schema))
        self.risk_path_ = self._boost(table, splitter, n_iter)
        self.n_splits_ = len(self.risk_path_) - 1
        self._finish(table, schema, kind, nlev, nom_off)
        return self

    #: what ``smoothing="held_out"`` maximises on the held-out rows (``sizes_["criterion"]``)
    held_out_criterion = "log-likelihood"

    def _sizes(self, X, kinds) -> tuple[int, int]:
        """``(n_trees, n_iter)``: the given ones, or for ``"auto"`` the setting of
        :data:`SIZES` chosen on held-out rows (recorded in ``sizes_``, with the smoothing
        weight of :data:`SMOOTHINGS` chosen with it when ``smoothing="held_out"``)."""
        T, J = self.n_trees, self.n_iter
        held = self.smoothing == "held_out"
        if T != "auto" and J != "auto":
            grid = [(int(T), int(J))]
            if not held:
                self.sizes_ = {"n_trees": int(T), "n_iter": int(J)}
                return int(T), int(J)
        else:
            grid = [(T if T != "auto" else t,
                     J if J != "auto" else max(j, T if T != "auto" else t)) for t, j in SIZES]
            # at most one split per two training rows, and no more than SPLIT_BUDGET split x
            # row x column evaluations (a 5,000 x 20 table fits in under a minute of CPU)
            d = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else 1
            limit = max(SIZES[0][1], min(len(X) // 2, int(SPLIT_BUDGET / max(len(X) * d, 1))))
            grid = list(dict.fromkeys(g for g in grid if g[1] <= limit)) or [grid[0]]
        settings = [{"n_trees": int(t), "n_iter": int(j)} for t, j in grid]
        seed = seed_sequence(self.random_state).spawn(2)[1]
        if not held:
            from forestgen.tuning import held_out_choice

            best, scores = held_out_choice(self, X, kinds, settings, seed)
            self.sizes_ = {**best, "held_out_ll": dict(zip(map(str, grid), scores))}
            return best["n_trees"], best["n_iter"]
        table = self._held_out_table(X, kinds, settings, seed)  # [settings, SMOOTHINGS]
        k, a = np.unravel_index(int(np.argmax(table)), table.shape)  # ties: smallest first
        self.sizes_ = {**settings[k], "smoothing": SMOOTHINGS[a],
                       "criterion": self.held_out_criterion,
                       "held_out_ll": dict(zip(map(str, grid), table.max(1).tolist())),
                       "smoothing_ll": dict(zip(map(str, SMOOTHINGS), table[k].tolist()))}
        return settings[k]["n_trees"], settings[k]["n_iter"]

    def _held_out_table(self, X, kinds, settings: list[dict], seed) -> np.ndarray:
        """Mean held-out log-likelihood ``[settings, SMOOTHINGS]``: each size fitted once on
        the fitting rows of :func:`forestgen.tuning.held_out_split`, then weighed with every
        smoothing weight (the partition does not depend on it) and scored on the others; a
        size whose fit fails scores ``-inf``; fewer than 10 rows: zeros (the first wins)."""
        import warnings

        from forestgen.tuning import held_out_split

        out = np.zeros((len(settings), len(SMOOTHINGS)))
        split = held_out_split(len(X), seed)
        if split is None:
            return out
        fit, val = split
        rows = take_rows(X, val)
        for k, s in enumerate(settings):
            # the same parameters (components shared: the fit builds its own from them)
            m = type(self)(**{**self.get_params(deep=False), **s, "smoothing": SMOOTHINGS[0]})
            m._score_rows = rows  # scored by _finish for every weight of SMOOTHINGS
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(take_rows(X, fit), kinds=kinds)
                out[k] = m._smoothing_scores
            except (ValueError, RuntimeError, FloatingPointError):
                out[k] = -np.inf
        return out

    def _boost(self, table: CellTable, splitter: BayesRiskSplitter,
               n_iter: int) -> list[float]:
        """Alg. 4: ``n_iter`` times split the heaviest splittable leaf over all trees."""
        heap = [(-table.nR[t], t, t) for t in range(table.n_trees)]
        heapq.heapify(heap)
        risk = splitter.risk(table.R, table.U)
        path = [risk]
        J = int(n_iter)
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
        if self.smoothing == "auto":  # Good-Turing: the mass of cells holding one row
            smoothing = min(0.99, float(table.R[table.R * table.m_total <= 1 + 1e-9].sum()))
        elif self.smoothing == "held_out":
            smoothing = self.sizes_["smoothing"]
        else:
            smoothing = float(self.smoothing)
        self.forest_, _, leaf_cell, (lo, hi, mask) = (
            self.component("ensembler").compile(table, n_levels, 0.0))
        R = np.where(leaf_cell >= 0, table.R[np.maximum(leaf_cell, 0)], 0.0)
        self.cell_mass_ = R / R.sum()
        self.trees_ = ForestArrays.from_trees(tree_dicts(table, kind, nom_off, nlev), n_levels)
        self.cell_lo_, self.cell_hi_, self.cell_mask_ = lo, hi, mask.astype(bool)
        self.n_train_ = int(table.m_total)
        self.smooth_toward_, self.cell_shape_ = self.smooth_toward, self.cell_shape
        self._keep_incomplete_rows(table, leaf_cell)
        marg = fit_marginals(table.Z, schema, kind, nlev, nom_off, self.box_lo_, self.box_hi_,
                             table.root_mask, spikes=SPIKES)
        self._marginals = marg  # for the atoms' shares of the smoothing component
        toward = (box_mass(marg, lo, hi, mask, kind, nlev, nom_off)
                  if self.smooth_toward == "marginals" else volume_share(table, lo, hi, mask))
        leaves = (marginal_leaves(marg, schema, lo, hi, mask, kind, nlev, nom_off)
                  if self.cell_shape == "marginal" else None)
        rows = getattr(self, "_score_rows", None)
        if rows is not None:  # the held-out choice of the smoothing weight (_held_out_table)
            scores = []
            for s in SMOOTHINGS:
                self._weigh(table, mask, toward, leaves, s)
                scores.append(float(np.mean(self.log_prob(rows))))
            self._smoothing_scores = scores
        self._weigh(table, mask, toward, leaves, smoothing)

    def _weigh(self, table: CellTable, mask: np.ndarray, toward: np.ndarray,
               leaves: list | None, smoothing: float) -> None:
        """Leaf weights ``(1 - ε) R(L) + ε T(L)`` (``T``: ``toward``, the smoothing
        component's mass of each leaf) and the leaf models for them (``leaves``: the
        marginal cells, else uniform ones)."""
        nom_off = column_layout(self.encoder_.schema)[2]
        self.smoothing_ = float(smoothing)
        with np.errstate(divide="ignore"):
            self.leaf_log_weight_ = np.log((1.0 - smoothing) * self.cell_mass_
                                           + smoothing * toward)
        self.leaf_models_ = list(leaves) if leaves is not None else fit_cell_leaves(
            self.encoder_.schema, self.cell_lo_, self.cell_hi_, mask, nom_off,
            self.cell_mass_ * table.m_total)
        self._point_masses(self.encoder_.schema, table.Z,
                           self._marginals if self.smooth_toward == "marginals" else None)

    def _point_masses(self, schema, Z: np.ndarray, marg: list | None = None) -> None:
        """Cells with point-mass components: a numeric column with atoms (values holding a
        large share of the rows, ``ColumnSpec.atoms``, e.g. zero inflation) gets in every
        cell the share of the cell's training weight at each atom
        (:class:`~forestgen.leaves.point_mass.PointMassLeaf` over the uniform leaf), so
        samples, densities (counting measure at the atoms) and imputations keep the spikes
        that a uniform cell would smear. The share is of the leaf's whole weight: fragments
        of rows missing the column (uniform over it, spec §2.7) count as its continuous
        part; the smoothing component has the column's overall atom shares (so a held-out
        row at an atom keeps a positive density in an empty region); toward the marginals
        (``marg``), each leaf's smoothing mass gives each atom inside the leaf's interval its
        share under the column's marginal restricted to that interval, so the component
        stays exactly the product of the marginals."""
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
            share = np.array([float(fw[seen & (xj == a)].sum() / fw[seen].sum())
                              for a in spec.atoms])
            at = np.broadcast_to(share, (L, len(share)))  # smoothing's share at each atom
            if marg is not None:
                lo, hi = self.cell_lo_[:, j], self.cell_hi_[:, j]
                at = marg[j].atoms_inside(lo, hi) * marg[j].atom_share / marg[j].interval_mass(
                    lo, hi)[:, None]
            rest = 1.0 - at.sum(1)
            # box_lo_ lies below every value: a stand-in for the continuous part
            x = np.r_[np.where(seen, xj, self.box_lo_[j]), np.full(L, self.box_lo_[j]),
                      np.repeat(spec.atoms, L)]
            w = np.r_[fw, rest * uniform, np.concatenate([at[:, a] * uniform
                                                          for a in range(len(share))])]
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

        if self.cell_shape_ == "marginal":  # each cell has the column's pmf, spikes included
            return
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
        :func:`~forestgen.families.boxes.column_layout`)."""
        self.check_fitted()
        return self.cell_lo_, self.cell_hi_, self.cell_mask_, self.cell_mass_

    @property
    def n_cells_(self) -> int:
        """Number of cells of the joint partition holding training mass."""
        self.check_fitted()
        return int((self.cell_mass_ > 0).sum())

    def cell_risk(self) -> float:
        """Bayes risk ``Σ_C J_π(R(C), U(C))`` of the fitted partition (spec §2.2)."""
        self.check_fitted()
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
        """Log density per row (see the module notes on the measure); with ``conditions``,
        ``log p(x_free | evidence)``. Densities below ``density_floor`` times the uniform
        density on the box's sides of the columns the density is over
        (:func:`~forestgen.inference.density_columns`; rows outside the training box, empty
        cells when ``smoothing`` is below the floor) are reported as that unless
        ``floor=None`` (honest ``-inf``) or another ``floor`` is given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    # ------------------------------------------------------------------ imputation
    def impute(self, X, method: str = "expectation", n_imputations: int = 1,
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
        measure on the observed columns (``"reference"``: to its mass), ``"expectation"`` (the
        default, as for every learner) the mean / most probable level under those region
        probabilities: a lower error than the paper's ``"max_density"`` (abalone, numeric
        RMSE 0.40 against 0.49, ``benchmarks/results/gfboost_impute_rerun.md``).

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
            BackoffTrees,
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
        trees = BackoffTrees(f.feature.astype(np.int64), f.threshold, f.left.astype(np.int64),
                             f.right.astype(np.int64), f.cat_off, f.cat_left,
                             f.roots.astype(np.int64))
        cells = CellBoxes(np.ascontiguousarray(self.cell_lo_), np.ascontiguousarray(self.cell_hi_),
                          cmask)
        box_mask = root_mask(self.encoder_.schema, cmask.shape[1])
        box = CellBoxes(self.box_lo_, self.box_hi_, box_mask)
        out = Z.copy()
        for i in np.flatnonzero(miss.any(1)):
            x = Z[i].copy()
            mass, own = base, same.get(row_key(x), ())
            if len(own):  # the imputed training row itself is left out
                sel = np.isin(frow, own)
                mass = base.copy()
                np.subtract.at(mass, fleaf[sel], fw[sel])
                mass[mass < 1e-9] = 0.0
            R, lo, hi, mask, pool, start, count = backoff_regions(x, trees, cells, mass, nom_off,
                                                                  nlev, box)
            if not len(R):  # no training mass at all: the whole box
                R, lo, hi = np.ones(1), self.box_lo_[None, :], self.box_hi_[None, :]
                mask = box_mask[None, :].copy()
                pool, start, count = np.zeros(0, np.int64), np.zeros(1, np.int64), \
                    np.zeros(1, np.int64)
            cols = np.flatnonzero(miss[i])
            lw = np.log(R)
            if score == "exact":
                lw -= log_measure(lo, hi, mask, np.flatnonzero(~np.isnan(x)), kind, nom_off,
                                  nlev, box.lo, box.hi)
            p = np.exp(lw - lw.max())
            dens = lw - log_measure(lo, hi, mask, cols, kind, nom_off, nlev, box.lo, box.hi)
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
            out.setdefault(row_key(r), []).append(int(k))
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
        return {"n_train": int(self.n_train_), "smoothing": getattr(self, "smoothing_", 0.0),
                "smooth_toward": getattr(self, "smooth_toward_", "uniform"),
                "cell_shape": getattr(self, "cell_shape_", "uniform")}

    def _restore_extra(self, arrays, meta):
        _check_extra(arrays, meta, self.encoder_.schema.d, self.forest_.n_leaves)
        self.box_lo_ = arrays["box_lo"]
        self.box_hi_ = arrays["box_hi"]
        self.risk_path_ = list(arrays["risk_path"])
        self.n_splits_ = len(self.risk_path_) - 1
        self.trees_ = ForestArrays.from_arrays(arrays, "trees.")
        check_forest(self.trees_, self.encoder_.schema.d, "extra.trees")
        w = self.trees_.node_value[:, 0] if self.trees_.node_value.ndim == 2 and \
            self.trees_.node_value.shape[1] else np.ones(0)
        if not np.all(np.isfinite(w) & (w >= 0)) or np.any(w[self.trees_.feature >= 0] <= 0):
            raise ValueError("extra.trees.node_value must hold finite weights >= 0, > 0 at "
                             "every split node (its children's arc probabilities divide by it)")
        self.n_train_ = int(meta["n_train"])
        self.smoothing_ = float(meta.get("smoothing", 0.0))
        self.smooth_toward_ = meta.get("smooth_toward", "uniform")  # files before stop 44
        self.cell_shape_ = meta.get("cell_shape", "uniform")
        for k in ("cell_lo", "cell_hi", "cell_mask", "cell_mass"):
            if k in arrays:
                setattr(self, k + "_", arrays[k])
        for k in _DATA_ARRAYS:
            if k in arrays:
                setattr(self, k + "_", arrays[k])
        if "cell_mass" not in arrays:  # files before smoothing: leaf weights are the masses
            self.cell_mass_ = np.exp(self.leaf_log_weight_)


def _check_extra(arrays: dict, meta: dict, d: int, L: int) -> None:
    """Raise ``ValueError`` unless the extra arrays and numbers of a GF.Boost / EOGT model
    file fit its ``d`` columns and ``L`` leaves (the trees are checked by ``check_forest``)."""
    check_box("extra.", arrays["box_lo"], arrays["box_hi"], d)
    check_array("extra.risk_path", arrays["risk_path"], "f", finite=True)
    n = check_count("extra n_train", meta["n_train"], 1)
    smoothing = meta.get("smoothing", 0.0)
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not (
            0.0 <= smoothing < 1.0):
        raise ValueError(f"extra smoothing must be a number in [0, 1), got {smoothing!r}")
    if meta.get("smooth_toward", "uniform") not in TOWARD:
        raise ValueError(f"extra smooth_toward must be one of {TOWARD}, got "
                         f"{meta['smooth_toward']!r}")
    if meta.get("cell_shape", "uniform") not in CELLS:
        raise ValueError(f"extra cell_shape must be one of {CELLS}, got {meta['cell_shape']!r}")
    if "cell_lo" in arrays or "cell_hi" in arrays:
        lo = check_array("extra.cell_lo", arrays.get("cell_lo"), "f", (L, d))
        hi = check_array("extra.cell_hi", arrays.get("cell_hi"), "f", (L, d))
        if np.any(hi < lo):
            raise ValueError("extra.cell_hi is below extra.cell_lo")
        check_array("extra.cell_mask", arrays.get("cell_mask"), "b", (L, None))
    if "cell_mass" in arrays:
        check_array("extra.cell_mass", arrays["cell_mass"], "f", (L,), finite=True, low=0.0)
    if "fragments" in arrays:
        frag = check_array("extra.fragments", arrays["fragments"], "iu", (None, 2), low=0)
        if len(frag) and (frag[:, 0].max() >= n or frag[:, 1].max() >= L):
            raise ValueError("extra.fragments names a row or a leaf out of range")
        check_array("extra.fragment_weight", arrays.get("fragment_weight"), "f",
                    (len(frag),), finite=True, low=0.0)
        check_array("extra.row_missing", arrays.get("row_missing"), "b", (n, d))
        ids = check_array("extra.incomplete_ids", arrays.get("incomplete_ids"), "iu",
                          low=0, high=n - 1)
        check_array("extra.incomplete_rows", arrays.get("incomplete_rows"), "f",
                    (len(ids), d), finite=True, nan=True)


def row_key(x: np.ndarray) -> bytes:
    """Hashable key of an encoded row (NaN entries compare equal)."""
    nan = np.isnan(x)
    return nan.tobytes() + np.where(nan, 0.0, x).tobytes()


_DATA_ARRAYS = ("fragments", "fragment_weight", "row_missing", "incomplete_rows",
                "incomplete_ids")


def _pick(w: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with probability proportional to ``w``."""
    c = np.cumsum(w)
    return min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), len(w) - 1)


def tree_dicts(table: CellTable, kind, nom_off, nlev) -> list[TreeRecord]:
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
