"""The torch path runs through each leaf model's hook, for every built-in learner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from forestgen.learners import ARF, DEF, RFDE, GeF
from forestgen.leaves.base import LeafModel


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 300
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=n), "k": rng.integers(0, 4, n),
                         "c": np.where(x + 0.3 * rng.normal(size=n) > 0, "a", "b")})


LEARNERS = {
    "arf": lambda t: ARF(n_trees=3, random_state=0, n_jobs=1).fit(t),
    "gef": lambda t: GeF(n_trees=3, random_state=0, n_jobs=1).fit(t, target="c"),
    "rfde": lambda t: RFDE(n_trees=3, depth=4, random_state=0, n_jobs=1).fit(t),
    "def": lambda t: DEF(n_trees=3, max_leaves=16, random_state=0, n_jobs=1).fit(t),
}


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_torch_log_prob_matches_numpy_with_gradients(name, table):
    m = LEARNERS[name](table)
    dist = m.to_torch()
    assert dist.torch_path
    Z = m.encoder_.transform(table)
    Z[::7, 0] = np.nan  # partial rows are marginalised on the torch path too
    x = torch.tensor(Z, dtype=torch.float64, requires_grad=True)
    lp = dist.log_prob(x)
    np.testing.assert_allclose(lp.detach().numpy(), m.log_prob_encoded(Z), rtol=1e-10,
                               atol=1e-10)
    lp[torch.isfinite(lp)].sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    numeric = [j for j, c in enumerate(m.schema_.columns) if not c.is_discrete]
    piecewise = all(_piecewise(m.leaf_models_[j]) for j in numeric)
    if piecewise:  # uniform-in-cell leaves: exactly zero gradient
        assert (g == 0).all()
    else:
        assert np.abs(g[:, numeric]).sum() > 0


def _piecewise(lm) -> bool:
    """A leaf law constant on intervals: uniform cells, a histogram (the back-off leaf of
    ``marginal_weight``), or stacked parts that all are."""
    if type(lm).__name__ == "StackedLeaf":
        return all(_piecewise(p) for p in lm.parts)
    return type(lm).__name__ in ("CellUniformLeaf", "UniformLeaf", "MarginalCellLeaf")


class _NoHook(LeafModel):
    pass


def test_leaf_without_hook_is_reported():
    assert not _NoHook().has_torch
