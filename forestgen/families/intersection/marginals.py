"""The training columns' marginals, for GF.Boost's cells and smoothing (issue 37; a departure
from the paper, described in :mod:`~forestgen.families.intersection.gfboost`).

Each column gets a marginal distribution on the root box: a numeric column a histogram (bins at
its quantiles, one per two values, at most :data:`MAX_BINS`, faces halfway between two values;
each bin's mass that of a Gaussian kernel density estimate, its bandwidth a multiple of
Silverman's rule chosen by leave-one-out likelihood, so neighbouring bins share their values; on a
column with point masses, of the values off the atoms, which keep their shares; on an integer
column bin faces at half-integers, so each integer keeps a constant density over its unit
interval), a discrete column a pmf over its
levels; both with ``prior`` pseudo-rows spread uniformly over the root box (Lebesgue share on
numeric columns, one share per level of the support on discrete ones), so that every bin and
level of the support has positive mass. With ``spikes`` (EOGT's marginals) a numeric column
with a grid (fixed decimals or a step) also gets a bin on the grid cell of every value seen at
least twice, and a share ``λ`` of its mass goes to those values in proportion to their
repetitions (:func:`grid_spikes`, ``λ`` by leave-one-out likelihood): measured values that
recur (round tips, integer readings) keep their spikes, which a kernel smooths away. From them:

* :func:`box_mass` — ``M(L) = prod_j P_j(L_j)``, each box's mass under their product (a
  product measure: boxes tiling the root box sum to one);
* :func:`marginal_leaves` — leaf models giving each column, in each leaf, its marginal
  restricted to the leaf's cell (:class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`;
  discrete columns: the pmf over the levels the cell allows, renormalised).

With leaf weights ``(1 - ε) R(L) + ε M(L)`` and these leaves, the smoothing component
``Σ_L M(L) prod_j p_j(x_j) 1[x_j in L_j] / P_j(L_j)`` is exactly the product of the marginals.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from forestgen.leaves.base import ColumnCell
from forestgen.leaves.marginal_cell import MarginalCellLeaf
from forestgen.leaves.uniform_levels import UniformLevelsLeaf
from forestgen.tree.grow_midpoint import KIND_NOMINAL

#: most histogram bins of a numeric column
MAX_BINS = 128


class ColumnMarginal(NamedTuple):
    """One column's marginal: ``edges`` / ``cdf`` of the histogram of a numeric column's
    values off its ``atoms``, which hold the shares ``atom_share`` of its values, or the
    ``pmf`` of a discrete column."""

    edges: np.ndarray | None
    cdf: np.ndarray | None
    pmf: np.ndarray | None
    atoms: np.ndarray | None = None
    atom_share: np.ndarray | None = None

    def interval_mass(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``P(lo < X <= hi)`` of a numeric column, its atoms included."""
        h = np.interp(hi, self.edges, self.cdf) - np.interp(lo, self.edges, self.cdf)
        if self.atoms is None or not len(self.atoms):
            return h
        inside = self.atoms_inside(lo, hi)
        return (1.0 - self.atom_share.sum()) * h + inside @ self.atom_share

    def atoms_inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``[boxes, atoms]``: atom ``a`` lies in ``(lo, hi]``."""
        return (self.atoms[None, :] > lo[:, None]) & (self.atoms[None, :] <= hi[:, None])


def fit_marginals(Z: np.ndarray, schema, kind, nlev, nom_off, box_lo, box_hi, root_mask,
                  prior: float = 1.0, spikes: bool = False) -> list[ColumnMarginal]:
    """Each column's marginal from the observed values of the encoded rows ``Z`` (module
    docstring); ``spikes``: on a numeric column with a grid, repeated values keep part of their
    mass on their grid cell (:func:`grid_spikes`)."""
    out = []
    for j, spec in enumerate(schema.columns):
        z = Z[:, j]
        z = z[~np.isnan(z)]
        if spec.is_discrete:
            k = int(nlev[j])
            if kind[j] == KIND_NOMINAL:
                support = np.asarray(root_mask[nom_off[j]: nom_off[j] + k], bool)
            else:
                codes = np.arange(k)
                support = (codes > box_lo[j]) & (codes <= box_hi[j])
            count = np.bincount(z.astype(np.int64), minlength=k)[:k].astype(float)
            pmf = (count + prior * support / support.sum()) / (len(z) + prior)
            out.append(ColumnMarginal(None, None, pmf))
            continue
        atoms = np.asarray(spec.atoms or [], float)
        share = np.array([np.mean(z == a) if len(z) else 0.0 for a in atoms])
        if len(atoms):
            z = z[~np.isin(z, atoms)]
        a, b = float(box_lo[j]), float(box_hi[j])
        z = np.sort(z)
        n = len(z)
        bins = int(np.clip(n // 2, 1, MAX_BINS))
        inner = np.quantile(z, np.linspace(0, 1, bins + 1)[1:-1]) if n and bins > 1 else \
            np.zeros(0)
        if spec.kind == "integer":
            inner = np.floor(inner) + 0.5
        elif len(inner):  # between two values, so that no value lies on a bin face
            uniq = np.unique(z)
            k = np.searchsorted(uniq, inner, side="right")
            ok = k < len(uniq)
            inner = 0.5 * (uniq[np.maximum(k[ok] - 1, 0)] + uniq[k[ok]])
        edges = _spaced(np.r_[a, inner[(inner > a) & (inner < b)], b], 1e-6 * (b - a))
        cells = grid_cells(z, spec, a, b) if spikes else None
        if cells is not None:
            edges = _spaced(np.r_[edges, cells[0], cells[1]], 1e-6 * (b - a))
        mass = (n * kernel_mass(z, edges) + prior * np.diff(edges) / (b - a)) / (n + prior)
        if cells is not None:
            mass = grid_spikes(z, edges, mass, cells)
        mass = np.maximum(mass, 1e-12)  # every bin keeps a positive density
        cdf = np.r_[0.0, np.cumsum(mass)]
        out.append(ColumnMarginal(edges, cdf / cdf[-1], None, atoms, share))
    return out


#: weights of the repeated values' grid cells tried by leave-one-out likelihood
SPIKE_WEIGHTS = (0.0, 0.1, 0.25, 0.5, 0.75)


def grid_cells(z: np.ndarray, spec, a: float, b: float) -> tuple | None:
    """``(lo, hi, count)``: the grid cells ``(v - h/2, v + h/2]`` (inside ``(a, b]``) of the
    values ``v`` of sorted ``z`` seen at least twice on a column with a grid of step ``h``;
    ``None`` without a grid or a repeated value."""
    if not spec.has_grid or len(z) < 4:
        return None
    h = spec.step if spec.step is not None else 10.0 ** -spec.decimals
    vals, cnt = np.unique(z, return_counts=True)
    rep = cnt >= 2
    if not rep.any() or not h > 0:
        return None
    v = vals[rep]
    return np.maximum(v - h / 2, a), np.minimum(v + h / 2, b), cnt[rep].astype(float)


def grid_spikes(z: np.ndarray, edges: np.ndarray, mass: np.ndarray, cells: tuple) -> np.ndarray:
    """Bin masses ``(1 - λ) mass + λ e``: ``e`` the repeated values' shares of their
    repetitions, each on the bin holding it (its grid cell), ``λ`` of :data:`SPIKE_WEIGHTS`
    of highest leave-one-out log-likelihood of the values (a value left out of ``e``, which
    keeps its spike only where it is still repeated without it)."""
    lo, hi, cnt = cells
    n_rep = cnt.sum()
    v = 0.5 * (lo + hi)
    k = np.clip(np.searchsorted(edges, v, side="left") - 1, 0, len(mass) - 1)
    e = np.bincount(k, weights=cnt, minlength=len(mass)) / n_rep
    width = np.diff(edges)
    kz = np.clip(np.searchsorted(edges, z, side="left") - 1, 0, len(mass) - 1)
    f_kde = mass[kz] / width[kz]
    ez = np.bincount(k, weights=cnt, minlength=len(mass))[kz]  # repetitions in z's bin
    # left out, a value keeps a spike only if the others still repeat it (seen 3+ times);
    # one seen twice takes its spike, and both its repetitions, out of the others' ``e``
    kept = np.isin(kz, k) & (ez >= 3)
    others = np.where(kept, n_rep - 1, n_rep - 2)
    e_loo = np.where(kept, (ez - 1) / np.maximum(others, 1), 0.0) / width[kz]
    best, best_l = -np.inf, 0.0
    for lam in SPIKE_WEIGHTS:
        with np.errstate(divide="ignore"):
            score = float(np.mean(np.log((1 - lam) * f_kde + lam * e_loo)))
        if score > best:
            best, best_l = score, lam
    return (1 - best_l) * mass + best_l * e


def _spaced(edges: np.ndarray, gap: float) -> np.ndarray:
    """The sorted ``edges`` without those closer than ``gap`` to the previous one kept (the
    first and last are kept)."""
    edges = np.unique(edges)
    keep = [edges[0]]
    for e in edges[1:-1]:
        if e - keep[-1] >= gap and edges[-1] - e >= gap:
            keep.append(e)
    return np.array(keep + [edges[-1]])


#: bandwidths tried, as multiples of Silverman's rule, by leave-one-out likelihood
BANDWIDTHS = (0.125, 0.25, 0.5, 1.0, 2.0)
#: values (evenly spaced order statistics) used to choose the bandwidth
LOO_ROWS = 500


def bandwidth(z: np.ndarray) -> float:
    """Gaussian kernel bandwidth of the sorted values ``z``: the multiple of Silverman's rule
    in :data:`BANDWIDTHS` of highest leave-one-out log-likelihood (on at most
    :data:`LOO_ROWS` evenly spaced order statistics); 0 without spread. Computed on ``z``
    scaled by a power of two into ``[-1, 1]`` (exact), so that squares do not overflow and the
    bandwidth scales with the values."""
    n = len(z)
    top = float(np.max(np.abs(z))) if n else 0.0
    if 0.0 < top < np.inf and math.frexp(top)[1] != 0:
        e = math.frexp(top)[1]
        return math.ldexp(bandwidth(np.ldexp(z, -e)), e)
    sd = float(np.std(z))
    iqr = float(np.subtract(*np.percentile(z, [75, 25]))) / 1.34 if n else 0.0
    h0 = 0.9 * min(sd, iqr if iqr > 0 else sd) * max(n, 1) ** -0.2
    if not h0 > 0 or n < 3:
        return h0
    s = z if n <= LOO_ROWS else z[np.linspace(0, n - 1, LOO_ROWS).astype(np.int64)]
    d2 = (s[:, None] - s[None, :]) ** 2
    best, best_h = -np.inf, h0
    for f in BANDWIDTHS:
        h = h0 * f
        k = np.exp(-0.5 * d2 / (h * h))
        np.fill_diagonal(k, 0.0)
        score = float(np.mean(np.log(np.maximum(k.sum(1), 1e-300) / h)))
        if score > best:
            best, best_h = score, h
    return best_h


def kernel_mass(z: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Each bin's share of a Gaussian kernel density estimate of the sorted values ``z``
    (:func:`bandwidth`), renormalised to the bins' span; without spread, the bins' counts."""
    n = len(z)
    if n == 0:
        return np.zeros(len(edges) - 1)
    h = bandwidth(z)
    if not h > 0:
        count = np.diff(np.searchsorted(z, edges, side="right")).astype(float)
        return count / n
    cdf = kernel_cdf(z, edges, h)
    mass = np.diff(cdf)
    return mass / mass.sum()


