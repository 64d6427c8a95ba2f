"""GeF (Correia et al. 2020): exact identities of the generative forest (spec §8.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

from forestgen import GeF
from forestgen.base import GenerativeForest
from forestgen.families.mixture.gef import _float32_threshold


@pytest.fixture(scope="module")
def mixed() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 300
    c = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    x1 = rng.normal(size=n) + (c == "b") * 1.5
    x2 = 0.7 * x1 + 0.7 * rng.normal(size=n)
    score = x1 - x2 + (c == "c") * 1.0 + 0.5 * rng.normal(size=n)
    y = np.where(score > 0.6, "hi", np.where(score < -0.6, "lo", "mid"))
    return pd.DataFrame({"x1": x1, "x2": x2, "c": c, "y": y})


@pytest.fixture(scope="module")
def model(mixed) -> GeF:
    return GeF(n_trees=6, random_state=0).fit(mixed, target="y")


@pytest.fixture(scope="module")
def cancer():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return X[:, :8], y


# ---------------------------------------------------------------------- Theorem 1
def test_theorem1_equals_forest_leaf_frequencies(cancer):
    X, y = cancer
    m = GeF(n_trees=10, random_state=3, class_alpha=0.0).fit(X, y)
    P = m.predict_proba(X)
    leaves = m.forest_.apply(m._encode_features(X))
    lv = m.forest_.leaf_value  # in-bag class weights recorded while growing
    ref = (lv / lv.sum(1, keepdims=True))[leaves].mean(1)
    np.testing.assert_allclose(P, ref, rtol=0, atol=1e-12)
    # the default class_alpha=1e-6 (the authors' code) moves the posteriors by about 1e-6 only
    P_default = GeF(n_trees=10, random_state=3).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(P_default, ref, rtol=0, atol=1e-5)
    assert (np.asarray(P_default) > 0).all()
    assert (m.predict(X) == m.classes_[ref.argmax(1)]).all()
    # the class is not a split feature
    assert not (m.forest_.feature == m.target_index_).any()


def test_theorem1_holds_for_held_out_rows_outside_the_range(cancer):
    """A held-out value past the training range is answered at the range's nearest end, which
    every tree routes like the value itself: the posterior stays the forest's (Theorem 1),
    in ``predict_proba`` and ``predict_proba_modes`` alike (not the class prior)."""
    X, y = cancer
    m = GeF(n_trees=10, random_state=3, class_alpha=0.0).fit(X[:400], y[:400])
    Xq = X[400:460].copy()
    Xq[::3, 0] = X[:400, 0].max() * 1.5
    Xq[1::3, 5] = X[:400, 5].min() - 1.0
    leaves = m.forest_.apply(m._encode_features(Xq))
    lv = m.forest_.leaf_value
    ref = (lv / lv.sum(1, keepdims=True))[leaves].mean(1)
    with pytest.warns(RuntimeWarning, match="outside the training range"):
        P = m.predict_proba(Xq, mode="gef").to_numpy()
    with pytest.warns(RuntimeWarning, match="outside the training range"):
        modes = m.predict_proba_modes(Xq, ("gef", "gef+"))
    np.testing.assert_allclose(P, ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(modes["gef"], P)
    np.testing.assert_array_equal(modes["gef+"], m.predict_proba(Xq, mode="gef+").to_numpy())


def test_theorem1_from_sklearn_matches_predict_proba(cancer):
    from sklearn.ensemble import RandomForestClassifier

    X, y = cancer
    rf = RandomForestClassifier(n_estimators=12, max_features=3, random_state=0).fit(X, y)
    g = GeF.from_sklearn(rf, X, y)
    assert g.fit_info_["inbag"] == "sklearn bootstrap counts"
    rng = np.random.default_rng(0)
    # float64 values that are not float32-representable, near sklearn's thresholds
    Xq = np.vstack([X, X * (1 + 1e-9 * rng.standard_normal(X.shape))])
    np.testing.assert_allclose(g.predict_proba(Xq), rf.predict_proba(Xq), rtol=0, atol=1e-12)
    assert (g.predict(Xq) == rf.predict(Xq)).all()
    # routing matches sklearn's leaf for every (row, tree)
    sk = rf.apply(Xq)
    ours = g.forest_.apply(g._encode_features(Xq))
    glob = g.forest_.node_leaf[g.forest_.node_offsets[:-1][None, :] + sk]
    assert (ours == glob).all()


def test_float32_threshold_matches_float32_cast():
    rng = np.random.default_rng(0)
    t = rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 4, 2000)
    t2 = _float32_threshold(t)
    x = np.concatenate([t, np.nextafter(t2, np.inf), t2, np.nextafter(t2, -np.inf),
                        t + 1e-7 * rng.standard_normal(2000) * np.abs(t)])
    tt = np.tile(t, 5)
    assert ((x <= np.tile(t2, 5)) == (x.astype(np.float32) <= tt)).all()


# ---------------------------------------------------------------------- marginalisation
def test_all_missing_returns_class_prior(mixed, model):
    # stratified bootstrap keeps class counts exactly, so every tree's prior is the data's
    prior = mixed["y"].value_counts(normalize=True).reindex(model.classes_).to_numpy()
    empty = pd.DataFrame({"x1": [np.nan], "x2": [np.nan], "c": [None]})
    for mode in ("gef", "gef+"):
        np.testing.assert_allclose(model.predict_proba(empty, mode=mode).iloc[0], prior,
                                   atol=1e-6)  # class_alpha=1e-6 moves it by ~1e-7
    # an all-missing row has log p = 0 (with or without a class column)
    assert abs(model.log_prob(empty)[0]) < 1e-9


def _brute_force(m: GeF, row: np.ndarray, mode: str) -> np.ndarray:
    """Class posterior by enumerating every leaf's box (independent of ForestArrays.reach)."""
    f = m.forest_
    schema = m.schema_
    boxes = f.boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
    L = f.n_leaves
    leaf = np.arange(L)
    s = m.leaf_log_weight_.copy() if mode != "friedman" else np.zeros(L)
    for j, lm in enumerate(m.leaf_models_):
        if j == m.target_index_ or np.isnan(row[j]):
            continue
        spec = schema.columns[j]
        if spec.is_discrete:
            inside = boxes.levels(j, spec.n_levels)[:, int(row[j])]
        else:
            inside = (row[j] > boxes.lower[:, j]) & (row[j] <= boxes.upper[:, j])
        factor = lm.log_prob(leaf, np.full(L, row[j])) if mode != "friedman" else 0.0
        s = np.where(inside, s + factor, -np.inf)
    with np.errstate(divide="ignore"):
        if mode == "friedman":  # raw in-bag class counts of every reachable leaf
            S = s[:, None] + np.log(m.forest_.leaf_value)
        else:
            S = s[:, None] + np.log(m.leaf_models_[m.target_index_].probs(leaf))
    if mode == "gef+":
        v = logsumexp(S, axis=0)
        return np.exp(v - logsumexp(v))
    out = []
    for b in range(f.n_trees):
        v = logsumexp(S[f.leaf_tree == b], axis=0)
        out.append(np.exp(v - logsumexp(v)))
    return np.mean(out, axis=0)


