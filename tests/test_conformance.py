"""forestgen.testing over the whole registry, as one table of (component, parameter sets,
edge fixtures) in the style of torch.distributions' examples table; and the checks catch
broken components.

``TABLE`` lists every registered component of every kind with the parameter sets it is checked
with; ``test_the_table_covers_the_whole_registry`` fails when a component is registered
without an entry, so nothing is filtered out. Leaf models are also checked on the edge cells
they declare (``LeafModel.handles_cells``; ``forestgen.testing.EDGE_CELLS``: zero-width,
unbounded and empty cells; every numeric leaf on extreme scales).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.sampling.ancestral import AncestralSampler
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.testing import (
    EDGE_CELLS,
    check_energy_leaf,
    check_ensembler,
    check_leaf_model,
    check_learner,
    check_normaliser,
    check_sampler,
    check_splitter,
)

#: (kind, registry name) -> parameter sets (constructor keywords); ``None`` checks the class
#: itself (NRGBoost builds its additive energy from the data)
TABLE: dict[tuple[str, str], list] = {
    ("leaf", "truncnorm"): [{}, {"epsilon": 0.1}],
    ("leaf", "kernel"): [{}, {"bandwidth": 0.3, "defensive": 0.1, "defensive_scale": "column"}],
    ("leaf", "uniform"): [{}, {"epsilon": 0.1}],
    ("leaf", "cell_uniform"): [{}],
    ("leaf", "point_mass"): [{}, {"base": "uniform", "prior": 1.0}],
    ("leaf", "rounded_normal_tail"): [{}],
    ("leaf", "categorical"): [{}, {"alpha": 1.0}],
    ("leaf", "ordinal_kernel"): [{}],
    ("leaf", "gef_gaussian"): [{}],
    ("leaf", "uniform_levels"): [{}],
    ("leaf", "marginal_cell"): [{}],
    ("leaf", "grid_spike"): [{}, {"step": 0.1, "weight": 0.6}],
    ("leaf", "marginal_mix"): [{}, {"strength": 5.0, "edges": [-4.0, -0.5, 0.5, 4.0],
                                    "cdf": [0.0, 0.2, 0.8, 1.0]}],
    ("leaf", "stacked"): [{"parts": ["truncnorm", "kernel"], "sizes": [4, 1]},
                          {"parts": ["categorical", "uniform_levels"], "sizes": [3, 2]}],
    ("leaf", "indexed"): [{"base": "truncnorm"}, {"base": "kernel"}, {"base": "categorical"}],
    ("splitter", "gini"): [{}],
    ("splitter", "entropy"): [{}],
    ("splitter", "impurity"): [{}],
    ("splitter", "density"): [{}, {"criterion": "ise"}],
    ("splitter", "midpoint"): [{}],
    ("splitter", "energy"): [{}],
    ("splitter", "bayes_risk"): [{}, {"loss": "log"}, {"approx": True}],
    ("ensembler", "mixture"): [{}],
    ("ensembler", "intersection"): [{}],
    ("ensembler", "additive_energy"): [None],
    ("sampler", "ancestral"): [{}],
    ("sampler", "gibbs"): [{}],
    ("normaliser", "importance"): [{"n_samples": 5000}],
    ("normaliser", "ais"): [{"n_chains": 64, "n_steps": 40}],
    ("energy_leaf", "constant_energy"): [{}, {"form": "log"}],
    ("learner", "arf"): [dict(n_trees=5, random_state=0, n_jobs=1)],
    ("learner", "gef"): [dict(n_trees=5, random_state=0, n_jobs=1)],
    ("learner", "rfde"): [dict(n_trees=5, depth=5, random_state=0, n_jobs=1)],
    ("learner", "def"): [dict(n_trees=5, max_leaves=16, random_state=0, n_jobs=1)],
    ("learner", "gfboost"): [dict(n_trees=5, n_iter=20, random_state=0)],
    ("learner", "eogt"): [dict(n_trees=5, n_iter=20, random_state=0)],
    ("learner", "chain"): [dict(random_state=0, n_jobs=1)],
    ("learner", "anchored"): [dict(random_state=0, n_jobs=1)],
    ("learner", "nrgboost"): [dict(n_trees=5, max_leaves=16, pool_size=2000, gibbs_burn_in=10,
                                   n_normaliser_samples=5000, sample_burn_in=10,
                                   random_state=0)],
}
FIT_KWARGS = {"gef": {"target": "c"}}


def _check_learner(model, name):
    check_learner(model, fit_kwargs=FIT_KWARGS.get(name))


CHECKS = {
    "leaf": lambda c, name: check_leaf_model(c),
    "splitter": lambda c, name: check_splitter(c),
    "ensembler": lambda c, name: check_ensembler(c),
    "sampler": lambda c, name: check_sampler(c),
    "normaliser": lambda c, name: check_normaliser(c),
    "energy_leaf": lambda c, name: check_energy_leaf(c),
    "learner": _check_learner,
}
CASES = [(kind, name, i) for (kind, name), sets in TABLE.items() for i in range(len(sets))]


def test_the_table_covers_the_whole_registry():
    # everything the package registers (other test modules register test doubles too)
    registered = {(kind, name) for kind, names in registry.available().items()
                  for name in names
                  if getattr(registry.get(kind, name), "__module__", "").startswith("forestgen")}
    assert registered == set(TABLE), (sorted(registered - set(TABLE)),
                                      sorted(set(TABLE) - registered))
    assert set(registry.available()) - {"criterion"} <= set(CHECKS)


def test_every_registered_component_subclasses_its_base():
    from forestgen.base import GenerativeForest
    from forestgen.ensemble.base import Ensembler
    from forestgen.families.energy.leaf import EnergyLeaf
    from forestgen.families.energy.normaliser import Normaliser
    from forestgen.leaves.base import LeafModel
    from forestgen.sampling.base import Sampler
    from forestgen.splitters.base import Splitter

    bases = {"leaf": LeafModel, "splitter": Splitter, "ensembler": Ensembler,
             "sampler": Sampler, "normaliser": Normaliser, "energy_leaf": EnergyLeaf,
             "learner": GenerativeForest}
    for kind, names in registry.available().items():
        for name in names:
            if kind != "criterion":
                assert issubclass(registry.get(kind, name), bases[kind]), (kind, name)


@pytest.mark.parametrize("kind, name, i", CASES,
                         ids=[f"{k}:{n}[{i}]" for k, n, i in CASES])
def test_registered_components_conform(kind, name, i):
    params = TABLE[kind, name][i]
    cls = registry.get(kind, name)
    CHECKS[kind](cls if params is None else cls(**params), name)


def test_numeric_leaves_meet_every_edge_they_declare():
    """The edge fixtures each numeric leaf runs (inside ``check_leaf_model``)."""
    assert set(EDGE_CELLS) == {"zero-width", "unbounded", "empty", "extreme-scale"}
    for name in registry.available("leaf"):
        cls = registry.get("leaf", name)
        assert cls.handles_cells <= set(EDGE_CELLS), name
    assert registry.get("leaf", "truncnorm").handles_cells == {"zero-width", "unbounded",
                                                                 "empty"}
    assert registry.get("leaf", "cell_uniform").handles_cells == {"empty"}


class _LeakyLeaf(TruncNormalLeaf):
    """Puts mass outside the cell: its density no longer integrates to one."""

    def log_prob(self, leaf, x):
        out = super().log_prob(leaf, x)
        return np.where(np.isnan(x), out, out - 0.1)


class _NaNInZeroWidthCells(TruncNormalLeaf):
    """Passes the ordinary cells, but answers NaN in a zero-width one."""

    def mean(self, leaf):
        out = super().mean(leaf)
        return np.where(np.isinf(self.logz_[leaf]), np.nan, out)


class _UniformInInterval(TruncNormalLeaf):
    """Right draws over the whole cell; uniform ones inside an interval asked for."""

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        if lo is None and hi is None:
            return super().sample(leaf, rng)
        a = np.maximum(self.lo_[leaf], -np.inf if lo is None else lo)
        b = np.minimum(self.hi_[leaf], np.inf if hi is None else hi)
        return a + (b - a) * (1.0 - rng.random(len(leaf)))


class _PeekingSplitter(ImpuritySplitter):
    """Lets out-of-bag rows choose the tree."""

    def grow(self, data, y, w, rng, limits):
        return super().grow(data, y, np.where(w > 0, w, 1.0), rng, limits)


class _HeavyFirstTree(MixtureEnsembler):
    """Gives the first tree all the weight twice: the forest's weights sum to more than one."""

    def leaf_log_weights_from_counts(self, cnt, leaf_tree, n_trees):
        out = super().leaf_log_weights_from_counts(cnt, leaf_tree, n_trees)
        return np.where(leaf_tree == 0, out + np.log(2.0), out)


