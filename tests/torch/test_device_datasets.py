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
    a = list(DataLoader(ds.batches(), batch_size=None, num_workers=2))
    b = list(DataLoader(ds.batches(), batch_size=None, num_workers=0))
    assert len(a) == 6 and a[0].shape == (16, 5) and a[0].dtype == torch.float32
    assert len({_key(x) for x in a}) == 6
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # any worker count, same stream
    ranks = [list(SyntheticDataset(mixed_model, batch_size=16, n_batches=6, seed=3, rank=r,
                                   world_size=2, device="cpu").batches()) for r in (0, 1)]
    assert not {_key(x) for x in ranks[0]} & {_key(x) for x in ranks[1]}
    assert torch.equal(ranks[0][0], a[0])  # rank 0 of 2 starts like a single rank
    ds2 = mixed_model.as_dataset(batch_size=16, n_batches=6, seed=3, device="cpu")
    ds2.load_state_dict({"seed": 3, "epoch": 0, "index": 4})
    assert all(torch.equal(x, y) for x, y in zip(list(ds2.batches()), a[4:]))  # resume
    rows = torch.cat(list(DataLoader(ds, batch_size=10, num_workers=2)))  # rows, any grouping
    assert torch.equal(rows, torch.cat(b))


def test_device_batches_match_numpy_distribution(mixed_model):
    dev = list(mixed_model.as_dataset(batch_size=2000, n_batches=2, seed=0,
                                      device="cpu").batches())
    cpu = list(mixed_model.as_dataset(batch_size=2000, n_batches=2, seed=0).batches())
    d, c = torch.cat(dev).numpy(), torch.cat(cpu).numpy()
    assert abs(d[:, 0].mean() - c[:, 0].mean()) < 0.1  # x1
    tv = 0.5 * np.abs(np.bincount(d[:, 2].astype(int), minlength=4)
                      - np.bincount(c[:, 2].astype(int), minlength=4)).sum() / len(d)
    assert tv < 0.05  # cat


def test_device_class_conditional(mixed_model):
    ds = SyntheticDataset(mixed_model, batch_size=4000, n_batches=1, seed=1, target="cat",
                          class_probs="balanced", device="cpu")
    out = ds.batch(0)
    y = out["y"]
    assert y.dtype == torch.long and out["x"].shape == (4000, 4)
    np.testing.assert_allclose(np.bincount(y.numpy(), minlength=4) / 4000, 0.25, atol=0.03)
    # x1 given the class follows the numpy class-conditional sampler
    ref = SyntheticDataset(mixed_model, batch_size=4000, n_batches=1, seed=1, target="cat",
                           class_probs="balanced").batch(0)
    for c in range(4):
        a, b = out["x"][y == c, 0].numpy(), ref["x"][ref["y"] == c, 0].numpy()
        assert abs(np.median(a) - np.median(b)) < 0.15


@pytest.mark.parametrize("encoding", ["onehot", "codes"])
def test_device_batches_with_tensor_encoding(mixed_model, encoding):
    """One-hot / code features built on the device equal the encoder applied to the same
    encoded draws on the numpy path; the class target comes back as long codes."""
    ds = SyntheticDataset(mixed_model, batch_size=500, n_batches=1, seed=2, target="cat",
                          encoding=encoding, device="cpu")
    out = ds.batch(0)
    raw = SyntheticDataset(mixed_model, batch_size=500, n_batches=1, seed=2, device="cpu",
                           dtype=torch.float64).batch(0)
    enc = ds._enc
    np.testing.assert_allclose(out["x"].numpy(), enc.transform_encoded(raw.numpy()).numpy(),
                               rtol=1e-6)
    assert torch.equal(out["y"], raw[:, 2].long())
    assert out["x"].shape == (500, enc.n_features_out_)
    if encoding == "onehot":  # every discrete feature one-hot: one 1 per block
        x = out["x"][:, len(enc.num_cols_):].numpy()
        assert set(np.unique(x)) <= {0.0, 1.0}
        assert (x.sum(1) == len(enc.cat_cols_)).all()


def test_tensor_encoder_same_on_tensors_and_arrays(mixed_model, mixed_df):
    from forestgen.torch import TensorEncoder

    Z = mixed_model.encoder_.transform(mixed_df)
    Z[0, 2] = 7.0  # an unseen code: all zeros in one-hot, the extra code k in codes
    for cat in ("onehot", "codes"):
        te = TensorEncoder(table_encoder=mixed_model.encoder_, categorical=cat,
                           target="flag").fit(mixed_df)
        a, b = te.transform_encoded(Z), te.transform_encoded(torch.as_tensor(Z))
        assert torch.equal(a, b)
        assert torch.isfinite(a).all()
    with pytest.raises(ValueError, match="'flag'"):
        Z[1, 3] = np.nan
        te.target_encoded(torch.as_tensor(Z))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_batches(mixed_model):
    ds = mixed_model.as_dataset(batch_size=64, n_batches=3, seed=0, device="cuda")
    a, b = list(ds.batches()), list(ds.batches())
    assert a[0].device.type == "cuda" and all(torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(next(iter(DataLoader(ds, batch_size=64))), a[0])
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(DataLoader(ds.batches(), batch_size=None, num_workers=1))
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(DataLoader(ds, batch_size=64, num_workers=1))


@pytest.mark.parametrize("device", [None, "cpu"])
def test_class_conditional_is_conditional_sampling(mixed_model, device):
    """One label's batches follow ``sample(conditions={target: label})`` (same leaf posterior,
    same sampler)."""
    from scipy import stats

    ds = SyntheticDataset(mixed_model, batch_size=3000, n_batches=1, seed=4, target="cat",
                          class_probs={"b": 1.0}, device=device)
    out = ds.batch(0)
    assert (out["y"] == 1).all()
    ref = mixed_model.encoder_.transform(
        mixed_model.sample(3000, conditions={"cat": "b"}, random_state=4, missing=False))
    x = out["x"].double().numpy()  # features: x1, x2, flag, level
    for c, j in ((0, 0), (1, 1)):
        assert stats.ks_2samp(x[:, c], ref[:, j]).pvalue > 1e-3
    for c, j, k in ((2, 3, 2), (3, 4, 5)):
        tv = 0.5 * np.abs(np.bincount(x[:, c].astype(int), minlength=k)
                          - np.bincount(ref[:, j].astype(int), minlength=k)).sum() / 3000
        assert tv < 0.05
