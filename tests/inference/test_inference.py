"""Exactness tests of forestgen.inference against brute force (ARF spec arf.md §3, §8.6-8.7)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen.families.mixture.arf import ARF
from forestgen.inference import Not, ZeroProbabilityError, leaf_posterior, posterior


def _gauss(n, rho, seed):
    rng = np.random.default_rng(seed)
    return rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=n)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = _gauss(1500, 0.7, 0)
    c = np.where(x[:, 0] + 0.7 * rng.normal(size=len(x)) > 0, "a",
                 np.where(rng.random(len(x)) < 0.6, "b", "c"))
    k = rng.integers(0, 4, size=len(x)) + (x[:, 1] > 0)  # ordinal integer 0..4
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "c": c, "k": k.astype(np.int64)})


@pytest.fixture(scope="module")
def model(data):
    return ARF(n_trees=5, min_node_size=5, random_state=0, n_jobs=1).fit(data)


# ----------------------------------------------------------------------------- §8.7 sanity


def test_conditional_gaussian_sanity():
    x = _gauss(5000, 0.8, 1)
    m = ARF(n_trees=10, random_state=1, n_jobs=1).fit(pd.DataFrame({"x1": x[:, 0],
                                                                    "x2": x[:, 1]}))
    s = m.sample(4000, conditions={"x1": 1.0}, random_state=2)
    assert (s["x1"] == 1.0).all()
    assert abs(s["x2"].mean() - 0.8) < 0.15
    assert abs(s["x2"].var() - 0.36) < 0.15


# ----------------------------------------------------------------------------- exactness


def test_equality_posterior_is_analytic(model):
    v = 0.3
    leaf, w = leaf_posterior(model, {"x1": v})
    L = model.forest_.n_leaves
    allleaf = np.arange(L)
    lw = model.leaf_log_weight_ + model.leaf_models_[0].log_prob(allleaf, np.full(L, v))
    ref = np.exp(lw - np.logaddexp.reduce(lw))
    full = np.zeros(L)
    full[leaf] = w
    np.testing.assert_allclose(full, ref, atol=1e-12)
    assert abs(w.sum() - 1) < 1e-12
    # pooled over all trees: every tree contributes, not normalised per tree
    per_tree = np.bincount(model.forest_.leaf_tree, weights=full)
    assert not np.allclose(per_tree, 1.0 / model.forest_.n_trees, atol=1e-6)
    # samples of x2 follow the mixture sum_k w_k f_k2
    s = model.sample(20000, conditions={"x1": v}, random_state=3)
    mean2 = (w * model.leaf_models_[1].mean(leaf)).sum()
    assert abs(s["x2"].mean() - mean2) < 4 * s["x2"].std() / np.sqrt(len(s))
    assert (s["x1"] == v).all()


def test_interval_and_set_match_rejection(model):
    cond = {"x1": (0.2, 1.2), "c": {"a", "b"}}
    s = model.sample(20000, conditions=cond, random_state=4)
    u = model.sample(300000, random_state=5)
    keep = u[(u.x1 > 0.2) & (u.x1 <= 1.2) & u.c.isin(["a", "b"])]
    assert len(keep) > 5000
    assert s.x1.between(0.2, 1.2).all() and s.c.isin(["a", "b"]).all()
    for col in ("x1", "x2"):
        assert stats.ks_2samp(s[col], keep[col]).pvalue > 1e-3, col
    for col in ("c", "k"):
        tv = 0.5 * (s[col].value_counts(normalize=True)
                    .sub(keep[col].value_counts(normalize=True), fill_value=0).abs().sum())
        assert tv < 0.03, col


def test_not_equals_complement_set(model):
    a = leaf_posterior(model, {"c": Not({"a"}), "x2": 0.1})
    b = leaf_posterior(model, {"c": {"b", "c"}, "x2": 0.1})
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12)
    s = model.sample(500, conditions={"c": Not("a")}, random_state=0)
    assert not (s.c == "a").any()


def test_ordinal_interval_is_level_set(model):
    a = leaf_posterior(model, {"k": (1, 3)})
    b = leaf_posterior(model, {"k": {1, 2, 3}})
    np.testing.assert_allclose(a[1], b[1], rtol=1e-12)
    s = model.sample(300, conditions={"k": (1, 3)}, random_state=0)
    assert s.k.between(1, 3).all()


def test_chain_rule_identity(model, data):
    X = data.iloc[:40]
    joint = model.log_prob(X)
    marg_b = model.log_prob(X.assign(x2=np.nan))
    cond = model.log_prob(X, conditions=X[["x1", "c", "k"]])
    np.testing.assert_allclose(joint, marg_b + cond, atol=1e-8, rtol=0)
    # dict form for one row, with interval evidence: log p(x2, x1 in A) - log p(x1 in A)
    row = X.iloc[[0]]
    lp = model.log_prob(row[["x1", "x2", "c", "k"]].assign(x1=np.nan, c=np.nan, k=np.nan),
                        conditions={"x1": (-0.5, 0.5)})
    from forestgen.inference import evidence_log_prob

    lj = evidence_log_prob(model, {"x1": (-0.5, 0.5), "x2": float(row.x2.iloc[0])})
    le = evidence_log_prob(model, {"x1": (-0.5, 0.5)})
    assert abs(lp[0] - (lj - le)) < 1e-10


def test_marginal_equals_integrated_joint(model):
    # p(x1 = v) = sum_c sum_k  integral p(v, x2, c, k) dx2 on a fine grid
    grid = np.linspace(-9, 9, 24001)
    for v in (-0.7, 0.4):
        rows = []
        for c in ("a", "b", "c"):
            for k in range(5):
                rows.append(pd.DataFrame({"x1": v, "x2": grid, "c": c, "k": k}))
        G = pd.concat(rows, ignore_index=True)
        dens = np.exp(model.log_prob(G)).reshape(15, -1)
        integral = np.trapezoid(dens, grid, axis=1).sum()
        marg = model.log_prob(pd.DataFrame({"x1": [v], "x2": [np.nan], "c": [np.nan],
                                            "k": [np.nan]}))[0]
        assert abs(np.log(integral) - marg) < 2e-3


def test_expectations_match_conditional_samples(model):
    cond = {"x1": (0.0, None), "c": "b"}
    e = model.expect(["x1", "x2", "k", "c"], conditions=cond)
    s = model.sample(40000, conditions=cond, random_state=6)
    for col in ("x1", "x2", "k"):
        se = s[col].std() / np.sqrt(len(s))
        assert abs(float(e[col]) - s[col].mean()) < 4 * se + 1e-9, col
    assert e["c"] == "b"
    e2 = model.expect("c", conditions={"x1": (1.0, None)})
    assert e2["c"] == model.sample(20000, conditions={"x1": (1.0, None)},
                                   random_state=7).c.mode()[0]
    # unconditional means
    u = model.expect(["x2"])
    big = model.sample(40000, random_state=8)
    assert abs(float(u["x2"]) - big.x2.mean()) < 4 * big.x2.std() / np.sqrt(len(big))


def test_per_row_evidence(model, data):
    ev = pd.DataFrame({"x1": [0.5, np.nan, -1.0], "c": ["a", "b", None]}, index=[10, 11, 12])
    s = model.sample(conditions=ev, random_state=0)
    assert list(s.index) == [10, 11, 12]
    assert s.x1.iloc[0] == 0.5 and s.x1.iloc[2] == -1.0
    assert s.c.iloc[0] == "a" and s.c.iloc[1] == "b"
    with pytest.raises(ValueError, match="len"):
        model.sample(5, conditions=ev)
    # per-row expectation equals the dict expectation for each row
    e = model.expect(["x2"], conditions=ev)
    for idx in ev.index:
        d = {k: v for k, v in ev.loc[idx].items() if not pd.isna(v)}
        assert abs(e.loc[idx, "x2"] - float(model.expect(["x2"], conditions=d)["x2"])) < 1e-10
    # object cells with intervals / sets / Not
    ev2 = pd.DataFrame({"x1": pd.Series([(0.0, 1.0), 0.3], dtype=object),
                        "c": pd.Series([{"a"}, Not("a")], dtype=object)})
    s2 = model.sample(conditions=ev2, random_state=1)
    assert 0.0 < s2.x1.iloc[0] <= 1.0 and s2.c.iloc[0] == "a"
    assert s2.x1.iloc[1] == 0.3 and s2.c.iloc[1] != "a"


def test_predict_proba_is_bayes_rule(model, data):
    X = data.iloc[:30]
    p = model.predict_proba(X, target="c")
    assert list(p.columns) == ["a", "b", "c"]
    lps = np.stack([model.log_prob(X.assign(c=lv)) for lv in ["a", "b", "c"]], axis=1)
    ref = np.exp(lps - np.logaddexp.reduce(lps, axis=1, keepdims=True))
    np.testing.assert_allclose(p.to_numpy(), ref, atol=1e-9)
    # the row's own target value is ignored; NaN entries are marginalised
    Xn = X.assign(c="a", x2=np.nan)
    p2 = model.predict_proba(Xn, target="c")
    lps2 = np.stack([model.log_prob(Xn.assign(c=lv)) for lv in ["a", "b", "c"]], axis=1)
    ref2 = np.exp(lps2 - np.logaddexp.reduce(lps2, axis=1, keepdims=True))
    np.testing.assert_allclose(p2.to_numpy(), ref2, atol=1e-9)
    pred = model.predict(X, target="c")
    assert (pred.to_numpy() == p.idxmax(axis=1).to_numpy()).all()
    # numeric target: conditional mean
    px2 = model.predict(X.iloc[:3], target="x2")
    for i in range(3):
        d = {k: X.iloc[i][k] for k in ("x1", "c", "k")}
        assert abs(px2.iloc[i] - float(model.expect(["x2"], conditions=d)["x2"])) < 1e-10


def test_batching_is_exact(model, data, monkeypatch):
    X = data.iloc[:50].copy()
    X.loc[X.index[::3], "x1"] = np.nan
    p_ref = model.predict_proba(X, target="c")
    lp_ref = model.log_prob(X, conditions=X[["c"]])
    monkeypatch.setattr(posterior, "PAIR_BUDGET", 40)
    np.testing.assert_allclose(model.predict_proba(X, target="c"), p_ref, atol=1e-12)
    np.testing.assert_allclose(model.log_prob(X, conditions=X[["c"]]), lp_ref, atol=1e-10)


def test_impute(model, data):
    X = data.iloc[:60].copy()
    rng = np.random.default_rng(0)
    mask = rng.random(X.shape) < 0.3
    mask[5, :] = True  # a fully missing row
    Xm = X.mask(mask)
    for method in ("expectation", "sample"):
        out = model.impute(Xm, method=method, random_state=0)
        assert not out.isna().any().any()
        assert (out.dtypes == X.dtypes).all()  # the training dtypes (k: int64 again)
        obs = ~mask
        for j, col in enumerate(X.columns):
            assert (out[col].to_numpy()[obs[:, j]] == Xm[col].to_numpy()[obs[:, j]]).all()
        assert out.c.isin(["a", "b", "c"]).all()
    e = model.impute(Xm)
    r = np.flatnonzero(mask[:, 1] & ~mask[:, 0])[0]
    d = {k: Xm.iloc[r][k] for k in X.columns if not pd.isna(Xm.iloc[r][k])}
    assert abs(e.x2.iloc[r] - float(model.expect(["x2"], conditions=d)["x2"])) < 1e-10
    outs = model.impute(Xm, method="sample", n_imputations=2, random_state=1)
    assert isinstance(outs, list) and len(outs) == 2
    assert not outs[0].x1.equals(outs[1].x1)
    with pytest.raises(ValueError, match="n_imputations"):
        model.impute(Xm, n_imputations=2)
    with pytest.raises(ValueError, match="method"):
        model.impute(Xm, method="mean")


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("cond, exc, match", [
    ({"nope": 1.0}, KeyError, "nope"),
    ({"c": "zzz"}, ValueError, "'c'.*zzz"),
    ({"c": {"a", "zzz"}}, ValueError, "'c'.*zzz"),
    ({"x1": "abc"}, ValueError, "'x1'.*not a number"),
    ({"x1": np.nan}, ValueError, "'x1'.*NaN"),
    ({"x1": (2.0, 1.0)}, ValueError, "'x1'.*empty interval"),
    ({"x1": (1.0, 2.0, 3.0)}, ValueError, "'x1'.*pair"),
    ({"c": ("a", "b")}, ValueError, "'c'.*intervals need"),
    ({"x1": {1.0, 2.0}}, ValueError, "'x1'.*level sets need"),
    ({"c": set()}, ValueError, "'c'.*empty level set"),
    ({"c": Not({"a", "b", "c"})}, ValueError, "'c'.*excludes every"),
    ({"x1": Not(1.0)}, ValueError, "'x1'.*Not"),
    ({"k": (10, 20)}, ZeroProbabilityError, "'k'.*zero probability"),  # between no levels
    ({"k": 7}, ValueError, "'k'.*not seen"),
])
def test_condition_errors(model, cond, exc, match):
    with pytest.raises(exc, match=match):
        model.sample(5, conditions=cond, random_state=0)


def test_frame_and_target_errors(model, data):
    with pytest.raises(KeyError, match="bogus"):
        model.sample(conditions=pd.DataFrame({"bogus": [1.0]}))
    # an unseen level is left out of that row's evidence, with a warning (per-row queries)
    with pytest.warns(RuntimeWarning, match="'c'.*zzz"):
        p = model.predict_proba(data.iloc[:3].assign(c="zzz"), target="k")
    np.testing.assert_allclose(p, model.predict_proba(data.iloc[:3].assign(c=None), target="k"))
    with pytest.raises(ValueError, match="'c'.*zzz"):
        model.sample(conditions=data.iloc[:3].assign(c="zzz"), on_empty="raise")
    with pytest.warns(RuntimeWarning, match="'c'.*zzz"):  # per-row default: blank rows
        out = model.sample(conditions=data.iloc[:3].assign(c="zzz"))
    assert out.drop(columns=["x1", "x2", "k"]).isna().all().all()
    with pytest.raises(ValueError, match="discrete target.*'x1'"):
        model.predict_proba(data.iloc[:3], target="x1")
    with pytest.raises(KeyError, match="nothere"):
        model.predict(data.iloc[:3], target="nothere")
    with pytest.raises(ValueError, match="on_empty"):
        model.sample(3, conditions={"x1": 0.0}, on_empty="skip")
    with pytest.raises(ValueError, match="n is required"):
        model.sample(conditions={"x1": 0.0})
    with pytest.raises(TypeError, match="Not"):
        Not(("a", "b"))
    with pytest.raises(ValueError, match="rows"):
        model.log_prob(data.iloc[:3], conditions=data.iloc[:2][["x1"]])


def test_zero_probability_evidence(data):
    m = ARF(n_trees=3, family="unif", random_state=0, n_jobs=1).fit(data)
    far = float(data.x1.max()) + 100.0
    with pytest.raises(ZeroProbabilityError, match="'x1'"):
        m.sample(5, conditions={"x1": far, "c": "a"}, random_state=0)
    with pytest.raises(ZeroProbabilityError, match="'x1'"):
        m.log_prob(data.iloc[:2], conditions={"x1": (far, None)})
    with pytest.raises(ZeroProbabilityError, match="'x1'"):
        m.expect(["x2"], conditions={"x1": far})
    # per-row queries: a row outside the training range is answered at the range's nearest
    # end, with a warning naming the column; the others get their own answer (issue 32)
    q = data.iloc[:3].copy()
    q.loc[q.index[1], "x1"] = far
    with pytest.warns(RuntimeWarning, match="outside the training range.*'x1'|'x1'.*outside"):
        p = m.predict_proba(q, target="c")
    assert np.allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(p.iloc[[0, 2]], m.predict_proba(q.iloc[[0, 2]], target="c"))
    at_end = q.iloc[[1]].assign(x1=float(data.x1.max()))
    np.testing.assert_allclose(p.iloc[[1]], m.predict_proba(at_end, target="c"))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = m.sample(50, conditions={"x1": far}, random_state=0, on_empty="unconditional")
    assert len(s) == 50 and any("unconditional" in str(r.message) for r in rec)
    assert (s.x1 <= data.x1.max() + 1e-9).all()  # drawn from the model, not the evidence


def test_jointly_impossible_names_all_columns(model, data):
    from forestgen.leaves.categorical import CategoricalLeaf

    # d copies c: with the mapping c -> d detected, evidence on d becomes evidence on c (tested
    # in tests/data/test_rules.py); here the forest's own check is under test, so mappings off
    m = ARF(n_trees=2, random_state=0, n_jobs=1).fit(data.assign(d=data.c),
                                                     kinds={"detect_mappings": False})
    L = m.forest_.n_leaves
    pure = np.zeros((L, 3))
    pure[np.arange(L), np.arange(L) % 2] = 1.0  # leaves alternate pure "a" / pure "b"
    for j in (2, 4):
        lm = m.leaf_models_[j]
        assert isinstance(lm, CategoricalLeaf)
        m.leaf_models_[j] = CategoricalLeaf.from_pmf(pure, lm.count_)
    m.sample(3, conditions={"c": {"a"}}, random_state=0)
    m.sample(3, conditions={"d": {"b"}}, random_state=0)
    with pytest.raises(ZeroProbabilityError, match=r"\['c', 'd'\] is jointly impossible"):
        m.sample(3, conditions={"c": {"a"}, "d": {"b"}}, random_state=0)


def test_reproducible(model):
    a = model.sample(100, conditions={"x1": (0, 1)}, random_state=9)
    b = model.sample(100, conditions={"x1": (0, 1)}, random_state=9)
    pd.testing.assert_frame_equal(a, b)


def test_closed_form_truncnorm_means(model):
    from scipy.stats import truncnorm

    lm = model.leaf_models_[1]
    leaf = np.arange(model.forest_.n_leaves)
    ref = truncnorm.mean(lm.a_, lm.b_, loc=lm.mu_, scale=lm.sigma_)
    ok = np.isfinite(ref)
    np.testing.assert_allclose(lm.mean(leaf)[ok], ref[ok], rtol=1e-7, atol=1e-9)
    # interval mean with the cell as the interval is the plain mean
    np.testing.assert_allclose(lm.mean_interval(leaf, lm.lo_, lm.hi_), lm.mean(leaf),
                               rtol=1e-12)
