"""Intersection ensembler of generative forests (Nock & Guillame-Bert 2023, eq. (3)-(4); spec
``generative_forests.md`` §1.3-1.4, §4.1).

Unlike a mixture, the trees of a generative forest do not each carry a density: their leaves
intersect into the cells of one partition, and the density is ``R(C) / μ(C)`` on cell ``C``
(the data mass of the cell spread uniformly). :meth:`IntersectionEnsembler.compile` turns a
:class:`~forestgen.families.intersection.cells.CellTable` into one tree whose leaves tile the root
box: the cells holding training mass plus the *empty regions* between them
(:func:`~forestgen.families.intersection.joint_tree.cover_box`). With ``smoothing = ε`` every leaf
``L`` gets the mass ``(1 - ε) R(L) + ε U(L)`` (``U`` the share of the box's measure), i.e. the
density ``(1 - ε) q_G + ε / μ(X)`` of spec §4.1, positive on the whole box; ``ε = 0`` is the
paper's exact ``q_G`` (zero in empty regions). With uniform leaves on the leaves' boxes
(``cell_uniform`` / ``uniform_levels``) the shared leaf-mixture queries are then exact for the
forest: a complete row reaches one leaf, a row with NaN entries reaches every compatible leaf and
their masses add (:meth:`combine`).
"""

from __future__ import annotations

import numpy as np

from forestgen.ensemble.base import Ensembler
from forestgen.families.intersection.cells import KIND_NOMINAL, CellTable
from forestgen.families.intersection.joint_tree import cover_box, partition_tree
from forestgen.logsumexp import segment_logsumexp
from forestgen.registry import register
from forestgen.tree.arrays import ForestArrays


@register("ensembler", "intersection")
class IntersectionEnsembler(Ensembler):
    """Compiles the cell table of a generative forest into one tree of cells (see the module
    docstring); its :meth:`combine` adds the masses of the cells a row reaches."""

    normalised = True
    serves = frozenset({"intersection"})

    def compile(self, table: CellTable, n_levels: np.ndarray, smoothing: float = 0.0
                ) -> tuple[ForestArrays, np.ndarray, np.ndarray, tuple]:
        """``(partition tree, leaf log-weights, cell id of each leaf (-1: empty region),
        leaf boxes (lo, hi, mask))``."""
        tree, leaf_cell = partition_tree(table)
        tree, leaf_cell, boxes = cover_box(tree, leaf_cell, table)
        forest = ForestArrays.from_trees([tree], n_levels)
        R = np.where(leaf_cell >= 0, table.R[np.maximum(leaf_cell, 0)], 0.0)
        R = R / R.sum()
        w = (1.0 - smoothing) * R
        if smoothing > 0:
            w = w + smoothing * volume_share(table, *boxes)
        with np.errstate(divide="ignore"):
            return forest, np.log(w), leaf_cell, boxes

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row log of the summed masses of the reached cells."""
        return segment_logsumexp(ptr, pair_scores)


def volume_share(table: CellTable, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray
                 ) -> np.ndarray:
    """``U(L)``: each box's share of the root box measure (Lebesgue on numeric columns,
    counting on discrete ones, over the root box's levels; integer codes own unit
    intervals)."""
    logu = np.zeros(len(lo))
    for j in range(len(table.kind)):
        if table.kind[j] == KIND_NOMINAL:
            o, k = table.nom_off[j], table.nlev[j]
            logu += np.log(mask[:, o: o + k].sum(1) / table.root_mask[o: o + k].sum())
        else:
            logu += np.log((hi[:, j] - lo[:, j]) / (table.root_hi[j] - table.root_lo[j]))
    return np.exp(logu)
