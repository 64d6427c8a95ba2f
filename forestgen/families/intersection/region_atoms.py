"""Point masses inside EOGT's regions (issue 11: zero inflation such as fair's ``affairs == 0``).

EOGT's law (Nock & Guillame-Bert 2023, §4.3; spec ``generative_forests.md`` §3.4) puts mass
``Q̂(C)`` on each region ``C`` reached by the star-node walk and spreads it uniformly, which
smears a value holding many rows (``ColumnSpec.atoms``) over its region. Here each region
instead carries, per numeric column with atoms, the shares

    s_a(C) = (n_a(C) + α π_a(C)) / (W(C) + α),

``n_a(C)`` the training weight of ``C`` at atom ``a``, ``W(C)`` its training weight observed
on the column (row fragments of GF.Boost's cell table, spec §2.7), ``α`` the learner's
``prior_strength`` and ``π_a(C) = P(x_j = a | x_j ∈ C_j)`` the column's observed share of atom
``a`` among its values in ``C``'s interval ``C_j`` (0 for atoms outside it). Inside ``C`` the
column is ``Σ_a s_a δ_a + (1 - Σ_a s_a) U(C_j)``: every region is still exactly normalised, so
the law is. A region without training rows and the smoothing component (``C_j`` the whole range: the
column's overall shares) take ``π`` itself. Most of EOGT's mass lies in regions holding no
training row (96% of draws on fair), so ``π`` must be the share *within the interval*: a narrow
interval around zero holds almost only zeros.

``P(x_j ∈ C_j)`` needs only the column's observed weight between consecutive faces of the
trees' splits on it (every region interval is a union of such bins). Regions are keyed by
their leaf in every tree (their intersection is the region), found by routing one point of the
region's box through the trees.

Spike levels. An integer (or discrete-valued) column coded as levels has point masses too: its
spike levels (:func:`~forestgen.leaves.uniform_levels.spike_levels`, adult's
``education-num = 9``) are its atoms, with the same shares; the remainder ``1 - Σ_a s_a`` is
spread uniformly over the region's other levels (counting measure), and a region allowing no
other level renormalises its shares. ``π`` falls back to uniform over the region's levels where
its interval holds no observed value.
"""

from __future__ import annotations

import numpy as np

from forestgen.modelfile import check_array
from forestgen.tree.arrays import ForestArrays


