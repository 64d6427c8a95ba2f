"""EOGT's queries through the regions of its star-node walk (Nock & Guillame-Bert 2023, §6;
spec ``generative_forests.md`` §3.4, §4.3).

EOGT keeps only arc probabilities, so its law is not a leaf mixture: every query enumerates the
regions of the walk compatible with a row
(:func:`~forestgen.families.intersection.regions.approx_regions`) and weighs them.
:class:`RegionQueries` is that engine — the exact density with NaN entries marginalised,
conditional sampling and log density, imputation and prediction — mixed into
:class:`~forestgen.families.intersection.eogt.EOGT`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen.data.metadata import constrain
from forestgen.data.support import clamp_query_rows, rows_to_support
from forestgen.families.boxes import column_layout, root_mask
from forestgen.families.intersection.gfboost import _row_key
from forestgen.families.intersection.region_atoms import RegionAtoms
from forestgen.inference.conditions import blank_rows, check_on_empty
from forestgen.logsumexp import logsumexp
from forestgen.tree.arrays import ForestArrays
from forestgen.validation import check_int

#: most draws per round of EOGT's rejection sampler (more when the rows asked for need it)
REJECTION_BATCH = 1 << 18
#: EOGT evidence walks kept for reuse within one conditional sampling call
SHARED_WALKS = 4


class RegionQueries:
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
        lw = reg.log_q - reg.log_measure
        shares = self._region_shares(lo, hi, reg.leaves)
        if len(lw) and self._atoms():
            lw = lw + self._atoms().log_factor(x, shares, lo, hi)
        return lw, lo, hi, mask, shares

    def _atoms(self) -> RegionAtoms | None:
        """The per-region atom shares (``None`` for files saved before they existed)."""
        return getattr(self, "region_atoms_", None)

    def _region_shares(self, lo, hi, leaves) -> list[np.ndarray]:
        """Atom shares ``[m, A]`` per atom column of regions given by their boxes and their
        leaf in every tree."""
        atoms = self._atoms()
        if not atoms or not len(lo):
            return []
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
        of a marginal's quadrature, or per-row evidence on an id column no tree splits)."""
        self._geometry()
        f = self.trees_
        nominal = self._layout[2] >= 0
        nlev = self._layout[1]
        atoms = self._atoms()
        atom_values = ({int(j): a for j, a in zip(atoms.columns, atoms.atoms)} if atoms
                       else {})
        keys = np.empty((len(Z), Z.shape[1] + len(atom_values)))
        box_mask = root_mask(self.encoder_.schema).astype(bool)
        for j in range(Z.shape[1]):
            col = Z[:, j]
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
                                    self.box_hi_[j]])
            keys[:, j] = np.where(np.isnan(col), -2.0, np.searchsorted(faces, col, "left"))
        for k, (j, a) in enumerate(atom_values.items()):  # which atom, if any
            keys[:, Z.shape[1] + k] = (Z[:, j, None] == a[None, :]) @ np.arange(1, len(a) + 1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        return first, inverse.ravel()

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """Exact log density of EOGT's law; NaN entries are marginalised."""
        self._check_fitted()
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

        self._check_fitted()
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
        if not atoms or not len(out):
            return
        shares, lo, hi = self._draw_shares(out, uni)
        atoms.draw(out, np.broadcast_to(free, out.shape), shares, lo, hi, rng)

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

    def sample(self, n=None, random_state=None, conditions=None, on_empty=None,
               missing=True):
        """``n`` rows of EOGT's law; with ``conditions`` (the evidence language of
        :mod:`forestgen.inference`: values, closed intervals, level sets; a dict or a DataFrame
        of per-row evidence), exact draws from its conditional: a compatible region with
        probability proportional to its weight on the evidence, then uniform in the region cut
        to the evidence (atoms with the region's shares). Rows whose evidence has probability
        zero raise ``ZeroProbabilityError`` (``on_empty="unconditional"``: drawn from the
        law, ``"nan"``, the default for a per-row DataFrame: their given values and every other
        entry missing; with a warning)."""
        if conditions is None:
            return super().sample(n, random_state)
        from forestgen.validation import as_generator

        self._check_fitted()
        if on_empty is not None:
            check_on_empty(on_empty, False)
        ev, per_row, index = self._evidence(conditions, n, on_empty)
        on_empty = check_on_empty(on_empty, per_row)
        if not per_row:
            check_int("n", n, 0)
            ev = ev.broadcast(int(n))
        rng = as_generator(random_state)
        out = np.empty((ev.m, self.schema_.d))
        empty = []
        groups: dict = {}
        for i in range(ev.m):  # rows with the same evidence are walked once
            groups.setdefault(_evidence_key(ev, i), []).append(i)
        sig = self._row_keys(ev.point)[1] if ev.m else None
        walks: dict = {}
        big: list[int] = []
        overflow: set = set()  # evidence patterns whose regions went past max_regions
        for rows in groups.values():
            x, cons = _evidence_row(ev, rows[0])
            impossible = any(not np.asarray(c).any() for c in cons.values()
                             if not isinstance(c, tuple))  # an empty level set
            pattern = (np.isnan(x).tobytes(), tuple(sorted(cons)))
            if pattern in overflow and not impossible:  # likely too many again: sample first
                drawn = self._rejection_or_none(x, cons, len(rows), rng, rows[0], per_row)
                if drawn is not None:
                    out[rows] = drawn
                    continue
            reg = (np.full(1, -np.inf),) if impossible else self._shared_regions(
                walks, sig[rows[0]], x, cons)
            if reg is None:  # too many regions: rejection where the evidence allows it
                overflow.add(pattern)
                drawn = self._rejection_or_none(x, cons, len(rows), rng, rows[0], per_row)
                if drawn is not None:
                    out[rows] = drawn
                    continue
                if not per_row:
                    raise ValueError(f"EOGT conditional_sample: the evidence needs more than "
                                     f"max_regions={self.max_regions} regions")
                big += rows  # NaN for these rows; the others are drawn
                out[rows] = np.where(np.isnan(x), np.nan, x)
                continue
            w = reg[0]
            if not np.isfinite(w).any():
                if on_empty == "raise":
                    from forestgen.inference.conditions import ZeroProbabilityError

                    raise ZeroProbabilityError(f"EOGT conditional_sample: the evidence of row "
                                               f"{rows[0]} has probability zero")
                empty += rows
                out[rows] = self.sample_encoded(len(rows), rng)
                if on_empty == "nan":  # the given values; the rest is blanked below
                    out[rows] = np.where(np.isnan(x), out[rows], x)
                continue
            p = np.exp(w - w.max())
            cum = np.cumsum(p) / p.sum()
            for i in rows:
                k = min(int(np.searchsorted(cum, rng.random(), side="right")), len(p) - 1)
                out[i] = self._draw_evidence(x, cons, reg, k, rng)
        if empty:
            what = ("drawn unconditionally" if on_empty == "unconditional"
                    else "returned with their given values only")
            warnings.warn(f"EOGT conditional_sample: {len(empty)} row(s) (first: {empty[0]}) "
                          f"have evidence of probability zero; {what} (on_empty={on_empty!r})",
                          RuntimeWarning, stacklevel=2)
        if big:
            warnings.warn(f"EOGT conditional_sample: {len(big)} row(s) (first: {big[0]}) have "
                          f"evidence compatible with more than max_regions={self.max_regions} "
                          f"regions; they keep their given values and every other entry is "
                          f"missing (raise max_regions to draw them)", RuntimeWarning,
                          stacklevel=2)
            out[big] = np.where(np.isnan(out[big]), 0.0, out[big])  # placeholders, blanked
        df = self.encoder_.inverse_transform(constrain(out, self.schema_))
        blank = sorted((empty if on_empty == "nan" else []) + big)
        if blank:
            rows = np.asarray(blank, np.int64)
            df = blank_rows(df, rows, ~np.isnan(ev.point[rows]))
        if index is not None:
            df.index = index
        return df

    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density of EOGT's law (module notes of :class:`GFBoost` on the measure); with
        ``conditions`` (values, closed intervals, level sets), ``log p(x_free | evidence)``
        exactly, as the ratio of two marginals of the law (NaN entries marginalised)."""
        if conditions is None:
            return super().log_prob(X, floor=floor)
        self._check_fitted()
        Zx = self._encode(X, missing_columns="nan")
        ev, per_row, _ = self._evidence(conditions, None)
        if not per_row:
            ev = ev.broadcast(len(Zx))
        elif ev.m != len(Zx):
            raise ValueError(f"per-row conditions have {ev.m} rows but X has {len(Zx)}")
        out = np.empty(len(Zx))
        rows = [_evidence_row(ev, i) for i in range(len(Zx))]
        given = np.array([[j in cons for j in range(Zx.shape[1])] for _, cons in rows], bool)
        joint = np.where(np.isnan(ev.point) & ~given, Zx, ev.point) if len(Zx) else Zx
        sig_e, sig_j = (self._row_keys(ev.point)[1], self._row_keys(joint)[1]) if len(Zx) \
            else (None, None)
        cache: dict = {}  # log P by what the trees see of the evidence (and of the joint)
        big = []
        for i, (x, cons) in enumerate(rows):
            key = ("e", int(sig_e[i]), _constraints_key(cons))
            if key not in cache:
                reg = self._evidence_regions(x, cons)
                cache[key] = np.nan if reg is None else logsumexp(reg[0])
            log_e = cache[key]
            if np.isneginf(log_e):
                from forestgen.inference.conditions import ZeroProbabilityError

                raise ZeroProbabilityError(f"EOGT conditional_log_prob: the evidence of row "
                                           f"{i} has probability zero")
            jkey = ("j", int(sig_j[i]), key[2])
            if jkey not in cache and not np.isnan(log_e):
                reg = self._evidence_regions(joint[i], cons)
                cache[jkey] = np.nan if reg is None else logsumexp(reg[0])
            log_j = np.nan if np.isnan(log_e) else cache[jkey]
            if np.isnan(log_j):
                big.append(i)
                out[i] = np.nan
                continue
            out[i] = log_j - log_e
        self._too_many(big, "conditional_log_prob")
        return out

    def _rejection_or_none(self, x: np.ndarray, cons: dict, m: int, rng, row: int,
                           per_row: bool) -> np.ndarray | None:
        """``m`` exact draws by :meth:`_rejection_sample` for evidence whose compatible
        regions exceed ``max_regions``. Point values are forced in the walk
        (:mod:`~forestgen.families.intersection.forced`): a numeric value as a point, a value of a
        gridded column (integers, fixed decimals) as its grid cell, a level as itself; on a
        discrete column with spike levels it is a one-level mask kept when a draw satisfies
        it; on a numeric column with point masses the region's atom share weighs it
        (:meth:`_atom_accept`). ``None``, for per-row evidence, where too few draws satisfy
        the evidence."""
        from forestgen.inference.conditions import ZeroProbabilityError

        cons = dict(cons)
        atoms = self._atoms()
        atom_cols = set(map(int, atoms.columns)) if atoms else set()
        lo_e = np.full(len(x), np.nan)
        hi_e = lo_e.copy()
        weigh = np.ones(len(x), bool)
        empty = False
        for j in map(int, np.flatnonzero(~np.isnan(x))):
            spec = self.schema_.columns[j]
            c = cons.pop(j, None)
            if spec.is_discrete:
                mask = np.zeros(spec.n_levels, bool)
                mask[int(x[j])] = True
                if c is not None:
                    mask &= c
                empty |= not mask.any()
                if j in atom_cols:
                    cons[j] = mask
                else:
                    lo_e[j] = hi_e[j] = x[j]
                continue
            if c is not None:
                empty |= not c[0] <= x[j] <= c[1]
            lo_e[j] = hi_e[j] = x[j]
            if spec.has_grid:  # the encoded values that decode to x_j
                h = spec.step if spec.step is not None else 10.0 ** -spec.decimals
                lo_e[j], hi_e[j] = x[j] - h / 2, x[j] + h / 2
            if j in atom_cols:  # the region's atom share weighs it (_atom_accept)
                weigh[j] = not spec.has_grid and not np.isin(
                    x[j], atoms.atoms[list(atoms.columns).index(j)]).any()
        try:
            if empty:
                raise ZeroProbabilityError(f"EOGT conditional_sample: the evidence of row "
                                           f"{row} has probability zero")
            return self._rejection_sample(cons, m, rng, row, (lo_e, hi_e, weigh))
        except ZeroProbabilityError:
            if per_row:
                return None
            raise

    def _rejection_sample(self, cons: dict, m: int, rng, row: int,
                          forced: tuple | None = None) -> np.ndarray:
        """``m`` exact draws of the law given ranges / level sets (``cons``) and point values
        (``forced``: per-column bounds ``(lo, hi)``, NaN = none), by keeping the draws that
        satisfy the ranges and sets after decoding: draws of the law, or of its walk forced
        to the point values and accepted by their importance ratio
        (:func:`~forestgen.families.intersection.forced.forced_draws`)."""
        from forestgen.families.intersection.forced import forced_draws
        from forestgen.inference.conditions import ZeroProbabilityError

        given = forced is not None and not np.isnan(forced[0]).all()
        got, need, tried, batch = [], m, 0, 0
        limit = 1000 * m + 100_000
        while need > 0:  # batches grow geometrically: few Python rounds for rare evidence
            batch = min(max(256, 4 * need, 2 * batch), max(REJECTION_BATCH, 4 * need),
                        limit - tried)
            if given:
                Z, uni = forced_draws(self._geometry(), self._layout[0], forced[0], forced[1],
                                      batch, self.smoothing_, rng, forced[2])
                Z, uni = self._atom_accept(Z, uni, forced, rng)
                self._place_atoms(Z, uni, np.isnan(forced[0]), rng)
                Z = constrain(rows_to_support(Z, self.schema_), self.schema_)
            else:
                Z = self.sample_encoded(batch, rng)
            ok = np.ones(len(Z), bool)
            for j, c in cons.items():
                v = Z[:, j]
                if isinstance(c, tuple):
                    spec = self.schema_.columns[j]
                    v = spec.to_grid(v) if spec.has_grid else v
                    ok &= (v >= c[0]) & (v <= c[1])
                else:
                    ok &= c[np.clip(v, 0, len(c) - 1).astype(np.int64)]
            got.append(Z[ok][:need])
            need -= len(got[-1])
            tried += batch
            if need > 0 and tried >= limit:
                raise ZeroProbabilityError(
                    f"EOGT conditional_sample: the evidence of row {row} holds fewer than "
                    f"{m - need + 1} of {tried} draws of the law and its compatible regions "
                    f"exceed max_regions={self.max_regions}")
        return np.vstack(got)

    def _atom_accept(self, Z: np.ndarray, uni: np.ndarray, forced: tuple, rng
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The forced draws kept with probability their region's factor on each forced atom
        column, which :func:`~forestgen.families.intersection.forced.forced_draws` leaves out or
        takes only in part: at a value off the atoms (a point), ``1 - Σ s``; at an atom ``a``,
        ``s_a``; at a grid value (interval ``I``), ``s_a [a decodes to it] + (1 - Σ s) |C_j ∩ I| /
        |C_j|`` — each at most 1, so the rejection stays exact."""
        atoms = self._atoms()
        lo_e, hi_e, weigh = forced
        cols = [(c, int(j)) for c, j in enumerate(atoms.columns) if not np.isnan(lo_e[j])] \
            if atoms else []
        if not cols or not len(Z):
            return Z, uni
        shares, lo, hi = self._draw_shares(Z, uni)
        keep = np.ones(len(Z))
        for c, j in cols:
            a, s = atoms.atoms[c], shares[c]
            rest = np.maximum(1.0 - s.sum(1), 0.0)
            if weigh[j]:  # a point off the atoms: the kernel took 1 / |C_j|
                keep *= rest
                continue
            hit = (a > lo_e[j]) & (a <= hi_e[j]) if lo_e[j] < hi_e[j] else a == lo_e[j]
            p = s[:, hit].sum(1)
            if lo_e[j] < hi_e[j]:
                cut = np.minimum(hi[:, j], hi_e[j]) - np.maximum(lo[:, j], lo_e[j])
                p = p + rest * np.clip(cut, 0.0, None) / (hi[:, j] - lo[:, j])
            keep *= p
        ok = rng.random(len(Z)) < keep
        return Z[ok], uni[ok]

    def _evidence(self, conditions, n, on_empty: str | None = "raise"):
        """Parsed evidence (:func:`~forestgen.inference.conditions.parse_conditions`), whether
        it is per row, and the index of a DataFrame of conditions."""
        from forestgen.inference.conditions import parse_conditions

        ev, per_row = parse_conditions(self, conditions, on_empty)
        if per_row and n is not None and n != ev.m:
            raise ValueError(f"with per-row conditions n must be None or {ev.m}, got {n!r}")
        return ev, per_row, conditions.index if per_row else None

    def _evidence_regions(self, x: np.ndarray, cons: dict):
        """The regions compatible with the values ``x`` (NaN: free), then the smoothing box,
        as ``(log w, lo, hi, mask, shares)``: ``log w`` the log probability (density on the
        valued columns) of the evidence in each, including the ranges / level sets ``cons``
        (``{column: (a, b)}`` closed, encoded units, or a level mask); ``None`` past
        ``max_regions``."""
        reg = self._regions(x)
        if reg is None:
            return None
        lw, lo, hi, mask, shares = reg
        g = self._geometry()
        r0 = self.trees_.roots[0]
        w = np.r_[math.log1p(-self.smoothing_) + lw,
                  self._uniform_log_weight(x) if self._inside(x) else -np.inf]
        lo, hi = np.vstack([lo, g.lo[r0]]), np.vstack([hi, g.hi[r0]])
        mask = np.vstack([mask, g.mask[r0]])
        shares = [np.vstack([a, b]) for a, b in zip(shares, self._box_shares())]
        for j, c in cons.items():
            with np.errstate(divide="ignore"):
                w = w + np.log(self._evidence_share(j, c, lo, hi, mask, shares))
        return w, lo, hi, mask, shares

    def _shared_regions(self, walks: dict, sig: int, x: np.ndarray, cons: dict):
        """:meth:`_evidence_regions` of ``x``, reused for evidence the trees cannot tell apart
        (the same :meth:`_row_keys` class ``sig`` and the same ranges / level sets); ``walks``
        keeps the last ``SHARED_WALKS`` of them."""
        key = (int(sig), _constraints_key(cons))
        if key not in walks:
            if len(walks) >= SHARED_WALKS:
                walks.pop(next(iter(walks)))
            walks[key] = self._evidence_regions(x, cons)
        return walks[key]

    def _effective_range(self, j: int, c) -> tuple[float, float]:
        """The latent range of a condition on numeric column ``j`` in encoded units, as the
        evidence stores it (:func:`forestgen.data.support.latent_interval`: on a grid the
        rounding cells of the values it holds)."""
        return float(c[0]), float(c[1])

    def _evidence_share(self, j: int, c, lo, hi, mask, shares) -> np.ndarray:
        """Probability of column ``j``'s range or level set within each region."""
        kind, nlev, nom_off = self._layout
        if kind[j] == 2:
            o = nom_off[j]
            m = mask[:, o: o + nlev[j]].astype(bool)
            return (m & c[None, :]).sum(1) / np.maximum(m.sum(1), 1)
        if kind[j] == 1:
            return self._level_pmf(j, lo, hi, shares) @ c.astype(float)
        a, b = self._effective_range(j, c)
        l, h = lo[:, j], hi[:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            cont = np.clip(np.minimum(h, b) - np.maximum(l, a), 0, None) / (h - l)
        atoms = self._atoms()
        if atoms and j in atoms.columns:
            ci = int(np.flatnonzero(atoms.columns == j)[0])
            s, av = shares[ci], atoms.atoms[ci]
            hit = ((av[None, :] > l[:, None]) & (av[None, :] <= h[:, None])
                   & (av[None, :] >= a) & (av[None, :] <= b))
            return (1.0 - s.sum(1)) * cont + (s * hit).sum(1)
        return cont

    def _draw_evidence(self, x, cons: dict, reg, k: int, rng) -> np.ndarray:
        """One draw in region ``k`` of :meth:`_evidence_regions`: the values of ``x``, each
        range / level set drawn inside it, the free columns as :meth:`_draw_in`."""
        from forestgen.data.support import interval_ends, to_support

        _, lo, hi, mask, shares = reg
        kind, nlev, nom_off = self._layout
        m = mask[k].copy()
        for j, c in cons.items():
            if kind[j] == 2:
                m[nom_off[j]: nom_off[j] + nlev[j]] &= c
        free = np.isnan(x)
        for j in cons:
            free[j] = False
        out = self._draw_in((lo[k], hi[k], m, [s[k] for s in shares]), free, rng)
        out = np.where(np.isnan(x), out, x)
        atoms = self._atoms()
        for j, c in cons.items():
            if kind[j] == 2:
                continue
            if kind[j] == 1:
                p = self._level_pmf(j, lo[k: k + 1], hi[k: k + 1],
                                    [s[k: k + 1] for s in shares])[0] * c
                out[j] = min(int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(),
                                                 "right")), len(p) - 1)
                continue
            a, b = self._effective_range(j, c)
            l, h = max(lo[k, j], a), min(hi[k, j], b)
            cont = max(h - l, 0.0) / (hi[k, j] - lo[k, j])
            vals, ws = [], []
            if atoms and j in atoms.columns:
                ci = int(np.flatnonzero(atoms.columns == j)[0])
                s = shares[ci][k]
                for v, sv in zip(atoms.atoms[ci], s):
                    if lo[k, j] < v <= hi[k, j] and a <= v <= b:
                        vals.append(v)
                        ws.append(sv)
                cont *= 1.0 - s.sum()
            ws.append(cont)
            pick = min(int(np.searchsorted(np.cumsum(ws) / sum(ws), rng.random(), "right")),
                       len(ws) - 1)
            if pick < len(vals):
                out[j] = vals[pick]
                continue
            v = l + (h - l) * rng.random()
            spec = self.schema_.columns[j]
            va, vb = interval_ends(spec, np.array([c[0]]), np.array([c[1]]))
            out[j] = float(np.clip(to_support(np.array([v]), spec), va, vb)[0])
        return out

    def _level_pmf(self, j: int, lo, hi, shares) -> np.ndarray:
        """``[m, k]``: the pmf of ordered level column ``j`` in regions ``(lo, hi]``: uniform
        over their codes, or with its spike levels' shares
        (:meth:`~forestgen.families.intersection.region_atoms.RegionAtoms.level_probs`)."""
        atoms = self._atoms()
        if atoms and j in atoms.columns:
            ci = int(np.flatnonzero(atoms.columns == j)[0])
            return atoms.level_probs(ci, shares[ci], lo[:, j], hi[:, j])
        codes = np.arange(self._layout[1][j])
        inside = (codes[None, :] > lo[:, j, None]) & (codes[None, :] <= hi[:, j, None])
        return inside / np.maximum(inside.sum(1), 1)[:, None]

    # ------------------------------------------------------------------ region queries
    def _choose(self, x: np.ndarray, reg, method: str, rng) -> tuple | None:
        """One region for ``x``'s missing entries: where the conditional density peaks
        (``"max_density"``, ties at random) or drawn from the conditional (``"sample"``,
        the smoothing component being the whole box); ``None`` if ``x`` has probability 0.
        Returns ``(lo, hi, mask, shares)`` (atom shares per atom column, ``[A]`` each)."""
        from forestgen.families.intersection.regions import region_log_measures

        g = self._geometry()
        lw, lo, hi, mask, shares = reg
        r0 = self.trees_.roots[0]
        box = (g.lo[r0], g.hi[r0], g.mask[r0], [s[0] for s in self._box_shares()])
        if method == "max_density":
            if not len(lw):
                return box if np.isfinite(self._uniform_log_weight(x)) and self._inside(x) \
                    else None
            miss = np.flatnonzero(np.isnan(x))
            score = lw - region_log_measures(g, lo, hi, mask, miss)
            fixed = self._densest_pieces(x, shares, lo, hi)
            if fixed is not None:
                score = score + fixed[0]
            best = np.flatnonzero(score == score.max())
            k = best[rng.integers(len(best))]
            return lo[k], hi[k], mask[k], ([s[k] for s in fixed[1]] if fixed is not None
                                           else [s[k] for s in shares])
        w = np.r_[math.log1p(-self.smoothing_) + lw,
                  self._uniform_log_weight(x) if self._inside(x) else -np.inf]
        if not np.isfinite(w).any():
            return None
        p = np.exp(w - w.max())
        k = int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(), side="right"))
        k = min(k, len(p) - 1)
        return box if k == len(lw) else (lo[k], hi[k], mask[k], [s[k] for s in shares])

    def _densest_pieces(self, x: np.ndarray, shares, lo, hi):
        """For maximum-density imputation of missing atom columns: in each region, the
        densest piece of each such column, an atom (its share, counting measure, as
        :meth:`log_prob`) or the continuous part (``(1 - Σ s) / |C_j|``). Returns the log
        gain over the continuous part's uniform density already in the score, and the
        shares forcing the draw onto that piece (one-hot on an atom, zero for the continuous
        part); ``None`` without missing atom columns."""
        atoms = self._atoms()
        if not atoms or not any(np.isnan(x[j]) for j in atoms.columns):
            return None
        gain = np.zeros(len(lo))
        forced = []
        with np.errstate(divide="ignore"):
            for c, (j, s) in enumerate(zip(atoms.columns, shares)):
                if not np.isnan(x[j]):
                    forced.append(s)
                    continue
                width = np.log(hi[:, j] - lo[:, j])
                if atoms.levels[c]:  # the most probable level; one-hot pmf onto it
                    p = atoms.level_probs(c, s, lo[:, j], hi[:, j])
                    pick = np.argmax(p, 1)
                    gain += np.log(p[np.arange(len(lo)), pick]) + width
                    spikes = atoms.atoms[c].astype(np.int64)
                    f = (pick[:, None] == spikes[None, :]).astype(float)
                    forced.append(f)  # off the spikes: shares 0, its other levels tie
                    continue
                opts = np.column_stack([np.log(s) + width[:, None],
                                        np.log(np.maximum(1 - s.sum(1), 0))])
                pick = np.argmax(opts, 1)  # relative to the score's -log |C_j|
                gain += opts[np.arange(len(lo)), pick]
                forced.append((pick[:, None] == np.arange(s.shape[1])[None, :]).astype(float))
        return gain, forced

    def _draw_in(self, pick: tuple, free: np.ndarray, rng) -> np.ndarray:
        """One draw in the region ``pick`` of :meth:`_choose`: uniform, then each free atom
        column on its atoms with the region's shares."""
        from forestgen.families.intersection.star import draw_uniform

        lo, hi, mask, shares = pick
        kind, nlev, nom_off = self._layout
        x = draw_uniform(lo, hi, mask, kind, nom_off, nlev, rng)[None, :]
        if shares:
            self._atoms().draw(x, free[None, :], [s[None, :] for s in shares], lo[None, :],
                               hi[None, :], rng)
        return x[0]

    def _level_probs(self, x: np.ndarray, j: int, reg) -> np.ndarray:
        """P(level of column ``j`` | observed entries of ``x``) from the regions."""
        lw, lo, hi, mask, shares = reg
        kind, nlev, nom_off = self._layout
        k = int(nlev[j])
        if kind[j] == 2:
            allowed = mask[:, nom_off[j]: nom_off[j] + k].astype(float)
            pmf = allowed / np.maximum(allowed.sum(1), 1)[:, None]
        else:
            pmf = self._level_pmf(j, lo, hi, shares)
        w = np.exp(math.log1p(-self.smoothing_) + lw - (lw.max() if len(lw) else 0.0))
        p = w @ pmf if len(lw) else np.zeros(k)
        u = self._uniform_log_weight(x)
        if np.isfinite(u) and self._inside(x):
            g = self._geometry()
            r0 = self.trees_.roots[0]
            box = (self._level_pmf(j, g.lo[r0][None, :], g.hi[r0][None, :], self._box_shares())[0]
                   if kind[j] == 1 else g.mask[r0][nom_off[j]: nom_off[j] + k]
                   / g.mask[r0][nom_off[j]: nom_off[j] + k].sum())
            p = p + np.exp(u - (lw.max() if len(lw) else 0.0)) * box
        return p / p.sum() if p.sum() > 0 else np.full(k, np.nan)

    def _mean(self, x: np.ndarray, j: int, reg) -> float:
        """Conditional mean of ordered column ``j`` (encoded units) from the regions."""
        lw, lo, hi, _, shares = reg
        g = self._geometry()
        r0 = self.trees_.roots[0]
        integer = self._layout[0][j] == 1
        atoms = self._atoms()
        spiky = bool(atoms) and j in atoms.columns

        def centre(a, b):
            return 0.5 * (np.floor(a) + 1 + np.floor(b)) if integer else 0.5 * (a + b)

        w = math.log1p(-self.smoothing_) + lw
        c = centre(lo[:, j], hi[:, j])
        if spiky and len(c):  # the region's point masses move its mean
            c = atoms.mean_shift(j, shares, c, lo[:, j], hi[:, j])
        u = self._uniform_log_weight(x)
        if np.isfinite(u) and self._inside(x):
            cb = float(centre(g.lo[r0, j], g.hi[r0, j]))
            cb = (float(atoms.mean_shift(j, self._box_shares(), np.array([cb]),
                                         g.lo[r0, j: j + 1], g.hi[r0, j: j + 1])[0])
                  if spiky else cb)
            w, c = np.r_[w, u], np.r_[c, cb]
        if not len(w):
            return np.nan
        w = np.exp(w - w.max())
        return float(np.dot(w, c) / w.sum())

    def impute_encoded(self, Z: np.ndarray, miss: np.ndarray, method: str,
                       rng: np.random.Generator) -> np.ndarray:
        """Fill ``Z[miss]`` (encoded rows) from EOGT's conditional: ``"max_density"``
        (uniform in the compatible region of highest density, paper §7.2 with approximation
        (8)), ``"sample"`` (exact conditional draw) or ``"expectation"`` (mean / mode).
        Rows of zero probability stay NaN (a warning names them)."""
        self._geometry()
        kind, nlev, nom_off = self._layout
        out = Z.copy()
        big, empty = [], []
        for i in np.flatnonzero(miss.any(1)):
            x = np.where(miss[i], np.nan, Z[i])
            reg = self._regions(x)
            if reg is None:
                big.append(int(i))
                continue
            cols = np.flatnonzero(miss[i])
            if method == "expectation":
                if not len(reg[0]) and not (self.smoothing_ > 0 and self._inside(x)):
                    empty.append(int(i))
                    continue
                for j in cols:
                    if kind[j] == 2:
                        out[i, j] = float(np.argmax(self._level_probs(x, j, reg)))
                    else:
                        v = self._mean(x, j, reg)
                        out[i, j] = round(v) if kind[j] == 1 else v
                continue
            pick = self._choose(x, reg, method, rng)
            if pick is None:
                empty.append(int(i))
                continue
            draw = self._draw_in(pick, miss[i], rng)
            out[i, cols] = draw[cols]
        self._too_many(big, "impute")
        if empty:
            warnings.warn(f"EOGT impute: {len(empty)} row(s) (first: {empty[0]}) have "
                          f"observed entries of probability zero; left missing",
                          RuntimeWarning, stacklevel=2)
        return out

    def impute(self, X, method="max_density", n_imputations=1, random_state=None):
        """Fill missing entries from EOGT's conditional (see :meth:`impute_encoded`)."""
        from forestgen.inference.api import impute

        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state, filler=self.impute_encoded)

    def predict_proba(self, X, target=None):
        """P(level of a discrete ``target`` | each row's other observed entries)."""
        self._check_fitted()
        j, Z = self._target_rows(X, target, "predict_proba")
        spec = self.schema_.columns[j]
        if not spec.is_discrete:
            raise ValueError(f"EOGT.predict_proba: column {spec.name!r} is numeric; use "
                             f"predict")
        P = np.full((len(Z), spec.n_levels), np.nan)
        big = []
        for i, x in enumerate(Z):
            reg = self._regions(x)
            if reg is None:
                big.append(i)
                continue
            P[i] = self._level_probs(x, j, reg)
        self._too_many(big, "predict_proba")
        empty = np.flatnonzero(np.isnan(P).all(1) & ~np.isin(np.arange(len(Z)), big))
        if len(empty):
            warnings.warn(f"EOGT predict_proba: {len(empty)} row(s) (first: {empty[0]}) have "
                          f"observed entries of probability zero; they get NaN",
                          RuntimeWarning, stacklevel=2)
        index = X.index if isinstance(X, pd.DataFrame) else None
        return pd.DataFrame(P, index=index, columns=pd.Index(list(spec.categories), dtype=object))

    def predict(self, X, target=None):
        """Most probable level of a categorical ``target``; conditional mean of a numeric or
        ordinal-integer one (float64 for an integer column, as every learner's ``predict``)."""
        self._check_fitted()
        j, Z = self._target_rows(X, target, "predict")
        spec = self.schema_.columns[j]
        index = X.index if isinstance(X, pd.DataFrame) else None
        if spec.numeric_levels:
            P = self.predict_proba(X, target).to_numpy()
            return pd.Series(P @ np.asarray(spec.categories, float), index=index,
                             name=spec.name)
        if spec.is_discrete:
            P = self.predict_proba(X, target).to_numpy()
            code = np.where(np.isnan(P).any(1), np.nan, np.argmax(np.nan_to_num(P), 1))
            Zc = np.full((len(Z), self.schema_.d), np.nan)
            Zc[:, j] = code
            return self.encoder_.inverse_transform(Zc).iloc[:, j].set_axis(index) \
                if index is not None else self.encoder_.inverse_transform(Zc).iloc[:, j]
        vals = np.full(len(Z), np.nan)
        for i, x in enumerate(Z):
            reg = self._regions(x)
            if reg is not None:
                vals[i] = self._mean(x, j, reg)
        return pd.Series(self.encoder_.decode_mean(j, vals), index=index, name=spec.name)

    def _target_rows(self, X, target, query: str):
        target = self._require_target(target, query)
        names = self.schema_.names
        if target not in names:
            raise ValueError(f"EOGT.{query}: unknown column {target!r}; columns: {names}")
        j = names.index(target)
        Z = self._encode(X, missing_columns="nan")
        Z[:, j] = np.nan
        return j, clamp_query_rows(self, Z, query)


