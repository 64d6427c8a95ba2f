"""NRGBoost's ``n_trees="auto"``: rounds chosen on held-out rows (issue 37 item 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import NRGBoost
from forestgen.base import GenerativeForest
from forestgen.families.energy.nrgboost import PATIENCE, HeldOutRounds, sized_defaults

FAST = dict(pool_size=4000, gibbs_chains=8, gibbs_burn_in=20, n_normaliser_samples=20_000,
            sample_burn_in=30, sample_thin=3)


def dependent(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)  # c is not a function of x: no detected rule (forestgen.inference.rules)
    return pd.DataFrame({"x": x.round(2), "y": (x + rng.normal(0, 0.3, n)).round(2),
                         "c": np.where(x + rng.normal(0, 0.5, n) > 0, "a", "b")})


def independent(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(size=n).round(2), "y": rng.exponential(size=n).round(2),
                         "c": rng.choice(list("abc"), n)})


@pytest.fixture(scope="module")
def auto():
    return NRGBoost(random_state=0, **FAST).fit(dependent(300))


def test_chosen_rounds_maximise_the_held_out_curve(auto):
    m = auto
    curve = m.rounds_scores_
    best = int(np.argmax(curve))
    assert np.all(np.isfinite(curve))
    assert m.n_trees_ == best > 0  # the trees help this table: the best count is kept
    assert curve[best] - curve[0] > m.rounds_gain_se_ > 0
    cap = sized_defaults(240, 3, "auto", FAST["pool_size"])[0]
    tried = len(curve) - 1
    # stopped by the patience rule (or at the cap): no better score since the best
    assert tried == cap or tried - best >= max(PATIENCE, best)
    assert np.all(curve[best + 1:] < curve[best])
    assert m.get_params()["n_trees"] == "auto"
    assert m.truncated(3).rounds_scores_ is curve


def test_given_rounds_are_used_as_given():
    m = NRGBoost(n_trees=4, random_state=0, **FAST).fit(dependent(120))
    assert m.n_trees_ == 4 and m.rounds_scores_ is None and m.rounds_gain_se_ is None


def test_curve_is_the_truncated_models_held_out_log_likelihood():
    """The curve's value at ``t`` rounds is the mean ``log_prob`` of the held-out rows under the
    model truncated to ``t`` trees, ``log Z`` from the same ``q0`` draws."""
    df = dependent(200, seed=1)
    fit, val = df.iloc[:150], df.iloc[150:]
    model = NRGBoost(n_trees=6, max_leaves=8, random_state=3, **FAST).fit(fit)
    scorer = HeldOutRounds(model.encoder_.transform(val), model.n_normaliser_samples,
                           np.random.default_rng(model.normaliser_seed_))
    scorer.start(model.truncated(0))
    for t in range(1, 7):
        scorer.step(model.truncated(t))
    want = [np.mean(model.truncated(t).log_prob(val)) for t in range(7)]
    np.testing.assert_allclose(scorer.scores, want, rtol=1e-10)
    assert scorer.scores[0] == np.mean(model.truncated(0).log_prob(val))  # q0: log Z = 0


def test_a_table_without_structure_backs_off_to_the_marginals():
    """Three independent columns: no round beats the marginals beyond the held-out noise."""
    for seed in range(3):
        m = NRGBoost(random_state=seed, **FAST).fit(independent(40, seed))
        curve = m.rounds_scores_
        assert m.n_trees_ == 0
        assert curve.max() - curve[0] <= m.rounds_gain_se_
    strong = NRGBoost(random_state=0, **FAST).fit(dependent(40))
    assert strong.n_trees_ > 0  # the same size with structure grows trees


def test_tiny_table_fits_the_marginals():
    df = dependent(8)
    m = NRGBoost(random_state=0, **FAST).fit(df)
    assert m.n_trees_ == 0 and len(m.rounds_scores_) == 0
    assert np.all(np.isfinite(m.log_prob(df)))
    s = m.sample(20, random_state=0)
    assert len(s) == 20 and set(s["c"]) <= {"a", "b"}


def test_same_bits_at_one_and_two_threads():
    import numba

    df = dependent(150, seed=2)
    a = NRGBoost(random_state=5, **FAST).fit(df)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b = NRGBoost(random_state=5, **FAST).fit(df)
    finally:
        numba.set_num_threads(old)
    assert old >= 2 or numba.config.NUMBA_NUM_THREADS < 2
    np.testing.assert_array_equal(a.rounds_scores_, b.rounds_scores_)
    assert a.n_trees_ == b.n_trees_ and a.log_z_ == b.log_z_
    for k, v in a.energy_.trees.to_arrays().items():
        np.testing.assert_array_equal(v, b.energy_.trees.to_arrays()[k])


def test_curve_survives_save_and_load(auto, tmp_path):
    m2 = GenerativeForest.load(auto.save(tmp_path / "m.forestgen"))
    np.testing.assert_array_equal(m2.rounds_scores_, auto.rounds_scores_)
    fixed = NRGBoost(n_trees=2, random_state=0, **FAST).fit(dependent(60))
    assert GenerativeForest.load(fixed.save(tmp_path / "f.forestgen")).rounds_scores_ is None


@pytest.mark.parametrize("bad", ["many", 0, -3, 2.5, True])
def test_bad_rounds_name_the_parameter(bad):
    with pytest.raises(ValueError, match="n_trees"):
        NRGBoost(n_trees=bad).fit(dependent(30))
