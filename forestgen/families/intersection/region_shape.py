"""EOGT's regions spread by the column marginals (issue 37; a departure from the paper, described
in :class:`~forestgen.families.intersection.eogt.EOGT`).

The paper's EOGT (Nock & Guillame-Bert 2023, §4.3; spec ``generative_forests.md`` §3.4) draws
uniformly in the region ``C`` its star-node walk reaches. With ``cell_shape="marginal"`` a region
instead spreads its mass ``Q̂(C)`` by the product of the column marginals
(:mod:`~forestgen.families.intersection.marginals`) restricted to it: column ``j`` has in ``C``
the density ``p_j(x_j) / P_j(C_j)``. With ``smooth_toward="marginals"`` the smoothing component
is the root box spread the same way, i.e. the product of the marginals itself.

Point masses keep their per-region shares (:mod:`~forestgen.families.intersection.region_atoms`):
on a numeric column with atoms a region is ``Σ_a s_a δ_a + (1 - Σ_a s_a)`` times the marginal's
continuous part (the histogram of the values off the atoms) restricted to ``C_j``; on a column
coded as levels with spike levels the spikes take their shares and the rest is spread over the
region's other levels in proportion to the column's pmf. Every region stays exactly normalised,
so the law does.

:class:`MarginalShape` answers, for many regions (boxes ``lo, hi [m, d]``, nominal masks ``mask
[m, L]``) at once, what the queries need of the shape: the density of a row's observed entries,
each column's pmf, the share of a range, draws (free columns, or a column restricted to an
interval) and means.
"""

from __future__ import annotations

import numpy as np

from forestgen.families.intersection.marginals import ColumnMarginal
from forestgen.modelfile import check_array
from forestgen.tree.grow_midpoint import KIND_NOMINAL, KIND_NUMERIC


