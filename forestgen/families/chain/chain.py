"""A chain of conditional trees: ``p(x) = p(x_1) p(x_2 | x_1) ... p(x_d | x_1..x_{d-1})``.

The idea is synthpop's sequential CART synthesis (Nowok, Raab & Dibben, "synthpop: Bespoke
creation of synthetic data in R", J. Stat. Softw. 74(11), 2016): visit the columns in an order
and synthesise each from a CART tree grown on the columns before it. Here every tree's leaves
hold a *density* (the framework's leaf models), so the chain is a normalised generative model
with exact queries (:mod:`forestgen.families.chain.queries`), not only a sampler.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forestgen.base import GenerativeForest
from forestgen.data.binning import Binner
from forestgen.families import CHAIN
from forestgen.families.chain.queries import ChainQueries
from forestgen.leaves import CategoricalLeaf, KernelLeaf, OrdinalKernelLeaf
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, TreeData, make_splitter
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.criteria import LABELLED
from forestgen.tree.forest import map_trees, tree_generators
from forestgen.tree.record import TreeRecord
from forestgen.validation import (
    ParameterError,
    check_int,
    check_real,
    seed_sequence,
)

#: the numeric leaf's bandwidth factor and defensive share (:class:`KernelLeaf`): chosen on
#: folds of the leaderboard's training rows (``benchmarks/leaderboard/chain_settings.py``;
#: ``benchmarks/results/chain_settings_kernel.csv``)
NUMERIC_BANDWIDTH = 0.3
NUMERIC_DEFENSIVE = 0.1
#: the numeric leaf's share of the column's normal (:class:`KernelLeaf` ``tail``): without it
#: a leaf of (nearly) equal values gave a held-out value far from them hundreds of nats below
#: the column marginal (Boston: mean held-out log-likelihood -5162 against -32.8 for the
#: marginals; with 0.03, -24.6: ``benchmarks/results/scaled_defaults_s43.md``); on the
#: leaderboard's five tables over three seeds it leaves the C2ST as it was (mean
#: ``|AUC - 0.5|`` 0.128 against 0.135: ``benchmarks/results/chain_tail.md``)
NUMERIC_TAIL = 0.03
#: the numeric leaf's adaptive widths (:class:`KernelLeaf` ``adaptive``: Silverman's robust
#: spread, Abramson's per-kernel widths): on the leaderboard's 13 tables over three seeds mean
#: ``|AUC - 0.5|`` 0.160 against 0.164 with the SD-scaled widths, which smeared skewed columns
#: (anes96's held-out log-likelihood rose above the column marginals';
#: ``benchmarks/results/leaderboard_chain_s52.md``)
NUMERIC_ADAPTIVE = True
#: the criterion of numeric columns' trees (``numeric_criterion``) and their quantile bins
#: (``target_bins``): the variance of the bins' ranks, a regression CART as synthpop's; on the
#: leaderboard's 13 tables over three seeds with adaptive widths mean ``|AUC - 0.5|`` 0.148
#: against 0.160 for Gini on 10 bins, TSTR 0.721 against 0.723
#: (``benchmarks/results/leaderboard_chain_s52.md``)
NUMERIC_CRITERION = "rank_variance"
TARGET_BINS = 64
#: integer columns coded as ordered levels grown by ``numeric_criterion`` on their level index
#: (a regression on the levels' ranks) instead of ``splitter`` (Gini on unordered labels):
#: on the leaderboard's 13 tables over three seeds mean ``|AUC - 0.5|`` 0.1435 against 0.1475,
#: TSTR 0.733 against 0.721 (abalone's ``Rings``: 0.245 against 0.195;
#: ``benchmarks/results/leaderboard_chain_s53.md``)
INTEGER_REGRESS = True
#: the leaf sizes compared per column when ``min_leaf="held_out"`` (``None``: no split, the
#: column's marginal under its leaf model); ties go to the first (synthpop's ``minbucket``)
LEAF_SIZES = (5, 10, 20, 40, 80, None)
#: pseudo-rows of the discrete leaves' prior toward the column's pmf compared per column when
#: ``prior_strength="held_out"`` (with each leaf size; ties go to the first)
PRIORS = (0.5, 2.0, 5.0)
#: bandwidth factors of the numeric kernel leaves compared per column when
#: ``kernel_bandwidth="held_out"`` (paired with :data:`PRIORS`, the shorter repeated: one
#: smoothing level each). With (0.3, 0.6, 1.0, 1.5) and priors up to 20 (before stop 53) the
#: held-out choice took the widest often; on the leaderboard's 13 tables over three seeds
#: these and :data:`PRIORS` give mean ``|AUC - 0.5|`` 0.138 against 0.1435, TSTR 0.728 against
#: 0.733 (``benchmarks/results/leaderboard_chain_s53.md``)
BANDWIDTHS = (0.1, 0.2, 0.4, 1.0)
#: finer bandwidth factors compared per numeric column *after* its leaf size is chosen (at
#: that size, with :data:`BANDWIDTHS`; ``kernel_bandwidth="held_out"``): kernels narrower than
#: a lattice's spacing (diabetes' mostly-integer ``bp``) spike on it, which the held-out
#: rows reward; in the size choice they pushed it toward marginals and coarse trees (mean
#: ``|AUC - 0.5|`` 0.157 against 0.138), after it they cost 0.005 (0.143) and lift the held-out
#: log-likelihood by 1.0 nat per row on average, above the column marginals on all 39 cells
#: of the leaderboard (3 below without; ``benchmarks/results/leaderboard_chain_s53.md``)
FINE_BANDWIDTHS = (0.02, 0.05)
#: the prior at the point masses of numeric columns, and the former default of prior_strength
PRIOR = 0.5


@register("learner", "chain")
class Chain(ChainQueries, GenerativeForest):
    """Sequential conditional trees (synthpop's sequential CART, Nowok et al. 2016), as a
    normalised density.

    Column ``order[t]`` is modelled by tree ``t``, grown on the columns before it in the
    order, with the column itself as the label:
    its levels for a discrete column (split by ``splitter``), its ``target_bins`` quantile
    bins for a numeric one, split by ``numeric_criterion``: the variance of the bins' ranks, a
    regression CART on the target's quantile ranks (synthpop's CART regresses on the value);
    an integer column coded as ordered levels is split by ``numeric_criterion`` on its level
    index (:data:`INTEGER_REGRESS`).
    Each leaf holds the column's law among the training rows that reach it — the
    framework's leaf models, inside the column's support: a smoothed categorical pmf (shrunk
    toward the column's pmf with ``prior_strength`` pseudo-rows), an ordered-level kernel for
    integer levels, and for numeric columns a kernel density of the leaf's own values
    (:class:`~forestgen.leaves.kernel.KernelLeaf`: narrow normals on them, a bandwidth factor
    (``kernel_bandwidth``) of the leaf's robust spread with adaptive widths,
    :data:`NUMERIC_ADAPTIVE`: narrow where the leaf's values are dense), plus a share
    :data:`NUMERIC_DEFENSIVE` of the leaf's normal and a share :data:`NUMERIC_TAIL` of the
    column's normal; each truncated to the column's observed range), so draws stay near
    observed values as
    synthpop's do while the density stays normalised, with the column's point masses kept as
    atoms (:class:`~forestgen.leaves.point_mass.PointMassLeaf`).
    The first column's tree has no split: its marginal.

    Parameters
    ----------
    order : ``"table"`` (default: the table's column order, as synthpop's default visit
        sequence) or a list of every column name in the order to visit them.
    min_leaf : ``"held_out"`` (default) or an int — fewest training rows in a leaf
        (synthpop's ``minbucket``: 5, the default before stop 45); the leaf laws are fitted on
        at least this many rows. ``"held_out"`` chooses it *per column* among
        :data:`LEAF_SIZES` — no split at all (the column's marginal under its leaf model)
        included — by that column's held-out conditional log-likelihood: chains fitted on 80%
        of the rows (of at most 1,000, :func:`forestgen.tuning.held_out_split`) score
        ``log p(x_t | x_<t)`` of the other 20% column by column; since the chain's log density
        is the sum of these terms and each column's tree is grown on its own, the choice is
        made column by column: the size of the highest score, except that no split (the
        marginal) must beat the best tree by more than one standard error
        (:func:`leaf_size_choice`: a difference the held-out rows cannot resolve keeps the
        column's dependence on the others, which the samples need). Values
        outside a column's support score the ``density_floor`` there (as ``log_prob``). The
        chosen sizes are ``min_leaf_`` (0: no split). A departure from synthpop (a fixed
        ``minbucket``): at 5 the chain scored held-out rows below the column marginals on
        tips, quine, penguins and wine (``benchmarks/results/scaled_defaults_s45.md``).
    max_depth : None (unlimited; the leaf size regularises, as synthpop's ``cp = 1e-8``).
    target_bins : 64 — quantile bins of a numeric column used as the labels of its tree (10
        before stop 52).
    numeric_criterion : ``"rank_variance"`` (default: the weighted variance decrease of the
        bin index, :mod:`forestgen.tree.criteria`), another labelled built-in criterion name
        (``"gini"``, ``"entropy"``: a classification CART on the bins, the rule before stop
        52), or None: ``splitter`` for every column. Since stop 53 it also grows the trees of
        integer columns coded as ordered levels, on the level index (:data:`INTEGER_REGRESS`;
        before, ``splitter``). Nominal predictors' levels are ordered by the share of the
        node's most frequent bin, as for Gini (a heuristic here).
    prior_strength : ``"held_out"`` (default) or a number ``a >= 0`` — pseudo-rows of the
        prior toward the column's pmf in discrete leaves (a leaf of ``N`` rows keeps
        ``N / (N + a)`` of its own pmf: a shrinkage of the conditional toward the column's
        marginal) and at point masses. ``"held_out"`` chooses ``a`` per discrete column among
        :data:`PRIORS` with its leaf size (below; point masses keep :data:`PRIOR`); the
        chosen values are ``prior_``. 0.5 was the default before stop 45; (0.5, 2, 5, 20) the
        candidates before stop 53.
    kernel_bandwidth : ``"held_out"`` (default) or a factor ``c > 0`` of the numeric kernel
        leaves' bandwidth (:data:`NUMERIC_BANDWIDTH`, 0.3, before stop 45). ``"held_out"``
        chooses it per numeric column among :data:`BANDWIDTHS` with its leaf size (below;
        (0.3, 0.6, 1.0, 1.5) before stop 53), then at the chosen size among those and
        :data:`FINE_BANDWIDTHS` (kernels narrower than a lattice's spacing); the chosen values
        are ``bandwidth_``. Ignored with ``numeric_leaf``.
    kernel_defensive, kernel_tail : :data:`NUMERIC_DEFENSIVE` (0.1) and :data:`NUMERIC_TAIL`
        (0.03) — the numeric kernel leaf's shares of the leaf's normal and of the column's
        normal (:class:`~forestgen.leaves.kernel.KernelLeaf` ``defensive`` and ``tail``).
        Ignored with ``numeric_leaf``.
    integer_bandwidth : 0.5 — the ordered-level kernel of integer columns coded as levels
        (as :class:`~forestgen.families.mixture.arf.ARF`). Discrete leaves report a level
        without mass (a declared level with no training rows) as probability 0, their exact
        pmf (``floor=0``), not ARF's 1e-20.
    max_bins : 255 quantile bins per numeric predictor. max_ordinal_levels : 128 (encoder).
    max_branches : 100,000 — most compatible branches per query row that the exact queries
        with open columns enumerate (module :mod:`~forestgen.families.chain.branches`);
        past it the row is answered by an importance-sampling estimate with an
        ``EstimateWarning`` (:mod:`~forestgen.families.chain.queries`).
    density_floor : 1e-5 — ``log_prob`` of a row outside the support (as ARF: relative to the
        columns its density is over); ``None``: exact.
    numeric_leaf, discrete_leaf : leaf models (registry name, class or instance) replacing the
        defaults above for every numeric / discrete column (``numeric_leaf="truncnorm"``: the
        truncated normal of the leaf's mean and SD, the default before the kernel leaf;
        ``"kernel"``: the kernel leaf with its bandwidth by leave-one-out likelihood).
    splitter : a labelled tree splitter or an ``@numba.njit`` gain (default ``"gini"``): the
        trees of discrete columns (of every column with ``numeric_criterion=None``).
    ensembler, sampler : ruled out (``ruled_out``).
    """

    model_family = CHAIN
    method_name = "Chain"
    #: its law is the product of the trees' conditionals (one tree per column), not a mixture
    #: over ``forest_``'s leaves: the shared leaf-mixture paths (torch scoring, the device
    #: sampler, exact interval masses) do not answer for it
    leaf_mixture_law = False
    splitter_labelled = True
    tree_data = frozenset({"Xb", "n_bins", "nominal", "thresholds"})
    ruled_out = {
        "ensembler": "a chain multiplies one conditional per column (p(x) = prod_t "
                     "p(x_t | x_<t)); there is no mixture of trees to weigh or combine",
        "sampler": "a chain is sampled ancestrally along its order, the one exact sampler of "
                   "its law; conditional queries enumerate its branches",
    }
    # leaves of tree t hold column order[t] on its whole range: no zero-width cells
    edge_cells = frozenset({"empty"})

    def __init__(self, *, order: Any = "table", min_leaf: int | str = "held_out",
                 max_depth: int | None = None,
                 target_bins: int = TARGET_BINS, prior_strength: float | str = "held_out",
                 integer_bandwidth: float = 0.5, kernel_bandwidth: float | str = "held_out",
                 kernel_defensive: float = NUMERIC_DEFENSIVE, kernel_tail: float = NUMERIC_TAIL,
                 max_bins: int = 255,
                 max_ordinal_levels: int = 128, max_branches: int = 100_000,
                 density_floor: float | None = 1e-5, random_state: Any = None,
                 n_jobs: int | None = -1, progress: bool = False, splitter: Any = "gini",
                 numeric_criterion: str | None = NUMERIC_CRITERION, numeric_leaf: Any = None,
                 discrete_leaf: Any = None, ensembler: Any = None, sampler: Any = None):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    def validate_params(self) -> None:
        super().validate_params()
        if not (isinstance(self.order, str) and self.order == "table"):
            if isinstance(self.order, str) or not isinstance(self.order, (list, tuple)):
                raise ParameterError(f"order must be 'table' or a list of column names, got "
                                     f"{self.order!r}")
        if not (isinstance(self.min_leaf, str) and self.min_leaf == "held_out"):
            try:
                check_int("min_leaf", self.min_leaf, 1)
            except ParameterError:
                raise ParameterError(f"min_leaf must be 'held_out' or an int >= 1, got "
                                     f"{self.min_leaf!r}") from None
        check_int("max_depth", self.max_depth, 0, allow_none=True)
        check_int("target_bins", self.target_bins, 2)
        if not (isinstance(self.prior_strength, str) and self.prior_strength == "held_out"):
            try:
                check_real("prior_strength", self.prior_strength, 0.0)
            except ParameterError:
                raise ParameterError(f"prior_strength must be 'held_out' or a number >= 0, "
                                     f"got {self.prior_strength!r}") from None
        check_real("integer_bandwidth", self.integer_bandwidth, 0.0, 1.0, high_open=True)
        if not (isinstance(self.kernel_bandwidth, str) and self.kernel_bandwidth == "held_out"):
            try:
                check_real("kernel_bandwidth", self.kernel_bandwidth, 0.0, low_open=True)
            except ParameterError:
                raise ParameterError(f"kernel_bandwidth must be 'held_out' or a number > 0, "
                                     f"got {self.kernel_bandwidth!r}") from None
        check_real("kernel_defensive", self.kernel_defensive, 0.0, 1.0, high_open=True)
        check_real("kernel_tail", self.kernel_tail, 0.0, 1.0, high_open=True)
        if self.numeric_criterion is not None and self.numeric_criterion not in LABELLED:
            raise ParameterError(f"numeric_criterion must be None or one of {LABELLED}, got "
                                 f"{self.numeric_criterion!r}")
        check_int("max_bins", self.max_bins, 2)
        check_int("max_ordinal_levels", self.max_ordinal_levels, 0)
        check_int("max_branches", self.max_branches, 1)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None) -> Chain:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        Z = self.fit_encoder(X, kinds, max_ordinal_levels=self.max_ordinal_levels)
        n, d = Z.shape
        schema = self.encoder_.schema
        self.order_ = self._resolve_order(schema)
        binner = Binner.fit(Z, schema.nominal_mask, schema.n_levels, self.max_bins)
        codes = binner.transform(Z)
        splitter = make_splitter(self.splitter, "Chain", True, ImpuritySplitter)
        num_splitter = (splitter if self.numeric_criterion is None
                        else ImpuritySplitter(criterion=self.numeric_criterion))
        root = seed_sequence(self.random_state)
        rngs = tree_generators(root, d)
        self.min_leaf_, self.prior_, self.bandwidth_ = self._leaf_sizes(X, kinds, d,
                                                                        root.spawn(1)[0])
        bar = ProgressBar(f"{self.method_name} trees", d, self.progress)

        def grow(t: int) -> TreeRecord:
            spec = self.encoder_.schema.columns[int(self.order_[t])]
            ranked = not spec.is_discrete or (INTEGER_REGRESS and spec.kind == "integer")
            rec = self._grow_one(t, Z, codes, binner, num_splitter if ranked else splitter,
                                 rngs[t])
            bar.step()
            return rec

        trees = map_trees(grow, d, self.n_jobs)
        nominal_levels = np.where(schema.nominal_mask, schema.n_levels, 0)
        self.forest_ = ForestArrays.from_trees(trees, nominal_levels)
        bar.close(f"{self.forest_.n_leaves} leaves")
        self._fit_chain_leaves(Z)
        return self

    def _leaf_sizes(self, X, kinds, d: int, seed: np.random.SeedSequence
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(min_leaf_, prior_, bandwidth_)`` per column (table order; size 0: no split):
        the given ``min_leaf`` / ``prior_strength`` / ``kernel_bandwidth``, or for
        ``"held_out"`` each column's size of :data:`LEAF_SIZES` and smoothing level (its
        prior of :data:`PRIORS` on a discrete column, its bandwidth of :data:`BANDWIDTHS` on
        a numeric one) by its held-out conditional log-likelihood: per size the best level,
        then the size by :func:`leaf_size_choice` (class docstring; ``leaf_size_ll_`` keeps
        the mean scores at each size's best level, ``[sizes, columns]``), then at that size
        the best level with :data:`FINE_BANDWIDTHS` added (numeric columns). Fewer than 10
        rows: the first of each."""
        import warnings

        from forestgen.data.frames import take_rows
        from forestgen.tuning import held_out_split

        sizes = (np.array([0 if s is None else s for s in LEAF_SIZES], np.int64)
                 if self.min_leaf == "held_out" else np.array([int(self.min_leaf)], np.int64))
        priors = (np.asarray(PRIORS, float) if self.prior_strength == "held_out"
                  else np.array([float(self.prior_strength)]))
        bands = (np.asarray(BANDWIDTHS, float) if self.kernel_bandwidth == "held_out"
                 else np.array([float(self.kernel_bandwidth)]))
        A = max(len(priors), len(bands))  # smoothing levels: a prior and a bandwidth each
        priors, bands = np.resize(priors, A), np.resize(bands, A)
        fine = FINE_BANDWIDTHS if self.kernel_bandwidth == "held_out" else ()
        priors = np.concatenate([priors, np.full(len(fine), priors[0])])
        bands = np.concatenate([bands, np.asarray(fine, float)])
        split = None if len(sizes) == A == 1 else held_out_split(len(X), seed)
        if split is None:
            return np.full(d, sizes[0], np.int64), np.full(d, priors[0]), np.full(d, bands[0])
        fit, val = split
        Xf, Xv = take_rows(X, fit), take_rows(X, val)
        lls = np.full((len(sizes), len(bands), len(val), d), -np.inf)
        params = {**self.get_params(deep=False), "order": self.order, "n_jobs": self.n_jobs}
        for k, s in enumerate(sizes):
            m = type(self)(**{**params, "min_leaf": int(s) if s else len(fit) + 1,
                              "prior_strength": float(priors[0]),
                              "kernel_bandwidth": float(bands[0]), "random_state": seed})
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(Xf, kinds=kinds)
                    Zf = m.encode_rows(Xf)
                    for a in range(len(bands)):  # the trees do not depend on the smoothing
                        if a:
                            m.prior_, m.bandwidth_ = np.full(d, priors[a]), np.full(d, bands[a])
                            m._fit_chain_leaves(Zf)
                        lls[k, a] = m.conditional_log_liks(Xv)
            except (ValueError, RuntimeError, FloatingPointError):
                pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column never observed: NaN
            mean = np.nanmean(np.where(np.isneginf(lls), -1e300, lls), axis=2)  # [K, A, d]
        best_prior = np.argmax(mean[:, :A], axis=1)  # [K, d]: per size, ties to the first
        cols = np.arange(d)
        at_best = lls[np.arange(len(sizes))[:, None], best_prior, :, cols[None, :]]  # [K, d, m]
        self.leaf_size_ll_ = mean[np.arange(len(sizes))[:, None], best_prior, cols[None, :]]
        k = (np.array([leaf_size_choice(at_best[:, j, :]) for j in range(d)], np.int64)
             if len(sizes) > 1 else np.zeros(d, np.int64))
        level = np.argmax(mean[k, :, cols], axis=1)  # at the chosen size, the fine levels too
        return sizes[k], priors[level], bands[level]

    def conditional_log_liks(self, X) -> np.ndarray:
        """``[n, d]``: ``log p(x_j | x_<j)`` of each complete row's column ``j`` (table
        order) under its tree; NaN for a row with a missing entry. A value outside the
        column's support scores ``density_floor`` times the uniform density on the column's
        support (exact ``-inf`` with ``density_floor=None``). The sum over ``j`` is
        ``log_prob`` of a row inside the support."""
        self.check_fitted()
        Z = self.encode_rows(X, missing_columns="nan")
        out = np.full(Z.shape, np.nan)
        ok = ~np.isnan(Z).any(axis=1)
        if not ok.any():
            return out
        leaves = self.forest_.apply(Z[ok])
        vol = self.floor_log_volumes()
        for t, j in enumerate(self.order_):
            j = int(j)
            lp = self.leaf_models_[j].log_prob(leaves[:, t], Z[ok, j])
            if self.density_floor is not None:
                lp = np.maximum(lp, math.log(self.density_floor) - vol[j])
            out[ok, j] = lp
        return out

    def _resolve_order(self, schema) -> np.ndarray:
        if isinstance(self.order, str):
            return np.arange(schema.d, dtype=np.int64)
        names = list(self.order)
        if sorted(map(str, names)) != sorted(map(str, schema.names)) or len(names) != schema.d:
            raise ValueError(f"Chain: order must list every column once; got {names}, the "
                             f"columns are {schema.names}")
        return np.array([schema.names.index(c) for c in names], np.int64)

    def predictors(self, t: int) -> np.ndarray:
        """The columns tree ``t`` may split on: those before its own in the order."""
        return self.order_[:t]

    def _grow_one(self, t: int, Z: np.ndarray, codes: np.ndarray, binner: Binner, splitter,
                  rng: np.random.Generator) -> TreeRecord:
        """Tree ``t``: column ``order_[t]`` as the label, :meth:`predictors` (the columns
        before it) as predictors; rows missing the column weigh 0. Feature ids are mapped
        back to the table's."""
        j = int(self.order_[t])
        spec = self.encoder_.schema.columns[j]
        prev = self.predictors(t)
        x = Z[:, j]
        w = (~np.isnan(x)).astype(np.float64)
        min_leaf = int(self.min_leaf_[j])
        if len(prev) == 0 or min_leaf == 0 or w.sum() < 2 * min_leaf:
            return _single_leaf()
        if spec.is_discrete:
            y = np.where(np.isnan(x), 0, x).astype(np.int64)
            C = spec.n_levels
        else:
            obs = x[~np.isnan(x)]
            edges = np.unique(np.quantile(obs, np.arange(1, self.target_bins)
                                          / self.target_bins))
            y = np.searchsorted(edges, np.where(np.isnan(x), obs[0], x), side="left")
            C = len(edges) + 1
        data = TreeData(np.ascontiguousarray(codes[prev]), binner.n_bins[prev],
                        binner.nominal[prev], [binner.thresholds[c] for c in prev])
        limits = GrowLimits(max_features=None, max_depth=self.max_depth,
                            min_samples_leaf=float(min_leaf), n_classes=int(C))
        rec = splitter.grow(data, y, w, rng, limits)
        rec.feature = np.where(rec.feature >= 0, prev[np.maximum(rec.feature, 0)],
                               -1).astype(np.int32)
        rec.class_weight = None
        return rec

    def _fit_chain_leaves(self, Z: np.ndarray) -> None:
        """Each column's leaf model on the leaves of its own tree (rows missing the column are
        ignored); leaf weights = each tree's share of training rows per leaf; missing rates
        per leaf of the column's tree."""
        schema = self.encoder_.schema
        forest = self.forest_
        leaves = forest.apply(Z)  # [n, d]
        n = len(Z)
        counts = np.bincount(leaves.ravel(), minlength=forest.n_leaves).astype(float)
        with np.errstate(divide="ignore"):
            self.leaf_log_weight_ = np.log(counts / n)
        boxes = forest.column_boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
        numeric, discrete = self.leaf_prototypes()
        overrides = self.leaf_overrides()
        models = [None] * schema.d
        for t, j in enumerate(self.order_):
            lm, cell = self._leaf_model_and_cell(int(j), boxes, numeric, discrete, overrides)
            lm.fit(Z[:, j], leaves[:, t], cell, None)
            models[int(j)] = lm
        self.leaf_models_ = models
        self._fit_missing(Z, leaves)

    def leaf_prototypes(self) -> tuple[Any, Any]:
        """The (numeric, discrete) leaf models: ``numeric_leaf`` / ``discrete_leaf``, else a
        kernel density of the leaf's values and a categorical pmf with the ``prior_strength``
        prior."""
        numeric = self.numeric_leaf if self.numeric_leaf is not None else \
            self.kernel_leaf(NUMERIC_BANDWIDTH if self.kernel_bandwidth == "held_out"
                             else float(self.kernel_bandwidth))
        discrete = self.discrete_leaf if self.discrete_leaf is not None else \
            CategoricalLeaf(prior=self.atom_prior(), floor=0.0)
        return numeric, discrete

    def leaf_overrides(self) -> dict[int, Any]:
        """Unless ``discrete_leaf`` is given, each discrete column its leaf with its own prior
        (``prior_``): integer columns coded as levels an ordered-level kernel leaf, the
        others a categorical pmf; unless ``numeric_leaf`` is given, each numeric column its
        kernel leaf with its own bandwidth factor (``bandwidth_``)."""
        prior = getattr(self, "prior_", None)
        band = getattr(self, "bandwidth_", None)
        out = {}
        for j, spec in enumerate(self.encoder_.schema.columns):
            if not spec.is_discrete:
                if self.numeric_leaf is None and band is not None:
                    out[j] = self.kernel_leaf(float(band[j]))
                continue
            if self.discrete_leaf is not None:
                continue
            a = float(prior[j]) if prior is not None else self.atom_prior()
            out[j] = (OrdinalKernelLeaf(bandwidth=self.integer_bandwidth, prior=a, floor=0.0)
                      if spec.kind == "integer" else CategoricalLeaf(prior=a, floor=0.0))
        return out

    def kernel_leaf(self, bandwidth: float) -> KernelLeaf:
        """The numeric leaf with bandwidth factor ``bandwidth`` and this model's shares of
        the leaf's and the column's normals (``kernel_defensive``, ``kernel_tail``)."""
        return KernelLeaf(bandwidth=bandwidth, defensive=self.kernel_defensive,
                          tail=self.kernel_tail, adaptive=NUMERIC_ADAPTIVE)

    def atom_prior(self) -> float:
        """The prior at point masses: ``prior_strength``, :data:`PRIOR` when it is chosen."""
        return PRIOR if self.prior_strength == "held_out" else float(self.prior_strength)

    # ------------------------------------------------------------------ persistence
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {"order": np.asarray(self.order_, np.int64),
                "min_leaf": np.asarray(self.min_leaf_, np.int64),
                "prior": np.asarray(self.prior_, np.float64),
                "bandwidth": np.asarray(self.bandwidth_, np.float64)}

    def _restore_extra(self, arrays: dict[str, np.ndarray], meta: dict) -> None:
        order = np.asarray(arrays.get("order"), np.int64)
        d = self.encoder_.schema.d
        if order.shape != (d,) or sorted(order.tolist()) != list(range(d)):
            raise ValueError("the chain's order is not a permutation of the columns")
        self.order_ = order
        # files before stop 45 hold no per-column sizes: their one min_leaf
        self.min_leaf_ = np.asarray(arrays["min_leaf"], np.int64) if "min_leaf" in arrays \
            else np.full(d, int(self.min_leaf), np.int64)
        self.prior_ = np.asarray(arrays["prior"], np.float64) if "prior" in arrays \
            else np.full(d, self.atom_prior())
        self.bandwidth_ = np.asarray(arrays["bandwidth"], np.float64) if "bandwidth" in arrays \
            else np.full(d, NUMERIC_BANDWIDTH if self.kernel_bandwidth == "held_out"
                         else float(self.kernel_bandwidth))
        f = self.forest_
        if f.n_trees != d:
            raise ValueError(f"a chain has one tree per column: {f.n_trees} trees for {d} "
                             f"columns")
        for t in range(d):  # tree t may split only on the columns before its own
            feats = f.feature[f.node_offsets[t]:f.node_offsets[t + 1]]
            feats = feats[feats >= 0]
            if not np.isin(feats, order[:t]).all():
                raise ValueError(f"tree {t} splits on a column after its own in the order")




def leaf_size_choice(ll: np.ndarray) -> int:
    """Index of the chosen candidate from the held-out log-likelihoods ``ll [candidates,
    rows]`` (trees first, the last candidate no split; NaN: a row missing the column): the
    tree of the highest mean, and no split only if it beats that tree by more than one
    standard error of their paired per-row differences (Breiman et al.'s one-SE rule, applied
    to that step): a difference the held-out rows cannot resolve keeps the column's
    dependence on the others, which the samples need."""
    ok = ~np.isnan(ll).any(axis=0)
    if not ok.any():
        return 0
    x = np.where(np.isneginf(ll[:, ok]), -1e300, ll[:, ok])
    n = x.shape[1]

    def se(diff):
        return diff.std(ddof=1) / math.sqrt(n) if n > 1 else 0.0

    mean = x.mean(axis=1)
    best = int(np.argmax(mean[:-1]))
    diff = x[-1] - x[best]
    return len(x) - 1 if diff.mean() > se(diff) else best


def _single_leaf() -> TreeRecord:
    return TreeRecord(feature=np.array([-1], np.int32), threshold=np.array([np.nan]),
                      nan_left=np.zeros(1, np.uint8), left=np.array([-1], np.int32),
                      right=np.array([-1], np.int32), cat_off=np.array([-1], np.int64),
                      cat_left=np.zeros(0, np.uint8))
