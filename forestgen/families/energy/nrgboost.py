"""NRGBoost: energy-based generative boosted trees (Bravo, ICLR 2025). Spec:
``shared/papers/nrgboost_def.md`` §2.1 (model), §3 (training), §5.2 (sampling), §6 (inference).

The model is ``q(x) ∝ exp(f(x))`` on a finite grid (:class:`~forestgen.families.energy.grid.Grid`),
with ``f = log q0 + sum_t s_t dF_t`` (:class:`~forestgen.families.energy.ensembler.AdditiveEnergy`).
Each round grows a tree through the shared splitter pipeline — by default the
:class:`~forestgen.families.energy.splitter.EnergySplitter` (gain ``½ Σ P^2/Q``, max ratio ``R``) —
against the current model's mass ``Q`` — exact for round one, then
the importance-weighted :class:`~forestgen.families.energy.gibbs.SamplePool` — sets leaf energies
with the :class:`~forestgen.families.energy.leaf.ConstantEnergyLeaf` (``P/Q - 1``), and adds it with
the step ``s_t = learning_rate · alpha_t`` from a grid line search (Eq. 43).

Differences from the paper, and why: the pool reweights its samples by each new tree instead
of rejecting them (:mod:`forestgen.families.energy.gibbs`: same masses in expectation, lower
variance, half the Gibbs refill), and its Gibbs chains persist across rounds (one burn-in instead
of one per round); from 30 trees on, the pool refill spends a constant budget of tree evaluations
per round (``refill_trees=30``; ``None`` = the paper's refill): any draw of a *new* point of the
current model must evaluate all ``t`` trees, so the paper's ``p_refresh · M`` fresh Gibbs points
per round make a round cost grow like ``t`` and a fit like ``T^2``; a flat round needs fresh
points ``∝ 1/t``, and the dropped samples not refreshed stay with their importance weights (on
the synthetic table and adult at 200 trees, a third of the fit CPU, with C2ST and held-out
log-likelihood within the paper refill's seed spread, ``benchmarks/results/
nrgboost_flat_refill.md``);
default sampling starts chains at final-pool states (``sample_start``); missing
values are an extra grid state of their column (the paper has none); categorical columns keep
every level (no 255 cap); a numeric bin holding a single training value that recurs decodes to
exactly it (other draws are uniform over their bin on the column's decimal grid, §1.2); the
paper's tuning of ``max_leaves``/``learning_rate`` and best-round selection on a validation set
are left to the user (defaults are the official code's). The normaliser ``Z`` is
intractable: ``log_prob`` subtracts an estimate (``log_z_``, standard error ``log_z_se_``;
importance sampling from ``q0`` or AIS, :mod:`forestgen.families.energy.normaliser`) — normalised
log-likelihoods are **estimates**; conditionals of one column are exact.
"""

from __future__ import annotations

import copy
import itertools
import math
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen import registry
from forestgen.base import GenerativeForest, NotFittedError
from forestgen.data.encoder import TableEncoder
from forestgen.data.metadata import constrain
from forestgen.ensemble.base import Ensembler
from forestgen.families import ENERGY
from forestgen.families.energy.ensembler import (
    EnergyTrees,
    line_search,
    log_z_step,
)
from forestgen.families.energy.gibbs import SamplePool
from forestgen.families.energy.grid import UNKNOWN, Grid
from forestgen.families.energy.leaf import ConstantEnergyLeaf
from forestgen.families.energy.splitter import EnergySplitter, grid_data
from forestgen.inference.conditions import (
    ZeroProbabilityError,
    _column_index,
    blank_rows,
    check_on_empty,
    parse_conditions,
)
from forestgen.logsumexp import logsumexp
from forestgen.modelfile import check_mapping
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.sampling.support import snap_to_grid
from forestgen.splitters.base import GrowLimits, make_splitter
from forestgen.validation import (
    as_generator,
    check_bool,
    check_int,
    check_real,
    seed_sequence,
)

MAX_ENUMERATION = 4096  # joint grid cells enumerated to marginalise unobserved columns
MARGINAL_DRAWS = 4096  # q0 draws estimating a marginal over a larger unobserved grid
CHAIN_STARTS = 256  # final training-pool states kept as starts of sampling chains


#: pool-row x column evaluations per fit that ``n_trees="auto"`` stays within (a 5,000 x 20
#: table: a 10,000-row pool, 120 rounds)
ROUND_BUDGET = 2.4e7


def sized_defaults(n_rows: int, n_cols: int, n_trees: int | str,
                   pool_size: int | str) -> tuple[int, int]:
    """``(n_trees, pool_size)`` for a table of ``n_rows`` x ``n_cols``: the given values, or
    for ``"auto"``: a pool of ``2 n`` rows between 10,000 and 80,000, and ``n / 12`` rounds
    between 30 and 200, capped at ``ROUND_BUDGET / (pool x columns)`` (at least 10)."""
    pool = int(pool_size) if pool_size != "auto" else int(min(80_000, max(10_000, 2 * n_rows)))
    if n_trees != "auto":
        return int(n_trees), pool
    by_rows = min(200, max(30, round(n_rows / 12)))
    by_cost = max(10, int(ROUND_BUDGET / (pool * max(n_cols, 1))))
    return int(min(by_rows, by_cost)), pool


