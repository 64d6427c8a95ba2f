"""NRGBoost's base measure ``q0`` as the column marginals of GF.Boost (issue 37; a departure).

The paper's ``q0`` (spec ``shared/papers/nrgboost_def.md`` §2.1, §3.9) is a product over columns
of ``m_j = 0.9 p̂_j + 0.1 / C_j`` on the grid: each column's empirical pmf over its grid codes
blended with 10% uniform, and a numeric bin spreads its mass uniformly over its width. On small
tables that base measure scores held-out rows below the product of the column marginals of
:func:`forestgen.auto.marginals_model` (``benchmarks/results/nrgboost_q0_s54.md``): NRGBoost's
bins of a numeric column hold about one training value each, so a bin histogram is ragged, and a
value that recurs on a measurement grid (a wind speed of 7.4, a blood pressure of 93) has its
mass spread over a bin wider than its grid cell.

``base_measure="marginals"`` (the default) takes the law of those marginals instead
(:func:`~forestgen.families.intersection.marginals.fit_marginals`: a kernel-smoothed histogram
with grid spikes for repeated values and point masses for a column's atoms, one uniform
pseudo-row), per column:

* a numeric column: ``q0`` of a grid bin is the marginal's mass on it (its atoms included),
  and *within* the bin a value has the marginal's density restricted to the bin — the
  marginal's histogram cut at the grid's edges (:meth:`~forestgen.families.energy.grid.Grid.
  with_within`), so that round 0 is the marginals' law itself rather than a bin-averaged copy;
* a discrete column: the pmf ``(count + s / |S|) / (n + 1)`` over the column's domain ``S`` (its
  levels seen in training; ``s`` = 1 on them);
* the missing state, where the column has one, its training share; the values share the rest.

The energy acts on grid codes only, so the trees, Gibbs sampling, ``log Z`` by importance
sampling from ``q0``, and the exact one-column conditionals over codes are unchanged: they read
``log q0`` per code. What the within-bin law changes is everything that turns a code into a value
or a value into a density: ``log_prob`` (``log r_j(x_j | bin)`` in place of ``-log width``),
draws inside a bin, interval evidence, and the bin means of ``predict`` and ``impute``; all of
them read the grid's within-bin law (:class:`~forestgen.families.energy.grid.Grid`).
"""

from __future__ import annotations

import numpy as np

from forestgen.families.boxes import column_layout, root_box, root_mask
from forestgen.families.intersection.marginals import fit_marginals

#: base measures of :class:`~forestgen.families.energy.nrgboost.NRGBoost` (``base_measure``)
BASE_MEASURES = ("marginals", "blend")


def marginals_base(Z: np.ndarray, schema, grid) -> tuple[np.ndarray, list, list]:
    """``(log_q0, fine_edges, fine_mass)`` of the marginals' law on ``grid`` from the encoded
    training rows ``Z`` (module docstring): flat per-code ``log q0`` (offsets
    ``grid.code_offsets``; ``-inf`` outside the domain) and per numeric column the within-bin
    law for :meth:`~forestgen.families.energy.grid.Grid.with_within` (empty arrays for discrete
    and constant columns)."""
    kind, nlev, nom_off, _ = column_layout(schema)
    lo, hi = root_box(Z, schema)
    marg = fit_marginals(Z, schema, kind, nlev, nom_off, lo, hi, root_mask(schema), spikes=True)
    off = grid.code_offsets
    log_q0 = np.empty(off[-1])
    fine_edges, fine_mass = [], []
    for j in range(grid.d):
        z = Z[:, j]
        miss = np.isnan(z)
        p_miss = float(miss.mean()) if grid.has_missing[j] else 0.0
        z = z[~miss]
        nv = int(grid.n_values[j])
        fe = fm = np.empty(0)
        if grid.discrete[j]:
            dom = grid.in_domain(j).astype(float)
            count = np.bincount(z.astype(np.int64), minlength=nv)[:nv].astype(float)
            p = (count * dom + dom / dom.sum()) / (count @ dom + 1.0)
        else:
            e = grid.edges[j]
            if nv == 1 or not np.all(np.diff(e) > 0):
                p = np.full(nv, 1.0 / nv)
            else:
                fe, fm, p = _numeric_law(marg[j], e)
        with np.errstate(divide="ignore"):
            vals = np.log((1.0 - p_miss) * p)
        log_q0[off[j]:off[j] + nv] = vals
        if grid.has_missing[j]:
            log_q0[off[j] + nv] = np.log(p_miss)
        fine_edges.append(fe)
        fine_mass.append(fm)
    return log_q0, fine_edges, fine_mass


def _numeric_law(m, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fine_edges, fine_mass, bin_mass)`` of the marginal ``m`` on the grid edges ``e``: its
    histogram cut at the union of both edge sets inside ``[e[0], e[-1]]`` (each piece's mass its
    density times its width, renormalised to the grid's range: no piece loses its mass to
    rounding), and each grid bin's mass under the whole marginal, atoms included (the first
    bin closed at ``e[0]``, which a training minimum may be)."""
    me = m.edges
    inner = me[(me > e[0]) & (me < e[-1])]
    fe = np.unique(np.r_[e, inner])
    dens = np.diff(m.cdf) / np.diff(me)
    mid = 0.5 * (fe[:-1] + fe[1:])
    piece = np.clip(np.searchsorted(me, mid, side="left") - 1, 0, len(dens) - 1)
    fm = dens[piece] * np.diff(fe)
    fm /= fm.sum()
    start = np.searchsorted(fe, e)
    hist = np.add.reduceat(fm, start[:-1])
    share = m.atom_share if m.atoms is not None and len(m.atoms) else np.zeros(0)
    if len(share):
        lo, hi = e[:-1].copy(), e[1:].copy()
        lo[0], hi[-1] = -np.inf, np.inf
        atoms = m.atoms_inside(lo, hi) @ share
        bin_mass = (1.0 - share.sum()) * hist + atoms
    else:
        bin_mass = hist
    return fe, fm, bin_mass / bin_mass.sum()
