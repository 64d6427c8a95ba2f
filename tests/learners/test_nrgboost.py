"""NRGBoost learner: spec nrgboost_def.md §10 T13, T14, T16, T17, plus mixed types, bad input,
persistence and torch."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from forestgen import NRGBoost

FAST = dict(pool_size=4000, gibbs_chains=8, gibbs_burn_in=20, n_normaliser_samples=20_000,
            sample_burn_in=30, sample_thin=3)


def _eight_gaussians(n, rng):
    ang = 2 * np.pi * rng.integers(0, 8, n) / 8
    return np.c_[8 * np.cos(ang), 8 * np.sin(ang)] + rng.normal(size=(n, 2))


@pytest.fixture(scope="module")
def toy():
    """Fig. 2 toy on 30 equal bins per axis: integer codes as two ordinal columns."""
    rng = np.random.default_rng(0)
    edges = np.linspace(-11, 11, 31)
    X = np.clip(_eight_gaussians(4000, rng), -10.999, 10.999)
    codes = np.searchsorted(edges[1:-1], X, side="right")
    df = pd.DataFrame({"a": codes[:, 0], "b": codes[:, 1]})
    kw = dict(FAST, pool_size=20_000, gibbs_chains=16, gibbs_burn_in=50)
    model = NRGBoost(n_trees=40, max_leaves=16, uniform_mix=1.0, learning_rate=0.3,
                     random_state=0, **kw).fit(df, kinds={"a": "integer", "b": "integer"})
    return df, codes, model


def _exact(model, cells_df):
    f = model.unnormalised_log_prob(cells_df)
    return f, np.logaddexp.reduce(f)


def test_t13_t17_toy_kl_drops_samples_match_and_log_z_is_tracked(toy):
    df, codes, model = toy
    spec_a = model.schema_["a"]
    assert spec_a.is_discrete and spec_a.n_levels == 30
    cells = pd.DataFrame(list(itertools.product(spec_a.categories, model.schema_["b"].categories)),
                         columns=["a", "b"])
    f, log_z = _exact(model, cells)
    q = np.exp(f - log_z)
    key = {(a, b): i for i, (a, b) in enumerate(zip(cells.a, cells.b))}
    p = np.bincount([key[(a, b)] for a, b in zip(df.a, df.b)], minlength=len(cells)) / len(df)
    u = np.full(len(cells), 1 / len(cells))
    kl = np.sum(p[p > 0] * np.log(p[p > 0] / q[p > 0]))
    kl0 = np.sum(p[p > 0] * np.log(p[p > 0] / u[p > 0]))
    assert kl < 0.25 * kl0
    # T17: the running log Z estimate and the importance-sampling one match the exact value
    assert abs(model.log_z_tracker_ - log_z) < 0.05
    assert abs(model.log_z_ - log_z) < max(4 * model.log_z_se_, 0.02)
    # normalised log_prob sums to one over the grid (up to the log Z estimate's error)
    assert np.exp(model.log_prob(cells)).sum() == pytest.approx(1.0, abs=5 * model.log_z_se_ + 0.02)
    s = model.sample(4000, random_state=1)
    for c in ("a", "b"):
        ps = np.bincount(s[c], minlength=30) / len(s)
        pd_ = np.bincount(df[c], minlength=30) / len(df)
        assert 0.5 * np.abs(ps - pd_).sum() < 0.05
    ang = np.arctan2(s.b.to_numpy() - 14.5, s.a.to_numpy() - 14.5)
    modes = np.round(ang / (2 * np.pi / 8)).astype(int) % 8
    assert len(np.unique(modes)) == 8


def test_t14_single_column_conditionals():
    rng = np.random.default_rng(1)
    n = 1500
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    df = pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "y": np.where(y == 1, "yes", "no")})
    m = NRGBoost(n_trees=40, max_leaves=32, max_bins=32, random_state=0, **FAST).fit(df[:1000])
    proba = m.predict_proba(df[1000:], "y")
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    acc = np.mean(m.predict(df[1000:], "y").to_numpy() == df.y[1000:].to_numpy())
    assert acc >= 0.9
    # log_prob with one free column equals the log of predict_proba
    lp = m.log_prob(df[1000:1010], conditions=["x1", "x2"])
    pick = proba.to_numpy()[np.arange(10), (df.y[1000:1010] == "yes").to_numpy().astype(int)]
    np.testing.assert_allclose(lp, np.log(pick), atol=1e-10)


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(2)
    n = 1200
    x = rng.normal(size=n)
    df = pd.DataFrame({
        "num": x,
        "age": rng.integers(18, 90, n),
        "cat": pd.Series(np.where(x > 0, "hi", rng.choice(["a", "b", "c"], n))).where(
            rng.random(n) > 0.15, np.nan),
        "many": [f"L{v}" for v in rng.integers(0, 300, n)],
        "flag": rng.random(n) < 0.4,
        "obj": pd.Series(rng.choice(["u", "v"], n), dtype=object),
    })
    m = NRGBoost(n_trees=15, max_leaves=16, random_state=3, **FAST).fit(df)
    return df, m


def test_mixed_types_missing_state_and_many_levels(mixed):
    df, m = mixed
    assert m.grid_.n_codes[2] == 5  # hi, a, b, c + missing state
    assert m.grid_.n_values[3] == len(df.many.unique()) > 255
    s = m.sample(3000, random_state=0)
    assert list(s.columns) == list(df.columns)
    assert s.flag.dtype == bool and set(s.many.unique()) <= set(df.many)
    assert abs(s.cat.isna().mean() - df.cat.isna().mean()) < 0.05
    assert s.num.between(df.num.min(), df.num.max()).all()
    assert s.age.between(18, 89).all() and (s.age == s.age.round()).all()
    lp = m.log_prob(df)
    assert np.isfinite(lp).all()
    assert m.sample(100, random_state=0, missing=False).cat.notna().all()


def test_nan_and_out_of_range_inputs_at_query_time(mixed):
    df, m = mixed
    q = df.head(6).copy()
    q.loc[0, "num"] = np.nan  # no missing state for num: marginalised exactly
    q.loc[1, "num"] = 1e6  # outside the training range
    q.loc[2, "many"] = "never-seen"  # unseen level
    lp = m.log_prob(q)
    assert np.isfinite(lp).all()
    # the marginal of a NaN column equals the sum over its bins
    g = m.grid_
    rows = pd.concat([q.iloc[[0]]] * int(g.n_values[0]), ignore_index=True)
    rows["num"] = g.midpoints(0)
    Z = m.encode_rows(rows)  # each bin's mass: the density at its midpoint over the law's
    C = np.full(Z.shape, -1, np.int32)  # density there given the bin (-log width if uniform)
    C[:, 0] = np.arange(int(g.n_values[0]))
    full = m.log_prob(rows) - g.log_within(C, Z)
    assert lp[0] == pytest.approx(np.logaddexp.reduce(full), abs=1e-9)
    # out of range = the marginal of the other entries x density_floor x uniform density
    marg = m.log_prob(q.iloc[[1, 2]].assign(num=[np.nan, q.num[2]], many=[q.many[1], np.nan]))
    rng_num = g.edges[0][-1] - g.edges[0][0]
    np.testing.assert_allclose(
        lp[[1, 2]], marg + np.log(1e-5) - np.log([rng_num, g.n_values[3]]), atol=1e-9)
    assert lp[1] < m.log_prob(df).min() and lp[2] < m.log_prob(df).min()
    strict = NRGBoost(**{**m.get_params(), "density_floor": None})
    strict.__dict__.update({k: v for k, v in vars(m).items() if k.endswith("_")})
    lps = strict.log_prob(q)
    assert lps[1] == -np.inf and lps[2] == -np.inf
    np.testing.assert_array_equal(lps[[0, 3, 4, 5]], lp[[0, 3, 4, 5]])
    # predictions handle them too (out-of-range numerics use the edge bin)
    pr = m.predict_proba(q, "flag")
    assert np.isfinite(pr.to_numpy()).all()
    np.testing.assert_allclose(pr.sum(axis=1), 1.0)
    # several unobserved columns: beyond 4,096 cells an importance-sampling estimate, per row
    q2 = q.copy()
    q2.loc[3, ["num", "age", "many"]] = np.nan
    lp2 = m.log_prob(q2)
    assert np.isfinite(lp2).all()
    assert lp2[3] == m.log_prob(q2.iloc[[3]])[0]
    np.testing.assert_array_equal(np.delete(lp2, 3), np.delete(lp, 3))
    with pytest.raises(ValueError, match="'cat'"):
        m.sample(5, conditions={"cat": "zzz"})


def test_marginal_estimate_matches_enumeration():
    """Two unobserved columns: the importance-sampling marginal agrees with exact enumeration
    (forced by a small enumeration limit)."""
    import forestgen.families.energy.queries as mod

    rng = np.random.default_rng(4)
    x = rng.normal(size=800)
    df = pd.DataFrame({"a": x, "b": x + rng.normal(size=800), "c": rng.integers(0, 6, 800)})
    m = NRGBoost(n_trees=8, max_leaves=8, max_bins=20, random_state=0, **FAST).fit(df)
    q = df.head(5).assign(a=np.nan, b=np.nan)
    exact = m.log_prob(q)
    old = mod.MAX_ENUMERATION
    try:
        mod.MAX_ENUMERATION = 10
        est = m.log_prob(q)
    finally:
        mod.MAX_ENUMERATION = old
    np.testing.assert_allclose(est, exact, atol=0.05)


def test_an_estimated_marginal_is_normalised_over_its_observed_cells():
    """A marginal estimated by importance sampling (forced by a small enumeration limit) is
    normalised over its observed columns' cells with the same draws: a discrete column's
    probabilities sum to one and a numeric column's density integrates to one, where dividing
    by ``log_z_`` left a 12-column survey model's one-column marginal summing to 0.960."""
    import forestgen.families.energy.queries as mod

    rng = np.random.default_rng(4)
    x = rng.normal(size=800)
    df = pd.DataFrame({"a": x, "b": x + rng.normal(size=800), "c": rng.integers(0, 6, 800)})
    m = NRGBoost(n_trees=8, max_leaves=8, max_bins=20, random_state=0, **FAST).fit(df)
    levels = pd.DataFrame({"a": np.nan, "b": np.nan, "c": np.arange(6)})
    exact = m.log_prob(levels)
    mids, lengths = _pieces(m, 0, m.grid_.edges[0][0], m.grid_.edges[0][-1])
    column_a = pd.DataFrame({"a": mids, "b": np.nan, "c": np.nan})
    old = mod.MAX_ENUMERATION
    try:
        mod.MAX_ENUMERATION = 4
        est = m.log_prob(levels)
        dens = np.exp(m.log_prob(column_a))
    finally:
        mod.MAX_ENUMERATION = old
    assert np.exp(est).sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(est, exact, atol=0.03)
    assert float(dens @ lengths) == pytest.approx(1.0, abs=1e-9)


