"""ForestDistribution: torch log_prob equals the numpy path, gradients, sampling, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from forestgen import ARF
from forestgen.torch import ForestDistribution
from forestgen.torch.distribution import EncodedRows


def _check_equal(model, Z):
    dist = model.to_torch()
    assert dist.torch_path
    ref = model.log_prob_encoded(Z)
    lp64 = dist.log_prob(torch.tensor(Z, dtype=torch.float64))
    assert lp64.dtype == torch.float64
    np.testing.assert_allclose(lp64.numpy(), ref, rtol=1e-10, atol=1e-10)
    x32 = torch.tensor(Z, dtype=torch.float32)
    ref32 = model.log_prob_encoded(x32.double().numpy())  # same (rounded) inputs
    lp32 = dist.log_prob(x32)
    assert lp32.dtype == torch.float32
    np.testing.assert_allclose(lp32.double().numpy(), ref32, rtol=1e-5, atol=1e-5)


def test_matches_numpy_adult(adult_model, adult_test):
    Z = adult_model.encoder_.transform(adult_test)
    assert np.isnan(Z).any(1).sum() > 10  # NaN rows are marginalised by both paths
    _check_equal(adult_model, Z)


def test_matches_numpy_mixed_frame(mixed_model, mixed_df):
    Z = mixed_model.encoder_.transform(mixed_df)
    Zs = mixed_model.sample_encoded(300, random_state=3)
    Zs[::7, 0] = np.nan
    Zs[::5, 2] = np.nan
    Zs[1, 4] = 9.0  # unseen level: floored pmf, like numpy
    Zs[2, 2] = 0.5  # not an integer code
    _check_equal(mixed_model, np.vstack([Z, Zs]))


def test_batch_shape_and_nd_input(mixed_model):
    dist = mixed_model.to_torch()
    x = dist.sample((3, 4))
    assert x.shape == (3, 4, 5)
    lp = dist.log_prob(x.double())
    assert lp.shape == (3, 4)
    np.testing.assert_allclose(lp.reshape(-1).numpy(),
                               mixed_model.log_prob_encoded(x.reshape(-1, 5).double().numpy()),
                               rtol=1e-10)


def test_gradcheck_inside_leaf(adult_model):
    dist = adult_model.to_torch()
    Z = torch.tensor(adult_model.sample_encoded(4, random_state=5))
    # numeric columns without point masses: at an atom (capital-gain == 0) the log density
    # jumps from a log mass to a log density, so there is no derivative to check
    cont = torch.tensor([not c.is_discrete and not c.atoms for c in adult_model.schema_.columns])
    base = Z.clone()

    def f(xc):
        x = base.clone()
        x[:, cont] = xc
        return dist.log_prob(x)

    xc = Z[:, cont].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(f, (xc,), eps=1e-6, atol=1e-6, rtol=1e-4)
    # and the gradient is not trivially zero
    g, = torch.autograd.grad(f(xc).sum(), xc)
    assert (g.abs() > 0).float().mean() > 0.5


def test_gradient_ascent_raises_density(adult_model, mixed_model):
    for model, shift in ((adult_model, 0.3), (mixed_model, 1.0)):
        dist = model.to_torch()
        torch.manual_seed(0)
        x0 = dist.sample((64,)).double()
        # numeric columns without point masses (an atom is a mass, not a density to climb)
        cont = torch.tensor([not c.is_discrete and not c.atoms for c in model.schema_.columns])
        assert cont.sum() >= 2
        scale = torch.tensor(model.sample_encoded(2000, random_state=1).std(0))
        noise = torch.randn(64, int(cont.sum()), dtype=torch.float64) * shift * scale[cont]
        x0[:, cont] += noise  # push points away from the data
        x = x0.clone().requires_grad_(True)
        before = dist.log_prob(x0)
        for _ in range(60):
            x.grad = None
            loss = -dist.log_prob(x)
            loss[torch.isfinite(loss)].sum().backward()
            with torch.no_grad():  # per-column step scaled by the column's spread
                x.grad[:, ~cont] = 0
                x -= 0.05 * x.grad * scale ** 2 / (1 + (x.grad * scale).abs())
        after = dist.log_prob(x.detach())
        ok = torch.isfinite(before)
        assert ok.sum() > 32
        assert after[ok].mean() > before[ok].mean() + 0.3
        assert (after[ok] >= before[ok] - 1e-9).float().mean() > 0.8


def test_uniform_leaves_zero_gradient(mixed_df):
    model = ARF(n_trees=3, family="unif", random_state=0).fit(mixed_df)
    dist = model.to_torch()
    assert dist.torch_path
    Z = model.sample_encoded(50, random_state=2)
    x = torch.tensor(Z, requires_grad=True)
    lp = dist.log_prob(x)
    np.testing.assert_allclose(lp.detach().numpy(), model.log_prob_encoded(Z), rtol=1e-10)
    lp.sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.zeros_like(x))


def test_nan_rows_have_finite_gradients(adult_model):
    dist = adult_model.to_torch()
    Z = adult_model.sample_encoded(10, random_state=4)
    Z[:, 0] = np.nan  # age missing: marginalised
    x = torch.tensor(Z, requires_grad=True)
    lp = dist.log_prob(x)
    np.testing.assert_allclose(lp.detach().numpy(), adult_model.log_prob_encoded(Z), rtol=1e-10)
    lp.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert (x.grad[:, 0] == 0).all() and (x.grad[:, 2] != 0).any()


def test_infinite_input_is_minus_inf_with_zero_grad(mixed_model):
    dist = mixed_model.to_torch()
    x = torch.tensor(mixed_model.sample_encoded(3, random_state=0))
    x[0, 0] = 1e3  # far past the training range: outside the support, density zero
    x[1, 0] = float("inf")
    x.requires_grad_(True)
    lp = dist.log_prob(x)
    ref = mixed_model.log_prob_encoded(x.detach().numpy())
    np.testing.assert_allclose(lp.detach().numpy(), ref, rtol=1e-10)
    assert torch.isinf(lp[[0, 1]]).all() and torch.isfinite(lp[2])
    lp[2].backward()
    assert torch.isfinite(x.grad).all() and (x.grad[[0, 1]] == 0).all()


def test_sample_seeded_by_torch(mixed_model):
    dist = mixed_model.to_torch()
    torch.manual_seed(7)
    a = dist.sample((100,))
    torch.manual_seed(7)
    b = dist.sample((100,))
    c = dist.sample((100,))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.get_default_dtype() and a.shape == (100, 5)
    assert dist.support.check(a).all()
    g = torch.Generator().manual_seed(1)
    d1 = dist.sample((5,), generator=g)
    assert torch.equal(d1, dist.sample((5,), generator=torch.Generator().manual_seed(1)))


def test_encode_decode_roundtrip(mixed_model, mixed_df):
    dist = ForestDistribution(mixed_model, dtype=torch.float64)
    x = dist.encode(mixed_df)
    assert x.shape == (len(mixed_df), 5) and x.dtype == torch.float64
    back = dist.decode(x)
    assert list(back.columns) == list(mixed_df.columns)
    assert (back["cat"].fillna("NA") == mixed_df["cat"].fillna("NA")).all()
    np.testing.assert_allclose(back["x1"].to_numpy(), mixed_df["x1"].to_numpy())


def test_errors_and_support(mixed_model):
    dist = mixed_model.to_torch()
    with pytest.raises(NotImplementedError, match="cannot be expanded"):
        dist.expand((3,))
    with pytest.raises(ValueError, match="5 encoded columns"):
        dist.log_prob(torch.zeros(4, 3))
    sup = dist.support
    assert isinstance(sup, EncodedRows) and sup.event_dim == 1
    bad = torch.tensor([[0.0, 0.0, 1.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
    assert sup.check(bad).tolist() == [False, True]
    strict = ForestDistribution(mixed_model, validate_args=True)
    with pytest.raises(ValueError):
        strict.log_prob(bad)
    assert dist.event_shape == (5,) and dist.batch_shape == ()


def test_mean_matches_samples(mixed_model):
    dist = mixed_model.to_torch()
    s = mixed_model.sample_encoded(40000, random_state=0)
    np.testing.assert_allclose(dist.mean.numpy(), s.mean(0), atol=0.05)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_numpy_and_differentiates(adult_model, adult_test):
    dist = adult_model.to_torch()
    Z = adult_model.encoder_.transform(adult_test)
    x = torch.tensor(Z, device="cuda", requires_grad=True)
    lp = dist.log_prob(x)
    assert lp.device.type == "cuda" and lp.dtype == torch.float64
    np.testing.assert_allclose(lp.detach().cpu().numpy(), adult_model.log_prob_encoded(Z),
                               rtol=1e-10, atol=1e-10)
    lp[torch.isfinite(lp)].sum().backward()
    assert torch.isfinite(x.grad).all()


def test_import_forestgen_is_torch_free():
    import subprocess
    import sys

    code = ("import sys, forestgen; "
            "assert 'torch' not in sys.modules and 'lightning' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
