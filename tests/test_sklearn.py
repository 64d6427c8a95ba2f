"""scikit-learn conventions (issue 11): every learner is a BaseEstimator that clones, reports
its fitted state, raises scikit-learn's NotFittedError and works in model selection."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.utils import estimator_checks as ec
from sklearn.utils.validation import check_is_fitted

import forestgen as fg

UNSUPERVISED = {
    "ARF": lambda: fg.ARF(n_trees=5, random_state=0),
    "RFDE": lambda: fg.RFDE(n_trees=5, depth=4, random_state=0),
    "DEF": lambda: fg.DEF(n_trees=3, random_state=0),
}
CHECKS = [ec.check_no_attributes_set_in_init, ec.check_parameters_default_constructible,
          ec.check_get_params_invariance, ec.check_set_params,
          ec.check_estimators_overwrite_params, ec.check_dont_overwrite_parameters,
          ec.check_fit_score_takes_y, ec.check_estimators_unfitted]


@pytest.mark.parametrize("name", ["ARF", "RFDE", "DEF", "GeF"])
def test_estimator_checks(name):
    est = UNSUPERVISED[name]() if name in UNSUPERVISED else fg.GeF(n_trees=3, random_state=0)
    for check in CHECKS:
        if name == "GeF" and check in (ec.check_estimators_overwrite_params,
                                       ec.check_dont_overwrite_parameters,
                                       ec.check_fit_score_takes_y,
                                       ec.check_estimators_unfitted):
            continue  # these fit on scikit-learn's unlabelled blobs; GeF needs y
        check(name, clone(est))


@pytest.mark.parametrize("name", list(UNSUPERVISED))
def test_model_selection_and_fitted_state(name, natural):
    df = natural.drop(columns="weight")
    est = UNSUPERVISED[name]()
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError, match="not fitted"):
        est.sample(3)
    with pytest.raises(NotFittedError):
        est.log_prob(df)
    scores = cross_val_score(est, df, cv=3)
    assert scores.shape == (3,) and np.isfinite(scores).all()
    grid = GridSearchCV(est, {"n_estimators": [2, 4]}, cv=2).fit(df)
    assert grid.best_params_["n_estimators"] in (2, 4)
    check_is_fitted(grid.best_estimator_)
    assert grid.best_estimator_.n_trees == grid.best_params_["n_estimators"]


def test_scikit_learn_parameter_aliases():
    m = fg.ARF(n_estimators=7, min_samples_leaf=9)
    assert (m.n_trees, m.min_node_size) == (7, 9)
    assert (m.n_estimators, m.min_samples_leaf) == (7, 9)
    assert clone(m).set_params(n_estimators=3).n_trees == 3
    assert fg.GeF(n_estimators=4).n_trees == 4 and fg.DEF(min_samples_leaf=3).min_samples_leaf == 3
    with pytest.raises(ValueError, match="not both"):
        fg.RFDE(n_trees=3, n_estimators=4)
    with pytest.raises(ValueError, match="no parameter 'n_tres'"):
        fg.ARF().set_params(n_tres=3)



@pytest.mark.parametrize("name", ["NRGBoost", "Chain", "Anchored", "EOGT", "GFBoost", "RFDE"])
def test_check_is_fitted_follows_each_learners_own_fitted_state(name):
    """scikit-learn's ``check_is_fitted`` refused a fitted NRGBoost (it holds no ``forest_``)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=120), "c": rng.choice(["a", "b"], 120)})
    est = getattr(fg, name)(random_state=0)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    kw = {"n_trees": 5} if name in ("NRGBoost", "GFBoost", "RFDE") else {}
    check_is_fitted(getattr(fg, name)(random_state=0, **kw).fit(df))
