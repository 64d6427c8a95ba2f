"""A finite grid over an encoded table: every column becomes integer codes ``0..n_codes-1``.

Spec ``shared/papers/nrgboost_def.md`` §1. Numeric columns get the quantile bins of
:class:`~forestgen.data.binning.Binner` (at most ``max_bins``; one bin per distinct value when
there are few); discrete columns keep their level codes, with no cap on the number of levels.
A column that had missing values at fit time gets one more code, ``n_values[j]``, for the
*missing* state, so missingness is modelled like any other value. ``ordered[j]`` is False only
for nominal columns (unordered categorical with more than two levels).

A numeric column whose values lie on a grid (``decimals``: multiples of ``10**-decimals``; a
datetime's ``step``) with at most ``max_bins`` grid points in its training range gets one bin
per grid point, the unobserved ones included (spec §1.1: integer-valued columns, fixed-point
decimals scaled to integers), when ``grid_bins`` is set; its draws are exact.

Back to original units (§1.2): a numeric bin ``(a, b]`` spreads its mass uniformly over
``(a, b]`` in densities (its width enters as ``-log(b - a)``) and its point value is its midpoint.
Draws (``decode``): ``"bin"`` = uniform over the bin ``(a, b]``, on the column's grid when it
has one (a new value between two training values, as the reference code draws), except that a
bin whose only training value recurs (held by two or more training rows: a point mass such as
the zeros of a capital-gain column, a value of a discrete scale) decodes to exactly that value,
so that only values seen once spread over their bin; ``"observed"`` = uniform between the
smallest and largest *training* value inside the bin (a bin holding one training value always
decodes to it).

A within-bin law (:meth:`Grid.with_within`; NRGBoost's ``base_measure="marginals"``,
:mod:`~forestgen.families.energy.base_measure`) replaces the uniform spread: per numeric column a
finer histogram whose pieces tile the bins (``fine_edges`` contain every bin edge,
``fine_mass`` the pieces' masses). A value then has, given its bin, the density of its piece
over the bin's mass (:meth:`Grid.log_within`); draws inside a bin follow the pieces (inverse CDF,
:meth:`Grid.draw_within`), then snap to the column's grid as above (the nearest grid point of the
bin's draw range), a point-mass bin still decoding to its value; the mean of a bin
(:meth:`Grid.bin_means`, for ``predict``) is the law's. Without one, all of this is the uniform
law: ``-log width``, uniform draws, midpoints.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from forestgen.data.binning import Binner
from forestgen.data.schema import Schema

UNKNOWN = -1  # code of an entry that is not observed (to be marginalised or sampled)


@dataclass
class Grid:
    """Per column: ``edges`` (numeric bin edges ``[lower, thresholds..., upper]``, empty for
    discrete columns), ``n_values``, ``has_missing`` (an extra missing code), ``ordered``.
    ``outside_levels`` (bool, flat over the value codes of every column; ``None``: none) marks
    the levels of discrete columns outside the grid's domain: declared levels no training row
    takes (:attr:`~forestgen.data.schema.ColumnSpec.support`)."""

    edges: list[np.ndarray]
    obs_lo: list[np.ndarray]  # per numeric bin: the range its draws cover (see ``decode``)
    obs_hi: list[np.ndarray]
    n_values: np.ndarray  # int64 [d]
    has_missing: np.ndarray  # bool [d]
    ordered: np.ndarray  # bool [d]
    discrete: np.ndarray  # bool [d]
    step: np.ndarray | None = None  # float [d]: draws on multiples of step (0: continuous)
    outside_levels: np.ndarray | None = None
    #: the within-bin law (``None``: uniform; see :meth:`with_within`): per column, pieces'
    #: edges (every bin edge among them) and masses; empty arrays: uniform on that column
    fine_edges: list[np.ndarray] | None = None
    fine_mass: list[np.ndarray] | None = None
    fine_start: list[np.ndarray] | None = None  # per column: first piece of each bin, [n + 1]

    def __post_init__(self) -> None:
        if self.step is None:
            self.step = np.zeros(len(self.n_values))
        if self.fine_edges is not None and self.fine_start is None:
            self.fine_start = [np.searchsorted(f, e).astype(np.int64) if len(f) else
                               np.empty(0, np.int64)
                               for f, e in zip(self.fine_edges, self.edges)]

    def with_within(self, fine_edges: list[np.ndarray], fine_mass: list[np.ndarray]) -> Grid:
        """This grid with a within-bin law (module docstring): per numeric column the sorted
        ``fine_edges`` of pieces that tile its bins (every bin edge among them) and their
        positive ``fine_mass``; an empty pair keeps a column uniform within its bins."""
        fe = [np.asarray(f, np.float64) for f in fine_edges]
        fm = [np.asarray(m, np.float64) for m in fine_mass]
        return dataclasses.replace(self, fine_edges=fe, fine_mass=fm, fine_start=None)

    def _law(self, j: int):
        """``(fine_edges, fine_mass, fine_start)`` of numeric column ``j``, or ``None`` where
        its bins are uniform."""
        if self.fine_edges is None or self.discrete[j] or not len(self.fine_edges[j]):
            return None
        return self.fine_edges[j], self.fine_mass[j], self.fine_start[j]

    @classmethod
    def fit(cls, Z: np.ndarray, schema: Schema, max_bins: int = 255, *,
            grid_bins: bool = False, decode: str = "bin") -> Grid:
        """Bins of every column (see the module docstring for ``grid_bins`` and ``decode``)."""
        if decode not in ("bin", "observed"):
            raise ValueError(f"decode must be 'bin' or 'observed', got {decode!r}")
        discrete = schema.discrete_mask
        nominal = schema.nominal_mask
        binner = Binner.fit(Z, discrete, schema.n_levels, max_bins)
        edges, lo, hi, n_values = [], [], [], np.zeros(schema.d, np.int64)
        steps = np.zeros(schema.d)
        for j, spec in enumerate(schema.columns):
            if discrete[j]:
                edges.append(np.empty(0))
                lo.append(np.empty(0))
                hi.append(np.empty(0))
                n_values[j] = max(spec.n_levels, 1)
                continue
            col = Z[:, j][~np.isnan(Z[:, j])]
            h = _grid_step(spec)
            k = int(round((spec.upper - spec.lower) / h)) + 1 if h > 0 else 0
            if grid_bins and 2 <= k <= max_bins:  # one bin per grid point, exact draws
                pts = spec.lower + h * np.arange(k)
                thr = (pts[:-1] + pts[1:]) / 2.0
                e = np.r_[spec.lower, thr, spec.upper].astype(np.float64)
                edges.append(e)
                lo.append(pts.copy())
                hi.append(pts.copy())
                n_values[j] = k
                continue
            thr = binner.thresholds[j]
            e = np.r_[spec.lower, thr, spec.upper].astype(np.float64)
            edges.append(e)
            n_values[j] = len(thr) + 1
            b = np.searchsorted(thr, col, side="left")
            mn = np.full(len(e) - 1, np.inf)
            mx = np.full(len(e) - 1, -np.inf)
            np.minimum.at(mn, b, col)
            np.maximum.at(mx, b, col)
            empty = mn > mx
            mn[empty], mx[empty] = e[:-1][empty], e[1:][empty]
            if decode == "bin":  # exact: a bin holding one value that recurs in training
                atom = (mn == mx) & (np.bincount(b, minlength=len(e) - 1) >= 2)
                a, z = e[:-1].copy(), e[1:].copy()
                if h > 0:  # the grid points inside (a, z]: the first above a, the last <= z
                    a[1:] = (np.floor(a[1:] / h + 1e-9) + 1) * h
                    z = np.floor(z / h + 1e-9) * h
                    z[-1] = e[-1]
                    bad = z < a  # no grid point strictly inside: keep the observed range
                    a[bad], z[bad] = mn[bad], mx[bad]
                    steps[j] = h
                a[atom], z[atom] = mn[atom], mx[atom]
                mn, mx = a, z
            lo.append(mn)
            hi.append(mx)
        has_missing = np.isnan(Z).any(axis=0)
        out = np.concatenate([~s.support if discrete[j] else np.zeros(n_values[j], bool)
                              for j, s in enumerate(schema.columns)])
        return cls(edges, lo, hi, n_values, has_missing, ~nominal, discrete.copy(), steps,
                   out if out.any() else None)

    # ------------------------------------------------------------------ layout
    @property
    def d(self) -> int:
        return len(self.n_values)

    @property
    def n_codes(self) -> np.ndarray:
        """Codes per column, the missing state included."""
        return self.n_values + self.has_missing

    @property
    def code_offsets(self) -> np.ndarray:
        """Offsets of each column's codes in a flat ``[sum(n_codes)]`` layout (int64 [d+1])."""
        return np.r_[0, np.cumsum(self.n_codes)].astype(np.int64)

    def in_domain(self, j: int) -> np.ndarray:
        """Bool ``[n_values[j]]``: which value codes of column ``j`` are in the domain."""
        n = int(self.n_values[j])
        if self.outside_levels is None:
            return np.ones(n, bool)
        a = int(np.sum(self.n_values[:j]))
        return ~self.outside_levels[a:a + n]

    def widths(self, j: int) -> np.ndarray:
        """Bin widths of numeric column ``j`` (zero for a constant column)."""
        return np.diff(self.edges[j])

    def midpoints(self, j: int) -> np.ndarray:
        e = self.edges[j]
        return (e[:-1] + e[1:]) / 2.0

    def bin_means(self, j: int) -> np.ndarray:
        """Mean of each bin of numeric column ``j`` under the within-bin law (the midpoints
        when uniform)."""
        law = self._law(j)
        if law is None:
            return self.midpoints(j)
        fe, fm, start = law
        mid = 0.5 * (fe[:-1] + fe[1:])
        return np.add.reduceat(fm * mid, start[:-1]) / np.add.reduceat(fm, start[:-1])

    def split_thresholds(self) -> list[np.ndarray]:
        """Per column, the encoded value at the top of each value code (numeric: the inner bin
        edges; discrete: the level code itself): a split ``code <= t`` is ``x <= thr[j][t]``,
        and ``searchsorted(thr[j], x, "right") - 1`` is the last code at or below ``x``."""
        return [self.edges[j][1:-1].copy() if not self.discrete[j]
                else np.arange(int(self.n_values[j]), dtype=np.float64) for j in range(self.d)]

    # ------------------------------------------------------------------ encode / decode
    def codes(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(codes int32 [n, d], outside bool [n, d])``.

        NaN becomes the missing code where the column has one, else :data:`UNKNOWN`. Numeric
        values outside the training range go to the end bins and unseen levels (and levels
        outside the domain, ``outside_levels``) become :data:`UNKNOWN`; ``outside`` flags both
        (their density is zero).
        """
        n, d = Z.shape
        C = np.empty((n, d), np.int32)
        outside = np.zeros((n, d), bool)
        for j in range(d):
            col = Z[:, j]
            miss = np.isnan(col)
            v = np.where(miss, 0.0, col)
            if self.discrete[j]:
                bad = (v < 0) | (v >= self.n_values[j]) | (v != np.round(v))
                if self.outside_levels is not None:
                    bad |= ~self.in_domain(j)[np.where(bad, 0, v).astype(np.int64)]
                c = np.where(bad, UNKNOWN, v).astype(np.int32)
                outside[:, j] = bad & ~miss
            else:
                e = self.edges[j]
                c = np.searchsorted(e[1:-1], v, side="left").astype(np.int32)
                outside[:, j] = ~miss & ((v < e[0]) | (v > e[-1]))
            c[miss] = self.n_values[j] if self.has_missing[j] else UNKNOWN
            C[:, j] = c
        return C, outside

    def rounded_to(self, np_dtype) -> Grid:
        """This grid as rows rounded to ``np_dtype`` see it (``to_torch`` in float32): interior
        edges, which sit on training values, rounded to the nearest value as a row holding it
        is (:func:`~forestgen.leaves.base.edges_to`), the outer edges rounded outward (a value
        at the column's maximum stays in range)."""
        from forestgen.leaves.base import edges_to, floor_to

        if np_dtype == np.float64:
            return self
        edges = []
        for j, e in enumerate(self.edges):
            if self.discrete[j] or len(e) < 2:
                edges.append(e)
                continue
            t = edges_to(e, np_dtype, at_values=True).astype(np.float64)
            t[0] = floor_to(e[:1], np_dtype)[0]
            t[-1] = -floor_to(-e[-1:], np_dtype)[0]
            edges.append(t)
        return dataclasses.replace(self, edges=edges)

    def decode(self, C: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Encoded float rows from codes: a uniform draw inside numeric bins, NaN for missing."""
        n, d = C.shape
        Z = np.empty((n, d))
        u = rng.random((n, d))
        for j in range(d):
            c = C[:, j].astype(np.int64)
            miss = c >= self.n_values[j]
            cc = np.where(miss, 0, c)
            if self.discrete[j]:
                z = cc.astype(np.float64)
            elif self._law(j) is not None:
                z = self._decode_within(j, cc, u[:, j])
            elif self.step[j] > 0:  # a uniform grid point in [a, b]
                a, b = self.obs_lo[j][cc], self.obs_hi[j][cc]
                h = self.step[j]
                k = np.floor(u[:, j] * (np.round((b - a) / h) + 1))
                z = np.minimum(a + k * h, b)
            else:
                a, b = self.obs_lo[j][cc], self.obs_hi[j][cc]
                z = a + u[:, j] * (b - a)
            z[miss] = np.nan
            Z[:, j] = z
        return Z

    def _decode_within(self, j: int, c: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Draws of numeric column ``j`` inside bins ``c`` from the within-bin law: on a grid
        (``step``), a draw over the whole bin snapped to the nearest grid point of the bin's
        draw range ``[obs_lo, obs_hi]``; else a draw restricted to that range (the bin itself,
        or with ``decode="observed"`` its training values' span). A range of one point gives
        that point."""
        a, b = self.obs_lo[j][c], self.obs_hi[j][c]
        h = self.step[j]
        if h > 0:
            e = self.edges[j]
            z = self.draw_within(j, e[c], e[c + 1], u)
            k = np.clip(np.round((z - a) / h), 0, np.round((b - a) / h))
            return np.minimum(a + k * h, b)
        return self.draw_within(j, a, b, u)

    def draw_within(self, j: int, a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Values of numeric column ``j`` in ``[a, b]`` (inside one bin each) from uniforms
        ``u``: the within-bin law restricted to ``[a, b]`` by its inverse CDF (``a + u (b - a)``
        when uniform)."""
        law = self._law(j)
        if law is None:
            return a + u * (b - a)
        fe, fm = law[0], law[1]
        cdf = np.r_[0.0, np.cumsum(fm)]
        fa, fb = np.interp(a, fe, cdf), np.interp(b, fe, cdf)
        z = np.interp(fa + u * (fb - fa), cdf, fe)
        return np.clip(z, a, b)

    def interval_share(self, j: int, lo: float, hi: float) -> np.ndarray:
        """Per bin of numeric column ``j``, the share of its mass (the within-bin law's, else
        uniform) inside ``(lo, hi]``: 1 for a bin inside, 0 for one outside, a fraction for a
        bin the interval cuts; 1 for a bin of no width that meets it."""
        e = np.asarray(self.edges[j], np.float64)
        law = self._law(j)
        if law is None:
            cum, x = e, e
        else:
            x, cum = law[0], np.r_[0.0, np.cumsum(law[1])]
        at = np.interp(e, x, cum)
        inner = np.interp(np.clip(hi, e[:-1], e[1:]), x, cum) - \
            np.interp(np.clip(lo, e[:-1], e[1:]), x, cum)
        mass = at[1:] - at[:-1]
        meets = (e[1:] >= lo) & (e[:-1] <= hi)
        share = np.where(mass > 0, inner / np.where(mass > 0, mass, 1.0), meets.astype(float))
        return np.clip(share, 0.0, 1.0)

    def log_within(self, C: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """``sum_j log r_j(z_j | bin)`` over numeric columns with positive-width bins [n]: the
        log density of each value given its bin code (``C``, from :meth:`codes`; entries not a
        value code are skipped), ``-log width`` where the bins are uniform."""
        out = np.zeros(len(C))
        for j in range(self.d):
            law = self._law(j)
            if law is None:
                if not self.discrete[j]:
                    out -= self._log_width_col(C, j)
                continue
            fe, fm, start = law
            c = C[:, j]
            val = (c >= 0) & (c < self.n_values[j])
            cv = c[val]
            k = np.searchsorted(fe, Z[val, j], side="left") - 1
            k = np.clip(k, start[cv], start[cv + 1] - 1)
            bin_mass = np.add.reduceat(fm, start[:-1])
            out[val] += np.log(fm[k] / (fe[k + 1] - fe[k])) - np.log(bin_mass[cv])
        return out

    def _log_width_col(self, C: np.ndarray, j: int) -> np.ndarray:
        """``log width_j(code)`` of numeric column ``j`` per row (0 where not a value code)."""
        out = np.zeros(len(C))
        w = self.widths(j)
        if not np.all(w > 0):
            return out  # a constant column is a point mass
        c = C[:, j]
        val = (c >= 0) & (c < self.n_values[j])
        out[val] = np.log(w[c[val]])
        return out

    def log_width(self, C: np.ndarray) -> np.ndarray:
        """``sum_j log width_j(code)`` over numeric columns with positive-width bins [n]."""
        out = np.zeros(len(C))
        for j in range(self.d):
            if not self.discrete[j]:
                out += self._log_width_col(C, j)
        return out

    # ------------------------------------------------------------------ persistence
    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {"n_values": self.n_values, "has_missing": self.has_missing,
               "ordered": self.ordered, "discrete": self.discrete, "step": self.step}
        if self.outside_levels is not None:
            out["outside_levels"] = self.outside_levels
        for j, e in enumerate(self.edges):
            out[f"edges{j}"] = e
            out[f"obs_lo{j}"] = self.obs_lo[j]
            out[f"obs_hi{j}"] = self.obs_hi[j]
            if self.fine_edges is not None:
                out[f"fine_edges{j}"] = self.fine_edges[j]
                out[f"fine_mass{j}"] = self.fine_mass[j]
        return out

    def check(self, schema: Schema) -> None:
        """Raise ``ValueError`` unless this grid (read from a model file) fits ``schema``:
        per-column flags and counts of the right length, discrete columns coded by their
        levels, numeric ones by sorted finite edges with one draw range per bin."""
        d = schema.d
        for name in ("n_values", "has_missing", "ordered", "discrete", "step"):
            a = getattr(self, name)
            if np.shape(a) != (d,):
                raise ValueError(f"grid.{name} has shape {np.shape(a)}, the schema {d} columns")
        if not np.array_equal(self.discrete, schema.discrete_mask):
            raise ValueError("grid.discrete does not match the schema's discrete columns")
        if not (np.all(np.isfinite(self.step)) and np.all(self.step >= 0)):
            raise ValueError("grid.step must be finite and >= 0")
        if len(self.edges) != d or len(self.obs_lo) != d or len(self.obs_hi) != d:
            raise ValueError("the grid needs edges / obs_lo / obs_hi for every column")
        for j, spec in enumerate(schema.columns):
            n = int(self.n_values[j])
            e, lo, hi = self.edges[j], self.obs_lo[j], self.obs_hi[j]
            if self.discrete[j]:
                if n != max(spec.n_levels, 1) or len(e):
                    raise ValueError(f"grid column {spec.name!r}: {n} codes for "
                                     f"{spec.n_levels} levels")
                continue
            if (n < 1 or e.ndim != 1 or len(e) != n + 1 or not np.all(np.isfinite(e))
                    or np.any(np.diff(e) < 0) or lo.shape != (n,) or hi.shape != (n,)
                    or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
                    or np.any(hi < lo)):
                raise ValueError(f"grid column {spec.name!r}: its {n} bins need {n + 1} "
                                 f"sorted finite edges and finite draw ranges (lo <= hi)")
        if self.outside_levels is not None and self.outside_levels.shape != (
                int(self.n_values.sum()),):
            raise ValueError("grid.outside_levels does not match the value codes")
        if self.fine_edges is not None:
            self._check_within(schema)

    def _check_within(self, schema: Schema) -> None:
        """The within-bin law: per numeric column either empty or sorted finite pieces that
        contain every bin edge, with positive finite masses, one per piece."""
        if len(self.fine_edges) != self.d or len(self.fine_mass) != self.d:
            raise ValueError("the grid's within-bin law needs fine_edges / fine_mass for every "
                             "column")
        for j, spec in enumerate(schema.columns):
            fe, fm = self.fine_edges[j], self.fine_mass[j]
            if not len(fe) and not len(fm):
                continue
            e = self.edges[j]
            ok = (not self.discrete[j] and fe.ndim == 1 and fm.shape == (len(fe) - 1,)
                  and len(fe) >= 2 and np.all(np.isfinite(fe)) and np.all(np.diff(fe) > 0)
                  and np.all(np.isfinite(fm)) and np.all(fm > 0))
            if ok:
                s = np.searchsorted(fe, e)
                ok = bool(np.all(s < len(fe)) and np.array_equal(fe[np.minimum(s, len(fe) - 1)],
                                                                 e) and np.all(np.diff(s) > 0))
            if not ok:
                raise ValueError(f"grid column {spec.name!r}: its within-bin law needs sorted "
                                 f"finite pieces containing every bin edge and one positive "
                                 f"mass per piece")

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> Grid:
        d = len(a["n_values"])
        f = [[np.asarray(a[f"{k}{j}"], np.float64) for j in range(d)]
             for k in ("edges", "obs_lo", "obs_hi")]
        grid = cls(f[0], f[1], f[2], np.asarray(a["n_values"], np.int64),
                   np.asarray(a["has_missing"], bool), np.asarray(a["ordered"], bool),
                   np.asarray(a["discrete"], bool),
                   np.asarray(a["step"], np.float64) if "step" in a else None,
                   np.asarray(a["outside_levels"], bool) if "outside_levels" in a else None)
        if "fine_edges0" not in a:  # uniform within bins (written before s54, or "blend")
            return grid
        fe = [np.asarray(a.get(f"fine_edges{j}", np.empty(0)), np.float64) for j in range(d)]
        fm = [np.asarray(a.get(f"fine_mass{j}", np.empty(0)), np.float64) for j in range(d)]
        bad = [j for j in range(d) if not (fe[j].ndim == 1 and len(fe[j]) != 1
                                           and fm[j].shape == (max(len(fe[j]) - 1, 0),)
                                           and np.all(np.diff(fe[j]) > 0))]
        if bad:
            raise ValueError(f"grid column {bad[0]}: its within-bin law needs sorted pieces "
                             f"and one mass per piece")
        return grid.with_within(fe, fm)


def _grid_step(spec) -> float:
    """Spacing of a numeric column's value grid in encoded units (0: none)."""
    if spec.step is not None:
        return float(spec.step)
    if spec.decimals is not None:
        return 10.0 ** -int(spec.decimals)
    return 0.0
