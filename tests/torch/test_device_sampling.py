"""On-device sampling and conditional distributions: same distribution as the numpy sampler,
exact conditional densities, seeds that reproduce."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from sklearn.ensemble import HistGradientBoostingClassifier

from forestgen.learners import ARF, DEF, EOGT, RFDE, Chain, GeF, GFBoost, NRGBoost
from forestgen.leaves.uniform import UniformLeaf
from forestgen.metrics import c2st
from forestgen.torch.sampling import DeviceSampler, device_sampler_supported, std_truncnorm

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _compare_columns(model, a: np.ndarray, b: np.ndarray) -> None:
    """Per column: two-sample KS test for numeric columns, chi-square test of the level counts
    for discrete ones (the same p-value bound; a fixed total-variation bound of 0.04 between
    two samples of 4,000 is about four of its standard deviations at four levels)."""
    for j, spec in enumerate(model.schema_.columns):
        if spec.is_discrete:
            k = spec.n_levels
            counts = np.vstack([np.bincount(a[:, j].astype(int), minlength=k),
                                np.bincount(b[:, j].astype(int), minlength=k)])
            counts = counts[:, counts.sum(0) > 0]
            if counts.shape[1] > 1:
                assert stats.chi2_contingency(counts).pvalue > 1e-3, spec.name
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


# ---------------------------------------------------------------------------- every learner
class RampLeaf(UniformLeaf):
    """A user leaf: density ``2 (x - lo) / (hi - lo)^2`` on the cell (inverse CDF
    ``lo + (hi - lo) sqrt(u)``), with the sampling hook but no torch density."""

    def log_prob(self, leaf, x):
        lo, hi = self.lo_[leaf], self.hi_[leaf]
        with np.errstate(divide="ignore"):
            out = np.log(2.0 * np.maximum(x - lo, 0.0)) - 2.0 * np.log(hi - lo)
        return np.where(np.isnan(x), 0.0, np.where((x > lo) & (x <= hi), out, -np.inf))

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        a, b = self.lo_[leaf], self.hi_[leaf]
        return a + (b - a) * np.sqrt(rng.random(len(leaf)))

    def torch_sample_params(self, n_leaves, device):
        return super().torch_sample_params(n_leaves, device)

    @staticmethod
    def torch_sample(params, leaf, u):
        lo = params["lo"][leaf]
        return lo + (params["hi"][leaf] - lo) * torch.sqrt(u)


class _RampNoHook(RampLeaf):
    def sample(self, leaf, rng, lo=None, hi=None, levels=None):  # a changed sampler...
        return super().sample(leaf, rng, lo, hi, levels)  # ...without its own hook


LEARNERS = {
    "arf": lambda t: ARF(n_trees=4, random_state=0, n_jobs=1).fit(t),
    "gef": lambda t: GeF(n_trees=4, random_state=0, n_jobs=1).fit(t, target="c"),
    "rfde": lambda t: RFDE(n_trees=4, depth=5, random_state=0, n_jobs=1).fit(t),
    "def": lambda t: DEF(n_trees=4, max_leaves=24, random_state=0, n_jobs=1).fit(t),
    "gfboost": lambda t: GFBoost(n_trees=3, n_iter=24, random_state=0).fit(t),
    "user_leaf": lambda t: ARF(n_trees=4, random_state=0, n_jobs=1,
                               numeric_leaf=RampLeaf()).fit(t),
}


@pytest.fixture(scope="module")
def small_table():
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=n), "k": rng.integers(0, 4, n),
                         "c": np.where(x + rng.normal(size=n) > 0, "a", "b")})


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_every_leaf_mixture_samples_on_device(name, small_table):
    m = LEARNERS[name](small_table)
    assert device_sampler_supported(m)
    dist = m.to_torch()
    assert dist.sample_device.type == "cpu"
    t = dist.sample((4000,), generator=torch.Generator().manual_seed(0)).double().numpy()
    again = dist.sample((4000,), generator=torch.Generator().manual_seed(0)).double().numpy()
    assert np.array_equal(t, again)  # seeds reproduce
    z = m.sample_encoded(4000, random_state=1)
    assert np.isfinite(m.log_prob_encoded(t)).all()  # every draw inside the model's support
    _compare_columns(m, t, z)
    res = c2st(m.encoder_.inverse_transform(z), dist.decode(torch.as_tensor(t)),
               max_rows=2000, n_folds=3, n_threads=1,
               classifier=HistGradientBoostingClassifier(max_iter=20, random_state=0))
    assert abs(res.auc - 0.5) < 0.06


def test_leaf_without_sampling_hook_falls_back(small_table):
    m = ARF(n_trees=3, random_state=0, n_jobs=1, numeric_leaf=_RampNoHook()).fit(small_table)
    assert not m.leaf_models_[0].has_torch_sampler  # the inherited hook would be stale
    assert not device_sampler_supported(m)
    assert not m.leaf_models_[0].has_torch  # nor is UniformLeaf's torch density inherited
    with pytest.raises(NotImplementedError, match="_RampNoHook"):
        DeviceSampler(m, "cpu")
    dist = m.to_torch()
    a = dist.sample((20,), generator=torch.Generator().manual_seed(2))
    b = dist.sample((20,), generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)  # numpy fallback, seeded from the generator


@pytest.mark.parametrize("name", ["EOGT", "Chain", "NRGBoost"])
def test_models_with_their_own_law_have_no_device_sampler(name, small_table):
    """EOGT's law is its star-node sampler, the Chain's a product of conditionals, NRGBoost's
    an energy: none is the compiled leaf mixture, so none has a device sampler, and asking a
    dataset for one names the learner and why (the Chain raised a ``KeyError`` before)."""
    make = {"EOGT": lambda: EOGT(n_trees=2, n_iter=12, random_state=0),
            "Chain": lambda: Chain(min_leaf=20, random_state=0),
            "NRGBoost": lambda: NRGBoost(n_trees=3, pool_size=2000, random_state=0)}
    m = make[name]().fit(small_table)
    assert not device_sampler_supported(m)
    with pytest.raises(NotImplementedError, match=f"{name}.*not a leaf mixture"):
        DeviceSampler(m, "cpu")
    with pytest.raises(NotImplementedError, match=f"{name}: no on-device sampler"):
        m.as_dataset(batch_size=8, n_batches=1, device="cpu")
    batch = next(iter(m.as_dataset(batch_size=8, n_batches=1, seed=0).batches()))  # numpy path
    assert batch.shape == (8, 4) and torch.isfinite(batch).all()
