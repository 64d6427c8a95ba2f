"""NRGBoost's queries on its energy (Bravo, ICLR 2025; spec ``nrgboost_def.md`` §5-6): the
density ``f(x) - log Z`` with unobserved columns summed over the grid, single-column
conditionals (``predict_proba``, ``predict``), sampling by Gibbs chains (unconditional and
given evidence), ``expect`` and ``impute``. :class:`EnergyQueries` is mixed into
:class:`~forestgen.families.energy.nrgboost.NRGBoost`."""

from __future__ import annotations

import copy
import itertools
import math
import warnings

import numpy as np
import pandas as pd

from forestgen.data.metadata import constrain
from forestgen.data.support import (
    clamp_query_rows,
    interval_ends,
    rows_to_support,
    to_support,
)
from forestgen.families.energy.grid import UNKNOWN, Grid
from forestgen.inference.conditions import (
    Not,
    ZeroProbabilityError,
    blank_rows,
    check_on_empty,
    column_index,
    parse_conditions,
    report_empty,
    target_index,
)
from forestgen.logsumexp import logsumexp
from forestgen.validation import (
    as_generator,
)

MAX_ENUMERATION = 4096  # joint grid cells enumerated to marginalise unobserved columns
MARGINAL_DRAWS = 4096  # q0 draws estimating a marginal over a larger unobserved grid
#: an estimated marginal (more than MAX_ENUMERATION unobserved cells) whose observed columns
#: have at most this many joint cells is the mean over the model's own draws of their
#: conditional pmf given the draw's other columns (:meth:`_drawn_marginals`; it sums to one
#: over them) instead of an importance-sampling estimate divided by ``log_z_``
SELF_NORMALISED_CELLS = 256


