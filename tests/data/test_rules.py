"""Logical rules (issue 37): mappings detected at fit and declared constraints are kept in every
sample (conditional ones included) and in the density of every learner, which stays
normalised; the rule-violation metric counts what breaks them."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
import forestgen.metrics as fm
from forestgen.data.encoder import TableEncoder

LEVELS = ["pre", "school", "college", "bachelor", "master", "doctor"]
YEARS = dict(zip(LEVELS, [4, 9, 11, 13, 15, 18]))
GROUP = dict(zip(LEVELS, ["low", "low", "mid", "mid", "high", "high"]))


def table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """``edu`` -> ``years`` one-to-one, ``edu`` -> ``group`` many-to-one, plus free columns."""
    rng = np.random.default_rng(seed)
    edu = rng.choice(LEVELS, n, p=[0.1, 0.3, 0.2, 0.2, 0.1, 0.1])
    age = np.round(20 + rng.gamma(4, 5, n) + 0.5 * np.vectorize(YEARS.get)(edu), 1)
    return pd.DataFrame({"edu": edu, "years": np.vectorize(YEARS.get)(edu).astype(np.int64),
                         "group": np.vectorize(GROUP.get)(edu), "age": age,
                         "smoker": rng.random(n) < 0.3})


def learners():
    return [fg.ARF(n_trees=10, random_state=0), fg.GeF(n_trees=5, random_state=0),
            fg.RFDE(n_trees=10, random_state=0), fg.DEF(n_trees=5, random_state=0),
            fg.GFBoost(n_trees=5, random_state=0), fg.EOGT(n_trees=5, random_state=0),
            fg.NRGBoost(n_trees=5, pool_size=2000, random_state=0),
            fg.Chain(random_state=0, n_jobs=1)]


def names(model, pairs):
    s = model.schema_ if hasattr(model, "schema_") else model.schema
    return {(s.names[m["determinant"]], s.names[m["determined"]]) for m in pairs}


def test_detects_one_to_one_and_many_to_one_but_not_chance():
    df = table()
    df["id"] = [f"r{i}" for i in range(len(df))]  # a level per row determines everything
    df["const"] = 1.0
    enc = TableEncoder().fit(df)
    assert names(enc, enc.schema.rules["mappings"]) == {("edu", "years"), ("edu", "group")}
    off = TableEncoder(kinds={"detect_mappings": False}).fit(df)
    assert off.schema.rules is None


def fit(model, df):
    kw = {"target": "smoker"} if isinstance(model, fg.GeF) else {}
    return model.fit(df, **kw)


def broken(df):
    return ((df["years"] != df["edu"].map(YEARS)) | (df["group"] != df["edu"].map(GROUP)))


@pytest.mark.parametrize("model", learners(), ids=lambda m: type(m).__name__)
def test_every_learner_keeps_mappings_in_samples_and_density(model):
    df = table()
    m = fit(model, df)
    s = m.sample(400, random_state=1)
    assert not broken(s).any()
    c = m.sample(50, conditions={"years": (11, 15)}, random_state=2)
    assert not broken(c).any() and c["edu"].isin(["college", "bachelor", "master"]).all()
    per_row = pd.DataFrame({"group": ["high", "low", None]})
    c2 = m.sample(conditions=per_row, random_state=3)
    assert not broken(c2).any()
    assert list(c2["group"][:2]) == ["high", "low"]
    x = df.head(4).copy()
    lp = m.log_prob(x)
    assert np.isfinite(lp).all()
    x["years"] = x["years"] + 1  # breaks edu -> years
    assert np.isneginf(m.log_prob(x)).all()
    gaps = df.head(8).copy()
    gaps.loc[:2, "edu"] = None          # determinant missing, determined values given
    gaps.loc[3:5, "years"] = np.nan     # determined value missing
    gaps.loc[6:, ["edu", "years"]] = None
    for method in ("expectation", "sample"):
        filled = m.impute(gaps, method=method, random_state=0)
        assert not broken(filled).any(), method
        assert (filled.loc[:2, "years"] == gaps.loc[:2, "years"]).all()  # given cells kept


def test_density_of_determined_columns_is_the_determinants():
    """Giving the determined column adds nothing: log p(edu, years) = log p(edu); giving it
    alone sums over the determinant's levels with that image."""
    df = table()
    m = fg.ARF(n_trees=10, random_state=0).fit(df)
    rows = df.head(6)
    both = m.log_prob(rows[["edu", "years", "age"]])
    one = m.log_prob(rows[["edu", "age"]])
    np.testing.assert_allclose(both, one, rtol=1e-12)
    g = m.log_prob(rows[["group"]])
    direct = np.log([sum(np.exp(m.log_prob(pd.DataFrame({"edu": [e]})))[0]
                         for e in LEVELS if GROUP[e] == grp) for grp in rows["group"]])
    np.testing.assert_allclose(g, direct, rtol=1e-9)


