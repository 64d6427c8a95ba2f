"""The queries of a chain of conditional trees (:class:`~forestgen.families.chain.chain.Chain`).

* ``log_prob`` of a complete row: the sum of its conditionals, one leaf per tree — exact.
* ``sample``: ancestral along the order — exact.
* every query with open entries (``log_prob`` with NaN, conditional ``sample`` and
  ``log_prob``, ``expect``, ``predict_proba``, ``predict``, ``impute``): exact, through the
  compatible branches of :mod:`~forestgen.families.chain.branches`. Columns after the last
  given one in the order cost nothing (their trees integrate to one; conditional draws continue
  ancestrally from the drawn prefix). A row that needs more than ``max_branches`` branches is
  answered by an estimate (:class:`EstimateWarning` names the learner and the query):
  :data:`SIR_DRAWS` ancestral proposals weighted by the evidence (likelihood weighting; resampled
  for draws, averaged for moments), seeded by the row's evidence.
* ``to_torch``: not answered (no torch form of the branch sums).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen.data.metadata import constrain
from forestgen.data.support import clamp_query_rows, rows_to_support
from forestgen.families.chain.branches import (
    Branches,
    evidence_branches,
    routing_keys,
)
from forestgen.inference.api import (
    density_columns,
    mean_values,
    point_series,
    query_frame,
    warn_empty_rows,
    zero_probability_message,
)
from forestgen.inference.api import impute as _shared_impute
from forestgen.inference.conditions import (
    Evidence,
    ZeroProbabilityError,
    blank_rows,
    column_index,
    evidence_from_frame,
    parse_conditions,
    report_empty,
    sample_conditions,
    target_index,
)
from forestgen.sampling.missingness import blank, nesting_roots
from forestgen.sampling.support import draw_column, draw_mean
from forestgen.validation import as_generator, check_int

#: ancestral proposals per evidence row past ``max_branches`` (the estimate's sample size)
SIR_DRAWS = 2000


class EstimateWarning(RuntimeWarning):
    """A chain query answered some rows by an importance-sampling estimate (past
    ``max_branches``), not exactly."""


class ChainQueries:
    """Query engine of :class:`~forestgen.families.chain.chain.Chain` (see the module
    docstring)."""

    # ------------------------------------------------------------------ helpers
    def _positions(self) -> np.ndarray:
        pos = np.empty(len(self.order_), np.int64)
        pos[self.order_] = np.arange(len(self.order_))
        return pos

    def _last(self, active: np.ndarray) -> np.ndarray:
        """Per row, the position in the order of its last active column (-1: none)."""
        pos = self._positions()
        return np.where(active.any(1), np.max(np.where(active, pos[None, :], -1), axis=1), -1)

    def _branches(self, ev: Evidence, upto: np.ndarray, query: str, index=None,
                  densities: bool = True, rows: np.ndarray | None = None) -> Branches:
        """The branches of ``ev`` (:func:`evidence_branches`); ``rows``: the query row of each
        evidence row (for the error), ``index``: the query's row labels."""
        br = evidence_branches(self, ev, upto, int(self.max_branches), densities, drop=True)
        if br.over.any():
            warnings.warn(
                f"{type(self).__name__}.{query}: {int(br.over.sum())} row(s) are compatible "
                f"with more than max_branches={self.max_branches} branches of the chain (open "
                f"columns split by many later trees); they are answered by an ESTIMATE: "
                f"{SIR_DRAWS} ancestral proposals weighted by the evidence (likelihood "
                f"weighting / sampling-importance-resampling), seeded by the row's evidence. "
                f"Give more entries, put open columns last in `order` or raise max_branches "
                f"for the exact answer", EstimateWarning, stacklevel=3)
        return br

    def _proposals(self, ev: Evidence, r: int, k: int) -> tuple[np.ndarray, np.ndarray,
                                                                   np.random.Generator]:
        """``k`` ancestral draws for evidence row ``r`` with point values fixed and intervals /
        level sets drawn inside, and their log weights (the evidence's densities and
        probabilities under each draw's leaves): likelihood weighting. The Generator is
        seeded by the row's evidence, so a row's estimate does not depend on its batch."""
        rng = np.random.default_rng(_row_seed(ev, r))
        f = self.forest_
        Z = np.full((k, ev.d), np.nan)
        logw = np.zeros(k)
        for t, j in enumerate(self.order_):
            j = int(j)
            leaf = f.apply(Z, n_trees=t + 1)[:, t].astype(np.int64)
            lm = self.leaf_models_[j]
            x = ev.point[r, j]
            if not np.isnan(x):
                Z[:, j] = x
                logw += lm.log_prob(leaf, np.full(k, x))
            elif not np.isnan(ev.lo[r, j]):
                lo, hi = np.full(k, ev.lo[r, j]), np.full(k, ev.hi[r, j])
                logw += lm.log_prob_interval(leaf, lo, hi)
                ok = np.isfinite(logw)
                Z[:, j] = draw_column(self, j, leaf, rng)
                if ok.any():
                    Z[ok, j] = draw_column(self, j, leaf[ok], rng, lo=lo[ok], hi=hi[ok])
            elif j in ev.sets and ev.sets[j][0][r]:
                mk = ev.sets[j][1]
                mask = mk[r if mk.shape[0] > 1 else 0]
                logw += lm.log_prob_levels(leaf, mask)
                ok = np.isfinite(logw)
                Z[:, j] = draw_column(self, j, leaf, rng)
                if ok.any():
                    Z[ok, j] = draw_column(self, j, leaf[ok], rng, levels=mask)
            else:
                Z[:, j] = draw_column(self, j, leaf, rng)
        return Z, logw, rng

    # ------------------------------------------------------------------ densities
    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row (nats), NaN entries marginalised exactly; with ``conditions``
        ``log p(x_free | evidence)``. A row outside the support scores ``density_floor``
        times the uniform density on the support of the columns its density is over
        (:func:`~forestgen.inference.density_columns`) unless ``floor=None`` (exact:
        ``-inf``)."""
        if conditions is not None:
            self.require("conditional_log_prob")
            out = self._conditional_log_prob(X, conditions)
        else:
            out = self.log_prob_encoded(self.encode_rows(X, missing_columns="nan"))
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """Exact log density of encoded rows (NaN entries marginalised)."""
        self.check_fitted()
        Z = np.asarray(Z, np.float64)
        out = np.empty(len(Z))
        inc = np.isnan(Z).any(1)
        if (~inc).any():
            out[~inc] = self._log_prob_complete(Z[~inc])
        if inc.any():
            ev = Evidence.empty(int(inc.sum()), Z.shape[1])
            ev.point = Z[inc].copy()
            out[inc] = self._log_mass(ev, "log_prob")
        return out

    def _log_prob_complete(self, Z: np.ndarray) -> np.ndarray:
        leaves = self.forest_.apply(Z)
        out = np.zeros(len(Z))
        for t, j in enumerate(self.order_):
            out += self.leaf_models_[j].log_prob(leaves[:, t], Z[:, j])
        return out

    def _log_mass(self, ev: Evidence, query: str, index=None) -> np.ndarray:
        """``log p(evidence)`` per row. Rows whose evidence routes alike through every tree
        (:func:`~forestgen.families.chain.branches.routing_keys`) share one branch walk; the
        branches of a walk are pooled by the leaves they give the point columns, and each
        row adds its own point densities per pool."""
        m, d = ev.point.shape
        tl = self._last(ev.active())
        rep = routing_keys(self, ev.point)
        parts = [np.where(np.isnan(rep), -np.inf, rep), np.nan_to_num(ev.lo, nan=-np.inf),
                 np.nan_to_num(ev.hi, nan=-np.inf), tl[:, None]]
        for j in sorted(ev.sets):
            a, mk = ev.sets[j]
            parts.append(np.where(a[:, None], np.broadcast_to(mk, (m, mk.shape[1])), 2))
        _, first, inv = np.unique(np.hstack([np.asarray(p, float) for p in parts]), axis=0,
                                  return_index=True, return_inverse=True)
        inv = inv.ravel()
        key = ev.take(first)
        key.point = rep[first]
        br = self._branches(key, tl[first], query, index, densities=False, rows=first)
        pt = ~np.isnan(ev.point)
        # pools: (key, leaf of each point column)
        tags = np.where(~np.isnan(key.point[br.row]), br.leaf, -1)
        pools, pinv = np.unique(np.c_[br.row, tags], axis=0, return_inverse=True)
        pinv = pinv.ravel()
        top = np.full(len(pools), -np.inf)
        np.maximum.at(top, pinv, br.logw)
        acc = np.zeros(len(pools))
        np.add.at(acc, pinv, np.exp(br.logw - top[pinv]))
        with np.errstate(divide="ignore"):
            pw = np.log(acc) + top
        start = np.searchsorted(pools[:, 0], np.arange(len(first) + 1))
        cnt = start[inv + 1] - start[inv]
        pr = np.repeat(np.arange(m), cnt)
        pp = (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
              + np.repeat(start[inv], cnt))
        s = pw[pp]
        for j in range(d):
            sel = pt[pr, j]
            if sel.any():
                s[sel] += self.leaf_models_[j].log_prob(pools[pp[sel], 1 + j],
                                                        ev.point[pr[sel], j])
        top_r = np.full(m, -np.inf)
        np.maximum.at(top_r, pr, s)
        safe = np.where(np.isfinite(top_r), top_r, 0.0)
        acc_r = np.zeros(m)
        np.add.at(acc_r, pr, np.exp(s - safe[pr]))
        with np.errstate(divide="ignore"):
            out = np.log(acc_r) + safe
        out[tl < 0] = 0.0
        for i in np.flatnonzero(br.over[inv]):  # past max_branches: likelihood weighting
            _, lw, _ = self._proposals(ev, int(i), SIR_DRAWS)
            with np.errstate(divide="ignore"):
                out[i] = _logmeanexp(lw)
        return out

    def _conditional_log_prob(self, X, conditions) -> np.ndarray:
        Zx = self.encode_rows(X)
        nx = len(Zx)
        ev, per_row = parse_conditions(self, conditions, on_empty=None if isinstance(
            conditions, pd.DataFrame) else "raise")
        index = conditions.index if per_row else None
        if per_row:
            if ev.m != nx:
                raise ValueError(f"per-row conditions have {ev.m} rows but X has {nx}")
            full = ev
            log_e = self._log_mass(ev, "log_prob", index)
        else:
            log_e = np.full(nx, self._log_mass(ev, "log_prob")[0])
            full = ev.broadcast(nx)
        bad = ~np.isfinite(log_e)
        if bad.any():  # (a dict: raised; per-row evidence: that row NaN, with a warning)
            r = int(np.flatnonzero(bad)[0])
            msg = f"{type(self).__name__}.log_prob: " + zero_probability_message(
                self, ev, r, lambda e: float(self._log_mass(e, "log_prob")[0]),
                None if index is None else index[r])
            if not per_row:
                raise ZeroProbabilityError(msg)
            warn_empty_rows(msg, int(bad.sum()), "log_prob")
        joint = full.copy()
        free = ~full.active() & ~np.isnan(Zx)
        joint.point[free] = Zx[free]
        with np.errstate(invalid="ignore"):
            out = self._log_mass(joint, "log_prob", index) - log_e
        out[bad] = np.nan
        return out

    # ------------------------------------------------------------------ sampling
    def _ancestral(self, Z: np.ndarray, start: np.ndarray, rng: np.random.Generator) -> None:
        """Draw, in place, every column at position >= ``start[i]`` of row ``i`` from its
        conditional given the row's earlier columns."""
        for t, j in enumerate(self.order_):
            rows = np.flatnonzero(start <= t)
            if not len(rows):
                continue
            leaf = self.forest_.apply(Z[rows], n_trees=t + 1)[:, t].astype(np.int64)
            Z[rows, j] = draw_column(self, int(j), leaf, rng)

    def _ancestral_missing(self, Z: np.ndarray, rng: np.random.Generator) -> None:
        """Draw every row in place, column by column in the chain's order, blanking entries as
        the training rows were: a column's missingness is drawn in the leaf its tree routes the
        row to (earlier blanks routed as the training rows' missing entries were), a nested
        group's at the first of its columns, jointly (:mod:`forestgen.sampling.missingness`)."""
        n, cols = len(Z), self.missing_cols_
        u = rng.random((n, len(cols)))
        parent = getattr(self, "missing_parent_", None)
        roots = nesting_roots(parent, len(cols))
        slot = {int(j): k for k, j in enumerate(cols)}
        hit = np.zeros((n, len(cols)), bool)
        decided = np.zeros(len(cols), bool)
        for t, j in enumerate(self.order_):
            leaf = self.forest_.apply(Z, n_trees=t + 1)[:, t].astype(np.int64)
            Z[:, j] = draw_column(self, int(j), leaf, rng)
            k = slot.get(int(j))
            if k is None:
                continue
            if not decided[roots[k]]:
                group = roots == roots[k]
                rate = self.missing_rate_[leaf]
                both = blank(u, rate, rate if parent is None else rate[:, np.maximum(parent, 0)],
                             parent)
                hit[:, group] = both[:, group]
                decided[group] = True
            Z[hit[:, k], j] = np.nan

    def sample_encoded(self, n: int, random_state=None, missing: bool = False,
                       within_support: bool = True) -> np.ndarray:
        """``n`` encoded rows drawn ancestrally (exact); ``missing=True`` blanks entries with
        the missing rates of the training rows in each column's leaf, the chain's law of what
        is missing (:meth:`_ancestral_missing`)."""
        self.check_fitted()
        check_int("n", n, 0)
        rng = as_generator(random_state)
        d = self.schema_.d
        Z = np.full((int(n), d), np.nan)
        if n == 0:
            return Z
        if missing and len(getattr(self, "missing_cols_", [])):
            self._ancestral_missing(Z, rng)
        else:
            self._ancestral(Z, np.zeros(int(n), np.int64), rng)
        return constrain(rows_to_support(Z, self.schema_), self.schema_)

    def sample(self, n: int | None = None, random_state=None, conditions=None,
               on_empty: str | None = None, missing: bool = True) -> pd.DataFrame:
        """``n`` synthetic rows (see :meth:`GenerativeForest.sample`); with ``conditions``
        exact conditional draws: a branch by its weight, the open columns up to the last
        given one inside their branch's constraints, the rest ancestrally."""
        self.check_fitted()
        if conditions is None:
            if n is None:
                raise ValueError("n is required when no conditions are given")
            check_int("n", n, 0)
            rng = as_generator(random_state)
            return self.encoder_.inverse_transform(self.sample_encoded(int(n), rng, missing))
        self.require("conditional_sample")
        rng = as_generator(random_state)
        ev, per_row, on_empty, n, index = sample_conditions(self, n, conditions, on_empty)
        tl = self._last(ev.active())
        br = self._branches(ev, tl, "sample", index)
        w = br.weights(ev.m)
        lm_rows = br.log_mass(ev.m)
        est = {}  # rows past max_branches: sampling-importance-resampling
        for r in np.flatnonzero(br.over):
            k = SIR_DRAWS if per_row else max(SIR_DRAWS, 10 * n)
            Zp, lw, prng = self._proposals(ev, int(r), k)
            est[int(r)] = (Zp, lw, prng)
            with np.errstate(divide="ignore"):
                lm_rows[r] = _logmeanexp(lw)
        ok_rows = np.isfinite(lm_rows)
        if per_row:
            pick, erow = _one_per_row(br, w, ev.m, rng)
        else:
            erow = np.zeros(n, np.int64)
            pick = rng.choice(len(w), size=n, p=w / w.sum()) if ok_rows[0] and n and \
                not br.over[0] else \
                np.full(n, -1, np.int64)
        ok = ok_rows[erow]
        bad = ~ok
        if bad.any():
            first = int(erow[np.flatnonzero(bad)[0]])
            label = "" if index is None else f" (row {index[first]!r})"
            names = [self.schema_.names[j] for j in np.flatnonzero(ev.active()[first])]
            msg = (f"{type(self).__name__}.sample: the evidence on {names}{label} has zero "
                   f"probability under the model")
            report_empty(msg, int(bad.sum()), on_empty, stacklevel=2)
        Z = np.full((n, self.schema_.d), np.nan)
        exact = ok & ~br.over[erow]
        good = np.flatnonzero(exact)
        self._draw_branches(Z, good, br.take(pick[good]), rng)
        for r, (Zp, lw, prng) in est.items():
            at = np.flatnonzero((erow == r) & ok)
            if len(at):
                p = np.exp(lw - lw.max())
                Z[at] = Zp[prng.choice(len(lw), size=len(at), p=p / p.sum())]
        start = np.where(ok, tl[erow] + 1, 0)
        start[ok & br.over[erow]] = len(self.order_)  # complete proposals
        self._ancestral(Z, start, rng)
        Z = constrain(rows_to_support(Z, self.schema_), self.schema_)
        rows = np.flatnonzero(bad) if on_empty == "nan" else np.zeros(0, np.int64)
        pts = ev.point[erow[rows]]
        given = ~np.isnan(pts)
        Z[rows] = np.where(given, pts, Z[rows])
        out = blank_rows(self.encoder_.inverse_transform(Z), rows, given)
        if index is not None:
            out.index = index
        return out

    def _draw_branches(self, Z: np.ndarray, rows: np.ndarray, br: Branches,
                       rng: np.random.Generator, only: np.ndarray | None = None) -> None:
        """Fill ``Z[rows]`` from branches ``br`` (one per row): point values as given, open
        walked columns drawn inside their constraints (``only``: a bool ``[len(rows), d]`` of
        the entries to fill)."""
        schema = self.schema_
        for j, spec in enumerate(schema.columns):
            walked = br.leaf[:, j] >= 0
            pt = br.point[br.row, j]
            fill = walked if only is None else walked & only[:, j]
            given = fill & ~np.isnan(pt)
            Z[rows[given], j] = pt[given]
            draw = fill & np.isnan(pt)
            if not draw.any():
                continue
            leaf = br.leaf[draw, j]
            if spec.is_discrete:
                mk = br.mask[j][draw]
                Z[rows[draw], j] = draw_column(self, j, leaf, rng, levels=mk)
            else:
                lo, hi = br.lo[draw, j], br.hi[draw, j]
                free = ~np.isfinite(lo) & ~np.isfinite(hi)
                vals = np.empty(len(leaf))
                if free.any():
                    vals[free] = draw_column(self, j, leaf[free], rng)
                if (~free).any():
                    vals[~free] = draw_column(self, j, leaf[~free], rng, lo=lo[~free],
                                              hi=hi[~free])
                Z[rows[draw], j] = vals

    # ------------------------------------------------------------------ moments
    def _posterior(self, br: Branches, ev: Evidence, j: int) -> np.ndarray:
        """Conditional mean ``[m]`` (numeric) or pmf ``[m, k]`` (discrete) of column ``j``
        given each row's evidence ``ev``, from its branches (walked through ``j``'s tree)."""
        m = ev.m
        spec = self.schema_.columns[j]
        w = br.weights(m)
        pt = br.point[br.row, j]
        given = ~np.isnan(pt)
        leaf = br.leaf[:, j]
        if spec.is_discrete:
            k = spec.n_levels
            vals = np.zeros((len(w), k))
            if given.any():
                vals[given, pt[given].astype(np.int64)] = 1.0
            op = ~given
            if op.any():
                p = self.leaf_models_[j].probs(leaf[op]) * br.mask[j][op]
                vals[op] = p / np.maximum(p.sum(1, keepdims=True), 1e-300)
            out = np.zeros((m, k))
            np.add.at(out, br.row, w[:, None] * vals)
        else:
            vals = np.where(given, pt, 0.0)
            op = ~given
            if op.any():
                lo, hi = br.lo[op, j], br.hi[op, j]
                free = ~np.isfinite(lo) & ~np.isfinite(hi)
                v = np.empty(int(op.sum()))
                if free.any():
                    v[free] = draw_mean(self, j, leaf[op][free])
                if (~free).any():
                    v[~free] = draw_mean(self, j, leaf[op][~free], lo[~free], hi[~free])
                vals[op] = v
            out = np.zeros(m)
            np.add.at(out, br.row, w * vals)
        mass = np.isfinite(br.log_mass(m))
        out[~mass] = np.nan
        for r in np.flatnonzero(br.over):  # past max_branches: the weighted proposals
            Zp, lw, _ = self._proposals(ev, int(r), SIR_DRAWS)
            if not np.isfinite(lw).any():
                out[r] = np.nan
                continue
            wp = np.exp(lw - lw.max())
            wp /= wp.sum()
            if spec.is_discrete:
                out[r] = np.bincount(Zp[:, j].astype(np.int64), weights=wp,
                                     minlength=spec.n_levels)
            else:
                out[r] = wp @ Zp[:, j]
        return out

    def _column_posteriors(self, ev: Evidence, cols: list[int], query: str,
                           index=None) -> dict[int, np.ndarray]:
        tl = self._last(ev.active())
        pos = self._positions()
        out = {}
        for j in cols:
            br = self._branches(ev, np.maximum(tl, pos[j]), query, index)
            out[j] = self._posterior(br, ev, j)
        return out

    def _point_values(self, j: int, mom: np.ndarray) -> tuple[np.ndarray, bool]:
        spec = self.schema_.columns[j]
        if not spec.is_discrete:
            with np.errstate(invalid="ignore"):
                return np.where(np.isnan(mom), mom, np.clip(mom, spec.lower, spec.upper)), False
        if spec.numeric_levels:
            vals = np.asarray(spec.categories, float)
            return mom @ vals / np.maximum(mom.sum(1), 1e-300), False
        codes = np.argmax(np.nan_to_num(mom, nan=-1.0), axis=1).astype(float)
        codes[np.isnan(mom).any(1)] = np.nan
        return codes, True

    def _decode(self, j: int, codes: np.ndarray) -> np.ndarray:
        Z = np.full((len(codes), self.schema_.d), np.nan)
        Z[:, j] = codes
        return self.encoder_.inverse_transform(Z).iloc[:, j].to_numpy()

    def expect(self, columns=None, conditions=None):
        """Exact conditional mean of numeric and ordinal-integer columns / most probable level
        of categorical ones (a Series for a dict, a DataFrame for per-row evidence)."""
        self.check_fitted()
        self.require("expect")
        schema = self.schema_
        if columns is None:
            cols, single = list(range(schema.d)), False
        else:
            single = not isinstance(columns, (list, tuple, pd.Index, np.ndarray))
            cols = [column_index(schema, c) for c in ([columns] if single else columns)]
        ev, per_row = parse_conditions(self, conditions)
        index = conditions.index if per_row else None
        post = self._column_posteriors(ev, cols, "expect", index)
        if not per_row and np.isnan(np.atleast_1d(post[cols[0]][0])).any():
            raise ZeroProbabilityError(f"{type(self).__name__}.expect: the conditions have "
                                       f"zero probability under the model")
        res = {}
        for j in cols:
            vals, is_code = self._point_values(j, post[j])
            res[schema.names[j]] = self._decode(j, vals) if is_code else \
                mean_values(self, j, vals)
        if not per_row:
            return pd.Series({k: v[0] for k, v in res.items()}, dtype=object).infer_objects()
        out = pd.DataFrame(res, index=index)
        return out.iloc[:, 0] if single else out

    # ------------------------------------------------------------------ prediction
    def _target_evidence(self, X, target, query: str):
        self.check_fitted()
        if target is None:
            raise ValueError(f"{type(self).__name__}.{query} needs target=<column>: any "
                             f"column can be predicted from the others")
        j = target_index(self.schema_, target)
        df = query_frame(self, X)
        ev = evidence_from_frame(self, df, skip={j}, unseen="free", rows=True)
        clamp_query_rows(self, ev.point, query, skip={j})
        post = self._column_posteriors(ev, [j], query, df.index)[j]
        bad = np.isnan(np.atleast_2d(post.T).T).any(1) if post.ndim > 1 else np.isnan(post)
        if bad.any():
            warnings.warn(f"{type(self).__name__}.{query}: {int(bad.sum())} row(s) have "
                          f"zero-probability evidence; their result is NaN, the other rows "
                          f"are unaffected", RuntimeWarning, stacklevel=3)
        return j, df, post

    def predict_proba(self, X, target=None) -> pd.DataFrame:
        """Exact ``P(target = level | the row's other observed entries)``."""
        self.require("predict")
        j, df, post = self._target_evidence(X, target, "predict_proba")
        spec = self.schema_.columns[j]
        if not spec.is_discrete:
            raise ValueError(f"predict_proba needs a discrete target; column {spec.name!r} is "
                             f"{spec.kind} (use predict / expect)")
        return pd.DataFrame(post, index=df.index,
                            columns=pd.Index(np.array(spec.categories + [None], object)[:-1]))

    def predict(self, X, target=None) -> pd.Series:
        """The most probable level of a categorical ``target``, the exact conditional mean of
        a numeric or ordinal-integer one, given each row's other observed entries."""
        self.require("predict")
        j, df, post = self._target_evidence(X, target, "predict")
        vals, is_code = self._point_values(j, post)
        return point_series(self, j, vals, is_code, df.index)

    # ------------------------------------------------------------------ imputation
    def impute(self, X, method: str = "expectation", n_imputations: int = 1,
               random_state=None):
        """Fill missing entries from the exact conditional given each row's observed ones:
        its mean / most probable level (``"expectation"``) or one draw (``"sample"``)."""
        self.require("impute")
        if method == "max_density":
            raise ValueError(f"{type(self).__name__}.impute: method='max_density' needs a "
                             f"model whose leaves partition the space; use 'expectation' or "
                             f"'sample'")
        return _shared_impute(self, X, method=method, n_imputations=n_imputations,
                              random_state=random_state, filler=self._fill_missing)

    def _fill_missing(self, Z: np.ndarray, miss: np.ndarray, method: str,
                      rng: np.random.Generator) -> np.ndarray:
        rows = np.flatnonzero(miss.any(1))
        ev = Evidence.empty(len(rows), Z.shape[1])
        ev.point = Z[rows].copy()
        ev.point[miss[rows]] = np.nan
        upto = self._last(~np.isnan(ev.point) | miss[rows])
        br = self._branches(ev, upto, "impute")
        ok = np.isfinite(br.log_mass(len(rows))) | br.over
        out = Z.copy()
        if method == "expectation":
            for j in np.flatnonzero(miss[rows].any(0)):
                vals, is_code = self._point_values(int(j), self._posterior(br, ev, j))
                spec = self.schema_.columns[j]
                if spec.is_discrete and not is_code:  # ordinal: the nearest level
                    cats = np.asarray(spec.categories, float)
                    near = np.argmin(np.abs(np.nan_to_num(vals)[:, None] - cats[None, :]),
                                     axis=1).astype(float)
                    vals = np.where(np.isnan(vals), np.nan, near)
                sel = miss[rows, j]
                out[rows[sel], j] = vals[sel]
        else:
            pick, erow = _one_per_row(br, br.weights(len(rows)), len(rows), rng)
            good = np.flatnonzero(ok & ~br.over)
            S = np.full((len(rows), Z.shape[1]), np.nan)
            self._draw_branches(S, good, br.take(pick[good]), rng, only=miss[rows][good])
            for r in np.flatnonzero(br.over):  # past max_branches: one resampled proposal
                Zp, lw, prng = self._proposals(ev, int(r), SIR_DRAWS)
                if np.isfinite(lw).any():
                    p = np.exp(lw - lw.max())
                    S[r] = Zp[prng.choice(len(lw), p=p / p.sum())]
            sub = miss[rows]
            Zr = out[rows]
            Zr[sub] = S[sub]
            out[rows] = Zr
        if not ok.all():
            warnings.warn(f"{type(self).__name__}.impute: {int((~ok).sum())} row(s) have "
                          f"zero-probability evidence; their imputation is NaN, the other "
                          f"rows are unaffected", RuntimeWarning, stacklevel=4)
        return out