def _pieces(m, j, lo, hi):
    """Midpoints and lengths of the pieces of ``(lo, hi)`` on which NRGBoost's density of
    numeric column ``j`` is constant (its bins, cut by the within-bin law's pieces)."""
    g = m.grid_
    e = g.edges[j] if g.fine_edges is None or not len(g.fine_edges[j]) else g.fine_edges[j]
    cuts = np.unique(np.clip(np.r_[e, lo, hi], lo, hi))
    return (cuts[1:] + cuts[:-1]) / 2, np.diff(cuts)


def test_range_and_set_evidence_in_log_prob_is_the_joint_over_its_mass():
    """``log_prob(rows, conditions=)`` with an interval that cuts bins, or a level set, is
    ``log p(rows, evidence) - log P(evidence)``: the density integrated over the interval
    piece by piece (exact while the cells number at most 4,096), and it integrates to one
    over the free columns; a one-level set is the point evidence."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=800)
    df = pd.DataFrame({"a": x, "b": x + rng.normal(size=800),
                       "c": rng.choice(["u", "v", "w", "z"], 800)})
    m = NRGBoost(n_trees=8, max_leaves=8, max_bins=20, random_state=0, **FAST).fit(df)
    lo, hi = -0.37, 0.81
    mid, width = _pieces(m, 0, lo, hi)
    rows = df.head(6)[["b", "c"]]
    lp = m.log_prob(rows, conditions={"a": (lo, hi)})
    joint = [np.log(np.sum(np.exp(m.log_prob(pd.DataFrame({"a": mid, "b": r.b, "c": r.c})))
                           * width)) for r in rows.itertuples()]
    mass = np.log(np.sum(np.exp(m.log_prob(pd.DataFrame({"a": mid}))) * width))
    np.testing.assert_allclose(lp, np.array(joint) - mass, rtol=1e-9)
    bmid, bw = _pieces(m, 1, m.grid_.edges[1][0], m.grid_.edges[1][-1])
    grid = pd.DataFrame([(b, c) for c in "uvwz" for b in bmid], columns=["b", "c"])
    total = np.sum(np.exp(m.log_prob(grid, conditions={"a": (lo, hi)})) * np.tile(bw, 4))
    assert abs(total - 1) < 1e-9
    ab = df.head(6)[["a", "b"]]
    lps = m.log_prob(ab, conditions={"c": {"u", "w"}})
    pj = [np.logaddexp(*(m.log_prob(ab.assign(c=v)) for v in "uw"))][0]
    pc = np.logaddexp(*(m.log_prob(pd.DataFrame({"c": [v]})) for v in "uw"))
    np.testing.assert_allclose(lps, pj - pc, rtol=1e-9)
    np.testing.assert_allclose(m.log_prob(ab, conditions={"c": {"v"}}),
                               m.log_prob(ab, conditions={"c": "v"}), rtol=1e-9)
    import forestgen.families.energy.queries as mod

    old = mod.MAX_ENUMERATION
    try:  # estimated sums: the numerator's estimates normalise the conditional
        mod.MAX_ENUMERATION = 10
        levels = pd.DataFrame({"c": list("uvwz")})
        est = m.log_prob(levels, conditions={"a": (lo, hi)})
    finally:
        mod.MAX_ENUMERATION = old
    assert abs(np.exp(est).sum() - 1) < 1e-9
    np.testing.assert_allclose(est, m.log_prob(levels, conditions={"a": (lo, hi)}), atol=0.05)


def test_conditional_draws_weigh_a_bin_by_its_share_inside_an_interval():
    """Draws given an interval that cuts two bins unevenly (90% of one, 10% of the next) follow
    ``log_prob(conditions=)``: each bin weighs its share of mass inside the interval (the
    chains weighed whole bins: 0.626 against 0.581 for ``c = u`` here)."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=800)
    df = pd.DataFrame({"a": x, "b": x + rng.normal(size=800),
                       "c": np.where(x + 0.5 * rng.normal(size=800) > 0, "u",
                                     rng.choice(["v", "w", "z"], 800))})
    m = NRGBoost(n_trees=8, max_leaves=8, max_bins=20, random_state=0, **FAST).fit(df)
    e = m.grid_.edges[0]
    cond = {"a": (e[12] - 0.9 * (e[12] - e[11]), e[12] + 0.1 * (e[13] - e[12])), "b": 0.3}
    p = np.exp(m.log_prob(pd.DataFrame({"c": list("uvwz")}), conditions=cond))
    s = m.sample(20000, conditions=cond, random_state=0)
    assert s["a"].between(*cond["a"]).all()
    freq = s["c"].value_counts(normalize=True).reindex(list("uvwz")).to_numpy()
    assert np.abs(freq - p).max() < 0.02, (freq, p)  # 4 s.e. of independent draws: 0.014


