"""Exact conditional queries on leaf-mixture forests (ARF spec §3), shared by every learner.

Everything works from ``model.leaf_log_weight_``, ``model.forest_``, ``model.leaf_models_``
and ``model.encoder_``; :class:`~forestgen.base.GenerativeForest` delegates here.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from forestgen.data.support import clamp_query_rows
from forestgen.inference import posterior
from forestgen.inference.conditions import (
    Evidence,
    ZeroProbabilityError,
    blank_rows,
    column_index,
    evidence_from_frame,
    keep_rules,
    parse_conditions,
    report_empty,
    sample_conditions,
    target_index,
)
from forestgen.inference.evidence_mass import evidence_log_mass
from forestgen.inference.leaf_search import bounded_draws
from forestgen.inference.marginal_walk import fused_rows, marginal_moments, moment_columns
from forestgen.inference.posterior import (
    Chunk,
    iter_posterior,
    segment_gumbel_argmax,
)
from forestgen.sampling.base import leaf_draws
from forestgen.sampling.support import draw_column, draw_mean
from forestgen.validation import as_generator, warn_input

__all__ = ["conditional_sample", "conditional_log_prob", "evidence_log_prob", "expect",
           "interval_log_mass", "predict_proba", "predict", "impute", "leaf_posterior"]


# --------------------------------------------------------------------------- zero probability


def _lognorm(model, ev: Evidence, skip: int | None = None) -> np.ndarray:
    """``log p(evidence)`` per row: the fused walk of :mod:`.evidence_mass` where the leaf
    models have in-kernel factors, the enumerating path elsewhere."""
    done, out = evidence_log_mass(model, ev if skip is None else ev.drop_column(skip))
    for ch in iter_posterior(model, ev, rows=np.flatnonzero(~done), skip=skip):
        out[ch.rows] = ch.lognorm
    return out


def _empty_error(model, ev: Evidence, row: int, label: Any = None,
                 skip: int | None = None) -> ZeroProbabilityError:
    return ZeroProbabilityError(zero_probability_message(
        model, ev, row, lambda e: float(_lognorm(model, e)[0]), label, skip))


def zero_probability_message(model, ev: Evidence, row: int, log_mass, label: Any = None,
                             skip: int | None = None) -> str:
    """Why row ``row`` of ``ev`` has probability zero: the columns whose evidence alone has
    ``log_mass`` (a function of one-row evidence) ``-inf``, else the columns jointly."""
    names = model.encoder_.schema.names
    cols = [j for j in np.flatnonzero(ev.active()[row]) if j != skip]
    bad = [names[j] for j in cols if not np.isfinite(log_mass(ev.only(row, j)))]
    where = "" if label is None else f" (row {label!r})"
    if bad:
        return f"evidence on column(s) {bad}{where} has zero probability under the model"
    return (f"the evidence on columns {[names[j] for j in cols]}{where} is jointly "
            f"impossible under the model (zero probability)")


def _check_rows(model, ev: Evidence, lognorm: np.ndarray, index=None,
                skip: int | None = None) -> None:
    bad = np.flatnonzero(~np.isfinite(lognorm))
    if len(bad):
        r = int(bad[0])
        raise _empty_error(model, ev, r, None if index is None else index[r], skip=skip)


# --------------------------------------------------------------------------- leaf posterior


def leaf_posterior(model, conditions=None) -> tuple[np.ndarray, np.ndarray]:
    """``(leaf ids, normalised weights)`` of the pooled leaf posterior for one condition set."""
    model.check_fitted()
    ev, per_row = parse_conditions(model, conditions)
    if per_row:
        raise ValueError("leaf_posterior takes one condition set (a dict)")
    ch = next(iter_posterior(model, ev))
    _check_rows(model, ev, ch.lognorm)
    return ch.leaf, ch.weights()


def evidence_log_prob(model, conditions) -> np.ndarray | float:
    """``log p(evidence)``: density for equalities times probability of intervals / sets."""
    model.check_fitted()
    ev, per_row = parse_conditions(model, conditions)
    out = _lognorm(model, ev)
    return out if per_row else float(out[0])


def interval_log_mass(model, column: int, lo: np.ndarray, hi: np.ndarray,
                      conditions: dict | None = None) -> np.ndarray:
    """``log P(lo < x_j <= hi, conditions)`` per pair of bounds on numeric column ``j``'s
    latent (encoded) scale (``-inf`` / ``inf``: an open end), jointly with one condition set:
    exact interval masses of the leaf mixture (each leaf's ``log_prob_interval``), e.g. the
    pieces of a marginal CDF. An interval that ``conditions`` put on column ``j`` (also through a
    rule: :func:`~forestgen.inference.conditions.keep_rules`) intersects each piece; a value
    given for ``j`` raises."""
    model.check_fitted()
    if not type(model).leaf_mixture_law:
        raise NotImplementedError(f"{type(model).__name__}: its law is not a leaf mixture; "
                                  f"interval_log_mass sums leaf masses")
    spec = model.encoder_.schema.columns[column]
    if spec.is_discrete:
        raise ValueError(f"column {spec.name!r} is discrete: interval masses are for numeric "
                         f"columns")
    lo, hi = np.asarray(lo, float).ravel(), np.asarray(hi, float).ravel()
    if lo.shape != hi.shape or np.isnan(lo).any() or np.isnan(hi).any():
        raise ValueError("lo and hi are bounds of equal length, none NaN")
    one, per_row = parse_conditions(model, conditions)
    if per_row:
        raise ValueError("interval_log_mass takes one condition set (a dict)")
    if not np.isnan(one.point[0, column]):
        raise ValueError(f"conditions fix column {spec.name!r}, the interval's own")
    if one.interval_active()[0, column]:  # an interval on it (or one a rule translates to)
        lo, hi = np.maximum(lo, one.lo[0, column]), np.minimum(hi, one.hi[0, column])
    ev = one.broadcast(len(lo)).copy()
    ev.lo[:, column], ev.hi[:, column] = lo, hi
    empty = ~(lo < hi)
    ev.lo[empty, column], ev.hi[empty, column] = -np.inf, np.inf  # scored -inf below
    out = _lognorm(model, ev)
    out[empty] = -np.inf
    return out


# --------------------------------------------------------------------------- sampling


def _sample_columns(model, leaf: np.ndarray, ev: Evidence, erow: np.ndarray, use: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """Draw every column from the chosen leaves; evidence columns keep / respect the evidence."""
    n = len(leaf)
    Z = np.empty((n, len(model.leaf_models_)))
    for j in range(len(model.leaf_models_)):
        Z[:, j] = draw_column(model, j, leaf, rng)
        pt = ev.point[erow, j]
        a = ~np.isnan(pt) & use
        Z[a, j] = pt[a]
        ia = ~np.isnan(ev.lo[erow, j]) & use
        if ia.any():
            Z[ia, j] = draw_column(model, j, leaf[ia], rng, lo=ev.lo[erow[ia], j],
                                   hi=ev.hi[erow[ia], j])
        if j in ev.sets:
            act, mk = ev.sets[j]
            sa = act[erow] & use
            if sa.any():
                levels = mk[0] if ev.m == 1 else mk[erow[sa]]
                Z[sa, j] = draw_column(model, j, leaf[sa], rng, levels=levels)
    return Z


def _draw_rows(model, ev: Evidence, rows: np.ndarray, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray]:
    """One leaf per evidence row in ``rows`` and whether its evidence had positive
    probability: the bounded search of :mod:`.leaf_search` where it pays, else Gumbel-max over
    the row's listed leaves (CSR segment)."""
    leaf = np.zeros(ev.m, np.int64)
    ok = np.ones(ev.m, bool)
    model.require_normalised("leaf posterior")
    found, _ = bounded_draws(model, ev, rows, int(rng.integers(0, 2**63)))
    leaf[rows[found >= 0]] = found[found >= 0]
    rest = rows[found < 0]
    for ch in iter_posterior(model, ev, rows=rest) if len(rest) else ():
        fin = np.isfinite(ch.lognorm)
        pick = segment_gumbel_argmax(ch.ptr, ch.logw, rng)
        leaf[ch.rows[fin]] = ch.leaf[pick[fin]]  # a row of probability zero lists no leaf
        ok[ch.rows] = fin
    return leaf, ok


def _max_density_rows(model, ev: Evidence, rows: np.ndarray, miss: np.ndarray,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per evidence row in ``rows``, the reachable leaf where the conditional density of the
    missing entries peaks: ``argmax_k w_k(e) · prod_{j missing} sup f_kj`` (ties at random).

    Exact argmax of ``p(x_missing | x_observed)`` when the leaves partition the space (one tree,
    leaf models with a constant density, e.g. generative forests); other models raise.
    """
    who = type(model).__name__
    if model.forest_.n_trees != 1:
        raise NotImplementedError(f"{who}: impute(method='max_density') needs a model whose "
                                  f"leaves partition the space (one tree); use 'expectation' "
                                  f"or 'sample'")
    leaf = np.zeros(ev.m, np.int64)
    ok = np.ones(ev.m, bool)
    for ch in iter_posterior(model, ev, rows=rows):
        score = ch.logw.copy()
        for j, lm in enumerate(model.leaf_models_):
            if not hasattr(lm, "log_max_density"):
                raise NotImplementedError(f"{who}: impute(method='max_density') needs leaf "
                                          f"models with log_max_density; "
                                          f"{type(lm).__name__} has none")
            sel = miss[ch.rows[ch.prow], j]
            if sel.any():
                score[sel] += lm.log_max_density(ch.leaf[sel])
        pos = np.flatnonzero(np.diff(ch.ptr) > 0)
        best = np.full(len(ch.rows), -np.inf)
        best[pos] = np.maximum.reduceat(score, ch.ptr[:-1][pos])
        tie = np.flatnonzero(score == best[ch.prow]) if len(score) else np.zeros(0, np.int64)
        key = rng.random(len(tie))
        order = np.lexsort((-key, ch.prow[tie]))
        _, first = np.unique(ch.prow[tie][order], return_index=True)
        pick = tie[order][first]
        leaf[ch.rows[ch.prow[pick]]] = ch.leaf[pick]
        ok[ch.rows] = np.isfinite(ch.lognorm)
    return leaf, ok


def _encoded_sample(model, n, ev: Evidence, per_row: bool, rng, on_empty: str, index=None):
    if per_row:
        leaf, ok = _draw_rows(model, ev, np.arange(ev.m), rng)
        erow = np.arange(ev.m)
    else:
        ch = next(iter_posterior(model, ev))
        erow = np.zeros(n, np.int64)
        if np.isfinite(ch.lognorm[0]):
            leaf = ch.leaf[leaf_draws(model.component("sampler"), ch.logw, n, rng)] if n \
                else np.zeros(0, np.int64)
            ok = np.ones(n, bool)
        else:
            leaf = np.zeros(n, np.int64)
            ok = np.zeros(n, bool)
    bad = ~ok
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        err = _empty_error(model, ev, int(erow[first]),
                           None if index is None else index[int(erow[first])])
        report_empty(str(err), int(bad.sum()), on_empty)
        leaf[bad] = leaf_draws(model.component("sampler"), model.leaf_log_weight_,
                               int(bad.sum()), rng)
    return _sample_columns(model, leaf, ev, erow, ok, rng), bad


def conditional_sample(model, n: int | None, conditions, random_state=None,
                       on_empty: str | None = None) -> pd.DataFrame:
    """Exact conditional draws (ARF spec §3): leaf ~ pooled posterior, then the free columns
    from the leaf; evidence columns take the given value or are drawn within the interval /
    level set. A DataFrame of per-row evidence gives one draw per row (``n`` = its length)."""
    model.check_fitted()
    rng = as_generator(random_state)
    ev, per_row, on_empty, n, index = sample_conditions(model, n, conditions, on_empty)
    Z, bad = _encoded_sample(model, n, ev, per_row, rng, on_empty, index)
    rows = np.flatnonzero(bad) if on_empty == "nan" else np.zeros(0, np.int64)
    pts = ev.point[rows if per_row else np.zeros_like(rows)]
    given = ~np.isnan(pts)
    Z[rows] = np.where(given, pts, Z[rows])  # the given values; the rest is blanked below
    out = blank_rows(model.encoder_.inverse_transform(Z), rows, given)
    if index is not None:
        out.index = index
    return out


# --------------------------------------------------------------------------- log-density


def density_columns(model, X, conditions=None) -> np.ndarray:
    """``bool [n, d]``: the columns each row's ``log_prob(X, conditions=)`` is a density
    over — the row's observed entries (NaN entries and absent columns are marginalised), less
    the columns the conditions name (their entries in ``X`` are ignored; a condition on a
    mapping's determined column counts there, not on the determinant it is translated to).
    The ``density_floor`` of a row outside the support is relative to the uniform density on
    these columns (a learner's ``apply_density_floor``)."""
    over = ~np.isnan(model.encoder_.transform(X, "nan", []))
    if conditions is None:
        return over
    schema = model.encoder_.schema
    if isinstance(conditions, pd.Series):
        conditions = (conditions.to_frame().T if conditions.name is not None
                      else dict(conditions))
    if isinstance(conditions, pd.DataFrame):
        if len(conditions) != len(over):
            raise ValueError(f"per-row conditions have {len(conditions)} rows but X has "
                             f"{len(over)}")
        for name in conditions.columns:
            given = np.array([not (pd.api.types.is_scalar(v) and pd.isna(v))
                              for v in conditions[name]], bool)
            over[given, column_index(schema, name)] = False
        return over
    for name in conditions:
        over[:, column_index(schema, name)] = False
    return over


def conditional_log_prob(model, X, conditions) -> np.ndarray:
    """``log p(x_U | e)`` per row of ``X``: ``U`` = observed columns of the row that carry no
    evidence (``X``'s entries in evidence columns are ignored; NaN entries are marginalised).
    A dict of evidence with probability zero raises :class:`ZeroProbabilityError`; in a
    per-row DataFrame such a row (a level unseen at fit included) is NaN, with one warning,
    and the other rows are scored."""
    model.check_fitted()
    ev, per_row = parse_conditions(model, conditions, on_empty=None if isinstance(
        conditions, pd.DataFrame) else "raise")
    notes: list = []
    Zx = model.encoder_.transform(X, "nan", notes)
    names = model.encoder_.schema.names
    given = {names[j] for j in np.flatnonzero(ev.active().any(axis=0))}
    # a column the conditions give is not "absent" from the rows: it is conditioned on
    warn_input([n for n in notes if not (n[0] == "absent" and n[1] in given)],
               type(model).__name__)
    nx = len(Zx)
    if per_row:
        if ev.m != nx:
            raise ValueError(f"per-row conditions have {ev.m} rows but X has {nx}")
        log_e = _lognorm(model, ev)
        bad = np.flatnonzero(~np.isfinite(log_e))
        if len(bad):
            _warn_empty(model, ev, bad, conditions.index, what="log_prob")
        full = ev
    else:
        log_e1 = _lognorm(model, ev)
        _check_rows(model, ev, log_e1)
        log_e = np.full(nx, log_e1[0])
        full = ev.broadcast(nx)
    joint = full.copy()
    free = ~full.active() & ~np.isnan(Zx)
    joint.point[free] = Zx[free]
    with np.errstate(invalid="ignore"):
        out = _lognorm(model, joint) - log_e
    out[~np.isfinite(log_e)] = np.nan
    return out


# --------------------------------------------------------------------------- moments


def _mix(values_fn, ch: Chunk, w: np.ndarray, sel: np.ndarray | None, width: int) -> np.ndarray:
    """``sum_pairs w * values_fn(leaf)`` per chunk row; ``values_fn`` returns ``[p]`` or
    ``[p, width]``. Processed in sub-chunks of pairs to bound memory."""
    c = len(ch.rows)
    out = np.zeros((c, width))
    idx = np.arange(len(ch.leaf)) if sel is None else sel
    step = max(1, posterior.PAIR_BUDGET // max(width, 1))
    for s in range(0, len(idx), step):
        part = idx[s : s + step]
        vals = values_fn(part)
        vals = vals.reshape(len(part), -1)
        M = sparse.csr_matrix((w[part], (ch.prow[part], np.arange(len(part)))),
                              shape=(c, len(part)))
        out += M @ vals
    return out


def _column_moments(model, ev: Evidence, cols: list[int], index=None,
                    rows: np.ndarray | None = None, skip: int | None = None,
                    per_row: bool = False) -> dict[int, np.ndarray]:
    """Posterior mean (numeric: ``[m]``) or pmf (discrete: ``[m, k]``) of each column in
    ``cols`` given the evidence, for evidence rows ``rows`` (others left at 0).

    A row whose evidence has zero probability raises :class:`ZeroProbabilityError`, or with
    ``per_row`` gets NaN results and one ``RuntimeWarning`` naming it (the rest of the batch is
    unaffected)."""
    schema = model.encoder_.schema
    fast = _fused_moments(model, ev, cols, rows, skip)
    if fast is not None:
        rws, lognorm, mom = fast
        out = {}
        for j in cols:
            spec = schema.columns[j]
            out[j] = np.zeros((ev.m, spec.n_levels)) if spec.is_discrete else np.zeros(ev.m)
            pt = ev.point[rws, j]
            has = ~np.isnan(pt)
            res = mom[j].copy()
            if spec.is_discrete:
                res[has] = 0.0
                res[np.flatnonzero(has), pt[has].astype(np.int64)] = 1.0
            else:
                res = np.where(has, pt, res)
            out[j][rws] = res
        bad = rws[~np.isfinite(lognorm)]
        if not per_row:
            _check_rows(model, ev.take(rws), lognorm, None if index is None else index[rws],
                        skip=skip)
        elif len(bad):
            for j in cols:
                out[j][bad] = np.nan
            _warn_empty(model, ev, bad, index, skip)
        return out
    empty: list[np.ndarray] = []
    out = {}
    means: dict[int, np.ndarray] = {}
    L = model.forest_.n_leaves
    for j in cols:
        spec = schema.columns[j]
        out[j] = np.zeros((ev.m, spec.n_levels)) if spec.is_discrete else np.zeros(ev.m)
        if not spec.is_discrete:
            means[j] = draw_mean(model, j, np.arange(L))
    for ch in iter_posterior(model, ev, rows=rows, skip=skip):
        if per_row:
            empty.append(ch.rows[~np.isfinite(ch.lognorm)])
        else:
            _check_rows(model, ev.take(ch.rows), ch.lognorm,
                        None if index is None else index[ch.rows], skip=skip)
        w = ch.weights()
        erow = ch.rows[ch.prow]
        for j in cols:
            lm = model.leaf_models_[j]
            spec = schema.columns[j]
            free = np.isnan(ev.point[erow, j])  # pairs of rows whose entry j is not given
            if spec.is_discrete:
                setact = ev.sets[j][0][erow] if j in ev.sets else np.zeros(len(erow), bool)
                setact &= free
                plain = np.flatnonzero(~setact & free)
                res = _mix(lambda p, lm=lm, ch=ch: lm.probs(ch.leaf[p]), ch, w, plain,
                           spec.n_levels)
                if setact.any():
                    sel = np.flatnonzero(setact)
                    mk = ev.sets[j][1]
                    f = np.exp(-lm.log_prob_levels(ch.leaf[sel], mk[erow[sel]]))
                    w2 = np.zeros_like(w)
                    w2[sel] = w[sel] * f
                    res += _mix(lambda p, lm=lm, mk=mk, ch=ch, erow=erow:
                                lm.probs(ch.leaf[p]) * mk[erow[p]], ch, w2, sel, spec.n_levels)
                pt = ev.point[ch.rows, j]
                has = ~np.isnan(pt)
                if has.any():
                    res[has] = 0.0
                    res[np.flatnonzero(has), pt[has].astype(np.int64)] = 1.0
                out[j][ch.rows] = res
            else:
                ia = ~np.isnan(ev.lo[erow, j]) & free
                res = _mix(lambda p, j=j, ch=ch: means[j][ch.leaf[p]], ch, w,
                           np.flatnonzero(~ia & free), 1)
                if ia.any():
                    sel = np.flatnonzero(ia)
                    res += _mix(lambda p, j=j, ch=ch, erow=erow: draw_mean(
                        model, j, ch.leaf[p], ev.lo[erow[p], j], ev.hi[erow[p], j]),
                        ch, w, sel, 1)
                res = res[:, 0]
                pt = ev.point[ch.rows, j]
                res = np.where(np.isnan(pt), res, pt)
                out[j][ch.rows] = res
    bad = np.concatenate(empty) if empty else np.zeros(0, np.int64)
    if len(bad):
        for j in cols:
            out[j][bad] = np.nan
        _warn_empty(model, ev, bad, index, skip)
    return out


def _fused_moments(model, ev: Evidence, cols: list[int], rows: np.ndarray | None,
                   skip: int | None) -> tuple[np.ndarray, np.ndarray, dict] | None:
    """``(rows, log p(evidence), moments)`` by the fused walk of :mod:`.marginal_walk` when it
    applies (point evidence only, on columns with in-kernel leaf factors), else None."""
    rws = np.arange(ev.m) if rows is None else np.asarray(rows, np.int64)
    if (any(a[rws].any() for a, _ in ev.sets.values()) or not np.isnan(ev.lo[rws]).all()
            or not moment_columns(model, cols)):
        return None
    Z = ev.point[rws].copy()
    if skip is not None:
        Z[:, skip] = np.nan
    if not fused_rows(model, Z).all():
        return None
    model.require_normalised("leaf posterior")
    lognorm, mom = marginal_moments(model, Z, cols)
    return rws, lognorm, mom


def _warn_empty(model, ev: Evidence, bad: np.ndarray, index=None, skip: int | None = None,
                what: str = "result") -> None:
    """One warning for the rows whose evidence has zero probability (their result is NaN)."""
    r = int(bad[0])
    warn_empty_rows(_empty_error(model, ev, r, None if index is None else index[r],
                                 skip=skip), len(bad), what, stacklevel=5)


def warn_empty_rows(msg: Any, n_bad: int, what: str, stacklevel: int = 4) -> None:
    """The one warning of a per-row query for its ``n_bad`` rows of zero-probability evidence
    (``msg`` says why for the first): their ``what`` is NaN."""
    warnings.warn(f"{n_bad} row(s) have zero-probability evidence, e.g. {msg}; their "
                  f"{what} is NaN, the other rows are unaffected", RuntimeWarning,
                  stacklevel=stacklevel)


def _point_values(model, j: int, mom: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(values, is_code)``: a numeric mean, the mean level value of an ordinal integer
    column, or the most probable level code of a categorical one.

    A numeric mean is kept inside the column's observed range, as draws are
    (:func:`~forestgen.sampling.support.draw_column`): leaf densities with tails past it (GeF's
    Gaussians truncated to unbounded edge cells) could put a mean there (an enrolment of
    -1,701 for a column whose values run from 81 to 27,176)."""
    spec = model.encoder_.schema.columns[j]
    if not spec.is_discrete:
        lo = spec.lower if np.isfinite(spec.lower) else -np.inf
        hi = spec.upper if np.isfinite(spec.upper) else np.inf
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(mom), mom, np.clip(mom, lo, hi)), False
    if spec.numeric_levels:
        vals = np.asarray(spec.categories, float)
        return mom @ vals / np.maximum(mom.sum(1), 1e-300), False
    codes = np.argmax(np.nan_to_num(mom, nan=-1.0), axis=1).astype(float)
    codes[np.isnan(mom).any(1)] = np.nan  # rows with zero-probability evidence stay NaN
    return codes, True


def mean_values(model, j: int, vals: np.ndarray) -> np.ndarray:
    """``expect``'s means of numeric column ``j`` (encoded units): numbers, but times for a
    datetime or timedelta column (as ``predict`` gives them; on a month scale,
    :mod:`forestgen.data.calendar`, the time of the mean month)."""
    if not model.encoder_.schema.columns[j].dtype.startswith(("datetime", "timedelta")):
        return vals
    return np.asarray(model.encoder_.decode_mean(j, vals))


def _decode_codes(model, j: int, codes: np.ndarray) -> pd.Series:
    Z = np.full((len(codes), model.encoder_.schema.d), np.nan)
    Z[:, j] = codes
    return model.encoder_.inverse_transform(Z).iloc[:, j]


def _columns_arg(model, columns) -> tuple[list[int], bool]:
    schema = model.encoder_.schema
    if columns is None:
        return list(range(schema.d)), False
    single = not isinstance(columns, (list, tuple, pd.Index, np.ndarray))
    cols = [columns] if single else list(columns)
    return [column_index(schema, c) for c in cols], single


def expect(model, columns=None, conditions=None) -> pd.DataFrame | pd.Series:
    """Conditional mean (numeric and ordinal-integer columns: ``sum_k w_k mean_k``) or most
    probable level (categorical, bool, binary: argmax of the posterior mixture of pmfs).

    A dict / ``None`` condition gives a Series indexed by column; per-row evidence gives a
    DataFrame (one row per evidence row), or a Series when ``columns`` is a single label.
    """
    model.check_fitted()
    cols, single = _columns_arg(model, columns)
    ev, per_row = parse_conditions(model, conditions)
    index = conditions.index if per_row else None
    mom = _column_moments(model, ev, cols, index)
    names = model.encoder_.schema.names
    res: dict[Any, Any] = {}
    for j in cols:
        vals, is_code = _point_values(model, j, mom[j])
        res[names[j]] = _decode_codes(model, j, vals).to_numpy() if is_code else \
            mean_values(model, j, vals)
    if not per_row:
        return pd.Series({k: v[0] for k, v in res.items()}, dtype=object).infer_objects()
    out = pd.DataFrame(res, index=index)
    return out.iloc[:, 0] if single else out


# --------------------------------------------------------------------------- prediction


def query_frame(model, X) -> pd.DataFrame:
    """Query rows as a DataFrame: a DataFrame as is, a Series or dict as one row, an array of
    the model's width with its column names."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame().T
    if isinstance(X, dict):
        return pd.DataFrame([X])
    arr = np.asarray(X)
    if arr.ndim != 2 or arr.shape[1] != model.encoder_.schema.d:
        raise ValueError(f"expected a DataFrame or an array of shape (n, "
                         f"{model.encoder_.schema.d}), got {type(X).__name__}")
    return pd.DataFrame(arr, columns=pd.Index(model.encoder_.schema.names, dtype=object))


def _own_entry(ev: Evidence, j: int) -> int | None:
    """The ``skip`` of a per-row prediction of column ``j``: ``j`` (its posterior weighs no
    evidence on it), unless the table's rules put evidence on it — the row's other entries
    decide it in part (``low = bwt < 2500`` given ``low``: ``bwt >= 2500``) — which weighs."""
    return None if ev.active()[:, j].any() else j


def _target(model, target) -> int:
    return target_index(model.encoder_.schema, target)


def predict_proba(model, X, target) -> pd.DataFrame:
    """``P(target = level | the row's other observed entries)`` for a discrete ``target``
    (the row's own target entry is ignored; NaN entries are marginalised)."""
    model.check_fitted()
    j = _target(model, target)
    spec = model.encoder_.schema.columns[j]
    if not spec.is_discrete:
        raise ValueError(f"predict_proba needs a discrete target; column {spec.name!r} is "
                         f"{spec.kind} (use predict / expect)")
    df = query_frame(model, X)
    ev = evidence_from_frame(model, df, skip={j}, unseen="free", rows=True)
    clamp_query_rows(model, ev.point, "predict_proba", skip={j})
    p = _column_moments(model, ev, [j], df.index, skip=_own_entry(ev, j), per_row=True)[j]
    return pd.DataFrame(p, index=df.index,
                        columns=pd.Index(np.array(spec.categories + [None], object)[:-1]))


def predict(model, X, target) -> pd.Series:
    """Predict ``target`` from each row's other observed entries: the most probable level of a
    categorical column, the conditional mean of a numeric or ordinal-integer one."""
    model.check_fitted()
    j = _target(model, target)
    df = query_frame(model, X)
    ev = evidence_from_frame(model, df, skip={j}, unseen="free", rows=True)
    clamp_query_rows(model, ev.point, "predict", skip={j})
    mom = _column_moments(model, ev, [j], df.index, skip=_own_entry(ev, j), per_row=True)[j]
    vals, is_code = _point_values(model, j, mom)
    return point_series(model, j, vals, is_code, df.index)


def point_series(model, j: int, vals: np.ndarray, is_code: bool, index) -> pd.Series:
    """``predict``'s answers for column ``j`` as a Series in the column's dtype: decoded levels
    (codes) of a discrete column, conditional means of a numeric one
    (:meth:`~forestgen.data.encoder.TableEncoder.decode_mean`: float64 for integer columns)."""
    name = model.encoder_.schema.names[j]
    if is_code:
        return pd.Series(_decode_codes(model, j, vals).array, index=index, name=name)
    return pd.Series(model.encoder_.decode_mean(j, vals), index=index, name=name)


# --------------------------------------------------------------------------- imputation


def impute(model, X, method: str = "expectation", n_imputations: int = 1, random_state=None,
           filler=None):
    """Fill the missing cells of ``X`` from the model's conditional distribution given each
    row's observed cells: its mean / most probable level (``"expectation"``) or one exact
    conditional draw per imputation (``"sample"``). Observed cells are kept, and every column
    comes back in its training dtype where all its cells fit it, else in the input's (so the
    dtypes do not depend on which cells a batch misses); returns
    one frame (an ndarray / tensor for ndarray / tensor input), or a list of ``n_imputations``.
    ``"max_density"`` (generative forests, Nock & Guillame-Bert §7.2): a uniform draw inside the
    compatible leaf where the conditional density peaks (models whose leaves partition the
    space). ``filler(Z, missing, method, rng) -> Z`` fills the encoded rows instead, for models
    whose law is not a leaf mixture (EOGT); the input handling and decoding stay shared."""
    model.check_fitted()
    if method not in ("expectation", "sample", "max_density"):
        raise ValueError(f"method must be 'expectation', 'sample' or 'max_density', "
                         f"got {method!r}")
    if (not isinstance(n_imputations, (int, np.integer)) or isinstance(n_imputations, bool)
            or n_imputations < 1):
        raise ValueError(f"n_imputations must be a positive integer, got {n_imputations!r}")
    if method == "expectation" and n_imputations > 1:
        raise ValueError("n_imputations > 1 needs method='sample' (expectations are "
                         "deterministic)")
    tensor = X if type(X).__module__.split(".")[0] == "torch" else None
    if tensor is not None:  # a tensor in, a tensor out (same dtype and device)
        X = tensor.detach().cpu().numpy()
    is_array = isinstance(X, np.ndarray)
    df = query_frame(model, X)
    schema = model.encoder_.schema
    ev = evidence_from_frame(model, df, unseen="free", rules=False, rows=True)
    clamp_query_rows(model, ev.point, "impute")  # observed cells are returned unchanged
    present = [j for j in range(schema.d) if _has_column(df, schema.names[j])]
    miss = np.zeros((ev.m, schema.d), bool)
    miss[:, present] = ~ev.active()[:, present]
    if ev.unseen is not None:
        miss &= ~ev.unseen  # an unseen level is observed: kept, only left out as evidence
    keep_rules(ev, schema)  # the cells given, then their rules: a determined value given
    # is evidence on its determinant, which is imputed within the levels it allows
    rows = np.flatnonzero(miss.any(1))
    rng = as_generator(random_state)
    outs = []
    for _ in range(n_imputations):
        Z = ev.point.copy()
        if len(rows) and filler is not None:
            Z = filler(Z, miss, method, rng)
        elif len(rows):
            if method == "expectation":
                cols = [j for j in present if miss[:, j].any()]
                mom = _column_moments(model, ev, cols, df.index, rows=rows, per_row=True)
                for j in cols:
                    vals, is_code = _point_values(model, j, mom[j])
                    spec = schema.columns[j]
                    if spec.is_discrete and not is_code:  # ordinal: nearest level value
                        cats = np.asarray(spec.categories, float)
                        near = np.argmin(np.abs(np.nan_to_num(vals)[:, None] - cats[None, :]),
                                         axis=1).astype(float)
                        vals = np.where(np.isnan(vals), np.nan, near)
                    Z[miss[:, j], j] = vals[miss[:, j]]
            else:
                if method == "sample":
                    leaf, ok = _draw_rows(model, ev, rows, rng)
                else:
                    leaf, ok = _max_density_rows(model, ev, rows, miss, rng)
                S = _sample_columns(model, leaf[rows], ev, rows, ok[rows], rng)
                if not ok[rows].all():
                    S[~ok[rows]] = np.nan
                    _warn_empty(model, ev, rows[~ok[rows]], df.index, what="imputation")
                sub = miss[rows]
                Zr = Z[rows]
                Zr[sub] = S[sub]
                Z[rows] = Zr
        outs.append(_fill(model, df, Z, miss, is_array, X))
    if tensor is not None:
        import torch

        outs = [torch.as_tensor(o, dtype=tensor.dtype, device=tensor.device) for o in outs]
    return outs[0] if n_imputations == 1 else outs


def _has_column(df: pd.DataFrame, name) -> bool:
    return any(c == name for c in df.columns)


def _fill(model, df: pd.DataFrame, Z: np.ndarray, miss: np.ndarray, is_array: bool, X):
    dec = model.encoder_.inverse_transform(Z)
    out = df.copy()
    names = model.encoder_.schema.names
    for j, name in enumerate(names):
        mj = miss[:, j]
        if not mj.any():  # nothing imputed: the training dtype all the same, where it holds
            pos = next((i for i, c in enumerate(out.columns) if c == name), None)
            if pos is not None and out.iloc[:, pos].dtype != dec.iloc[:, j].dtype:
                cast = _lossless_cast(pd.Series(out.iloc[:, pos].astype(object).to_numpy(),
                                                index=out.index), dec.iloc[:, j].dtype)
                if cast is not None:
                    out.isetitem(pos, cast)
            continue
        pos = next(i for i, c in enumerate(out.columns) if c == name)
        col = out.iloc[:, pos].astype(object).to_numpy().copy()
        col[mj] = dec.iloc[:, j].astype(object).to_numpy()[mj]
        # the training dtype (nullable where NaN remain: dec's), else the input's, when every
        # cell survives the cast (an observed unseen level or 2.5 in an integer column does not)
        new = pd.Series(col, index=out.index)
        for dtype in (dec.iloc[:, j].dtype, df.iloc[:, pos].dtype):
            cast = _lossless_cast(new, dtype)
            if cast is not None:
                new = cast
                break
        else:
            new = new.infer_objects()
        out.isetitem(pos, new)
    if is_array:
        return out.to_numpy(dtype=X.dtype) if X.dtype != object else out.to_numpy()
    return out


def _lossless_cast(col: pd.Series, dtype) -> pd.Series | None:
    """``col`` (object values) cast to ``dtype``, or None when a value would change or be lost
    (NaN where a value was, 2.5 -> 2, ``'no'`` -> True, a level outside a categorical's)."""
    try:
        new = col.astype(dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    miss = col.isna().to_numpy()
    if not np.array_equal(new.isna().to_numpy(), miss):
        return None
    old_v = col.to_numpy()[~miss]
    new_v = new.astype(object).to_numpy()[~miss]
    try:
        same = bool(np.all(np.equal(old_v, new_v, dtype=object)))
    except (TypeError, ValueError):
        return None
    return new if same else None