#: standard deviations beyond which a value's kernel CDF at an edge is taken as exactly 1
#: (below the edge) or 0 (above): ``ndtr(-KERNEL_REACH)`` is 1e-17, under the sum's own
#: rounding (:func:`kernel_cdf`)
KERNEL_REACH = 8.5
#: (edge, value) pairs at most evaluated at once by :func:`kernel_cdf`
KERNEL_BLOCK = 1 << 22


def kernel_cdf(z: np.ndarray, edges: np.ndarray, h: float) -> np.ndarray:
    """``mean_i ndtr((edges - z_i) / h)`` of the sorted values ``z``, each distinct value
    evaluated once and weighed by its count, and only the values within
    :data:`KERNEL_REACH` bandwidths of an edge evaluated there (those further below count
    whole, those further above not at all): the dense mean to about 1e-16, and a column of
    many distinct values (adult's ``fnlwgt``: 21,648 of 32,561) costs the values near each
    edge, not all of them; a column of few (adult's ``age``: 73) costs its distinct
    values."""
    cut = np.flatnonzero(np.diff(z)) + 1
    u = z[np.r_[0, cut]]
    counts = np.diff(np.r_[0, cut, len(z)]).astype(float)
    below = np.r_[0.0, np.cumsum(counts)]  # rows with a value under each distinct value
    edges = np.asarray(edges, float)
    lo = np.searchsorted(u, edges - KERNEL_REACH * h, side="left")
    hi = np.searchsorted(u, edges + KERNEL_REACH * h, side="right")
    out = below[lo].copy()
    size = hi - lo
    start = 0
    while start < len(edges):  # blocks of edges, each at most KERNEL_BLOCK pairs
        stop = start + 1
        total = size[start]
        while stop < len(edges) and total + size[stop] <= KERNEL_BLOCK:
            total += size[stop]
            stop += 1
        sz = size[start:stop]
        if total:
            edge = np.repeat(np.arange(start, stop), sz)
            first = np.repeat(np.cumsum(sz) - sz, sz)
            idx = np.repeat(lo[start:stop], sz) + np.arange(total) - first
            part = counts[idx] * ndtr((edges[edge] - u[idx]) / h)
            out[start:stop] += np.bincount(edge - start, weights=part, minlength=stop - start)
        start = stop
    return out / len(z)