def test_expect_under_evidence_is_an_mcmc_estimate(mixed):
    df, m = mixed
    e = m.expect(["num", "flag"], conditions={"cat": "hi"}, random_state=0)
    s = m.sample(4000, conditions={"cat": "hi"}, random_state=1)
    assert abs(e["num"] - s.num.mean()) < 0.1
    assert e["num"] > df.num.mean()  # "hi" only occurs for positive num
    # one column given all the others: close to the exact conditional (predict)
    rows = df.head(4).copy()
    exact = m.predict(rows, "num").to_numpy()
    mc = m.expect("num", conditions=rows.drop(columns="num"), n_draws=2000,
                  random_state=0).to_numpy()
    np.testing.assert_allclose(mc, exact, atol=0.15)
    # a per-row result: a row with impossible evidence is NaN (with a warning), not a failure
    bad = rows.drop(columns="num").assign(age=[20, 1000, 30, 40])
    with pytest.warns(RuntimeWarning, match="zero-probability"):
        r = m.expect("num", conditions=bad, n_draws=50, random_state=0)
    assert np.isnan(r.iloc[1]) and np.isfinite(r.drop(index=1)).all()
    with pytest.raises(ValueError, match="'age'"):
        m.sample(5, conditions={"age": 1000})
    with pytest.warns(RuntimeWarning, match="unconditionally"):
        s = m.sample(conditions=bad[["age"]], on_empty="unconditional", random_state=0)
    assert s.age[0] == 20 and s.age.between(18, 89).all()