class EnergyQueries:
    """The query engine of a fitted NRGBoost (a mixin: it reads ``grid_``, ``energy_``,
    ``log_z_`` and the sampling parameters of the learner)."""

    @property
    def n_trees_(self) -> int:
        self.check_fitted()
        return self.energy_.trees.n_trees

    def _codes(self, X, query: str | None = None,
               skip=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Encoded rows and grid codes; a column absent from a DataFrame is :data:`UNKNOWN`
        (marginalised over all its states, the missing one included). With ``query`` (a
        per-row predictive query), values outside the training range are moved to its
        nearest end (:func:`~forestgen.data.support.clamp_query_rows`)."""
        Z = self.encode_rows(X)
        if query is not None:
            clamp_query_rows(self, Z, query, skip)
        C, outside = self.grid_.codes(Z)
        C[:, self._absent(X)] = UNKNOWN
        return Z, C, outside

    def _absent(self, X) -> list[int]:
        """The columns a DataFrame ``X`` lacks (none for arrays)."""
        if not isinstance(X, pd.DataFrame):
            return []
        return [j for j, name in enumerate(self.schema_.names)
                if not any(c == name for c in X.columns)]

    # ------------------------------------------------------------------ nested missingness
    def _nesting(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(parent [d], rate [d])`` of the nested missing columns (``parent[k] >= 0``), or
        ``None`` (no nesting found at fit, or a model written before it was kept)."""
        parent = getattr(self, "nest_parent_", None)
        if parent is None or not (parent >= 0).any():
            return None
        return parent, self.nest_rate_

    def _missing_codes(self, C: np.ndarray, outside: np.ndarray) -> np.ndarray:
        """``[n, d]``: the entries that are missing — a column's missing state, or NaN
        (:data:`UNKNOWN`) in a nested column, which has no missing state on the grid; an
        unseen level (``outside``, also coded :data:`UNKNOWN`) is a value, not missing."""
        g = self.grid_
        return np.where(g.has_missing[None, :], C == g.n_values[None, :],
                        (C == UNKNOWN) & ~outside)

    def _nest_log_factor(self, miss: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Per row, the log-probability of the nested columns' missing states given their
        parents' (``rate_k`` = ``k``'s training missing rows over its parent's): ``log rate_k``
        missing where the parent is, ``log(1 - rate_k)`` present where the parent is missing,
        0 present where the parent is present, ``-inf`` missing where the parent is present.
        Columns not ``known`` (marginalised) add nothing (their factor sums to one over their
        states); a known nested column whose parent is marginalised is not supported."""
        out = np.zeros(len(miss))
        nest = self._nesting()
        if nest is None:
            return out
        parent, rate = nest
        for k in np.flatnonzero(parent >= 0):
            p = int(parent[k])
            kk = known[:, k]
            if (kk & ~known[:, p]).any():
                names = self.schema_.names
                raise NotImplementedError(
                    f"{type(self).__name__}: {names[k]!r} is missing only where {names[p]!r} "
                    f"is; a density with {names[k]!r} given and {names[p]!r} marginalised is "
                    f"not supported")
            mk, mp = miss[:, k], miss[:, p]
            with np.errstate(divide="ignore"):
                f = np.where(mk, np.where(mp, math.log(rate[k]), -np.inf),
                             np.where(mp, np.log1p(-rate[k]), 0.0))
            out += np.where(kk, f, 0.0)
        return out

    def _blank_nested(self, Z: np.ndarray, rng: np.random.Generator,
                      present: np.ndarray | None = None) -> np.ndarray:
        """Blank the nested columns of decoded rows ``Z`` (in place): each only where its
        parent is blank, there with probability ``rate_k``
        (:func:`forestgen.sampling.missingness.blank`, parents first); ``present [n, d]``
        (evidence) columns are never blanked. Draws from ``rng`` only if there is nesting."""
        nest = self._nesting()
        if nest is None or len(Z) == 0:
            return Z
        from forestgen.sampling.missingness import blank

        parent, rate = nest
        nested = parent >= 0
        own = np.where(nested[None, :], rate[None, :], np.isnan(Z).astype(float))
        if present is not None:
            own = np.where(present, 0.0, own)
        hit = blank(rng.random(Z.shape), own, np.ones_like(own), parent)
        Z[:, nested] = np.where(hit[:, nested], np.nan, Z[:, nested])
        return Z

    def _log_marginal(self, C: np.ndarray, logw: np.ndarray | None = None) -> np.ndarray:
        """``log sum_{x_U} exp f(x_obs, x_U)`` per row, ``U`` = its :data:`UNKNOWN` columns
        (exact enumeration up to :data:`MAX_ENUMERATION` cells, else an estimate); ``logw``
        (flat over every column's codes, ``-inf`` for a code left out) weights each summed
        code: range or set evidence on a column of ``U``."""
        out = np.empty(len(C))
        unk = C == UNKNOWN
        patterns, inv = np.unique(unk, axis=0, return_inverse=True)
        inv = inv.ravel()
        e = self.energy_
        nc = self.grid_.n_codes
        off = self.grid_.code_offsets
        for p, pat in enumerate(patterns):
            rows = np.nonzero(inv == p)[0]
            Cp = C[rows].copy()
            U = np.nonzero(pat)[0]
            if len(U) == 0:
                out[rows] = e.energy(Cp)
                continue
            if len(U) == len(pat) and logw is None:
                out[rows] = self._log_z_parts()
                continue
            last, rest = U[-1], U[:-1]
            if logw is None:
                ranges = [range(int(nc[j])) for j in rest]
                w_last = 0.0
            else:  # only the codes evidence keeps
                ranges = [np.flatnonzero(np.isfinite(logw[off[j]:off[j + 1]])) for j in rest]
                w_last = logw[off[last]:off[last + 1]]
            cells = math.prod(len(r) for r in ranges) * int(nc[last])
            if cells > MAX_ENUMERATION and len(rest):
                out[rows] = self._log_marginal_estimate(Cp, U, logw)
                continue
            acc = np.full(len(rows), -np.inf)
            for combo in itertools.product(*ranges):
                Cp[:, rest] = combo
                lw = 0.0 if logw is None else float(logw[off[rest] + np.asarray(combo, int)]
                                                    .sum())
                acc = np.logaddexp(acc, lw + logsumexp(
                    e.energy_slice(Cp, int(last), full=True) + w_last, axis=1))
            out[rows] = acc
        return out

    def _drawn_marginals(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, log P(x_O))`` for the rows whose marginal would be estimated (more than
        :data:`MAX_ENUMERATION` cells of their unobserved columns ``U``) while their observed
        columns ``O`` have at most :data:`SELF_NORMALISED_CELLS` joint cells: the mean, over
        :data:`MARGINAL_DRAWS` chain states of the model's own law (seeded, kept per model),
        of the exact conditional pmf of ``x_O`` given the state's ``x_U`` — a Rao-Blackwellised
        estimate of the law :meth:`sample` draws from, which sums to one over the cells. An
        importance-sampling estimate from ``q0`` divided by ``log_z_`` summed penguins'
        species probabilities (its numeric columns missing together) to 1.43, 0.53 for
        Gentoo against 0.40 in its draws."""
        nc = self.grid_.n_codes
        unk = C == UNKNOWN
        patterns, inv = np.unique(unk, axis=0, return_inverse=True)
        inv = inv.ravel()
        rows, vals = [], []
        for p, pat in enumerate(patterns):
            U, O = np.nonzero(pat)[0], np.nonzero(~pat)[0]
            if len(U) < 2 or len(O) == 0 or \
                    math.prod(int(nc[j]) for j in U) <= MAX_ENUMERATION:
                continue  # exact (enumerated), or every column unobserved
            dims = tuple(int(nc[j]) for j in O)
            if math.prod(dims) > SELF_NORMALISED_CELLS:
                continue
            log_p = self._cell_log_marginal(tuple(int(j) for j in O), dims)
            r = np.nonzero(inv == p)[0]
            rows.append(r)
            vals.append(log_p[np.ravel_multi_index(tuple(C[r][:, O].T.astype(np.int64)),
                                                   dims)])
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(rows), np.concatenate(vals)

    def _cell_log_marginal(self, O: tuple, dims: tuple) -> np.ndarray:
        """``log P(x_O = cell)`` over the joint cells of columns ``O`` (C order), see
        :meth:`_drawn_marginals`; the chain states are drawn once per fitted model."""
        key = id(self.energy_)
        cache = getattr(self, "_marginal_draws", None)
        if cache is None or cache[0] != key:
            cache = (key, self._chain_codes(MARGINAL_DRAWS, np.random.default_rng(0)), {})
            self._marginal_draws = cache
        if O not in cache[2]:
            D = cache[1]
            cells = np.array(list(itertools.product(*[range(k) for k in dims])), np.int32)
            E = np.empty((len(D), len(cells)))
            X = D.copy()
            for k, cell in enumerate(cells):
                X[:, list(O)] = cell
                E[:, k] = self.energy_.energy(X)
            cond = E - logsumexp(E, axis=1)[:, None]  # log p(cell | the state's other columns)
            cache[2][O] = logsumexp(cond, axis=0) - math.log(len(D))
        return cache[2][O]

    def _log_z_parts(self) -> float:
        return float(self.log_z_)

    def _log_marginal_estimate(self, C: np.ndarray, U: np.ndarray,
                               logw: np.ndarray | None = None) -> np.ndarray:
        """Importance-sampling estimate of ``log sum_{x_U} exp f`` from :data:`MARGINAL_DRAWS`
        draws of the columns ``U`` from ``q0`` (times ``exp logw`` where given) — the same
        draws for every row, so a row's value does not depend on its batch."""
        e = self.energy_
        off = self.grid_.code_offsets
        rng = np.random.default_rng(0)
        if logw is None:
            D = e.sample_q0(MARGINAL_DRAWS, rng)[:, U]
            log_prop = e.log_q0[D + off[U]].sum(axis=1)
        else:  # q0 tilted by the weights, per column
            D = np.empty((MARGINAL_DRAWS, len(U)), np.int32)
            log_prop = np.zeros(MARGINAL_DRAWS)
            for k, j in enumerate(U):
                lp = e.log_q0[off[j]:off[j + 1]] + logw[off[j]:off[j + 1]]
                lp = lp - logsumexp(lp)
                cdf = np.cumsum(np.exp(lp))
                D[:, k] = np.minimum(np.searchsorted(cdf / cdf[-1], rng.random(MARGINAL_DRAWS),
                                                     side="right"), len(cdf) - 1)
                log_prop += lp[D[:, k]] - logw[off[j] + D[:, k]]
        out = np.empty(len(C))
        for i in range(len(C)):
            X = np.repeat(C[i:i + 1], MARGINAL_DRAWS, axis=0)
            X[:, U] = D
            out[i] = logsumexp(e.energy(X) - log_prop) - math.log(MARGINAL_DRAWS)
        return out

    def score_codes(self, C: np.ndarray, outside: np.ndarray,
                    known: np.ndarray | None = None, Z: np.ndarray | None = None) -> np.ndarray:
        """Estimated log density of code rows (see :meth:`log_prob`); ``known [n, d]``: the
        entries not marginalised (default: all); ``Z``: the encoded rows the codes are of,
        which a grid with a within-bin law needs (:meth:`~forestgen.families.energy.grid.Grid.
        log_within`; a uniform one uses the bin widths alone)."""
        if self._nesting() is not None:
            miss = self._missing_codes(C, outside)
            nest = self._nest_log_factor(miss, np.ones(C.shape, bool) if known is None
                                         else known)
        else:
            nest = 0.0
        C = np.where(outside, UNKNOWN, C).astype(np.int32)
        main = np.empty(len(C))
        drawn, log_p = self._drawn_marginals(C)
        main[drawn] = log_p
        rest = np.ones(len(C), bool)
        rest[drawn] = False
        if rest.any():
            main[rest] = self._log_marginal(C[rest]) - self.log_z_
        lp = main + self._log_within(C, Z) + nest
        bad = outside.any(axis=1)
        if bad.any():
            if self.density_floor is None:
                lp[bad] = -np.inf
            else:
                lp += outside @ self._log_floor()
        return lp

    def _log_within(self, C: np.ndarray, Z: np.ndarray | None) -> np.ndarray:
        """Log density of the numeric values given their bins (``-log width`` when uniform)."""
        g = self.grid_
        if Z is None:
            if g.fine_edges is not None:
                raise ValueError("this grid has a within-bin law: score_codes needs the "
                                 "encoded rows Z")
            return -g.log_width(C)
        return g.log_within(C, Z)

    def _log_floor(self) -> np.ndarray:
        """Per column: ``log(density_floor x uniform density on its training range)``."""
        return math.log(self.density_floor) - self.floor_log_volumes()

    def floor_log_volumes(self) -> np.ndarray:
        """Per column, the log measure of its training range on the grid (a discrete
        column: its number of levels in the domain)."""
        g = self.grid_
        out = np.zeros(g.d)
        for j in range(g.d):
            if g.discrete[j]:
                out[j] = math.log(int(g.in_domain(j).sum()))
            elif g.edges[j][-1] > g.edges[j][0]:
                out[j] = math.log(g.edges[j][-1] - g.edges[j][0])
        return out

    def apply_density_floor(self, logp, floor="default", over=None):
        """Not available: NRGBoost floors inside :meth:`log_prob`, on the row's entries (the
        law of its entries inside the grid times the floor on each entry outside), which a
        log density alone does not determine."""
        raise NotImplementedError(
            f"{type(self).__name__}: apply_density_floor is not available; its log_prob "
            f"floors each entry outside the training range itself")

    # ------------------------------------------------------------------ density
    def log_prob(self, X, conditions=None) -> np.ndarray:
        """Log density (nats) per row: numeric columns as densities (per unit of the column),
        discrete columns and the missing state as probabilities.

        **An estimate**: ``f(x) - log Ẑ`` with ``log Ẑ`` = ``log_z_`` (importance sampling from
        ``q0``; standard error ``log_z_se_``). NaN in a column that had missing values at fit
        is the *missing* state; in other columns it is marginalised: exactly by enumeration
        while the unobserved cells number at most 4,096, else estimated: while the observed
        columns' cells number at most 256, as the mean over 4,096 chain states of the model's
        own law of their exact conditional pmf given the state's other columns (it sums to
        one over them), else by importance sampling (4,096 ``q0`` draws) divided by
        ``log_z_``. A value outside the training range or an unseen level
        is marginalised and scored with ``density_floor`` (see the class docstring; ``-inf``
        with ``density_floor=None``).

        ``conditions`` (a dict of evidence in the forms of :mod:`forestgen.inference`: values,
        which override ``X``'s, intervals and level sets; a DataFrame of such evidence per row,
        a row of zero probability NaN; or a list of column names whose ``X`` values are the
        evidence): ``log q(x_free | evidence)`` — the free columns are the other
        observed columns of ``X`` — as a ratio of two sums of ``exp f`` (no ``log Z``
        involved): an interval weighs each bin by the share of its within-bin law inside it.
        Exact while each sum has at most 4,096 cells, else estimated as NaN marginals are;
        the denominator is the numerator summed over every code of the free columns while
        those number at most 4,096 per distinct evidence, so the conditional sums to one over
        them, estimates included. A free value outside the training range or an unseen level
        is scored as without conditions: marginalised, times ``density_floor`` times the
        uniform density on its column.
        """
        if isinstance(conditions, pd.DataFrame):
            return self._per_row_log_prob(X, conditions)
        if conditions is not None:
            return self._conditional_log_prob(X, conditions)
        Z, C, outside = self._codes(X)
        known = np.ones(C.shape, bool)
        known[:, self._absent(X)] = False
        return self.score_codes(C, outside, known, Z)

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """:meth:`log_prob` of already encoded rows."""
        self.check_fitted()
        Z = np.asarray(Z, np.float64)
        C, outside = self.grid_.codes(Z)
        return self.score_codes(C, outside, Z=Z)

    def unnormalised_log_prob(self, X) -> np.ndarray:
        """``f(x)`` minus bin log-widths: :meth:`log_prob` without the estimated ``log Z``."""
        return self.log_prob(X) + self.log_z_

    def _per_row_log_prob(self, X, conditions: pd.DataFrame) -> np.ndarray:
        """:meth:`log_prob` with a DataFrame of per-row evidence (row ``i`` of ``X`` given row
        ``i`` of ``conditions``, its missing cells free), each distinct evidence as a dict;
        a row whose evidence has probability zero (a level unseen at fit included) is NaN,
        with one warning, and the other rows are scored."""
        from forestgen.inference.api import warn_empty_rows

        if len(conditions) != len(X):
            raise ValueError(f"per-row conditions have {len(conditions)} rows but X has "
                             f"{len(X)}")
        ev, _ = parse_conditions(self, conditions, on_empty=None)  # (checks every cell)
        empty = np.zeros(ev.m, bool)
        for a, mask in ev.sets.values():
            empty |= a & ~mask.any(axis=1)
        names = list(conditions.columns)
        groups: dict[str, tuple[dict, list[int]]] = {}
        for i, row in enumerate(conditions.itertuples(index=False, name=None)):
            if not empty[i]:
                cond = {c: v for c, v in zip(names, row)
                        if not (v is None or (np.isscalar(v) and pd.isna(v)))}
                groups.setdefault(repr(list(cond.items())), (cond, []))[1].append(i)
        out = np.full(len(conditions), np.nan)
        msgs = [f"the evidence of row {conditions.index[int(np.argmax(empty))]!r} holds a "
                f"level unseen at fit"] if empty.any() else []
        failed = int(empty.sum())
        for cond, rows in groups.values():
            Xr = X.iloc[rows] if isinstance(X, pd.DataFrame) else np.asarray(X)[rows]
            try:
                out[rows] = self._conditional_log_prob(Xr, cond)
            except ZeroProbabilityError as err:
                msgs.append(f"row {conditions.index[rows[0]]!r}: {err}")
                failed += len(rows)
        if failed:
            warn_empty_rows(f"{type(self).__name__}.log_prob: {msgs[0]}", failed, "log_prob",
                            stacklevel=4)
        return out

    def _conditional_log_prob(self, X, conditions) -> np.ndarray:
        schema = self.schema_
        df = X if isinstance(X, pd.DataFrame) else self.encoder_.inverse_transform(
            self.encode_rows(X))
        df = df.copy()
        logw = None
        ranged: list[int] = []
        if isinstance(conditions, dict):
            ev_cols = [column_index(schema, c) for c in conditions]
            spans = {c: v for c, v in conditions.items() if not _is_point(v)}
            if spans:
                ranged = [column_index(schema, c) for c in spans]
                logw = self._evidence_log_weights(spans, ranged)
            for c, v in conditions.items():
                j = column_index(schema, c)
                df[schema.names[j]] = [np.nan if j in ranged else v] * len(df)
        elif isinstance(conditions, (list, tuple)):
            ev_cols = [column_index(schema, c) for c in conditions]
        else:
            raise TypeError(f"{type(self).__name__}.log_prob: conditions must be a dict of "
                            f"values, a DataFrame of per-row evidence or a list of column "
                            f"names, got {type(conditions).__name__}")
        Z, C, outside = self._codes(df)
        free = [j for j in range(schema.d) if j not in ev_cols]
        if not free:
            raise ValueError("conditions cover every column; nothing is free")
        C[:, ranged] = UNKNOWN  # summed over the codes the evidence keeps, weighted
        outside[:, ranged] = False
        gone = outside.copy()  # free values outside the training range: marginalised, and
        gone[:, ev_cols] = False  # scored by the floor below (as log_prob scores them)
        given = C.copy()
        C[gone] = UNKNOWN
        Cm = C.copy()
        Cm[:, free] = UNKNOWN
        joint = self._log_marginal(C, logw)
        marg = self._log_evidence_mass(C, Cm, free, logw)
        if self._nesting() is not None:
            miss = self._missing_codes(given, outside)
            known = np.ones(C.shape, bool)
            known[:, self._absent(df)] = False
            joint += self._nest_log_factor(miss, known)
            known[:, free] = False
            marg += self._nest_log_factor(miss, known)
        Cw = np.full_like(C, UNKNOWN)
        Cw[:, free] = C[:, free]
        lp = joint - marg + self._log_within(Cw, Z)
        if gone.any():
            if self.density_floor is None:
                lp[gone.any(axis=1)] = -np.inf
            else:
                lp += gone @ self._log_floor()
        return lp

    def _log_evidence_mass(self, C: np.ndarray, Cm: np.ndarray, free: list[int],
                           logw: np.ndarray | None) -> np.ndarray:
        """The normaliser of :meth:`_conditional_log_prob` per row: the sum of
        :meth:`_log_marginal` over every code of the row's observed free columns (the same
        sums, estimates included, as its numerator, so the conditional sums to one over them)
        while the distinct evidence rows times those codes number at most
        :data:`MAX_ENUMERATION`; else the marginal of the evidence ``Cm`` itself."""
        nc = self.grid_.n_codes
        obs = C[:, free] != UNKNOWN
        keys, inv = np.unique(np.concatenate([Cm, obs], axis=1), axis=0, return_inverse=True)
        inv = inv.ravel()
        d = C.shape[1]
        sizes = [math.prod(int(nc[j]) for j, o in zip(free, k[d:]) if o) for k in keys]
        if sum(sizes) > MAX_ENUMERATION:
            return self._log_marginal(Cm, logw)
        blocks = []
        for k in keys:
            F = [j for j, o in zip(free, k[d:]) if o]
            B = np.repeat(k[None, :d], math.prod(int(nc[j]) for j in F), axis=0)
            if F:
                B[:, F] = np.indices([int(nc[j]) for j in F]).reshape(len(F), -1).T
            blocks.append(B)
        lm = self._log_marginal(np.concatenate(blocks).astype(C.dtype), logw)
        ends = np.cumsum(sizes)
        mass = np.array([logsumexp(lm[e - n:e]) for e, n in zip(ends, sizes)])
        return mass[inv]

    def _evidence_log_weights(self, spans: dict, cols: list[int]) -> np.ndarray:
        """Per code (flat), the log of the share of its mass that range / set evidence
        ``spans`` keeps: 0 off the evidence columns ``cols``; on them a level in the set, a
        bin inside the interval (0), a bin the interval cuts (the within-bin law's share of it
        in the interval, the law :meth:`log_prob` integrates), else ``-inf``. Evidence of
        probability zero raises :class:`ZeroProbabilityError`."""
        g = self.grid_
        off = g.code_offsets
        ev, _ = parse_conditions(self, spans)
        allowed, bad, msg = self._allowed(ev, missing=False)
        if bad.any():
            raise ZeroProbabilityError(msg)
        w = np.ones(int(off[-1]))
        for j in cols:
            w[off[j]:off[j + 1]] = allowed[0, off[j]:off[j + 1]]
        with np.errstate(divide="ignore"):
            return np.log(w)

    def score(self, X, y=None) -> float:
        """Mean estimated log-likelihood per row (nats; see :meth:`log_prob`)."""
        return float(np.mean(self.log_prob(X)))

    # ------------------------------------------------------------------ single-column conditionals
    def _column_posterior(self, X, target, query: str = "predict_proba"
                          ) -> tuple[int, np.ndarray, pd.Index]:
        """``(j, probs [n, n_values_j], index)``: ``q(x_j = k | the row's other entries)``
        over the values of ``j`` (its missing state excluded). Exact."""
        self.check_fitted()
        schema = self.schema_
        j = target_index(schema, target)
        df = X if isinstance(X, pd.DataFrame) else self.encoder_.inverse_transform(
            self.encode_rows(X))
        if isinstance(X, pd.DataFrame) and schema.names[j] not in X.columns:
            df = X.copy()
            df[schema.names[j]] = np.nan
        Z, C, outside = self._codes(df, query, skip={j})
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

    def column_posterior(self, X, target) -> np.ndarray:
        """Exact ``q(x_target = code | the row's other entries)`` over the grid codes of
        ``target`` (its bins or levels, the missing state excluded), ``[n, n_values]``; the
        law the Gibbs sampler's single-column updates draw from."""
        return self._column_posterior(X, target)[1]

    def predict_proba(self, X, target=None) -> pd.DataFrame:
        """Exact ``q(target = level | the row's other entries)`` of a discrete column (the
        row's own target entry is ignored; NaN entries as in :meth:`log_prob`)."""
        target = self._require_target(target, "predict_proba")
        spec = self.schema_[target_index(self.schema_, target)]
        if not spec.is_discrete:
            raise ValueError(f"predict_proba needs a discrete target; column {spec.name!r} is "
                             f"{spec.kind} (use predict)")
        j, p, index = self._column_posterior(X, target)
        return pd.DataFrame(p, index=index,
                            columns=pd.Index(np.array(spec.categories + [None], object)[:-1]))

    def predict(self, X, target=None) -> pd.Series:
        """Any column from the row's other entries: the conditional mean of a numeric column
        over its bins' means (spec §6.2's midpoints under a uniform within-bin law), the mean
        level value of an ordinal integer column, the most probable level of a categorical
        one. Exact."""
        target = self._require_target(target, "predict")
        j, p, index = self._column_posterior(X, target, "predict")
        spec = self.schema_.columns[j]
        name = spec.name
        if not spec.is_discrete:
            return pd.Series(self.encoder_.decode_mean(j, p @ self.grid_.bin_means(j)),
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
        categorical ones, given evidence — an **MCMC estimate** over ``n_draws`` states of
        the law :meth:`sample` draws from (without evidence: :meth:`sample_encoded`'s own
        chains; a dict: the default protocol with the evidence clamped; a DataFrame of
        per-row evidence: one chain per row read every 2 sweeps after ``sample_burn_in``).
        A column's mean is over its drawn values (its missing state, where it has one, is
        the value missing), unrounded: the mean of the draws, so its standard error is the
        draws' (about ``sd / sqrt(n_draws)`` times the chains' autocorrelation). For one
        column given all the others, :meth:`predict` is exact. Returns a Series (dict / no
        evidence) or a DataFrame (per-row evidence; a Series for a single column label)."""
        self.check_fitted()
        schema = self.schema_
        single = columns is not None and not isinstance(columns, (list, tuple, pd.Index,
                                                                  np.ndarray))
        names = list(schema.names) if columns is None else [columns] if single else list(columns)
        cols = [column_index(schema, c) for c in names]
        if not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be a positive integer, got {n_draws!r}")
        rng = as_generator(random_state)
        ev, per_row = parse_conditions(self, conditions)
        allowed, bad, msg = self._allowed(ev, missing=True)
        if bad.any() and not per_row:
            raise ZeroProbabilityError(msg)
        if bad.any():
            warnings.warn(f"{int(bad.sum())} row(s) have zero-probability evidence, e.g. {msg}; "
                          f"their result is NaN, the other rows are unaffected", RuntimeWarning,
                          stacklevel=2)
            ev = _without_rows(ev, bad)
        present = self._force_present(ev, allowed)
        Z = None
        if per_row:
            m = ev.m
            b = max(int(self.sample_burn_in), 1)
            C = self._gibbs(m * n_draws, rng, allowed, np.arange(m), m, b, 2)
            erow = np.tile(np.arange(m), n_draws)
        elif not ev.active().any():  # no evidence: the draws of sample itself
            m = 1
            Z = self.sample_encoded(int(n_draws), rng)
            C, _ = self.grid_.codes(Z)
            erow = np.zeros(int(n_draws), np.int64)
        else:
            m = 1
            ch, b, th = self._protocol(n_draws, None, None, None)
            free = np.nonzero(np.isnan(ev.point[0]))[0]
            C = self._gibbs(int(n_draws), rng, allowed, np.zeros(ch, np.int64), ch, b, th, free)
            erow = np.zeros(int(n_draws), np.int64)
        if Z is None:
            Z = _respect_evidence(rows_to_support(self.grid_.decode(C, rng), self.schema_), C,
                                  ev, erow, self.grid_, self.schema_, rng)
            if self._nesting() is not None:  # nested columns blanked as sample() does
                self._blank_nested(Z, rng, present[erow])
                C = np.where(np.isnan(Z) & ~self.grid_.has_missing[None, :], UNKNOWN, C)
        order = np.argsort(erow, kind="stable")  # rows grouped by evidence row
        Z, C = Z[order].reshape(m, -1, schema.d), C[order].reshape(m, -1, schema.d)
        point = np.full((m, schema.d), np.nan)
        level_mean = {}
        for j in cols:
            spec = schema.columns[j]
            if spec.is_discrete:
                nv = int(self.grid_.n_values[j])
                p = np.stack([(C[:, :, j] == k).mean(axis=1) for k in range(nv)], axis=1)
                p = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300)  # values, not missing
                if spec.numeric_levels:
                    level_mean[j] = np.where(bad, np.nan, p @ np.asarray(spec.categories, float))
                else:
                    point[:, j] = np.argmax(p, axis=1)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # a row with no value
                    level_mean[j] = np.where(bad, np.nan, np.nanmean(Z[:, :, j], axis=1))
                if spec.dtype.startswith(("datetime", "timedelta")):  # a time, unrounded
                    level_mean[j] = np.asarray(self.encoder_.decode_mean(j, level_mean[j]))
        point[bad] = np.nan
        dec = self.encoder_.inverse_transform(point)
        res = {schema.names[j]: level_mean[j] if j in level_mean else dec.iloc[:, j].to_numpy()
               for j in cols}
        if not per_row:
            return pd.Series({k: v[0] for k, v in res.items()}, dtype=object).infer_objects()
        out = pd.DataFrame(res, index=conditions.index)
        return out.iloc[:, 0] if single else out

    # ------------------------------------------------------------------ sampling
    def _allowed(self, ev, missing: bool) -> tuple[np.ndarray, np.ndarray, str]:
        """Per evidence row: the weight of each code ``[m, sum(n_codes)]`` (1 allowed, 0 not,
        and for a numeric bin an interval cuts, the share of its within-bin law inside it:
        :meth:`~forestgen.families.energy.grid.Grid.interval_share`), a flag per row whose
        evidence has zero probability (its row allows everything) and a message naming the
        first such row's column."""
        g = self.grid_
        off = g.code_offsets
        m = ev.m
        free = np.ones(int(off[-1]))
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
                blk = np.zeros((int(iv.sum()), off[j + 1] - off[j]))
                blk[:, : g.n_values[j]] = ok
                if not g.discrete[j]:  # a bin the interval cuts: its share inside
                    spans, which = np.unique(np.c_[ev.lo[iv, j], ev.hi[iv, j]], axis=0,
                                             return_inverse=True)
                    for k, (lo, hi) in enumerate(spans):
                        blk[which.ravel() == k, : g.n_values[j]] *= g.interval_share(j, lo, hi)
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

    def _force_present(self, ev, allowed: np.ndarray) -> np.ndarray:
        """``[m, d]``: per evidence row, the columns that must be present — those with point
        evidence and, up from each, the parents missing in exactly the same training rows
        (rate 1): their missing state is excluded from ``allowed`` (in place)."""
        present = ~np.isnan(ev.point)
        nest = self._nesting()
        if nest is None:
            return present
        parent, rate = nest
        g = self.grid_
        for _ in range(g.d):  # up the nesting chains
            up = present.copy()
            for k in np.flatnonzero((parent >= 0) & (rate >= 1.0)):
                up[:, parent[k]] |= present[:, k]
            if np.array_equal(up, present):
                break
            present = up
        for j in np.flatnonzero(g.has_missing):
            allowed[present[:, j], g.code_offsets[j] + g.n_values[j]] = 0
        return present

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
        if n == 0:  # (per-row conditions of no rows)
            return np.empty((0, self.grid_.d), np.int32)
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
        self.check_fitted()
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        rng = as_generator(random_state)
        if n == 0:
            return np.empty((0, self.schema_.d))
        C = self._chain_codes(int(n), rng, missing, chains=chains, burn_in=burn_in, thin=thin,
                              start=start)
        Z = constrain(rows_to_support(self.grid_.decode(C, rng), self.schema_), self.schema_)
        return self._blank_nested(Z, rng) if missing else Z

    def _chain_codes(self, n: int, rng: np.random.Generator, missing: bool = True, *,
                     chains: int | None = None, burn_in: int | None = None,
                     thin: int | None = None, start: str | None = None) -> np.ndarray:
        """The grid codes of ``n`` chain states of :meth:`sample_encoded`'s protocol (before
        decoding; nested columns keep their values)."""
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
        return self._gibbs(int(n), rng, allowed, np.zeros(ch, np.int64), ch, b, th, X0=X0)

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
        state after ``max(burn_in, 1) + 1`` sweeps is kept). ``missing``: allow the missing state of
        columns that had missing values at fit. ``chains``/``burn_in``/``thin`` override the
        default protocol; ``start`` (``"training"`` / ``"q0"``) overrides ``sample_start`` for
        unconditional draws. Evidence of zero probability (outside the training range, an unseen
        level, an empty interval) raises ``ZeroProbabilityError`` naming the column, or with
        ``on_empty="unconditional"`` those rows are drawn without their evidence, or with
        ``"nan"`` (the default for a per-row DataFrame) returned with their given values and
        every other entry missing (a warning).
        """
        self.check_fitted()
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
        present = self._force_present(ev, allowed)
        given_pts = ev.point[bad].copy()
        if bad.any():
            report_empty(msg, int(bad.sum()), on_empty, "evidence row(s)", stacklevel=2)
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
        if missing:
            self._blank_nested(Z, rng, present[erow])
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
        means / ordinal mean / most probable level; ``"sample"``: one exact draw per
        imputation). Rows with more NaN cells run a Gibbs chain over them with the observed
        cells clamped (``sample_burn_in`` sweeps); ``"expectation"`` then averages 50 states
        (an MCMC estimate). Imputed cells never take the missing state. Input handling and
        output are those of every learner (:func:`forestgen.inference.api.impute`: observed
        cells, dtypes and the input's type kept).
        """
        from forestgen.inference.api import impute

        self.check_fitted()
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
                blk[~obs, :] = 1  # a missing entry: any value, not the missing state
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
            return p @ self.grid_.bin_means(j)
        if spec.numeric_levels:
            vals = p @ np.asarray(spec.categories, float)
            return np.argmin(np.abs(np.asarray(spec.categories, float)[None, :]
                                    - vals[:, None]), axis=1).astype(float)
        return np.argmax(p, axis=1).astype(float)


def _is_point(value) -> bool:
    """Whether a condition is one value or level (not a range, set or :class:`Not`)."""
    return not isinstance(value, (tuple, list, set, frozenset, Not))


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
    (:meth:`Grid.draw_within`: the within-bin law, uniform by default, over its draw range, so a
    point-mass bin gives its value)
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
            z = grid.draw_within(j, a, np.maximum(b, a), rng.random(int(iv.sum())))
            spec = schema.columns[j]
            va, vb = interval_ends(spec, lo_e, hi_e)
            Z[iv, j] = np.clip(to_support(z, spec), va, vb)
    return Z
