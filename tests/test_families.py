"""Model families: declared capabilities, and queries that go through the family's slots."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.families import ENERGY, INTERSECTION, LEAF_MIXTURE, QUERIES, Family
from forestgen.families.energy.gibbs import GibbsSampler
from forestgen.families.energy.normaliser import ImportanceNormaliser
from forestgen.learners import ARF, DEF, EOGT, RFDE, GeF, GFBoost, NRGBoost
from forestgen.sampling.ancestral import AncestralSampler


class _CountingSampler(AncestralSampler):
    calls = 0

    def sample(self, model, n, rng, missing=False, within_support=False):
        type(self).calls += 1
        return super().sample(model, n, rng, missing=missing, within_support=within_support)


class _CountingEnsembler(MixtureEnsembler):
    calls = 0

    def combine_dense(self, scores):
        type(self).calls += 1
        return super().combine_dense(scores)


class _Counted(ARF):
    model_family = Family("counted mixture", {"ensembler": "test_counting",
                                               "sampler": "test_counting", "leaves": "leaf"})


class _NoTorch(ARF):
    model_family = Family("partial", LEAF_MIXTURE.slots,
                          LEAF_MIXTURE.capabilities - {"torch", "impute"})


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=200)})


def test_families_declare_their_learners():
    for cls in (ARF, GeF, RFDE, DEF):
        assert cls.model_family is LEAF_MIXTURE
    assert NRGBoost.model_family is ENERGY
    assert GFBoost.model_family is INTERSECTION and EOGT.model_family is INTERSECTION
    assert LEAF_MIXTURE.capabilities == frozenset(QUERIES)
    assert "marginal" not in ENERGY.capabilities


def test_queries_go_through_the_family_slots(table):
    m = _Counted(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    ref = ARF(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    # the reference takes the fused walk, the subclassed ensembler its own combine_dense:
    # the same sums up to rounding
    np.testing.assert_allclose(m.log_prob(table), ref.log_prob(table), rtol=1e-13, atol=1e-13)
    assert _CountingEnsembler.calls > 0
    pd.testing.assert_frame_equal(m.sample(20, random_state=1), ref.sample(20, random_state=1))
    assert _CountingSampler.calls == 1


class _CountingGibbs(GibbsSampler):
    calls = 0

    def run(self, *args, **kwargs):
        type(self).calls += 1
        return super().run(*args, **kwargs)


class _CountingNormaliser(ImportanceNormaliser):
    calls = 0

    def __init__(self):
        super().__init__(n_samples=1000)

    def estimate(self, energy, rng):
        type(self).calls += 1
        return super().estimate(energy, rng)


class _CountedEnergy(NRGBoost):
    model_family = Family("counted energy", {**ENERGY.slots, "sampler": "test_counting_gibbs",
                                             "normaliser": "test_counting"},
                          ENERGY.capabilities)


def test_energy_queries_go_through_the_family_slots(table):
    kw = dict(n_trees=3, max_leaves=4, pool_size=500, gibbs_chains=2, gibbs_burn_in=2,
              sample_burn_in=2, random_state=0)
    # a point mass in x, so that q0's uniform part leaves single-column splits with some gain
    data = table.assign(x=np.where(table.x > 0.3, 0.0, table.x))
    m = _CountedEnergy(**kw).fit(data)
    assert m.n_trees_ == 3 and _CountingNormaliser.calls == 1
    fit_calls = _CountingGibbs.calls
    assert fit_calls > 0  # the training pool's refill
    m.sample(10, random_state=0)
    m.impute(data.head(3).assign(x=np.nan, y=np.nan), random_state=0)
    assert _CountingGibbs.calls == fit_calls + 2
    assert m.log_z_se_ > 0


def test_undeclared_query_names_learner_and_query(table):
    m = _NoTorch(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    with pytest.raises(NotImplementedError, match="_NoTorch .*does not answer 'torch'"):
        m.to_torch()
    with pytest.raises(NotImplementedError, match="_NoTorch .*'impute'"):
        m.impute(table.head(3).assign(x=np.nan))
    assert np.isfinite(m.log_prob(table)).all()  # declared queries still work


class _OldContractSampler(AncestralSampler):
    """A third-party sampler written before ``within_support`` existed."""

    def sample(self, model, n, rng, missing=False):
        return super().sample(model, n, rng, missing=missing)


class _OldSampler(ARF):
    model_family = Family("old sampler", {**LEAF_MIXTURE.slots, "sampler": "test_old_contract"},
                          LEAF_MIXTURE.capabilities)


def test_every_sampler_draws_the_one_law(table):
    """A third-party sampler (no ``within_support``) gets the support policy's value map
    like the built-in one: one law, whatever ``within_support`` says (issue 32)."""
    m = _OldSampler(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    ref = ARF(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    exact = ref.sample_encoded(50, random_state=2)
    np.testing.assert_array_equal(m.sample_encoded(50, random_state=2), exact)
    for flag in (True, False):
        np.testing.assert_array_equal(ref.sample_encoded(50, random_state=2,
                                                         within_support=flag), exact)


class _EnergyLikeEnsembler(MixtureEnsembler):
    """Combines leaves like a mixture but declares an unnormalised energy."""

    normalised = False


class _Unnormalised(ARF):
    model_family = Family("energy-like", {**LEAF_MIXTURE.slots,
                                          "ensembler": "test_unnormalised"})


def test_unnormalised_ensembler_is_refused_by_mixture_queries(table):
    """``Ensembler.normalised`` is read: the shared mixture queries refuse an unnormalised
    ensembler instead of returning a silently wrong density."""
    m = _Unnormalised(n_trees=3, max_iters=0, random_state=0, n_jobs=1).fit(table)
    with pytest.raises(NotImplementedError, match="_Unnormalised.*'log_prob'.*unnormalised"):
        m.log_prob(table)
    with pytest.raises(NotImplementedError, match="_Unnormalised.*'leaf posterior'"):
        m.sample(5, conditions={"x": 0.1})
    assert not m.to_torch().torch_path
    assert m.sample(5, random_state=0).shape == (5, 2)  # sampling does not need a normaliser


@pytest.fixture(scope="module", autouse=True)
def _test_doubles():
    """This module's test doubles, registered while its tests run (and removed after them:
    later modules see the registry as the package leaves it)."""
    with registry.registered(
            ("sampler", "test_counting", _CountingSampler),
            ("ensembler", "test_counting", _CountingEnsembler),
            ("sampler", "test_counting_gibbs", _CountingGibbs),
            ("normaliser", "test_counting", _CountingNormaliser),
            ("sampler", "test_old_contract", _OldContractSampler),
            ("ensembler", "test_unnormalised", _EnergyLikeEnsembler),
    ):
        yield