def test_ais_and_importance_normalisers_match_the_exact_log_z(toy):
    from forestgen.families.energy.normaliser import AISNormaliser, ImportanceNormaliser

    df, codes, model = toy
    cells = pd.DataFrame(list(itertools.product(model.schema_["a"].categories,
                                                model.schema_["b"].categories)),
                         columns=["a", "b"])
    _, log_z = _exact(model, cells)
    for est in (AISNormaliser(n_chains=128, n_steps=60), ImportanceNormaliser(n_samples=50_000)):
        lz, se = est.estimate(model.energy_, np.random.default_rng(0))
        assert 0 < se < 0.1
        assert abs(lz - log_z) < max(4 * se, 0.01), (type(est).__name__, lz, log_z, se)


def test_conditional_sampling_clamps_evidence(mixed):
    df, m = mixed
    s = m.sample(200, random_state=0, conditions={"flag": True, "num": (0.5, 1.5)})
    assert s.flag.all() and s.num.between(0.5, 1.5).all()
    per_row = pd.DataFrame({"cat": ["hi", "a", np.nan]})
    s2 = m.sample(conditions=per_row, random_state=0)
    assert list(s2.cat[:2]) == ["hi", "a"]


def test_impute_fills_only_missing_cells(mixed):
    df, m = mixed
    q = df.head(20).copy()
    q.loc[:4, "num"] = np.nan
    q.loc[5:9, ["num", "age"]] = np.nan
    out = m.impute(q, random_state=0)
    assert out.num.notna().all() and out.age.notna().all()
    pd.testing.assert_series_equal(out.many, q.many)
    s = m.impute(q, method="sample", random_state=0)
    assert s.num.notna().all()
    assert s.num[10:].equals(q.num[10:])


