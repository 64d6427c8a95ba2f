"""Fidelity metrics: marginals, pairwise associations, C2ST, MMD, energy distance, sliced W."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from forestgen.metrics._prep import (
    Encoder,
    category_strings,
    embed,
    infer_schema,
    limit_threads,
    numeric_values,
    prepare,
    sq_dists,
    subsample,
    to_matrix,
)

__all__ = [
    "AssociationGap",
    "C2STResult",
    "association_gap",
    "c2st",
    "energy_distance",
    "ks_statistic",
    "marginal_distances",
    "mmd",
    "sliced_wasserstein",
]


# --------------------------------------------------------------------------- marginals
def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic ``sup_x |F_a(x) - F_b(x)|`` (NaNs dropped)."""
    a = np.sort(np.asarray(a, dtype=float)[~np.isnan(a)])
    b = np.sort(np.asarray(b, dtype=float)[~np.isnan(b)])
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    x = np.concatenate([a, b])
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def total_variation(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation ``0.5 * sum_k |p_k - q_k|`` between two label arrays' frequencies."""
    pa = pd.Series(a).value_counts(normalize=True)
    pb = pd.Series(b).value_counts(normalize=True)
    p, q = pa.align(pb, fill_value=0.0)
    return float(0.5 * np.abs(p.to_numpy() - q.to_numpy()).sum())


def marginal_distances(real: object, synthetic: object, *, kinds: object = None) -> pd.DataFrame:
    """Per-column marginal distance: KS for numeric, total variation for categorical columns.

    Missing values are dropped for KS (their rate gap is reported in ``missing_gap``) and are
    their own level for TV. Returns one row per column with ``column, type, metric,
    statistic, score (= 1 - statistic), missing_gap``. Column kinds come from the dtypes or
    ``kinds`` (see :func:`forestgen.metrics._prep.infer_schema`).
    """
    real, synthetic = prepare(real, synthetic, names=["synthetic"])
    schema = infer_schema(real, kinds)
    rows = []
    for col in schema.columns:
        if col in schema.numeric:
            a, b = numeric_values(real[col]), numeric_values(synthetic[col])
            stat, metric = ks_statistic(a, b), "ks"
            gap = abs(float(np.isnan(a).mean()) - float(np.isnan(b).mean())) if len(b) else np.nan
            kind = "numeric"
        else:
            a, b = category_strings(real[col]), category_strings(synthetic[col])
            stat, metric, kind = total_variation(a, b), "tv", "categorical"
            gap = abs(float(real[col].isna().mean()) - float(synthetic[col].isna().mean()))
        rows.append({"column": col, "type": kind, "metric": metric, "statistic": stat,
                     "score": 1.0 - stat, "missing_gap": gap})
    return pd.DataFrame(rows, columns=["column", "type", "metric", "statistic", "score",
                                       "missing_gap"])


# --------------------------------------------------------------------------- associations
def _cramers_v(a: np.ndarray, b: np.ndarray) -> float:
    """Bias-corrected Cramér's V (Bergsma, 2013) from integer codes."""
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    r, k, n = a.max() + 1, b.max() + 1, len(a)
    if r < 2 or k < 2 or n < 2:
        return 0.0
    table = np.bincount(a * k + b, minlength=r * k).reshape(r, k).astype(float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / n
    chi2 = float(((table - expected) ** 2 / expected).sum())
    phi2 = max(0.0, chi2 / n - (r - 1) * (k - 1) / (n - 1))
    rc = r - (r - 1) ** 2 / (n - 1)
    kc = k - (k - 1) ** 2 / (n - 1)
    denom = min(rc - 1, kc - 1)
    return float(np.sqrt(phi2 / denom)) if denom > 0 else 0.0


def _correlation_ratio(codes: np.ndarray, x: np.ndarray) -> float:
    """Correlation ratio eta = sqrt(between-group / total variance) of ``x`` given ``codes``."""
    ok = ~np.isnan(x)
    codes, x = codes[ok], x[ok]
    if len(x) < 2:
        return 0.0
    _, g = np.unique(codes, return_inverse=True)
    total = float(((x - x.mean()) ** 2).sum())
    if total <= 0:
        return 0.0
    cnt = np.bincount(g)
    means = np.bincount(g, weights=x) / cnt
    between = float((cnt * (means - x.mean()) ** 2).sum())
    return float(np.sqrt(min(1.0, between / total)))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def association_matrix(df: pd.DataFrame, enc: Encoder) -> pd.DataFrame:
    """Pairwise associations: Pearson (num-num), Cramér's V (cat-cat), correlation ratio (mixed)."""
    schema = enc.schema
    cols = list(schema.columns)
    vals = {c: (numeric_values(df[c]) if c in schema.numeric else enc.codes(df, c)) for c in cols}
    m = np.eye(len(cols))
    for i, ci in enumerate(cols):
        for j in range(i + 1, len(cols)):
            cj = cols[j]
            ni, nj = ci in schema.numeric, cj in schema.numeric
            if ni and nj:
                v = _pearson(vals[ci], vals[cj])
            elif not ni and not nj:
                v = _cramers_v(vals[ci], vals[cj])
            elif ni:
                v = _correlation_ratio(vals[cj], vals[ci])
            else:
                v = _correlation_ratio(vals[ci], vals[cj])
            m[i, j] = m[j, i] = v
    return pd.DataFrame(m, index=cols, columns=cols)


@dataclass(frozen=True)
class AssociationGap:
    """Result of :func:`association_gap`.

    ``gap`` is the mean absolute difference over column pairs; ``matrix`` the absolute gap per
    pair; ``real`` / ``synthetic`` the association matrices themselves.
    """

    gap: float
    max_gap: float
    matrix: pd.DataFrame
    real: pd.DataFrame
    synthetic: pd.DataFrame


def association_gap(real: object, synthetic: object, *, max_rows: int | None = None,
                    random_state: int | None = 0, kinds: object = None) -> AssociationGap:
    """Gap between real and synthetic pairwise association matrices.

    Pearson correlation for numeric pairs, bias-corrected Cramér's V for categorical pairs and
    the correlation ratio for mixed pairs; all lie in [-1, 1] / [0, 1].
    """
    real, synthetic = prepare(real, synthetic, names=["synthetic"], min_rows=2)
    rng = np.random.default_rng(random_state)
    real, synthetic = subsample(real, max_rows, rng), subsample(synthetic, max_rows, rng)
    enc = Encoder(infer_schema(real, kinds), real, [synthetic])
    a, b = association_matrix(real, enc), association_matrix(synthetic, enc)
    gap = (a - b).abs()
    iu = np.triu_indices(len(gap), k=1)
    pairs = gap.to_numpy()[iu]
    mean = float(pairs.mean()) if len(pairs) else 0.0
    mx = float(pairs.max()) if len(pairs) else 0.0
    return AssociationGap(gap=mean, max_gap=mx, matrix=gap, real=a, synthetic=b)


# --------------------------------------------------------------------------- C2ST
#: Below this many rows per side the C2ST and TSTR default model is a random forest.
SMALL_N = 500


class SmallSampleWarning(UserWarning):
    """A metric was computed on so few rows that its value alone is not conclusive."""


class BelowChanceWarning(UserWarning):
    """A C2ST AUC is significantly below 0.5: the synthetic rows sit closer to the real rows
    given than independent draws would (near-copies of them), not a better-than-perfect
    generator."""


@dataclass(frozen=True)
class C2STResult:
    """Classifier two-sample test result (Lopez-Paz & Oquab, 2017).

    ``auc``: ROC AUC of pooled out-of-fold predictions (0.5 = indistinguishable, 1 = separable);
    ``auc_ci``: normal interval from the Hanley-McNeil standard error, widened for the
    dependence between cross-validation folds (Nadeau & Bengio, 2003); ``accuracy``:
    out-of-fold accuracy at threshold 0.5 with its binomial ``p_value`` against chance;
    ``classifier``: the model used; ``warning``: why the value alone is not conclusive
    (``None`` when the interval is narrow).
    """

    auc: float
    auc_ci: tuple[float, float]
    accuracy: float
    p_value: float
    fold_aucs: tuple[float, ...]
    n_real: int
    n_synthetic: int
    classifier: str = ""
    warning: str | None = None


def _hanley_mcneil_se(auc: float, n_pos: int, n_neg: int) -> float:
    q1 = auc / (2.0 - auc)
    q2 = 2.0 * auc * auc / (1.0 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc)
           + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    return float(np.sqrt(max(var, 0.0)))


def cv_inflation(n_folds: int) -> float:
    """Standard-error factor ``sqrt(1 + K / (K - 1))`` for K-fold out-of-fold scores.

    Out-of-fold predictions share training rows, so their errors are correlated; the
    corrected resampled variance of Nadeau & Bengio (2003) with test/train ratio
    ``1 / (K - 1)`` over ``K`` splits multiplies the naive variance by ``1 + K / (K - 1)``.
    """
    return float(np.sqrt(1.0 + n_folds / (n_folds - 1.0)))


def balanced_folds(labels: np.ndarray, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold id per row, dealing each class's rows round-robin after a shuffle.

    Every fold holds the same number of rows of each class (to within one), so a model that
    learns nothing predicts the training class ratio, the same in every fold, and the pooled
    AUC is exactly 0.5 instead of the below-chance artefact of unequal folds.
    """
    fold = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        fold[idx[rng.permutation(len(idx))]] = np.arange(len(idx)) % n_folds
    return fold


def default_model(task: str, n_train: int, categorical: np.ndarray, seed: int) -> object:
    """The metrics' default supervised model, its capacity scaled with the training size.

    From ``SMALL_N`` training rows on: ``HistGradientBoosting`` with native categorical
    support. Below that its minimum leaf size of 20 leaves it unable to split (it then
    predicts a constant), so a random forest with leaves of ``n_train // 100`` rows (at least
    1) is used; both take NaN natively.
    """
    from sklearn.ensemble import (
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )

    if n_train < SMALL_N:
        cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
        return cls(n_estimators=100, min_samples_leaf=max(1, n_train // 100),
                   random_state=seed, n_jobs=1)
    cat = categorical if categorical.any() else None
    if task == "classification":
        return HistGradientBoostingClassifier(max_iter=100, categorical_features=cat,
                                              early_stopping=False, random_state=seed)
    return HistGradientBoostingRegressor(max_iter=100, categorical_features=cat,
                                         early_stopping=False, random_state=seed)


def c2st(real: object, synthetic: object, *, n_folds: int = 5, max_rows: int | None = 5000,
         classifier: object | None = None, confidence: float = 0.95,
         random_state: int | None = 0, kinds: object = None,
         n_threads: int | None = None, max_ci_halfwidth: float = 0.1) -> C2STResult:
    """Classifier two-sample test (Lopez-Paz & Oquab, 2017) with a non-linear classifier.

    ``real`` should be real rows the generator never saw (a holdout). Against its own
    training rows, a generator whose samples sit on them (near-copies, leaves of one or two
    rows) reads *below* 0.5: the classifier learns "synthetic" from the copy of a real row it
    is then tested on. An interval entirely below 0.5 issues a :class:`BelowChanceWarning`
    (check :func:`forestgen.metrics.dcr`). Both sides are subsampled to
    ``n = min(len(real), len(synthetic), max_rows)`` rows (balanced classes), a classifier is
    fitted in ``n_folds`` class-balanced folds and the AUC of the pooled out-of-fold
    predictions is reported with its interval. The default
    classifier is :func:`default_model` (a random forest below ``SMALL_N`` training rows,
    HistGradientBoosting above); any sklearn classifier with ``predict_proba`` works on the
    ordinal encoding. When the interval's half-width exceeds ``max_ci_halfwidth`` (at the
    default 0.1 and an AUC near 0.5: fewer than about 145 rows per side) a
    :class:`SmallSampleWarning` is issued and recorded in ``warning``.
    ``n_threads`` caps OpenMP/BLAS threads during fitting.
    """
    from sklearn.base import clone
    from sklearn.metrics import roc_auc_score

    real, synthetic = prepare(real, synthetic, names=["synthetic"])
    rng = np.random.default_rng(random_state)
    n = min(len(real), len(synthetic), max_rows or len(real) + len(synthetic))
    if n < n_folds:
        raise ValueError(f"c2st needs at least n_folds={n_folds} rows per side, got {n}")
    real, synthetic = subsample(real, n, rng), subsample(synthetic, n, rng)
    enc = Encoder(infer_schema(real, kinds), real, [synthetic])
    xr, mask = enc.ordinal(real)
    xs, _ = enc.ordinal(synthetic)
    X = np.vstack([xr, xs])
    y = np.r_[np.zeros(len(xr)), np.ones(len(xs))].astype(int)
    seed = int(rng.integers(2**31 - 1))
    if classifier is None:
        classifier = default_model("classification", len(y) * (n_folds - 1) // n_folds, mask,
                                   seed)
    oof = np.empty(len(y))
    fold_aucs = []
    fold = balanced_folds(y, n_folds, np.random.default_rng(seed))
    with limit_threads(n_threads):
        for k in range(n_folds):
            tr, te = fold != k, fold == k
            model = clone(classifier).fit(X[tr], y[tr])
            p = model.predict_proba(X[te])[:, list(model.classes_).index(1)]
            oof[te] = p
            fold_aucs.append(float(roc_auc_score(y[te], p)))
    auc = float(roc_auc_score(y, oof))
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    se = _hanley_mcneil_se(auc, int(y.sum()), int(len(y) - y.sum())) * cv_inflation(n_folds)
    half = z * se
    acc = float(np.mean((oof > 0.5) == y))
    p_value = float(stats.norm.sf((acc - 0.5) / np.sqrt(0.25 / len(y))))
    notes = []
    if half > max_ci_halfwidth:
        notes.append(f"C2ST on {n} rows per side: the {confidence:.0%} interval of the AUC is "
                     f"+-{half:.2f}; the AUC alone is not conclusive, read its interval")
        warnings.warn(notes[-1], SmallSampleWarning, stacklevel=2)
    if auc + half < 0.5:
        notes.append(f"C2ST AUC {auc:.3f} is below chance (interval up to {auc + half:.3f}): "
                     "the synthetic rows sit closer to these real rows than independent draws "
                     "would (near-copies); compare with real rows the generator never saw and "
                     "check dcr()")
        warnings.warn(notes[-1], BelowChanceWarning, stacklevel=2)
    warning = "; ".join(notes) or None
    return C2STResult(auc=auc, auc_ci=(max(0.0, auc - half), min(1.0, auc + half)),
                      accuracy=acc, p_value=p_value, fold_aucs=tuple(fold_aucs),
                      n_real=len(xr), n_synthetic=len(xs),
                      classifier=type(classifier).__name__, warning=warning)


# --------------------------------------------------------------------------- kernels
def _matrices(real: object, synthetic: object, preprocess: bool, max_rows: int | None,
              rng: np.random.Generator, kinds: object = None) -> tuple[np.ndarray, np.ndarray]:
    if preprocess:
        r, s = prepare(real, synthetic, names=["synthetic"])
        r, s = subsample(r, max_rows, rng), subsample(s, max_rows, rng)
        x, y = embed(r, s, kinds=kinds)
    else:
        if kinds is not None:
            raise ValueError("kinds apply only with preprocess=True (the raw matrix has no "
                             "column kinds)")
        x, y = to_matrix(real, "real"), to_matrix(synthetic, "synthetic")
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"real has {x.shape[1]} columns, synthetic {y.shape[1]}")
        if max_rows is not None:
            if len(x) > max_rows:
                x = x[np.sort(rng.choice(len(x), max_rows, replace=False))]
            if len(y) > max_rows:
                y = y[np.sort(rng.choice(len(y), max_rows, replace=False))]
    if len(x) < 2 or len(y) < 2:
        raise ValueError("need at least 2 rows in real and synthetic")
    return x, y


def _block_sum(a: np.ndarray, b: np.ndarray, fn, same: bool = False,
               chunk: int = 2048) -> float:
    """Sum of ``fn(squared distances)`` over all pairs, computed in row blocks.

    ``same``: ``a is b``; the diagonal distances are set to exactly 0.
    """
    total = 0.0
    for s in range(0, len(a), chunk):
        d2 = sq_dists(a[s:s + chunk], b)
        if same:
            rows = np.arange(len(d2))
            d2[rows, s + rows] = 0.0
        total += float(fn(d2).sum())
    return total


def median_bandwidth(x: np.ndarray, y: np.ndarray, max_points: int = 1000,
                     rng: np.random.Generator | None = None) -> float:
    """Median heuristic: median pairwise Euclidean distance in the pooled sample.

    The pooled sample is subsampled to ``max_points`` rows first.
    """
    z = np.vstack([x, y])
    if len(z) > max_points:
        rng = rng if rng is not None else np.random.default_rng(0)
        z = z[np.sort(rng.choice(len(z), max_points, replace=False))]
    d = np.sqrt(sq_dists(z, z)[np.triu_indices(len(z), k=1)])
    med = float(np.median(d))
    return med if med > 0 else (float(d.mean()) if d.mean() > 0 else 1.0)


def mmd(real: object, synthetic: object, *, bandwidth: float | None = None,
        max_rows: int | None = 2000, preprocess: bool = True,
        random_state: int | None = 0, kinds: object = None) -> float:
    """Unbiased squared maximum mean discrepancy with an RBF kernel (Gretton et al., 2012).

    ``k(x, y) = exp(-||x - y||^2 / (2 bandwidth^2))``; the bandwidth defaults to the median
    heuristic on the pooled sample. Data are standardised one-hot embedded (``preprocess``) and
    each side is subsampled to ``max_rows``. The unbiased estimate can be slightly negative.
    Column kinds come from the dtypes or ``kinds`` (see
    :func:`forestgen.metrics._prep.infer_schema`).
    """
    rng = np.random.default_rng(random_state)
    x, y = _matrices(real, synthetic, preprocess, max_rows, rng, kinds)
    sigma = bandwidth if bandwidth is not None else median_bandwidth(x, y, rng=rng)
    gamma = 1.0 / (2.0 * sigma * sigma)

    def k(d2: np.ndarray) -> np.ndarray:
        return np.exp(-gamma * d2)

    n, m = len(x), len(y)
    kxx = (_block_sum(x, x, k, same=True) - n) / (n * (n - 1))
    kyy = (_block_sum(y, y, k, same=True) - m) / (m * (m - 1))
    kxy = _block_sum(x, y, k) / (n * m)
    return float(kxx + kyy - 2.0 * kxy)


def energy_distance(real: object, synthetic: object, *, max_rows: int | None = 2000,
                    preprocess: bool = True, random_state: int | None = 0,
                    kinds: object = None) -> float:
    """Energy distance ``2 E|X-Y| - E|X-X'| - E|Y-Y'|`` (Székely & Rizzo, 2013).

    Within-sample terms average over distinct pairs (U-statistics). Zero iff the distributions
    are equal (in the population). Column kinds as in :func:`mmd`.
    """
    rng = np.random.default_rng(random_state)
    x, y = _matrices(real, synthetic, preprocess, max_rows, rng, kinds)
    n, m = len(x), len(y)
    exx = _block_sum(x, x, np.sqrt, same=True) / (n * (n - 1))
    eyy = _block_sum(y, y, np.sqrt, same=True) / (m * (m - 1))
    exy = _block_sum(x, y, np.sqrt) / (n * m)
    return float(2.0 * exy - exx - eyy)


def _wasserstein_1d(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """W_p^p between empirical distributions, column-wise for sorted ``a`` (n,P), ``b`` (m,P)."""
    n, m = len(a), len(b)
    levels = np.union1d(np.arange(1, n + 1) / n, np.arange(1, m + 1) / m)
    widths = np.diff(np.r_[0.0, levels])
    mids = levels - widths / 2.0
    ia = np.minimum((mids * n).astype(int), n - 1)
    ib = np.minimum((mids * m).astype(int), m - 1)
    return (widths[:, None] * np.abs(a[ia] - b[ib]) ** p).sum(0)


def sliced_wasserstein(real: object, synthetic: object, *, n_projections: int = 128,
                       p: float = 2.0, max_rows: int | None = 10000, preprocess: bool = True,
                       random_state: int | None = 0) -> float:
    """Sliced Wasserstein-p distance (Rabin et al., 2011; Bonneel et al., 2015).

    ``(mean_theta W_p^p(theta^T X, theta^T Y))^(1/p)`` over ``n_projections`` seeded random unit
    directions, each 1-D distance computed exactly from the empirical quantile functions.
    """
    rng = np.random.default_rng(random_state)
    x, y = _matrices(real, synthetic, preprocess, max_rows, rng)
    theta = rng.standard_normal((x.shape[1], n_projections))
    theta /= np.linalg.norm(theta, axis=0, keepdims=True)
    px, py = np.sort(x @ theta, axis=0), np.sort(y @ theta, axis=0)
    return float(np.mean(_wasserstein_1d(px, py, p)) ** (1.0 / p))
