"""Conformance checks for forestgen components, like scikit-learn's ``check_estimator``.

``check_leaf_model(leaf)``, ``check_splitter(splitter)`` and ``check_learner(model)`` run a
component through the contract every built-in honours, on small real-shaped tables
(:func:`small_tables`: mixed types, NaN, integers, point masses, and query rows outside the
training range). Each raises ``AssertionError`` naming the failed check; they work on
third-party components as well as on everything in the registry::

    from forestgen.testing import check_leaf_model, check_learner
    check_leaf_model(MyLeaf())
    check_learner(ARF(n_trees=5, numeric_leaf=MyLeaf()))
"""

from forestgen.testing.checks import (
    check_leaf_model,
    check_learner,
    check_splitter,
    small_tables,
)

__all__ = ["check_leaf_model", "check_learner", "check_splitter", "small_tables"]