def test_default_sampling_starts_at_training_states_and_matches_the_model(toy, tmp_path):
    """Unconditional chains start at resampled final-pool states (few burn-in sweeps, a row per
    sweep); their rows follow the enumerated model as closely as chains started at q0."""
    from forestgen.base import GenerativeForest

    df, codes, model = toy
    assert model.chain_start_.shape == (256, 2)
    cats = model.schema_["a"].categories, model.schema_["b"].categories
    cells = pd.DataFrame(list(itertools.product(*cats)), columns=["a", "b"])
    f, log_z = _exact(model, cells)
    q = np.exp(f - log_z).reshape(30, 30)
    exact = {"a": q.sum(axis=1), "b": q.sum(axis=0)}
    for start in ("training", "q0"):
        s = model.sample(20_000, random_state=3, start=start)
        for c in ("a", "b"):
            ps = np.bincount(s[c], minlength=30) / len(s)
            assert 0.5 * np.abs(ps - exact[c]).sum() < 0.04, (start, c)
    m2 = GenerativeForest.load(model.save(tmp_path / "toy.forestgen"))
    np.testing.assert_array_equal(m2.chain_start_, model.chain_start_)
    pd.testing.assert_frame_equal(m2.sample(30, random_state=1), model.sample(30, random_state=1))
    assert model.truncated(10).chain_start_ is None  # states of the full model: start at q0
    with pytest.raises(ValueError, match="start"):
        model.sample(5, start="data")