def _evidence_row(ev, i: int) -> tuple[np.ndarray, dict]:
    """Row ``i`` of parsed evidence: its values (NaN: none) and ``{column: constraint}``, a
    closed range ``(a, b)`` (encoded units, infinite ends open) or a level mask."""
    x = ev.point[i].copy()
    cons: dict = {}
    for j in np.flatnonzero(ev.interval_active()[i]):
        a, b = ev.lo[i, j], ev.hi[i, j]
        cons[int(j)] = (-np.inf if np.isnan(a) else a, np.inf if np.isnan(b) else b)
    for j, (act, mk) in ev.sets.items():
        if act[i]:
            cons[int(j)] = np.asarray(mk[i], bool)
    return x, cons


def _evidence_key(ev, i: int) -> bytes:
    """Hashable key of evidence row ``i``."""
    x, cons = _evidence_row(ev, i)
    return _row_key(x) + b"|" + _constraints_key(cons)


def _constraints_key(cons: dict) -> bytes:
    """Hashable key of ranges / level sets ``{column: constraint}``."""
    return b"|".join(np.int64(j).tobytes() + np.asarray(c, float).tobytes()
                     for j, c in sorted(cons.items()))


def _level_routes(f: ForestArrays, j: int, k: int) -> np.ndarray:
    """``[k]``: a class per level of nominal column ``j``, equal for levels that every split
    on the column sends the same way."""
    nodes = np.flatnonzero((f.feature == j) & (f.cat_off >= 0))
    if not len(nodes):
        return np.zeros(k)
    sides = f.cat_left[f.cat_off[nodes][:, None] + np.arange(k)[None, :]]
    return np.unique(sides.T, axis=0, return_inverse=True)[1].ravel().astype(float)
