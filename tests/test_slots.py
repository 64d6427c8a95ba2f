"""The four component slots on every learner (issue 31): constructor parameters resolved by one
registry helper, checked at construction (ruled-out slots and components of another family
raise, naming learner, slot and reason), copied per fit, used by every query that draws or
weighs leaves, saved with the model and reloaded identically."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from numba import njit

from forestgen import registry
from forestgen.base import SLOTS, GenerativeForest
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.families.energy.gibbs import GibbsSampler
from forestgen.families.intersection.splitter import BayesRiskSplitter
from forestgen.learners import ARF, DEF, EOGT, RFDE, Anchored, GeF, GFBoost, NRGBoost
from forestgen.sampling.ancestral import AncestralSampler

LEARNERS = [ARF, GeF, RFDE, DEF, GFBoost, EOGT, NRGBoost, Anchored]


@njit(cache=True)
def _gain(left, right):
    return 0.0


class CountingSampler(AncestralSampler):
    """Counts its leaf draws; ``scale`` is a parameter that must survive save/load."""

    draws = 0

    def __init__(self, *, scale: float = 1.0):
        self.scale = scale

    def draw_leaves(self, log_weight, n, rng):
        type(self).draws += 1
        return super().draw_leaves(log_weight, n, rng)


class FlatTrees(MixtureEnsembler):
    """Coverage weights with a different weight per tree (still normalised)."""

    logsumexp_combine = True

    def __init__(self, *, first: float = 0.5):
        self.first = first

    def leaf_log_weights_from_counts(self, cnt, leaf_tree, n_trees):
        lw = super().leaf_log_weights_from_counts(cnt, leaf_tree, n_trees) + np.log(n_trees)
        tree_w = np.full(n_trees, (1 - self.first) / max(n_trees - 1, 1))
        tree_w[0] = self.first if n_trees > 1 else 1.0
        return lw + np.log(tree_w)[leaf_tree]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=300),
                         "c": np.where(x + rng.normal(size=300) > 0, "a", "b")})


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_every_learner_takes_the_four_slots(cls):
    params = inspect.signature(cls.__init__).parameters
    assert set(SLOTS) <= set(params), set(SLOTS) - set(params)
    for slot, reason in cls.ruled_out.items():
        if slot not in SLOTS:
            continue
        with pytest.raises(ValueError, match=f"{cls.__name__}: the '{slot}' slot is ruled out: "
                                             f"{reason[:20]}"):
            cls(**{slot: "truncnorm" if "leaf" in slot else "ancestral"})


def test_components_of_another_family_are_refused_at_construction():
    with pytest.raises(ValueError, match="NRGBoost: ensembler MixtureEnsembler serves "
                                         r"\['leaf mixture'\].*needs an ensembler serving "
                                         "'energy'"):
        NRGBoost(ensembler=MixtureEnsembler())
    with pytest.raises(ValueError, match="ARF: sampler GibbsSampler serves.*'leaf mixture'"):
        ARF(sampler=GibbsSampler())
    with pytest.raises(ValueError, match="GFBoost: splitter GiniSplitter grows 'tree'"):
        GFBoost(splitter="gini")
    with pytest.raises(ValueError, match="RFDE: a split criterion is ruled out: the random "
                                         "midpoint rule"):
        RFDE(splitter=_gain)
    with pytest.raises(ValueError, match="ARF grows unbounded, zero-width cells"):
        ARF(numeric_leaf="cell_uniform")
    with pytest.raises(TypeError, match="ARF: sampler must be"):
        ARF(sampler=MixtureEnsembler())
    with pytest.raises(ValueError, match="EOGT: the 'sampler' slot is ruled out"):
        EOGT(n_trees=3).set_params(sampler="ancestral")


def test_an_instance_is_copied_per_fit_and_used_by_every_leaf_draw(table):
    proto = CountingSampler(scale=2.0)
    a = ARF(n_trees=3, sampler=proto, random_state=0, n_jobs=1).fit(table)
    b = ARF(n_trees=3, sampler=proto, random_state=1, n_jobs=1).fit(table)
    sa, sb = a.component("sampler"), b.component("sampler")
    assert sa is not proto and sa is not sb and sa.get_params() == {"scale": 2.0}
    before = CountingSampler.draws
    a.sample(20, random_state=0)
    a.sample(20, conditions={"c": "a"}, random_state=0)
    assert CountingSampler.draws == before + 2
    g = GFBoost(n_trees=3, n_iter=10, sampler="test_slot_counting", random_state=0).fit(table)
    g.sample(10, random_state=0)
    assert CountingSampler.draws == before + 3
    # same seed, same draws as the built-in: the sampler only counts
    ref = ARF(n_trees=3, random_state=0, n_jobs=1).fit(table)
    pd.testing.assert_frame_equal(a.sample(30, random_state=4), ref.sample(30, random_state=4))


@pytest.mark.parametrize("cls, kw", [(ARF, {"n_jobs": 1}), (GeF, {"n_jobs": 1}),
                                     (RFDE, {"depth": 4, "n_jobs": 1}),
                                     (DEF, {"max_leaves": 8, "n_jobs": 1})],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_a_mixture_ensembler_weighs_the_leaves(cls, kw, table):
    fit_kw = {"target": "c"} if cls is GeF else {}
    m = cls(n_trees=3, ensembler=FlatTrees(first=0.7), random_state=0, **kw).fit(table, **fit_kw)
    ref = cls(n_trees=3, random_state=0, **kw).fit(table, **fit_kw)
    w = np.bincount(m.forest_.leaf_tree, weights=np.exp(m.leaf_log_weight_))
    assert np.isclose(w[0] / w[:3].sum(), 0.7)  # RFDE, DEF: a 4th tree, the uniform part
    assert np.isclose(w.sum(), 1.0)
    assert not np.allclose(m.log_prob(table), ref.log_prob(table))
    levels = pd.DataFrame({"x": [np.nan] * 2, "y": [np.nan] * 2, "c": ["a", "b"]})
    assert np.isclose(np.exp(m.log_prob(levels)).sum(), 1.0)


def test_components_are_saved_and_reload_identically(table, tmp_path):
    m = ARF(n_trees=3, sampler=CountingSampler(scale=3.0), ensembler=FlatTrees(first=0.6),
            random_state=0, n_jobs=1).fit(table)
    again = GenerativeForest.load(m.save(tmp_path / "m.fgm"))
    for slot in ("sampler", "ensembler"):
        a, b = m.component(slot), again.component(slot)
        assert type(a) is type(b) and a.get_params() == b.get_params()
    np.testing.assert_array_equal(m.log_prob(table), again.log_prob(table))
    pd.testing.assert_frame_equal(m.sample(20, random_state=1), again.sample(20, random_state=1))


class _Unregistered(AncestralSampler):
    pass


class _MyARF(ARF):
    pass


def test_unregistered_components_and_learners_cannot_be_saved(table, tmp_path):
    m = ARF(n_trees=2, sampler=_Unregistered(), random_state=0, n_jobs=1).fit(table)
    with pytest.raises(ValueError, match="sampler _Unregistered is not registered"):
        m.save(tmp_path / "a.fgm")
    assert not (tmp_path / "a.fgm").exists()
    sub = _MyARF(n_trees=2, random_state=0, n_jobs=1).fit(table)
    with pytest.raises(ValueError, match="learner _MyARF is not registered"):
        sub.save(tmp_path / "b.fgm")
    assert not (tmp_path / "b.fgm").exists()


def test_energy_slots(table):
    kw = dict(n_trees=2, max_leaves=4, pool_size=500, gibbs_chains=2, gibbs_burn_in=2,
              sample_burn_in=2, n_normaliser_samples=1000, random_state=0)
    m = NRGBoost(sampler=GibbsSampler(temperature=1.0), **kw).fit(table)
    assert type(m.component("ensembler")).__name__ == "AdditiveEnergy"
    assert m.component("sampler").get_params() == {"temperature": 1.0}
    assert m.sample(5, random_state=0).shape == (5, 3)


def test_eogt_and_gfboost_refuse_a_splitter_with_the_other_cell_masses():
    with pytest.raises(ValueError, match=r"EOGT: splitter BayesRiskSplitter has approx=False, "
                                         r"but EOGT scores splits with approximate"):
        EOGT(splitter=BayesRiskSplitter())
    with pytest.raises(ValueError, match=r"GFBoost: splitter BayesRiskSplitter has approx=True"):
        GFBoost(splitter=BayesRiskSplitter(approx=True))
    EOGT(splitter=BayesRiskSplitter(approx=True))
    EOGT(splitter=BayesRiskSplitter)  # a class is built with EOGT's approx=True


class _MyBayesRisk(BayesRiskSplitter):
    pass


class _MyGibbs(GibbsSampler):
    pass


class _UnregisteredGibbs(GibbsSampler):
    pass


def test_family_component_subclasses_reload_as_themselves_or_are_refused(table, tmp_path):
    nrg = dict(n_trees=2, max_leaves=4, pool_size=500, gibbs_chains=2, gibbs_burn_in=2,
               sample_burn_in=2, n_normaliser_samples=1000, random_state=0)
    cases = [(GFBoost(n_trees=3, n_iter=10, splitter=_MyBayesRisk(), random_state=0),
              "splitter"),
             (NRGBoost(sampler=_MyGibbs(temperature=1.0), **nrg), "sampler")]
    for m, slot in cases:
        m.fit(table)
        again = GenerativeForest.load(m.save(tmp_path / f"{slot}.fgm"))
        a, b = m.component(slot), again.component(slot)
        assert type(b) is type(a) and type(a).__name__ in ("_MyBayesRisk", "_MyGibbs")
        assert b.get_params() == a.get_params()
        np.testing.assert_array_equal(m.log_prob(table), again.log_prob(table))
    m = NRGBoost(sampler=_UnregisteredGibbs(), **nrg).fit(table)
    with pytest.raises(ValueError, match="sampler _UnregisteredGibbs is not registered"):
        m.save(tmp_path / "u.fgm")
    assert not (tmp_path / "u.fgm").exists()


TREE_LEARNERS = {
    "ARF": lambda **k: ARF(n_trees=2, random_state=0, n_jobs=1, **k),
    "GeF": lambda **k: GeF(n_trees=2, random_state=0, n_jobs=1, **k),
    "RFDE": lambda **k: RFDE(n_trees=2, depth=3, random_state=0, n_jobs=1, **k),
    "DEF": lambda **k: DEF(n_trees=2, max_leaves=6, random_state=0, n_jobs=1, **k),
    "NRGBoost": lambda **k: NRGBoost(n_trees=2, max_leaves=4, pool_size=500, gibbs_chains=2,
                                     gibbs_burn_in=2, sample_burn_in=2,
                                     n_normaliser_samples=1000, random_state=0, **k),
}
BUILTIN_SPLITTERS = ["gini", "entropy", "impurity", "density", "midpoint", "energy", "bayes_risk"]


def test_every_built_in_splitter_works_or_is_refused_at_construction(table):
    """Each (tree learner, built-in splitter) pair either fits and scores, or the constructor
    names the learner, the splitter and what does not match (labels, data, limits)."""
    assert set(BUILTIN_SPLITTERS) == {n for n in registry.available("splitter") if registry.get(
        "splitter", n).__module__.startswith("forestgen.")}
    works = set()
    for name, make in TREE_LEARNERS.items():
        for sp in BUILTIN_SPLITTERS:
            try:
                m = make(splitter=sp)
            except ValueError as e:
                cls = registry.get("splitter", sp).__name__
                assert str(e).startswith(f"{name}: splitter {cls} "), str(e)
                continue
            m.fit(table, **({"target": "c"} if name == "GeF" else {}))
            assert np.isfinite(m.log_prob(table)).all(), (name, sp)
            works.add((name, sp))
    assert works == {("ARF", "gini"), ("ARF", "entropy"), ("ARF", "impurity"),
                     ("GeF", "gini"), ("GeF", "entropy"), ("GeF", "impurity"),
                     ("RFDE", "midpoint"), ("DEF", "density"), ("NRGBoost", "energy")}


@pytest.fixture(scope="module", autouse=True)
def _test_doubles():
    """This module's test doubles, registered while its tests run (and removed after them:
    later modules see the registry as the package leaves it)."""
    with registry.registered(
            ("sampler", "test_slot_counting", CountingSampler),
            ("ensembler", "test_slot_flat", FlatTrees),
            ("splitter", "test_slot_bayes_risk", _MyBayesRisk),
            ("sampler", "test_slot_gibbs", _MyGibbs),
    ):
        yield
