"""EOGT's imputation and prediction through the regions of its star-node walk (Nock &
Guillame-Bert 2023, §6): a row's missing entries are filled from one compatible region (where
the conditional density peaks, or drawn from the conditional), and a column is predicted from
the regions' level probabilities or conditional means.

:class:`RegionPredictions` is mixed into
:class:`~forestgen.families.intersection.region_queries.RegionQueries`; it uses that engine's
regions, geometry and atom shares.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from forestgen.data.support import clamp_query_rows

#: conditional draws behind an ``"expectation"`` imputation past ``max_regions``
EXPECTATION_DRAWS = 256


class RegionPredictions:
    """EOGT's ``impute``, ``predict_proba`` and ``predict`` (a mixin of
    :class:`~forestgen.families.intersection.region_queries.RegionQueries`)."""

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
        box = (g.lo[r0], g.hi[r0], g.mask[r0], [s[0] for s in self._box_shares()],
               self._smooth_marginal())
        cells = self._cells_marginal()
        if method == "max_density":
            if not len(lw):
                return box if np.isfinite(self._uniform_log_weight(x)) and self._inside(x) \
                    else None
            miss = np.flatnonzero(np.isnan(x))
            if cells:  # density against the marginals, the regions' base measure
                fixed = self._densest_marginal(x, shares, lo, hi, mask)
                score = lw + fixed[0]
            else:
                score = lw - region_log_measures(g, lo, hi, mask, miss)
                fixed = self._densest_pieces(x, shares, lo, hi)
                if fixed is not None:
                    score = score + fixed[0]
            best = np.flatnonzero(score == score.max())
            k = best[rng.integers(len(best))]
            return lo[k], hi[k], mask[k], ([s[k] for s in fixed[1]] if fixed is not None
                                           else [s[k] for s in shares]), cells
        w = np.r_[math.log1p(-self.smoothing_) + lw,
                  self._uniform_log_weight(x) if self._inside(x) else -np.inf]
        if not np.isfinite(w).any():
            return None
        p = np.exp(w - w.max())
        k = int(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(), side="right"))
        k = min(k, len(p) - 1)
        return box if k == len(lw) else (lo[k], hi[k], mask[k], [s[k] for s in shares], cells)

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

    def _densest_marginal(self, x: np.ndarray, shares, lo, hi, mask):
        """:meth:`_densest_pieces` for regions spread by the marginals: there the conditional
        density of the missing entries relative to the product of their marginals (the base
        measure of the regions' shape, as Lebesgue measure is of the paper's uniform regions)
        is constant on each region's pieces — ``1 / P_j(C_j)`` on a discrete column's levels
        and on a numeric column's continuous part (``(1 - Σ s) / ((1 - Σ α) P_j^c(C_j))``
        with atoms ``α``: the marginal's shares, ``s``: the region's), ``s_a / α_a`` at an atom
        and ``p_C(v) / p(v)`` at a spike level. Returns, per region, the log of the largest
        piece's ratio summed over the missing columns, and the atom shares forcing the
        draw onto those pieces (one-hot on an atom or spike level, zero for the rest)."""
        shape, atoms = self._shape(), self._atoms()
        kind = self._layout[0]
        gain = np.zeros(len(lo))
        forced = [np.asarray(s, float).copy() for s in shares]
        with np.errstate(divide="ignore", invalid="ignore"):
            for j in map(int, np.flatnonzero(np.isnan(x))):
                c = None
                if atoms:
                    hit = np.flatnonzero(atoms.columns == j)
                    c = int(hit[0]) if len(hit) else None
                if kind[j] != 0:
                    if c is None:
                        allowed = shape.allowed(j, lo, hi, mask)
                        gain -= np.log((allowed * shape.marg[j].pmf[None, :]).sum(1))
                        continue
                    p = shape.column_pmf(j, lo, hi, mask, atoms, shares)
                    ratio = p / shape.marg[j].pmf[None, :]
                    pick = np.argmax(np.nan_to_num(ratio, nan=-1.0), 1)
                    gain += np.log(ratio[np.arange(len(lo)), pick])
                    spikes = atoms.atoms[c].astype(np.int64)
                    forced[c] = (pick[:, None] == spikes[None, :]).astype(float)
                    continue
                cont = shape.cont_mass(j, lo[:, j], hi[:, j])
                if c is None:
                    gain -= np.log(cont)
                    continue
                m = shape.marg[j]
                alpha = np.zeros(len(atoms.atoms[c]))
                if m.atoms is not None and len(m.atoms):
                    for q, a in enumerate(atoms.atoms[c]):
                        k = np.flatnonzero(m.atoms == a)
                        alpha[q] = m.atom_share[k[0]] if len(k) else 0.0
                s = np.asarray(shares[c], float)
                inside = ((atoms.atoms[c][None, :] > lo[:, j, None])
                          & (atoms.atoms[c][None, :] <= hi[:, j, None]))
                opts = np.column_stack([
                    np.where(inside & (alpha[None, :] > 0), np.log(s) - np.log(alpha)[None, :],
                             -np.inf),
                    np.log(np.maximum(1.0 - s.sum(1), 0.0)) - np.log1p(-alpha.sum())
                    - np.log(cont)])
                opts = np.where(np.isnan(opts), -np.inf, opts)
                pick = np.argmax(opts, 1)
                gain += opts[np.arange(len(lo)), pick]
                forced[c] = (pick[:, None] == np.arange(s.shape[1])[None, :]).astype(float)
        return gain, forced

    def _draw_in(self, pick: tuple, free: np.ndarray, rng) -> np.ndarray:
        """One draw in the region ``pick`` of :meth:`_choose`: uniform, then each free atom
        column on its atoms with the region's shares."""
        from forestgen.families.intersection.star import draw_uniform

        lo, hi, mask, shares = pick[:4]
        kind, nlev, nom_off = self._layout
        x = draw_uniform(lo, hi, mask, kind, nom_off, nlev, rng)[None, :]
        if len(pick) > 4 and pick[4]:  # spread by the marginals (region_shape)
            self._shape().draw(x, free, lo[None, :], hi[None, :], mask[None, :], self._atoms(),
                               [s[None, :] for s in shares], rng)
            return x[0]
        if shares:
            self._atoms().draw(x, free[None, :], [s[None, :] for s in shares], lo[None, :],
                               hi[None, :], rng)
        return x[0]

    def _level_probs(self, x: np.ndarray, j: int, reg) -> np.ndarray:
        """P(level of column ``j`` | observed entries of ``x``) from the regions."""
        lw, lo, hi, mask, shares = reg
        kind, nlev, nom_off = self._layout
        k = int(nlev[j])
        if self._cells_marginal():
            pmf = self._shape().column_pmf(j, lo, hi, mask, self._atoms(), shares)
        elif kind[j] == 2:
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
            if self._smooth_marginal():
                box = self._shape().column_pmf(j, g.lo[r0][None, :], g.hi[r0][None, :],
                                               g.mask[r0][None, :], self._atoms(),
                                               self._box_shares())[0]
            else:
                box = (self._level_pmf(j, g.lo[r0][None, :], g.hi[r0][None, :],
                                       self._box_shares())[0]
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
        if self._cells_marginal() and len(c):  # the marginal's mean in the region
            c = self._shape().mean(j, lo, hi, reg[2], atoms, shares)
        elif spiky and len(c):  # the region's point masses move its mean
            c = atoms.mean_shift(j, shares, c, lo[:, j], hi[:, j])
        u = self._uniform_log_weight(x)
        if np.isfinite(u) and self._inside(x):
            cb = float(centre(g.lo[r0, j], g.hi[r0, j]))
            if self._smooth_marginal():
                cb = float(self._shape().mean(j, g.lo[r0][None, :], g.hi[r0][None, :],
                                              g.mask[r0][None, :], atoms,
                                              self._box_shares())[0])
            elif spiky:
                cb = float(atoms.mean_shift(j, self._box_shares(), np.array([cb]),
                                            g.lo[r0, j: j + 1], g.hi[r0, j: j + 1])[0])
            w, c = np.r_[w, u], np.r_[c, cb]
        if not len(w):
            return np.nan
        w = np.exp(w - w.max())
        return float(np.dot(w, c) / w.sum())

    def impute_encoded(self, Z: np.ndarray, miss: np.ndarray, method: str,
                       rng: np.random.Generator) -> np.ndarray:
        """Fill ``Z[miss]`` (encoded rows) from EOGT's conditional: ``"max_density"``
        (uniform in the compatible region of highest density, paper §7.2 with approximation
        (8); in regions spread by the marginals, of highest density relative to the missing
        columns' marginals, drawn from its shape), ``"sample"`` (exact conditional draw) or
        ``"expectation"`` (mean / mode). Observed entries outside the box are left out of the
        evidence (:meth:`_free_outside`); rows of zero probability stay NaN (a warning names
        them). A row compatible with more than ``max_regions`` regions is filled from
        :meth:`sample`'s conditional draws (:meth:`_impute_by_draws`: ``"sample"`` exact,
        ``"expectation"`` and ``"max_density"`` estimates, with a warning)."""
        self._geometry()
        kind, nlev, nom_off = self._layout
        out = Z.copy()
        big, empty = [], []
        rows = np.flatnonzero(miss.any(1))
        evidence = self._free_outside(np.where(miss, np.nan, Z)[rows], "impute")
        for i, x in zip(rows, evidence):
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
        if big:  # by sample(), past the cap
            big, empty = self._impute_by_draws(out, evidence[[int(np.searchsorted(rows, i))
                                                               for i in big]],
                                               np.array(big), miss, method, rng, empty)
        self._too_many(big, "impute")
        if empty:
            warnings.warn(f"EOGT impute: {len(empty)} row(s) (first: {empty[0]}) have "
                          f"observed entries of probability zero; left missing",
                          RuntimeWarning, stacklevel=2)
        return out

    def _impute_by_draws(self, out: np.ndarray, ev: np.ndarray, big: np.ndarray,
                         miss: np.ndarray, method: str, rng: np.random.Generator,
                         empty: list) -> tuple[list, list]:
        """Rows ``big`` past ``max_regions`` (evidence ``ev``) filled from :meth:`sample`'s
        conditional draws (exact, by rejection): one draw (``"sample"``), the mean / most
        frequent level of :data:`EXPECTATION_DRAWS` draws (``"expectation"``), or the one of
        those draws whose completed row has the highest density (``"max_density"``; a
        complete row's density is exact; below the cap the paper's rule ranks the compatible
        regions instead); the last two are estimates, with a warning.
        Returns the rows left (none) and the rows of probability zero."""
        kind = self._layout[0]
        k = 1 if method == "sample" else EXPECTATION_DRAWS
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (rows of probability zero: below)
            drawn = self.encoder_.transform(self.sample(
                conditions=self.encoder_.inverse_transform(np.repeat(ev, k, axis=0)),
                random_state=rng, missing=False), missing_columns="nan").reshape(
                    len(big), k, -1)
        for r, i in enumerate(big):
            cols = np.flatnonzero(miss[i])
            d = drawn[r][:, cols]
            if np.isnan(d).any():
                empty.append(int(i))
                continue
            if k == 1:
                out[i, cols] = d[0]
                continue
            if method == "max_density":
                rows = np.repeat(ev[r][None, :], k, axis=0)
                rows[:, cols] = d
                out[i, cols] = d[int(np.argmax(self.log_prob_encoded(rows)))]
                continue
            for c, j in enumerate(cols):
                if kind[j] == 2:
                    out[i, j] = float(np.bincount(d[:, c].astype(np.int64)).argmax())
                else:
                    v = float(d[:, c].mean())
                    out[i, j] = round(v) if kind[j] == 1 else v
        if k > 1 and len(big):
            what = ("filled with the most probable of" if method == "max_density" else
                    "expectations are estimated from")
            warnings.warn(f"EOGT impute: {len(big)} row(s) (first: {int(big[0])}) need more "
                          f"than max_regions={self.max_regions} compatible regions; their "
                          f"{what} {k} conditional draws", RuntimeWarning, stacklevel=3)
        return [], empty

    def impute(self, X, method="expectation", n_imputations=1, random_state=None):
        """Fill missing entries from EOGT's conditional (see :meth:`impute_encoded`):
        ``"expectation"`` (default: the conditional mean / most probable level, every
        learner's default), ``"max_density"`` (paper §7.2) or ``"sample"``."""
        from forestgen.inference.api import impute

        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state, filler=self.impute_encoded)

    def predict_proba(self, X, target=None):
        """P(level of a discrete ``target`` | each row's other observed entries inside the
        training box; see :meth:`_free_outside`)."""
        self.check_fitted()
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
        self.check_fitted()
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
        from forestgen.inference.conditions import target_index
        from forestgen.validation import warn_input

        target = self._require_target(target, query)
        names = self.schema_.names
        j = target_index(self.schema_, target)
        if isinstance(X, pd.DataFrame):
            notes: list = []
            Z = self.encoder_.transform(X, "nan", notes)
            # (the target left out of the rows is the usual call, not a marginalised column)
            warn_input([n for n in notes if not (n[0] == "absent" and n[1] == names[j])],
                       type(self).__name__)
        else:
            Z = self.encode_rows(X, missing_columns="nan")
        Z[:, j] = np.nan
        return j, self._free_outside(clamp_query_rows(self, Z, query), query)

    def _free_outside(self, Z: np.ndarray, query: str) -> np.ndarray:
        """Leave out of the evidence (NaN, in place) the observed entries of encoded rows
        ``Z`` that lie outside the training box: a level without training rows (unseen at
        fit, or declared but absent) or an ordered code past the seen ones (numeric entries
        were moved to the nearest end of their range first, ``clamp_query_rows``). The law
        gives such an entry probability zero, so a conditional on it is undefined; its row is
        answered from its other entries, with one ``RuntimeWarning`` naming the columns."""
        from forestgen.families.boxes import root_mask

        self._geometry()
        kind, nlev, nom_off = self._layout
        box_mask = root_mask(self.encoder_.schema).astype(bool)
        freed = []
        with np.errstate(invalid="ignore"):
            for j in range(Z.shape[1]):
                z = Z[:, j]
                if nom_off[j] >= 0:
                    k = int(nlev[j])
                    code = np.where(np.isnan(z), 0.0, z)
                    ok = (code >= 0) & (code < k) & (code == np.floor(code))
                    ok &= box_mask[nom_off[j] + np.where(ok, code, 0).astype(np.int64)]
                else:
                    ok = (z > self.box_lo_[j]) & (z <= self.box_hi_[j])
                bad = ~np.isnan(z) & ~ok
                if bad.any():
                    Z[bad, j] = np.nan
                    freed.append(self.schema_.names[j])
        if freed:
            warnings.warn(f"EOGT {query}: observed entries of column(s) {freed} lie outside "
                          f"the training box (a level or value without training rows), where "
                          f"the law has no mass; they are left out of the evidence of their "
                          f"rows", RuntimeWarning, stacklevel=3)
        return Z
