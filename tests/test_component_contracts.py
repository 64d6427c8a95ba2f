"""What a learner does with a researcher's component that breaks its contract, or that uses a
documented form the learners once mishandled: a clear error naming the component (never a
read past a kernel's arrays, a crash or a silent wrong answer), and every documented slot form
working in every learner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from forestgen import ARF, DEF, RFDE, Anchored, Chain, ForestImputer, GeF, registry
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.sampling.ancestral import AncestralSampler
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.testing import check_ensembler, check_splitter


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 300
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": x + 0.5 * rng.normal(size=n),
                         "c": np.where(x + rng.normal(size=n) > 0, "a", "b")})


def _corrupt(t, field: str):
    internal = t.feature >= 0
    if field == "feature":  # a column id past the table
        t.feature = np.where(internal, t.feature + 7, t.feature).astype(np.int32)
    else:  # a NaN threshold at numeric splits
        t.threshold = np.where(internal & (t.cat_off < 0), np.nan, t.threshold)
    return t


class _CorruptSplitter(ImpuritySplitter):
    """The built-in splitter with its records broken afterwards."""

    def __init__(self, *, criterion="gini", min_gain=0.0, field="feature"):
        super().__init__(criterion=criterion, min_gain=min_gain)
        self.field = field

    def grow(self, data, y, w, rng, limits):
        return _corrupt(super().grow(data, y, w, rng, limits), self.field)

    def tree_grower(self, data, y, limits):
        grow = super().tree_grower(data, y, limits)
        return lambda w, rng: _corrupt(grow(w, rng), self.field)


@pytest.mark.parametrize("field, message", [("feature", "column id"), ("threshold", "NaN")])
def test_a_splitter_record_the_kernels_cannot_route_is_refused(table, field, message):
    """A column id past the table made the routing kernels read outside each row (``log_prob``
    changed from run to run with the same seed), and NaN thresholds left most leaves empty;
    both are refused when the tree is recorded, and by ``check_splitter``."""
    with pytest.raises(ValueError, match=f"TreeRecord.*{message}"):
        ARF(n_trees=3, random_state=0, splitter=_CorruptSplitter(field=field)).fit(table)
    with pytest.raises(AssertionError, match=message):
        check_splitter(_CorruptSplitter(field=field))


class _BadLeaves(AncestralSampler):
    def __init__(self, *, how="past"):
        self.how = how

    def draw_leaves(self, log_weight, n, rng):
        leaf = super().draw_leaves(log_weight, n, rng)
        if self.how == "past":
            return leaf + len(log_weight)
        if self.how == "short":
            return leaf[:-1]
        return leaf.astype(np.float64)


@pytest.mark.parametrize("how, message", [("past", "outside 0"), ("short", "must return"),
                                          ("float", "integer leaf ids")])
def test_leaf_draws_of_a_sampler_are_checked(table, how, message):
    """Leaf ids past the forest crashed the process (segmentation fault), one id too few
    returned fewer rows than asked, and float ids failed deep in an index: each is now an
    error naming the sampler, unconditional and conditional alike."""
    m = ARF(n_trees=3, random_state=0, sampler=_BadLeaves(how=how)).fit(table)
    with pytest.raises(ValueError, match=f"_BadLeaves.draw_leaves.*{message}"):
        m.sample(5, random_state=0)
    with pytest.raises(ValueError, match=f"_BadLeaves.draw_leaves.*{message}"):
        m.sample(5, conditions={"c": "a"}, random_state=0)


@pytest.mark.parametrize("learner", [ARF, GeF, RFDE, DEF, Chain, Anchored])
def test_a_leaf_slot_takes_a_name_a_class_or_an_instance(table, learner):
    """ARF's back-off root copied ``discrete_leaf`` as an instance: a name or a class raised
    inside the fit."""
    kw = {"target": "c"} if learner is GeF else {}
    lps = [learner(random_state=0, discrete_leaf=spec).fit(table, **kw).log_prob(table.head(5))
           for spec in ("categorical", CategoricalLeaf, CategoricalLeaf())]
    np.testing.assert_array_equal(lps[0], lps[1])
    np.testing.assert_array_equal(lps[0], lps[2])


@pytest.mark.parametrize("slot, spec", [("numeric_leaf", "categorical"),
                                        ("discrete_leaf", "truncnorm"),
                                        ("discrete_leaf", TruncNormalLeaf())])
@pytest.mark.parametrize("learner", [ARF, RFDE, Chain])
def test_a_leaf_of_the_other_kind_is_refused_at_construction(learner, slot, spec):
    """A discrete leaf in ``numeric_leaf`` fitted silently (every draw of ``x`` was 0.0)."""
    with pytest.raises(ValueError, match=f"{learner.__name__}: {slot} .* leaf model; the slot"):
        learner(**{slot: spec})


@pytest.mark.parametrize("slot, spec", [("numeric_leaf", TruncNormalLeaf()),
                                        ("sampler", AncestralSampler()),
                                        ("ensembler", MixtureEnsembler()),
                                        ("splitter", ImpuritySplitter())])
def test_sklearn_clone_copies_component_instances(table, slot, spec):
    """``clone`` asks every parameter for ``get_params(deep=False)``, which components did not
    take: any learner holding an instance failed to clone, and so did the imputer around it."""
    m = ARF(n_trees=3, random_state=0, **{slot: spec})
    c = clone(m)
    assert type(getattr(c, slot)) is type(spec) and getattr(c, slot) is not spec
    assert getattr(c, slot).get_params() == spec.get_params()
    imp = ForestImputer(learner=m, random_state=0)
    gaps = table.copy()
    gaps.loc[::7, "y"] = np.nan
    assert not imp.fit_transform(gaps)["y"].isna().any()


class _CachingLeaf(TruncNormalLeaf):
    """Private state set in ``__init__``: no constructor parameter."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._cache = {}