@pytest.mark.parametrize("mode", ["gef", "gef+", "friedman"])
def test_missing_features_equal_brute_force(mixed, model, mode):
    rng = np.random.default_rng(5)
    X = mixed.drop(columns="y").iloc[:25].copy()
    X.loc[X.index[rng.random(25) < 0.5], "x1"] = np.nan
    X.loc[X.index[rng.random(25) < 0.4], "c"] = None
    X.loc[X.index[::4], "x2"] = np.nan
    P = model.predict_proba(X, mode=mode)
    Z = model._encode_features(X)
    ref = np.array([_brute_force(model, z, mode) for z in Z])
    np.testing.assert_allclose(P, ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(model.predict_proba_modes(X, (mode, "gef+"))[mode], P)


def test_missing_categorical_equals_sum_over_levels(mixed, model):
    rows = mixed.iloc[:10].copy()
    miss = rows.copy()
    miss["c"] = None
    lp_miss = model.log_prob(miss)
    parts = []
    for level in ["a", "b", "c"]:
        r = rows.copy()
        r["c"] = level
        parts.append(model.log_prob(r))
    np.testing.assert_allclose(lp_miss, logsumexp(np.stack(parts), axis=0), atol=1e-10)
    # the class marginal is the sum over classes of the joint
    feats = rows.drop(columns="y")
    per_class = []
    for cl in model.classes_:
        r = feats.copy()
        r["y"] = cl
        per_class.append(model.log_prob(r))
    np.testing.assert_allclose(model.score_samples_features(feats),
                               logsumexp(np.stack(per_class), axis=0), atol=1e-10)
    np.testing.assert_allclose(model.outlier_score(feats), -model.score_samples_features(feats))


# ---------------------------------------------------------------------- normalisation
def _gauss_legendre_grid(breaks: np.ndarray, n: int = 10):
    u, w = np.polynomial.legendre.leggauss(n)
    a, b = breaks[:-1, None], breaks[1:, None]
    pts = (a + b) / 2 + (b - a) / 2 * u[None, :]
    wts = (b - a) / 2 * w[None, :]
    return pts.ravel(), wts.ravel()


def test_joint_integrates_to_one_2d():
    rng = np.random.default_rng(2)
    n = 120
    X = rng.normal(size=(n, 2)) * [1.0, 3.0]
    y = (X[:, 0] + X[:, 1] / 3 + 0.5 * rng.normal(size=n) > 0).astype(int)
    m = GeF(n_trees=3, max_features=None, random_state=0).fit(X, y)
    f = m.forest_
    grids = []
    for j in range(2):
        sd = X[:, j].std()
        thr = f.threshold[f.feature == j]
        lo, hi = X[:, j].mean() - 9 * sd, X[:, j].mean() + 9 * sd
        br = np.unique(np.r_[np.linspace(lo, hi, 80), thr[(thr > lo) & (thr < hi)],
                             X[:, j].min(), X[:, j].max()])  # the support's ends
        grids.append(_gauss_legendre_grid(br))
    (p1, w1), (p2, w2) = grids
    g1, g2 = np.meshgrid(p1, p2, indexing="ij")
    W = np.outer(w1, w2).ravel()
    total = 0.0
    for cl in (0, 1):
        Zq = np.column_stack([g1.ravel(), g2.ravel(), np.full(g1.size, cl)])
        total += np.sum(np.exp(m.log_prob(Zq, floor=None)) * W)
    assert abs(total - 1.0) < 1e-6


def test_joint_sums_to_one_all_categorical():
    rng = np.random.default_rng(4)
    n = 200
    a = rng.choice(["p", "q", "r"], n)
    b = rng.choice(["u", "v"], n)
    y = np.where((a == "p") ^ (b == "u"), "yes", rng.choice(["yes", "no"], n))
    df = pd.DataFrame({"a": a, "b": b, "t": y})
    m = GeF(n_trees=4, max_features=None, random_state=1).fit(df, target="t")
    grid = pd.MultiIndex.from_product([["p", "q", "r"], ["u", "v"], ["no", "yes"]],
                                      names=["a", "b", "t"]).to_frame(index=False)
    assert abs(np.exp(m.log_prob(grid)).sum() - 1.0) < 1e-9


# ---------------------------------------------------------------------- API
def test_fit_variants_and_labels(mixed):
    X = mixed.drop(columns="y")
    m1 = GeF(n_trees=4, random_state=7).fit(mixed, target="y")
    m2 = GeF(n_trees=4, random_state=7).fit(X, mixed["y"])
    assert m1.target_ == m2.target_ == "y"
    assert list(m1.classes_) == ["hi", "lo", "mid"]
    np.testing.assert_array_equal(m1.predict_proba(X), m2.predict_proba(X))
    pred = m1.predict(X)
    assert set(pred) <= {"hi", "lo", "mid"} and (pred == mixed["y"]).mean() > 0.75
    # a class column in the query is ignored by predict_proba
    np.testing.assert_array_equal(m1.predict_proba(mixed), m1.predict_proba(X))
    s = m1.sample(4000, random_state=0)
    assert list(s.columns) == ["x1", "x2", "c", "y"]
    freq = s["y"].value_counts(normalize=True)
    np.testing.assert_allclose(freq.reindex(m1.classes_),
                               mixed["y"].value_counts(normalize=True).reindex(m1.classes_),
                               atol=0.03)


def test_save_load_roundtrip(tmp_path, model, mixed, cancer):
    from sklearn.ensemble import RandomForestClassifier

    X = mixed.drop(columns="y").iloc[:40].copy()
    X.iloc[::3, 0] = np.nan
    path = model.save(tmp_path / "g.forestgen")
    back = GenerativeForest.load(path)
    assert isinstance(back, GeF) and back.target_ == "y"
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(back.log_prob(mixed), model.log_prob(mixed))
    Xc, yc = cancer
    rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(Xc, yc)
    g = GeF.from_sklearn(rf, Xc, yc)
    g2 = GeF.load(g.save(tmp_path / "s.forestgen"))
    np.testing.assert_array_equal(g2.predict_proba(Xc), rf.predict_proba(Xc))
    assert g2.fit_info_ == g.fit_info_


def test_deterministic_and_thread_invariant(cancer):
    X, y = cancer
    a = GeF(n_trees=6, random_state=11, n_jobs=1).fit(X, y)
    b = GeF(n_trees=6, random_state=11, n_jobs=2).fit(X, y)
    c = GeF(n_trees=6, random_state=12, n_jobs=1).fit(X, y)
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)
    Xm = X.copy()
    Xm[::2, 1:4] = np.nan
    np.testing.assert_array_equal(a.predict_proba(Xm), b.predict_proba(Xm))
    np.testing.assert_array_equal(a.sample(50, random_state=0), b.sample(50, random_state=0))
    assert a.forest_.n_leaves != c.forest_.n_leaves or not np.array_equal(
        a.forest_.threshold, c.forest_.threshold)


