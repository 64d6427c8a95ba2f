"""NRGBoost keeps nested missingness exactly (issue 37 item 3): a column missing only where
another is (``forestgen.data.rules.missing_parents``) is blank in samples only where its parent
is, at its training rate there, and the density gives zero to rows that break the nesting while
still summing to one."""

from __future__ import annotations

import copy
import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm
from forestgen import NRGBoost

FAST = dict(pool_size=4000, gibbs_chains=8, gibbs_burn_in=20, n_normaliser_samples=20_000,
            sample_burn_in=30, sample_thin=3)


def missing_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """As ``tests/data/test_rules.py``: ``stage`` and ``days`` missing in the same rows (not
    progressed), ``dose`` missing there and in some other rows, ``lab`` missing at random."""
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


@pytest.fixture(scope="module")
def nested():
    df = missing_table()
    return df, NRGBoost(n_trees=15, random_state=0, **FAST).fit(df)


def test_samples_keep_nested_missingness_at_the_training_rates(nested, tmp_path):
    df, m = nested
    names = list(df.columns)
    # stage is missing only where dose is (a share of dose's rows), days exactly where stage is
    assert m.nest_parent_.tolist() == [-1, -1, names.index("dose"), names.index("stage"), -1,
                                       -1]
    real = df.isna().mean()
    assert m.nest_rate_[2] == pytest.approx(real.stage / real.dose) and m.nest_rate_[3] == 1.0
    assert not m.grid_.has_missing[2:4].any()  # nested columns have no missing state
    s = m.sample(6000, random_state=1)
    na = s.isna()
    assert (na.stage == na.days).all()
    assert not (na.stage & ~na.dose).any()
    for c in ["stage", "days", "dose", "lab"]:
        se = np.sqrt(real[c] * (1 - real[c]) / len(s))
        assert abs(na[c].mean() - real[c]) < 4 * se + 0.02, c
    # given dose missing, stage is missing at its training share of dose's missing rows
    share = na.stage[na.dose].mean()
    assert abs(share - m.nest_rate_[2]) < 4 * np.sqrt(share * (1 - share) / na.dose.sum())
    assert 0 < (na.lab & ~na.days).mean() and 0 < (~na.lab & na.days).mean()
    assert fm.rule_violations(df, s).rate == 0.0
    # both protocols and the model file keep it
    q = m.sample(2000, random_state=2, chains=200, burn_in=10, thin=1, start="q0").isna()
    assert (q.stage == q.days).all() and not (q.stage & ~q.dose).any()
    back = NRGBoost.load(m.save(tmp_path / "m.forestgen"))
    np.testing.assert_array_equal(back.nest_parent_, m.nest_parent_)
    np.testing.assert_array_equal(back.nest_rate_, m.nest_rate_)
    pd.testing.assert_frame_equal(back.sample(500, random_state=3), m.sample(500, random_state=3))


def test_rows_breaking_the_nesting_have_density_zero_and_evidence_keeps_it(nested):
    df, m = nested
    lp = m.log_prob(df)
    assert np.isfinite(lp).all()
    bad = df.head(40).copy()
    bad["days"] = np.where(bad.days.isna(), 100.0, np.nan)  # days present iff stage missing
    assert np.all(m.log_prob(bad) == -np.inf)
    lone = df[df.stage.notna()].head(20).copy()
    lone["stage"], lone["days"] = None, np.nan
    lone["dose"] = 5.0  # stage missing where dose is not
    assert np.all(m.log_prob(lone) == -np.inf)
    # evidence on days: stage (missing in the same rows) is present in every draw
    s = m.sample(300, random_state=4, conditions={"days": 400.0})
    assert s.stage.notna().all() and (s.days == 400.0).all()
    with pytest.raises(NotImplementedError, match="marginalised"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the absent column's InputWarning
        m.log_prob(df.drop(columns=["dose"]).head(5))
    # expect under evidence: days' mean over its draws where present (blanked with stage)
    e = m.expect(["days", "stage"], conditions={"arm": "a"}, n_draws=400, random_state=5)
    assert np.isfinite(float(e["days"])) and e["stage"] in ("I", "II", "III")


def test_density_with_nesting_sums_to_one_over_every_missing_pattern():
    rng = np.random.default_rng(0)
    n = 800
    a = rng.choice(["u", "v", "w"], n)
    asked = rng.random(n) < np.where(a == "u", 0.8, 0.4)
    p = np.where(asked, rng.choice(["x", "y"], n), None)
    t = np.where(asked, rng.choice(["r", "s"], n), None)  # missing exactly where p is
    k = np.where(asked | (rng.random(n) < 0.5), rng.choice(["l", "m"], n), None)  # nested in p
    df = pd.DataFrame({"a": a, "p": p, "k": k, "t": t})
    m = NRGBoost(n_trees=6, max_leaves=8, random_state=0, **FAST).fit(df)
    assert m.nest_parent_.tolist() == [-1, -1, 1, 1]
    g = m.grid_
    grid_cells = np.array(list(itertools.product(*[range(int(c)) for c in g.n_codes])),
                          np.int32)
    m.log_z_ = float(np.logaddexp.reduce(m.energy_.energy(grid_cells)))  # exact
    outcomes = pd.DataFrame(list(itertools.product(["u", "v", "w"], ["x", "y", None],
                                                   ["l", "m", None], ["r", "s", None])),
                            columns=["a", "p", "k", "t"])
    lp = m.log_prob(outcomes)
    assert np.exp(lp).sum() == pytest.approx(1.0, abs=1e-9)
    broken = (outcomes.k.isna() & outcomes.p.notna()) | (outcomes.t.isna() != outcomes.p.isna())
    assert np.all(lp[broken.to_numpy()] == -np.inf) and np.isfinite(lp[~broken.to_numpy()]).all()
    # the samples follow that density: pattern frequencies of the missing states
    s = m.sample(4000, random_state=1).isna()
    pat = outcomes.isna()
    for cols in (["p"], ["p", "k"]):
        want = pd.Series(np.exp(lp)).groupby([pat[c] for c in cols]).sum()
        got = s.groupby(cols).size() / len(s)
        for key, w in want.items():
            assert abs(got.get(key, 0.0) - w) < 0.03, (cols, key)



def test_an_unseen_level_of_a_nested_column_is_a_value_not_its_missing_state(nested):
    """An unseen level of a nested column is coded like its NaN on the grid; it must be scored
    as a present value outside the domain (the ``density_floor``), not as a missing entry whose
    parent is present, to which the nesting gives zero density (adult's held-out
    ``occupation`` 'Armed-Forces' scored ``-inf`` this way while every other learner scored
    it finite)."""
    df, m = nested
    row = df[df.stage.notna() & df.dose.notna()].head(1).copy()
    seen = m.log_prob(row)[0]
    row.loc[:, "stage"] = "IV"  # a level no training row has
    lp = m.log_prob(row)[0]
    assert np.isfinite(lp) and lp < seen
    # the same row with stage missing while its parent dose is present breaks the nesting
    blank = row.copy()
    blank.loc[:, "stage"] = None
    blank.loc[:, "days"] = np.nan
    assert m.log_prob(blank)[0] == -np.inf
    exact = copy.deepcopy(m).set_params(density_floor=None)
    assert exact.log_prob(row)[0] == -np.inf  # zero density without the floor