def _logmeanexp(lw: np.ndarray) -> float:
    top = np.max(lw) if len(lw) else -np.inf
    if not np.isfinite(top):
        return -np.inf
    return float(np.log(np.mean(np.exp(lw - top))) + top)


def _row_seed(ev: Evidence, r: int) -> int:
    """A seed from evidence row ``r`` alone (its values, intervals and level sets)."""
    import zlib

    parts = [ev.point[r].tobytes(), ev.lo[r].tobytes(), ev.hi[r].tobytes()]
    for j in sorted(ev.sets):
        a, mk = ev.sets[j]
        parts.append(bytes([int(a[r])]) + mk[r if mk.shape[0] > 1 else 0].tobytes())
    return zlib.crc32(b"".join(parts))


def _one_per_row(br: Branches, w: np.ndarray, m: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """One branch per evidence row drawn by its weight (Gumbel-max); -1 for rows without
    mass. Returns ``(branch index per row, evidence row per row)``."""
    with np.errstate(divide="ignore"):
        g = np.log(w) + rng.gumbel(size=len(w))
    pick = np.full(m, -1, np.int64)
    if len(w):
        order = np.lexsort((-g, br.row))
        first = np.r_[True, br.row[order][1:] != br.row[order][:-1]]
        sel = order[first]
        sel = sel[np.isfinite(g[sel])]
        pick[br.row[sel]] = sel
    return pick, np.arange(m)
