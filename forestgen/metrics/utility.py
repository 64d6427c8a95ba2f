"""Machine-learning utility: train-on-synthetic / test-on-real (TSTR) next to TRTR."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forestgen.metrics._prep import (
    MAX_CATEGORIES,
    Encoder,
    Schema,
    category_strings,
    infer_schema,
    limit_threads,
    numeric_values,
    prepare,
)

__all__ = ["TSTRResult", "tstr"]


@dataclass(frozen=True)
class TSTRResult:
    """TSTR vs TRTR scores (Esteban et al., 2017) on the same real test set.

    ``table`` has one row per metric with columns ``trtr``, ``tstr`` and ``gap`` (= trtr - tstr
    for higher-is-better metrics, tstr - trtr for RMSE).
    """

    task: str
    target: str
    trtr: dict[str, float]
    tstr: dict[str, float]
    n_test: int
    table: pd.DataFrame = field(repr=False)


def _scores(task: str, y_true: np.ndarray, model: object, X: np.ndarray,
            classes: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import (
        accuracy_score,
        f1_score,
        mean_squared_error,
        r2_score,
        roc_auc_score,
    )

    if task == "regression":
        pred = np.asarray(model.predict(X), dtype=float)
        return {"r2": float(r2_score(y_true, pred)),
                "rmse": float(np.sqrt(mean_squared_error(y_true, pred)))}
    pred = np.asarray(model.predict(X)).astype(object)
    out = {"accuracy": float(accuracy_score(y_true, pred)),
           "macro_f1": float(f1_score(y_true, pred, average="macro", labels=classes,
                                      zero_division=0))}
    auc = float("nan")
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(X), dtype=float)
        full = np.zeros((len(X), len(classes)))
        pos = {c: i for i, c in enumerate(classes)}
        for j, c in enumerate(model.classes_):
            full[:, pos[c]] = proba[:, j]
        present = np.isin(classes, np.unique(y_true))
        try:
            if len(classes) == 2:
                auc = float(roc_auc_score(y_true == classes[1], full[:, 1]))
            elif present.sum() >= 2:
                sub = full[:, present]
                sub = sub / np.clip(sub.sum(1, keepdims=True), 1e-12, None)
                auc = float(roc_auc_score(y_true, sub, multi_class="ovr", average="macro",
                                          labels=classes[present]))
        except ValueError:
            auc = float("nan")
    out["auc"] = auc
    return out


def tstr(real: object, synthetic: object, target: str, *, test: object | None = None,
         estimator: object | None = None, task: str | None = None, test_size: float = 0.3,
         random_state: int | None = 0, max_categories: int = MAX_CATEGORIES,
         n_threads: int | None = None) -> TSTRResult:
    """Train on synthetic, test on real (TSTR) next to train on real, test on real (TRTR).

    The real test set is ``test`` (a real holdout; recommended) or else a random
    ``test_size`` split of ``real`` (then TRTR trains on the rest). ``task`` is inferred from the
    target column type ("classification" for categorical, else "regression"). Classification
    reports accuracy, macro-F1 and AUC (binary ROC AUC; multiclass one-vs-rest macro);
    regression R² and RMSE. The default estimator is sklearn's HistGradientBoosting with native
    categorical support on an ordinal encoding; a given ``estimator`` is cloned and fitted on
    the standardised one-hot encoding. ``n_threads`` caps OpenMP/BLAS threads while fitting.
    """
    from sklearn.base import clone
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    real, synthetic, test = prepare(real, synthetic, test, names=["synthetic", "test"])
    target = str(target)
    if target not in real.columns:
        raise ValueError(f"target column {target!r} not in the data")
    if test is None:
        rng = np.random.default_rng(random_state)
        perm = rng.permutation(len(real))
        n_test = int(round(test_size * len(real)))
        test, real = real.iloc[np.sort(perm[:n_test])], real.iloc[np.sort(perm[n_test:])]
    schema = infer_schema(real, max_categories)
    if task is None:
        task = "regression" if target in schema.numeric else "classification"
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    enc = Encoder(schema, real, [synthetic, test])
    feats = [c for c in schema.columns if c != target]
    fschema = Schema(tuple(feats), tuple(c for c in schema.numeric if c != target),
                     tuple(c for c in schema.categorical if c != target))
    fenc = Encoder(fschema, real[feats], [synthetic[feats], test[feats]])

    def xy(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        if task == "regression":
            y = numeric_values(df[target])
            keep = ~np.isnan(y)
        else:
            y = category_strings(df[target])
            keep = np.ones(len(y), dtype=bool)
        df = df[keep]
        if native:
            X, _ = enc.ordinal(df, exclude=[target])
        else:
            X = fenc.onehot(df[feats])
        return X, y[keep]

    _, mask = enc.ordinal(real.iloc[:1], exclude=[target])
    native = estimator is None
    if native:
        cat = mask if mask.any() else None
        seed = None if random_state is None else int(random_state)
        if task == "classification":
            estimator = HistGradientBoostingClassifier(categorical_features=cat, random_state=seed)
        else:
            estimator = HistGradientBoostingRegressor(categorical_features=cat, random_state=seed)
    Xr, yr = xy(real)
    Xs, ys = xy(synthetic)
    Xt, yt = xy(test)
    classes = np.array([], dtype=object)
    if task == "classification":
        classes = np.array(sorted(set(yr) | set(ys) | set(yt)), dtype=object)
    with limit_threads(n_threads):
        res_real = _scores(task, yt, clone(estimator).fit(Xr, yr), Xt, classes)
        if task == "classification" and len(set(ys)) < 2:
            res_syn = {k: float("nan") for k in res_real}
            res_syn["accuracy"] = float(np.mean(yt == ys[0])) if len(ys) else float("nan")
        else:
            res_syn = _scores(task, yt, clone(estimator).fit(Xs, ys), Xt, classes)
    rows = []
    for name in res_real:
        gap = res_syn[name] - res_real[name] if name == "rmse" else res_real[name] - res_syn[name]
        rows.append({"metric": name, "trtr": res_real[name], "tstr": res_syn[name], "gap": gap})
    return TSTRResult(task=task, target=target, trtr=res_real, tstr=res_syn, n_test=len(yt),
                      table=pd.DataFrame(rows))

