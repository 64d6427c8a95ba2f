"""Adversarial random forests (Watson, Blesch, Kapar & Wright, AISTATS 2023).

ARF (Alg. 1) alternates a real-vs-synthetic Gini forest with resampling inside its leaves until
the forest cannot tell the two apart; FORDE (Alg. 2) fits factorised leaf densities on the
accepted forest; FORGE (Alg. 3) samples from them. Spec: ``shared/papers/arf.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, prange

from forestgen.base import EncodedTable, GenerativeForest, fresh_leaf
from forestgen.data.binning import Binner
from forestgen.data.support import grid_step
from forestgen.ensemble.bagging import draw_weights
from forestgen.families.mixture.backoff import (
    GAIN_SHARE,
    GUARD_Z,
    append_root_marginals,
    check_weight,
    column_histograms,
    resolve_weight,
    screen_trees,
    snap_edges,
)
from forestgen.inference.api import density_columns
from forestgen.leaves import (
    CategoricalLeaf,
    GridSpikeLeaf,
    MarginalMixLeaf,
    OrdinalKernelLeaf,
    PointMassLeaf,
    RoundedNormalTailLeaf,
    TruncNormalLeaf,
    UniformLeaf,
)
from forestgen.parallel import default_n_jobs, parallel_kernel, sized
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, Splitter, TreeData, make_splitter
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.forest import grow_forest_routed
from forestgen.validation import (
    ParameterError,
    check_bool,
    check_choice,
    check_int,
    check_max_features,
    check_real,
    seed_sequence,
)


@register("learner", "arf")
class ARF(GenerativeForest):
    """Adversarial random forest with FORDE density estimation and FORGE generation.

    Defaults follow R ``arf`` (v0.2.4) unless noted:

    n_trees : 10 (R default; the paper uses 100 for density estimation, 20 for synthesis).
    min_node_size : 2 — every leaf keeps at least this many (in-bag) *real* rows; enforced by the
        splitter on each candidate child, replacing R's grow-then-prune (spec pitfall 5).
    max_features : ``"sqrt"`` → ⌊√d⌋ (ranger's mtry).
    delta, max_iters, early_stop : 0, 10, True — stop when OOB accuracy ≤ ½ + δ, after
        ``max_iters`` adversarial rounds (round 0 excluded), or when accuracy stops falling.
    family : ``"truncnorm"`` (default), ``"unif"``, or ``"normal"`` — the untruncated leaf normal
        of the paper's Table 2 pipeline (``generative_ranger``; spec pitfall 13), kept for parity:
        its density does not integrate to one, since leaf normals spill outside their cells.
    numeric_leaf, discrete_leaf : leaf models (registry name, class or instance) for numeric /
        discrete columns; ``None`` (default) takes them from ``family`` / ``alpha``.
    splitter : ``"gini"`` (default, as in the paper), another labelled splitter (name, class or
        instance), or an ``@numba.njit`` gain function (run by :class:`ImpuritySplitter`).
    ensembler, sampler : ``None`` (default: the leaf-mixture ensembler, leaf weights = coverage,
        and the ancestral sampler) or a component serving ``"leaf mixture"`` (registry name,
        class or instance; see ``docs/components.md``).
    alpha : 0 — additive smoothing of categorical leaves over the levels the leaf allows.
    prior_strength : 0.3 — pseudo-count ``a`` of a Dirichlet prior centred on each discrete
        column's marginal pmf (:class:`~forestgen.leaves.categorical.CategoricalLeaf`
        ``prior``): a leaf of ``N`` rows mixes its empirical pmf with the marginal (over the
        levels its cell allows) with weight ``a / (N + a)``. Without it ARF's 2-row leaves give
        every level seen elsewhere the 1e-20 floor (airquality: held-out -49 nats/row against
        -22 for RFDE; issue 11). 0 is R arf's plain pmf. ``"auto"`` picks ``a`` per column by
        the leave-one-out likelihood of the training rows in their own leaves (empirical
        Bayes): best with few trees on small tables (airquality -20.4 against -23.0 at 0.3),
        but it judges each tree alone, so large ensembles get over-smoothed (DEBD dna with 200
        trees: 96.7 nats against 90.6). 0.3 costs DEBD nothing beyond seed noise
        (``benchmarks/results/arf_prior.md``).
    integer_bandwidth : 0.5 — integer columns coded as levels (a level per integer of a dense
        range) get :class:`~forestgen.leaves.ordinal_kernel.OrdinalKernelLeaf` pmfs with this
        kernel bandwidth: an in-range integer no training row holds gets a probability close
        to its neighbours' instead of the 1e-20 floor (issue 11); seen integers keep their
        empirical shares. 0 is the plain pmf.
    integer_tail : 0 — pseudo-count ``c >= 0`` of R arf's shape in those integer pmfs: each
        leaf's pmf is mixed, with weight ``c / (N + c)`` for a leaf of ``N`` rows, with the
        normal fitted to the leaf's own values, rounded to the integers and restricted to the
        levels its cell allows (:class:`~forestgen.leaves.rounded_normal.RoundedNormalTailLeaf`),
        so a held-out integer next to the few a small leaf saw gets a real share; seen values
        keep at least ``N / (N + c)`` of theirs. Only integer columns coded as every integer
        of their range get it: on a spiky column coded as its observed values (adult's
        capital-gain) the neighbouring level is the next observed value, not the next
        integer. 0 is off (the default: on the leaderboard it raises held-out LL but moves
        adult's C2ST away from 0.5, ``benchmarks/results/leaderboard_defaults.md``).
    finite_bounds, epsilon : ``"no"``, 0 — see :class:`TruncNormalLeaf`.
    sampling, sample_fraction : ``"bootstrap"``, 1.0 per tree (``"subsample"`` for the theory).
    oob_mode : ``"hard"`` majority vote of out-of-bag trees (ranger) or ``"soft"``.
    coverage : ``"all"`` real rows / n (exactly 1 per tree) or ``"oob"`` rows only.
    max_depth : None. max_bins : 255 quantile bins per numeric column.
    max_ordinal_levels : 128 — integer columns with at most this many distinct values get a
        pmf (R arf treats every integer column so) over every integer of their range when it is
        dense, over the observed values when one holds >= 10% of rows (see
        :class:`~forestgen.data.TableEncoder`); wider or sparse ones get truncated-normal leaves
        plus rounding. Differs from the spec's suggested 32: a continuous
        leaf smears spiky integers (adult's ``capital-gain`` is 92% zeros), and on adult 128
        lowers the C2ST AUC of FORGE samples from 0.9996 to 0.67. Cost: a dense pmf table of
        ``n_leaves x levels`` per such column.
    marginal_weight : ``"auto"`` (default), ``"held_out"`` or ``λ`` in ``[0, 1)`` (0: the
        paper's model) — weight of one more tree that never splits, whose one leaf holds
        every training row and carries the column marginals
        (:func:`~forestgen.families.mixture.backoff.append_root_marginals`: a histogram per
        numeric column, as RFDE's, DEF's and GeF's back-off; FORDE's own pmf per discrete
        column). The model is ``(1 - λ) q + λ prod_j f_j``, still one leaf mixture (density,
        FORGE draws and every query include it).
        ``"held_out"`` picks ``λ`` of :data:`~forestgen.families.mixture.backoff.WEIGHTS` by
        the held-out log-likelihood of an ARF fitted on 80% of the rows (of at most 10,000);
        ``"auto"`` (:func:`~forestgen.families.mixture.backoff.choose_weight`), only where
        the marginals alone score those rows above the ARF alone by more than
        :data:`~forestgen.families.mixture.backoff.GUARD_Z` standard errors, takes among the
        weights that do not lower the held-out conditionals ``log p(x_j | x_-j)`` of the
        discrete columns (what ``predict_proba`` answers) by more than ``GUARD_Z`` standard
        errors the one of highest held-out log-likelihood, and then the smallest weight that
        wins :data:`~forestgen.families.mixture.backoff.GAIN_SHARE` (half) of its gain over the
        ARF alone and beats the ARF alone by more than ``GUARD_Z`` standard errors (a share
        ``λ`` of the draws comes from the marginals, columns independent); else ``λ = 0``,
        the paper's model bit for bit. The choice is kept as ``marginal_weight_``, the scores
        (the rule's statistic ``"t"``, the best weight ``"best"``) as
        ``marginal_weight_ll_``. It costs one more fit on at most
        8,000 rows; on a table of more than 5,000 rows a cheaper one on 4,000 rows comes
        first and settles ``λ = 0`` where even it finds the forest ahead of the marginals (its
        statistic kept as ``"t_screen"``; adult: ``benchmarks/results/flip_s48.md``). The held-out
        fit calls ``fit`` of the learner's class once more (a subclass that counts its fits sees
        it). A forestgen extension (issue 37), the default since stop 48: at ``λ = 0`` ARF scores
        quine's held-out rows below the column marginals (-8.29 against -7.64), at ``"auto"``
        (``λ = 0.2``) -7.72, and on tips it keeps ``λ = 0``
        (``benchmarks/results/backoff_s53.md``: the leaderboard's tables).
        ``marginal_weight=0`` is the paper's (and R arf's) model. The distributed fit
        (:mod:`forestgen.distributed`) has no extra tree.
    numeric_prior : 0 (default: FORDE's truncated normals, bit for bit), a pseudo-count
        ``a > 0``, or ``"oob"`` — mixes each numeric leaf's normal with the column's marginal
        histogram restricted to the leaf's cell, weight ``a / (N + a)`` in a leaf of ``N``
        rows (:class:`~forestgen.leaves.marginal_mix.MarginalMixLeaf`, the back-off tree's
        histogram: kernel-smoothed bins, grid spikes; a forestgen extension, not in the
        paper, ``shared/papers/arf.md`` §2.3). ARF's two-row leaves give a held-out value
        between their rows, or at a value the column repeats (diabetes' ``bp`` in whole
        units), a density far below the column's marginal; the mixture lifts the held-out
        log-likelihood (sklearn's diabetes, 300 training rows: -36.1 nats/row at 0, -34.7 at
        0.1, -31.1 at 3) but draws a share ``a / (N + a)`` of each leaf's values from the
        column's marginal in the cell, independent of the other columns: on the leaderboard's
        13 tables C2ST moved from 0.142 to 0.180 (``a = 1``) and 0.213 (``a = 3``) from 0.5
        (``benchmarks/results/arf_leaf_law_s54.md``). ``"oob"`` chooses ``a`` from
        :data:`NUMERIC_PRIORS` by the out-of-bag rows of each tree (the trees' in-bag rows
        fit the leaves, each real row is scored by the mixture of the trees that left it out;
        no refit), taking as the λ back-off does the smallest strength that wins
        :data:`~forestgen.families.mixture.backoff.GAIN_SHARE` of the best strength's gain:
        on the 13 tables the held-out log-likelihood rose on 12 (none fell; +0.13 nats/row on
        average), C2ST 0.142 to 0.138, TSTR unchanged (0.754), at 1.2 to 2.5 times the fit
        CPU (1.85 summed over the tables; the histograms' bandwidth search), and ARF stays
        below the marginals on the same four tables, so it is not the default. The
        distributed fit (:mod:`forestgen.distributed`) refuses it.
    grid_spikes : 0 (default: FORDE's truncated normals, bit for bit), a weight ``w`` in
        ``[0, 1]``, or ``"oob"`` — on a numeric column with a grid (``decimals`` / ``step``)
        whose values repeat in the training rows, mixes each leaf's normal with the leaf's
        own repeated values, each spread uniformly over its grid cell
        (:class:`~forestgen.leaves.grid_spike.GridSpikeLeaf`; a leaf whose rows all lie at
        repeated values gives them the share ``w``). The spikes are part of the density (no
        point masses: it integrates to one), draws in a spike cell round back to its value,
        and every query reads the same law. A forestgen extension (not in the paper): the
        values a column repeats (diabetes' ``bp`` in whole units, airquality's ``Wind``)
        are what FORDE's normals smear and the column marginals' histogram keeps
        (``benchmarks/results/arf_leaf_law_s54.md``). ``"oob"`` chooses ``w`` per column
        from :data:`SPIKE_WEIGHTS` on the trees' out-of-bag rows (:meth:`_oob_spike_weights`)
        and keeps the choice as ``grid_spikes_`` (column name -> weight). On the
        leaderboard's 13 tables ``"oob"`` raised the held-out log-likelihood on 8 (+0.36
        nats/row on average; diamonds and iris lower by under 0.1) and closed most of
        diabetes' gap to the column marginals (-2.3 to -0.5 nats/row), with C2ST and TSTR
        unchanged (|C2ST - 0.5| 0.142 to 0.137, TSTR 0.754 to 0.753) at 1.24 times the fit
        CPU, but no table rose above the marginals and wages' TSTR fell (0.759 to 0.735), so
        it is not the default (``benchmarks/results/arf_spikes_s54.md``). The distributed fit
        fits FORDE's law for ``"oob"`` and refuses a weight above 0.
    random_state, n_jobs (-1: all cores; result identical for any value), progress.
    density_floor : a row of density zero — a held-out value outside the support
        (:mod:`forestgen.data.support`: observed ranges, support levels) — scores
        ``density_floor`` (default ``1e-5``) times the uniform density on the support of the
        columns its density is over (:func:`~forestgen.inference.density_columns`) in
        ``log_prob`` instead of ``-inf``; every other row keeps its exact density. ``None`` or
        ``log_prob(..., floor=None)``: exact. A forestgen extension (no floor in the paper).

    Returns the *generator* of the last accepted round, f(0), not the final discriminator.
    """

    method_name = "ARF"
    splitter_labelled = True  # real rows against FORGE's synthetic ones
    tree_data = frozenset({"Xb", "n_bins", "nominal", "thresholds"})

    #: Named parameter sets for :meth:`preset`. They change only the documented parameters;
    #: the leaderboard (``benchmarks/leaderboard``, results in ``benchmarks/results/``) runs
    #: each of them beside the defaults.
    PRESETS: dict[str, dict[str, Any]] = {
        # samples stay inside the range of each leaf's own rows (never outside the training
        # range); more trees and slightly larger leaves for smoother joint structure
        "best samples": {"n_trees": 30, "min_node_size": 5, "finite_bounds": "local"},
        # more trees and Laplace smoothing of the leaf pmfs: a level unseen in a leaf keeps a
        # small probability instead of the 1e-20 floor
        "best density": {"n_trees": 100, "min_node_size": 5, "alpha": 0.1},
        # no adversarial rounds after the first forest, few trees, larger leaves
        "fastest": {"n_trees": 10, "min_node_size": 10, "max_iters": 0},
    }

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ARF:
        """An ARF with the parameters of :attr:`PRESETS` ``[name]``, then ``overrides``.

        ``"best samples"``: 30 trees, ``min_node_size=5``, ``finite_bounds="local"``;
        ``"best density"``: 100 trees, ``min_node_size=5``, ``alpha=0.1``;
        ``"fastest"``: 10 trees, ``min_node_size=10``, ``max_iters=0``.
        """
        if name not in cls.PRESETS:
            raise ValueError(f"unknown ARF preset {name!r}; choose from {sorted(cls.PRESETS)}")
        return cls(**{**cls.PRESETS[name], **overrides})

    def __init__(self, *, n_trees: int = 10, min_node_size: int = 2, max_features: Any = "sqrt",
                 delta: float = 0.0, max_iters: int = 10, early_stop: bool = True,
                 family: str = "truncnorm", alpha: float = 0.0, prior_strength: Any = 0.3,
                 integer_bandwidth: float = 0.5, integer_tail: float = 0.0,
                 finite_bounds: str = "no", epsilon: float = 0.0, sampling: str = "bootstrap",
                 sample_fraction: float = 1.0,
                 oob_mode: str = "hard", coverage: str = "all", max_depth: int | None = None,
                 max_bins: int = 255, max_ordinal_levels: int = 128, random_state: Any = None,
                 n_jobs: int | None = -1, progress: bool = False, numeric_leaf: Any = None,
                 discrete_leaf: Any = None, splitter: Any = "gini", ensembler: Any = None,
                 sampler: Any = None,
                 density_floor: float | None = 1e-5, marginal_weight: float | str = "auto",
                 numeric_prior: float | str = 0.0, grid_spikes: float | str = 0.0):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    # ------------------------------------------------------------------ validation
    def validate_params(self) -> None:
        super().validate_params()
        check_int("min_node_size", self.min_node_size, 1)
        check_max_features(self.max_features)
        check_real("delta", self.delta, 0.0, 0.5)
        check_int("max_iters", self.max_iters, 0)
        check_bool("early_stop", self.early_stop)
        check_choice("family", self.family, ("truncnorm", "unif", "normal"))
        check_real("alpha", self.alpha, 0.0)
        if not (isinstance(self.prior_strength, str) and self.prior_strength == "auto"):
            try:
                check_real("prior_strength", self.prior_strength, 0.0)
            except ParameterError:
                raise ParameterError(f"prior_strength must be 'auto' or a number >= 0, got "
                                     f"{self.prior_strength!r}") from None
        check_real("integer_bandwidth", self.integer_bandwidth, 0.0, 1.0, high_open=True)
        check_real("integer_tail", self.integer_tail, 0.0, np.inf, high_open=True)
        check_choice("finite_bounds", self.finite_bounds, ("no", "global", "local"))
        check_real("epsilon", self.epsilon, 0.0)
        check_choice("sampling", self.sampling, ("bootstrap", "subsample", "none"))
        check_real("sample_fraction", self.sample_fraction, 0.0,
                   10.0 if self.sampling == "bootstrap" else 1.0, low_open=True)
        check_choice("oob_mode", self.oob_mode, ("hard", "soft"))
        check_choice("coverage", self.coverage, ("all", "oob"))
        check_int("max_depth", self.max_depth, 0, allow_none=True)
        check_int("max_bins", self.max_bins, 2)
        check_int("max_ordinal_levels", self.max_ordinal_levels, 0)
        check_weight("ARF", self.marginal_weight)
        if not (isinstance(self.numeric_prior, str) and self.numeric_prior == "oob"):
            try:
                check_real("numeric_prior", self.numeric_prior, 0.0, np.inf, high_open=True)
            except ParameterError:
                raise ParameterError(f"numeric_prior must be 'oob' or a number >= 0, got "
                                     f"{self.numeric_prior!r}") from None
        if not (isinstance(self.grid_spikes, str) and self.grid_spikes == "oob"):
            try:
                check_real("grid_spikes", self.grid_spikes, 0.0, 1.0)
            except ParameterError:
                raise ParameterError(f"grid_spikes must be 'oob' or a weight in [0, 1], got "
                                     f"{self.grid_spikes!r}") from None

    # ------------------------------------------------------------------ fit
    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row (see :meth:`GenerativeForest.log_prob`); a row outside the
        support scores ``density_floor`` times the uniform density on the support of the
        columns its density is over (:func:`~forestgen.inference.density_columns`) unless
        ``floor=None`` (exact: ``-inf``) or another ``floor`` is given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    def fit(self, X, y=None, *, kinds: dict | None = None) -> ARF:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        # on two or more threads the rule search runs beside the adversarial rounds (which
        # read no rules), and is joined before the marginal weight's fit and FORDE
        Z = self.fit_encoder(X, kinds, max_ordinal_levels=self.max_ordinal_levels,
                             background_rules=default_n_jobs(self.n_jobs) > 1)
        root = seed_sequence(self.random_state)
        try:
            accepted = self._adversarial_rounds(Z, root)
        except BaseException:
            self.encoder_.wait_rules(reraise=False)
            raise
        self.encoder_.wait_rules()
        # the cheap look on a larger table: fewer trees and one adversarial round
        # (backoff.screen_trees)
        self.marginal_weight_, self.marginal_weight_ll_ = resolve_weight(
            self, X, kinds, root, encoded=EncodedTable(self.encoder_, Z),
            screen_params={"n_trees": screen_trees(int(self.n_trees)), "max_iters": 0},
            gain_share=GAIN_SHARE)
        self._forde(Z, *accepted)
        return self

    def _adversarial_rounds(self, Z: np.ndarray, root: np.random.SeedSequence) -> tuple:
        """ARF's rounds (Alg. 1) on the encoded rows ``Z`` (streams spawned from ``root``):
        the accepted forest, its trees' out-of-bag masks of the real rows ``[B, n]``, the
        real rows' leaves ``[n, B]`` and a function giving their in-bag weights ``[B, n]``
        (redrawn from the trees' streams); sets ``fit_diagnostics_`` and ``n_rounds_``."""
        n, d = Z.shape
        schema = self.encoder_.schema
        nominal = schema.nominal_mask
        # binned once: synthetic rows copy real values, so their codes copy real codes
        binner, codes = Binner.fit_transform(Z, nominal, schema.n_levels, self.max_bins,
                                             n_jobs=self.n_jobs)
        codes = narrow_codes(codes)  # [d, n]
        rng = np.random.Generator(np.random.PCG64(root.spawn(1)[0]))
        splitter, limits = self.discriminator_setup()
        y_st = np.r_[np.ones(n, np.int64), np.zeros(n, np.int64)]
        B = self.n_trees

        # round 0: each column resampled independently (product of marginals)
        donors = rng.integers(0, n, size=(n, d))
        history: list[dict] = []
        accepted: tuple | None = None
        prev_acc = np.inf
        for it in range(self.max_iters + 1):
            t0 = time.perf_counter()
            Xb = stack_codes(codes, donors)
            data = TreeData(Xb, binner.n_bins, binner.nominal, binner.thresholds,
                            route_rows=True)
            kids = root.spawn(1)[0].spawn(B)  # one stream per tree (as tree_generators)
            rngs = streams(kids)
            oob = np.empty((B, 2 * n), np.bool_)

            def weights(b: int, rngs=rngs, oob=oob) -> np.ndarray:
                w = self._bootstrap(2 * n, rngs[b])
                oob[b] = w == 0
                return w

            bar = ProgressBar(f"ARF round {it}", B, self.progress)
            # hard votes: each tree's out-of-bag votes are counted in its own task as it grows
            tally = HardVoteTally(2 * n, oob) if self.oob_mode == "hard" else None
            forest, leaves = grow_forest_routed(splitter, data, y_st, weights, rngs, limits,
                                                n_jobs=self.n_jobs, on_tree_done=bar.step,
                                                on_routed=tally)
            if leaves is None:  # a splitter that does not route every row: route them here
                leaves = forest.apply(np.vstack([Z, Z[donors, np.arange(d)]]))
            acc = oob_accuracy_from_leaves(
                forest, leaves, oob, y_st, self.oob_mode, rng,
                lambda kids=kids: np.stack([self._bootstrap(2 * n, r)  # redrawn: same weights
                                            for r in streams(kids)]),
                votes=tally.totals(B) if tally is not None else None)
            history.append({"round": it, "oob_accuracy": acc, "n_leaves": forest.n_leaves,
                            "seconds": time.perf_counter() - t0})
            bar.close(f"OOB accuracy {acc:.4f}, {forest.n_leaves} leaves")
            # the accepted forest keeps its real rows' leaves and out-of-bag mask, not the
            # [2n, B] leaves of the stacked rows nor the [B, 2n] mask
            current = (forest, np.ascontiguousarray(oob[:, :n]), leaves[:n].copy(order="K"),
                       lambda kids=kids: np.stack([self._bootstrap(2 * n, r)[:n]
                                                   for r in streams(kids)]))
            del Xb, data, leaves, oob, weights
            if accepted is None:
                accepted = current  # round 0's forest is the first generator
            else:
                if acc <= 0.5 + self.delta or it >= self.max_iters or (
                        self.early_stop and prev_acc <= acc):
                    break
                accepted = current
            if acc <= 0.5 + self.delta or it >= self.max_iters:
                break
            prev_acc = acc
            donors = leafwise_donors(accepted[2], accepted[0].n_leaves, d, rng)
        self.fit_diagnostics_ = history
        self.n_rounds_ = len(history)
        return accepted  # (a rejected last round's forest is not held while leaves fit)

    def _bootstrap(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """One tree's row weights (its Generator's first draws)."""
        return draw_weights(n, rng, mode=self.sampling, fraction=self.sample_fraction)

    def discriminator_setup(self) -> tuple[Splitter, GrowLimits]:
        """The splitter and limits the real-vs-synthetic trees grow with (label 1 = real:
        every leaf keeps ``min_node_size`` in-bag real rows)."""
        splitter = make_splitter(self.splitter, "ARF", True, ImpuritySplitter)
        limits = GrowLimits(max_features=self.max_features, max_depth=self.max_depth,
                            min_samples_leaf=1.0, n_classes=2,
                            min_class_leaf=np.array([0.0, float(self.min_node_size)]))
        return splitter, limits

    def _forde(self, Z: np.ndarray, forest: ForestArrays, oob: np.ndarray,
               leaves: np.ndarray | None = None,
               bag: Callable[[], np.ndarray] | None = None) -> None:
        """FORDE (Alg. 2): coverage and leaf distributions from the real rows (``oob [B, n]``:
        the rows each tree left out of its bag; ``leaves [n, B]``: their leaves, if known;
        ``bag()``: their in-bag weights ``[B, n]``, if known)."""
        schema = self.encoder_.schema
        self.forest_ = forest
        if leaves is None:
            leaves = forest.apply(Z)
        mask = oob.T if self.coverage == "oob" else None
        self.leaf_log_weight_ = self.component("ensembler").leaf_log_weights(
            leaves, forest.n_leaves, forest.leaf_tree, forest.n_trees, mask=mask)
        lam = getattr(self, "marginal_weight_", 0.0)
        if lam > 0:
            self._check_mixture_for_backoff()
        boxes = forest.column_boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
        numeric, discrete = self.leaf_prototypes()
        pair_w = mask.ravel().astype(float) if mask is not None else None
        builtin = self.numeric_leaf is None and self.discrete_leaf is None  # per-leaf sums only
        # the missing rates read no leaf model: queued behind the columns (with the back-off
        # tree they follow it: its leaf holds every row)
        also = () if lam > 0 else (lambda: self._fit_missing(Z, leaves, pair_w),)
        over = {**self.leaf_overrides(),
                **self.numeric_prior_leaves(Z, forest, numeric, leaves, oob, boxes)}
        over.update(self.grid_spike_leaves(Z, forest, numeric, leaves, oob, boxes, over, bag))
        self.leaf_models_ = self.fit_leaves(Z, leaves, boxes, numeric, discrete, pair_w, over,
                                            tree_major=builtin, also=also)
        if lam > 0:  # the back-off tree: the product of the column marginals (backoff)
            self.forest_, self.leaf_log_weight_, self.leaf_models_, leaves, pair_w = \
                append_root_marginals(self, Z, lam, leaves, pair_w, self.root_overrides())
            self._fit_missing(Z, leaves, pair_w)
        # (the likelihood's packed leaf records, inference.leaf_factors.leaf_pack, and the
        # truncated normals' draw tables are built by the first query that reads them)

    def numeric_prior_leaves(self, Z: np.ndarray, forest: ForestArrays, numeric: Any,
                             leaves: np.ndarray, oob: np.ndarray,
                             boxes: Any) -> dict[int, MarginalMixLeaf]:
        """Per numeric column, with ``numeric_prior`` and FORDE's own normal leaves
        (``numeric_leaf=None``, ``family`` ``"truncnorm"`` or ``"normal"``): FORDE's leaf
        mixed with the column's marginal histogram restricted to the leaf's cell, weight
        ``a / (N + a)`` in a leaf of ``N`` rows
        (:class:`~forestgen.leaves.marginal_mix.MarginalMixLeaf`; the histogram of the
        back-off tree, :func:`~forestgen.families.mixture.backoff.column_histograms` on the
        training rows' root box, its faces snapped to the forest's splits as there). ``a``:
        the given number, or for ``"oob"`` the strength of :data:`NUMERIC_PRIORS` of highest
        out-of-bag likelihood (:meth:`_oob_strength`). At ``a = 0`` FORDE's law (no entry).
        Sets ``numeric_prior_`` (the strength taken)."""
        self.numeric_prior_ = 0.0
        if self.numeric_prior == 0 or self.numeric_leaf is not None or \
                not isinstance(numeric, TruncNormalLeaf):
            return {}
        from forestgen.families.boxes import root_box

        schema = self.encoder_.schema
        cols = [j for j, s in enumerate(schema.columns) if not s.is_discrete]
        if not cols:
            return {}
        hists = column_histograms(Z, schema, *root_box(Z, schema))
        parts = {}
        for j in cols:
            cuts = np.unique(forest.threshold[(forest.feature == j)
                                              & np.isfinite(forest.threshold)])
            parts[j] = snap_edges(*hists[j], cuts)
        a = self._oob_strength(Z, forest, leaves, oob, boxes, numeric, parts) \
            if isinstance(self.numeric_prior, str) else float(self.numeric_prior)
        self.numeric_prior_ = a
        if a == 0:
            return {}
        return {j: MarginalMixLeaf(base=type(numeric)(**numeric.get_params()), edges=e, cdf=c,
                                   strength=a) for j, (e, c) in parts.items()}

    def _oob_strength(self, Z: np.ndarray, forest: ForestArrays, leaves: np.ndarray,
                      oob: np.ndarray, boxes: Any, numeric: Any, parts: dict) -> float:
        """The strength of :data:`NUMERIC_PRIORS` whose leaf laws, fitted per tree on the
        tree's in-bag real rows (``oob [B, n]`` False; coverage too), give the real rows their
        highest mean out-of-bag log-likelihood: per row (at most :data:`OOB_ROWS`, evenly
        spaced) the mixture over the trees that left it out of their bag, as the forest's
        density is the mixture over all trees — held-out evidence of the ensemble without a
        refit. The discrete columns' leaves (fitted alike, the same at every strength) weigh
        the trees as in the density. Ties go to the smaller strength; 0 when no tree left a
        row out (``sampling="none"``)."""
        n, B = leaves.shape
        oobT = oob.T  # [n, B]
        rows = np.flatnonzero(oobT.any(1))
        if rows.size == 0:
            return 0.0
        if rows.size > OOB_ROWS:
            rows = rows[np.linspace(0, rows.size - 1, OOB_ROWS).astype(np.int64)]
        r_idx, b_idx = np.nonzero(oobT[rows])  # the scored (row, tree) pairs, row by row
        lf = leaves[rows[r_idx], b_idx]
        flat = leaves.ravel()
        inbag = (~oobT).ravel().astype(np.float64)
        ens = self.component("ensembler")
        base = ens.leaf_log_weights(leaves, forest.n_leaves, forest.leaf_tree, forest.n_trees,
                                    mask=~oobT)[lf]
        _, discrete = self.leaf_prototypes()
        over = self.leaf_overrides()
        mixes: list = []
        for j in range(self.encoder_.schema.d):
            xs = np.repeat(Z[:, j], B)
            if j in parts:
                mix = MarginalMixLeaf(base=type(numeric)(**numeric.get_params()),
                                      edges=parts[j][0], cdf=parts[j][1], strength=0.0)
                lm, _ = self._leaf_model_and_cell(j, boxes, mix, None)
            else:
                lm, _ = self._leaf_model_and_cell(j, boxes, numeric, discrete, over)
            _, cell = self._leaf_model_and_cell(j, boxes, numeric, discrete, over)
            lm.fit(xs, flat, cell, inbag)
            x = Z[rows[r_idx], j]
            lp0 = lm.log_prob(lf, x)  # (at strength 0: FORDE's law)
            base = base + lp0
            if j in parts:  # (the fitted copy: itself, or the base of a point-mass leaf)
                mix = lm if isinstance(lm, MarginalMixLeaf) else lm.base_
                off = ~np.isnan(x)
                if isinstance(lm, PointMassLeaf):  # (at a point mass no strength matters)
                    off &= ~np.isin(x, np.asarray(lm.atoms, float))
                parts_lp = mix.part_log_probs(lf[off], x[off])
                mixes.append((mix, off, parts_lp))
        first = np.r_[0, np.flatnonzero(np.diff(r_idx)) + 1]  # each row's first pair
        count = np.diff(np.r_[first, len(r_idx)])
        scores = []
        for a in NUMERIC_PRIORS:
            tot = base.copy()
            for mix, off, (lb, lr) in mixes:
                if a > 0:  # the change from FORDE's law where the value is off the masses
                    tot[off] += mix.mix_log_prob(lf[off], lb, lr, a) - lb
            top = np.maximum.reduceat(tot, first)
            safe = np.where(np.isfinite(top), top, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                ll = np.log(np.add.reduceat(np.exp(tot - np.repeat(safe, count)), first)) + safe
            scores.append(ll - np.log(count))
        S = np.stack(scores)
        ok = np.isfinite(S).all(0)  # (a row outside the support at every strength: left out)
        if not ok.any():
            return 0.0
        gain = S[:, ok].mean(1) - S[0, ok].mean()  # (NUMERIC_PRIORS[0] is 0: FORDE's law)
        best = float(gain.max())
        if not best > 0:
            return 0.0
        return float(NUMERIC_PRIORS[int(np.argmax(gain >= GAIN_SHARE * best))])

    def grid_spike_leaves(self, Z: np.ndarray, forest: ForestArrays, numeric: Any,
                          leaves: np.ndarray, oob: np.ndarray, boxes: Any,
                          over: dict, bag: Callable[[], np.ndarray] | None = None
                          ) -> dict[int, GridSpikeLeaf]:
        """Per numeric column with a grid (``decimals`` / ``step``) that repeats values in
        the training rows, with ``grid_spikes`` and FORDE's own normal leaves: the column's
        leaf (FORDE's, or ``numeric_prior``'s mixture in ``over``) mixed with the leaf's own
        repeated values, each uniform on its grid cell
        (:class:`~forestgen.leaves.grid_spike.GridSpikeLeaf`; the repeated values: those
        seen at least twice in the training rows, off the column's point masses). The
        weight: the given one, or for ``"oob"`` one per column chosen on the out-of-bag rows
        (:meth:`_oob_spike_weights`). Sets ``grid_spikes_`` (column name -> weight taken)."""
        self.grid_spikes_ = {}
        if self.grid_spikes == 0 or self.numeric_leaf is not None or \
                not isinstance(numeric, TruncNormalLeaf):
            return {}
        schema = self.encoder_.schema
        protos: dict[int, GridSpikeLeaf] = {}
        seen: dict[int, tuple] = {}
        for j, spec in enumerate(schema.columns):
            if spec.is_discrete or not spec.has_grid:
                continue
            z = Z[:, j]
            z = z[~np.isnan(z)]
            if spec.atoms:  # (values at a point mass keep their own mass)
                z = z[~np.isin(z, np.asarray(spec.atoms, float))]
            vals, cnt = np.unique(z, return_counts=True)
            if not (cnt >= 2).any():
                continue
            base = over.get(j, numeric)
            protos[j] = GridSpikeLeaf(base=type(base)(**base.get_params()),
                                      step=grid_step(spec), values=vals[cnt >= 2], weight=0.0)
            seen[j] = (vals, cnt)
        if not protos:
            return {}
        if isinstance(self.grid_spikes, str):
            weights = self._oob_spike_weights(Z, forest, leaves, oob, boxes, numeric, over,
                                              protos, seen, bag)
        else:
            weights = {j: float(self.grid_spikes) for j in protos}
        self.grid_spikes_ = {schema.columns[j].name: weights[j] for j in protos}
        out = {}
        for j, w in weights.items():
            if w > 0:
                out[j] = GridSpikeLeaf(**{**protos[j].get_params(), "weight": w})
        return out

    def _oob_spike_weights(self, Z: np.ndarray, forest: ForestArrays, leaves: np.ndarray,
                           oob: np.ndarray, boxes: Any, numeric: Any, over: dict,
                           protos: dict[int, GridSpikeLeaf], seen: dict[int, tuple],
                           bag: Callable[[], np.ndarray] | None = None) -> dict[int, float]:
        """Per column of ``protos``, a weight of :data:`SPIKE_WEIGHTS` by the mean
        out-of-bag log-likelihood of the real rows (per row, at most :data:`OOB_ROWS` evenly
        spaced, the mixture over the trees that left it out, every column's leaf factor
        included, as in :meth:`_oob_strength`), the leaf laws fitted per tree on the tree's
        in-bag real rows weighted by their bootstrap counts (``bag()``; without it, once
        each), so that a tree's leaves hold about as many rows as in the final fit, whose
        leaf normals narrow as their counts grow (fitted on the distinct in-bag rows alone,
        wider normals made the spikes look better than they are on held-out rows). The
        columns are taken one after another, each at the weights already chosen for those
        before it; a column's weights are tried in increasing order while each step raises
        the rows' mean by more than :data:`~forestgen.families.mixture.backoff.GUARD_Z`
        standard errors of the rows' changes (the back-off's guard: a step up needs
        evidence, not a tie or noise). A scored row at a value the training rows hold only
        twice has no spike of its own (left out, its value is seen once: as the marginals'
        :func:`~forestgen.families.intersection.marginals.grid_spikes` scores it). 0 when no
        tree left a row out."""
        n, B = leaves.shape
        oobT = oob.T  # [n, B]
        rows = np.flatnonzero(oobT.any(1))
        if rows.size == 0:
            return {j: 0.0 for j in protos}
        if rows.size > OOB_ROWS:
            rows = rows[np.linspace(0, rows.size - 1, OOB_ROWS).astype(np.int64)]
        r_idx, b_idx = np.nonzero(oobT[rows])  # the scored (row, tree) pairs, row by row
        lf = leaves[rows[r_idx], b_idx]
        flat = leaves.ravel()
        # the in-bag rows with their bootstrap counts: a tree's leaves then hold about as
        # many rows as the final fit's, whose leaf normals sharpen with their counts
        inbag = (~oobT).ravel().astype(np.float64) if bag is None else \
            np.ascontiguousarray(np.asarray(bag(), np.float64).T).ravel()
        tot = self.component("ensembler").leaf_log_weights(
            leaves, forest.n_leaves, forest.leaf_tree, forest.n_trees, mask=~oobT)[lf]
        _, discrete = self.leaf_prototypes()
        parts: dict = {}
        for j in range(self.encoder_.schema.d):
            lm, cell = self._leaf_model_and_cell(j, boxes, numeric, discrete,
                                                 {**over, **protos})
            lm.fit(np.repeat(Z[:, j], B), flat, cell, inbag)
            x = Z[rows[r_idx], j]
            if j not in protos:
                tot = tot + lm.log_prob(lf, x)
                continue
            # (the fitted copy: itself, or the base of a point-mass leaf)
            pm = isinstance(lm, PointMassLeaf)
            gs = lm.base_ if pm else lm
            off = ~np.isnan(x)
            if pm:  # (at a point mass no weight matters)
                off &= ~np.isin(x, np.asarray(lm.atoms, float))
            lb, ls = gs.part_log_probs(lf[off], x[off])
            if pm:
                tot = tot + lm.log_prob(lf, x)
            else:  # (at weight 0 the leaf's law is its base's)
                tot[off] += lb
            u, c = seen[j]  # (the values off the point masses and their counts)
            rep = c[np.clip(np.searchsorted(u, x[off]), 0, len(u) - 1)]
            parts[j] = (gs, off, lb, np.where(rep >= 3, ls, -np.inf))
        first = np.r_[0, np.flatnonzero(np.diff(r_idx)) + 1]  # each row's first pair
        count = np.diff(np.r_[first, len(r_idx)])

        def row_ll(t: np.ndarray) -> np.ndarray:
            top = np.maximum.reduceat(t, first)
            safe = np.where(np.isfinite(top), top, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.log(np.add.reduceat(np.exp(t - np.repeat(safe, count)), first)) + \
                    safe - np.log(count)

        ok = np.isfinite(row_ll(tot))  # (a row outside the support: left out)
        out = {j: 0.0 for j in parts}
        if not ok.any():
            return out
        cur = row_ll(tot)[ok]
        for j, (gs, off, lb, ls) in parts.items():
            if not np.isfinite(ls).any():  # (no scored value at a spike of its leaf)
                continue
            for w in SPIKE_WEIGHTS[1:]:  # up the weights while the score rises
                t = tot.copy()
                t[off] += gs.mix_log_prob(lf[off], lb, ls, w) - lb
                new = row_ll(t)[ok]
                d = new - cur  # (a step up must beat GUARD_Z standard errors of the rows)
                if not d.mean() > GUARD_Z * d.std() / np.sqrt(len(d)):
                    break
                out[j], cur, tot = w, new, t
        return out

    def _check_mixture_for_backoff(self) -> None:
        """The back-off tree needs a plain mixture of trees (the default ensembler)."""
        if not self.component("ensembler").logsumexp_combine:
            raise ParameterError(f"ARF: marginal_weight > 0 adds a tree to the leaf mixture; "
                                 f"the ensembler {type(self.component('ensembler')).__name__} "
                                 f"does not combine trees as a mixture: pass "
                                 f"marginal_weight=0")

    def leaf_prototypes(self) -> tuple[Any, Any]:
        """The (numeric, discrete) leaf models FORDE fits: ``numeric_leaf``/``discrete_leaf``,
        or those that ``family``, ``finite_bounds``, ``epsilon``, ``alpha`` and
        ``prior_strength`` select."""
        numeric, discrete = self.numeric_leaf, self.discrete_leaf
        if numeric is None:
            numeric = UniformLeaf(epsilon=self.epsilon) if self.family == "unif" else \
                TruncNormalLeaf(finite_bounds=self.finite_bounds, epsilon=self.epsilon,
                                truncate=self.family == "truncnorm")
        if discrete is None:
            discrete = CategoricalLeaf(alpha=self.alpha, prior=self.prior_strength)
        return numeric, discrete

    def root_overrides(self) -> dict[int, Any]:
        """The discrete columns' leaf models of the back-off tree's one leaf
        (:func:`~forestgen.families.mixture.backoff.append_root_marginals`): FORDE's own
        (fresh copies), which in a leaf holding every row are the column's pmf over its
        support (the leaf prior's global pmf is that pmf; an integer column's ordered kernel
        smooths it over neighbouring levels); its numeric columns get the marginal histogram."""
        _, discrete = self.leaf_prototypes()
        over = self.leaf_overrides()
        out = {}
        for j, spec in enumerate(self.encoder_.schema.columns):
            if spec.is_discrete:
                out[j] = fresh_leaf(over.get(j, discrete))
        return out

    def leaf_overrides(self) -> dict[int, Any]:
        """Columns with their own leaf model: integer levels get an ordered-kernel leaf unless
        ``discrete_leaf`` is given."""
        if self.discrete_leaf is not None:
            return {}
        kw = {"bandwidth": self.integer_bandwidth, "alpha": self.alpha,
              "prior": self.prior_strength}
        return {j: RoundedNormalTailLeaf(tail=self.integer_tail, **kw)
                if self.integer_tail > 0 and unit_grid(spec) else OrdinalKernelLeaf(**kw)
                for j, spec in enumerate(self.encoder_.schema.columns)
                if spec.kind == "integer" and spec.is_discrete}

    def _extra_meta(self):
        return {"fit_diagnostics": self.fit_diagnostics_,
                "marginal_weight": float(getattr(self, "marginal_weight_", 0.0)),
                "grid_spikes": {str(k): float(v)
                                for k, v in getattr(self, "grid_spikes_", {}).items()}}

    def _restore_extra(self, arrays, meta):
        self.fit_diagnostics_ = meta.get("fit_diagnostics", [])
        self.n_rounds_ = len(self.fit_diagnostics_)
        self.marginal_weight_ = float(meta.get("marginal_weight", 0.0))  # 0 before stop 45
        self.marginal_weight_ll_ = {}
        self.grid_spikes_ = dict(meta.get("grid_spikes", {}))  # {} before stop 54


#: the pseudo-counts ``numeric_prior="oob"`` chooses among (0: FORDE's law)
NUMERIC_PRIORS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
#: the spike weights ``grid_spikes="oob"`` chooses among (0: the leaf's law without spikes)
SPIKE_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
#: at most this many real rows (evenly spaced) score them, each by its out-of-bag trees
OOB_ROWS = 5_000


def unit_grid(spec) -> bool:
    """Whether a column's levels are every integer of its range (a dense integer scale), the
    grid the rounded-normal tail (``integer_tail``) is defined on; a column coded as its
    observed values (adult's capital-gain: 0, 114, 401, ...) is not one."""
    return bool(np.all(np.diff(np.asarray(spec.categories, float)) == 1))


def streams(seeds: list[np.random.SeedSequence]) -> list[np.random.Generator]:
    """A fresh Generator per seed (the same draws every time it is called)."""
    return [np.random.Generator(np.random.PCG64(s)) for s in seeds]


def narrow_codes(codes: np.ndarray) -> np.ndarray:
    """Binned codes as uint8 when every code fits (at most 255 bins and the missing code), so
    the grower reads half the bytes; otherwise unchanged."""
    return codes.astype(np.uint8) if codes.size and int(codes.max()) <= 255 else codes


def stack_codes(codes: np.ndarray, donors: np.ndarray) -> np.ndarray:
    """Codes ``[d, 2n]`` of the real rows (``codes [d, n]``) stacked with the synthetic rows
    whose column ``j`` copies real row ``donors[:, j]`` (``donors [n, d]``): the codes the
    binner gives the stacked values, without building or binning them."""
    d, n = codes.shape
    out = np.empty((d, n + len(donors)), codes.dtype)
    out[:, :n] = codes
    for j in range(d):
        np.take(codes[j], donors[:, j], out=out[j, n:])
    return out


@parallel_kernel
def _hard_votes_kernel(leaves, oob, half):
    """Per row: summed out-of-bag votes for "real", in half votes (``half [L]``: 0, 1 or 2
    per leaf, a uint8 table that stays in the L1 cache), and the number of out-of-bag trees.
    Rows in blocks of 1024, trees one after another within a block: a tree's rows are read
    in order from ``oob [B, N]`` and from tree-major leaves."""
    N, B = leaves.shape
    votes = np.zeros(N, np.int64)
    count = np.zeros(N, np.int64)
    for k in prange((N + 1023) // 1024):
        lo = 1024 * k
        hi = min(N, lo + 1024)
        for b in range(B):
            for i in range(lo, hi):
                o = np.int64(oob[b, i])
                votes[i] += np.int64(half[leaves[i, b]]) * o
                count[i] += o
    return votes, count


def leaf_p_real(forest: ForestArrays, leaves: np.ndarray, y: np.ndarray,
                inbag: Callable[[], np.ndarray]) -> np.ndarray:
    """Share of in-bag "real" weight in each leaf ``[L]`` (½ in an empty leaf), from the class
    weights the splitter recorded, or recounted from ``leaves [N, B]`` and the in-bag weights
    ``inbag() [B, N]`` when a splitter does not provide that optional output."""
    if forest.node_value.size:
        val = forest.leaf_value  # [L, 2] in-bag class weights
    else:
        W = inbag().T  # [N, B]
        val = np.stack([np.bincount(leaves.ravel(), weights=(W * (y == c)[:, None]).ravel(),
                                    minlength=forest.n_leaves) for c in (0, 1)], axis=1)
    tot = val.sum(1)
    return np.where(tot > 0, val[:, 1] / np.maximum(tot, 1e-300), 0.5)


def votes_from_leaves(p_real: np.ndarray, leaves: np.ndarray, oob: np.ndarray,
                      mode: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`oob_votes` from the leaves ``[N, B]`` of the rows and the out-of-bag mask
    ``oob [B, N]``. Hard votes (0, ½ or 1) add up exactly in any order: a compiled loop over
    the rows counts half votes (an integer, halved exactly); soft votes are summed by numpy
    as in :func:`oob_votes` (same bits)."""
    if mode == "hard":
        half = np.where(p_real > 0.5, 2, np.where(p_real < 0.5, 0, 1)).astype(np.uint8)
        votes, count = _hard_votes_kernel(leaves, oob, half)
        return votes * 0.5, count
    oobT = oob.T
    # (row-major leaves, as before the grower routed tree-major ones: numpy's sum over a
    # contiguous axis adds pairwise, a strided one in order, so the layout sets the bits)
    return (p_real[np.ascontiguousarray(leaves)] * oobT).sum(1), oobT.sum(1)


def leafwise_donors(leaves: np.ndarray, n_leaves: int, d: int,
                    rng: np.random.Generator) -> np.ndarray:
    """The real row each cell of ARF's next synthetic rows copies, ``[n, d]`` (R arf's
    resampling, see :func:`leafwise_resample`), from the real rows' leaves ``[n, B]``: draw n
    (real row, tree) pairs uniformly (a tree, then a leaf by coverage) and, per column, a
    uniformly drawn real row of that pair's leaf. A leaf's rows are listed by a counting sort
    (linear in ``n B``, in (row, tree) pair order, read from the leaves in their memory layout
    without a copy); the column draws are made first, column after column, then the donors
    filled in one pass over the rows (on threads: each row is written by one)."""
    n, B = leaves.shape
    members = np.empty(n * B, np.int32 if n < 2**31 else np.int64)
    counts, starts, done = sized(_members_by_tree, n * B)(leaves, n_leaves, members)
    if not done:  # (trees whose leaf ids interleave: one sort of all pairs)
        counts, starts = _leaf_members(leaves, n_leaves, members)
    k = rng.integers(0, n * B, size=n)  # (row, tree) pairs, as indices into leaves.ravel()
    pick = leaves[k // B, k % B]
    U = np.empty((d, n))
    for j in range(d):
        U[j] = rng.random(n)
    return sized(_donor_rows, n * d)(members, starts, counts, pick, U)


@parallel_kernel
def _donor_rows(members, starts, counts, pick, U):
    """``out[i, j] = members[starts[p] + int64(U[j, i] * counts[p])]``, ``p = pick[i]``: the
    position numpy computes as ``starts[pick] + (u * counts[pick]).astype(int64)`` (the
    same float product, truncated)."""
    d, n = U.shape
    out = np.empty((n, d), np.int64)
    for i in prange(n):
        p = pick[i]
        s0 = starts[p]
        c = np.float64(counts[p])
        for j in range(d):
            out[i, j] = members[s0 + np.int64(U[j, i] * c)]
    return out


@parallel_kernel
def _members_by_tree(leaves, n_leaves, members):
    """:func:`_leaf_members` tree by tree (in parallel), when each tree's leaf ids lie in a
    range of their own above the previous tree's (a forest's: a tree's leaves are one block
    of ids): a leaf's pairs are then its tree's rows in row order, the pairs of the leaves
    below a tree's first leaf are all the earlier trees' pairs, and each tree counts and lists
    its own leaves (a table of its leaves that stays in cache, and a stretch of ``members`` of
    its own) with the same counts, starts and members as one sort of all pairs. Returns
    ``counts, starts, True``, or ``False`` third (``members`` untouched) when the trees'
    ranges interleave."""
    n, B = leaves.shape
    lo = np.empty(B, np.int64)
    hi = np.empty(B, np.int64)
    for b in prange(B):
        a = np.int64(n_leaves)
        z = np.int64(-1)
        for i in range(n):
            v = np.int64(leaves[i, b])
            a = min(a, v)
            z = max(z, v)
        lo[b] = a
        hi[b] = z
    counts = np.zeros(n_leaves, np.int64)
    starts = np.zeros(n_leaves, np.int64)
    for b in range(B - 1):
        if hi[b] >= lo[b + 1]:
            return counts, starts, False
    for b in prange(B):  # (each tree counts only the leaves of its own range)
        for i in range(n):
            counts[leaves[i, b]] += 1
    acc = 0
    for leaf in range(n_leaves):
        starts[leaf] = acc
        acc += counts[leaf]
    for b in prange(B):
        base = lo[b]
        pos = starts[base:hi[b] + 1].copy()
        for i in range(n):
            k = leaves[i, b] - base
            members[pos[k]] = i
            pos[k] += 1
    return counts, starts, True


@njit(cache=True, nogil=True)
def _leaf_members(leaves, n_leaves, members):
    """Counting sort of the (row, tree) pairs of ``leaves [n, B]`` (any memory layout) by
    leaf, in pair order (row by row, trees in order within a row: the order of
    ``leaves.ravel()``): per leaf its count and its first position; ``members`` gets the rows
    of its pairs in that order (as a stable argsort would list them)."""
    n, B = leaves.shape
    counts = np.zeros(n_leaves, np.int64)
    for b in range(B):  # (counts: any order; tree by tree reads tree-major leaves in order)
        for i in range(n):
            counts[leaves[i, b]] += 1
    starts = np.zeros(n_leaves, np.int64)
    acc = 0
    for leaf in range(n_leaves):
        starts[leaf] = acc
        acc += counts[leaf]
    pos = starts.copy()
    for i in range(n):
        for b in range(B):
            leaf = leaves[i, b]
            members[pos[leaf]] = i
            pos[leaf] += 1
    return counts, starts


def oob_votes(forest: ForestArrays, X: np.ndarray, y: np.ndarray, W: np.ndarray,
              mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``X``: the out-of-bag trees' summed votes for "real" (``hard``: each tree's
    majority, ½ for a tie; ``soft``: its leaf's share of real rows) and the number of such trees.

    Uses the in-bag class weights the splitter recorded, or recounts them when a splitter does
    not provide that optional output. Votes of disjoint sets of trees add up."""
    leaves = forest.apply(X)
    if forest.node_value.size:
        val = forest.leaf_value  # [L, 2] in-bag class weights
    else:
        inbag = W.T  # [N, B]
        val = np.stack([np.bincount(leaves.ravel(), weights=(inbag * (y == c)[:, None]).ravel(),
                                    minlength=forest.n_leaves) for c in (0, 1)], axis=1)
    tot = val.sum(1)
    p_real = np.where(tot > 0, val[:, 1] / np.maximum(tot, 1e-300), 0.5)
    oob = (W == 0).T  # [N, B]
    if mode == "hard":
        p_real = np.where(p_real > 0.5, 1.0, np.where(p_real < 0.5, 0.0, 0.5))
    return (p_real[leaves] * oob).sum(1), oob.sum(1)


def oob_correct(votes: np.ndarray, n_oob: np.ndarray, y: np.ndarray, mode: str,
                rng: np.random.Generator) -> tuple[int, int]:
    """(correctly classified, classified) rows from :func:`oob_votes`: a row is classified
    "real" when its votes exceed half its out-of-bag trees (``hard`` ties broken at random);
    rows never out of bag are not classified."""
    frac = votes / np.maximum(n_oob, 1)
    if mode == "hard":
        tie = np.isclose(frac, 0.5)
        pred = np.where(tie, rng.random(len(y)) < 0.5, frac > 0.5)
    else:
        pred = frac > 0.5
    use = n_oob > 0
    return int(np.sum(pred[use] == (y[use] == 1))), int(use.sum())


def oob_accuracy_from_leaves(forest: ForestArrays, leaves: np.ndarray, oob: np.ndarray,
                             y: np.ndarray, mode: str, rng: np.random.Generator,
                             inbag: Callable[[], np.ndarray],
                             votes: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """:func:`oob_accuracy` from the leaves ``[N, B]`` of the stacked rows and the out-of-bag
    mask ``oob [B, N]`` (``inbag() [B, N]``: the in-bag weights, needed only when the splitter
    did not record class weights). ``votes``: the summed half votes and out-of-bag counts of
    the hard votes, when already counted (:class:`HardVoteTally`; the same counts)."""
    if mode == "hard":  # (the counts of oob_correct in one compiled pass, same draws)
        if votes is None:
            p_real = leaf_p_real(forest, leaves, y, inbag)
            half = np.where(p_real > 0.5, 2, np.where(p_real < 0.5, 0, 1)).astype(np.uint8)
            votes = _hard_votes_kernel(leaves, oob, half)
        correct, used = _hard_correct(*votes, np.asarray(y, np.int64), rng.random(len(y)))
    else:
        p_real = leaf_p_real(forest, leaves, y, inbag)
        correct, used = oob_correct(*votes_from_leaves(p_real, leaves, oob, mode), y, mode,
                                    rng)
    return correct / used if used else float("nan")


class HardVoteTally:
    """Out-of-bag hard votes counted tree by tree while the forest grows (the
    ``on_routed`` hook of :func:`~forestgen.tree.forest.grow_forest_routed`), in the trees'
    own tasks: each task adds its tree's half votes (0, 1 or 2: the majority of its leaf's
    in-bag class weights, as :func:`leaf_p_real` reads them, ties 1) and out-of-bag counts
    for the rows ``oob [B, N]`` leaves out into one of a few int32 buffers (one per task
    running at once), and :meth:`totals` adds the buffers up. Integers: the totals are the
    same in any order and on any number of threads, and equal to
    :func:`_hard_votes_kernel`'s."""

    def __init__(self, n: int, oob: np.ndarray):
        self.n, self.oob = n, oob
        self._lock = threading.Lock()
        self._free: list[tuple[np.ndarray, np.ndarray]] = []
        self._buffers: list[tuple[np.ndarray, np.ndarray]] = []
        self._trees = 0

    def __call__(self, b: int, record: Any, local: np.ndarray) -> None:
        cw = record.class_weight
        if cw is None or np.ndim(cw) != 2 or np.shape(cw)[1] != 2:
            return  # (not counted: totals() gives None and the votes are counted afterwards)
        with self._lock:
            if self._free:
                buf = self._free.pop()
            else:
                buf = (np.zeros(self.n, np.int32), np.zeros(self.n, np.int32))
                self._buffers.append(buf)
        try:
            _add_tree_votes(record.feature, np.asarray(cw, np.float64), local, self.oob[b],
                            buf[0], buf[1])
        finally:
            with self._lock:
                self._free.append(buf)
                self._trees += 1

    def totals(self, n_trees: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The summed half votes and out-of-bag counts per row (int64), or ``None`` unless
        all ``n_trees`` trees were counted."""
        if self._trees != n_trees or not self._buffers:
            return None
        votes = np.zeros(self.n, np.int64)
        count = np.zeros(self.n, np.int64)
        for v, c in self._buffers:
            votes += v
            count += c
        return votes, count


@njit(cache=True, nogil=True)
def _add_tree_votes(feature, class_weight, local, oob_row, votes, count):
    """One tree's out-of-bag half votes: per leaf (node order) ``p = w1 / max(w0 + w1,
    1e-300)`` (½ in an empty leaf), 2 for ``p > ½``, 0 for ``p < ½``, else 1 (the float
    operations of :func:`leaf_p_real`); ``votes[i] += half[local[i]]`` and ``count[i] += 1``
    where ``oob_row[i]``."""
    n_nodes = feature.shape[0]
    half = np.empty(n_nodes, np.int32)
    k = 0
    for node in range(n_nodes):
        if feature[node] < 0:
            w0 = class_weight[node, 0]
            w1 = class_weight[node, 1]
            tot = w0 + w1
            p = w1 / max(tot, 1e-300) if tot > 0 else 0.5
            half[k] = 2 if p > 0.5 else (0 if p < 0.5 else 1)
            k += 1
    for i in range(local.shape[0]):
        if oob_row[i]:
            votes[i] += half[local[i]]
            count[i] += 1


@njit(cache=True, nogil=True)
def _hard_correct(half_votes, count, y, u):
    """:func:`oob_correct` of hard votes from the summed half votes and out-of-bag counts of
    :func:`_hard_votes_kernel` and the tie-breaking uniforms ``u`` (one per row, drawn
    whether used or not): the same fractions, the same ``np.isclose`` test of a tie (default
    tolerances) and the same predictions."""
    correct = 0
    used = 0
    tol = 1e-08 + 1e-05 * 0.5
    for i in range(count.shape[0]):
        c = count[i]
        frac = (half_votes[i] * 0.5) / max(c, 1)
        pred = (u[i] < 0.5) if abs(frac - 0.5) <= tol else (frac > 0.5)
        if c > 0:
            used += 1
            correct += np.int64(pred == (y[i] == 1))
    return correct, used


def oob_accuracy(forest: ForestArrays, X: np.ndarray, y: np.ndarray, W: np.ndarray,
                 mode: str, rng: np.random.Generator) -> float:
    """Out-of-bag accuracy of the real-vs-synthetic forest; rows never OOB are excluded."""
    correct, used = oob_correct(*oob_votes(forest, X, y, W, mode), y, mode, rng)
    return correct / used if used else float("nan")


def leafwise_resample(forest: ForestArrays, Z: np.ndarray, rng: np.random.Generator):
    """ARF's synthetic data for rounds >= 1 (R arf): draw n (real row, tree) pairs uniformly —
    i.e. a tree, then a leaf by coverage — and fill each column independently with the value of
    a uniformly drawn real row of that leaf (empirical, not parametric)."""
    n, d = Z.shape
    rows = leafwise_donors(forest.apply(Z), forest.n_leaves, d, rng)
    return Z[rows, np.arange(d)]