@pytest.mark.parametrize("refill_trees", [None, 2])  # the paper's refill, the flat one
def test_t16_same_seed_same_model_and_samples_any_thread_count(tmp_path, refill_trees):
    import numba

    rng = np.random.default_rng(5)
    df = pd.DataFrame({"x": rng.normal(size=400), "c": rng.choice(list("pqr"), 400)})
    kw = dict(n_trees=6, max_leaves=8, random_state=11, refill_trees=refill_trees, **FAST)
    a = NRGBoost(**kw).fit(df)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b = NRGBoost(**kw).fit(df)
        sb = b.sample(50, random_state=2)
    finally:
        numba.set_num_threads(old)
    for k, v in a.energy_.trees.to_arrays().items():
        np.testing.assert_array_equal(v, b.energy_.trees.to_arrays()[k])
    pd.testing.assert_frame_equal(a.sample(50, random_state=2), sb)
    assert a.log_z_ == b.log_z_


def test_save_load_round_trip_and_torch(mixed, tmp_path):
    import torch

    from forestgen.base import GenerativeForest

    df, m = mixed
    path = m.save(tmp_path / "m.forestgen")
    m2 = GenerativeForest.load(path)
    assert isinstance(m2, NRGBoost)
    np.testing.assert_array_equal(m.log_prob(df.head(50)), m2.log_prob(df.head(50)))
    pd.testing.assert_frame_equal(m.sample(20, random_state=4), m2.sample(20, random_state=4))
    dist = m.to_torch()
    x = dist.encode(df.head(8)).requires_grad_(True)
    lp = dist.log_prob(x)
    np.testing.assert_allclose(lp.detach().numpy(), m.log_prob(df.head(8)), rtol=1e-6)
    lp.sum().backward()
    assert torch.all(x.grad == 0)
    torch.manual_seed(0)
    assert dist.sample((5,)).shape == (5, df.shape[1])
    batch = m.as_dataset(batch_size=16, n_batches=1).batch(0)
    assert batch.shape[0] == 16


def test_bad_parameters_name_the_parameter():
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="learning_rate"):
        NRGBoost(learning_rate=0).fit(df)
    with pytest.raises(ValueError, match="max_leaves"):
        NRGBoost(max_leaves=1).fit(df)
    with pytest.raises(ValueError, match="refill_trees"):
        NRGBoost(refill_trees=0).fit(df)
    with pytest.raises(ValueError, match="persistent_chains"):
        NRGBoost(refill_trees=10, persistent_chains=False).fit(df)


def test_boosting_starts_when_q0_matches_every_marginal():
    """Continuous columns with one training value per quantile bin: q0 equals both marginals,
    so no first split gains anything; the root still splits and the dependence is learnt."""
    rng = np.random.default_rng(5)
    u = rng.normal(size=240)
    df = pd.DataFrame({"u": u, "v": 0.8 * u + 0.6 * rng.normal(size=240)})
    m = NRGBoost(n_trees=12, max_leaves=16, random_state=0, **FAST).fit(df)
    assert m.n_trees_ == 12
    s = m.sample(2000, random_state=0)
    assert np.corrcoef(s.u, s.v)[0, 1] > 0.5
    q0_only = NRGBoost(n_trees=1, max_leaves=2, random_state=0, **FAST).fit(df)
    assert m.score(df) > q0_only.score(df) + 0.3


