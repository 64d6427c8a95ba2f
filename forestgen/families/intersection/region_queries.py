"""EOGT's queries through the regions of its star-node walk (Nock & Guillame-Bert 2023, §6;
spec ``generative_forests.md`` §3.4, §4.3).

EOGT keeps only arc probabilities, so its law is not a leaf mixture: every query enumerates the
regions of the walk compatible with a row
(:func:`~forestgen.families.intersection.regions.approx_regions`) and weighs them.
:class:`RegionQueries` is that engine — the exact density with NaN entries marginalised and
sampling here, conditional sampling and log density in
:mod:`~forestgen.families.intersection.region_conditionals`, imputation and prediction in
:mod:`~forestgen.families.intersection.region_predictions` — mixed into
:class:`~forestgen.families.intersection.eogt.EOGT`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from forestgen.data.metadata import constrain
from forestgen.data.support import rows_to_support
from forestgen.families.boxes import column_layout, root_mask
from forestgen.families.intersection.region_atoms import RegionAtoms
from forestgen.families.intersection.region_conditionals import RegionConditionals
from forestgen.families.intersection.region_predictions import RegionPredictions
from forestgen.logsumexp import logsumexp
from forestgen.tree.arrays import ForestArrays
from forestgen.validation import check_int


class RegionQueries(RegionConditionals, RegionPredictions):
    """EOGT's query engine (a mixin over :class:`~forestgen.families.intersection.gfboost.GFBoost`):
    every query walks the regions compatible with a row."""

    def _geometry(self):
        from forestgen.families.intersection.star import TreeGeometry

        if getattr(self, "_geo", None) is None:
            kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
            self._layout = (kind, nlev, nom_off)
            self._geo = TreeGeometry(self.trees_, self.box_lo_, self.box_hi_, nom_off, nlev,
                                     root_mask(self.encoder_.schema))
        return self._geo

    def _regions(self, x: np.ndarray):
        """Compatible regions of one encoded row with their log weight on the observed
        entries, ``log Q̂(C) - log μ_o(C_o)`` (times the atom shares of observed atom columns,
        :mod:`~forestgen.families.intersection.region_atoms`), and their atom shares; ``None`` past
        ``max_regions``."""
        from forestgen.families.intersection.regions import approx_regions

        reg = approx_regions(self._geometry(), x, self.box_lo_, self.box_hi_,
                             int(self.max_regions))
        if reg is None:
            return None
        lo, hi, mask = reg.lo, reg.hi, reg.mask
        shares = self._region_shares(lo, hi, reg.leaves)
        if self._cells_marginal():
            lw = reg.log_q + self._shape().log_factor(x, lo, hi, mask, self._atoms(), shares)
            return lw, lo, hi, mask, shares
        lw = reg.log_q - reg.log_measure
        if len(lw) and self._atoms():
            lw = lw + self._atoms().log_factor(x, shares, lo, hi)
        return lw, lo, hi, mask, shares

    def _shape(self):
        """The column marginals shaping the regions or the smoothing component
        (:class:`~forestgen.families.intersection.region_shape.MarginalShape`; ``None`` for
        the paper's uniform regions and smoothing)."""
        return getattr(self, "shape_", None)

    def _cells_marginal(self) -> bool:
        """Whether the walk's regions are spread by the marginals (``cell_shape_``)."""
        return getattr(self, "cell_shape_", "uniform") == "marginal"

    def _smooth_marginal(self) -> bool:
        """Whether the smoothing component is the product of the marginals."""
        return getattr(self, "smooth_toward_", "uniform") == "marginals"

    def _piece_marginal(self, n: int, box: bool = True) -> np.ndarray:
        """``[n (+1)]``: whether each of ``n`` regions (then, with ``box``, the smoothing
        component) is spread by the marginals."""
        out = np.full(n + int(box), self._cells_marginal())
        if box:
            out[-1] = self._smooth_marginal()
        return out

    def _atoms(self) -> RegionAtoms | None:
        """The per-region atom shares (``None`` for files saved before they existed)."""
        return getattr(self, "region_atoms_", None)

    def _region_shares(self, lo, hi, leaves) -> list[np.ndarray]:
        """Atom shares ``[m, A]`` per atom column of regions given by their boxes and their
        leaf in every tree."""
        atoms = self._atoms()
        if not atoms:
            return []
        if not len(lo):  # no region: an empty table per atom column (zipped with the box's)
            return [np.zeros((0, len(a))) for a in atoms.atoms]
        return atoms.shares(atoms.region_ids(leaves), lo, hi)

    def _box_shares(self) -> list[np.ndarray]:
        """Atom shares of the smoothing component: the column's overall shares."""
        atoms = self._atoms()
        if not atoms:
            return []
        return atoms.shares(np.array([-1]), self.box_lo_[None, :], self.box_hi_[None, :])

    def _uniform_log_weight(self, x: np.ndarray) -> float:
        """``log ε - log μ_o(X_o)``: the smoothing component's weight on the observed entries."""
        from forestgen.families.intersection.regions import region_log_measures

        if self.smoothing_ <= 0:
            return -np.inf
        g = self._geometry()
        r0 = self.trees_.roots[0]
        if self._smooth_marginal():
            return math.log(self.smoothing_) + float(self._shape().log_factor(
                x, g.lo[r0][None, :], g.hi[r0][None, :], g.mask[r0][None, :], self._atoms(),
                self._box_shares())[0])
        out = math.log(self.smoothing_) - float(region_log_measures(
            g, g.lo[r0], g.hi[r0], g.mask[r0], np.flatnonzero(~np.isnan(x)))[0])
        if self._atoms():
            out += float(self._atoms().log_factor(x, self._box_shares(), g.lo[r0][None, :],
                                                  g.hi[r0][None, :])[0])
        return out

    def _too_many(self, rows: list[int], query: str) -> None:
        if rows:
            warnings.warn(f"EOGT {query}: {len(rows)} row(s) (first: {rows[0]}) need more than "
                          f"max_regions={self.max_regions} compatible regions to marginalise "
                          f"their missing entries; they get NaN", RuntimeWarning, stacklevel=3)

    def _row_keys(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Representative rows and the inverse map: the walk sees a row only through which
        side of every threshold (and box face) each entry lies, and a level only through the
        sides its splits send it to, so rows agreeing on that are answered once (e.g. the grid
        of a marginal's quadrature, or per-row evidence on an id column no tree splits).
        Where regions or the smoothing component are spread by the marginals, their density
        also differs between histogram bins and between levels: then rows are told apart by
        those too (each level a class of its own)."""
        self._geometry()
        f = self.trees_
        nominal = self._layout[2] >= 0
        nlev = self._layout[1]
        atoms = self._atoms()
        atom_values = ({int(j): a for j, a in zip(atoms.columns, atoms.atoms)} if atoms
                       else {})
        keys = np.empty((len(Z), Z.shape[1] + len(atom_values)))
        box_mask = root_mask(self.encoder_.schema).astype(bool)
        shape = self._shape()  # the marginals' density differs between levels and bins
        for j in range(Z.shape[1]):
            col = Z[:, j]
            if shape is not None and self._layout[0][j] != 0:
                keys[:, j] = np.where(np.isnan(col), -2.0, col)
                continue
            if nominal[j]:
                k = int(nlev[j])
                valid = (col >= 0) & (col < k) & (col == np.floor(col))
                # a level outside the box (no training row) is told apart like an invalid one
                o = self._layout[2][j]
                valid &= box_mask[o + np.where(valid, col, 0).astype(np.int64)]
                route = _level_routes(f, j, k)
                keys[:, j] = np.where(np.isnan(col), -2.0, np.where(
                    valid, route[np.where(valid, col, 0).astype(np.int64)], -3.0))
                continue
            faces = np.unique(np.r_[f.threshold[f.feature == j], self.box_lo_[j],
                                    self.box_hi_[j],
                                    shape.marg[j].edges if shape is not None else []])
            keys[:, j] = np.where(np.isnan(col), -2.0, np.searchsorted(faces, col, "left"))
        for k, (j, a) in enumerate(atom_values.items()):  # which atom, if any
            keys[:, Z.shape[1] + k] = (Z[:, j, None] == a[None, :]) @ np.arange(1, len(a) + 1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        return first, inverse.ravel()

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """Exact log density of EOGT's law; NaN entries are marginalised."""
        self.check_fitted()
        Z = np.asarray(Z, float)
        if len(Z) == 0:
            return np.zeros(0)
        first, inverse = self._row_keys(Z)
        return self._log_prob_rows(Z[first])[inverse]

    def _log_prob_rows(self, Z: np.ndarray) -> np.ndarray:
        out = np.empty(len(Z))
        big = []
        a = math.log1p(-self.smoothing_)
        for i, x in enumerate(Z):
            if np.isnan(x).all():  # nothing observed: the law's total mass
                out[i] = 0.0
                continue
            reg = self._regions(x)
            if reg is None:
                out[i] = np.nan
                big.append(i)
                continue
            lw = reg[0]
            tree_part = a + logsumexp(lw)
            inside = self._inside(x)
            out[i] = np.logaddexp(tree_part, self._uniform_log_weight(x)) if inside else -np.inf
        self._too_many(big, "log_prob")
        return out

    def log_parts_encoded(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(tree, smooth)``: the log densities of encoded rows ``Z`` (NaN marginalised) under
        the walk's regions and under the smoothing component, each normalised on its own, so
        that ``log_prob = logaddexp(log(1 - ε) + tree, log ε + smooth)`` for every ``ε``
        (``-inf`` for both outside the box; NaN for both past ``max_regions``)."""
        self.check_fitted()
        Z = np.asarray(Z, float)
        if len(Z) == 0:
            return np.zeros(0), np.zeros(0)
        first, inverse = self._row_keys(Z)
        tree = np.full(len(first), -np.inf)
        smooth = np.full(len(first), -np.inf)
        for i, x in enumerate(Z[first]):
            reg = self._regions(x)
            if reg is None:
                tree[i] = smooth[i] = np.nan
            elif self._inside(x):
                tree[i] = logsumexp(reg[0])
                smooth[i] = self._smooth_log_density(x)
        return tree[inverse], smooth[inverse]

    def _smooth_log_density(self, x: np.ndarray) -> float:
        """The smoothing component's log density of the observed entries of ``x``: the box
        spread by the marginals, or uniformly (``-log μ_o(X_o)``, times the atom shares)."""
        from forestgen.families.intersection.regions import region_log_measures

        g = self._geometry()
        r0 = self.trees_.roots[0]
        if self._smooth_marginal():
            return float(self._shape().log_factor(
                x, g.lo[r0][None, :], g.hi[r0][None, :], g.mask[r0][None, :], self._atoms(),
                self._box_shares())[0])
        out = -float(region_log_measures(
            g, g.lo[r0], g.hi[r0], g.mask[r0], np.flatnonzero(~np.isnan(x)))[0])
        if self._atoms():
            out += float(self._atoms().log_factor(x, self._box_shares(), g.lo[r0][None, :],
                                                  g.hi[r0][None, :])[0])
        return out

    def _inside(self, x: np.ndarray) -> bool:
        obs = ~np.isnan(x)
        nom = self._layout[2] >= 0
        o = obs & ~nom
        if np.any(x[o] <= self.box_lo_[o]) or np.any(x[o] > self.box_hi_[o]):
            return False
        k = obs & nom
        if not np.all((x[k] >= 0) & (x[k] < self._layout[1][k]) & (x[k] == np.round(x[k]))):
            return False
        # a declared level without training rows lies outside the box (root_mask)
        box_mask = root_mask(self.encoder_.schema)
        return bool(np.all(box_mask[self._layout[2][k] + x[k].astype(np.int64)]))

    def sample_encoded(self, n: int, random_state=None, missing: bool = False) -> np.ndarray:
        from forestgen.families.intersection.star import approx_sample, draw_uniform
        from forestgen.validation import as_generator

        self.check_fitted()
        check_int("n", n, 0)
        rng = as_generator(random_state)
        geo = self._geometry()
        kind, nlev, nom_off = self._layout
        uni = rng.random(int(n)) < self.smoothing_
        out = np.empty((int(n), len(self.box_lo_)))
        out[~uni] = approx_sample(geo, kind, int((~uni).sum()), rng)
        r0 = self.trees_.roots[0]
        for i in np.flatnonzero(uni):
            out[i] = draw_uniform(geo.lo[r0], geo.hi[r0], geo.mask[r0], kind, nom_off, nlev,
                                  rng)
        self._place_atoms(out, uni, np.ones(out.shape[1], bool), rng)
        return constrain(rows_to_support(out, self.schema_), self.schema_)

    def _place_atoms(self, out: np.ndarray, uni: np.ndarray, free: np.ndarray, rng) -> None:
        """Put the draws ``out`` (uniform in their regions; ``uni``: from the smoothing
        component) on the point masses of their region, in the columns ``free [d]`` (in place)."""
        atoms = self._atoms()
        if self._shape() is not None:
            self._shape_draws(out, uni, free, rng)
            return
        if not atoms or not len(out):
            return
        shares, lo, hi = self._draw_shares(out, uni)
        atoms.draw(out, np.broadcast_to(free, out.shape), shares, lo, hi, rng)

    def _shape_draws(self, out: np.ndarray, uni: np.ndarray, free: np.ndarray, rng) -> None:
        """:meth:`_place_atoms` where regions or the smoothing component are spread by the
        marginals: the draws ``out`` (uniform in their regions) drawn again in the columns
        ``free`` from their region's marginal shape; those of uniform pieces put on their
        atoms (in place)."""
        if not len(out):
            return
        atoms = self._atoms()
        lo, hi, mask = self._draw_regions(out, uni)
        shares = self._draw_region_shares(out, uni, lo, hi)
        marg = np.where(uni, self._smooth_marginal(), self._cells_marginal())
        flat = ~marg
        if atoms and flat.any():
            sub = out[flat]
            atoms.draw(sub, np.broadcast_to(free, sub.shape), [s[flat] for s in shares],
                       lo[flat], hi[flat], rng)
            out[flat] = sub
        if marg.any():
            sub = out[marg]
            self._shape().draw(sub, free, lo[marg], hi[marg], mask[marg], atoms,
                               [s[marg] for s in shares], rng)
            out[marg] = sub

    def _draw_regions(self, out: np.ndarray, uni: np.ndarray) -> tuple[np.ndarray, ...]:
        """The region ``(lo, hi, mask)`` of each draw (``[m, d]``, ``[m, L]``): the
        intersection of its leaves' boxes (``uni``: the smoothing component's, the box)."""
        geo = self._geometry()
        r0 = self.trees_.roots[0]
        lo = np.repeat(geo.lo[r0][None, :], len(out), 0)
        hi = np.repeat(geo.hi[r0][None, :], len(out), 0)
        mask = np.repeat(geo.mask[r0][None, :], len(out), 0)
        tree = np.flatnonzero(~uni)
        if len(tree):
            nodes = self.trees_.leaf_node[self.trees_.apply(out[tree])]
            for t in range(nodes.shape[1]):
                n = nodes[:, t]
                lo[tree] = np.maximum(lo[tree], geo.lo[n])
                hi[tree] = np.minimum(hi[tree], geo.hi[n])
                mask[tree] &= geo.mask[n]
        return lo, hi, mask

    def _draw_shares(self, out: np.ndarray, uni: np.ndarray) -> tuple[list, np.ndarray,
                                                                      np.ndarray]:
        """Atom shares of the region of each draw (``uni``: the smoothing component's, the
        column's overall shares) and the regions' boxes on the atom columns (NaN elsewhere)."""
        atoms = self._atoms()
        geo = self._geometry()
        tree = np.flatnonzero(~uni)
        leaves = self.trees_.apply(out[tree])
        nodes = self.trees_.leaf_node[leaves]
        cols = atoms.columns
        lo = np.full(out.shape, np.nan)
        hi = lo.copy()
        lo[np.ix_(tree, cols)] = geo.lo[:, cols][nodes].max(1)
        hi[np.ix_(tree, cols)] = geo.hi[:, cols][nodes].min(1)
        lo[uni], hi[uni] = self.box_lo_, self.box_hi_
        rid = atoms.region_ids(leaves)
        shares = [np.empty((len(out), len(a))) for a in atoms.atoms]
        for s, t, b in zip(shares, atoms.shares(rid, lo[tree], hi[tree]), self._box_shares()):
            s[tree] = t
            s[uni] = b
        return shares, lo, hi


def _level_routes(f: ForestArrays, j: int, k: int) -> np.ndarray:
    """``[k]``: a class per level of nominal column ``j``, equal for levels that every split
    on the column sends the same way."""
    nodes = np.flatnonzero((f.feature == j) & (f.cat_off >= 0))
    if not len(nodes):
        return np.zeros(k)
    sides = f.cat_left[f.cat_off[nodes][:, None] + np.arange(k)[None, :]]
    return np.unique(sides.T, axis=0, return_inverse=True)[1].ravel().astype(float)
