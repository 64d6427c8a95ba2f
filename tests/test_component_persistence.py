"""Components in a learner's parameters save as registry name + parameters and reload
identically; an unregistered component is an error before anything is written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numba import njit

from forestgen import registry
from forestgen.base import GenerativeForest
from forestgen.learners import ARF, GeF
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.splitters import ImpuritySplitter


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 200
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=n), "c": np.where(x > 0, "a", "b")})


@njit(cache=True)
def gini_twin(left, right):
    p = left + right
    W = p.sum()
    return (W - (p * p).sum() / W) - (left.sum() - (left * left).sum() / left.sum()) - (
        right.sum() - (right * right).sum() / right.sum())


@njit(cache=True)
def unregistered_gain(left, right):
    return left[0] - right[0]


class _Unregistered(TruncNormalLeaf):
    pass


def test_leaf_parameters_survive_save_load(table, tmp_path):
    m = ARF(n_trees=3, random_state=0, n_jobs=1,
            numeric_leaf=TruncNormalLeaf(epsilon=0.5, finite_bounds="global")).fit(table)
    again = GenerativeForest.load(m.save(tmp_path / "m.fgm"))
    assert isinstance(again.numeric_leaf, TruncNormalLeaf)
    assert again.numeric_leaf.get_params() == {"finite_bounds": "global", "epsilon": 0.5,
                                               "truncate": True}
    assert again.leaf_models_[0].epsilon == 0.5
    np.testing.assert_array_equal(again.log_prob(table), m.log_prob(table))
    # refitting the reloaded parameters gives the same model
    np.testing.assert_array_equal(type(again)(**again.get_params()).fit(table).log_prob(table),
                                  m.log_prob(table))


def test_splitter_and_criterion_survive_save_load(table, tmp_path):
    m = GeF(n_trees=3, random_state=0, n_jobs=1,
            splitter=ImpuritySplitter(criterion="test_gini_twin", min_gain=1e-9)
            ).fit(table, target="c")
    again = GenerativeForest.load(m.save(tmp_path / "g.fgm"))
    assert again.splitter.get_params() == {"criterion": "test_gini_twin", "min_gain": 1e-9}
    m2 = ARF(n_trees=2, max_iters=0, random_state=0, n_jobs=1, splitter=gini_twin).fit(table)
    again2 = GenerativeForest.load(m2.save(tmp_path / "a.fgm"))
    assert again2.splitter is gini_twin


def test_unregistered_components_fail_before_writing(table, tmp_path):
    path = tmp_path / "keep.fgm"
    path.write_bytes(b"previous contents")
    m = ARF(n_trees=2, max_iters=0, random_state=0, n_jobs=1,
            numeric_leaf=_Unregistered()).fit(table)
    with pytest.raises(ValueError, match="_Unregistered is not registered"):
        m.save(path)
    m2 = ARF(n_trees=2, max_iters=0, random_state=0, n_jobs=1,
             splitter=unregistered_gain).fit(table)
    with pytest.raises(ValueError, match="criterion unregistered_gain is not registered"):
        m2.save(path)
    assert path.read_bytes() == b"previous contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.fgm"]


@pytest.fixture(scope="module", autouse=True)
def _test_doubles():
    """This module's test doubles, registered while its tests run (and removed after them:
    later modules see the registry as the package leaves it)."""
    with registry.registered(
            ("criterion", "test_gini_twin", gini_twin),
    ):
        yield
