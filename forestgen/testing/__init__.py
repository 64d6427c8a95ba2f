"""Conformance checks for forestgen components, like scikit-learn's ``check_estimator``.

``check_leaf_model(leaf)``, ``check_splitter(splitter)``, ``check_ensembler(ensembler)``,
``check_sampler(sampler)`` and ``check_learner(model)`` run a component through the contract
every built-in honours, on small real-shaped tables (:func:`small_tables`: mixed types, NaN,
integers, point masses, and query rows outside the training range) and, for leaf models, edge
cells (:data:`EDGE_CELLS`: zero-width, unbounded, empty, extreme scales). An ensembler or a
sampler is checked inside a learner of each family it ``serves``. The energy family's parts
have ``check_normaliser`` and ``check_energy_leaf``. Each raises ``AssertionError`` naming the
failed check; they work on third-party components as well as on everything in the registry
(``tests/test_conformance.py`` runs them over the whole registry)::

    from forestgen.testing import check_leaf_model, check_learner, check_sampler
    check_leaf_model(MyLeaf())
    check_sampler(MySampler())
    check_learner(ARF(n_trees=5, numeric_leaf=MyLeaf(), sampler=MySampler()))

``check_learner`` also runs the statistical checks of :mod:`forestgen.testing.statistical`
(``check_learner_statistics``: draws against the density, ``expect`` against the draws,
conditional draws against the conditional density, torch against numpy, with a stated
false-positive rate).
"""

from forestgen.testing.checks import EDGE_CELLS, check_leaf_model, check_learner, check_splitter
from forestgen.testing.components import (
    check_cell_splitter,
    check_energy_leaf,
    check_ensembler,
    check_normaliser,
    check_sampler,
)
from forestgen.testing.fixtures import small_tables
from forestgen.testing.statistical import check_learner_statistics, check_statistics

__all__ = ["EDGE_CELLS", "check_cell_splitter", "check_energy_leaf", "check_ensembler",
           "check_leaf_model", "check_learner", "check_learner_statistics", "check_normaliser",
           "check_sampler", "check_splitter", "check_statistics", "small_tables"]
