"""``ForestImputer``: a scikit-learn transformer that fills missing cells from a forest's
conditional distribution (MissARF, Golchian et al. 2025; ARF spec §3 for the queries).

The imputer fits any forestgen learner that can condition (ARF by default) on the training
table, then fills each missing cell given the row's observed cells:

* ``sample_posterior=False``: the conditional mean (numeric) / most probable level (discrete);
* ``sample_posterior=True``: a draw from the conditional distribution;
* :meth:`ForestImputer.multiple_imputation`: ``m`` completed tables of independent draws, for
  analyses pooled with Rubin's rules (:func:`rubin_pool`).

Refitting on completed tables (``n_refits``). A learner fitted on the incomplete table learns
from rows with missing cells as if "missing" were a value: ARF sends them to one side of each
split on that column, so a leaf's coverage counts rows whose (unknown) value lies outside its
box and its relation to the other columns is blurred. Imputations from such a model attenuate
regression slopes. ``fit`` therefore refits the learner ``n_refits`` times on the training table
completed by the previous model's conditional means, and each multiple-imputation table ends a
chain of ``n_refits`` rounds of "refit on a bootstrap resample of the completed table, redraw
the missing cells": data augmentation (Tanner & Wong 1987) with proper, bootstrap-based draws
(Rubin 1987), the scheme of chained-equation imputers (van Buuren 2018).

Draws (``draw``). ``"pmm"`` (default): predictive mean matching (Little 1988; the
multiple-imputation mode of missRanger): a missing numeric cell takes the observed value of one
of the ``pmm_k`` training rows whose predicted value of that column is closest to the cell's
own; discrete cells are drawn from the conditional pmf. ``"posterior"``: every cell is an exact
draw from the forest's conditional distribution. A forest's leaves are factorised, so its
conditional of a numeric column is over-dispersed around the conditional mean; regression
slopes fitted on such draws are attenuated, while matching on a mean keeps the relation to the
other columns and draws real residuals.

Matched means (``pmm_means``). Under MAR the missing cells concentrate where the columns that
drive the missingness take extreme values, and there a forest's conditional mean is smoothed
towards the centre; a chain that refits the forest on its own imputations keeps that bias (a
fixed point of the attenuated model). ``"stacked"`` (default) updates the numeric columns one
after the other, as chained equations do (van Buuren 2018): the matched mean of column ``j`` is
the least-squares fit of ``j``, on the rows that observe it, on the row's other cells (the
chain's current values) and the forest's conditional mean of ``j``. Fitted on observed cells
only, it targets the conditional of ``j`` given the rest, which MAR leaves intact when ``j``'s
missingness depends on the other columns; the linear part carries the trend into the tails
where the forest flattens, the forest's mean the non-linear rest. Donors are the rows out of
the round's bootstrap resample (type-2 matching: a forest's mean of a row it was fitted on
leans towards that row's own value, which exaggerated slopes), and ``burn_in`` shared rounds
(default 7 with ``"stacked"``) move the chain away from its conditional-mean start before the
``m`` chains branch off. ``"forest"`` matches on the forest's conditional means alone (the
previous default; attenuated under MAR). Bias and coverage of both on the California-housing
benchmark under MCAR and MAR: ``benchmarks/results/multiple_imputation.md``.

Default learner: ``ARF(n_trees=50, min_node_size=5)``. Leaves of 30 rows capture about a third
of a partial association that small leaves capture two thirds of (California housing, the
log-rooms slope given income); averaging 50 trees keeps the small-leaf conditional means
steady. Residual bias, coverage and their Monte-Carlo errors are in
``benchmarks/results/multiple_imputation.md``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from forestgen.base import GenerativeForest
from forestgen.data.support import clamp_rows
from forestgen.validation import InputWarning, check_choice, check_int, warn_input

__all__ = ["ForestImputer", "RubinResult", "rubin_pool"]

INDICATOR_PREFIX = "missingindicator_"
#: the message of a learner's per-row query moving values outside its training range
#: (:func:`forestgen.data.support.clamp_query_rows`), as a warnings filter
OUTSIDE_RANGE = r".*lie outside the training range"


def default_learner() -> GenerativeForest:
    """ARF(n_trees=50, min_node_size=5): small leaves keep the partial associations that
    regression on imputed tables estimates; 50 trees keep the conditional means steady."""
    from forestgen.families.mixture.arf import ARF

    return ARF(n_trees=50, min_node_size=5)


class ForestImputer(TransformerMixin, BaseEstimator):
    """Impute missing values from a generative forest fitted on the incomplete data.

    Parameters
    ----------
    learner : a forestgen learner (unfitted; it is cloned) whose ``impute`` conditions on the
        observed cells; ``None``: ``ARF(n_trees=50, min_node_size=5)``.
    sample_posterior : draw each missing cell from its conditional distribution instead of taking
        the conditional mean / mode.
    add_indicator : append one boolean column per feature that had missing values in ``fit``
        (scikit-learn's ``MissingIndicator``, ``features="missing-only"``).
    bootstrap : in :meth:`multiple_imputation`, refit the learner on a bootstrap resample of the
        (completed) training rows in each round of each table's chain (default True: proper
        multiple imputation).
    draw : ``"pmm"`` (default: predictive mean matching for numeric columns, conditional draws
        for discrete ones) or ``"posterior"`` (conditional draws for every column); used by
        ``sample_posterior=True`` and :meth:`multiple_imputation`.
    pmm_k : donors per missing cell for ``draw="pmm"`` (default 5).
    pmm_means : what ``draw="pmm"`` matches on: ``"stacked"`` (default: per column, a
        least-squares fit, on the rows observing it, of the other cells and the forest's
        conditional mean; columns updated in turn; donors out of the bootstrap resample) or
        ``"forest"`` (the forest's conditional means); see the module docstring.
    n_refits : rounds of refitting the learner on the training table completed by its own
        imputations (default 3; 0 keeps the learner fitted on the incomplete table). ``fit``
        completes with conditional means; each of :meth:`multiple_imputation`'s tables is the
        end of its own chain of ``n_refits`` rounds of (bootstrap) refit and draw -- data
        augmentation (Tanner & Wong 1987), the scheme of chained-equation imputers.
    burn_in : rounds of (bootstrap) refit and redraw run once, in :meth:`multiple_imputation`,
        before the ``m`` chains branch off; ``None`` (default): 7 when ``draw="pmm"`` matches
        ``pmm_means="stacked"`` means, else 0.
    random_state : seeds the learner's fit and the posterior draws; the same seed gives the same
        tables on every call.

    Notes
    -----
    Input may be a numeric array or a DataFrame of mixed columns (numeric, categorical, bool);
    ``transform`` returns the same container (a DataFrame keeps its dtypes). ``NaN``/``None``
    mark missing cells. An observed cell holding a level the learner never saw is kept and
    marginalised when imputing the row's other cells.
    """

    def __init__(self, learner: GenerativeForest | None = None, *, sample_posterior: bool = False,
                 add_indicator: bool = False, bootstrap: bool = True, draw: str = "pmm",
                 pmm_k: int = 5, pmm_means: str = "stacked", n_refits: int = 3,
                 burn_in: int | None = None, random_state: Any = None):
        self.learner = learner
        self.sample_posterior = sample_posterior
        self.add_indicator = add_indicator
        self.bootstrap = bootstrap
        self.draw = draw
        self.pmm_k = pmm_k
        self.pmm_means = pmm_means
        self.burn_in = burn_in
        self.n_refits = n_refits
        self.random_state = random_state

    # ------------------------------------------------------------------ input handling
    def _validate(self, X, reset: bool) -> tuple[pd.DataFrame | np.ndarray, bool]:
        if isinstance(X, pd.DataFrame):
            validate_data(self, X, reset=reset, skip_check_array=True)
            return X, True
        X = validate_data(self, X, reset=reset, dtype=None, ensure_all_finite="allow-nan",
                          accept_sparse=False)
        if X.dtype.kind in "biuf":
            X = X.astype(np.float64)
        return X, False

    def _table(self, X: pd.DataFrame | np.ndarray, is_frame: bool) -> pd.DataFrame:
        """The learner's view: a DataFrame with the fitted column labels."""
        if is_frame:
            return X
        return pd.DataFrame(X, columns=range(X.shape[1]))

    def _make_learner(self, seed: int) -> GenerativeForest:
        base = default_learner() if self.learner is None else self.learner
        if not hasattr(base, "impute") or not hasattr(base, "fit"):
            raise TypeError(f"learner must be a forestgen learner with fit() and impute(), got "
                            f"{type(base).__name__}")
        model = clone(base)
        if "random_state" in model.get_params():
            model.set_params(random_state=seed)
        return model

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None) -> ForestImputer:
        """Fit the learner on ``X`` (missing cells allowed; they are marginalised in training)."""
        check_choice("draw", self.draw, ("pmm", "posterior"))
        check_int("pmm_k", self.pmm_k, 1)
        check_choice("pmm_means", self.pmm_means, ("forest", "stacked"))
        check_int("n_refits", self.n_refits, 0)
        if self.burn_in is not None:
            check_int("burn_in", self.burn_in, 0)
        X, is_frame = self._validate(X, reset=True)
        if X.shape[0] < 2:
            raise ValueError(f"ForestImputer needs at least 2 samples; got n_samples = "
                             f"{X.shape[0]}")
        table = self._table(X, is_frame)
        missing = table.isna().to_numpy()
        empty = np.flatnonzero(missing.all(axis=0))
        if empty.size:
            raise ValueError(f"column {table.columns[empty[0]]!r} is entirely missing; drop it "
                             "before imputing")
        rng = np.random.default_rng(self.random_state)
        self._seed = int(rng.integers(2**31 - 1))
        model = self._make_learner(self._seed).fit(table)
        completed = table
        for _ in range(self.n_refits if missing.any() else 0):
            completed = self._impute(model, table, table, False, 1, rng)[0]
            model = self._make_learner(int(rng.integers(2**31 - 1))).fit(completed)
        self.learner_ = model
        self._train = table
        self._completed = completed
        self.indicator_features_ = np.flatnonzero(missing.any(axis=0))
        self._is_frame = is_frame
        return self

    # ------------------------------------------------------------------ transform
    def _impute(self, model: GenerativeForest, train: pd.DataFrame, table: pd.DataFrame,
                sample: bool, m: int, rng: np.random.Generator,
                completed: pd.DataFrame | None = None,
                start: pd.DataFrame | None = None) -> list[pd.DataFrame]:
        """``m`` completed copies of ``table`` from ``model`` (fitted on ``train``)."""
        if not table.isna().to_numpy().any():
            return [table.copy() for _ in range(m)]
        unseen = _unseen_levels(model, table)
        any_unseen = bool(unseen.to_numpy().any())
        cond = table.mask(unseen) if any_unseen else table
        if not sample:
            out = [model.impute(cond, method="expectation")]
        elif self.draw == "posterior":
            out = model.impute(cond, method="sample", n_imputations=m, random_state=rng)
            out = [out] if m == 1 else list(out)
        else:
            stacked = self.pmm_means == "stacked"
            out = _pmm(model, train, cond, m, int(self.pmm_k), rng,
                       completed if stacked else None, start)
        return [_restore(f, table, unseen) for f in out] if any_unseen else out

    def _finish(self, filled: pd.DataFrame, X, is_frame: bool, missing: np.ndarray):
        if is_frame:
            out = filled
            if self.add_indicator:
                names = self.feature_names_in_ if hasattr(self, "feature_names_in_") else \
                    [str(c) for c in X.columns]
                ind = pd.DataFrame({f"{INDICATOR_PREFIX}{names[j]}": missing[:, j]
                                    for j in self.indicator_features_}, index=X.index)
                out = pd.concat([out, ind], axis=1)
            return out
        arr = filled.to_numpy(dtype=X.dtype) if X.dtype != object else filled.to_numpy()
        if self.add_indicator:
            ind = missing[:, self.indicator_features_]
            arr = np.hstack([arr, ind.astype(arr.dtype if arr.dtype != object else object)])
        return arr

    def _report_input(self, table: pd.DataFrame) -> None:
        """One :class:`~forestgen.validation.InputWarning` naming the columns of ``table`` that
        hold levels the learner never saw (kept as they are, left out as evidence) or levels
        given as text; the learner's own queries then stay silent for this call."""
        notes: list = []
        self.learner_.encoder_.transform(table, "nan", notes)
        warn_input(notes, "ForestImputer", unseen="such cells are kept as they are and left "
                                                  "out of the evidence of their rows")

    def transform(self, X):
        """``X`` with every missing cell imputed (plus indicator columns if ``add_indicator``)."""
        check_is_fitted(self, "learner_")
        X, is_frame = self._validate(X, reset=False)
        table = self._table(X, is_frame)
        missing = table.isna().to_numpy()
        rng = np.random.default_rng(self._seed)
        start = self._completed if table.equals(self._train) else None
        self._report_input(table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            filled = self._impute(self.learner_, self._train, table, self.sample_posterior, 1,
                                  rng, self._completed, start)[0]
        return self._finish(filled, X, is_frame, missing)

    def multiple_imputation(self, X, m: int = 5) -> list:
        """``m`` completed copies of ``X``, each with an independent draw per missing cell
        (``draw``). Each copy ends its own chain: starting from the training table completed in
        ``fit``, ``n_refits`` rounds of refitting the learner (on a bootstrap resample if
        ``bootstrap``) and redrawing the training table's missing cells; ``X`` is drawn from
        the chain's last model. The chains start from ``burn_in`` shared rounds of refit and
        redraw on the whole training table. With ``n_refits=0`` the copies are drawn from one
        refit per copy (``bootstrap``) or from the fitted model."""
        check_is_fitted(self, "learner_")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise ValueError(f"m must be a positive integer, got {m!r}")
        X, is_frame = self._validate(X, reset=False)
        table = self._table(X, is_frame)
        self._report_input(table)
        self._report_outside(table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            # the refits' narrower ranges (bootstrap resamples) are not the user's concern:
            # the fitted learner's range was checked above, once
            warnings.filterwarnings("ignore", OUTSIDE_RANGE, RuntimeWarning)
            return self._multiple(X, table, is_frame, int(m))

    def _report_outside(self, table: pd.DataFrame) -> None:
        """One ``RuntimeWarning`` naming the columns of ``table`` with observed values outside
        the fitted learner's training range (as its own ``impute`` would say)."""
        moved = clamp_rows(self.learner_.encoder_.schema,
                           self.learner_.encoder_.transform(table, "nan"))
        if moved:
            warnings.warn(f"ForestImputer.multiple_imputation: observed values of column(s) "
                          f"{moved} lie outside the training range, where the model has no "
                          f"mass; those rows are answered at the nearest end of the range",
                          RuntimeWarning, stacklevel=3)

    def _multiple(self, X, table: pd.DataFrame, is_frame: bool, m: int) -> list:
        missing = table.isna().to_numpy()
        rng = np.random.default_rng(self._seed)
        rounds = self.n_refits if self._train.isna().to_numpy().any() else 0
        if not self.bootstrap and rounds == 0:
            filled = self._impute(self.learner_, self._train, table, True, int(m), rng)
            return [self._finish(f, X, is_frame, missing) for f in filled]
        filled = []
        n = len(self._train)
        same = table.equals(self._train)
        burned = self._completed
        stacked = self.draw == "pmm" and self.pmm_means == "stacked"
        burn = self.burn_in if self.burn_in is not None else (7 if stacked else 0)
        for _ in range(burn if rounds else 0):
            idx = rng.integers(n, size=n)
            oob = np.setdiff1d(np.arange(n), idx)
            model = self._make_learner(int(rng.integers(2**31 - 1))).fit(
                burned.iloc[idx].reset_index(drop=True))
            burned = self._impute(model, self._train.iloc[oob].reset_index(drop=True),
                                  self._train, True, 1, rng,
                                  burned.iloc[oob].reset_index(drop=True), burned)[0]
        for _ in range(int(m)):
            completed = burned
            for r in range(max(rounds, 1)):
                idx = rng.integers(n, size=n) if self.bootstrap else np.arange(n)
                fit_on = completed.iloc[idx].reset_index(drop=True)
                model = self._make_learner(int(rng.integers(2**31 - 1))).fit(fit_on)
                last = r == max(rounds, 1) - 1
                target = table if last else self._train
                start = completed if not last or same else None
                if stacked and self.bootstrap:
                    oob = np.setdiff1d(np.arange(n), idx)
                    donors = self._train.iloc[oob].reset_index(drop=True)
                    dcomp = completed.iloc[oob].reset_index(drop=True)
                else:
                    donors = self._train.iloc[idx].reset_index(drop=True)
                    dcomp = fit_on
                completed = self._impute(model, donors, target, True, 1, rng, dcomp, start)[0]
            filled.append(completed)
        return [self._finish(f, X, is_frame, missing) for f in filled]

    # ------------------------------------------------------------------ sklearn API
    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Input feature names, then ``missingindicator_<name>`` per indicator column."""
        check_is_fitted(self, "learner_")
        if input_features is None:
            if hasattr(self, "feature_names_in_"):
                names = list(self.feature_names_in_)
            else:
                names = [f"x{j}" for j in range(self.n_features_in_)]
        else:
            names = [str(c) for c in input_features]
            if len(names) != self.n_features_in_:
                raise ValueError(f"input_features should have length equal to number of "
                                 f"features ({self.n_features_in_}), got {len(names)}")
            if hasattr(self, "feature_names_in_") and names != list(self.feature_names_in_):
                raise ValueError("input_features is not equal to feature_names_in_")
        if self.add_indicator:
            names += [f"{INDICATOR_PREFIX}{names[j]}" for j in self.indicator_features_]
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.non_deterministic = bool(self.sample_posterior)
        return tags


def _design(model: GenerativeForest, frame: pd.DataFrame, skip: int) -> np.ndarray:
    """Least-squares design of ``frame`` without column ``skip``: an intercept, the numeric
    columns in the learner's encoding, one indicator per level of the discrete ones."""
    schema = model.schema_
    Z = np.nan_to_num(model.encoder_.transform(frame), nan=0.0)
    parts = [np.ones((len(frame), 1))]
    for j in range(schema.d):
        if j == skip:
            continue
        if schema.columns[j].is_discrete:
            levels = np.arange(1, int(schema.n_levels[j]) + 1)  # level 0 is the baseline
            parts.append((Z[:, j, None] == levels[None, :]).astype(float))
        else:
            parts.append(Z[:, j, None])
    return np.hstack(parts)


def _pmm(model: GenerativeForest, train: pd.DataFrame, cond: pd.DataFrame, m: int, k: int,
         rng: np.random.Generator, completed: pd.DataFrame | None = None,
         start: pd.DataFrame | None = None) -> list[pd.DataFrame]:
    """``m`` completions of ``cond`` by predictive mean matching (numeric columns) and
    conditional draws (discrete columns). The forest's prediction of a column comes, for a
    recipient, from its observed cells; for a donor (a ``train`` row with the column observed),
    from its other cells. Without ``completed`` these predictions are matched as they are
    (``pmm_means="forest"``). With ``completed`` (``train`` with every cell filled) the columns
    are updated one after the other (``pmm_means="stacked"``): the matched mean is the
    least-squares fit of the column, on the donors, on their other cells (from ``completed``)
    and the forest's prediction; a recipient's other missing cells hold ``start`` (the chain's
    current values; the forest's conditional means without it), then the draws made so far."""
    schema = model.schema_
    missing = cond.isna().to_numpy()
    discrete = [j for j in range(schema.d) if missing[:, j].any() and schema.columns[j].is_discrete]
    numeric = [j for j in range(schema.d) if missing[:, j].any()
               and not schema.columns[j].is_discrete]
    if discrete:
        draws = model.impute(cond, method="sample", n_imputations=m, random_state=rng)
        out = [draws] if m == 1 else list(draws)
    else:
        out = [cond.copy() for _ in range(m)]
    if not numeric:
        return out
    mean = model.impute(cond, method="expectation")
    chained = completed is not None
    if chained:
        base = start if start is not None else mean
        for f in out:
            for j in numeric:
                col = cond.columns[j]
                f[col] = f[col].where(~missing[:, j], base[col].to_numpy())
    for j in numeric:
        col = cond.columns[j]
        has = train.iloc[:, j].notna().to_numpy()
        donors = train.loc[has].copy()
        values = donors.iloc[:, j].to_numpy()
        donors[col] = np.nan
        with warnings.catch_warnings():  # a donor's unseen level is marginalised
            warnings.simplefilter("ignore", RuntimeWarning)
            pred = model.impute(donors, method="expectation").iloc[:, j].to_numpy(float)
        ok = np.isfinite(pred)
        pred, values = pred[ok], values[ok]
        rows = np.flatnonzero(missing[:, j])
        target = mean.iloc[rows, j].to_numpy(float)
        if not chained:
            nearest, fine = _nearest(pred, target, k)
            for f in out:
                _draw_into(f, col, rows, fine, nearest, values, cond[col].dtype, rng)
            continue
        dfull = completed.loc[has].iloc[ok]
        for f in out:
            both = pd.concat([dfull, f.iloc[rows]], ignore_index=True)
            D = np.column_stack([_design(model, both, j), np.concatenate([pred, target])])
            nd = len(dfull)
            fin = np.isfinite(D[nd:]).all(axis=1)
            D[nd:][~fin] = 0.0  # zero-probability evidence: the cell stays missing
            beta = np.linalg.lstsq(D[:nd], values.astype(float), rcond=None)[0]
            fitted = D @ beta
            fitted[nd:][~fin] = np.nan
            nearest, fine = _nearest(fitted[:nd], fitted[nd:], k)
            _draw_into(f, col, rows, fine, nearest, values, cond[col].dtype, rng)
    return out


def _nearest(pred: np.ndarray, target: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``pred`` of the ``k`` donors nearest each finite ``target``, and the mask of
    finite targets (zero-probability evidence leaves the cell missing)."""
    fine = np.isfinite(target)
    kk = min(k, len(pred))
    if kk == 0:
        return np.empty((0, 0), dtype=np.int64), np.zeros_like(fine)
    order = np.argsort(pred, kind="stable")
    spred = pred[order]
    # the kk donors nearest in predicted mean lie in a window of 2 kk around the insertion
    pos = np.searchsorted(spred, target[fine])
    start = np.clip(pos - kk, 0, max(len(spred) - 2 * kk, 0))
    win = np.minimum(start[:, None] + np.arange(2 * kk), len(spred) - 1)
    dist = np.abs(spred[win] - target[fine, None])
    nearest = np.take_along_axis(win, np.argsort(dist, axis=1, kind="stable")[:, :kk], 1)
    return order[nearest], fine


def _draw_into(f: pd.DataFrame, col, rows: np.ndarray, fine: np.ndarray, nearest: np.ndarray,
               values: np.ndarray, dtype, rng: np.random.Generator) -> None:
    """Fill ``f[col]`` at ``rows[fine]`` with the observed value of one of the nearest donors,
    drawn uniformly."""
    if nearest.size == 0:
        return
    kk = nearest.shape[1]
    pick = nearest[np.arange(len(nearest)), rng.integers(kk, size=len(nearest))]
    vals = f[col].to_numpy(copy=True)
    vals[rows[fine]] = values[pick]
    f[col] = pd.Series(vals, index=f.index).astype(dtype)


def _unseen_levels(model: GenerativeForest, table: pd.DataFrame) -> pd.DataFrame:
    """Observed cells holding a level the model never saw: they cannot be conditioned on, so
    they are marginalised for the imputation of the row's other cells and kept as they are."""
    schema = model.schema_
    Z = model.encoder_.transform(table)
    k = np.where(schema.discrete_mask, schema.n_levels, -1)
    return pd.DataFrame(Z == k[None, :], index=table.index, columns=table.columns)


def _restore(filled: pd.DataFrame, table: pd.DataFrame, unseen: pd.DataFrame) -> pd.DataFrame:
    out = filled.copy()
    for j in np.flatnonzero(unseen.to_numpy().any(axis=0)):
        col = out.iloc[:, j].astype(object).to_numpy().copy()
        rows = unseen.iloc[:, j].to_numpy()
        col[rows] = table.iloc[:, j].astype(object).to_numpy()[rows]
        try:
            out.isetitem(j, pd.Series(col, index=out.index).astype(table.iloc[:, j].dtype))
        except (TypeError, ValueError):
            out.isetitem(j, pd.Series(col, index=out.index).infer_objects())
    return out


# ---------------------------------------------------------------------- Rubin's rules


class RubinResult(dict):
    """Pooled estimates: keys ``estimate``, ``se``, ``df``, ``ci_low``, ``ci_high``,
    ``within``, ``between`` (arrays, one entry per parameter) and ``m``."""


def rubin_pool(estimates, variances, df_complete: float | None = None,
               level: float = 0.95) -> RubinResult:
    """Pool ``m`` point estimates ``[m, p]`` and their squared standard errors ``[m, p]`` with
    Rubin's rules (Rubin 1987): total variance ``T = W + (1 + 1/m) B``; Student-t intervals with
    the Barnard-Rubin (1999) small-sample degrees of freedom when ``df_complete`` is given,
    otherwise Rubin's large-sample ``(m - 1) / lambda^2``."""
    from scipy import stats

    Q = np.atleast_2d(np.asarray(estimates, dtype=float))
    U = np.atleast_2d(np.asarray(variances, dtype=float))
    if Q.shape != U.shape:
        raise ValueError(f"estimates {Q.shape} and variances {U.shape} must have the same shape")
    m = Q.shape[0]
    if m < 2:
        raise ValueError(f"Rubin's rules need at least 2 imputations, got m = {m}")
    qbar = Q.mean(axis=0)
    W = U.mean(axis=0)
    B = Q.var(axis=0, ddof=1)
    T = W + (1 + 1 / m) * B
    lam = np.where(T > 0, (1 + 1 / m) * B / np.where(T > 0, T, 1), 0.0)
    with np.errstate(divide="ignore"):
        df_old = np.where(lam > 0, (m - 1) / np.maximum(lam, 1e-300) ** 2, np.inf)
    if df_complete is None:
        df = df_old
    else:
        df_obs = (df_complete + 1) / (df_complete + 3) * df_complete * (1 - lam)
        df = np.where(np.isfinite(df_old), 1 / (1 / df_old + 1 / np.maximum(df_obs, 1e-300)),
                      df_obs)
    se = np.sqrt(T)
    t = stats.t.ppf(0.5 + level / 2, df)
    return RubinResult(estimate=qbar, se=se, df=df, ci_low=qbar - t * se, ci_high=qbar + t * se,
                       within=W, between=B, m=m)