def test_private_attributes_are_no_parameters(table):
    assert "_cache" not in _CachingLeaf().get_params()
    m = ARF(n_trees=3, random_state=0, numeric_leaf=_CachingLeaf()).fit(table)
    assert np.isfinite(m.log_prob(table.head(5))).all()


class _ForgotOneOverB(MixtureEnsembler):
    def leaf_log_weights_from_counts(self, cnt, leaf_tree, n_trees):
        return super().leaf_log_weights_from_counts(cnt, leaf_tree, n_trees) + np.log(n_trees)


class _TreeWeighted(MixtureEnsembler):
    """Trees weighted 1, 2, 3, ... (normalised): still a mixture."""

    def leaf_log_weights_from_counts(self, cnt, leaf_tree, n_trees):
        lw = super().leaf_log_weights_from_counts(cnt, leaf_tree, n_trees) + np.log(n_trees)
        tw = np.arange(1, n_trees + 1, dtype=float)
        return lw + np.log(tw / tw.sum())[leaf_tree]


@pytest.mark.parametrize("learner", [ARF, GeF, RFDE, DEF, Anchored])
def test_a_mixture_s_leaf_weights_must_sum_to_one(table, learner):
    """An ensembler forgetting the ``1 / B`` made a density that integrates to B (400 in
    Anchored) without a word; it is refused at fit, naming it. Trees of unequal weight are a
    mixture still: the model fits, integrates to one, and the checker accepts it (it asked
    every tree's leaves to weigh ``1 / B``)."""
    kw = {"target": "c"} if learner is GeF else {}
    with pytest.raises(ValueError, match="_ForgotOneOverB.*sum to"):
        learner(random_state=0, ensembler=_ForgotOneOverB()).fit(table, **kw)
    m = learner(random_state=0, ensembler=_TreeWeighted()).fit(table, **kw)
    assert np.exp(m.leaf_log_weight_).sum() == pytest.approx(1.0, abs=1e-9)
    grid = np.linspace(table["x"].min() - 1, table["x"].max() + 1, 4001)
    dens = np.exp(m.log_prob(pd.DataFrame({"x": grid})))
    assert np.sum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid)) == pytest.approx(1.0, abs=0.01)


def test_the_ensembler_check_takes_unequal_tree_weights():
    with registry.registered(("ensembler", "test_tree_weighted", _TreeWeighted)):
        check_ensembler(_TreeWeighted())


def test_the_registry_checks_kinds_and_keeps_one_name_per_class():
    """A sampler registered as a leaf was accepted (and later named a missing leaf); an alias
    renamed the class (``registry_name`` the alias, ``name_of`` the first name); a criterion's
    name in the splitter slot now says what it is."""
    with pytest.raises(TypeError, match="AncestralSampler.*no LeafModel subclass"):
        registry.register("leaf", "test_not_a_leaf")(AncestralSampler)
    assert "test_not_a_leaf" not in registry.available("leaf")

    class _Leaf(TruncNormalLeaf):
        pass

    with registry.registered(("leaf", "test_first", _Leaf), ("leaf", "test_alias", _Leaf)):
        assert _Leaf.registry_name == registry.name_of("leaf", _Leaf) == "test_first"
        assert registry.get("leaf", "test_alias") is _Leaf
    with pytest.raises(KeyError, match="'gini' is a registered splitter"):
        registry.get("leaf", "gini")
