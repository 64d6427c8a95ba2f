"""EOGT's conditional queries through the regions of its star-node walk (Nock &
Guillame-Bert 2023, §6; spec ``generative_forests.md`` §4.3): exact conditional sampling
(a compatible region with probability proportional to its weight on the evidence, then
uniform in the region cut to the evidence; rejection with forced walks past ``max_regions``)
and the conditional log density as the ratio of two marginals of the law.

:class:`RegionConditionals` is mixed into
:class:`~forestgen.families.intersection.region_queries.RegionQueries`; it uses that engine's
regions, geometry and atom shares.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen.data.metadata import constrain
from forestgen.data.support import rows_to_support
from forestgen.families.intersection.gfboost import row_key
from forestgen.inference.api import density_columns
from forestgen.inference.conditions import blank_rows, check_on_empty
from forestgen.logsumexp import logsumexp
from forestgen.validation import check_int

#: most draws per round of EOGT's rejection sampler (more when the rows asked for need it)
REJECTION_BATCH = 1 << 18
#: EOGT evidence walks kept for reuse within one conditional sampling call
SHARED_WALKS = 4


class RegionConditionals:
    """EOGT's conditional sampling and conditional log density (a mixin of
    :class:`~forestgen.families.intersection.region_queries.RegionQueries`)."""

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

        self.check_fitted()
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
        active = ev.interval_active()
        for i in range(ev.m):  # rows with the same evidence are walked once
            groups.setdefault(_evidence_key(ev, i, active), []).append(i)
        sig = self._row_keys(ev.point)[1] if ev.m else None
        walks: dict = {}
        big: list[int] = []
        overflow: set = set()  # evidence patterns whose regions went past max_regions
        for rows in groups.values():
            x, cons = _evidence_row(ev, rows[0], active)
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

                    raise ZeroProbabilityError(self._empty_message(
                        ev, rows[0], rows[0] if per_row else None, "conditional_sample"))
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
        exactly, as the ratio of two marginals of the law (NaN entries marginalised). Floored
        as :meth:`GFBoost.log_prob` floors, relative to the free columns."""
        if conditions is None:
            return super().log_prob(X, floor=floor)
        self.check_fitted()
        Zx = self.encode_rows(X, missing_columns="nan")
        ev, per_row, index = self._evidence(conditions, None, on_empty=None if isinstance(
            conditions, pd.DataFrame) else "raise")
        if not per_row:
            ev = ev.broadcast(len(Zx))
        elif ev.m != len(Zx):
            raise ValueError(f"per-row conditions have {ev.m} rows but X has {len(Zx)}")
        out = np.empty(len(Zx))
        active = ev.interval_active()
        rows = [_evidence_row(ev, i, active) for i in range(len(Zx))]
        given = np.array([[j in cons for j in range(Zx.shape[1])] for _, cons in rows], bool)
        joint = np.where(np.isnan(ev.point) & ~given, Zx, ev.point) if len(Zx) else Zx
        sig_e, sig_j = (self._row_keys(ev.point)[1], self._row_keys(joint)[1]) if len(Zx) \
            else (None, None)
        cache: dict = {}  # log P by what the trees see of the evidence (and of the joint)
        big, empty = [], []
        for i, (x, cons) in enumerate(rows):
            key = ("e", int(sig_e[i]), _constraints_key(cons))
            if key not in cache:
                reg = self._evidence_regions(x, cons)
                cache[key] = np.nan if reg is None else logsumexp(reg[0])
            log_e = cache[key]
            if np.isneginf(log_e):  # (a dict: raised; per-row evidence: NaN, one warning)
                msg = self._empty_message(ev, i, None if index is None else index[i])
                if not per_row:
                    from forestgen.inference.conditions import ZeroProbabilityError

                    raise ZeroProbabilityError(msg)
                empty.append(msg)
                out[i] = np.nan
                continue
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
        if empty:
            from forestgen.inference.api import warn_empty_rows

            warn_empty_rows(empty[0], len(empty), "log_prob", stacklevel=3)
        self._too_many(big, "conditional_log_prob")
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

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
            if given and self._shape() is not None:  # every factor weighed here
                Z, uni = forced_draws(self._geometry(), self._layout[0], forced[0], forced[1],
                                      batch, self.smoothing_, rng, np.zeros(len(forced[0]), bool))
                Z, uni = self._shape_accept(Z, uni, forced, rng)
                self._place_atoms(Z, uni, np.isnan(forced[0]), rng)
                Z = constrain(rows_to_support(Z, self.schema_), self.schema_)
            elif given:
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

    def _shape_accept(self, Z: np.ndarray, uni: np.ndarray, forced: tuple, rng
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Where regions or the smoothing component are spread by the marginals
        (:mod:`~.region_shape`): the forced draws (walks forced to the evidence, every factor
        left out by the kernel) kept with probability their piece's factor on the evidence
        columns — the density of each point value (a level's probability), the probability
        of each interval — over :meth:`_shape_bound`, which bounds it over every piece, so
        the rejection stays exact."""
        from forestgen.families.intersection.regions import region_log_measures

        lo_e, hi_e, _ = forced
        bound = self._shape_bound(lo_e, hi_e)
        if not len(Z) or bound == -np.inf:
            return Z[:0], uni[:0]
        lo, hi, mask = self._draw_regions(Z, uni)
        shares = self._draw_region_shares(Z, uni, lo, hi)
        given = ~np.isnan(lo_e)
        point = given & (np.nan_to_num(lo_e) == np.nan_to_num(hi_e))
        interval = given & ~point
        x = np.where(point, lo_e, np.nan)
        marg = np.where(uni, self._smooth_marginal(), self._cells_marginal())
        logf = np.zeros(len(Z))
        shape, atoms = self._shape(), self._atoms()
        with np.errstate(divide="ignore"):
            for sel in (marg, ~marg):
                if not sel.any():
                    continue
                sh = [s[sel] for s in shares]
                args = (lo[sel], hi[sel], mask[sel])
                if sel is marg:
                    f = shape.log_factor(x, *args, atoms, sh)
                else:
                    f = -region_log_measures(self._geometry(), *args, np.flatnonzero(point))
                    if atoms:
                        f = f + atoms.log_factor(x, sh, lo[sel], hi[sel])
                for j in map(int, np.flatnonzero(interval)):
                    f = f + np.log(self._evidence_share(j, (lo_e[j], hi_e[j]), *args, sh,
                                                        np.full(int(sel.sum()), sel is marg)))
                logf[sel] = f
        if np.any(logf > bound + 1e-9):
            raise RuntimeError("EOGT rejection sampler: a factor exceeds its bound")
        ok = rng.random(len(Z)) < np.exp(logf - bound)
        return Z[ok], uni[ok]

    def _shape_bound(self, lo_e: np.ndarray, hi_e: np.ndarray) -> float:
        """Log of a bound on :meth:`_shape_accept`'s factor over every piece the law has:
        per numeric evidence column (point off the atoms, or interval on a column without
        atoms), the larger of the uniform pieces' bound
        (:func:`~forestgen.families.intersection.forced.log_bound`) and the marginal ones':
        the marginal's density at the point over the least continuous mass of a cell between
        consecutive split faces that holds it (an interval: its mass over the least mass of
        such a cell meeting it, at most 1); 0 elsewhere (levels and atoms: probabilities)."""
        from forestgen.families.intersection.forced import log_bound

        g = self._geometry()
        f = self.trees_
        r0 = f.roots[0]
        kind = self._layout[0]
        atoms = self._atoms()
        atom_cols = set(map(int, atoms.columns)) if atoms else set()
        kinds = {self._cells_marginal()} | ({self._smooth_marginal()} if self.smoothing_ > 0
                                            else set())
        shape = self._shape()
        out = 0.0
        for j in map(int, np.flatnonzero(~np.isnan(lo_e))):
            if kind[j] != 0:
                continue
            a, b = float(lo_e[j]), float(hi_e[j])
            if j in atom_cols and (a < b or np.isin(a, atoms.atoms[
                    list(atoms.columns).index(j)]).any()):
                continue
            one = np.zeros(len(lo_e), bool)
            one[j] = True
            flat = log_bound(g, lo_e, hi_e, kind, one)
            if flat == -np.inf:
                return -np.inf
            best = flat if False in kinds else -np.inf
            if True in kinds:
                lo, hi = float(g.lo[r0][j]), float(g.hi[r0][j])
                t = f.threshold[(f.feature == j) & (f.cat_off < 0)]
                faces = np.unique(np.r_[lo, hi, t[(t > lo) & (t < hi)]])
                mass = shape.cont_mass(j, faces[:-1], faces[1:])
                with np.errstate(divide="ignore"):
                    if a == b:
                        k = int(np.searchsorted(faces, a, side="left"))
                        m = shape.cont_log_density(j, a) - np.log(mass[k - 1])
                    else:
                        k0 = max(int(np.searchsorted(faces, max(a, lo), side="right")), 1)
                        k1 = int(np.searchsorted(faces, min(b, hi), side="left"))
                        m = min(0.0, float(np.log(shape.cont_mass(j, max(a, lo), min(b, hi)))
                                           - np.log(mass[k0 - 1:k1].min())))
                best = max(best, m)
            out += best
        return out

    def _draw_region_shares(self, Z: np.ndarray, uni: np.ndarray, lo, hi) -> list:
        """Atom shares of the region of each draw (boxes ``lo, hi`` of
        :meth:`_draw_regions`; ``uni``: the smoothing component's, the column's overall
        shares)."""
        atoms = self._atoms()
        if not atoms:
            return []
        rid = np.full(len(Z), -1, np.int64)
        tree = np.flatnonzero(~uni)
        rid[tree] = atoms.region_ids(self.trees_.apply(Z[tree]))
        shares = atoms.shares(rid, lo, hi)
        for s, b in zip(shares, self._box_shares()):
            s[uni] = b
        return shares

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

    def _empty_message(self, ev, i: int, label, query: str = "conditional_log_prob") -> str:
        """Why evidence row ``i`` has probability zero, naming its columns."""
        from forestgen.inference.api import zero_probability_message

        def log_mass(e) -> float:
            x, cons = _evidence_row(e, 0, e.interval_active())
            reg = self._evidence_regions(x, cons)
            return 0.0 if reg is None else float(logsumexp(reg[0]))
        return f"{type(self).__name__} {query}: " + zero_probability_message(
            self, ev, i, log_mass, label)

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
        marg = self._piece_marginal(len(lw)) if self._shape() is not None else None
        for j, c in cons.items():
            with np.errstate(divide="ignore"):
                w = w + np.log(self._evidence_share(j, c, lo, hi, mask, shares, marg))
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

    def _evidence_share(self, j: int, c, lo, hi, mask, shares, marg=None) -> np.ndarray:
        """Probability of column ``j``'s range or level set within each region (``marg
        [m]``: the regions spread by the marginals, :mod:`~.region_shape`)."""
        if marg is not None and marg.any():
            shape, atoms = self._shape(), self._atoms()
            if self._layout[0][j] != 0:
                m_part = shape.column_pmf(j, lo, hi, mask, atoms, shares) @ c.astype(float)
            else:
                a, b = self._effective_range(j, c)
                m_part = shape.range_share(j, a, b, lo, hi, atoms, shares)
            if marg.all():
                return m_part
            return np.where(marg, m_part, self._evidence_share(j, c, lo, hi, mask, shares))
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
        marg = bool(self._piece_marginal(len(reg[0]) - 1)[k])
        m = mask[k].copy()
        for j, c in cons.items():
            if kind[j] == 2:
                m[nom_off[j]: nom_off[j] + nlev[j]] &= c
        free = np.isnan(x)
        for j in cons:
            free[j] = False
        nominal = [j for j in cons if kind[j] == 2]
        free[nominal] = marg  # drawn from the marginal's pmf over the allowed levels
        out = self._draw_in((lo[k], hi[k], m, [s[k] for s in shares], marg), free, rng)
        out = np.where(np.isnan(x) | np.isin(np.arange(len(x)), nominal), out, x)
        atoms = self._atoms()
        for j, c in cons.items():
            if kind[j] == 2:
                continue
            if kind[j] == 1:
                p = self._level_pmf(j, lo[k: k + 1], hi[k: k + 1],
                                    [s[k: k + 1] for s in shares], marg)[0] * c
                out[j] = min(int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(),
                                                 "right")), len(p) - 1)
                continue
            a, b = self._effective_range(j, c)
            l, h = max(lo[k, j], a), min(hi[k, j], b)
            if marg:
                shape = self._shape()
                cont = float(shape.cont_mass(j, l, h) / shape.cont_mass(j, lo[k, j], hi[k, j]))
            else:
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
            v = (float(self._shape().cont_draw(j, l, h, rng.random())) if marg
                 else l + (h - l) * rng.random())
            spec = self.schema_.columns[j]
            va, vb = interval_ends(spec, np.array([c[0]]), np.array([c[1]]))
            out[j] = float(np.clip(to_support(np.array([v]), spec), va, vb)[0])
        return out

    def _level_pmf(self, j: int, lo, hi, shares, marginal: bool = False) -> np.ndarray:
        """``[m, k]``: the pmf of ordered level column ``j`` in regions ``(lo, hi]``: uniform
        over their codes, or with its spike levels' shares
        (:meth:`~forestgen.families.intersection.region_atoms.RegionAtoms.level_probs`);
        ``marginal``: the column's pmf restricted to them (:mod:`~.region_shape`)."""
        atoms = self._atoms()
        if marginal:
            return self._shape().column_pmf(j, lo, hi, None, atoms, shares)
        if atoms and j in atoms.columns:
            ci = int(np.flatnonzero(atoms.columns == j)[0])
            return atoms.level_probs(ci, shares[ci], lo[:, j], hi[:, j])
        codes = np.arange(self._layout[1][j])
        inside = (codes[None, :] > lo[:, j, None]) & (codes[None, :] <= hi[:, j, None])
        return inside / np.maximum(inside.sum(1), 1)[:, None]


def _evidence_row(ev, i: int, active: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Row ``i`` of parsed evidence: its values (NaN: none) and ``{column: constraint}``, a
    closed range ``(a, b)`` (encoded units, infinite ends open) or a level mask. ``active``:
    ``ev.interval_active()``, computed once by a caller that reads many rows (per row it is
    a pass over all of them)."""
    x = ev.point[i].copy()
    cons: dict = {}
    act = ev.interval_active()[i] if active is None else active[i]
    for j in np.flatnonzero(act):
        a, b = ev.lo[i, j], ev.hi[i, j]
        cons[int(j)] = (-np.inf if np.isnan(a) else a, np.inf if np.isnan(b) else b)
    for j, (act, mk) in ev.sets.items():
        if act[i]:
            cons[int(j)] = np.asarray(mk[i], bool)
    return x, cons


def _evidence_key(ev, i: int, active: np.ndarray | None = None) -> bytes:
    """Hashable key of evidence row ``i`` (``active`` as :func:`_evidence_row`)."""
    x, cons = _evidence_row(ev, i, active)
    return row_key(x) + b"|" + _constraints_key(cons)


def _constraints_key(cons: dict) -> bytes:
    """Hashable key of ranges / level sets ``{column: constraint}``."""
    return b"|".join(np.int64(j).tobytes() + np.asarray(c, float).tobytes()
                     for j, c in sorted(cons.items()))