def test_errors(mixed, cancer):
    X = mixed.drop(columns="y")
    with pytest.raises(ValueError, match="'income'"):
        GeF(n_trees=2).fit(mixed, target="income")
    with pytest.raises(ValueError, match="y has 10 entries but X has 300 rows"):
        GeF(n_trees=2).fit(X, mixed["y"].iloc[:10])
    with pytest.raises(ValueError, match="at least 2 classes.*'y'"):
        GeF(n_trees=2).fit(X, pd.Series(["a"] * len(X), name="y"))
    with pytest.raises(ValueError, match="missing values"):
        GeF(n_trees=2).fit(X, mixed["y"].where(mixed.index > 3))
    with pytest.raises(ValueError, match="supervised"):
        GeF(n_trees=2).fit(X)
    with pytest.raises(ValueError, match="either y or target"):
        GeF(n_trees=2).fit(mixed, mixed["y"], target="y")
    with pytest.raises(NotImplementedError, match="LSPN"):
        GeF(leaf="learnspn").fit(mixed, target="y")
    with pytest.raises(ValueError, match="mode"):
        GeF(mode="vote").fit(mixed, target="y")
    with pytest.raises(ValueError, match="n_trees"):
        GeF(n_trees=0).fit(mixed, target="y")
    from sklearn.ensemble import RandomForestClassifier

    Xc, yc = cancer
    rf = RandomForestClassifier(n_estimators=2, random_state=0).fit(Xc, yc)
    bad = pd.DataFrame(Xc).assign(s="x")
    with pytest.raises(ValueError, match="numeric features; column 's'"):
        GeF.from_sklearn(rf, bad.iloc[:, 1:], yc)
    with pytest.raises(ValueError, match="not in rf.classes_"):
        GeF.from_sklearn(rf, Xc, np.where(yc == 1, 5, 0))


