"""FORGE's fast draws are the plain draws, bit for bit: the guide-table leaf draw equals
``searchsorted``, ``sample_uniform`` equals ``sample`` for the same generator, and drawing the
rows in leaf order (:meth:`AncestralSampler.draw`) equals drawing each column in row order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF
from forestgen.data.support import rows_to_support
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.sampling.ancestral import (
    AncestralSampler,
    _guide_table,
    draw_leaves,
    inverse_cdf,
    leaf_order,
    leaf_table,
)
from forestgen.sampling.support import draw_column


@pytest.mark.parametrize("L", [1, 2, 7, 1024, 1025, 5000])
def test_inverse_cdf_is_searchsorted(L):
    rng = np.random.default_rng(L)
    lw = 3 * rng.standard_normal(L)
    lw[rng.random(L) < 0.3] = -np.inf  # zero-weight leaves: flat stretches of the CDF
    lw[0] = 0.0
    w = np.exp(lw - lw.max())
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    u = rng.random(20_000)
    u[:4] = [0.0, cdf[0], cdf[min(1, L - 1)], np.nextafter(1.0, 0.0)]  # ties and the ends
    ref = np.minimum(np.searchsorted(cdf, u, side="right"), L - 1)
    assert np.array_equal(inverse_cdf(cdf, u), ref)
    # the leaves drawn follow their weights
    leaf = draw_leaves(lw, 200_000, np.random.default_rng(1))
    freq = np.bincount(leaf, minlength=L) / len(leaf)
    assert np.abs(freq - w / w.sum()).max() < 0.01
    assert (freq[w == 0] == 0).all()


@pytest.mark.parametrize("L", [0, 1, 2, 7, 1024, 1025, 70_000])
def test_leaf_table_is_the_normalised_cumsum_and_its_guide(L):
    rng = np.random.default_rng(L)
    lw = 3 * rng.standard_normal(L)
    lw[rng.random(L) < 0.3] = -np.inf
    if L:
        lw[-1] = -np.inf  # a flat end: the last leaves reach 1 together
        lw[0] = 0.0
        cdf, guide = leaf_table(lw)
        w = np.exp(lw - lw.max())
        ref = np.cumsum(w)
        assert np.array_equal(cdf, ref / ref[-1])  # the same sums, bit for bit
        G = len(guide)
        assert G >= L and G & (G - 1) == 0
        assert np.array_equal(guide, np.searchsorted(cdf, np.arange(G) / G, side="right"))
    # a CDF with entries on the guide's grid (k / G exactly), ties, and one below its end
    cdf = np.array([0.0, 0.25, 0.25, 0.5, 0.75, 0.9, 1.0])
    assert np.array_equal(_guide_table(cdf), np.searchsorted(cdf, np.arange(8) / 8, "right"))
    short = np.array([0.125, 0.5])  # never reaches k / G = 0.5: those entries get len(cdf)
    assert np.array_equal(_guide_table(short), [0, 2])


def test_leaf_order_is_a_stable_sort():
    rng = np.random.default_rng(0)
    for top in (3, 50, 10**7):  # by counting, and (ids far above the rows) by argsort
        leaf = rng.integers(0, top, 3000)
        assert np.array_equal(leaf_order(leaf), np.argsort(leaf, kind="stable"))
    assert leaf_order(np.zeros(0, np.int64)).shape == (0,)


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    n = 600
    z = rng.standard_normal(n)
    df = pd.DataFrame({"x": z, "y": np.exp(z + 0.3 * rng.standard_normal(n)),
                       "g": np.array(list("abcd"))[(z > 0) + 2 * (rng.random(n) < 0.3)],
                       "k": rng.integers(0, 3, n).astype(str)})
    return ARF(n_trees=5, random_state=0).fit(df)


def test_sample_uniform_equals_sample(model):
    leaf = np.random.default_rng(2).integers(0, len(model.leaf_log_weight_), 5000)
    for lm in model.leaf_models_:
        assert lm.has_uniform_sampler
        a = lm.sample(leaf, np.random.default_rng(3))
        b = lm.sample_uniform(leaf, np.random.default_rng(3).random(len(leaf)))
        assert np.array_equal(a, b)


def test_draw_in_leaf_order_equals_row_order(model):
    sampler = model.component("sampler")
    leaf = draw_leaves(model.leaf_log_weight_, 4000, np.random.default_rng(4))
    fast = sampler.draw(model, leaf, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    plain = np.column_stack([draw_column(model, j, leaf, rng)
                             for j in range(len(model.leaf_models_))])
    assert np.array_equal(fast, plain)


def test_a_subclass_changing_sample_is_drawn_by_its_sample():
    class Shifted(TruncNormalLeaf):
        def sample(self, leaf, rng, lo=None, hi=None, levels=None):
            return super().sample(leaf, rng, lo, hi, levels) + 1.0

    assert TruncNormalLeaf().has_uniform_sampler
    assert not Shifted().has_uniform_sampler


def test_ancestral_rows_are_in_the_support_already():
    # sample_encoded skips rows_to_support for a sampler declaring in_support: its rows must
    # be mapped already (a grid column rounded, every numeric value in the observed range)
    rng = np.random.default_rng(5)
    n = 800
    z = rng.standard_normal(n)
    df = pd.DataFrame({"r": np.round(z + 0.3 * rng.standard_normal(n), 2),
                       "s": np.round(np.exp(z), 1), "u": rng.random(n) * (z > 0),
                       "g": np.array(list("ab"))[(z > 0).astype(int)]})
    df.loc[::9, "s"] = np.nan
    m = ARF(n_trees=5, random_state=0).fit(df)
    assert m.component("sampler").in_support
    Z = m.sample_encoded(5000, 1, missing=True)
    assert np.isnan(Z[:, 1]).any()
    assert np.array_equal(Z, rows_to_support(Z.copy(), m.schema_), equal_nan=True)
    assert np.array_equal(Z[:, 0], np.round(Z[:, 0], 2), equal_nan=True)

    class Redrawn(AncestralSampler):  # a subclass does not inherit the declaration
        pass

    assert not Redrawn.in_support