def test_normalised_with_rules_on_a_discrete_table():
    rng = np.random.default_rng(0)
    a = rng.choice(["x", "y", "z"], 200)
    df = pd.DataFrame({"a": a, "b": pd.Series(a).map({"x": "p", "y": "p", "z": "q"}),
                       "c": rng.choice(["u", "v"], 200)})
    for model in (fg.ARF(n_trees=5, random_state=0), fg.GFBoost(n_trees=5, random_state=0)):
        model.fit(df)
        grid = pd.DataFrame(list(itertools.product("xyz", "pq", "uv")), columns=list("abc"))
        total = np.exp(model.log_prob(grid)).sum()
        assert total == pytest.approx(1.0, abs=1e-9)


def test_predict_through_the_mapping():
    df = table()
    m = fg.ARF(n_trees=10, random_state=0).fit(df)
    x = df.head(5)
    p = m.predict_proba(x, target="years")
    np.testing.assert_allclose(p.to_numpy().sum(axis=1), 1.0)
    assert (p.idxmax(axis=1).to_numpy() == x["years"].to_numpy()).all()
    pg = m.predict_proba(x.drop(columns=["edu"]), target="edu")
    assert all(GROUP[e] == g for e, g in zip(pg.idxmax(axis=1), x["group"]))
    lev = np.asarray(pg.columns)
    assert all(pg.loc[i, lev[[GROUP[e] != g for e in lev]]].sum() == 0
               for i, g in zip(x.index, x["group"]))


def test_rules_survive_save_and_load(tmp_path):
    df = table()
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    back = fg.ARF.load(m.save(tmp_path / "m.forestgen"))
    assert back.schema_.rules == m.schema_.rules
    assert not broken(back.sample(200, random_state=0)).any()


def test_declared_constraints_kept_and_normalised():
    rng = np.random.default_rng(1)
    low = rng.uniform(0, 10, 300).round(2)
    df = pd.DataFrame({"low": low, "high": (low + rng.gamma(1.0, 1.0, 300)).round(2),
                       "k": rng.choice(["a", "b"], 300), "h": rng.choice(["p", "q", "r"], 300)})
    df = df[~((df.k == "a") & (df.h == "r"))].reset_index(drop=True)
    meta = {"constraints": [
        {"constraint_class": "Inequality",
         "constraint_parameters": {"low_column_name": "low", "high_column_name": "high"}}]}
    m = fg.ARF(n_trees=10, random_state=0).fit(df, kinds=meta)
    s = m.sample(500, random_state=0)
    assert len(s) == 500 and (s["low"] <= s["high"]).all()
    assert np.isneginf(m.log_prob(pd.DataFrame({"low": [5.0], "high": [4.0], "k": ["a"],
                                                "h": ["p"]}))).all()
    assert m.rules_log_z_ <= 0.0
    fc = {"constraints": [{"constraint_class": "FixedCombinations",
                           "constraint_parameters": {"column_names": ["k", "h"]}}]}
    m2 = fg.ARF(n_trees=10, random_state=0).fit(df[["k", "h"]], kinds=fc)
    assert not ((m2.sample(300, random_state=0).k == "a")
                & (m2.sample(300, random_state=0).h == "r")).any()
    grid = pd.DataFrame(list(itertools.product("ab", "pqr")), columns=["k", "h"])
    assert np.exp(m2.log_prob(grid)).sum() == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError, match="breaks the declared constraint"):
        fg.ARF(n_trees=2).fit(df.assign(high=df["low"] - 1), kinds=meta)


def test_rule_violation_metric():
    df = table()
    syn = df.copy()
    syn.loc[:9, "years"] = 99
    rv = fm.rule_violations(df, syn)
    assert rv.rate == pytest.approx(10 / len(df))
    assert set(rv.table["rule"]) == {"edu -> years", "edu -> group"}
    assert fm.rule_violations(df, df.astype(str)).rate == 0.0
    rep = fm.report(df, syn, metrics=["rules"])
    assert rep.table.query("metric == 'rule_violation_rate'")["value"].iloc[0] == rv.rate
    assert "rules broken by 3.3% of rows (2 rules)" in rep.summary()


# --------------------------------------------------------------------------- nested missingness


