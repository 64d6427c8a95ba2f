"""ARF's ``numeric_prior`` (stop 54, issue 37): each numeric leaf's truncated normal mixed with
the column's marginal histogram restricted to the leaf's cell, weight ``a / (N + a)``
(:class:`~forestgen.leaves.marginal_mix.MarginalMixLeaf`); ``numeric_prior=0`` is FORDE's law,
bit for bit."""

from __future__ import annotations

import warnings

import numba
import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.families.mixture.arf import NUMERIC_PRIORS
from forestgen.leaves import MarginalMixLeaf, PointMassLeaf, TruncNormalLeaf
from forestgen.testing import check_statistics


@pytest.fixture(scope="module")
def diabetes():
    """sklearn's diabetes table in its recorded units: ``bp`` mostly whole numbers, ``s5`` the
    log of whole numbers, ... — values a column repeats, which small leaves' normals miss."""
    sk = pytest.importorskip("sklearn.datasets")
    return sk.load_diabetes(scaled=False, as_frame=True).frame


def _split(df, seed):
    idx = np.random.default_rng(seed).permutation(len(df))
    return df.iloc[idx[:300]], df.iloc[idx[300:]]


def _lp(model, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.log_prob(rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numeric_prior_beats_forde_law_on_held_out_rows(diabetes, seed):
    """Two-row leaves overfit (FORDE's normals of two values); mixing in the column's shape
    in the cell lifts the held-out log-likelihood by several nats per row."""
    train, test = _split(diabetes, seed)
    ll = {a: float(np.mean(_lp(fg.ARF(random_state=seed, marginal_weight=0,
                                      numeric_prior=a).fit(train), test)))
          for a in (0, 0.1, 3.0)}
    assert ll[0.1] > ll[0] + 0.5, ll
    assert ll[3.0] > ll[0.1] + 1.0, ll


def test_numeric_prior_zero_is_forde_law_and_the_leaves_it_builds(diabetes):
    train, test = _split(diabetes, 0)
    plain = fg.ARF(random_state=0, marginal_weight=0, numeric_prior=0).fit(train)
    assert plain.numeric_prior_ == 0
    assert all(isinstance(lm, (TruncNormalLeaf, PointMassLeaf)) or s.is_discrete
               for s, lm in zip(plain.schema_.columns, plain.leaf_models_))
    mixed = fg.ARF(random_state=0, marginal_weight=0, numeric_prior=2.0).fit(train)
    assert mixed.numeric_prior_ == 2.0
    for s, lm in zip(mixed.schema_.columns, mixed.leaf_models_):
        if not s.is_discrete:
            mix = lm.base_ if isinstance(lm, PointMassLeaf) else lm
            assert isinstance(mix, MarginalMixLeaf) and mix.strength == 2.0
            # (1: a leaf without values off the point masses: the histogram alone)
            assert np.all((mix.weight_ >= 0) & (mix.weight_ <= 1))
    # the same forest: only the numeric leaf laws differ
    np.testing.assert_array_equal(plain.forest_.threshold, mixed.forest_.threshold)
    np.testing.assert_array_equal(plain.leaf_log_weight_, mixed.leaf_log_weight_)


def test_oob_choice_is_on_the_grid_and_recorded(diabetes):
    train, _ = _split(diabetes, 1)
    m = fg.ARF(random_state=1, marginal_weight=0, numeric_prior="oob").fit(train)
    assert m.numeric_prior_ in NUMERIC_PRIORS
    none = fg.ARF(random_state=1, marginal_weight=0, numeric_prior="oob",
                  sampling="none", n_trees=3, max_iters=0).fit(train)
    assert none.numeric_prior_ == 0  # no out-of-bag rows: FORDE's law


def test_bad_numeric_prior_names_the_parameter():
    df = pd.DataFrame({"x": np.arange(20.0)})
    for bad in (-1.0, "auto", float("nan")):
        with pytest.raises(ValueError, match="numeric_prior"):
            fg.ARF(numeric_prior=bad).fit(df)


def _mixed(n=1500, seed=2):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    return pd.DataFrame({"x": np.round(50 + 10 * z + rng.normal(0, 4, n)) + 0.5 * (
        rng.random(n) < 0.1), "y": np.exp(0.5 * z + 0.3 * rng.standard_normal(n)),
        "c": np.where(z + rng.normal(0, 0.5, n) > 0, "hi", "lo")})


def test_density_integrates_to_one(mixed_2d):
    m = fg.ARF(n_trees=4, random_state=0, marginal_weight=0, numeric_prior=3.0).fit(mixed_2d)
    x1 = np.linspace(mixed_2d.x1.min() - 4, mixed_2d.x1.max() + 4, 400)
    x2 = np.linspace(mixed_2d.x2.min() - 4, mixed_2d.x2.max() + 4, 400)
    g1, g2 = np.meshgrid(x1, x2, indexing="ij")
    cell = (x1[1] - x1[0]) * (x2[1] - x2[0])
    total = sum(np.exp(_lp(m, pd.DataFrame({"x1": g1.ravel(), "x2": g2.ravel(), "c": lev})))
                .sum() * cell for lev in ("a", "b", "c"))
    assert total == pytest.approx(1.0, abs=0.01)


def test_draws_follow_the_density():
    df = _mixed()
    m = fg.ARF(n_trees=10, random_state=3, marginal_weight=0, numeric_prior=3.0).fit(df)
    results = check_statistics(m, df, n=4000, random_state=0, raise_on_failure=False)
    failed = [r for r in results if not r.passed]
    assert not failed, failed


def test_torch_log_prob_and_draws_equal_numpy(diabetes):
    torch = pytest.importorskip("torch")
    train, _ = _split(diabetes, 0)
    m = fg.ARF(random_state=0, marginal_weight=0, numeric_prior=3.0).fit(train)
    dist = m.to_torch(dtype=torch.float64)
    got = dist.log_prob(dist.encode(train)).numpy()
    np.testing.assert_allclose(got, m.log_prob(train, floor=None), rtol=1e-9, atol=1e-9)


def test_same_bits_at_one_and_two_threads(diabetes):
    train, test = _split(diabetes, 2)
    before = numba.get_num_threads()
    out = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            m = fg.ARF(random_state=4, n_jobs=threads, numeric_prior="oob").fit(train)
            out.append((_lp(m, test), m.sample_encoded(500, random_state=1),
                        m.numeric_prior_, m.marginal_weight_))
    finally:
        numba.set_num_threads(before)
    (la, sa, pa, wa), (lb, sb, pb, wb) = out
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)
    assert pa == pb and wa == wb
