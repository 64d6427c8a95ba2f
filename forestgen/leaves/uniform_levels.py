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

Small leaves. A leaf of one or two rows has an atom share of 0 or 1, so a held-out row at (or
off) the atom scores zero there. ``prior`` is the pseudo-count strength of a Dirichlet prior
centred on the column's overall shares (restricted to the cell's levels), as ARF's
``prior_strength`` does for its pmfs: a leaf of ``N`` rows keeps ``N / (N + prior)`` of its own
shares.
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
    ``prior`` (default 0): pseudo-count strength of a Dirichlet prior on each leaf's shares at
    the atoms and on its other levels, centred on the column's overall shares (module
    docstring). ``floor`` (default 0: an excluded level has log-probability ``-inf``) only
    affects :meth:`log_prob`; the learners apply their own density floor. All query methods are
    those of :class:`CategoricalLeaf` over the fixed pmf.
    """

    def __init__(self, *, floor: float = 0.0, atoms: tuple | list = (), prior: float = 0.0):
        super().__init__(alpha=0.0, floor=floor)
        self.atoms = [int(a) for a in atoms]
        self.prior = prior

    def get_params(self) -> dict:
        return {"floor": self.floor, "atoms": list(self.atoms), "prior": self.prior}

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.floor < 1:
            raise ValueError(f"floor must be in [0, 1), got {self.floor}")
        if not self.prior >= 0:
            raise ValueError(f"prior must be >= 0, got {self.prior!r}")
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
        if self.prior > 0:
            share, rest = _smoothed_shares(at, n, allowed[:, atoms], n_other, cnt,
                                           _overall_shares(code, w, atoms), float(self.prior))
            base = np.ones(k)
            base[atoms] = 0.0
            e_leaf, e_i = np.nonzero(allowed[:, atoms])
            self._set(np.searchsorted(e_leaf, np.arange(L + 1)), atoms[e_i], share[e_leaf, e_i],
                      rest, allowed, base)
            return self
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


def _overall_shares(code: np.ndarray, w: np.ndarray, atoms: np.ndarray) -> np.ndarray:
    """Weighted share of all fitting pairs at each atom."""
    tot = float(w.sum())
    return np.array([w[code == a].sum() for a in atoms]) / (tot if tot > 0 else 1.0)


def _smoothed_shares(at, n, allowed_atoms, n_other, cnt, g, prior):
    """Posterior-mean shares ``(at + prior g_cell) / (n + prior)`` at each allowed atom and the
    per-level probability ``rest`` of the other allowed levels, where ``g_cell`` is the overall
    share vector (atoms, then the other levels together) restricted to the cell and
    renormalised; a cell where it has no mass falls back to uniform over the allowed levels.
    Each leaf's pmf sums to one."""
    pa = allowed_atoms * g[None, :]
    po = np.where(n_other > 0, max(1.0 - float(g.sum()), 0.0), 0.0)
    z = pa.sum(1) + po
    has = z > 0
    zs = np.where(has, z, 1.0)
    kk = np.maximum(cnt, 1)
    pa = np.where(has[:, None], pa / zs[:, None], allowed_atoms / kk[:, None])
    po = np.where(has, po / zs, n_other / kk)
    share = (at + prior * pa) / (n + prior)[:, None]
    other = (np.maximum(n - at.sum(1), 0.0) + prior * po) / (n + prior)
    rest = np.where(n_other > 0, other / np.maximum(n_other, 1), 0.0)
    return share, rest
