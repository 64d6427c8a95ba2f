"""Machine-learning utility: train-on-synthetic / test-on-real (TSTR) next to TRTR."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forestgen.metrics._prep import (
    Encoder,
    Schema,
    category_strings,
    infer_schema,
    limit_threads,
    numeric_values,
    prepare,
)
from forestgen.metrics.fidelity import SmallSampleWarning, balanced_folds, default_model

__all__ = ["TSTRResult", "tstr"]


@dataclass(frozen=True)
class TSTRResult:
    """TSTR vs TRTR scores (Esteban et al., 2017) on the same real rows.

    ``table`` has one row per metric with columns ``trtr``, ``tstr``, ``gap`` (= trtr - tstr
    for higher-is-better metrics, tstr - trtr for RMSE) and ``gap_ci_low`` / ``gap_ci_high``,
    a paired bootstrap interval over the scored real rows. ``warning`` says why the scores
    alone are not conclusive (too few scored rows), else ``None``.
    """

    task: str
    target: str
    trtr: dict[str, float]
    tstr: dict[str, float]
    n_test: int
    table: pd.DataFrame = field(repr=False)
    warning: str | None = None


def _scores(task: str, y_true: np.ndarray, pred: np.ndarray, proba: np.ndarray | None,
            classes: np.ndarray) -> dict[str, float]:
    """Scores of predictions ``pred`` (and class probabilities ``proba`` over ``classes``)."""
    if task == "regression":
        err = y_true - pred
        ss = float(((y_true - y_true.mean()) ** 2).sum())
        r2 = 1.0 - float((err ** 2).sum()) / ss if ss > 0 else float("nan")
        return {"r2": r2, "rmse": float(np.sqrt(np.mean(err ** 2)))}
    from sklearn.metrics import roc_auc_score

    out = {"accuracy": float(np.mean(pred == y_true))}
    present = np.isin(classes, np.union1d(np.unique(y_true), np.unique(pred)))
    f1 = []
    for c in classes[present]:
        tp = float(np.sum((pred == c) & (y_true == c)))
        denom = float(np.sum(pred == c) + np.sum(y_true == c))
        f1.append(2.0 * tp / denom if denom else 0.0)
    out["macro_f1"] = float(np.mean(f1)) if f1 else float("nan")
    auc = float("nan")
    seen = np.isin(classes, np.unique(y_true))
    try:
        if len(classes) == 2 and seen.all():
            auc = float(roc_auc_score(y_true == classes[1], proba[:, 1]))
        elif seen.sum() >= 2:
            sub = proba[:, seen]
            sub = sub / np.clip(sub.sum(1, keepdims=True), 1e-12, None)
            if seen.sum() == 2:
                auc = float(roc_auc_score(y_true == classes[seen][1], sub[:, 1]))
            else:
                auc = float(roc_auc_score(y_true, sub, multi_class="ovr", average="macro",
                                          labels=classes[seen]))
    except ValueError:
        auc = float("nan")
    out["auc"] = auc
    return out


def _predict(task: str, model: object, X: np.ndarray,
             classes: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Predictions and (classification) probabilities spread over all ``classes``."""
    if task == "regression":
        return np.asarray(model.predict(X), dtype=float), None
    proba = np.zeros((len(X), len(classes)))
    pos = {c: i for i, c in enumerate(classes)}
    for j, c in enumerate(model.classes_):
        proba[:, pos[c]] = np.asarray(model.predict_proba(X), dtype=float)[:, j]
    return classes[np.argmax(proba, axis=1)], proba


class _Constant:
    """Predicts the single class a training set holds (sklearn classifiers refuse one class)."""

    def __init__(self, label: object) -> None:
        self.classes_ = np.array([label], dtype=object)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.ones((len(X), 1))