class RegionAtoms:
    """Per-region atom counts of the numeric columns with point masses.

    ``columns`` column indices; ``atoms`` their atom values (encoded units, one tuple per
    column); ``keys [K, T]`` leaf id per tree of the regions holding training weight;
    ``weight [K]`` their training weight; ``observed [K, columns]`` the part observed on each
    column (``weight`` for files saved before it existed); ``counts [K, ΣA]`` their weight at
    each atom (columns in order); ``share [ΣA]`` each atom's share of the column's observed
    training values;
    ``faces`` per column the sorted split faces (thresholds and box faces) and ``cdf`` the
    share of observed values at or below each; ``prior`` the pseudo-rows ``α``; ``levels`` per
    column its number of levels (0: numeric, atoms are values; ``k``: coded as levels, atoms are
    spike codes).
    """

    def __init__(self, columns, atoms, keys, weight, counts, share, faces, cdf,
                 prior: float, levels=None, observed=None):
        self.columns = np.asarray(columns, np.int64)
        self.atoms = [np.asarray(a, float) for a in atoms]
        self.keys = np.ascontiguousarray(keys, np.int32)
        self.weight = np.asarray(weight, float)
        self.counts = np.asarray(counts, float).reshape(len(self.weight), -1)
        self.share = np.asarray(share, float)
        self.faces = [np.asarray(f, float) for f in faces]
        self.cdf = [np.asarray(c, float) for c in cdf]
        self.prior = float(prior)
        self.levels = np.zeros(len(self.columns), np.int64) if levels is None else \
            np.asarray(levels, np.int64)
        self.observed = (np.repeat(self.weight[:, None], len(self.columns), 1)
                         if observed is None else
                         np.asarray(observed, float).reshape(len(self.weight), -1))
        self.offsets = np.r_[0, np.cumsum([len(a) for a in self.atoms])].astype(np.int64)
        self._index = None

    def __bool__(self) -> bool:
        return len(self.columns) > 0

    # ------------------------------------------------------------------ construction
    @classmethod
    def fit(cls, schema, Z: np.ndarray, fragments: tuple, cell_keys: np.ndarray,
            faces: list[np.ndarray], prior: float) -> RegionAtoms:
        """From the encoded training rows ``Z``, their ``(row, cell, weight)`` fragments, each
        cell's leaf keys ``[C, T]`` and every column's split faces."""
        from forestgen.leaves.uniform_levels import spike_levels

        cols, atoms, levels = [], [], []
        for j, s in enumerate(schema.columns):
            if s.atoms and not s.is_discrete:
                a, k = s.atoms, 0
            elif s.is_discrete and s.kind in ("integer", "continuous"):
                k = max(s.n_levels, 1)
                a = spike_levels(Z[:, j], k)
            else:
                continue
            if len(a):
                cols.append(j)
                atoms.append(np.asarray(a, float))
                levels.append(k)
        rows, cells, w = fragments
        C = len(cell_keys)
        weight = np.bincount(cells, weights=w, minlength=C)
        counts, share, cdf, observed = [], [], [], []
        for j, a in zip(cols, atoms):
            xj = Z[rows, j]
            observed.append(np.bincount(cells, weights=w * ~np.isnan(xj), minlength=C))
            col = Z[:, j]
            seen = np.sort(col[~np.isnan(col)])
            cdf.append(np.searchsorted(seen, faces[j], side="right") / max(len(seen), 1))
            for v in a:
                counts.append(np.bincount(cells, weights=w * (xj == v), minlength=C))
                share.append(float(np.mean(seen == v)) if len(seen) else 0.0)
        held = weight > 0
        counts = np.stack(counts, 1)[held] if counts else np.zeros((int(held.sum()), 0))
        observed = (np.stack(observed, 1)[held] if observed
                    else np.zeros((int(held.sum()), 0)))
        return cls(cols, atoms, cell_keys[held], weight[held], counts, share,
                   [faces[j] for j in cols], cdf, prior, levels, observed)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {prefix + "columns": self.columns, prefix + "offsets": self.offsets,
                prefix + "atoms": np.concatenate(self.atoms) if self.atoms else np.zeros(0),
                prefix + "keys": self.keys, prefix + "weight": self.weight,
                prefix + "counts": self.counts, prefix + "share": self.share,
                prefix + "faces": np.concatenate(self.faces) if self.faces else np.zeros(0),
                prefix + "cdf": np.concatenate(self.cdf) if self.cdf else np.zeros(0),
                prefix + "face_offsets": np.r_[0, np.cumsum([len(f) for f in self.faces])],
                prefix + "prior": np.array([self.prior]), prefix + "levels": self.levels,
                prefix + "observed": self.observed}

    @classmethod
    def from_arrays(cls, arrays, prefix: str) -> RegionAtoms:
        """Rebuild from a model file's arrays (their layout checked here, their values by
        :meth:`check`)."""
        off = _offsets(prefix + "offsets", arrays[prefix + "offsets"])
        flat = check_array(prefix + "atoms", arrays[prefix + "atoms"], "f", finite=True)
        fo = _offsets(prefix + "face_offsets", arrays[prefix + "face_offsets"])
        ncol = len(check_array(prefix + "columns", arrays[prefix + "columns"], "iu", low=0))
        if (len(off) != ncol + 1 or len(fo) != ncol + 1 or np.any(np.diff(off) < 0)
                or np.any(np.diff(fo) < 0) or off[-1] != len(flat)
                or fo[-1] != len(arrays[prefix + "faces"]) or off[0] or fo[0]
                or len(arrays[prefix + "cdf"]) != fo[-1] or len(arrays[prefix + "prior"]) != 1):
            raise ValueError(f"{prefix}offsets / face_offsets do not match the atoms, faces "
                             f"and columns")
        atoms = [flat[off[i]: off[i + 1]] for i in range(len(off) - 1)]
        faces = [arrays[prefix + "faces"][fo[i]: fo[i + 1]] for i in range(len(fo) - 1)]
        cdf = [arrays[prefix + "cdf"][fo[i]: fo[i + 1]] for i in range(len(fo) - 1)]
        return cls(arrays[prefix + "columns"], atoms, arrays[prefix + "keys"],
                   arrays[prefix + "weight"], arrays[prefix + "counts"], arrays[prefix + "share"],
                   faces, cdf, float(arrays[prefix + "prior"][0]),
                   *(arrays[prefix + k] if prefix + k in arrays else None
                     for k in ("levels", "observed")))

    def check(self, schema, trees: ForestArrays) -> None:
        """Raise ``ValueError`` unless these atoms (read from a model file) fit ``schema`` and
        the model's ``trees``: columns numeric or coded as levels, per-region keys inside each
        tree's leaves, finite non-negative weights and counts, shares and cdfs in [0, 1],
        sorted faces."""
        C, K, T = len(self.columns), len(self.weight), trees.n_trees
        A = int(self.offsets[-1])
        if np.any(self.columns >= schema.d) or len(np.unique(self.columns)) != C:
            raise ValueError("region_atoms.columns must be distinct column ids")
        if self.keys.shape != (K, T) or self.counts.shape != (K, A) or \
                self.observed.shape != (K, C) or self.share.shape != (A,) or \
                self.levels.shape != (C,):
            raise ValueError("region_atoms arrays do not match their regions, trees and atoms")
        lo, hi = trees.leaf_offsets[:-1], trees.leaf_offsets[1:]
        if K and (np.any(self.keys < lo[None, :]) or np.any(self.keys >= hi[None, :])):
            raise ValueError("region_atoms.keys name a leaf outside its tree")
        for name, a in (("weight", self.weight), ("counts", self.counts),
                        ("observed", self.observed)):
            if a.size and not (np.all(np.isfinite(a)) and np.all(a >= 0)):
                raise ValueError(f"region_atoms.{name} must be finite and >= 0")
        if not (np.isfinite(self.prior) and self.prior >= 0):
            raise ValueError("region_atoms.prior must be finite and >= 0")
        if self.share.size and not np.all((self.share >= 0) & (self.share <= 1)):
            raise ValueError("region_atoms.share must lie in [0, 1]")
        for i, (j, f, c) in enumerate(zip(self.columns, self.faces, self.cdf)):
            spec = schema.columns[int(j)]
            if self.levels[i] not in (0, spec.n_levels if spec.is_discrete else 0):
                raise ValueError(f"region_atoms.levels[{i}] does not match column {spec.name!r}")
            if (not np.all(np.isfinite(f)) or np.any(np.diff(f) < 0) or not np.all(
                    (c >= 0) & (c <= 1)) or np.isnan(c).any()):
                raise ValueError(f"region_atoms faces / cdf of column {spec.name!r} must be "
                                 f"sorted, finite, cdf in [0, 1]")
        if any(self.levels[i] and np.any((a < 0) | (a >= self.levels[i]) | (a != np.round(a)))
               for i, a in enumerate(self.atoms)):
            raise ValueError("region_atoms.atoms of a column coded as levels must be its codes")

    # ------------------------------------------------------------------ lookup
    def region_ids(self, leaves: np.ndarray) -> np.ndarray:
        """Index of each region (rows of leaf ids ``[m, T]``) among the stored ones; -1 for a
        region holding no training weight."""
        if self._index is None:  # the keys as sortable byte strings, sorted once
            flat = _row_bytes(self.keys)
            order = np.argsort(flat, kind="stable")
            self._index = (flat[order], order)
        sorted_keys, order = self._index
        leaves = np.asarray(leaves)
        if not len(leaves):  # e.g. a batch drawn wholly from the smoothing component
            return np.zeros(0, np.int64)
        q = _row_bytes(leaves.reshape(len(leaves), -1))
        if not len(sorted_keys):
            return np.full(len(q), -1, np.int64)
        at = np.minimum(np.searchsorted(sorted_keys, q), len(sorted_keys) - 1)
        return np.where(sorted_keys[at] == q, order[at], -1).astype(np.int64)

    def shares(self, rid: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        """Per atom column, the shares ``[m, A]`` of regions ``rid`` (-1: no training weight)
        whose intervals on the columns are ``(lo, hi]`` (``[m, d]``, encoded units)."""
        rid = np.asarray(rid, np.int64)
        known = rid >= 0
        r = np.maximum(rid, 0)
        out = []
        for c, j in enumerate(self.columns):
            W = np.where(known, self.observed[r, c] if len(self.weight) else 0.0, 0.0)
            sl = slice(self.offsets[c], self.offsets[c + 1])
            pi = self._interval_prior(c, lo[:, j], hi[:, j])
            n = np.where(known[:, None], self.counts[r, sl] if len(self.weight) else 0.0, 0.0)
            tot = W + self.prior
            with np.errstate(invalid="ignore", divide="ignore"):
                s = (n + self.prior * pi) / np.where(tot > 0, tot, 1.0)[:, None]
            s = np.where((tot > 0)[:, None], np.minimum(s, 1.0), pi)
            if self.levels[c]:  # a region allowing no other level: the atoms take it all
                allowed = self.allowed(c, lo[:, j], hi[:, j])
                alone = allowed.sum(1) == allowed[:, self.atoms[c].astype(np.int64)].sum(1)
                z = s.sum(1)
                s = np.where((alone & (z > 0))[:, None], s / np.where(z > 0, z, 1.0)[:, None], s)
            out.append(s)
        return out

    def allowed(self, c: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``[m, k]``: the codes in ``(lo, hi]`` of level column ``c``."""
        codes = np.arange(self.levels[c])
        return (codes[None, :] > lo[:, None]) & (codes[None, :] <= hi[:, None])

    def level_probs(self, c: int, s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``[m, k]``: the pmf of level column ``c`` in regions of shares ``s [m, A]`` and
        intervals ``(lo, hi]``: ``s_a`` at spike ``a``, the rest uniform on the other levels."""
        allowed = self.allowed(c, lo, hi)
        a = self.atoms[c].astype(np.int64)
        other = allowed.copy()
        other[:, a] = False
        n_other = other.sum(1)
        rest = np.maximum(1.0 - s.sum(1), 0.0) / np.maximum(n_other, 1)
        p = other * rest[:, None]
        p[:, a] = s * allowed[:, a]
        return p

    def _interval_prior(self, c: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``π [m, A]``: each atom's share of column ``c``'s observed values in ``(lo, hi]``."""
        a, g = self.atoms[c], self.share[self.offsets[c]: self.offsets[c + 1]]
        faces, cdf = self.faces[c], self.cdf[c]

        def below(v):  # share of values <= v (v is a face: exact)
            k = np.searchsorted(faces, v, side="right") - 1
            return np.where(k >= 0, cdf[np.maximum(k, 0)], 0.0)

        mass = below(hi) - below(lo)
        inside = (a[None, :] > lo[:, None]) & (a[None, :] <= hi[:, None])
        pi = g[None, :] * inside
        tot = pi.sum(1)
        z = np.maximum(mass, tot)  # equal to mass when lo, hi are faces
        pi = pi / np.where(z > 0, z, 1.0)[:, None]
        if self.levels[c]:  # no observed value in the interval: uniform over its levels
            allowed = self.allowed(c, lo, hi)
            flat = allowed[:, a.astype(np.int64)] / np.maximum(allowed.sum(1), 1)[:, None]
            pi = np.where((z > 0)[:, None], pi, flat)
        return pi

    def log_factor(self, x: np.ndarray, shares: list[np.ndarray], lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
        """Per region, the log of what the atoms change in the density of ``x`` on its observed
        atom columns, relative to the uniform density of the region: ``log s_a + log |C_j|``
        where ``x_j`` is atom ``a``, ``log(1 - Σ s)`` elsewhere (counting measure at the
        atoms, Lebesgue off them); on a level column ``log p(x_j) + log |C_j|`` with ``p``
        :meth:`level_probs`."""
        out = np.zeros(len(lo))
        with np.errstate(divide="ignore"):
            for c, ((j, a), s) in enumerate(zip(zip(self.columns, self.atoms), shares)):
                v = x[j]
                if np.isnan(v):
                    continue  # marginalised: atoms and continuous part sum to one
                if self.levels[c]:  # relative to the uniform 1 / |C_j| over its levels
                    if not 0 <= v < self.levels[c]:  # a level outside the column's: no mass
                        out -= np.inf
                        continue
                    p = self.level_probs(c, s, lo[:, j], hi[:, j])[:, int(v)]
                    out += np.log(p) + np.log(hi[:, j] - lo[:, j])
                    continue
                hit = np.flatnonzero(a == v)
                if len(hit):
                    out += np.log(s[:, hit[0]]) + np.log(hi[:, j] - lo[:, j])
                else:
                    out += np.log(np.maximum(1.0 - s.sum(1), 0.0))
        return out

    def draw(self, X: np.ndarray, free: np.ndarray, shares: list[np.ndarray],
             lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> None:
        """Put each row of ``X`` (drawn uniformly in its region, intervals ``(lo, hi]``) on atom
        ``a`` of each column free in ``free [m, d]`` with probability ``s_a``; a level column
        is drawn from :meth:`level_probs` (in place)."""
        m = len(X)
        for c, ((j, a), s) in enumerate(zip(zip(self.columns, self.atoms), shares)):
            u = rng.random(m)
            if self.levels[c]:
                p = self.level_probs(c, s, lo[:, j], hi[:, j])
                cum = np.cumsum(p, 1)
                code = np.minimum((cum < u[:, None] * cum[:, -1:]).sum(1), p.shape[1] - 1)
                X[free[:, j], j] = code[free[:, j]]
                continue
            pick = (np.cumsum(s, 1) <= u[:, None]).sum(1)
            hit = (pick < len(a)) & free[:, j]
            X[hit, j] = a[pick[hit]]

    def mean_shift(self, j: int, shares: list[np.ndarray], centre: np.ndarray,
                   lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Mean of column ``j`` in each region (intervals ``(lo, hi]`` of the column):
        ``Σ s_a a + (1 - Σ s) centre``; a level column's mean code under :meth:`level_probs`."""
        c = int(np.flatnonzero(self.columns == j)[0])
        s = shares[c]
        if self.levels[c]:
            return self.level_probs(c, s, lo, hi) @ np.arange(self.levels[c], dtype=float)
        return s @ self.atoms[c] + (1.0 - s.sum(1)) * centre


def _row_bytes(keys: np.ndarray) -> np.ndarray:
    """Each row of int32 leaf ids ``[m, T]`` as one byte string (``[m]``, void dtype)."""
    keys = np.ascontiguousarray(keys, np.int32)
    return keys.view(np.dtype((np.void, 4 * keys.shape[1]))).ravel()


def region_leaves(forest: ForestArrays, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray,
                  nom_off: np.ndarray, nlev: np.ndarray) -> np.ndarray:
    """Leaf id per tree ``[m, T]`` of regions given by their boxes (intervals ``(lo, hi]``
    per ordered column, allowed levels per nominal one): each region lies in one leaf per
    tree, found by routing a point of the box (its upper corner; its first allowed level)."""
    P = np.array(hi, float, copy=True).reshape(len(hi), -1)
    mask = np.asarray(mask).reshape(len(P), -1)
    for j in np.flatnonzero(np.asarray(nom_off) >= 0):
        o = int(nom_off[j])
        P[:, j] = np.argmax(mask[:, o: o + int(nlev[j])], axis=1)
    return forest.apply(P) if len(P) else np.zeros((0, forest.n_trees), np.int32)


def _offsets(name: str, a) -> np.ndarray:
    """Offsets read from a file as int64 (saved as float64 when there are no columns)."""
    a = check_array(name, a, "iuf", low=0, finite=True)
    if a.dtype.kind == "f" and np.any(a != np.round(a)):
        raise ValueError(f"{name} must hold whole numbers")
    return a.astype(np.int64)