def test_sample_burn_in_b_first_keeps_the_state_after_b_plus_one_sweeps(toy):
    # the reference package's sample(num_steps=100) keeps the state after 100 sweeps from a q0
    # draw: here that is chains=n, burn_in=99, thin=1, start="q0" (benchmarks/bench_nrgboost.py)
    import copy

    from forestgen.families.energy.gibbs import GibbsSampler

    calls = []

    class Recording(GibbsSampler):
        def run(self, energy, X0, **kw):
            out = super().run(energy, X0, **kw)
            calls.append((len(X0), kw["n_sweeps"], kw["record_from"], kw["thin"],
                          out.shape[1]))
            return out

    model = copy.deepcopy(toy[2])
    for b, thin, n, chains in [(99, 1, 7, 7), (0, 1, 3, 3), (4, 3, 8, 2)]:
        model.set_params(sampler=Recording())
        calls.clear()
        model.sample(n, random_state=0, chains=chains, burn_in=b, thin=thin, start="q0")
        (c, sweeps, first, th, n_rec), = calls
        per = -(-n // chains)
        assert (c, first, th, n_rec) == (chains, b, thin, per)
        # records after sweeps b + 1, b + 1 + thin, ...: the last one is the last sweep
        assert sweeps == b + 1 + (per - 1) * thin


def test_an_estimated_marginal_with_nested_missing_columns_sums_to_one():
    """With nested missingness (``b`` missing exactly where ``a`` is) an estimated one-column
    marginal was divided by ``log_z_`` alone: penguins' species probabilities summed to 1.43.
    It is the mean of the conditional pmf over the model's own chain states now."""
    import forestgen.families.energy.queries as mod

    rng = np.random.default_rng(6)
    n = 600
    a = rng.normal(size=n)
    a[rng.random(n) < 0.05] = np.nan
    df = pd.DataFrame({"a": a, "b": a + rng.normal(size=n), "c": rng.integers(0, 4, n),
                       "e": rng.normal(size=n)})
    m = NRGBoost(n_trees=8, max_leaves=8, max_bins=16, random_state=0, **FAST).fit(df)
    assert m._nesting() is not None
    levels = pd.DataFrame({"c": np.arange(4)})
    exact = m.log_prob(levels)
    old = mod.MAX_ENUMERATION
    try:
        mod.MAX_ENUMERATION = 4
        est = m.log_prob(levels)
    finally:
        mod.MAX_ENUMERATION = old
    assert np.exp(exact).sum() == pytest.approx(1.0, abs=0.02)
    assert np.exp(est).sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(est, exact, atol=0.05)


def test_an_estimated_marginal_follows_the_models_own_draws():
    """A level's estimated marginal probability agrees with its share of the model's draws
    (one law): ``c`` depends strongly on ``x``, which a ``q0`` importance-sampling estimate
    missed (penguins: 0.53 for Gentoo against 0.40 in the draws). Batch-independent."""
    import forestgen.families.energy.queries as mod

    rng = np.random.default_rng(11)
    n = 800
    x = rng.normal(size=n)
    c = np.where(x + 0.3 * rng.normal(size=n) > 0.8, "hi", np.where(x < -0.5, "lo", "mid"))
    df = pd.DataFrame({f"x{k}": x + 0.3 * rng.normal(size=n) for k in range(5)} | {"c": c})
    gone = rng.random(n) < 0.05  # x0 and x1 missing together (nested)
    df.loc[gone, ["x0", "x1"]] = np.nan
    m = NRGBoost(n_trees=12, max_leaves=8, max_bins=16, random_state=0, **FAST).fit(df)
    levels = pd.DataFrame({"c": ["hi", "lo", "mid"]})
    old = mod.MAX_ENUMERATION
    try:
        mod.MAX_ENUMERATION = 4
        est = np.exp(m.log_prob(levels))
        alone = np.exp(m.log_prob(levels.iloc[[1]]))
    finally:
        mod.MAX_ENUMERATION = old
    share = m.sample(20000, random_state=3)["c"].value_counts(normalize=True)
    assert est.sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(est, share[["hi", "lo", "mid"]].to_numpy(), atol=0.03)
    assert alone[0] == est[1]