def tstr(real: object, synthetic: object, target: str, *, test: object | None = None,
         estimator: object | None = None, task: str | None = None, n_folds: int = 5,
         random_state: int | None = 0, kinds: object = None, n_threads: int | None = None,
         confidence: float = 0.95, n_boot: int = 200, min_test: int = 50) -> TSTRResult:
    """Train on synthetic, test on real (TSTR) next to train on real, test on real (TRTR).

    With a real holdout ``test`` (recommended) both models are scored on it. Without one every
    real row is scored: TRTR by ``n_folds``-fold cross-validation over ``real``, TSTR by the
    model trained on all of ``synthetic`` (so small tables are not cut to a tiny test split).
    ``task`` comes from the target's kind ("classification" for categorical, else
    "regression"; kinds from the dtypes or ``kinds``). Classification reports accuracy,
    macro-F1 and AUC (binary ROC AUC; multiclass one-vs-rest macro); regression R² and RMSE.
    Every gap has a paired bootstrap interval over the scored rows (``n_boot`` resamples; 0:
    none, the interval is NaN and the scores are unchanged); with fewer than
    ``min_test`` of them a :class:`~forestgen.metrics.fidelity.SmallSampleWarning` is issued.
    The default estimator is :func:`~forestgen.metrics.fidelity.default_model` on an ordinal
    encoding (its capacity scales with the training size); a given ``estimator`` is cloned and
    fitted on the standardised one-hot encoding. ``n_threads`` caps OpenMP/BLAS threads.
    """
    from sklearn.base import clone

    real, synthetic, test = prepare(real, synthetic, test, names=["synthetic", "test"])
    target = str(target)
    if target not in real.columns:
        raise ValueError(f"target column {target!r} not in the data")
    schema = infer_schema(real, kinds)
    if task is None:
        task = "regression" if target in schema.numeric else "classification"
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    enc = Encoder(schema, real, [synthetic, test])
    feats = [c for c in schema.columns if c != target]
    fschema = Schema(tuple(feats), tuple(c for c in schema.numeric if c != target),
                     tuple(c for c in schema.categorical if c != target))
    fenc = Encoder(fschema, real[feats], [o[feats] for o in (synthetic, test) if o is not None])
    native = estimator is None

    def xy(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        if task == "regression":
            y = numeric_values(df[target])
            keep = ~np.isnan(y)
        else:
            y = category_strings(df[target])
            keep = np.ones(len(y), dtype=bool)
        df = df[keep]
        X = enc.ordinal(df, exclude=[target])[0] if native else fenc.onehot(df[feats])
        return X, y[keep]

    _, mask = enc.ordinal(real.iloc[:1], exclude=[target])
    rng = np.random.default_rng(random_state)
    seed = int(rng.integers(2**31 - 1))

    def fit(X: np.ndarray, y: np.ndarray) -> object:
        if task == "classification" and len(set(y)) < 2:
            return _Constant(y[0]) if len(y) else None
        model = default_model(task, len(y), mask, seed) if native else clone(estimator)
        return model.fit(X, y)

    Xr, yr = xy(real)
    Xs, ys = xy(synthetic)
    classes = np.array([], dtype=object)
    if task == "classification":
        labels = set(yr) | set(ys) | (set() if test is None else set(xy(test)[1]))
        classes = np.array(sorted(labels), dtype=object)
    with limit_threads(n_threads):
        if test is not None:
            Xt, yt = xy(test)
            pred_r, proba_r = _predict(task, fit(Xr, yr), Xt, classes)
        else:
            if len(yr) < n_folds:
                raise ValueError(f"tstr needs at least n_folds={n_folds} real rows with a "
                                 f"target, got {len(yr)}")
            Xt, yt = Xr, yr
            fold = (balanced_folds(yr, n_folds, rng) if task == "classification"
                    else rng.permutation(len(yr)) % n_folds)
            pred_r = np.empty(len(yt), dtype=float if task == "regression" else object)
            proba_r = None if task == "regression" else np.zeros((len(yt), len(classes)))
            for k in range(n_folds):
                tr, te = fold != k, fold == k
                p, pr = _predict(task, fit(Xr[tr], yr[tr]), Xr[te], classes)
                pred_r[te] = p
                if pr is not None:
                    proba_r[te] = pr
        syn_model = fit(Xs, ys)
        if syn_model is None:
            raise ValueError(f"synthetic data has no rows with a {target!r} value")
        pred_s, proba_s = _predict(task, syn_model, Xt, classes)
    res_real = _scores(task, yt, pred_r, proba_r, classes)
    res_syn = _scores(task, yt, pred_s, proba_s, classes)
    boot = np.random.default_rng(seed)
    gaps: dict[str, list[float]] = {k: [] for k in res_real}
    for _ in range(n_boot):
        i = boot.integers(0, len(yt), len(yt))
        a = _scores(task, yt[i], pred_r[i], None if proba_r is None else proba_r[i], classes)
        b = _scores(task, yt[i], pred_s[i], None if proba_s is None else proba_s[i], classes)
        for k in gaps:
            gaps[k].append(b[k] - a[k] if k == "rmse" else a[k] - b[k])
    lo_q, hi_q = 50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)
    rows = []
    for name in res_real:
        gap = res_syn[name] - res_real[name] if name == "rmse" else res_real[name] - res_syn[name]
        g = np.asarray(gaps[name], dtype=float)
        g = g[np.isfinite(g)]
        lo, hi = (np.percentile(g, [lo_q, hi_q]) if len(g) else (np.nan, np.nan))
        rows.append({"metric": name, "trtr": res_real[name], "tstr": res_syn[name], "gap": gap,
                     "gap_ci_low": float(lo), "gap_ci_high": float(hi)})
    warning = None
    if len(yt) < min_test:
        warning = (f"TSTR scored on {len(yt)} real rows (< {min_test}): the scores alone are "
                   "not conclusive, read the gap intervals")
        warnings.warn(warning, SmallSampleWarning, stacklevel=2)
    if task == "classification" and len(set(yt)) < 2:
        one = (f"the {len(yt)} scored real rows hold one class of {target!r} "
               f"({next(iter(set(yt)), None)!r}): AUC is undefined (NaN) and accuracy only "
               f"counts that class; score on rows holding both classes")
        warning = one if warning is None else f"{warning}; {one}"
        warnings.warn(one, SmallSampleWarning, stacklevel=2)
    return TSTRResult(task=task, target=target, trtr=res_real, tstr=res_syn, n_test=len(yt),
                      table=pd.DataFrame(rows), warning=warning)