def missing_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """``stage`` and ``days`` missing in the same rows (not progressed), ``dose`` missing there
    and in some other rows, ``lab`` missing at random: a follow-up is recorded only when its
    question was asked."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    progressed = rng.random(n) < 0.3 + 0.3 * (x > 0)
    stage = np.where(progressed, rng.choice(["I", "II", "III"], n), None)
    days = np.where(progressed, np.round(rng.gamma(3, 200, n)), np.nan)
    dose = np.where(progressed & (rng.random(n) < 0.6), np.round(rng.normal(5, 1, n), 1),
                    np.nan)
    lab = np.where(rng.random(n) < 0.2, np.nan, np.round(rng.normal(size=n) + x, 2))
    arm = np.where(x + rng.normal(size=n) > 0, "a", "b")
    return pd.DataFrame({"x": x, "arm": arm, "stage": stage, "days": days, "dose": dose,
                         "lab": lab})


def test_missing_parents_finds_nesting_but_not_chance():
    from forestgen.data.rules import missing_parents

    df = missing_table()
    m = df[["stage", "days", "dose", "lab"]].isna().to_numpy()
    # days and stage: same rows (the first is the parent); stage missing only where dose is
    assert missing_parents(m).tolist() == [2, 0, -1, -1]
    # a column missing in 3 rows that all happen to fall where another (90% missing) is: chance
    rng = np.random.default_rng(1)
    big = rng.random(1000) < 0.9
    small = np.zeros(1000, bool)
    small[np.flatnonzero(big)[:3]] = True
    assert missing_parents(np.c_[big, small]).tolist() == [-1, -1]
    # ... but 100 such rows (0.9 ** 100 < 1e-3) are a rule; a column missing everywhere is
    # nobody's parent
    small[np.flatnonzero(big)[:100]] = True
    assert missing_parents(np.c_[big, small]).tolist() == [-1, 0]
    assert missing_parents(np.c_[np.ones(1000, bool), small]).tolist() == [-1, -1]


@pytest.mark.parametrize("model", [fg.ARF(n_trees=10, random_state=0, marginal_weight=0),
                                   fg.GeF(n_trees=5, random_state=0, marginal_weight=0),
                                   fg.Chain(random_state=0, n_jobs=1)],
                         ids=lambda m: type(m).__name__)
def test_samples_keep_nested_missingness_at_the_training_rates(model, tmp_path):
    df = missing_table()
    fit = model.fit(df, target="arm") if isinstance(model, fg.GeF) else model.fit(df)
    s = fit.sample(6000, random_state=1)
    na = s.isna()
    assert (na.stage == na.days).all()
    assert not (na.stage & ~na.dose).any()
    real = df.isna().mean()
    for c in ["stage", "days", "dose", "lab"]:  # each column's missing share as in training
        se = np.sqrt(real[c] * (1 - real[c]) / len(s))
        assert abs(na[c].mean() - real[c]) < 4 * se + 0.02, c
    # lab stays independent of the nested group given the leaf: not forced into it
    assert 0 < (na.lab & ~na.days).mean() and 0 < (~na.lab & na.days).mean()
    assert fm.rule_violations(df, s).rate == 0.0
    # the nesting survives a model file
    back = type(fit).load(fit.save(tmp_path / "m.forestgen"))
    np.testing.assert_array_equal(back.missing_parent_, fit.missing_parent_)
    pd.testing.assert_frame_equal(back.sample(500, random_state=2), fit.sample(500, random_state=2))


def test_rule_violation_metric_counts_broken_missingness():
    df = missing_table()
    syn = df.copy()
    syn.loc[:9, "days"] = np.where(syn.loc[:9, "days"].isna(), 1.0, np.nan)  # 10 rows broken
    rv = fm.rule_violations(df, syn)
    rules = dict(zip(rv.table.rule, rv.table.violations))
    assert rules == {"stage missing => dose missing": 0, "days missing <=> stage missing": 10}
    assert rv.rate == pytest.approx(10 / len(df))



def test_a_continuous_column_determined_by_a_category_is_kept():
    """A price per product (60 products, 60 distinct prices: a continuous column) is a
    mapping too; it was missed while continuous values above 1 counted as missing codes."""
    rng = np.random.default_rng(0)
    cat = rng.choice([f"p{i}" for i in range(60)], 400)
    prices = {f"p{i}": round(1 + 3.7 * i + rng.random(), 2) for i in range(60)}
    df = pd.DataFrame({"cat": cat, "price": pd.Series(cat).map(prices), "x": rng.normal(size=400)})
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert not m.schema_.columns[1].is_discrete
    assert names(m, m.schema_.rules["mappings"]) == {("cat", "price")}
    s = m.sample(500, random_state=0)
    assert (s["price"] == s["cat"].map(prices)).all()
    assert np.isneginf(m.log_prob(df.head(3).assign(price=0.5))).all()
