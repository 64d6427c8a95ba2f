"""Chain (sequential conditional trees): normalisation, draws against the density, exact
conditionals against the joint, persistence, rules and the errors that name the learner."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
from forestgen.testing.statistical import check_statistics, discrete_toy


@pytest.fixture(scope="module")
def toy():
    return discrete_toy(n=300)


@pytest.fixture(scope="module")
def toy_model(toy):
    return fg.Chain(min_leaf=3, random_state=0, n_jobs=1).fit(toy)


def _grid(toy):
    levels = [sorted(toy[c].unique()) for c in toy.columns]
    return pd.DataFrame(list(itertools.product(*levels)), columns=toy.columns)


def test_discrete_joint_sums_to_one_and_marginals_are_sums(toy, toy_model):
    grid = _grid(toy)
    p = np.exp(toy_model.log_prob(grid))
    assert abs(p.sum() - 1.0) < 1e-12
    for hide in (["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"]):
        keep = [c for c in toy.columns if c not in hide]
        part = grid.copy()
        part[hide] = None
        summed = grid.assign(p=p).groupby(keep)["p"].sum()
        got = np.exp(toy_model.log_prob(part.drop_duplicates(keep)))
        want = summed.loc[list(map(tuple, part.drop_duplicates(keep)[keep].to_numpy()))
                          if len(keep) > 1 else part.drop_duplicates(keep)[keep[0]].tolist()]
        np.testing.assert_allclose(got, want.to_numpy(), rtol=1e-10, atol=1e-14)


def test_predict_proba_and_conditionals_match_the_joint(toy, toy_model):
    grid = _grid(toy)
    p = np.exp(toy_model.log_prob(grid))
    joint = grid.assign(p=p)
    # P(a | b, c): the evidence (b, c) is not a prefix of the order a, b, c
    pp = toy_model.predict_proba(grid.drop_duplicates(["b", "c"]), target="a")
    for (_, row), (_, probs) in zip(grid.drop_duplicates(["b", "c"]).iterrows(),
                                    pp.iterrows()):
        sub = joint[(joint.b == row.b) & (joint.c == row.c)]
        want = (sub.set_index("a").p / sub.p.sum()).reindex(probs.index).fillna(0.0)
        np.testing.assert_allclose(probs.to_numpy(float), want.to_numpy(), atol=1e-12)
    # conditional log_prob given c (the last column) against the joint
    cond = toy_model.log_prob(grid[grid.c == "x"], conditions={"c": "x"})
    sub = joint[joint.c == "x"]
    np.testing.assert_allclose(np.exp(cond), sub.p / sub.p.sum(), rtol=1e-10)


def test_conditional_draws_follow_the_conditional_law(toy, toy_model):
    grid = _grid(toy)
    joint = grid.assign(p=np.exp(toy_model.log_prob(grid)))
    sub = joint[joint.c == "y"]
    law = sub.set_index(["a", "b"]).p / sub.p.sum()
    draws = toy_model.sample(3000, conditions={"c": "y"}, random_state=3)
    assert (draws.c == "y").all()
    counts = draws.groupby(["a", "b"]).size().reindex(law.index, fill_value=0)
    keep = law.to_numpy() > 0
    assert counts[~keep].sum() == 0
    _, pv = stats.chisquare(counts[keep].to_numpy(), law[keep].to_numpy() * len(draws))
    assert pv > 1e-3, pv
    # same seed, same draws
    again = toy_model.sample(3000, conditions={"c": "y"}, random_state=3)
    pd.testing.assert_frame_equal(draws, again)


@pytest.fixture(scope="module")
def numeric():
    rng = np.random.default_rng(1)
    u = rng.normal(size=300)
    v = np.round(0.8 * u + 0.6 * rng.normal(size=300), 2)
    return pd.DataFrame({"u": u, "v": v})


def _nodes(a, b, pieces=400, k=8):
    x, w = np.polynomial.legendre.leggauss(k)
    edges = np.linspace(a, b, pieces + 1)
    left, width = edges[:-1], np.diff(edges)
    return ((left[:, None] + 0.5 * width[:, None] * (x + 1)).ravel(),
            (0.5 * width[:, None] * w).ravel())


def test_numeric_density_integrates_to_one_in_1d_and_2d(numeric):
    one = fg.Chain(random_state=0, n_jobs=1).fit(numeric[["u"]])
    x, w = _nodes(numeric.u.min() - 1, numeric.u.max() + 1, pieces=2000)
    dens = np.exp(one.log_prob(pd.DataFrame({"u": x}), floor=None))
    assert abs(dens @ w - 1.0) < 2e-3
    two = fg.Chain(random_state=0, n_jobs=1).fit(numeric)
    xu, wu = _nodes(numeric.u.min() - 0.5, numeric.u.max() + 0.5, pieces=150, k=6)
    xv, wv = _nodes(numeric.v.min() - 0.5, numeric.v.max() + 0.5, pieces=150, k=6)
    U, V = np.meshgrid(xu, xv, indexing="ij")
    dens = np.exp(two.log_prob(pd.DataFrame({"u": U.ravel(), "v": V.ravel()}), floor=None))
    assert abs(dens @ np.outer(wu, wv).ravel() - 1.0) < 1e-2
    # the marginal of v (u missing, so summed over the branches of u) integrates to one
    xv, wv = _nodes(numeric.v.min() - 0.5, numeric.v.max() + 0.5, pieces=1000)
    marg = np.exp(two.log_prob(pd.DataFrame({"u": np.nan, "v": xv}), floor=None))
    assert abs(marg @ wv - 1.0) < 2e-3


def test_draws_follow_the_density(numeric):
    m = fg.Chain(random_state=0, n_jobs=1).fit(numeric)
    res = check_statistics(m, numeric, n=3000, checks=("draws", "expect", "conditional"))
    assert {r.column for r in res} >= {"u", "v"}


def test_expect_is_the_mean_of_conditional_draws(numeric):
    m = fg.Chain(random_state=0, n_jobs=1).fit(numeric)
    cond = {"v": (0.5, 1.5)}  # interval evidence on the last column: not a prefix
    e = float(m.expect("u", conditions=cond)["u"])
    d = m.sample(4000, conditions=cond, random_state=2)
    assert d.v.between(0.5, 1.5).all()
    assert abs(e - d.u.mean()) < 4 * d.u.std() / np.sqrt(len(d))


def test_save_load_and_seeds(tmp_path, toy, toy_model):
    path = toy_model.save(tmp_path / "chain.fgm")
    again = fg.GenerativeForest.load(path)
    assert type(again) is fg.Chain
    grid = _grid(toy)
    np.testing.assert_array_equal(again.log_prob(grid), toy_model.log_prob(grid))
    pd.testing.assert_frame_equal(again.sample(50, random_state=4),
                                  toy_model.sample(50, random_state=4))


def test_order_changes_the_trees_not_the_normalisation(toy):
    m = fg.Chain(order=["c", "a", "b"], min_leaf=3, random_state=0, n_jobs=1).fit(toy)
    assert list(m.order_) == [2, 0, 1]
    assert abs(np.exp(m.log_prob(_grid(toy))).sum() - 1.0) < 1e-12
    with pytest.raises(ValueError, match="Chain: order must list every column once"):
        fg.Chain(order=["a", "b"]).fit(toy)


def test_missing_training_values_and_imputation():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(["p", "q"], 200)})
    df["y"] = df.x * 2 + rng.normal(size=200) * 0.1
    df.loc[rng.random(200) < 0.2, "x"] = np.nan
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    s = m.sample(2000, random_state=0)
    assert 0.1 < s.x.isna().mean() < 0.3  # the training rows' missing rate
    q = pd.DataFrame({"x": [np.nan, 1.0], "c": ["p", None], "y": [2.0, np.nan]})
    out = m.impute(q)
    assert not out.isna().any().any()
    assert abs(out.x[0] - 1.0) < 0.3 and abs(out.y[1] - 2.0) < 0.4


def test_rules_are_kept():
    rng = np.random.default_rng(0)
    edu = rng.choice(["HS", "BSc", "MSc"], 300)
    df = pd.DataFrame({"edu": edu, "years": pd.Series(edu).map({"HS": 12, "BSc": 16,
                                                                 "MSc": 18}).to_numpy(),
                       "income": rng.gamma(2.0, 10.0, 300).round(1)})
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    s = m.sample(500, random_state=1)
    assert (s.years == s.edu.map({"HS": 12, "BSc": 16, "MSc": 18})).all()
    bad = pd.DataFrame({"edu": ["HS"], "years": [18], "income": [20.0]})
    assert np.isneginf(m.log_prob(bad, floor=None))[0]


def test_errors_name_the_learner_and_the_query(toy, toy_model):
    with pytest.raises(NotImplementedError, match="Chain.*'torch'"):
        toy_model.to_torch()
    with pytest.raises(ValueError, match="Chain: the 'ensembler' slot is ruled out"):
        fg.Chain(ensembler="mixture")
    with pytest.raises(ValueError, match="Chain: the 'sampler' slot is ruled out"):
        fg.Chain(sampler="ancestral")
    with pytest.raises(ValueError, match="Chain.impute: method='max_density'"):
        toy_model.impute(toy.head(3).assign(a=None), method="max_density")


def test_past_max_branches_an_estimate_is_given_and_said(toy, toy_model):
    """Rows whose open columns need more than ``max_branches`` branches are answered by
    likelihood weighting / sampling-importance-resampling, with an EstimateWarning naming the
    learner and the query; the estimate is close to the exact answer and seeded by the row."""
    from forestgen.families.chain.queries import EstimateWarning

    tight = fg.Chain(min_leaf=3, max_branches=1, random_state=0, n_jobs=1).fit(toy)
    q = pd.DataFrame({"a": [None, None], "b": [None, "u"], "c": ["x", "w"]})
    exact = toy_model.log_prob(q)
    with pytest.warns(EstimateWarning, match=r"Chain\.log_prob: .*ESTIMATE"):
        est = tight.log_prob(q)
    np.testing.assert_allclose(est, exact, atol=0.15)
    with pytest.warns(EstimateWarning):
        again = tight.log_prob(q.iloc[[1]])
    assert again[0] == est[1]  # a row's estimate does not depend on its batch
    with pytest.warns(EstimateWarning, match=r"Chain\.sample"):
        d = tight.sample(2000, conditions={"c": "x"}, random_state=0)
    assert (d.c == "x").all()
    grid = _grid(toy)
    joint = grid.assign(p=np.exp(toy_model.log_prob(grid)))
    sub = joint[joint.c == "x"]
    law = (sub.set_index(["a", "b"]).p / sub.p.sum())
    freq = d.groupby(["a", "b"]).size().reindex(law.index, fill_value=0) / len(d)
    assert np.abs(freq - law).max() < 0.05
    with pytest.warns(EstimateWarning, match=r"Chain\.predict_proba"):
        pp = tight.predict_proba(q.assign(b=None), target="a")
    want = toy_model.predict_proba(q.assign(b=None), target="a")
    np.testing.assert_allclose(pp.to_numpy(float), want.to_numpy(float), atol=0.05)


def test_kernel_leaves_draw_near_observed_values_and_keep_a_density():
    """The default numeric leaf: draws of a column with few, spread values stay next to the
    values (synthpop's draw of an observed value), where a truncated normal smears them; fresh
    rows keep a typical density near the truncated normal's (the defensive share)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=400)
    levels = np.array([0.0, 1.7, 3.2, 5.9, 8.4])
    y = levels[np.clip(np.digitize(x + 0.4 * rng.normal(size=400), [-1, -0.3, 0.3, 1]), 0, 4)]
    df = pd.DataFrame({"x": x, "y": y + 0.01 * rng.normal(size=400)})
    fit, fresh = df.iloc[:300], df.iloc[300:]
    m = fg.Chain(random_state=0, n_jobs=1).fit(fit)
    old = fg.Chain(numeric_leaf="truncnorm", random_state=0, n_jobs=1).fit(fit)

    def near(s):
        return (np.abs(s.y.to_numpy()[:, None] - levels[None, :]).min(1) < 0.3).mean()

    assert near(m.sample(2000, random_state=1)) > 0.65  # measured 0.76
    assert near(old.sample(2000, random_state=1)) < 0.55  # measured 0.43
    # (a fresh row at another level than its leaf's scores far below both medians: the leaf's
    # SD, and so its wide kernel, is the level's 0.01)
    assert np.median(m.log_prob(fresh)) > np.median(old.log_prob(fresh)) - 0.5


def test_default_numeric_leaf_keeps_a_tail_for_values_unlike_their_leaf():
    # b is 666.5-666.55 whenever a == "x" (as Boston's tax in one region): a held-out
    # (x, 403) sat thousands of nats below the marginals without the column-normal tail
    from forestgen.families.chain.chain import NUMERIC_TAIL

    rng = np.random.default_rng(0)
    a = np.repeat(["x", "y"], [60, 140])
    b = np.where(a == "x", 666.5 + rng.integers(0, 6, 200) / 100,  # no atom: none >= 10%
                 rng.uniform(187, 470, 200).round(2))
    df = pd.DataFrame({"a": a, "b": b})
    ch = fg.Chain(random_state=0).fit(df)
    assert ch.leaf_prototypes()[0].tail == NUMERIC_TAIL > 0
    row = pd.DataFrame({"a": ["x"], "b": [403.0]})
    assert ch.log_prob(row, floor=None)[0] > -30
    m, s = b.mean(), b.std()
    col_log_pdf = -0.5 * ((403 - m) / s) ** 2 - np.log(s * np.sqrt(2 * np.pi))
    bound = np.log(0.3) + np.log(NUMERIC_TAIL) + col_log_pdf  # p(a=x) = 0.3
    assert ch.log_prob(row)[0] >= bound - 0.1


def test_default_numeric_leaves_follow_a_skewed_column():
    # a skewed column (as anes96's popul: a dense bulk near 0 and a long tail) as the chain's
    # first column: its marginal, one kernel leaf; the SD-scaled widths smeared the bulk
    import forestgen.families.chain.chain as chain_mod

    rng = np.random.default_rng(3)
    x = np.round(rng.lognormal(3.0, 1.5, 500)) + 1.0
    df = pd.DataFrame({"x": x, "c": rng.choice(["a", "b"], 500)})
    ch = fg.Chain(random_state=0).fit(df)
    assert ch.leaf_prototypes()[0].adaptive is chain_mod.NUMERIC_ADAPTIVE is True
    q = np.array([0.25, 0.5])  # the bulk (data: 9 and 22)
    err = {}
    for adaptive in (True, False):
        chain_mod.NUMERIC_ADAPTIVE = adaptive
        try:
            m = fg.Chain(random_state=0).fit(df)
        finally:
            chain_mod.NUMERIC_ADAPTIVE = True
        s = m.sample(4000, random_state=1).x.to_numpy()
        err[adaptive] = np.abs(np.quantile(s, q) / np.quantile(x, q) - 1).max()
    assert err[True] < 0.5 < err[False]  # 12 and 29 against 16 and 35


def test_rank_variance_criterion_is_the_variance_decrease_of_the_class_index():
    from forestgen.tree.criteria import RANK_VARIANCE, criterion_gain

    rng = np.random.default_rng(0)
    c = np.arange(7.0)

    def ss(w):
        m = (w * c).sum() / w.sum()
        return (w * (c - m) ** 2).sum()

    for _ in range(20):
        left, right = rng.uniform(0, 5, 7), rng.uniform(0, 5, 7)

        want = ss(left + right) - ss(left) - ss(right)
        assert abs(criterion_gain(RANK_VARIANCE, left, right) - want) < 1e-9 * ss(left + right)
    assert criterion_gain(RANK_VARIANCE, np.zeros(3), np.ones(3)) == 0.0


def test_numeric_columns_regress_on_their_bin_ranks():
    # y follows x closely: a regression tree on y's ranks keeps splitting x where a Gini tree
    # on 10 bins of y stops at nodes whose y lies in one bin
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, 400)
    df = pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.1, 400)})
    err = {}
    for crit, bins in (("rank_variance", 64), (None, 10)):
        m = fg.Chain(numeric_criterion=crit, target_bins=bins, min_leaf=5, random_state=0)
        s = m.fit(df).sample(2000, random_state=1)
        err[crit] = np.mean(np.abs(s.y - s.x))
    assert fg.Chain().numeric_criterion == "rank_variance" and fg.Chain().target_bins == 64
    assert err["rank_variance"] < 0.8 * err[None]
    with pytest.raises(fg.validation.ParameterError, match="numeric_criterion"):
        fg.Chain(numeric_criterion="ise").fit(df)


