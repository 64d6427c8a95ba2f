"""Uniform density on a finite leaf cell given exactly (RFDE, DEF).

Unlike :class:`~forestgen.leaves.uniform.UniformLeaf` the cell bounds are taken as given (the
learner has already replaced unbounded sides by its root box), with no width floor: RFDE cells
are dyadic boxes that may be ``2^-52`` of the root box wide and must keep their exact volume.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.uniform import UniformLeaf
from forestgen.registry import register


@register("leaf", "cell_uniform")
class CellUniformLeaf(UniformLeaf):
    """``1 / (hi - lo)`` on ``(lo, hi]`` of each leaf, 0 elsewhere; bounds must be finite."""

    handles_cells = frozenset({"empty"})  # finite cells of positive width only

    def __init__(self):
        self.epsilon = 0.0

    def get_params(self) -> dict:
        return {}

    def fit(self, x, leaf, cell, weight=None):
        lo = np.asarray(cell.lower, float).copy()
        hi = np.asarray(cell.upper, float).copy()
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise ValueError("CellUniformLeaf needs finite cells; replace unbounded sides first")
        if np.any(hi <= lo):
            raise ValueError("CellUniformLeaf got a cell of zero or negative width")
        self.lo_ = lo
        self.hi_ = hi
        ok = ~np.isnan(x)
        w = np.ones(int(ok.sum())) if weight is None else np.asarray(weight, float)[ok]
        self.count_ = np.bincount(np.asarray(leaf)[ok].astype(np.int64), weights=w,
                                  minlength=len(lo))
        return self
