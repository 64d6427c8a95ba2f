"""Intersection ensembler of generative forests (Nock & Guillame-Bert 2023, eq. (3)-(4); spec
``generative_forests.md`` §1.3-1.4, §4.1).

Unlike a mixture, the trees of a generative forest do not each carry a density: their leaves
intersect into the cells of one partition, and the density is ``R(C) / μ(C)`` on cell ``C``
(the data mass of the cell spread uniformly). :meth:`IntersectionEnsembler.compile` turns a
:class:`~forestgen.tree.cells.CellTable` into one tree whose leaves are the cells, with leaf
log-weights ``log R(C)``; with uniform leaves on the cells (``cell_uniform`` /
``uniform_levels``) the shared leaf-mixture queries are then exact for the forest: a complete row
reaches one cell, a row with NaN entries reaches every compatible cell and their masses add
(:meth:`combine`).
"""

from __future__ import annotations

import numpy as np

from forestgen.ensemble.base import Ensembler
from forestgen.ensemble.mixture import segment_logsumexp
from forestgen.registry import register
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.cells import CellTable, partition_tree


@register("ensembler", "intersection")
class IntersectionEnsembler(Ensembler):
    normalised = True

    def compile(self, table: CellTable, n_levels: np.ndarray
                ) -> tuple[ForestArrays, np.ndarray, np.ndarray]:
        """``(partition tree, leaf log-weights log R(C), cell id of each leaf)``."""
        tree, leaf_cell = partition_tree(table)
        forest = ForestArrays.from_trees([tree], n_levels)
        R = table.R[leaf_cell]
        with np.errstate(divide="ignore"):
            return forest, np.log(R / R.sum()), leaf_cell

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row log of the summed masses of the reached cells."""
        return segment_logsumexp(ptr, pair_scores)
