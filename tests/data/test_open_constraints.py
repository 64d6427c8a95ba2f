"""Queries whose answer depends on a constraint the query leaves open (issue 37 item 3: "the
density accounts for them"; issue 32: one law per model). Under kept constraints ``C`` the
model's law is ``p'(x) = p(x) 1_C(x) / P(C)``; a row with a constrained column missing, or a
query about such a column, must use ``p'``, not ``p``:

* the NaN-marginal ``log_prob`` is ``log p(x_obs) + log P(C | x_obs) - log P(C)`` (it
  integrates to one; ``p(x_obs) / P(C)`` alone integrates to ``1 / P(C)``);
* ``expect`` is the mean of ``sample``'s draws, which keep ``C``;
* ``impute`` and ``predict`` fill a constrained column inside what the row's other entries
  allow; ``predict_proba`` gives a level the constraints forbid probability zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg


def priced(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """``low <= mid <= high`` in every row, with ties (a detected order each), and a class."""
    rng = np.random.default_rng(seed)
    base = rng.gamma(4.0, 4.0, n)
    low = np.round(base, 1)
    mid = np.round(base + rng.gamma(1.0, 2.0, n) * (rng.random(n) < 0.8), 1)
    high = np.round(mid + rng.gamma(1.5, 4.0, n) * (rng.random(n) < 0.85), 1)
    kind = np.where(base + rng.normal(0, 3, n) > 16, "big", "small")
    return pd.DataFrame({"low": low, "mid": mid, "high": high, "kind": kind})


@pytest.fixture(scope="module")
def fitted():
    df = priced()
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    kinds = {(c["low"], c["high"]) for c in model.schema_.rules["constraints"]}
    assert kinds == {(0, 1), (1, 2)}, "the table must keep low <= mid <= high"
    return df, model


def test_the_nan_marginal_of_a_constrained_column_integrates_to_one(fitted):
    df, model = fitted
    x = np.linspace(df["mid"].min(), df["mid"].max(), 120)
    q = pd.DataFrame({"low": np.nan, "mid": x, "high": np.nan, "kind": None})
    lp = model.log_prob(q)
    assert np.isfinite(lp).all()
    assert np.trapezoid(np.exp(lp), x) == pytest.approx(1.0, abs=0.06)
    # the model's own P(C) is well below one: p(x_obs) / P(C) alone integrated to 1 / P(C)
    assert model.rules_log_z_ < np.log(0.9)


def test_expect_is_the_mean_of_the_draws_under_constraints(fitted):
    _, model = fitted
    draws = model.sample(20_000, random_state=1)
    e = model.expect(["low", "mid", "high"])
    for c in ["low", "mid", "high"]:
        se = draws[c].std() / np.sqrt(len(draws))
        assert abs(float(e[c]) - draws[c].mean()) < 5 * se + 0.05, c
    given = model.expect(["mid"], conditions={"kind": "big"})
    ref = model.sample(20_000, random_state=2, conditions={"kind": "big"})["mid"]
    assert abs(float(given["mid"]) - ref.mean()) < 5 * ref.std() / np.sqrt(len(ref)) + 0.05


def test_impute_and_predict_keep_the_order(fitted):
    df, model = fitted
    q = df.head(60).copy()
    q["mid"] = np.nan
    q.loc[q.index[:15], "high"] = np.nan
    for im in (model.impute(q), model.impute(q, method="sample", random_state=3)):
        assert im[["low", "mid", "high"]].notna().all().all()
        assert (im["low"] <= im["mid"]).all() and (im["mid"] <= im["high"]).all()
        pd.testing.assert_series_equal(im["low"], q["low"])
    pred = model.predict(q.iloc[15:], target="mid")
    assert ((pred >= q["low"].iloc[15:]) & (pred <= q["high"].iloc[15:])).all()
    tight = q.iloc[15:16].copy()
    tight["low"] = tight["high"] = 12.3  # only mid = 12.3 keeps the order
    assert model.predict(tight, target="mid").iloc[0] == pytest.approx(12.3)
    assert model.impute(tight)["mid"].iloc[0] == pytest.approx(12.3)


def test_predict_proba_gives_a_forbidden_level_probability_zero():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"k": rng.choice(["a", "b"], 400), "h": rng.choice(["p", "q", "r"], 400),
                       "x": rng.normal(size=400)})
    df = df[~((df.k == "a") & (df.h == "r"))].reset_index(drop=True)
    meta = {"constraints": [{"constraint_class": "FixedCombinations",
                             "constraint_parameters": {"column_names": ["k", "h"]}}]}
    model = fg.ARF(n_trees=10, random_state=0).fit(df, kinds=meta)
    rows = pd.DataFrame({"k": ["a", "b"], "h": [None, None], "x": [0.0, 0.0]})
    p = model.predict_proba(rows, target="h")
    assert p.loc[0, "r"] == 0.0 and p.loc[1, "r"] > 0.05
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert model.predict(rows, target="h").iloc[0] in ("p", "q")
    # the other way round: given h = r, k can only be b
    pk = model.predict_proba(pd.DataFrame({"k": [None], "h": ["r"], "x": [0.0]}), target="k")
    assert pk.loc[0, "a"] == 0.0 and pk.loc[0, "b"] == 1.0
    with pytest.warns(RuntimeWarning, match="break a constraint"):  # a row of probability 0
        broken = model.predict(pd.DataFrame({"k": ["a", "b"], "h": ["r", "r"], "x": [0, 0]}),
                               target="x")
    assert np.isnan(broken.iloc[0]) and np.isfinite(broken.iloc[1])


def test_per_row_samples_under_a_tight_order_do_not_fail_the_batch(fitted):
    df, model = fitted
    cond = pd.DataFrame({"low": [12.3, np.nan, 20.0], "high": [12.3, np.nan, 20.0]})
    s = model.sample(None, conditions=cond, random_state=4)
    assert s["mid"].iloc[0] == pytest.approx(12.3) and s["mid"].iloc[2] == pytest.approx(20.0)
    assert (s["low"] <= s["mid"]).all() and (s["mid"] <= s["high"]).all()


def test_torch_log_prob_of_rows_leaving_a_constraint_open_equals_numpy(fitted):
    torch = pytest.importorskip("torch")
    df, model = fitted
    q = df.head(20).copy()
    q.loc[q.index[:10], "mid"] = np.nan
    q.loc[q.index[5:15], "high"] = np.nan
    dist = model.to_torch(dtype=torch.float64)
    lt = dist.log_prob(dist.encode(q)).numpy()
    lp = model.log_prob(q)
    np.testing.assert_allclose(lt, lp, rtol=0, atol=1e-9)
    cond = dist.condition({"kind": "big"})
    cols = [model.schema_.index(c) for c in cond.columns]
    lc = cond.log_prob(dist.encode(q)[:, cols]).numpy()
    lp_c = model.log_prob(q, conditions={"kind": "big"})  # (the condition overrides kind)
    np.testing.assert_allclose(lc, lp_c, rtol=0, atol=1e-9)


@pytest.mark.parametrize("learner", ["ARF", "Chain", "GFBoost", "NRGBoost"])
def test_encoded_draws_keep_the_constraints_for_every_sampler(learner):
    """``sample_encoded`` (the encoded sampler under ``sample``, and what the statistical
    checks compare torch draws with) keeps the constraints as ``sample`` does."""
    from forestgen.data.rules import Rules

    df = priced(200, seed=1)
    kw = {"n_trees": 5} if learner in ("ARF", "GFBoost") else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(df)
    Z = model.sample_encoded(3000, random_state=0)
    assert len(Z) == 3000
    assert Rules.from_dict(model.schema_.rules).holds(Z, model.schema_).all()


def test_log_prob_encoded_is_log_prob_under_rules(fitted):
    """The encoded density is the same law as ``log_prob``: constraints (a row breaking one
    ``-inf``, open rows with their factor) and mappings (the determined column marginalised)."""
    df, model = fitted
    q = df.head(30).copy()
    q.loc[q.index[:10], "mid"] = np.nan
    q.loc[q.index[20:], "high"] = q["low"].iloc[20:] - 1.0  # breaks low <= high
    Z = model.encoder_.transform(q)
    np.testing.assert_allclose(model.log_prob_encoded(Z), model.log_prob(q), rtol=0, atol=1e-9)
    rng = np.random.default_rng(0)
    edu = rng.choice(["a", "b", "c"], 300)
    mapped = pd.DataFrame({"edu": edu, "years": pd.Series(edu).map({"a": 9, "b": 12,
                                                                     "c": 16}).to_numpy(),
                           "x": rng.normal(size=300)})
    m2 = fg.ARF(n_trees=5, random_state=0).fit(mapped)
    assert m2.schema_.rules["mappings"]
    np.testing.assert_allclose(m2.log_prob_encoded(m2.encoder_.transform(mapped.head(20))),
                               m2.log_prob(mapped.head(20)), rtol=0, atol=1e-9)
