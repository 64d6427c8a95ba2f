"""What a deep-learning user meets in the torch layer (stop 69's probe): complete synthetic
rows from every learner, epochs that change with workers, a ``mean`` only where it is the
law's, and the documented constructor arguments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

import forestgen as fg  # noqa: E402
from forestgen.torch import EpochDataLoader  # noqa: E402


@pytest.fixture(scope="module")
def holey():
    """Missing entries in every column, as real tables have them."""
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"x": rng.normal(size=n), "y": rng.normal(size=n),
                       "c": rng.choice(["a", "b", "c"], n)})
    df.loc[rng.random(n) < 0.25, "x"] = np.nan
    df.loc[rng.random(n) < 0.2, "y"] = np.nan
    df["y"] = df["y"] + df["c"].map({"a": 0.0, "b": 2.0, "c": 4.0})
    return df


@pytest.mark.parametrize("learner", ["NRGBoost", "ARF"])
def test_torch_samples_and_datasets_are_complete(holey, learner):
    """NRGBoost's ``sample_encoded`` keeps its missing state by default: the torch layer
    gave 24% of rows with NaN (a NaN loss), although its samples are documented complete."""
    kw = {"n_trees": 10} if learner == "NRGBoost" else {"n_trees": 5}
    m = getattr(fg, learner)(random_state=0, **kw).fit(holey)
    assert not torch.isnan(m.to_torch().sample((500,))).any()
    ds = m.as_dataset(batch_size=100, n_batches=2, target="y")
    for i in range(len(ds)):
        assert not any(torch.isnan(v).any() for v in ds[i].values())


def test_persistent_workers_are_refused_where_epochs_change():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=100)})
    ds = fg.ARF(n_trees=3, random_state=0).fit(df).as_dataset(batch_size=10, n_batches=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        EpochDataLoader(ds, batch_size=10, num_workers=2, persistent_workers=True)
    assert len(list(EpochDataLoader(ds, batch_size=10, num_workers=0))) == 2


def test_mean_only_where_it_is_the_laws():
    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame({"x": rng.exponential(size=n), "c": rng.choice(["p", "q"], n)})
    eogt = fg.EOGT(random_state=0).fit(df)
    with pytest.raises(NotImplementedError, match="EOGT.*mean"):
        _ = eogt.to_torch().mean
    anchored = fg.Anchored(random_state=0).fit(df)
    with pytest.raises(NotImplementedError, match="Anchored.*expect"):
        _ = anchored.to_torch().condition({"c": "p"}).mean
    arf = fg.ARF(n_trees=10, random_state=0).fit(df)
    got = float(arf.to_torch(dtype=torch.float64).condition({"c": "p"}).mean[0])
    assert got == pytest.approx(float(arf.expect(conditions={"c": "p"})["x"]), rel=1e-9)


def test_energy_distribution_import_and_validate_args():
    from forestgen.families.energy.distribution import EnergyDistribution

    assert fg.torch.EnergyDistribution is EnergyDistribution
    ns: dict = {}
    exec("from forestgen.torch import *", ns)  # noqa: S102
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"x": rng.normal(size=100)})
    for m in (fg.ARF(n_trees=3, random_state=0).fit(df),
              fg.NRGBoost(n_trees=3, random_state=0).fit(df)):
        assert m.to_torch(validate_args=True)._validate_args


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_an_unavailable_device_is_refused_at_construction():
    """``to_torch(device="cuda")`` on a CPU build of torch constructed, then failed inside
    torch at the first draw (``Torch not compiled with CUDA enabled``)."""
    rng = np.random.default_rng(0)
    m = fg.ARF(n_trees=3, random_state=0).fit(pd.DataFrame({"x": rng.normal(size=100)}))
    with pytest.raises(ValueError, match="'cuda'.*not available"):
        m.to_torch(device="cuda")
    with pytest.raises(ValueError, match="'cuda'.*not available"):
        m.as_dataset(batch_size=4, n_batches=1, device="cuda")
    with pytest.raises(ValueError, match="'cuda:1'.*not available"):
        m.to_torch().device_sampler("cuda:1")


@pytest.mark.parametrize("learner", ["ARF", "Anchored", "GFBoost", "NRGBoost"])
def test_torch_log_prob_is_the_law_itself_outside_the_support(learner):
    """one-law.md: the torch distribution scores a row outside the support as
    ``log_prob(..., floor=None)`` does (``-inf``), NRGBoost's with its floor."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(["p", "q"], 200)})
    kw = {"n_trees": 5} if learner in ("ARF", "GFBoost", "NRGBoost") else {}
    m = getattr(fg, learner)(random_state=0, **kw).fit(df)
    rows = pd.DataFrame({"x": [0.1, 50.0], "c": ["p", "q"]})
    d = m.to_torch(dtype=torch.float64)
    got = d.log_prob(d.encode(rows)).numpy()
    floored = m.log_prob(rows)
    assert np.isfinite(floored).all()
    if learner == "NRGBoost":
        np.testing.assert_allclose(got, floored, rtol=1e-10)
    else:
        np.testing.assert_allclose(got[0], m.log_prob(rows.head(1), floor=None), rtol=1e-10)
        assert got[1] == -np.inf and m.log_prob(rows.tail(1), floor=None)[0] == -np.inf
