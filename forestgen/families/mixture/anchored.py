"""Anchored conditional resampling: training rows redrawn column by column through trees
grown on all the other columns, as a normalised leaf mixture.

The sampler of the ``synthpop`` generator in ``synthyverse`` 0.2.7 (after Nowok, Raab &
Dibben, "synthpop: Bespoke creation of synthetic data in R", J. Stat. Softw. 74(11), 2016, whose
R package instead visits the columns in sequence — :class:`~forestgen.families.chain.chain.Chain`)
grows one CART per column on *every other* column, then makes each synthetic row from a
training row drawn at random, its *anchor*: every column is redrawn from the leaf that the
anchor's other columns reach in that column's tree. On the project leaderboard it was the peer
closest to the held-out rows on most tables (``benchmarks/results/leaderboard_s54.md``).

That sampler has a closed-form law. With ``m`` anchors ``a`` and ``l_j(a)`` the leaf of column
``j``'s tree at the anchor's other columns,

    p(x) = (1/m) sum_a prod_j p_j(x_j | l_j(a)),

a mixture of ``m`` product components, one per anchor: a leaf mixture of ``m`` one-leaf trees
(:data:`~forestgen.families.LEAF_MIXTURE`), whose column-``j`` factor at anchor ``a`` is the
leaf law of ``l_j(a)`` shared through an :class:`~forestgen.leaves.indexed.IndexedLeaf`. Every
leaf-mixture query is then exact — ``log_prob`` with open entries, conditional draws and
densities, ``expect``, ``predict_proba``, ``impute``, ``to_torch`` — and ``sample`` draws an
anchor and each column from its factor, the synthyverse sampler with leaf *densities* (the
Chain's kernel leaves: narrow kernels on the leaf's values, the column's point masses kept as
atoms) in place of donor values.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from forestgen.base import EncodedTable, GenerativeForest
from forestgen.families.chain.chain import NUMERIC_CRITERION, TARGET_BINS, Chain
from forestgen.families.mixture.backoff import (
    SCREEN_ROWS,
    append_marginal_tree,
    check_mixture,
    check_weight,
    root_tree,
)
from forestgen.inference.api import density_columns
from forestgen.leaves.indexed import IndexedLeaf
from forestgen.registry import register
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import TreeRecord
from forestgen.tuning import MAX_ROWS, held_out_split
from forestgen.validation import check_bool, check_int, seed_sequence

#: the Chain's parameters that shape the conditional trees and their leaf laws
TREE_PARAMS = ("min_leaf", "max_depth", "target_bins", "prior_strength", "integer_bandwidth",
               "kernel_bandwidth", "kernel_defensive", "kernel_tail", "max_bins",
               "max_ordinal_levels", "density_floor",
               "n_jobs", "progress", "splitter", "numeric_criterion", "numeric_leaf",
               "discrete_leaf")


#: synthpop's ``minbucket``: the held-out choice of the Chain (by each column's conditional
#: log-likelihood) took larger leaves and no split often, and the draws lost the joint law
#: (``benchmarks/results/anchored_s55.md``)
MIN_LEAF = 5
#: the numeric kernels' bandwidth factors (of the leaf's robust spread, as the Chain's) among
#: which ``kernel_bandwidth="held_out"`` chooses one for all columns by the model's held-out
#: log-likelihood: on the leaderboard's tables the samples' C2ST did not depend on the factor
#: from 0.02 to 2 (within seed noise) while the held-out log-likelihood rose with it
#: (breast_cancer -156.6 nats per row at 0.02, -39.7 at 1); a sharp functional dependence
#: (y = x^2 + noise) blurs in the draws at 1 (correlation of x^2 and y 0.70 against 0.89 at
#: 0.3 and 0.997 in the rows): ``benchmarks/results/anchored_s55.md``. 0.02 joined at stop 56:
#: on a table of few repeated values per column (SLID's wages, education, age) the held-out
#: choice took it on 2 of 3 seeds, C2ST 0.660 -> 0.593 and the test log-likelihood up; on
#: the leaderboard's tables it was chosen on iris alone (``benchmarks/results/anchored_s56.md``)
BANDWIDTHS = (0.02, 0.1, 0.3, 1.0)
#: integer columns of at most this many levels are coded as ordered levels (categorical leaves),
#: larger ones as numbers (kernel leaves, their repeated values kept as atoms): on seven public
#: tables the leaderboard never used, 16 in place of the Chain's 128 drew closer rows on six
#: (fatality 0.624 -> 0.590; synthyverse's synthpop 0.603) with a higher held-out
#: log-likelihood on six; on the leaderboard's 13 tables closest to C2ST 0.5 on 7 against 4,
#: further than 0.02 on 2 (adult, macrodata) against 1 (``benchmarks/results/anchored_s56.md``)
MAX_ORDINAL_LEVELS = 16
#: integer columns (and discrete-valued floats) with a point mass (a value in >= 10% of the
#: rows) and at most this many distinct values are ordered levels whatever
#: :data:`MAX_ORDINAL_LEVELS` says (the Chain's 128): adult's hours-per-week (40 in 47% of
#: rows), capital-gain and capital-loss (mostly 0) as numbers put the draws further from the
#: held-out rows (leaderboard, 3 seeds: adult mean ``|AUC - 0.5|`` 0.156 -> 0.112 as levels;
#: ``benchmarks/results/anchored_s57.md``)
MAX_SPIKY_LEVELS = 128
#: a numeric column's heaps (values recurring far more often than their neighbours) and the
#: recurring values of a discrete-valued column without a spike are atoms
#: (:func:`~forestgen.data.column_kinds.heaps`, ``TableEncoder(heaps=True)``), so the draws keep
#: them as the rows do: on three count tables the leaderboard never used, mean
#: ``|AUC - 0.5|`` over 3 seeds rwm1984 0.244 -> 0.114, randhie 0.157 -> 0.105, Doctor 0.111
#: -> 0.041 (synthyverse's synthpop: 0.086, 0.104, 0.059); on the leaderboard's tables within
#: seed noise but for breast_cancer's zeros (0.100 -> 0.113 over 10 seeds;
#: ``benchmarks/results/anchored_s58.md``)
HEAPS = True
#: pseudo-rows of the discrete leaves' prior toward the column's pmf: near the leaf's own pmf
PRIOR_STRENGTH = 0.1
#: the back-off's ``gain_share`` (:func:`~forestgen.families.mixture.backoff.choose_weight`):
#: where a weight is kept, the smallest of the grid that beats the anchors alone on the
#: held-out rows by more than one standard error. A share ``λ`` of the draws comes from the
#: product of the marginals, so the draws' utility falls with ``λ`` while the held-out
#: log-likelihood's gain is concave (breast_cancer -23.3 -> -1.6 nats per row at ``λ =
#: 0.01``): with 20,000 draws on diabetes the TSTR R^2 fell by 0.01-0.02 at 0.01 and by
#: 0.03-0.06 at 0.1, the target's correlations with the features shrinking by 1% and 10%;
#: ARF's half-gain share (0.5) kept 0.01-0.1 on the leaderboard's tables
#: (``benchmarks/results/anchored_backoff_s59.md``)
GAIN_SHARE = 0.0
#: the back-off is not the default (``marginal_weight=0``): where ``"auto"`` keeps its
#: smallest weight (0.01) it lifts the held-out log-likelihood (breast_cancer -23.3 -> -1.6
#: nats per row) but not above the marginals on any table it backs off on, while the draws'
#: utility and the class predictions fall (5 leaderboard splits: ``predict_proba`` accuracy
#: wine 0.955 -> 0.906 at 0.01 without the conditionals' guard, adult 0.794 -> 0.783, anes96
#: 0.878 -> 0.866; on the leaderboard's protocol TSTR within 0.02 of the best peer on 7 tables
#: against 9; ``benchmarks/results/anchored_backoff_s59.md``); ``Anchored`` is a sampler first
MARGINAL_WEIGHT = 0.0
#: rows (at most) of the bandwidth's look (``forestgen.tuning.held_out_split``): on a table
#: of more rows the back-off has a look of its own on up to
#: :data:`~forestgen.families.mixture.backoff.SCREEN_ROWS` (5,000), at the chosen bandwidth: a
#: copy of 800 anchors under-rates the full model of a larger table (adult's 32,561 rows: the
#: marginals ahead of it by 3.6 standard errors, behind a copy of 4,000 anchors by 6.3), and a
#: look on up to 10,000 rows as ARF's cost 28.9 CPU s on a 4,000 x 14 table (the fit: 1.6)
LOOK_ROWS = MAX_ROWS
#: (held-out row, level) pairs at most whose discrete conditionals the ``"auto"`` rule scores
#: (:func:`~forestgen.families.mixture.backoff.conditional_log_probs`; ARF's: 20,000, and at
#: least 50 rows): each pair costs a density under every anchor of the look's copy (adult's
#: 15 columns and 800 anchors: 5 CPU s for the 5,500 pairs of 50 rows)
LOOK_PAIRS = 5_000
#: the numeric kernel leaf's share of the column's normal: a held-out value far from the leaf's
#: values keeps a density (breast_cancer -39.7 nats per row at 0.001, -21.4 at 0.01, the
#: samples' C2ST unchanged within noise; the Chain: 0.03, and 0.1 of the leaf's normal)
KERNEL_TAIL = 0.01


class ConditionalTrees(Chain):
    """One tree per column grown on every other column (a dependency network): the Chain's
    trees, leaf laws and held-out choices with :meth:`predictors` all the other columns, so
    ``conditional_log_liks`` gives ``log p(x_j | x_-j)``. Fitted inside :class:`Anchored` on
    its encoded rows (:class:`~forestgen.base.EncodedTable`); not a model of the joint law."""

    method_name = "Anchored"

    def predictors(self, t: int) -> np.ndarray:
        j = self.order_[t]
        return self.order_[self.order_ != j]


@register("learner", "anchored")
class Anchored(GenerativeForest):
    """Training rows redrawn column by column from trees grown on all the other columns, as a
    normalised mixture over the rows (module docstring; the sampler of synthyverse's
    ``synthpop``, after Nowok et al. 2016).

    Column ``j``'s tree is the Chain's tree for ``j`` grown on every other column (the label:
    its levels, or its quantile bins split by ``numeric_criterion``), with the Chain's leaf
    laws. The model is the uniform mixture over the anchors (the training rows, or
    ``max_anchors`` of them drawn at random) of the product of each column's leaf law at the
    leaf the anchor's other columns reach. Defaults: leaves of :data:`MIN_LEAF` rows as
    synthpop's, kernels on the leaf's values of a factor of the leaf's robust spread, a
    :data:`PRIOR_STRENGTH` pseudo-row prior of discrete leaves and a :data:`KERNEL_TAIL` share
    of the column's normal. ``kernel_bandwidth="held_out"`` (default) chooses one factor of
    :data:`BANDWIDTHS` for every numeric column by the model's own held-out log-likelihood
    (fitted on 80% of at most 1,000 rows, scored on the rest; the scores are
    ``bandwidth_ll_``). For ``min_leaf`` and ``prior_strength``, ``"held_out"`` chooses per
    column as in the Chain (by each column's conditional log-likelihood given all the
    others); the held-out leaf sizes took large leaves and no split often, and the draws lost
    the joint law
    (``benchmarks/results/anchored_s55.md``).

    The density is normalised and exact, but sharper than the forests': each component sits
    on its anchor's neighbours, so a held-out row far from every training row in some column
    scores little more than the kernels' tails. Without a back-off, on seed 0 of the
    leaderboard's splits, its held-out log-likelihood is above the column marginals' on
    abalone, california, fair, iris and macrodata (macrodata -63.3 against -78.7 nats per
    row) and below on adult, anes96, breast_cancer, diabetes and wine (breast_cancer -21.4
    against 7.5, anes96 -25.0 against -22.3; ``anchored_s55.md``). Every setting tried that
    lifts it above the marginals (wider kernels, a larger ``kernel_tail`` or
    ``prior_strength``, pooled leaf variances) moved the draws further from held-out rows
    (``anchored_s57.md``). ``marginal_weight="auto"`` (stop 59; not the default:
    :data:`MARGINAL_WEIGHT`) adds the product of the column marginals as one more component
    of weight ``λ`` (:mod:`~forestgen.families.mixture.backoff`, ARF's ``"auto"`` rule: only
    where the marginals alone beat the model alone on held-out rows, and then the smallest
    weight of the grid that beats the model alone by more than one standard error and keeps
    the discrete columns' held-out conditionals: :data:`GAIN_SHARE`), so ``p = (1 - λ)
    p_anchors + λ prod_j f_j`` and a share ``λ`` of the draws comes from the marginals. On
    the leaderboard's 13 tables x 10 seeds it kept ``λ = 0.01`` on breast_cancer, diabetes
    and anes96 in every split, adult in 9 and airquality in 6, no other table; test
    log-likelihood -23.27 -> -1.56, -42.76 -> -40.04, -23.55 -> -23.05, -33.73 -> -32.98,
    still below the marginals' (4.84, -31.52, -22.24, -32.35) there, at a cost to the
    draws' utility and to ``predict_proba`` (``benchmarks/results/anchored_backoff_s59.md``).
    For held-out densities prefer ARF or the Chain.

    Parameters
    ----------
    min_leaf : 5 — fewest training rows in a leaf (an int, or ``"held_out"``).
    prior_strength : 0.1 — pseudo-rows of the discrete leaves' prior (or ``"held_out"``).
    kernel_bandwidth : ``"held_out"`` (above) or a factor of the leaf's robust spread.
    kernel_defensive : 0.0 — the kernel leaf's share of the leaf's normal.
    kernel_tail : 0.01 — the kernel leaf's share of the column's normal.
    max_ordinal_levels : 16 — integer columns of at most this many levels are coded as
        ordered levels, larger ones as numbers (:data:`MAX_ORDINAL_LEVELS`; the Chain: 128).
    max_spiky_levels : 128 — but a column with a point mass (a value in >= 10% of the rows) is
        coded as ordered levels up to this many distinct values (:data:`MAX_SPIKY_LEVELS`;
        :class:`~forestgen.data.encoder.TableEncoder`).
    heaps : True — a numeric column's heaps (values recurring far more often than their
        neighbours, such as rounded incomes) and the recurring values of a discrete-valued
        column without a point mass are atoms of its leaf laws (:data:`HEAPS`).
    max_depth, target_bins, integer_bandwidth, max_bins, splitter, numeric_criterion,
    numeric_leaf, discrete_leaf : as in :class:`~forestgen.families.chain.chain.Chain` (the
        same defaults).
    max_anchors : None (default: every training row) or an int — the components of the
        mixture; each query costs time proportional to it.
    density_floor : 1e-5 — ``log_prob`` of a row of density zero (outside the support):
        ``density_floor`` times the uniform density on the support of the columns its density
        is over (as ARF); ``None``: exact.
    marginal_weight : 0 (default: :data:`MARGINAL_WEIGHT`), ``"auto"``, ``"held_out"`` or
        ``λ`` in ``[0, 1)`` — the
        back-off toward the column marginals (above; as ARF's parameter). The rule runs on
        the bandwidth's look (its chosen copy, fitted on 80% of the rows, and the other
        rows) on a table of at most 1,000 rows, else on a copy of its own at the chosen
        bandwidth fitted on 80% of at most 5,000 rows (:data:`LOOK_ROWS`). The choice is
        ``marginal_weight_``, the scores ``marginal_weight_ll_``. ``0``: no back-off.
    ensembler, sampler : the leaf-mixture slots (defaults ``"mixture"``, ``"ancestral"``).
    """

    method_name = "Anchored"
    splitter_labelled = Chain.splitter_labelled
    tree_data = Chain.tree_data
    # the components are one-leaf trees: every leaf law lives on the column's whole range
    edge_cells = frozenset({"empty"})
    # every row reaches every component, row by row: IndexedLeaf scores each of the trees'
    # leaf laws once per row and spreads it over the components sharing it
    pairs_in_leaf_order = False

    def __init__(self, *, min_leaf: int | str = MIN_LEAF, max_depth: int | None = None,
                 target_bins: int = TARGET_BINS, prior_strength: float | str = PRIOR_STRENGTH,
                 integer_bandwidth: float = 0.5, kernel_bandwidth: float | str = "held_out",
                 kernel_defensive: float = 0.0, kernel_tail: float = KERNEL_TAIL,
                 max_bins: int = 255, max_ordinal_levels: int = MAX_ORDINAL_LEVELS,
                 max_spiky_levels: int = MAX_SPIKY_LEVELS, heaps: bool = HEAPS,
                 max_anchors: int | None = None, density_floor: float | None = 1e-5,
                 marginal_weight: float | str = MARGINAL_WEIGHT, random_state: Any = None,
                 n_jobs: int | None = -1, progress: bool = False,
                 splitter: Any = "gini", numeric_criterion: str | None = NUMERIC_CRITERION,
                 numeric_leaf: Any = None, discrete_leaf: Any = None, ensembler: Any = None,
                 sampler: Any = None):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    def trees_model(self, **params: Any) -> ConditionalTrees:
        """The unfitted conditional trees this learner grows (its tree parameters, updated
        with ``params``)."""
        return ConditionalTrees(**{**{k: getattr(self, k) for k in TREE_PARAMS}, **params},
                                random_state=self.random_state)

    def validate_params(self) -> None:
        super().validate_params()
        check_int("max_anchors", self.max_anchors, 1, allow_none=True)
        check_int("max_spiky_levels", self.max_spiky_levels, 0)
        check_bool("heaps", self.heaps)
        check_weight("Anchored", self.marginal_weight)
        self.trees_model().validate_params()

    def fit(self, X, y=None, *, kinds: dict | None = None) -> Anchored:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        _, anchor_seed, band_seed, weight_seed = seed_sequence(self.random_state).spawn(4)
        Z = self.fit_encoder(X, kinds, max_ordinal_levels=self.max_ordinal_levels,
                             max_spiky_levels=self.max_spiky_levels, heaps=self.heaps)
        band, rule = self.kernel_bandwidth, self.marginal_weight
        self.bandwidth_ll_, look = None, None
        if isinstance(band, str):  # "held_out": one factor, by the model's held-out likelihood
            band, self.bandwidth_ll_, look = self._held_out_bandwidth(Z, band_seed)
        self.marginal_weight_, self.marginal_weight_ll_ = (0.0 if isinstance(rule, str)
                                                           else float(rule)), {}
        if isinstance(rule, str):  # the back-off's weight (GAIN_SHARE)
            if look is None or len(Z) > LOOK_ROWS:  # the bandwidth's look: not the table's
                look = self._held_out_look(Z, band, weight_seed, SCREEN_ROWS)
            if look is not None:
                self.marginal_weight_, self.marginal_weight_ll_ = look(rule)
        net = self.trees_model(kernel_bandwidth=band).fit(EncodedTable(self.encoder_, Z))
        n, d = Z.shape
        rows = np.arange(n)
        if self.max_anchors is not None and n > self.max_anchors:
            rows = np.sort(np.random.default_rng(anchor_seed).choice(
                n, int(self.max_anchors), replace=False))
        m = len(rows)
        leaves = net.forest_.apply(Z[rows])  # [m, d]: tree t is column order_[t]'s
        tree_of = np.empty(d, np.int64)
        tree_of[net.order_] = np.arange(d)
        schema = self.encoder_.schema
        self.forest_ = _one_leaf_trees(m, np.where(schema.nominal_mask, schema.n_levels, 0))
        # every component covers its one-leaf tree: the ensembler weighs the trees (the
        # default mixture: 1/m each)
        self.leaf_log_weight_ = self.component("ensembler").checked_log_weights(
            np.ones(m), np.arange(m), m)
        self.leaf_models_ = [IndexedLeaf.of(net.leaf_models_[j], leaves[:, tree_of[j]],
                                            net.forest_.n_leaves)
                             for j in range(d)]
        self.anchor_rows_ = rows
        self.min_leaf_, self.prior_ = net.min_leaf_, net.prior_
        self.bandwidth_ = net.bandwidth_
        # each component misses what its anchor row misses: the draws keep the rows' own
        # patterns, so nested and equal missingness hold exactly
        self.missing_cols_ = net.missing_cols_
        self.missing_parent_ = net.missing_parent_
        self.missing_rate_ = np.isnan(Z[rows][:, net.missing_cols_]).astype(np.float64)
        if self.marginal_weight_ > 0:  # one more component: the product of the marginals
            check_mixture(self, "Anchored")
            self.forest_, self.leaf_log_weight_, self.leaf_models_ = append_marginal_tree(
                self, Z, self.marginal_weight_, root_tree(self.forest_))
            rate = np.isnan(Z[:, net.missing_cols_]).mean(axis=0)  # missing independently
            self.missing_rate_ = np.vstack([self.missing_rate_, rate[None, :]])
        return self

    def _held_out_bandwidth(self, Z: np.ndarray, seed) -> tuple[float, list[float] | None, Any]:
        """``(factor, scores, look)``: the factor of :data:`BANDWIDTHS` whose model, fitted on
        80% of (at most 1,000 of) the encoded rows ``Z``, gives the other rows the highest
        mean log density (floored as ``log_prob``); the middle one with fewer than 10 rows.
        Ties go to the first. ``look(rule)`` gives ``(λ, scores)`` of the back-off rule
        ``rule`` on the same held-out rows under the chosen copy (:func:`weight_look`);
        ``None`` without a split or a copy that fitted."""
        import warnings

        split = held_out_split(len(Z), seed)
        if split is None:
            return BANDWIDTHS[len(BANDWIDTHS) // 2], None, None
        fit, val = split
        scores, copies = [], []
        for f in BANDWIDTHS:
            m = type(self)(**{**self.get_params(), "kernel_bandwidth": f,
                              "marginal_weight": 0.0})
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(EncodedTable(self.encoder_, Z[fit]))
                    lp = m.apply_density_floor(m.log_prob_encoded(Z[val]))
                scores.append(float(np.mean(lp)))
                copies.append(m)
            except (ValueError, RuntimeError, FloatingPointError):
                scores.append(-np.inf)
                copies.append(None)
        best = int(np.argmax(scores))
        chosen = copies[best]
        if chosen is None:
            return BANDWIDTHS[best], scores, None

        def look(rule: str) -> tuple[float, dict[str, float]]:
            return weight_look(chosen, Z[fit], Z[val], rule)

        return BANDWIDTHS[best], scores, look

    def _held_out_look(self, Z: np.ndarray, band: float, seed, max_rows: int) -> Any:
        """The back-off's ``look(rule)`` (:meth:`_held_out_bandwidth`'s) at bandwidth
        ``band``: a copy fitted on 80% of (at most ``max_rows`` of) the encoded rows ``Z``;
        ``None`` with fewer than 10 rows or a copy that fails to fit."""
        import warnings

        split = held_out_split(len(Z), seed, max_rows)
        if split is None:
            return None
        fit, val = split
        m = type(self)(**{**self.get_params(), "kernel_bandwidth": band, "marginal_weight": 0.0})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.fit(EncodedTable(self.encoder_, Z[fit]))
        except (ValueError, RuntimeError, FloatingPointError):
            return None
        return lambda rule: weight_look(m, Z[fit], Z[val], rule)

    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row (see :meth:`GenerativeForest.log_prob`); a row outside the
        support scores ``density_floor`` times the uniform density on the support of the
        columns its density is over (:func:`~forestgen.inference.density_columns`) unless
        ``floor=None`` (exact: ``-inf``) or another ``floor`` is given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    # ------------------------------------------------------------------ persistence
    def _extra_meta(self) -> dict[str, Any]:
        return {"marginal_weight": float(getattr(self, "marginal_weight_", 0.0))}

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {"anchor_rows": np.asarray(self.anchor_rows_, np.int64),
                "min_leaf": np.asarray(self.min_leaf_, np.int64),
                "prior": np.asarray(self.prior_, np.float64),
                "bandwidth": np.asarray(self.bandwidth_, np.float64)}

    def _restore_extra(self, arrays: dict[str, np.ndarray], meta: dict) -> None:
        d = self.encoder_.schema.d
        self.marginal_weight_ = float(meta.get("marginal_weight", 0.0))  # 0 before stop 59
        self.marginal_weight_ll_ = {}
        # the anchors' components, then the marginals' where backed off
        m = self.forest_.n_trees - (self.marginal_weight_ > 0)
        rows = np.asarray(arrays.get("anchor_rows", np.arange(m)), np.int64)
        if rows.shape != (m,):
            raise ValueError(f"anchored model: {m} components but {rows.shape} anchor rows")
        self.anchor_rows_ = rows
        for name, dtype in (("min_leaf", np.int64), ("prior", np.float64),
                            ("bandwidth", np.float64)):
            v = np.asarray(arrays.get(name, np.zeros(d)), dtype)
            if v.shape != (d,):
                raise ValueError(f"anchored model: {name} must hold one value per column")
            setattr(self, name + "_", v)
        if not (self.forest_.feature < 0).all():
            raise ValueError("anchored model: every component is a one-leaf tree")


def _one_leaf_trees(m: int, n_levels: np.ndarray) -> ForestArrays:
    """``m`` trees of one leaf (the mixture's components)."""
    leaf = TreeRecord(feature=np.array([-1], np.int32), threshold=np.array([np.nan]),
                      nan_left=np.zeros(1, np.uint8), left=np.array([-1], np.int32),
                      right=np.array([-1], np.int32), cat_off=np.array([-1], np.int64),
                      cat_left=np.zeros(0, np.uint8))
    return ForestArrays.from_trees([leaf] * m, n_levels)


def weight_look(model: Anchored, Z_fit: np.ndarray, Z_val: np.ndarray,
                rule: str) -> tuple[float, dict[str, float]]:
    """``(λ, scores)`` of the back-off rule ``rule`` (``"auto"``:
    :func:`~forestgen.families.mixture.backoff.choose_weight` with the discrete columns'
    conditionals, of at most :data:`LOOK_PAIRS` (row, level) pairs, and :data:`GAIN_SHARE`;
    ``"held_out"``: the best mean) on the held-out rows ``Z_val`` under ``model`` (fitted on
    ``Z_fit`` without a back-off) mixed with the marginals of ``Z_fit``
    (:func:`~forestgen.families.mixture.backoff.marginal_leaf_models`), the held-out rows
    read as the fitting rows alone would see them
    (:func:`~forestgen.families.mixture.backoff.as_unseen`)."""
    from forestgen.families.mixture.backoff import (
        WEIGHTS,
        as_unseen,
        choose_weight,
        conditional_log_probs,
        encoded_component_log_probs,
        marginal_leaf_models,
        mix_log_probs,
        weight_log_probs,
    )

    Zv, outside = as_unseen(model.encoder_.schema, Z_fit, Z_val)
    split = (marginal_leaf_models(model, Z_fit, root_tree(model.forest_)),)
    parts = encoded_component_log_probs(model, Zv, split)
    cond = None
    if parts is None:  # declared constraints: the public query, on a backed-off copy
        backed = copy.deepcopy(model)
        backed.forest_, backed.leaf_log_weight_, backed.leaf_models_ = append_marginal_tree(
            model, Z_fit, 0.5, root_tree(model.forest_))
        lp = weight_log_probs(backed, model.encoder_.inverse_transform(Z_val))
    else:
        for part in parts:
            part[outside] = -np.inf
        lp = mix_log_probs(model, *parts)

        def cond():
            return conditional_log_probs(model, Zv, split=split, pairs=LOOK_PAIRS)
    if rule == "auto":
        return choose_weight(lp, cond, gain_share=GAIN_SHARE)
    with np.errstate(invalid="ignore"):
        means = [float(v) for v in lp[:-1].mean(axis=1)]
    return float(WEIGHTS[int(np.argmax(means))]), dict(zip(map(str, WEIGHTS), means))
