"""The back-off choice's cheap parts (issue 37 item 4): the held-out rows are scored under the
forest alone and the marginals alone in one walk of encoded rows, the same log densities as
the two public queries; a learner fitted on an :class:`~forestgen.base.EncodedTable` is the
learner fitted on the table; the cheap look on a larger table reuses the full fit's encoding
and scores a level its fitting rows never hold as an unseen level."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.base import EncodedTable
from forestgen.families.mixture.backoff import (
    GUARD_Z,
    WEIGHTS,
    as_unseen,
    choose_weight,
    component_log_probs,
    conditional_log_probs,
    encoded_component_log_probs,
)

LEARNERS = [fg.ARF, fg.RFDE, fg.DEF, fg.GeF]


def _table(n=400, seed=0):
    """A numeric pair, a class, and a level column with its one-to-one code (a mapping rule)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    lev = rng.choice(["lo", "mid", "hi"], n)
    return pd.DataFrame({"x": x, "y": x + 0.3 * rng.normal(size=n),
                         "c": np.where(x > 0, "a", "b"), "lev": lev,
                         "lev_num": pd.Series(lev).map({"lo": 1, "mid": 2, "hi": 3})})


def _fit(cls, df, **kw):
    kw = {"random_state": 0, "n_jobs": 1, "n_trees": 10, **kw}
    if cls is fg.GeF:
        return cls(**kw).fit(df, target="c")
    if cls is fg.RFDE:
        kw.setdefault("depth", 3)
    return cls(**kw).fit(df)


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_one_walk_scores_the_components_as_the_public_queries_do(cls):
    df = _table()
    m = _fit(cls, df, marginal_weight=0.5)
    assert fg.inference.rules.rules_of(m).mappings  # the mapping is detected and applied
    rows = _table(60, seed=1)
    rows.loc[0, "lev_num"] = 3 if rows.loc[0, "lev"] != "hi" else 1  # breaks the mapping
    rows.loc[1:5, "y"] = np.nan  # missing entries: marginalised
    rows.loc[6:9, "lev_num"] = np.nan
    want_f, want_r = component_log_probs(m, rows)
    got_f, got_r = encoded_component_log_probs(m, m.encode_rows(rows))
    assert np.isneginf(want_f[0]) and np.isneginf(got_f[0]) and np.isneginf(got_r[0])
    np.testing.assert_allclose(got_f, want_f, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got_r, want_r, rtol=1e-12, atol=0)
    # a row that gives a determined value but not its determinant: the public query's case
    rows.loc[10, "lev"] = np.nan
    assert encoded_component_log_probs(m, m.encode_rows(rows)) is None


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_a_fit_on_an_encoded_table_is_the_fit_on_the_table(cls):
    df = _table()
    paper = _fit(cls, df, marginal_weight=0)
    enc = _fit(cls, EncodedTable(paper.encoder_, paper.encoder_.transform(df)),
               marginal_weight=0)
    assert enc.encoder_ is paper.encoder_
    assert np.array_equal(enc.log_prob(df), paper.log_prob(df))
    pd.testing.assert_frame_equal(enc.sample(40, random_state=2),
                                  paper.sample(40, random_state=2))


def test_the_look_scores_levels_its_rows_never_hold_as_unseen():
    df = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                       "k": ["a", "b", "a", "c", "b", "a"]})
    enc = fg.data.encoder.TableEncoder().fit(df)
    Z = enc.transform(df)
    fit, val = np.array([0, 1, 2, 4]), np.array([3, 5])  # 'c' and x = 5 only held out
    Zv, outside = as_unseen(enc.schema, Z[fit], Z[val])
    assert np.isnan(Zv[0, 1]) and Zv[1, 1] == Z[5, 1]  # 'c' unseen, 'a' kept
    assert outside.tolist() == [False, True]  # x = 5 lies beyond the fitting rows' range
    assert np.array_equal(Zv[:, 0], Z[val, 0])


