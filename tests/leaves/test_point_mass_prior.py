"""Dirichlet prior on point-mass shares (issue 11: DEF leaves of one row gave an atom, or the
values off it, zero mass)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen.leaves.base import ColumnCell
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.leaves.uniform_levels import UniformLevelsLeaf


def test_point_mass_shares_shrink_toward_the_overall_share_inside_the_cell():
    # leaf 0: one row off the atom; leaf 1: three rows at the atom 0; leaf 2's cell excludes 0
    x = np.array([2.0, 0.0, 0.0, 0.0, 5.0])
    leaf = np.array([0, 1, 1, 1, 2])
    cell = ColumnCell(lower=np.array([-1.0, -1.0, 1.0]), upper=np.array([3.0, 3.0, 9.0]),
                      allowed=None, data_min=0.0, data_max=5.0)
    s = 0.5
    m = PointMassLeaf(base="cell_uniform", atoms=[0.0], prior=s).fit(x, leaf, cell)
    g = 3 / 5  # overall share at the atom; the rest (2/5) goes to the continuous part
    np.testing.assert_allclose(m.mass_[:, 0], [(0 + s * g) / (1 + s), (3 + s * g) / (3 + s), 0.0])
    assert np.all(np.isfinite(m.log_prob(np.array([0, 1]), np.array([0.0, 2.5]))))
    # prior 0: the leaf's own shares (0 and 1), so the atom / the rest get zero mass
    m0 = PointMassLeaf(base="cell_uniform", atoms=[0.0]).fit(x, leaf, cell)
    np.testing.assert_allclose(m0.mass_[:, 0], [0.0, 1.0, 0.0])
    assert np.isneginf(m0.log_prob(np.array([0]), np.array([0.0])))[0]


@pytest.mark.parametrize("prior", [0.3, 1.0, 5.0])
def test_uniform_levels_prior_keeps_each_leaf_a_pmf(prior):
    rng = np.random.default_rng(0)
    k, L = 8, 6
    codes = np.where(rng.uniform(size=40) < 0.5, 2, rng.integers(0, k, 40)).astype(float)
    leaf = rng.integers(0, L, 40)
    allowed = rng.uniform(size=(L, k)) < 0.7
    allowed[np.arange(L), codes[:L].astype(int)] = True
    allowed[leaf, codes.astype(int)] = True  # every row's level is allowed in its leaf
    cell = ColumnCell(lower=np.zeros(L), upper=np.zeros(L), allowed=allowed, data_min=0.0,
                      data_max=k - 1.0, n_levels=k)
    lm = UniformLevelsLeaf(atoms=[2], prior=prior).fit(codes, leaf, cell)
    P = lm.probs(np.arange(L))
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert np.all(P[~allowed] == 0)
    assert np.all(P[allowed] > 0)  # no allowed level has zero mass, whatever the leaf holds
    n = np.bincount(leaf, minlength=L)
    at = np.bincount(leaf[codes == 2], minlength=L)
    g = np.mean(codes == 2)
    for i in range(L):  # closed form at the atom where the cell also allows other levels
        if allowed[i, 2] and allowed[i].sum() > 1:
            assert P[i, 2] == pytest.approx((at[i] + prior * g) / (n[i] + prior))


def test_a_leaf_given_as_base_is_copied_for_every_column():
    # one PointMassLeaf(base=<instance>) given for all numeric columns: each column fits its
    # own copy of the base, so the second column's fit does not overwrite the first's
    from forestgen import ARF
    from forestgen.leaves import TruncNormalLeaf

    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"a": np.where(rng.uniform(size=n) < 0.3, 0.0, rng.normal(5, 1, n)),
                       "b": np.where(rng.uniform(size=n) < 0.3, 0.0, rng.normal(-50, 10, n))})
    leaf = PointMassLeaf(base=TruncNormalLeaf(), atoms=[0.0])
    m = ARF(n_trees=5, numeric_leaf=leaf, marginal_weight=0, random_state=0).fit(df)
    a, b = m.leaf_models_
    assert a.base_ is not b.base_ and a.base_ is not leaf.base
    # each column's law is its own: draws off the atom keep their column's location
    s = m.sample(4000, random_state=1)
    off_a, off_b = s["a"][s["a"] != 0], s["b"][s["b"] != 0]
    assert abs(off_a.mean() - 5) < 0.3 and abs(off_b.mean() + 50) < 3