class MarginalShape:
    """The column marginals ``marg`` (one :class:`ColumnMarginal` per column) and the column
    layout ``kind, nlev, nom_off`` (:func:`~forestgen.families.boxes.column_layout`)."""

    def __init__(self, marg: list[ColumnMarginal], kind, nlev, nom_off):
        self.marg = list(marg)
        self.kind = np.asarray(kind)
        self.nlev = np.asarray(nlev)
        self.nom_off = np.asarray(nom_off)
        self._dens = [None if m.pmf is not None else np.diff(m.cdf) / np.diff(m.edges)
                      for m in self.marg]

    # ------------------------------------------------------------------ numeric columns
    def cont_cdf(self, j: int, v) -> np.ndarray:
        """The continuous part's cdf of numeric column ``j`` at ``v``."""
        m = self.marg[j]
        return np.interp(np.asarray(v, float), m.edges, m.cdf)

    def cont_mass(self, j: int, a, b) -> np.ndarray:
        """The continuous part's mass of ``(a, b]`` (0 when empty)."""
        a = np.asarray(a, float)
        b = np.maximum(a, np.asarray(b, float))
        return np.maximum(self.cont_cdf(j, b) - self.cont_cdf(j, a), 0.0)

    def cont_log_density(self, j: int, v: float) -> float:
        """Log density of the continuous part at ``v`` (bins ``(e_k, e_k+1]``)."""
        e, dens = self.marg[j].edges, self._dens[j]
        b = int(np.clip(np.searchsorted(e, v, side="left") - 1, 0, len(dens) - 1))
        return float(np.log(dens[b]))

    def cont_draw(self, j: int, a, b, u) -> np.ndarray:
        """Draws of the continuous part restricted to ``(a, b]`` by inversion of uniforms
        ``u``."""
        m = self.marg[j]
        a = np.asarray(a, float)
        b = np.maximum(a, np.asarray(b, float))
        fa, fb = self.cont_cdf(j, a), self.cont_cdf(j, b)
        x = np.interp(fa + np.asarray(u, float) * (fb - fa), m.cdf, m.edges)
        return np.clip(x, a, b)

    def cont_mean(self, j: int, a, b) -> np.ndarray:
        """Mean of the continuous part restricted to ``(a, b]``."""
        e, dens = self.marg[j].edges, self._dens[j]
        a = np.atleast_1d(np.asarray(a, float))
        b = np.maximum(a, np.atleast_1d(np.asarray(b, float)))
        s = np.clip(a[:, None], e[None, :-1], e[None, 1:])
        t = np.clip(b[:, None], e[None, :-1], e[None, 1:])
        mass = (dens[None, :] * (t - s)).sum(1)
        first = (dens[None, :] * (t - s) * (0.5 * s + 0.5 * t)).sum(1)  # (no t * t overflow)
        return np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), 0.5 * (a + b))

    # ------------------------------------------------------------------ discrete columns
    def allowed(self, j: int, lo, hi, mask) -> np.ndarray:
        """``[m, k]``: the levels each region allows on discrete column ``j``."""
        k = int(self.nlev[j])
        if self.kind[j] == KIND_NOMINAL:
            o = int(self.nom_off[j])
            return np.asarray(mask)[:, o: o + k].astype(bool)
        codes = np.arange(k)
        return (codes[None, :] > np.asarray(lo)[:, j, None]) & (
            codes[None, :] <= np.asarray(hi)[:, j, None])

    def level_probs(self, j: int, lo, hi, mask, share: np.ndarray | None = None,
                    spikes: np.ndarray | None = None) -> np.ndarray:
        """``[m, k]``: discrete column ``j``'s pmf in each region: the column's pmf over the
        levels it allows, renormalised; with spike levels ``spikes`` and their shares
        ``share [m, A]``, the spikes take their shares and the rest goes to the other allowed
        levels in proportion to the pmf."""
        allowed = self.allowed(j, lo, hi, mask)
        pmf = self.marg[j].pmf
        w = allowed * pmf[None, :]
        if spikes is None:
            tot = w.sum(1)
            return w / np.where(tot > 0, tot, 1.0)[:, None]
        a = np.asarray(spikes, np.int64)
        w[:, a] = 0.0
        tot = w.sum(1)
        rest = np.maximum(1.0 - share.sum(1), 0.0)
        p = w * (rest / np.where(tot > 0, tot, 1.0))[:, None]
        p[:, a] = share * allowed[:, a]
        return p

    # ------------------------------------------------------------------ per region
    def column_pmf(self, j: int, lo, hi, mask, atoms, shares) -> np.ndarray:
        """:meth:`level_probs` of discrete column ``j``, with its spike levels' region shares
        when ``atoms`` (:class:`~.region_atoms.RegionAtoms`) holds the column."""
        c = _atom_index(atoms, j)
        if c is None:
            return self.level_probs(j, lo, hi, mask)
        return self.level_probs(j, lo, hi, mask, shares[c], atoms.atoms[c])

    def log_factor(self, x: np.ndarray, lo, hi, mask, atoms, shares) -> np.ndarray:
        """``[m]``: the log density (counting measure on discrete columns and at atoms) of
        the observed entries of encoded row ``x`` in each region; ``-inf`` where an entry
        lies outside the region."""
        lo, hi = np.atleast_2d(lo), np.atleast_2d(hi)
        out = np.zeros(len(lo))
        if not len(lo):
            return out
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in map(int, np.flatnonzero(~np.isnan(x))):
                v = float(x[j])
                if self.kind[j] != KIND_NUMERIC:
                    k = int(self.nlev[j])
                    if not (0 <= v < k and v == int(v)):
                        out -= np.inf
                        continue
                    out += np.log(self.column_pmf(j, lo, hi, mask, atoms, shares)[:, int(v)])
                    continue
                inside = (lo[:, j] < v) & (v <= hi[:, j])
                c = _atom_index(atoms, j)
                if c is not None:
                    hit = np.flatnonzero(atoms.atoms[c] == v)
                    s = shares[c]
                    if len(hit):
                        out += np.where(inside, np.log(s[:, hit[0]]), -np.inf)
                        continue
                    out += np.log(np.maximum(1.0 - s.sum(1), 0.0))
                mass = self.cont_mass(j, lo[:, j], hi[:, j])
                out += np.where(inside, self.cont_log_density(j, v) - np.log(mass), -np.inf)
        return out

    def range_share(self, j: int, a: float, b: float, lo, hi, atoms, shares) -> np.ndarray:
        """``[m]``: the probability of the closed range ``[a, b]`` of numeric column ``j`` in
        each region."""
        l, h = lo[:, j], hi[:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            cont = self.cont_mass(j, np.maximum(l, a), np.minimum(h, b)) / self.cont_mass(j, l, h)
        c = _atom_index(atoms, j)
        if c is None:
            return cont
        s, av = shares[c], atoms.atoms[c]
        hit = ((av[None, :] > l[:, None]) & (av[None, :] <= h[:, None])
               & (av[None, :] >= a) & (av[None, :] <= b))
        return (1.0 - s.sum(1)) * cont + (s * hit).sum(1)

    def mean(self, j: int, lo, hi, mask, atoms, shares) -> np.ndarray:
        """``[m]``: the mean of ordered column ``j`` (encoded units) in each region."""
        if self.kind[j] != KIND_NUMERIC:
            p = self.column_pmf(j, lo, hi, mask, atoms, shares)
            return p @ np.arange(p.shape[1], dtype=float)
        cont = self.cont_mean(j, lo[:, j], hi[:, j])
        c = _atom_index(atoms, j)
        if c is None:
            return cont
        s = shares[c]
        return s @ atoms.atoms[c] + (1.0 - s.sum(1)) * cont

    def draw(self, X: np.ndarray, free: np.ndarray, lo, hi, mask, atoms, shares,
             rng: np.random.Generator) -> None:
        """Draw the columns free in ``free [d]`` of the rows ``X [m, d]`` (in place) from
        their regions' shapes: discrete columns from :meth:`column_pmf`, numeric ones on an
        atom with its share, else from the continuous part restricted to the region."""
        m = len(X)
        if not m:
            return
        for j in map(int, np.flatnonzero(free)):
            u = rng.random(m)
            if self.kind[j] != KIND_NUMERIC:
                p = self.column_pmf(j, lo, hi, mask, atoms, shares)
                cum = np.cumsum(p, 1)
                X[:, j] = np.minimum((cum < u[:, None] * cum[:, -1:]).sum(1), p.shape[1] - 1)
                continue
            X[:, j] = self.cont_draw(j, lo[:, j], hi[:, j], u)
            c = _atom_index(atoms, j)
            if c is not None:
                a = atoms.atoms[c]
                pick = (np.cumsum(shares[c], 1) <= rng.random(m)[:, None]).sum(1)
                hit = pick < len(a)
                X[hit, j] = a[pick[hit]]

    # ------------------------------------------------------------------ persistence
    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        parts: dict[str, list] = {k: [] for k in ("edges", "cdf", "pmf", "atoms", "share")}
        counts = []
        for m in self.marg:
            vals = (m.edges, m.cdf, m.pmf, m.atoms, m.atom_share)
            row = []
            for k, v in zip(parts, vals):
                v = np.zeros(0) if v is None else np.asarray(v, float)
                parts[k].append(v)
                row.append(len(v))
            counts.append(row)
        out = {prefix + k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}
        out[prefix + "counts"] = np.asarray(counts, np.int64).reshape(len(self.marg), 5)
        return out

    @classmethod
    def from_arrays(cls, arrays, prefix: str, kind, nlev, nom_off) -> MarginalShape:
        """Rebuild from a model file's arrays, checked against the column layout."""
        d = len(kind)
        counts = check_array(prefix + "counts", arrays[prefix + "counts"], "iu", (d, 5), low=0)
        names = ("edges", "cdf", "pmf", "atoms", "share")
        flat = [check_array(prefix + k, arrays[prefix + k], "f", finite=True) for k in names]
        if any(int(counts[:, i].sum()) != len(f) for i, f in enumerate(flat)):
            raise ValueError(f"{prefix}counts do not match the marginals' arrays")
        off = np.vstack([np.zeros((1, 5), np.int64), np.cumsum(counts, 0)])
        marg = []
        for j in range(d):
            e, c, p, a, s = (flat[i][off[j, i]: off[j + 1, i]] for i in range(5))
            if kind[j] == KIND_NUMERIC:
                if (len(e) < 2 or len(c) != len(e) or np.any(np.diff(e) <= 0)
                        or np.any(np.diff(c) <= 0) or c[0] != 0.0 or abs(c[-1] - 1.0) > 1e-9
                        or len(p) or len(a) != len(s) or np.any((s < 0) | (s > 1))
                        or s.sum() > 1 + 1e-9):
                    raise ValueError(f"{prefix}: the marginal of column {j} is not a valid "
                                     f"histogram with atom shares")
                marg.append(ColumnMarginal(e, c, None, a, s))
            else:
                if (len(e) or len(c) or len(a) or len(s) or len(p) != int(nlev[j])
                        or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9):
                    raise ValueError(f"{prefix}: the marginal of column {j} is not a pmf over "
                                     f"its levels")
                marg.append(ColumnMarginal(None, None, p))
        return cls(marg, kind, nlev, nom_off)


def _atom_index(atoms, j: int) -> int | None:
    """Position of column ``j`` among the atom columns of ``atoms`` (``None``: not one)."""
    if not atoms:
        return None
    hit = np.flatnonzero(atoms.columns == j)
    return int(hit[0]) if len(hit) else None
