"""Packed torch routing (used off the CPU) equals the compiled kernel (used on the CPU), in
float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from forestgen.torch.routing import PackedTrees, max_depth, routing_forest


def _awkward_rows(model, Z: np.ndarray) -> np.ndarray:
    """Complete rows plus rows sitting exactly on thresholds, +-inf, unseen / fractional codes."""
    Z = Z[~np.isnan(Z).any(1)][:300].copy()
    f = model.forest_
    rng = np.random.default_rng(0)
    num = np.flatnonzero((np.asarray(f.feature) >= 0) & (np.asarray(f.cat_off) < 0))
    on = Z[:100].copy()
    pick = rng.choice(num, size=len(on))
    on[np.arange(len(on)), f.feature[pick]] = f.threshold[pick]  # x == threshold goes left
    odd = Z[:40].copy()
    k = model.schema_.n_levels
    disc = np.flatnonzero(k > 0)
    cont = np.flatnonzero(k == 0)
    odd[:10, disc[0]] = k[disc[0]] + 3  # unseen level: follows nan_left
    odd[10:20, disc[0]] = 0.5  # not a code
    odd[20:30, cont[0]] = np.inf
    odd[30:40, cont[0]] = -np.inf
    return np.concatenate([Z, on, odd])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_packed_routing_equals_kernel(mixed_model, adult_model, adult_test, mixed_df, dtype):
    for model, frame in ((adult_model, adult_test), (mixed_model, mixed_df)):
        Z = _awkward_rows(model, model.encoder_.transform(frame))
        x = torch.tensor(Z, dtype=dtype)
        # the compiled kernel on the same rows and thresholds as rounded for the dtype
        ref = routing_forest(model.forest_, dtype).apply(x.double().numpy())
        packed = PackedTrees.build(model.forest_, Z.shape[1], torch.device("cpu"), dtype)
        assert packed.depth == max_depth(model.forest_) > 0
        np.testing.assert_array_equal(packed.apply(x).numpy(), ref)