def test_integer_level_columns_regress_on_their_level_ranks(monkeypatch):
    # an integer column coded as ordered levels follows x among five noise columns: its tree
    # grown on the variance of the level index keeps more of the relation than Gini on 60-odd
    # unordered labels, which splits on the noise columns too (four tables: the gap per table
    # is 0.01-0.07 in the correlation of the draws)
    import forestgen.families.chain.chain as chain_module

    assert chain_module.INTEGER_REGRESS
    gaps = []
    for ds in range(4):
        rng = np.random.default_rng(ds)
        n = 300
        df = pd.DataFrame({f"z{k}": rng.normal(size=n) for k in range(5)})
        df["x"] = rng.integers(0, 60, n)
        df["y"] = np.clip(df.x + np.round(rng.normal(0, 10, n)), 0, 70).astype(int)
        corr = {}
        for flag in (True, False):
            monkeypatch.setattr(chain_module, "INTEGER_REGRESS", flag)
            m = fg.Chain(min_leaf=10, prior_strength=0.5, random_state=0).fit(df)
            assert m.encoder_.schema["y"].is_discrete and m.encoder_.schema["y"].kind == "integer"
            s = m.sample(4000, random_state=1)
            corr[flag] = np.corrcoef(s.x, s.y)[0, 1]
        gaps.append(corr[True] - corr[False])
    assert np.mean(gaps) > 0.015
