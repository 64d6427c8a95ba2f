"""forestgen.testing run over everything in the registry (and the checks catch bad components)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.leaves.base import LeafModel
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.splitters.base import Splitter
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.testing import check_leaf_model, check_learner, check_splitter

LEAVES = [n for n in registry.available("leaf")
          if issubclass(registry.get("leaf", n), LeafModel)]
SPLITTERS = [n for n in registry.available("splitter")
             if issubclass(registry.get("splitter", n), Splitter)]
# small settings per learner (the checks fit each on two small tables)
LEARNERS = {
    "arf": (dict(n_trees=5, random_state=0, n_jobs=1), {}),
    "gef": (dict(n_trees=5, random_state=0, n_jobs=1), {"target": "c"}),
    "rfde": (dict(n_trees=5, depth=5, random_state=0, n_jobs=1), {}),
    "def": (dict(n_trees=5, max_leaves=16, random_state=0, n_jobs=1), {}),
    "gfboost": (dict(n_trees=5, n_iter=20, random_state=0), {}),
    "eogt": (dict(n_trees=5, n_iter=20, random_state=0), {}),
    "nrgboost": (dict(n_trees=5, max_leaves=16, pool_size=2000, gibbs_burn_in=10,
                      n_normaliser_samples=5000, sample_burn_in=10, random_state=0), {}),
}


@pytest.mark.parametrize("name", LEAVES)
def test_registered_leaf_models_conform(name):
    check_leaf_model(registry.get("leaf", name)())


@pytest.mark.parametrize("name", SPLITTERS)
def test_registered_splitters_conform(name):
    check_splitter(registry.get("splitter", name)())


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_registered_learners_conform(name):
    params, fit_kwargs = LEARNERS[name]
    check_learner(registry.get("learner", name)(**params), fit_kwargs=fit_kwargs)


def test_every_registered_learner_is_covered():
    assert set(registry.available("learner")) <= set(LEARNERS)


class _LeakyLeaf(TruncNormalLeaf):
    """Puts mass outside the cell: its density no longer integrates to one."""

    def log_prob(self, leaf, x):
        out = super().log_prob(leaf, x)
        return np.where(np.isnan(x), out, out - 0.1)


class _PeekingSplitter(ImpuritySplitter):
    """Lets out-of-bag rows choose the tree."""

    def grow(self, data, y, w, rng, limits):
        return super().grow(data, y, np.where(w > 0, w, 1.0), rng, limits)


def test_checks_catch_broken_components():
    with pytest.raises(AssertionError, match="normalisation"):
        check_leaf_model(_LeakyLeaf())
    with pytest.raises(AssertionError, match="weight 0"):
        check_splitter(_PeekingSplitter())
    with pytest.raises(TypeError, match="LeafModel"):
        check_leaf_model(object())


PROGRESS_SETTINGS = {**{k: v[0] for k, v in LEARNERS.items()},
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
