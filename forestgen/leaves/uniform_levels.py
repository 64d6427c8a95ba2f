"""Uniform-over-allowed-levels leaves for discrete columns of RFDE and DEF.

Both methods put a leaf's mass uniformly on its cell with respect to a reference measure
(Wen & Hang 2022, eq. 4; Bravo 2025 §1.3-2.2): Lebesgue volume on numeric sides and the counting
measure on discrete ones. The pmf of a discrete column in a leaf is therefore
``1 / #allowed levels`` on the levels the cell allows and 0 elsewhere, independent of the data.

Spikes. A level holding a large share of an integer column (adult's ``capital-gain = 0``) is a
point mass of the counting measure's column just as an atom of a numeric column is: spread
uniformly over a cell of many levels it would be diluted (issue 11). With ``atoms`` (level codes)
each leaf keeps its own rows' share at each atom it allows and spreads the rest uniformly over
its other allowed levels, as :class:`~forestgen.leaves.point_mass.PointMassLeaf` does for
numeric columns.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.registry import register

#: a level is a spike when it holds at least this share of the rows and at least
#: :data:`SPIKE_RATIO` times the uniform share ``1 / k`` (at most ``k / 2`` levels qualify)
SPIKE_SHARE = 0.1
SPIKE_RATIO = 2.0


def spike_levels(codes: np.ndarray, k: int) -> list[int]:
    """Codes of the levels holding at least ``max(SPIKE_SHARE, SPIKE_RATIO / k)`` of the
    (non-NaN) ``codes`` of a column of ``k`` levels."""
    codes = np.asarray(codes, float)
    codes = codes[~np.isnan(codes)].astype(np.int64)
    if k < 2 or codes.size == 0:
        return []
    share = np.bincount(codes[(codes >= 0) & (codes < k)], minlength=k) / codes.size
    return [int(c) for c in np.nonzero(share >= max(SPIKE_SHARE, SPIKE_RATIO / k))[0]]


@register("leaf", "uniform_levels")
class UniformLevelsLeaf(CategoricalLeaf):
    """Uniform pmf over the levels each leaf cell allows (counting reference measure).

    ``atoms`` (level codes, default none): each leaf gives each allowed atom its rows' share
    there and the rest of its mass uniformly to its other allowed levels (module docstring).
    ``floor`` (default 0: an excluded level has log-probability ``-inf``) only affects
    :meth:`log_prob`; the learners apply their own density floor. All query methods are those
    of :class:`CategoricalLeaf` over the fixed pmf.
    """

    def __init__(self, *, floor: float = 0.0, atoms: tuple | list = ()):
        super().__init__(alpha=0.0, floor=floor)
        self.atoms = [int(a) for a in atoms]

    def get_params(self) -> dict:
        return {"floor": self.floor, "atoms": list(self.atoms)}

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.floor < 1:
            raise ValueError(f"floor must be in [0, 1), got {self.floor}")
        L, k = len(cell.lower), max(int(cell.n_levels), 1)
        allowed = np.ones((L, k), bool) if cell.allowed is None else np.asarray(cell.allowed, bool)
        cnt = allowed.sum(1)
        x = np.asarray(x, float)
        ok = ~np.isnan(x)
        w = np.ones(int(ok.sum())) if weight is None else np.asarray(weight, float)[ok]
        lv = np.asarray(leaf)[ok].astype(np.int64)
        self.count_ = np.bincount(lv, weights=w, minlength=L).astype(np.float64)
        atoms = np.array(sorted(a for a in set(self.atoms) if 0 <= a < k), np.int64)
        if atoms.size == 0:
            # no listed levels: every allowed level has the leaf's shared probability rest_
            self._set(np.zeros(L + 1, np.int64), np.zeros(0, np.int32), np.zeros(0),
                      np.where(cnt > 0, 1.0 / np.maximum(cnt, 1), 0.0), allowed)
            return self
        code = x[ok].astype(np.int64)
        at = np.zeros((L, atoms.size))  # each leaf's weight at each atom
        for i, a in enumerate(atoms):
            sel = code == a
            at[:, i] = np.bincount(lv[sel], weights=w[sel], minlength=L)
        at *= allowed[:, atoms]
        n = self.count_
        n_other = cnt - allowed[:, atoms].sum(1)  # allowed levels that are not atoms
        share = at / np.where(n > 0, n, 1.0)[:, None]
        other = 1.0 - share.sum(1)
        # a leaf of no rows stays uniform over its allowed levels; one whose cell allows no
        # other level gives the atoms all of its mass
        uniform = (n <= 0) | ((n_other == 0) & (at.sum(1) <= 0))
        share = np.where(uniform[:, None], allowed[:, atoms] / np.maximum(cnt, 1)[:, None],
                         share)
        share = np.where(((n_other == 0) & ~uniform)[:, None],
                         at / np.maximum(at.sum(1), 1e-300)[:, None], share)
        rest = np.where(uniform, 1.0 / np.maximum(cnt, 1),
                        np.where(n_other > 0, other / np.maximum(n_other, 1), 0.0))
        base = np.ones(k)
        base[atoms] = 0.0  # unlisted atoms (not allowed) get nothing from rest_
        e_leaf, e_i = np.nonzero(allowed[:, atoms])
        self._set(np.searchsorted(e_leaf, np.arange(L + 1)), atoms[e_i], share[e_leaf, e_i],
                  np.maximum(rest, 0.0), allowed, base)
        return self

    def log_max_density(self, leaf):
        """Log of the largest level probability in each leaf (``-log #allowed levels``
        without atoms)."""
        with np.errstate(divide="ignore"):
            return np.log(self.probs(leaf).max(axis=1))