@pytest.mark.parametrize("cls", [fg.ARF, fg.DEF], ids=lambda c: c.__name__)
def test_the_rule_scores_the_conditionals_predict_proba_answers(cls):
    """``conditional_log_probs`` at the model's own weight is the sum over the discrete
    columns of ``log predict_proba`` of the row's level (a mapped column excluded)."""
    df = _table()
    m = _fit(cls, df, marginal_weight=0.5)
    rows = _table(40, seed=2)
    got = conditional_log_probs(m, m.encode_rows(rows))[WEIGHTS.index(0.5)]
    want = np.zeros(len(rows))
    for col in ("c", "lev"):  # lev_num is determined by lev: it adds nothing
        p = m.predict_proba(rows, target=col)
        want += np.log(p.to_numpy()[np.arange(len(rows)),
                                    [list(p.columns).index(v) for v in rows[col]]])
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_choose_weight_keeps_the_conditionals_and_needs_a_clear_gain():
    rng = np.random.default_rng(0)
    m = 400
    base = rng.normal(-10, 1, m)
    gains = (0.0, 0.05, 0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.2)  # the last: marginals alone
    lp = np.stack([base + g + rng.normal(0, 0.3, m) * (g != 0) for g in gains])
    # the conditionals: flat up to lambda = 0.2, clearly lower from 0.3 on
    cond = np.stack([np.zeros(m) if w <= 0.2 else -0.5 + rng.normal(0, 0.1, m)
                     for w in (*WEIGHTS, 1.0)])
    w, out = choose_weight(lp, cond)
    assert out["t_marginals"] > GUARD_Z
    assert w == 0.2  # the best weight among those that keep the conditionals
    assert out["t"] > GUARD_Z and out["cond:0.3"] < out["cond:0.2"]
    w, out = choose_weight(lp, None)
    assert w == 0.9  # without discrete columns: the best log-likelihood
    # where the marginals alone do not beat the model alone, the paper's model stands
    lp[-1] = base - 0.2 + rng.normal(0, 0.3, m)
    w, out = choose_weight(lp, None)
    assert w == 0.0 and out["t_marginals"] < -GUARD_Z and out["t"] > GUARD_Z
    # a gain within one standard error keeps the paper's model
    wiggle = 0.05 * np.where(np.arange(m) % 2, 1.0, -1.0)  # mean gain 0.001, SE 0.0025
    small = np.stack([base, *(base + 0.001 * (i + 1) / len(WEIGHTS) + wiggle
                              for i in range(len(WEIGHTS) - 1)),
                      base + 0.5 + rng.normal(0, 0.3, m)])
    w, out = choose_weight(small, None)
    assert w == 0.0 and out["t"] <= GUARD_Z < out["t_marginals"]


def test_gef_backoff_gives_levels_without_rows_probability_zero():
    """A level of the column that no training row holds — declared among the categories, or
    unknown to the column — has probability zero in GeF's forest and in its back-off leaf
    (both smooth over the support only), so ``log_prob(floor=None)`` is ``-inf``, and GeF's
    class query leaves such an entry free (marginalised) with a warning."""
    rng = np.random.default_rng(0)
    n = 120
    ids = [f"r{i}" for i in range(n)]
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "id": pd.Categorical(ids, categories=ids + ["new1", "new2"]),
                       "c": rng.choice(["a", "b"], n)})
    m = fg.GeF(n_trees=10, random_state=0, marginal_weight=0.5).fit(df, target="c")
    back = np.full(2, int(m.forest_.leaf_offsets[-2]))
    for new in (pd.DataFrame({"x": [0.1, -0.3], "id": ["new1", "new2"], "c": ["a", "b"]}),
                pd.DataFrame({"x": [0.1, -0.3], "id": ["zz1", "zz2"], "c": ["a", "b"]})):
        with pytest.warns(Warning, match="not seen at fit"):  # the levels are reported
            Z = m.encode_rows(new)
        f, r = encoded_component_log_probs(m, Z)
        assert np.isneginf(f).all() and np.isneginf(r).all()
        assert np.isneginf(m.leaf_models_[1].log_prob(back, Z[:, 1])).all()
        assert np.isneginf(m.log_prob(new, floor=None)).all()
        with pytest.warns(RuntimeWarning, match="left free"):
            p = m.predict_proba(new)
        np.testing.assert_allclose(p.to_numpy(), m.predict_proba(new.drop(columns="id")))
    # a seen level keeps its mass in the back-off leaf
    seen = m.encode_rows(df.head(2))
    assert np.isfinite(m.leaf_models_[1].log_prob(back, seen[:, 1])).all()
