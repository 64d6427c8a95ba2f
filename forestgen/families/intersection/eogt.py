"""Ensemble of generative trees (EOGT; Nock & Guillame-Bert, "Generative Forests", 2023, §6).
Spec: ``shared/papers/generative_forests.md`` §1.6, §2.11, §3.4, §4.3.

Trained like :class:`~forestgen.families.intersection.gfboost.GFBoost` with approximate cell
masses, then stripped of the data; its queries are
:class:`~forestgen.families.intersection.region_queries.RegionQueries`. By default its regions
and its smoothing component are spread by the column marginals
(:mod:`~forestgen.families.intersection.region_shape`), a departure from the paper described in
:class:`EOGT`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen.families import INTERSECTION
from forestgen.families.boxes import (
    column_layout,
    fit_cell_leaves,
)
from forestgen.families.intersection.cells import CellTable
from forestgen.families.intersection.gfboost import SMOOTHINGS, GFBoost, tree_dicts
from forestgen.families.intersection.marginals import fit_marginals
from forestgen.families.intersection.region_atoms import RegionAtoms, region_leaves
from forestgen.families.intersection.region_queries import RegionQueries
from forestgen.families.intersection.region_shape import MarginalShape
from forestgen.registry import register
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.grow_midpoint import KIND_NOMINAL
from forestgen.validation import check_real

#: EOGT's marginals keep repeated grid values' mass on their grid cells
#: (:func:`~forestgen.families.intersection.marginals.grid_spikes`)
SPIKES = True
#: what ``smoothing="held_out"`` maximises on the held-out rows (:meth:`EOGT.held_out_scores`)
CRITERION = "log-likelihood + pseudo-log-likelihood"


@register("learner", "eogt")
class EOGT(RegionQueries, GFBoost):
    """Ensemble of generative trees (paper §6; spec §1.6, §2.11, §3.4, §4.3).

    Trained like :class:`GFBoost` but scoring splits with approximate cell masses re-estimated
    from the split leaf's rows and volumes (spec §2.11), then *stripped of the data*: only the
    trees and their arc probabilities ``π_{ν→v} = R(v)/R(ν)`` are kept (``trees_.node_value``).

    Its law is defined by the star-node sampler with approximate branching (eq. (8)) in the
    iterative tree order, each region reached spread by its shape (``cell_shape``), mixed like
    :class:`GFBoost`'s with ``smoothing`` times the smoothing component (``smooth_toward``; see
    the departure below). :meth:`sample` draws from it exactly; :meth:`log_prob` is its exact
    density, with missing entries marginalised by walking both branches of every node on a
    missing column (:func:`~forestgen.families.intersection.regions.approx_regions`; a row needing
    more than ``max_regions`` regions gets NaN with a warning, a row with nothing observed 0);
    :meth:`impute` (all three methods; past ``max_regions`` from :meth:`sample`'s conditional
    draws: ``"sample"`` exact, ``"expectation"`` and ``"max_density"`` estimated from 256
    draws with a warning),
    :meth:`predict_proba`, :meth:`predict` and conditions (conditional :meth:`sample` and
    :meth:`log_prob`, exact; values, closed ranges and level sets, each weighting a region by
    its share of the range or set) use the same compatible regions; conditional evidence
    past ``max_regions`` is drawn exactly by rejection: draws of the law kept when they meet
    the ranges and sets, proposed by the walk forced to the point values
    (:mod:`~forestgen.families.intersection.forced`; on a column with point masses also kept with
    the region's atom share); only evidence that too few proposals meet raises (a dict) or
    leaves its row blank with a warning (per-row evidence); a per-row evidence pattern that
    went past ``max_regions`` is sampled first for the next rows. ``expect`` raises
    ``NotImplementedError``; ``to_torch`` serves the numpy density, sampler and conditionals
    (no gradient).
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

    *Departure from the paper (issue 37): a back-off toward the column marginals.* The paper's
    law, uniform in each region (``cell_shape="uniform"``) and mixed with ``smoothing`` times
    the uniform density on the box (``smooth_toward="uniform"``), at the former fixed
    ``smoothing=1e-3``, scored held-out rows of tips, Boston, penguins, wine and a 5,000 x 20
    table below the product of the column marginals, with C2ST 0.89-0.999
    (``benchmarks/results/scaled_defaults_s43.md``). By default each column has GF.Boost's
    marginal (:mod:`~forestgen.families.intersection.marginals`), in which a numeric column with
    a grid keeps part of the mass of each value seen twice or more on its grid cell
    (:func:`~forestgen.families.intersection.marginals.grid_spikes`, :data:`SPIKES`; round
    tips, a wine's magnesium), and

    * ``cell_shape="marginal"``: each region ``C`` of the walk spreads its mass ``Q̂(C)`` by the
      product of the marginals restricted to it, density ``Q̂(C) prod_j p_j(x_j) / P_j(C_j)``
      (atoms and spike levels keep the region's shares, the rest follows the marginal); the
      walk and its branching (8) are the paper's;
    * ``smooth_toward="marginals"``: the smoothing component is the product of the marginals
      (the root box spread the same way; spike levels take the column's observed shares);
    * ``smoothing="held_out"``: ``ε`` from :data:`~.gfboost.SMOOTHINGS` chosen with the sizes
      on held-out rows, as GF.Boost, but on their log-likelihood *plus* their
      pseudo-log-likelihood ``Σ_j log p(x_j | x_-j)`` (:meth:`held_out_scores`): chosen on the
      log-likelihood alone, the sizes and a large ``ε`` pulled the conditionals that
      ``predict_proba``, ``predict`` and ``impute`` answer with toward the marginals.

    Every region and the box stay exactly normalised, so the law is, and every query above
    answers for it exactly (:mod:`~forestgen.families.intersection.region_shape`; the
    rejection sampler weighs each forced draw by its piece's density or probability of the
    evidence against a bound over all pieces). ``cell_shape="uniform", smooth_toward="uniform",
    smoothing=1e-3`` is the paper's model, bit for bit the learner before this change.
    With the regions spread by the marginals, ``impute(method="max_density")`` picks the
    compatible region where the conditional density *relative to the product of the missing
    columns' marginals* peaks (constant on each region and on each atom or spike level: the
    regions' base measure, as Lebesgue measure is of the paper's uniform regions) and draws
    from its shape.

    Outside the training box the law has no mass (:meth:`log_prob` floors such rows).
    ``predict_proba``, ``predict`` and ``impute`` answer a row from its entries inside the box:
    a numeric entry outside the training range is moved to its nearest end (as every
    learner's), and a level or ordered code without training rows (unseen at fit, or declared
    but absent) is left out of the row's evidence, with a ``RuntimeWarning`` naming the
    columns; no row gets NaN for it.

    ``benchmarks/results/eogt_backoff_s47.md`` measures the options and
    ``benchmarks/results/eogt_s48.md`` the held-out criterion: the defaults score held-out rows
    above the benchmark's column marginals on tips, quine, penguins, wine and Boston (Cars93:
    equal floors); penguins' ``predict_proba`` is back to 0.612; wine's is not (0.189: its
    trees hardly split on the class) nor quine's maximum-density imputation (RMSE 17.88: its
    trees isolate ``Days = 0``, the densest region).

    Slots: ``splitter`` as :class:`GFBoost` (a Bayes-risk splitter with approximate masses);
    ``numeric_leaf``, ``discrete_leaf``, ``ensembler`` and ``sampler`` are ruled out
    (``ruled_out``: its law is its star-node walk over its shaped regions).
    """

    model_family = INTERSECTION
    ruled_out = {
        **GFBoost.ruled_out,
        "ensembler": "an EOGT keeps only its trees' arc probabilities (paper §6): its law is "
                     "the star-node walk with approximate branching (eq. (8)), not a "
                     "combination of tree outputs, so there is nothing for an ensembler to "
                     "combine",
        "sampler": "an EOGT's law is defined by its star-node sampler (paper eq. (8)), and "
                   "log_prob, conditionals and imputation are computed for that walk; "
                   "another sampler would draw from another distribution than the one scored",
    }
    leaf_mixture_law = False  # forest_ holds the trees, not the law (class docstring)
    method_name = "EOGT"
    _approx = True
    #: per-row cap on the regions enumerated to marginalise missing entries
    max_regions = 100_000
    held_out_criterion = CRITERION

    def __init__(self, *, n_trees: int | str = "auto", n_iter: int | str = "auto",
                 loss: str = "matusita",
                 prior: float = 0.5, candidates: str = "observed", max_candidates: int = 255,
                 min_rows: float = 1.0, missing: str = "fractional",
                 smoothing: float | str = "held_out", smooth_toward: str = "marginals",
                 cell_shape: str = "marginal",
                 prior_strength: float = 1.0, density_floor: float | None = 1e-5,
                 progress: bool = False, random_state: Any = None, splitter: Any = None,
                 numeric_leaf: Any = None, discrete_leaf: Any = None, ensembler: Any = None,
                 sampler: Any = None):
        """Parameters: as :class:`GFBoost` (``smoothing="auto"`` aside: EOGT keeps no cell
        masses), plus ``prior_strength``; ``cell_shape`` and ``smooth_toward`` shape the
        walk's regions and the smoothing component (class docstring)."""

    @property
    def capabilities(self) -> frozenset:
        """``log_prob`` (with NaN marginals), ``sample``, conditional sampling and log density
        (values, ranges, level sets), ``impute``, ``predict`` and ``torch`` (``to_torch()``:
        the exact density on the numpy path, no gradient; draws from the CPU star-node
        sampler moved to the device; ``condition()`` through the numpy conditionals); not
        ``expect``."""
        return frozenset({"log_prob", "marginal", "sample", "conditional_sample",
                          "conditional_log_prob", "impute", "predict", "torch"})

    def _finish(self, table: CellTable, schema, kind, nlev, nom_off) -> None:
        n_levels = np.where(kind == KIND_NOMINAL, nlev, 0)
        smoothing = (self.sizes_["smoothing"] if self.smoothing == "held_out"
                     else float(self.smoothing))
        self.smoothing_ = smoothing
        self.cell_shape_, self.smooth_toward_ = self.cell_shape, self.smooth_toward
        self.shape_ = None
        if self.cell_shape == "marginal" or self.smooth_toward == "marginals":
            self.shape_ = MarginalShape(fit_marginals(
                table.Z, schema, kind, nlev, nom_off, self.box_lo_, self.box_hi_,
                table.root_mask, spikes=SPIKES), kind, nlev, nom_off)
        self.trees_ = ForestArrays.from_trees(tree_dicts(table, kind, nom_off, nlev), n_levels)
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
        rows = getattr(self, "_score_rows", None)
        if rows is not None:  # the held-out choice of the sizes and ε (_held_out_table)
            self._smoothing_scores = self.held_out_scores(rows)
        self.smoothing_ = smoothing

    def held_out_scores(self, rows) -> list[float]:
        """The criterion of ``smoothing="held_out"`` for each weight of :data:`SMOOTHINGS`
        (``ε``): the rows' mean log-likelihood (floored as :meth:`log_prob`) plus their mean
        pseudo-log-likelihood, ``Σ_j log p(x_j | x_-j)`` over each row's observed entries
        inside the box (:data:`CRITERION`). The sizes and ``ε`` chosen on the joint
        log-likelihood alone pulled the conditionals toward the marginals (a large ``ε``) or
        cut them noisily; the conditionals are what ``predict_proba``, ``predict`` and
        ``impute`` answer with (``benchmarks/results/eogt_s48.md``)."""
        Z = self.encode_rows(rows)
        eps = np.asarray(SMOOTHINGS, float)

        def mixed(Zm):  # [ε, rows] log densities, NaN entries marginalised
            tree, smooth = self.log_parts_encoded(Zm)
            with np.errstate(divide="ignore"):
                return np.logaddexp(np.log1p(-eps)[:, None] + tree[None, :],
                                    np.log(eps)[:, None] + smooth[None, :])

        joint = mixed(Z)
        score = self.apply_density_floor(joint, over=~np.isnan(Z))  # as log_prob does
        score = np.nanmean(score, 1) if len(Z) else np.zeros(len(eps))
        pseudo = np.zeros_like(joint)
        for j in range(Z.shape[1]):
            obs = np.flatnonzero(~np.isnan(Z[:, j]) & np.isfinite(joint[0]))
            if not len(obs):
                continue
            Zj = Z[obs].copy()
            Zj[:, j] = np.nan
            pseudo[:, obs] += joint[:, obs] - mixed(Zj)
        return (score + (pseudo.mean(1) if len(Z) else 0.0)).tolist()

    def density_faces(self, j: int) -> np.ndarray:
        """Where the density of numeric column ``j`` can jump besides the trees' thresholds:
        the bin faces of its marginal's histogram when regions or the smoothing component are
        spread by the marginals (empty otherwise, and on discrete columns)."""
        shape = self._shape()
        if shape is None or shape.marg[j].edges is None:
            return np.zeros(0)
        return np.asarray(shape.marg[j].edges, float)

    def validate_params(self) -> None:
        super().validate_params()
        check_real("prior_strength", self.prior_strength, 0.0)
        if self.smoothing == "auto":
            raise ValueError("EOGT keeps no cell masses: smoothing='auto' needs GFBoost; "
                             "give a number or 'held_out'")

    def _extra_arrays(self):
        out = super()._extra_arrays()
        if self._atoms() is not None:
            out.update(self.region_atoms_.to_arrays("region_atoms."))
        if self._shape() is not None:
            out.update(self.shape_.to_arrays("shape."))
        return out

    def _restore_extra(self, arrays, meta):
        super()._restore_extra(arrays, meta)
        self._geo = None
        if "region_atoms.columns" in arrays:
            self.region_atoms_ = RegionAtoms.from_arrays(arrays, "region_atoms.")
            self.region_atoms_.check(self.encoder_.schema, self.trees_)
        self.shape_ = None
        if "shape.counts" in arrays:
            kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
            self.shape_ = MarginalShape.from_arrays(arrays, "shape.", kind, nlev, nom_off)
        elif self._cells_marginal() or self._smooth_marginal():
            raise ValueError("extra: an EOGT shaped by the marginals needs its shape.* arrays")