def test_other_target_delegates_to_inference_layer(mixed, model):
    pytest.importorskip("forestgen.inference.api")
    X = mixed.iloc[:5].copy()
    X["c"] = None
    P = model.predict_proba(X, target="c")
    assert np.allclose(np.asarray(P, float).sum(1), 1.0)


def test_default_class_alpha_keeps_unseen_class_combinations_finite():
    # x separates the classes perfectly, so no leaf a row at x=-2 reaches has seen class "b":
    # the authors' class_alpha=1e-6 keeps its density positive, 0 does not; the class share is
    # alpha / (n_l + 2 alpha) for a leaf of n_l in-bag rows (n_l <= 200 here)
    rng = np.random.default_rng(0)
    x = np.r_[rng.uniform(-3, -1, 100), rng.uniform(1, 3, 100)]
    df = pd.DataFrame({"x": x, "y": np.repeat(["a", "b"], 100)})
    row = pd.DataFrame({"x": [-2.0], "y": ["b"]})
    seen = pd.DataFrame({"x": [-2.0], "y": ["a"]})
    # (y is a threshold of x, a rule of the table that would give the row density zero)
    rules_off = {"detect_mappings": False}
    exact = GeF(n_trees=5, random_state=0, class_alpha=0.0).fit(df, target="y",
                                                                kinds=rules_off)
    assert exact.log_prob(row, floor=None)[0] == -np.inf
    m = GeF(n_trees=5, random_state=0).fit(df, target="y", kinds=rules_off)
    gap = m.log_prob(seen)[0] - m.log_prob(row)[0]
    assert np.isfinite(m.log_prob(row)[0]) and np.log(1e6) < gap < np.log(200e6)
