"""On-device sampling and conditional distributions: same distribution as the numpy sampler,
exact conditional densities, seeds that reproduce."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.ensemble import HistGradientBoostingClassifier

from forestgen.metrics import c2st
from forestgen.torch.sampling import std_truncnorm

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _compare_columns(model, a: np.ndarray, b: np.ndarray) -> None:
    """Per column: KS test for numeric columns, total variation for discrete ones."""
    for j, spec in enumerate(model.schema_.columns):
        if spec.is_discrete:
            k = spec.n_levels
            pa = np.bincount(a[:, j].astype(int), minlength=k) / len(a)
            pb = np.bincount(b[:, j].astype(int), minlength=k) / len(b)
            assert 0.5 * np.abs(pa - pb).sum() < 0.04, spec.name
        else:
            assert stats.ks_2samp(a[:, j], b[:, j]).pvalue > 1e-3, spec.name


def test_device_samples_match_numpy_sampler(mixed_model):
    dist = mixed_model.to_torch()
    g = torch.Generator().manual_seed(0)
    t = dist.sample((6000,), generator=g).double().numpy()
    z = mixed_model.sample_encoded(6000, random_state=1)
    assert dist.support.check(torch.as_tensor(t)).all()
    _compare_columns(mixed_model, t, z)
    res = c2st(mixed_model.encoder_.inverse_transform(z), dist.decode(torch.as_tensor(t)),
               max_rows=2000, n_folds=3, n_threads=1,
               classifier=HistGradientBoostingClassifier(max_iter=30, random_state=0))
    assert abs(res.auc - 0.5) < 0.05


def test_device_samples_adult_columns(adult_model):
    dist = adult_model.to_torch()
    t = dist.sample((5000,), generator=torch.Generator().manual_seed(3)).double().numpy()
    _compare_columns(adult_model, t, adult_model.sample_encoded(5000, random_state=3))


def test_seeds_reproduce_and_dtype(mixed_model):
    dist = mixed_model.to_torch(dtype=torch.float32)
    a = dist.sample((50,), generator=torch.Generator().manual_seed(5))
    b = dist.sample((50,), generator=torch.Generator().manual_seed(5))
    c = dist.sample((50,), generator=torch.Generator().manual_seed(6))
    assert a.dtype == torch.float32 and a.shape == (50, 5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert dist.sample_device.type == "cpu"


def test_truncnorm_inverse_cdf_tails():
    n = 20000
    u = torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for a, b in ((-1.0, 2.0), (3.0, 5.0), (-9.0, -7.0), (12.0, 13.0), (-41.0, -39.0)):
        z = std_truncnorm(torch.full((n,), a, dtype=torch.float64),
                          torch.full((n,), b, dtype=torch.float64), u)
        assert torch.isfinite(z).all() and (z >= a).all() and (z <= b).all()
        if b < 30:  # scipy's truncated normal as the closed form
            assert abs(z.mean().item() - stats.truncnorm(a, b).mean()) < 0.02


# ---------------------------------------------------------------------------- conditionals
EVIDENCE = [{"cat": "b"}, {"x1": 0.3}, {"cat": "c", "flag": True}, {"x1": (-0.5, 1.0)},
            {"cat": ["a", "b"]}]


@pytest.mark.parametrize("ev", EVIDENCE, ids=[str(e) for e in EVIDENCE])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_conditional_log_prob_equals_numpy(mixed_model, mixed_df, ev, dtype):
    dist = mixed_model.to_torch().condition(ev)
    assert dist.columns == [c for c in mixed_df.columns if c not in ev]
    rows = mixed_df.head(200)
    ref = mixed_model.log_prob(rows, conditions=ev)
    Z = mixed_model.encoder_.transform(rows)
    free = [mixed_df.columns.get_loc(c) for c in dist.columns]
    x = torch.tensor(Z[:, free], dtype=dtype, requires_grad=True)
    lp = dist.log_prob(x)
    if dtype == torch.float64:
        np.testing.assert_allclose(lp.detach().numpy(), ref, rtol=1e-9, atol=1e-9)
    else:
        ok = np.isfinite(ref)
        np.testing.assert_allclose(lp.detach().double().numpy()[ok], ref[ok], rtol=1e-4,
                                   atol=1e-4)
    lp[torch.isfinite(lp)].sum().backward()
    assert torch.isfinite(x.grad).all()


def test_conditional_sample_matches_numpy(mixed_model):
    ev = {"cat": "c"}
    dist = mixed_model.to_torch().condition(ev)
    t = dist.sample((4000,), generator=torch.Generator().manual_seed(0)).numpy()
    ref = mixed_model.encoder_.transform(mixed_model.sample(4000, conditions=ev, random_state=0))
    free = [mixed_model.schema_.names.index(c) for c in dist.columns]
    for c, j in enumerate(free):
        if mixed_model.schema_.columns[j].is_discrete:
            k = mixed_model.schema_.columns[j].n_levels
            tv = 0.5 * np.abs(np.bincount(t[:, c].astype(int), minlength=k)
                              - np.bincount(ref[:, j].astype(int), minlength=k)).sum() / 4000
            assert tv < 0.05
        else:
            assert stats.ks_2samp(t[:, c], ref[:, j]).pvalue > 1e-3
    # the conditional density of its own samples is finite and decode restores the evidence
    assert torch.isfinite(dist.log_prob(torch.as_tensor(t[:100]))).all()
    assert (dist.decode(torch.as_tensor(t[:10]))["cat"] == "c").all()


def test_conditional_discrete_pmf_sums_to_one(mixed_model):
    dist = mixed_model.to_torch().condition({"x1": 0.2, "x2": 0.5, "level": 3})
    assert dist.columns == ["cat", "flag"]
    grid = torch.tensor([[c, f] for c in range(4) for f in range(2)], dtype=torch.float64)
    assert abs(torch.logsumexp(dist.log_prob(grid), 0).item()) < 1e-9


def test_condition_errors(mixed_model):
    dist = mixed_model.to_torch()
    with pytest.raises(KeyError, match="nope"):
        dist.condition({"nope": 1})
    with pytest.raises(TypeError, match="dict"):
        dist.condition([("cat", "a")])
    with pytest.raises(ValueError, match="zzz"):
        dist.condition({"cat": "zzz"})
    with pytest.raises(NotImplementedError, match="one condition"):
        dist.condition({"cat": "a"}).condition({"flag": True})


# ---------------------------------------------------------------------------- CUDA
@CUDA
def test_cuda_samples_and_conditionals(mixed_model, mixed_df):
    dist = mixed_model.to_torch(device="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    t = dist.sample((6000,), generator=g)
    assert t.device.type == "cuda" and dist.sample_device.type == "cuda"
    _compare_columns(mixed_model, t.double().cpu().numpy(),
                     mixed_model.sample_encoded(6000, random_state=1))
    cond = dist.condition({"cat": "b"})
    rows = mixed_df.head(100)
    Z = mixed_model.encoder_.transform(rows)
    free = [mixed_df.columns.get_loc(c) for c in cond.columns]
    lp = cond.log_prob(torch.tensor(Z[:, free], device="cuda"))
    np.testing.assert_allclose(lp.cpu().numpy(),
                               mixed_model.log_prob(rows, conditions={"cat": "b"}),
                               rtol=1e-9, atol=1e-9)