class _UniformLeaves(AncestralSampler):
    """Draws every leaf equally often, ignoring the weights."""

    def draw_leaves(self, log_weight, n, rng):
        ok = np.flatnonzero(np.isfinite(log_weight))
        return ok[rng.integers(0, len(ok), n)]


def test_checks_catch_broken_components():
    with pytest.raises(AssertionError, match="normalisation"):
        check_leaf_model(_LeakyLeaf())
    with pytest.raises(AssertionError, match="zero-width"):
        check_leaf_model(_NaNInZeroWidthCells())
    with pytest.raises(AssertionError, match="restricted"):  # (bounds alone were checked)
        check_leaf_model(_UniformInInterval())
    with pytest.raises(AssertionError, match="weight 0"):
        check_splitter(_PeekingSplitter())
    with pytest.raises(TypeError, match="LeafModel"):
        check_leaf_model(object())
    with pytest.raises(AssertionError, match="sum to one"):
        check_ensembler(_HeavyFirstTree())
    with pytest.raises(AssertionError, match="draw_leaves|law"):
        check_sampler(_UniformLeaves())
    with pytest.raises(TypeError, match="Sampler"):
        check_sampler(MixtureEnsembler())


PROGRESS_SETTINGS = {**{name: TABLE["learner", name][0] for _, name in TABLE
                        if _ == "learner"},
                     "rfde": dict(n_trees=3, depth="cv", depth_grid=[1, 2], cv_trees=2,
                                  random_state=0, n_jobs=1),
                     "nrgboost": dict(n_trees=2, random_state=0),
                     "eogt": dict(n_trees=2, n_iter=5, random_state=0)}


@pytest.mark.parametrize("name", sorted(registry.available("learner")))
def test_every_learner_reports_progress_under_one_name(name, capsys):
    """``progress=`` on every learner (issue 11): silent by default, a bar on stderr when on."""
    cls = registry.get("learner", name)
    X = pd.DataFrame({"a": np.random.default_rng(0).normal(size=80),
                      "c": np.tile(["x", "y"], 40)})
    kw = {"target": "c"} if name == "gef" else {}
    cls(**PROGRESS_SETTINGS[name]).fit(X, **kw)
    assert capsys.readouterr().err == ""
    model = cls(**PROGRESS_SETTINGS[name], progress=True).fit(X, **kw)
    err = capsys.readouterr().err
    assert model.method_name in err and "]" in err, (name, err)
    with pytest.raises(ValueError, match="progress"):
        cls(progress="yes").fit(X, **kw)