def _allowed(kind_j, k, o, lo_j, hi_j, mask) -> np.ndarray:
    """``[boxes, k]``: the levels each box allows on a discrete column."""
    if kind_j == KIND_NOMINAL:
        return mask[:, o: o + k].astype(bool)
    codes = np.arange(k)
    return (codes[None, :] > lo_j[:, None]) & (codes[None, :] <= hi_j[:, None])


def box_mass(marg: list[ColumnMarginal], lo: np.ndarray, hi: np.ndarray, mask: np.ndarray,
             kind, nlev, nom_off) -> np.ndarray:
    """``M(L) = prod_j P_j(L_j)`` of boxes ``(lo, hi]`` (nominal levels: ``mask``)."""
    logm = np.zeros(len(lo))
    for j, m in enumerate(marg):
        if m.pmf is not None:
            p = _allowed(kind[j], int(nlev[j]), nom_off[j], lo[:, j], hi[:, j], mask) @ m.pmf
        else:
            p = m.interval_mass(lo[:, j], hi[:, j])
        with np.errstate(divide="ignore"):
            logm += np.log(np.maximum(p, 0.0))
    return np.exp(logm)


def marginal_leaves(marg: list[ColumnMarginal], schema, lo: np.ndarray, hi: np.ndarray,
                    mask: np.ndarray, kind, nlev, nom_off) -> list:
    """Leaf models: in each leaf (box ``(lo, hi]``), each column's marginal restricted to the
    leaf's cell."""
    L = len(lo)
    leaf = np.arange(L)
    models = []
    for j, (spec, m) in enumerate(zip(schema.columns, marg)):
        if m.pmf is None:
            cell = ColumnCell(lower=lo[:, j], upper=hi[:, j], allowed=None,
                              data_min=float(spec.lower), data_max=float(spec.upper))
            models.append(MarginalCellLeaf(edges=m.edges, cdf=m.cdf).fit(np.zeros(L), leaf,
                                                                         cell))
            continue
        k = int(nlev[j])
        allowed = _allowed(kind[j], k, nom_off[j], lo[:, j], hi[:, j], mask)
        pl, pc = np.nonzero(allowed)
        cell = ColumnCell(lower=lo[:, j], upper=hi[:, j], allowed=allowed, data_min=0.0,
                          data_max=k - 1.0, n_levels=k)
        models.append(UniformLevelsLeaf(atoms=range(k)).fit(pc.astype(float), pl, cell,
                                                            m.pmf[pc]))
    return models