@register("learner", "nrgboost")
class NRGBoost(GenerativeForest):
    """Energy-based generative boosting (see the module docstring).

    Parameters (defaults = the paper's official code, spec §3.9)
    ----------
    n_trees : boosting rounds; ``"auto"`` (default) follows the table (:func:`sized_defaults`):
        ``n / 12`` for ``n`` training rows, at least 30 and at most 200 (the official code's
        200 trees overfit small tables: 60 trees were further from the data than 30 on three
        500-row leaderboard tables, ``benchmarks/results/nrgboost_samples.md``), and at most as
        many rounds as fit a fixed budget of pool-row x column evaluations, so that a
        5,000 x 20 table fits in under a minute of CPU.
    max_leaves : leaves per tree (256; the paper tunes 2^6..2^12).
    learning_rate : shrinkage ``gamma`` (0.15; the paper tunes it in [0.01, 0.5]).
    max_ratio : ``R``, the largest ``P/Q`` of a leaf (2).
    line_search : pick ``alpha`` on ``logspace(-3, 1, 101)`` (True) or use ``alpha = 1``.
    uniform_mix : weight of the uniform part of ``q0`` per column (0.1), uniform over the
        column's domain (a declared level without training rows is outside it).
    pool_size : model samples ``M`` estimating ``Q``; ``"auto"`` (default): ``2 n`` between
        10,000 and 80,000 (the official code's 80,000 costs 50-60 CPU seconds on a 150-row
        table; keep ``M ≳`` training rows).
    p_refresh : fraction of the pool dropped per round (0.1).
    gibbs_chains, gibbs_burn_in : training-pool Gibbs chains, started at training rows (16, 100).
    persistent_chains : keep the training chains running across rounds, so that the burn-in is
        paid once (True); False restarts them from training rows every round (official code).
    refill_trees : flat pool refill (30): every round spends at most the Gibbs tree
        evaluations the paper's refill spends at ``refill_trees`` trees, so that a round's cost
        stops growing with the trees and a fit is linear in ``n_trees`` — a departure from the
        paper (see the module docstring and :class:`~forestgen.families.energy.gibbs.SamplePool`;
        needs ``persistent_chains``); ``None`` = the paper's refill (every dropped pool sample
        replaced by a Gibbs draw; a fit quadratic in ``n_trees``).
    feature_fraction : columns drawn per node (1.0).
    max_bins : quantile bins per numeric column (255).
    grid_bins : a numeric column on a grid of decimals (or a datetime step) with at most
        ``max_bins`` grid points in its range gets one bin per grid point, unobserved ones
        included (spec §1.1, the reference code's rule), instead of one per training value.
    decode : numeric draws inside a bin: ``"bin"`` = uniform over the bin, on the column's
        grid (a bin holding a single training value that recurs decodes to it);
        ``"observed"`` = uniform between the bin's smallest and largest training value
        (:class:`~forestgen.families.energy.grid.Grid`).
    sample_chains, sample_thin : default :meth:`sample` protocol — after their burn-in,
        parallel chains emit a row every ``thin`` sweeps (3; 1 = one row per sweep, as the
        training pool is drawn): ``sample_chains`` chains (64) from ``q0`` starts, one chain
        per kept training state (256) from training starts. Rows of one chain are
        correlated; ``sample(n, chains=n)`` gives independent chains. ``thin=3`` was chosen
        on the leaderboard (C2ST closer to 0.5 on 7 of 13 tables, further on 1) and matches
        the paper's 100 sweeps per row from ``q0`` at a thirtieth of the cost
        (``benchmarks/results/nrgboost_protocols.md``).
    sample_start : where unconditional chains start: ``"training"`` (default) = the 256
        states drawn from the final training pool by their importance weights (approximate
        draws of the model already), then ``sample_warm_burn_in`` sweeps (0: the first row
        is one sweep away from a pool state); ``"q0"`` = exact ``q0``
        draws, then ``sample_burn_in`` sweeps (100, the paper's protocol). Conditional
        sampling, :meth:`expect` and :meth:`impute` start at ``q0`` with ``sample_burn_in``;
        a model without training states (``truncated``) starts at ``q0``.
    normaliser : how ``log Z`` is estimated, a registry name
        (:mod:`forestgen.families.energy.normaliser`): ``None`` = the family's slot,
        ``"importance"`` (``n_normaliser_samples`` ``q0`` draws); ``"ais"`` = annealed
        importance sampling (lower variance, slower).
    n_normaliser_samples : ``q0`` draws of the importance-sampling ``log Z`` estimate (200,000).
    density_floor : a value outside the training range (or an unseen level) scores as the
        model's marginal of the row's other entries times ``density_floor`` times the uniform
        density on that column's training range (levels) — RFDE/DEF's floor convention, 1e-5;
        ``None`` gives the honest ``-inf`` (zero mass under the grid's base measure).
    splitter : ``"energy"`` (default: :class:`EnergySplitter` with ``max_ratio``), another
        registered splitter, class or instance returning ``TreeRecord.node_mass`` (``[P, Q]``
        per node), or an ``@numba.njit`` gain of ``[P, Q]`` child masses (energy splitter).
    ensembler, sampler : ``None`` (default: :class:`AdditiveEnergy`, Gibbs chains) or a component
        serving ``"energy"`` (an ``AdditiveEnergy`` subclass, a ``GibbsSampler`` subclass).
    numeric_leaf, discrete_leaf : ruled out (``ruled_out``): the trees carry one energy per
        leaf over all columns, not per-column densities.
    random_state : seed; the same seed gives the same model and samples at any thread count.
    progress : print a progress bar over rounds on stderr.
    """

    model_family = ENERGY
    ruled_out = {slot: "NRGBoost's trees carry one energy per leaf over all columns (P/Q - 1, "
                       "Bravo 2025, Eq. 10), added to log q0; a per-column density leaf has no "
                       "place in an additive energy"
                 for slot in ("numeric_leaf", "discrete_leaf")}
    leaf_mixture_law = False  # an additive energy, not a leaf mixture
    cuts_at_values = True  # grid edges at training values

    method_name = "NRGBoost"

    #: parameters whose default ``"auto"`` is resolved from the table at fit
    AUTO_PARAMS = ("n_trees", "pool_size")

    def __init__(self, *, n_trees: int | str = "auto", max_leaves: int = 256,
                 learning_rate: float = 0.15, max_ratio: float = 2.0, line_search: bool = True,
                 uniform_mix: float = 0.1, pool_size: int | str = "auto",
                 p_refresh: float = 0.1,
                 gibbs_chains: int = 16, gibbs_burn_in: int = 100, persistent_chains: bool = True,
                 refill_trees: int | None = 30,
                 feature_fraction: float = 1.0, max_bins: int = 255, grid_bins: bool = False,
                 decode: str = "bin", sample_chains: int = 64,
                 sample_burn_in: int = 100, sample_thin: int = 3,
                 sample_start: str = "training", sample_warm_burn_in: int = 0,
                 normaliser: str | None = None, n_normaliser_samples: int = 200_000,
                 density_floor: float | None = 1e-5, splitter: Any = "energy",
                 random_state: Any = None, progress: bool = False, numeric_leaf: Any = None,
                 discrete_leaf: Any = None, ensembler: Any = None, sampler: Any = None):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    # ------------------------------------------------------------------ validation
    def validate_params(self) -> None:
        super().validate_params()
        for name in ("gibbs_chains", "sample_chains", "sample_thin", "n_normaliser_samples"):
            check_int(name, getattr(self, name), 1)
        if self.pool_size != "auto":
            check_int("pool_size", self.pool_size, 1)
        check_int("max_leaves", self.max_leaves, 2)
        check_int("max_bins", self.max_bins, 2)
        check_int("gibbs_burn_in", self.gibbs_burn_in, 0)
        check_int("sample_burn_in", self.sample_burn_in, 0)
        check_int("sample_warm_burn_in", self.sample_warm_burn_in, 0)
        if self.decode not in ("bin", "observed"):
            raise ValueError(f"decode must be 'bin' or 'observed', got {self.decode!r}")
        if self.sample_start not in ("training", "q0"):
            raise ValueError(f"sample_start must be 'training' or 'q0', got "
                             f"{self.sample_start!r}")
        check_real("learning_rate", self.learning_rate, 0, 1, low_open=True)
        check_real("max_ratio", self.max_ratio, 1, low_open=True)
        check_real("uniform_mix", self.uniform_mix, 0, 1, low_open=True)
        check_real("p_refresh", self.p_refresh, 0, 1)
        check_real("feature_fraction", self.feature_fraction, 0, 1, low_open=True)
        check_bool("line_search", self.line_search)
        check_bool("persistent_chains", self.persistent_chains)
        if self.refill_trees is not None:
            check_int("refill_trees", self.refill_trees, 1)
            if not self.persistent_chains:
                raise ValueError("refill_trees (flat refill) needs persistent_chains=True")
        check_bool("grid_bins", self.grid_bins)
        if self.normaliser is not None and self.normaliser not in registry.available(
                "normaliser"):
            raise ValueError(f"normaliser must be one of {registry.available('normaliser')}, "
                             f"got {self.normaliser!r}")

    def component(self, slot: str):
        """As :meth:`GenerativeForest.component`; the ``ensembler`` of a fitted model is its
        additive energy ``energy_`` (built from the data by :meth:`fit`)."""
        if slot == "ensembler" and "energy_" in self.__dict__:
            return self.energy_
        return super().component(slot)

    def _check_fitted(self) -> None:
        if not hasattr(self, "energy_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit() first")
        check_mapping(self)  # a memory-mapped file changed on disk since load raises

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None) -> NRGBoost:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self.validate_params()
        self.encoder_ = TableEncoder(kinds=kinds).fit(X)
        Z = self.encoder_.transform(X)
        self.grid_ = Grid.fit(Z, self.encoder_.schema, int(self.max_bins),
                              grid_bins=self.grid_bins, decode=self.decode)
        C, _ = self.grid_.codes(Z)
        ensembler = registry.component_class(
            "ensembler", self.ensembler or self.model_family.slots["ensembler"], Ensembler)
        energy = ensembler(self.grid_, ensembler.blend_marginals(
            C, self.grid_, float(self.uniform_mix)))
        self.energy_ = energy
        boost_seed, self.normaliser_seed_ = seed_sequence(self.random_state).spawn(2)
        n_rounds, self.pool_size_ = sized_defaults(
            len(C), self.encoder_.schema.d, self.n_trees, self.pool_size)
        self._boost(C, n_rounds, boost_seed)
        self.log_z_, self.log_z_se_ = self._estimate_log_z(self.normaliser_seed_)
        return self

    def _boost(self, C: np.ndarray, n_rounds: int, seed: np.random.SeedSequence) -> None:
        """The training loop (spec §3.7)."""
        energy = self.energy_
        N = len(C)
        Xd = np.ascontiguousarray(C.T)
        wd = np.full(N, 1.0 / N)
        q0 = np.exp(energy.log_q0)
        splitter = make_splitter(self.splitter, "NRGBoost", False, EnergySplitter,
                                 max_ratio=float(self.max_ratio))
        limits = GrowLimits(max_features=float(self.feature_fraction),
                            max_leaves=int(self.max_leaves))
        leaf = ConstantEnergyLeaf()
        pool = SamplePool(size=int(self.pool_size_), p_refresh=float(self.p_refresh),
                          n_chains=int(self.gibbs_chains), burn_in=int(self.gibbs_burn_in),
                          persistent=self.persistent_chains, refill_trees=self.refill_trees,
                          sampler=self.component("sampler"))
        seeds = seed.spawn(n_rounds)
        bar = ProgressBar("NRGBoost", n_rounds, bool(self.progress), unit="rounds")
        self.rounds_ = []
        log_z = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        for t in range(n_rounds):
            rng = np.random.Generator(np.random.PCG64(seeds[t]))
            ts = time.perf_counter()
            if t == 0:
                data = grid_data(self.grid_, Xd, q0=q0)
            else:
                if t == 1:
                    pool.start(energy, rng)
                else:
                    pool.update(energy, C, rng)
                ts = time.perf_counter()
                data = grid_data(self.grid_, Xd, pool.codes.T, pool.weights())
            tree = splitter.grow(data, None, wd, rng, limits)
            grow_s = time.perf_counter() - ts
            if tree.node_mass is None:
                raise ValueError(f"NRGBoost needs a splitter whose TreeRecord has node_mass "
                                 f"(data and model mass per node); {splitter!r} gives none")
            is_leaf = tree.feature < 0
            if is_leaf.sum() < 2:
                break  # no valid split: the model cannot improve on these masses
            P, Q = np.ascontiguousarray(tree.node_mass[is_leaf].T)
            w = leaf.values(P, Q)
            alpha, gain = line_search(P, Q, w) if self.line_search else (1.0, float("nan"))
            s = float(self.learning_rate) * alpha
            node_value = np.zeros(len(tree.feature))
            node_value[is_leaf] = s * w
            energy.trees.append(tree, node_value, self.grid_)
            log_z += log_z_step(Q, s * w)
            stats = pool.history[-1] if t > 0 else (0, float("nan"), 0)
            self.rounds_.append({"alpha": alpha, "gain": gain, "log_z": log_z,
                                 "leaves": int(is_leaf.sum()), "dropped": stats[0],
                                 "pool_ess": stats[1], "refilled": stats[2],
                                 "gibbs_tree_evals": pool.tree_evals[-1] if t > 1 else 0,
                                 "grow_seconds": grow_s, "seconds": time.perf_counter() - t0,
                                 "cpu_seconds": time.process_time() - c0})
            bar.step()
        bar.close(f"{energy.trees.n_trees} trees")
        self.log_z_tracker_ = log_z
        self.pool_ = pool
        self.chain_start_ = (pool.states(energy, CHAIN_STARTS, np.random.default_rng(seed))
                             if len(pool.codes) else None)

    def truncated(self, n_trees: int) -> NRGBoost:
        """A copy using only the first ``n_trees`` trees (e.g. the best validation round,
        spec §8.9). Its ``log_z_`` is re-estimated with the same number of ``q0`` draws."""
        self._check_fitted()
        if not 0 <= n_trees <= self.n_trees_:
            raise ValueError(f"n_trees must be in [0, {self.n_trees_}], got {n_trees!r}")
        out = type(self)(**self.get_params())
        out.encoder_, out.grid_ = self.encoder_, self.grid_
        out.energy_ = type(self.energy_)(self.grid_, self.energy_.log_q0,
                                     self.energy_.trees.truncate(int(n_trees)))
        seed = getattr(self, "normaliser_seed_", None) or seed_sequence(self.random_state)
        out.normaliser_seed_ = seed
        out.log_z_, out.log_z_se_ = out._estimate_log_z(seed)
        rounds = getattr(self, "rounds_", [])[:n_trees]
        out.log_z_tracker_ = rounds[-1]["log_z"] if rounds else 0.0
        out.rounds_ = rounds
        out.chain_start_ = None  # the training states sample the full model: start at q0
        return out

    def _estimate_log_z(self, seed) -> tuple[float, float]:
        """``(log Z, standard error)`` from the ``normaliser`` component."""
        name = self.normaliser or self.model_family.slots["normaliser"]
        cls = registry.get("normaliser", name)
        est = cls(n_samples=int(self.n_normaliser_samples)) if name == "importance" else cls()
        return est.estimate(self.energy_, np.random.default_rng(seed))

    # ------------------------------------------------------------------ encoding helpers
    @property
    def n_trees_(self) -> int:
        self._check_fitted()
        return self.energy_.trees.n_trees

    def _codes(self, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Encoded rows and grid codes; a column absent from a DataFrame is :data:`UNKNOWN`
        (marginalised over all its states, the missing one included)."""
        Z = self._encode(X)
        C, outside = self.grid_.codes(Z)
        if isinstance(X, pd.DataFrame):
            absent = [j for j, name in enumerate(self.schema_.names)
                      if not any(c == name for c in X.columns)]
            C[:, absent] = UNKNOWN
        return Z, C, outside

    def _log_marginal(self, C: np.ndarray) -> np.ndarray:
        """``log sum_{x_U} exp f(x_obs, x_U)`` per row, ``U`` = its :data:`UNKNOWN` columns
        (exact enumeration up to :data:`MAX_ENUMERATION` cells, else an estimate)."""
        out = np.empty(len(C))
        unk = C == UNKNOWN
        patterns, inv = np.unique(unk, axis=0, return_inverse=True)
        inv = inv.ravel()
        e = self.energy_
        nc = self.grid_.n_codes
        for p, pat in enumerate(patterns):
            rows = np.nonzero(inv == p)[0]
            Cp = C[rows].copy()
            U = np.nonzero(pat)[0]
            if len(U) == 0:
                out[rows] = e.energy(Cp)
                continue
            if len(U) == len(pat):
                out[rows] = self._log_z_parts()
                continue
            last, rest = U[-1], U[:-1]
            if math.prod(int(nc[j]) for j in U) > MAX_ENUMERATION and len(rest):
                out[rows] = self._log_marginal_estimate(Cp, U)
                continue
            acc = np.full(len(rows), -np.inf)
            for combo in itertools.product(*[range(int(nc[j])) for j in rest]):
                Cp[:, rest] = combo
                acc = np.logaddexp(acc, logsumexp(e.energy_slice(Cp, int(last), full=True), axis=1))
            out[rows] = acc
        return out

    def _log_z_parts(self) -> float:
        return float(self.log_z_)

    def _log_marginal_estimate(self, C: np.ndarray, U: np.ndarray) -> np.ndarray:
        """Importance-sampling estimate of ``log sum_{x_U} exp f`` from :data:`MARGINAL_DRAWS`
        ``q0`` draws of the columns ``U`` — the same draws for every row, so a row's value
        does not depend on its batch."""
        e = self.energy_
        off = self.grid_.code_offsets
        D = e.sample_q0(MARGINAL_DRAWS, np.random.default_rng(0))[:, U]
        log_q0_u = e.log_q0[D + off[U]].sum(axis=1)
        out = np.empty(len(C))
        for i in range(len(C)):
            X = np.repeat(C[i:i + 1], MARGINAL_DRAWS, axis=0)
            X[:, U] = D
            out[i] = logsumexp(e.energy(X) - log_q0_u) - math.log(MARGINAL_DRAWS)
        return out

    def _score_codes(self, C: np.ndarray, outside: np.ndarray) -> np.ndarray:
        """Estimated log density of code rows (see :meth:`log_prob`)."""
        C = np.where(outside, UNKNOWN, C).astype(np.int32)
        lp = self._log_marginal(C) - self.log_z_ - self.grid_.log_width(C)
        bad = outside.any(axis=1)
        if bad.any():
            if self.density_floor is None:
                lp[bad] = -np.inf
            else:
                lp += outside @ self._log_floor()
        return lp

    def _log_floor(self) -> np.ndarray:
        """Per column: ``log(density_floor x uniform density on its training range)``."""
        g = self.grid_
        out = np.full(g.d, math.log(self.density_floor))
        for j in range(g.d):
            if g.discrete[j]:
                out[j] -= math.log(int(g.in_domain(j).sum()))
            elif g.edges[j][-1] > g.edges[j][0]:
                out[j] -= math.log(g.edges[j][-1] - g.edges[j][0])
        return out

    # ------------------------------------------------------------------ density
    def log_prob(self, X, conditions=None) -> np.ndarray:
        """Log density (nats) per row: numeric columns as densities (per unit of the column),
        discrete columns and the missing state as probabilities.

        **An estimate**: ``f(x) - log Ẑ`` with ``log Ẑ`` = ``log_z_`` (importance sampling from
        ``q0``; standard error ``log_z_se_``). NaN in a column that had missing values at fit
        is the *missing* state; in other columns it is marginalised: exactly by enumeration
        while the unobserved cells number at most 4,096, else by an importance-sampling
        estimate (4,096 ``q0`` draws). A value outside the training range or an unseen level
        is marginalised and scored with ``density_floor`` (see the class docstring; ``-inf``
        with ``density_floor=None``).

        ``conditions`` (a dict of evidence values, which override ``X``'s, or a list of column
        names whose ``X`` values are the evidence): ``log q(x_free | evidence)``, exact (no
        normaliser involved) — the free columns are the other observed columns of ``X``.
        """
        if conditions is not None:
            return self._conditional_log_prob(X, conditions)
        Z, C, outside = self._codes(X)
        return self._score_codes(C, outside)

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """:meth:`log_prob` of already encoded rows."""
        self._check_fitted()
        C, outside = self.grid_.codes(np.asarray(Z, np.float64))
        return self._score_codes(C, outside)

    def unnormalised_log_prob(self, X) -> np.ndarray:
        """``f(x)`` minus bin log-widths: :meth:`log_prob` without the estimated ``log Z``."""
        return self.log_prob(X) + self.log_z_

    def _conditional_log_prob(self, X, conditions) -> np.ndarray:
        schema = self.schema_
        df = X if isinstance(X, pd.DataFrame) else self.encoder_.inverse_transform(
            self._encode(X))
        df = df.copy()
        if isinstance(conditions, dict):
            ev_cols = [_column_index(schema, c) for c in conditions]
            for c, v in conditions.items():
                df[schema.names[_column_index(schema, c)]] = [v] * len(df)
        elif isinstance(conditions, (list, tuple)):
            ev_cols = [_column_index(schema, c) for c in conditions]
        else:
            raise TypeError("conditions must be a dict of values or a list of column names")
        Z, C, outside = self._codes(df)
        free = [j for j in range(schema.d) if j not in ev_cols]
        if not free:
            raise ValueError("conditions cover every column; nothing is free")
        Cm = C.copy()
        Cm[:, free] = UNKNOWN
        joint = self._log_marginal(C)
        marg = self._log_marginal(Cm)
        Cw = np.full_like(C, UNKNOWN)
        Cw[:, free] = C[:, free]
        lp = joint - marg - self.grid_.log_width(Cw)
        lp[outside[:, free].any(axis=1)] = -np.inf
        return lp

    def score(self, X, y=None) -> float:
        """Mean estimated log-likelihood per row (nats; see :meth:`log_prob`)."""
        return float(np.mean(self.log_prob(X)))

    # ------------------------------------------------------------------ single-column conditionals
    def _column_posterior(self, X, target) -> tuple[int, np.ndarray, pd.Index]:
        """``(j, probs [n, n_values_j], index)``: ``q(x_j = k | the row's other entries)``
        over the values of ``j`` (its missing state excluded). Exact."""
        self._check_fitted()
        schema = self.schema_
        j = _column_index(schema, target)
        df = X if isinstance(X, pd.DataFrame) else self.encoder_.inverse_transform(
            self._encode(X))
        if isinstance(X, pd.DataFrame) and schema.names[j] not in X.columns:
            df = X.copy()
            df[schema.names[j]] = np.nan
        Z, C, outside = self._codes(df)
        nv = int(self.grid_.n_values[j])
        logit = np.empty((len(C), nv))
        C[:, j] = 0
        unk = (C == UNKNOWN).any(axis=1)
        e = self.energy_
        if (~unk).any():
            logit[~unk] = e.energy_slice(C[~unk], j, full=False)[:, :nv]
        if unk.any():
            for k in range(nv):
                Ck = C[unk].copy()
                Ck[:, j] = k
                logit[unk, k] = self._log_marginal(Ck)
        logit -= logit.max(axis=1, keepdims=True)
        p = np.exp(logit)
        p /= p.sum(axis=1, keepdims=True)
        return j, p, df.index

    def predict_proba(self, X, target=None) -> pd.DataFrame:
        """Exact ``q(target = level | the row's other entries)`` of a discrete column (the
        row's own target entry is ignored; NaN entries as in :meth:`log_prob`)."""
        target = self._require_target(target, "predict_proba")
        spec = self.schema_[_column_index(self.schema_, target)]
        if not spec.is_discrete:
            raise ValueError(f"predict_proba needs a discrete target; column {spec.name!r} is "
                             f"{spec.kind} (use predict)")
        j, p, index = self._column_posterior(X, target)
        return pd.DataFrame(p, index=index,
                            columns=pd.Index(np.array(spec.categories + [None], object)[:-1]))

    def predict(self, X, target=None) -> pd.Series:
        """Any column from the row's other entries: the conditional mean over bin midpoints of
        a numeric column (spec §6.2), the mean level value of an ordinal integer column, the
        most probable level of a categorical one. Exact."""
        target = self._require_target(target, "predict")
        j, p, index = self._column_posterior(X, target)
        spec = self.schema_.columns[j]
        name = spec.name
        if not spec.is_discrete:
            return pd.Series(self.encoder_.decode_mean(j, p @ self.grid_.midpoints(j)),
                             index=index, name=name)
        if spec.numeric_levels:
            return pd.Series(p @ np.asarray(spec.categories, float), index=index, name=name)
        Zc = np.full((len(p), self.schema_.d), np.nan)
        Zc[:, j] = np.argmax(p, axis=1)
        vals = self.encoder_.inverse_transform(Zc).iloc[:, j]
        return pd.Series(vals.array, index=index, name=name)

    def expect(self, columns=None, conditions=None, *, n_draws: int = 1000,
               random_state=None):
        """Conditional mean of numeric / ordinal-integer columns, most probable level of
        categorical ones, given evidence — an **MCMC estimate** from Gibbs chains with the
        evidence clamped (``n_draws`` states per evidence set: the default protocol for a
        dict, one chain per row read every 2 sweeps after ``sample_burn_in`` for a DataFrame
        of per-row evidence). Missing states are not drawn. For one column given all the
        others, :meth:`predict` is exact. Returns a Series (dict / no evidence) or a
        DataFrame (per-row evidence; a Series for a single column label)."""
        self._check_fitted()
        schema = self.schema_
        single = columns is not None and not isinstance(columns, (list, tuple, pd.Index,
                                                                  np.ndarray))
        names = list(schema.names) if columns is None else [columns] if single else list(columns)
        cols = [_column_index(schema, c) for c in names]
        if not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
        rng = as_generator(random_state)
        ev, per_row = parse_conditions(self, conditions)
        allowed, bad, msg = self._allowed(ev, missing=False)
        if bad.any() and not per_row:
            raise ZeroProbabilityError(msg)
        if bad.any():
            warnings.warn(f"{int(bad.sum())} row(s) have zero-probability evidence, e.g. {msg}; "
                          f"their result is NaN, the other rows are unaffected", RuntimeWarning,
                          stacklevel=2)
            ev = _without_rows(ev, bad)
        if per_row:
            m = ev.m
            b = max(int(self.sample_burn_in), 1)
            C = self._gibbs(m * n_draws, rng, allowed, np.arange(m), m, b, 2)
            erow = np.tile(np.arange(m), n_draws)
        else:
            m = 1
            ch, b, th = self._protocol(n_draws, None, None, None)
            free = np.nonzero(np.isnan(ev.point[0]))[0]
            C = self._gibbs(int(n_draws), rng, allowed, np.zeros(ch, np.int64), ch, b, th, free)
            erow = np.zeros(int(n_draws), np.int64)
        Z = _respect_evidence(self.grid_.decode(C, rng), C, ev, erow, self.grid_, self.schema_,
                              rng)
        order = np.argsort(erow, kind="stable")  # rows grouped by evidence row
        Z, C = Z[order].reshape(m, -1, schema.d), C[order].reshape(m, -1, schema.d)
        point = np.full((m, schema.d), np.nan)
        level_mean = {}
        for j in cols:
            spec = schema.columns[j]
            if spec.is_discrete:
                nv = int(self.grid_.n_values[j])
                p = np.stack([(C[:, :, j] == k).mean(axis=1) for k in range(nv)], axis=1)
                if spec.numeric_levels:
                    level_mean[j] = np.where(bad, np.nan, p @ np.asarray(spec.categories, float))
                else:
                    point[:, j] = np.argmax(p, axis=1)
            else:
                point[:, j] = Z[:, :, j].mean(axis=1)
        point[bad] = np.nan
        dec = self.encoder_.inverse_transform(point)
        res = {schema.names[j]: level_mean[j] if j in level_mean else dec.iloc[:, j].to_numpy()
               for j in cols}
        if not per_row:
            return pd.Series({k: v[0] for k, v in res.items()}, dtype=object)
        out = pd.DataFrame(res, index=conditions.index)
        return out.iloc[:, 0] if single else out

    # ------------------------------------------------------------------ sampling
    def _allowed(self, ev, missing: bool) -> tuple[np.ndarray, np.ndarray, str]:
        """Per evidence row: the allowed-code mask ``[m, sum(n_codes)]``, a flag per row whose
        evidence has zero probability (its mask allows everything) and a message naming the
        first such row's column."""
        g = self.grid_
        off = g.code_offsets
        m = ev.m
        free = np.ones(int(off[-1]), np.uint8)
        if not missing:
            free[off[:-1][g.has_missing] + g.n_values[g.has_missing]] = 0
        allowed = np.tile(free, (m, 1))
        bad = np.zeros(m, bool)
        msg = ""
        names = self.schema_.names
        for j in range(g.d):
            sl = slice(off[j], off[j + 1])
            pt = ev.point[:, j]
            has = ~np.isnan(pt)
            if has.any():
                C, outside = g.codes(np.where(has, pt, np.nan)[:, None].repeat(g.d, 1))
                code = C[:, j]
                out_j = has & (outside[:, j] | (code == UNKNOWN))
                if out_j.any():
                    msg = msg or (f"evidence on column {names[j]!r} (row "
                                  f"{int(np.flatnonzero(out_j)[0])}) lies outside the "
                                  f"training range / levels")
                    bad |= out_j
                    has = has & ~out_j
                blk = np.zeros((m, off[j + 1] - off[j]), np.uint8)
                blk[np.nonzero(has)[0], code[has]] = 1
                allowed[has, sl] = blk[has]
            iv = ~np.isnan(ev.lo[:, j])
            if iv.any():
                e = g.edges[j]
                lo_e, hi_e = e[:-1], e[1:]
                # bins meeting the interval in a set of positive length (a bin that only
                # touches it, e.g. (7.5, 8.5] and an integer range from 8.5, holds none)
                ok = (hi_e[None, :] > ev.lo[iv, j][:, None]) & \
                    (lo_e[None, :] < ev.hi[iv, j][:, None])
                blk = np.zeros((int(iv.sum()), off[j + 1] - off[j]), np.uint8)
                blk[:, : g.n_values[j]] = ok
                allowed[iv, sl] = blk
            if j in ev.sets:
                act, mk = ev.sets[j]
                mk = np.broadcast_to(mk, (m, mk.shape[-1]))
                blk = np.zeros((int(act.sum()), off[j + 1] - off[j]), np.uint8)
                blk[:, : mk.shape[1]] = mk[act]
                allowed[act, sl] = blk
        for j in range(g.d):
            empty = allowed[:, off[j]:off[j + 1]].sum(1) == 0
            if empty.any():
                msg = msg or (f"evidence on column {names[j]!r} (row "
                              f"{int(np.flatnonzero(empty)[0])}) has zero probability under "
                              f"the model")
                bad |= empty
        allowed[bad] = free
        return allowed, bad, msg

    def _init_chains(self, n: int, allowed: np.ndarray, arow: np.ndarray,
                     rng: np.random.Generator) -> np.ndarray:
        """``q0`` draws restricted to each chain's allowed codes."""
        g = self.grid_
        off = g.code_offsets
        out = np.empty((n, g.d), np.int32)
        u = rng.random((n, g.d))
        q0 = np.exp(self.energy_.log_q0)
        for j in range(g.d):
            w = q0[None, off[j]:off[j + 1]] * allowed[arow, off[j]:off[j + 1]]
            cdf = np.cumsum(w, axis=1)
            cdf /= cdf[:, -1:]
            out[:, j] = np.minimum((cdf < u[:, j:j + 1]).sum(axis=1), cdf.shape[1] - 1)
        return out

    def _gibbs(self, n: int, rng: np.random.Generator, allowed: np.ndarray,
               arow: np.ndarray, chains: int, burn_in: int, thin: int,
               free_cols: np.ndarray | None = None, X0: np.ndarray | None = None) -> np.ndarray:
        per = -(-n // chains)
        if X0 is None:
            X0 = self._init_chains(chains, allowed, arow, rng)
        rec = self.component("sampler").run(
            self.energy_, X0, n_sweeps=burn_in + (per - 1) * thin + 1, record_from=burn_in,
            thin=thin, n_records=per, rng=rng, free_cols=free_cols, allowed=allowed,
            allowed_row=arow)
        # interleave chains so that any prefix mixes all chains
        return rec.transpose(1, 0, 2).reshape(-1, rec.shape[2])[:n]

    def sample_encoded(self, n: int, random_state=None, missing: bool = True, *,
                       chains: int | None = None, burn_in: int | None = None,
                       thin: int | None = None, start: str | None = None) -> np.ndarray:
        """``n`` encoded rows by Gibbs sampling (protocol: see the class docstring)."""
        self._check_fitted()
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        rng = as_generator(random_state)
        if n == 0:
            return np.empty((0, self.schema_.d))
        ev, _ = parse_conditions(self, None)
        allowed, _, _ = self._allowed(ev, missing)
        start = self.sample_start if start is None else start
        if start not in ("training", "q0"):
            raise ValueError(f"start must be 'training' or 'q0', got {start!r}")
        X0 = getattr(self, "chain_start_", None) if start == "training" else None
        if X0 is not None and not missing:
            X0 = X0[allowed[0, X0 + self.grid_.code_offsets[:-1]].all(axis=1)]
        if X0 is not None and len(X0):
            b = self.sample_warm_burn_in if burn_in is None else burn_in
            ch, b, th = self._protocol(n, len(X0) if chains is None else chains, b, thin)
            X0 = X0[rng.choice(len(X0), ch, replace=ch > len(X0))]
        else:
            ch, b, th = self._protocol(n, chains, burn_in, thin)
            X0 = None
        C = self._gibbs(int(n), rng, allowed, np.zeros(ch, np.int64), ch, b, th, X0=X0)
        return constrain(self.grid_.decode(C, rng), self.schema_)

    def _protocol(self, n, chains, burn_in, thin) -> tuple[int, int, int]:
        ch = int(self.sample_chains if chains is None else chains)
        b = int(self.sample_burn_in if burn_in is None else burn_in)
        th = int(self.sample_thin if thin is None else thin)
        if ch < 1 or b < 0 or th < 1:
            raise ValueError(f"need chains >= 1, burn_in >= 0, thin >= 1; got {ch}, {b}, {th}")
        return min(ch, int(n)), b, th

    def sample(self, n: int | None = None, random_state=None, conditions=None,
               on_empty: str | None = None, missing: bool = True, *, chains: int | None = None,
               burn_in: int | None = None, thin: int | None = None,
               start: str | None = None) -> pd.DataFrame:
        """``n`` synthetic rows by Gibbs sampling (an MCMC approximation of the model).

        ``conditions``: a dict (one evidence set: values clamp their column, intervals and
        level sets restrict it) or a DataFrame of per-row evidence (one chain per row, the
        state after ``burn_in`` sweeps is kept). ``missing``: allow the missing state of
        columns that had missing values at fit. ``chains``/``burn_in``/``thin`` override the
        default protocol; ``start`` (``"training"`` / ``"q0"``) overrides ``sample_start`` for
        unconditional draws. Evidence of zero probability (outside the training range, an unseen
        level, an empty interval) raises ``ZeroProbabilityError`` naming the column, or with
        ``on_empty="unconditional"`` those rows are drawn without their evidence, or with
        ``"nan"`` (the default for a per-row DataFrame) returned with their given values and
        every other entry missing (a warning).
        """
        self._check_fitted()
        rng = as_generator(random_state)
        if conditions is None:
            if n is None:
                raise ValueError("n is required when no conditions are given")
            return self.encoder_.inverse_transform(
                self.sample_encoded(n, rng, missing, chains=chains, burn_in=burn_in,
                                    thin=thin, start=start))
        if on_empty is not None:
            check_on_empty(on_empty, False)
        ev, per_row = parse_conditions(self, conditions, on_empty)
        on_empty = check_on_empty(on_empty, per_row)
        allowed, bad, msg = self._allowed(ev, missing)
        given_pts = ev.point[bad].copy()
        if bad.any():
            if on_empty == "raise":
                raise ZeroProbabilityError(f"{msg}; pass on_empty='unconditional' to draw such "
                                           f"rows without their evidence, or 'nan' to return "
                                           f"them as missing")
            what = ("drawn unconditionally" if on_empty == "unconditional"
                    else "returned with their given values only")
            warnings.warn(f"{msg}; {int(bad.sum())} evidence row(s) {what} "
                          f"(on_empty={on_empty!r})", RuntimeWarning, stacklevel=2)
            ev = _without_rows(ev, bad)
        if per_row:
            if n is not None and n != ev.m:
                raise ValueError(f"n={n} does not match the {ev.m} rows of conditions")
            n = ev.m
            b = int(self.sample_burn_in if burn_in is None else burn_in)
            C = self._gibbs(n, rng, allowed, np.arange(n), n, max(b, 1), 1)
            erow = np.arange(n)
        else:
            if n is None:
                raise ValueError("n is required with a dict of conditions")
            ch, b, th = self._protocol(n, chains, burn_in, thin)
            free = np.nonzero(np.isnan(ev.point[0]))[0]
            C = self._gibbs(int(n), rng, allowed, np.zeros(ch, np.int64), ch, b, th, free)
            erow = np.zeros(int(n), np.int64)
        Z = self.grid_.decode(C, rng)
        Z = _respect_evidence(Z, C, ev, erow, self.grid_, self.schema_, rng)
        rows = np.zeros(0, np.int64)
        if on_empty == "nan" and bad.any():  # bad: per evidence row (one for a dict)
            rows = np.flatnonzero(bad) if per_row else np.arange(len(Z))
            given_pts = given_pts if per_row else np.repeat(given_pts, len(rows), axis=0)
            Z[rows] = np.where(np.isnan(given_pts), Z[rows], given_pts)
        out = blank_rows(self.encoder_.inverse_transform(Z), rows, ~np.isnan(given_pts)
                         if len(rows) else np.zeros((0, Z.shape[1]), bool))
        if per_row and isinstance(conditions, pd.DataFrame):
            out.index = conditions.index
        return out

    # ------------------------------------------------------------------ imputation
    def impute(self, X, method: str = "expectation", n_imputations: int = 1,
               random_state=None):
        """Fill NaN cells from the model given each row's observed cells.

        A row with one NaN cell uses the exact conditional (``"expectation"``: mean over bin
        midpoints / ordinal mean / most probable level; ``"sample"``: one exact draw per
        imputation). Rows with more NaN cells run a Gibbs chain over them with the observed
        cells clamped (``sample_burn_in`` sweeps); ``"expectation"`` then averages 50 states
        (an MCMC estimate). Imputed cells never take the missing state. Input handling and
        output are those of every learner (:func:`forestgen.inference.api.impute`: observed
        cells, dtypes and the input's type kept).
        """
        from forestgen.inference.api import impute

        self._check_fitted()
        if method not in ("expectation", "sample"):
            raise ValueError(f"method must be 'expectation' or 'sample', got {method!r}")
        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=as_generator(random_state),
                      filler=lambda Z, miss, meth, rng: self._impute_once(Z, miss, meth, rng))

    def _impute_once(self, Z, miss, method, rng) -> np.ndarray:
        g = self.grid_
        Zi = Z.copy()
        n_miss = miss.sum(axis=1)
        C, outside = g.codes(np.where(miss, 0.0, Z))
        for j in range(g.d):
            rows = np.nonzero((n_miss == 1) & miss[:, j])[0]
            if len(rows) == 0:
                continue
            Cr = C[rows].copy()
            Cr[:, j] = 0
            logit = self.energy_.energy_slice(Cr, j, full=False)[:, : g.n_values[j]]
            p = np.exp(logit - logit.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            if method == "sample":
                cdf = np.cumsum(p, axis=1)
                code = np.minimum((cdf < rng.random(len(rows))[:, None]).sum(1),
                                  p.shape[1] - 1)
                Ck = C[rows].copy()
                Ck[:, j] = code
                Zi[rows, j] = g.decode(Ck, rng)[:, j]
            else:
                Zi[rows, j] = self._point_value(j, p)
        multi = np.nonzero(n_miss > 1)[0]
        if len(multi):
            off = g.code_offsets
            allowed = np.ones((len(multi), int(off[-1])), np.uint8)
            for j in range(g.d):
                obs = ~miss[multi, j]
                blk = np.zeros((len(multi), off[j + 1] - off[j]), np.uint8)
                blk[np.arange(len(multi)), np.where(obs, C[multi, j], 0)] = 1
                if not g.discrete[j] or True:
                    blk[~obs, :] = 1
                    if g.has_missing[j]:
                        blk[~obs, g.n_values[j]] = 0
                allowed[:, off[j]:off[j + 1]] = blk
            b = max(int(self.sample_burn_in), 1)
            n_rec = 1 if method == "sample" else 50
            X0 = self._init_chains(len(multi), allowed, np.arange(len(multi)), rng)
            rec = self.component("sampler").run(
                self.energy_, X0, n_sweeps=b + n_rec, record_from=b, thin=1, n_records=n_rec,
                rng=rng, allowed=allowed, allowed_row=np.arange(len(multi)))
            for j in range(g.d):
                rows = np.nonzero(miss[multi, j])[0]
                if len(rows) == 0:
                    continue
                if method == "sample":
                    Zi[multi[rows], j] = g.decode(rec[rows, 0], rng)[:, j]
                else:
                    codes = rec[rows, :, j]
                    p = np.stack([(codes == k).mean(1) for k in range(g.n_values[j])], 1)
                    Zi[multi[rows], j] = self._point_value(j, p)
        return Zi

    def _point_value(self, j: int, p: np.ndarray) -> np.ndarray:
        spec = self.schema_.columns[j]
        if not spec.is_discrete:
            return p @ self.grid_.midpoints(j)
        if spec.numeric_levels:
            vals = p @ np.asarray(spec.categories, float)
            return np.argmin(np.abs(np.asarray(spec.categories, float)[None, :]
                                    - vals[:, None]), axis=1).astype(float)
        return np.argmax(p, axis=1).astype(float)

    # ------------------------------------------------------------------ torch / warmup
    def to_torch(self, *, dtype=None, device=None):
        """This model as a :class:`torch.distributions.Distribution` over encoded rows
        (``log_prob`` is piecewise constant: gradients are zero); ``dtype`` and ``device`` are
        those of its samples, as for every learner."""
        from forestgen.families.energy.distribution import EnergyDistribution

        return EnergyDistribution(self, dtype=dtype, device=device)

    def warmup(self) -> NRGBoost:
        self._check_fitted()
        Z = self.sample_encoded(2, random_state=0, chains=2, burn_in=1, thin=1)
        self.log_prob_encoded(Z)
        return self

    # ------------------------------------------------------------------ persistence
    def save(self, path, compress: bool = True):
        """Write the model file (:mod:`forestgen.modelfile`: arrays + JSON, no pickle, atomic);
        ``compress=False`` stores the arrays as they are, as :meth:`GenerativeForest.save`."""
        from forestgen.modelfile import FORMAT_VERSION, to_json, write_model_file

        self._check_fitted()
        arrays = self.energy_.trees.to_arrays()
        arrays["log_q0"] = self.energy_.log_q0
        if getattr(self, "chain_start_", None) is not None:
            arrays["chain_start"] = self.chain_start_
        arrays.update({f"grid.{k}": v for k, v in self.grid_.to_arrays().items()})
        meta = {"format_version": FORMAT_VERSION, "learner": registry.name_of("learner", self),
                "params": {k: to_json(v, k) for k, v in self.get_params().items()},
                "schema": self.schema_.to_dict(),
                "extra": {"log_z": float(self.log_z_), "log_z_se": float(self.log_z_se_),
                          "log_z_tracker": float(self.log_z_tracker_)}}
        return write_model_file(path, arrays, meta, compress=compress)

    @classmethod
    def _from_file(cls, arrays: dict, meta: dict) -> NRGBoost:
        """Rebuild from a model file; the trees are checked before any kernel sees them."""
        from forestgen.data.schema import Schema
        from forestgen.modelfile import from_json

        model = cls(**from_json(meta["params"]))
        schema = Schema.from_dict(meta["schema"])
        schema.check()
        model.encoder_ = TableEncoder.from_schema(schema)
        grid = Grid.from_arrays({k[5:]: v for k, v in arrays.items() if k.startswith("grid.")})
        if grid.d != schema.d:
            raise ValueError(f"the grid has {grid.d} columns, the schema {schema.d}")
        grid.check(schema)
        trees = EnergyTrees.from_arrays(arrays)
        _check_trees(trees, grid)
        log_q0 = np.asarray(arrays["log_q0"], np.float64)
        if log_q0.shape != (int(grid.code_offsets[-1]),):
            raise ValueError("log_q0 does not match the grid")
        if np.isnan(log_q0).any() or (log_q0 == np.inf).any():
            raise ValueError("log_q0 must hold log-probabilities (no NaN or +inf)")
        model.grid_ = grid
        model.energy_ = registry.component_class(
            "ensembler", model.ensembler or model.model_family.slots["ensembler"], Ensembler)(
            grid, log_q0, trees)
        model.chain_start_ = None
        if "chain_start" in arrays:
            cs = np.asarray(arrays["chain_start"])
            if (cs.ndim != 2 or cs.shape[1] != grid.d or not np.issubdtype(cs.dtype, np.integer)
                    or np.any(cs < 0) or np.any(cs >= grid.n_codes[None, :])):
                raise ValueError("chain_start does not match the grid")
            model.chain_start_ = cs.astype(np.int32)
        ex = meta["extra"]
        for key in ("log_z", "log_z_se", "log_z_tracker"):  # the estimate the queries use
            v = ex[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                    key == "log_z" and not math.isfinite(v)):
                raise ValueError(f"extra {key} must be a {'finite ' * (key == 'log_z')}"
                                 f"number, got {v!r}")
        model.log_z_, model.log_z_se_ = float(ex["log_z"]), float(ex["log_z_se"])
        model.log_z_tracker_ = float(ex["log_z_tracker"])
        return model


def _check_trees(tr: EnergyTrees, grid: Grid) -> None:
    """Every node id, feature and routing byte in range; children after their parent."""
    n = len(tr.feature)
    off = np.asarray(tr.node_offsets, np.int64)
    if off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 1):
        raise ValueError("bad tree offsets")
    for arr in (tr.threshold, tr.nan_left, tr.left, tr.right, tr.cat_off, tr.value):
        if len(arr) != n:
            raise ValueError("tree arrays of different lengths")
    if tr.uses.shape != (len(off) - 1, grid.d) or len(tr.depth) != len(off) - 1:
        raise ValueError("bad per-tree arrays")
    tree_of = np.repeat(np.arange(len(off) - 1), np.diff(off))
    internal = np.nonzero(tr.feature >= 0)[0]
    f = tr.feature[internal]
    if np.any(f >= grid.d) or np.any(tr.feature < -1):
        raise ValueError("a split names a column out of range")
    for ch in (tr.left[internal], tr.right[internal]):
        if np.any(ch <= internal) or np.any(ch >= n) or np.any(tree_of[ch] != tree_of[internal]):
            raise ValueError("a child id is out of range")
    co = tr.cat_off[internal]
    if np.any(co < 0) or np.any(co + grid.n_codes[f] > len(tr.cat_left)):
        raise ValueError("a routing table is out of range")
    if not np.all(np.isfinite(tr.value)):
        raise ValueError("non-finite leaf energy")
    depth = np.zeros(n, np.int64)
    for node in internal:  # children have larger ids, so one forward pass suffices
        depth[tr.left[node]] = depth[tr.right[node]] = depth[node] + 1
    if np.any(np.maximum.reduceat(depth, off[:-1]) > tr.depth):
        raise ValueError("a tree is deeper than its recorded depth")
    uses = np.zeros((len(off) - 1, grid.d), np.uint8)
    uses[tree_of[internal], f] = 1
    if not np.array_equal(tr.uses, uses):
        raise ValueError("trees.uses does not match the columns the trees split on")


def _without_rows(ev, rows: np.ndarray):
    """The evidence with the flagged rows emptied (no point, interval or set evidence)."""
    ev = copy.deepcopy(ev)
    ev.point[rows] = np.nan
    ev.lo[rows] = np.nan
    ev.hi[rows] = np.nan
    for j, (act, mk) in list(ev.sets.items()):
        act = np.asarray(act, bool).copy()
        act[rows] = False
        ev.sets[j] = (act, mk)
    return ev


def _respect_evidence(Z, C, ev, erow, grid: Grid, schema, rng) -> np.ndarray:
    """Point evidence keeps its exact value; numeric intervals are drawn as the bin decodes
    (:meth:`Grid.decode`: uniform over its draw range, so a point-mass bin gives its value)
    restricted to the interval, else (the draw range misses it) inside bin ∩ interval, then
    snapped to a point of the column's decimals grid inside the interval, so that decoding
    (rounding to the training decimals) keeps the value in it."""
    for j in range(grid.d):
        pt = ev.point[erow, j]
        has = ~np.isnan(pt)
        Z[has, j] = pt[has]
        iv = ~np.isnan(ev.lo[erow, j])
        if iv.any() and not grid.discrete[j]:
            e = grid.edges[j]
            c = C[iv, j]
            lo_e, hi_e = ev.lo[erow[iv], j], ev.hi[erow[iv], j]  # (lo, hi]
            a = np.maximum(e[c], lo_e)
            b = np.minimum(e[c + 1], hi_e)
            oa = np.maximum(grid.obs_lo[j][c], np.nextafter(lo_e, np.inf))
            ob = np.minimum(grid.obs_hi[j][c], hi_e)
            use = oa <= ob
            a, b = np.where(use, oa, a), np.where(use, ob, b)
            z = a + rng.random(int(iv.sum())) * np.maximum(b - a, 0.0)
            spec = schema.columns[j]
            if spec.has_grid:
                z = snap_to_grid(z, spec, ev.lo[erow[iv], j], ev.hi[erow[iv], j],
                                 lambda v: np.ones(len(v), bool))
            Z[iv, j] = z
    return Z
