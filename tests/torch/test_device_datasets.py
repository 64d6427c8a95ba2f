"""SyntheticDataset(device=...): batches drawn with torch ops keep the stream guarantees of the
numpy dataset (worker-count invariant, rank-disjoint, resumable) and its distribution."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from forestgen.torch import SyntheticDataset


def _key(b):
    return b.cpu().numpy().tobytes()


def test_device_stream_guarantees(mixed_model):
    ds = mixed_model.as_dataset(batch_size=16, n_batches=6, seed=3, device="cpu")
    a = list(DataLoader(ds, batch_size=None, num_workers=2))
    b = list(DataLoader(ds, batch_size=None, num_workers=0))
    assert len(a) == 6 and a[0].shape == (16, 5) and a[0].dtype == torch.float32
    assert len({_key(x) for x in a}) == 6
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # any worker count, same stream
    ranks = [list(SyntheticDataset(mixed_model, batch_size=16, n_batches=6, seed=3, rank=r,
                                   world_size=2, device="cpu")) for r in (0, 1)]
    assert not {_key(x) for x in ranks[0]} & {_key(x) for x in ranks[1]}
    assert torch.equal(ranks[0][0], a[0])  # rank 0 of 2 starts like a single rank
    ds2 = mixed_model.as_dataset(batch_size=16, n_batches=6, seed=3, device="cpu")
    ds2.load_state_dict({"seed": 3, "epoch": 0, "index": 4})
    assert all(torch.equal(x, y) for x, y in zip(list(ds2), a[4:]))  # resume mid-stream


def test_device_batches_match_numpy_distribution(mixed_model):
    dev = list(mixed_model.as_dataset(batch_size=2000, n_batches=2, seed=0, device="cpu"))
    cpu = list(mixed_model.as_dataset(batch_size=2000, n_batches=2, seed=0))
    d, c = torch.cat(dev).numpy(), torch.cat(cpu).numpy()
    assert abs(d[:, 0].mean() - c[:, 0].mean()) < 0.1  # x1
    tv = 0.5 * np.abs(np.bincount(d[:, 2].astype(int), minlength=4)
                      - np.bincount(c[:, 2].astype(int), minlength=4)).sum() / len(d)
    assert tv < 0.05  # cat


def test_device_class_conditional(mixed_model):
    ds = SyntheticDataset(mixed_model, batch_size=4000, n_batches=1, seed=1, target="cat",
                          class_probs="balanced", device="cpu")
    out = next(iter(ds))
    y = out["y"]
    assert y.dtype == torch.long and out["x"].shape == (4000, 4)
    np.testing.assert_allclose(np.bincount(y.numpy(), minlength=4) / 4000, 0.25, atol=0.03)
    # x1 given the class follows the numpy class-conditional sampler
    ref = next(iter(SyntheticDataset(mixed_model, batch_size=4000, n_batches=1, seed=1,
                                     target="cat", class_probs="balanced")))
    for c in range(4):
        a, b = out["x"][y == c, 0].numpy(), ref["x"][ref["y"] == c, 0].numpy()
        assert abs(np.median(a) - np.median(b)) < 0.15


def test_device_dataset_errors(mixed_model):
    with pytest.raises(NotImplementedError, match="encoding"):
        SyntheticDataset(mixed_model, encoding="onehot", device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_batches(mixed_model):
    ds = mixed_model.as_dataset(batch_size=64, n_batches=3, seed=0, device="cuda")
    a, b = list(ds), list(ds)
    assert a[0].device.type == "cuda" and all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(DataLoader(ds, batch_size=None, num_workers=1))
