"""The conformance checks behind :mod:`forestgen.testing`."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from forestgen.leaves.base import ColumnCell, LeafModel
from forestgen.testing.fixtures import check_that, fail, leaf_faces, small_tables
from forestgen.testing.packed import check_packed_form

# ----------------------------------------------------------------------------- leaf models


def _cells(discrete: bool, rng: np.random.Generator, L: int = 5, k: int = 4):
    """Cells of ``L`` leaves and paired (value, leaf) data inside them."""
    if discrete:
        allowed = np.ones((L, k), bool)
        allowed[1, 0] = False
        allowed[2, 1:3] = False
        allowed[3, :] = [False, False, True, False]  # a one-level cell
        leaf = np.repeat(np.arange(L), 40)
        x = np.array([rng.choice(np.nonzero(allowed[lf])[0]) for lf in leaf], float)
        x[4 * 40:] = np.nan  # leaf 4 never observes the column
        cell = ColumnCell(lower=np.full(L, -0.5), upper=np.full(L, k - 0.5), allowed=allowed,
                          data_min=0.0, data_max=k - 1.0, n_levels=k)
        return x, leaf, cell
    lower = np.array([-2.0, -1.0, 0.0, 0.5, -3.0])[:L]
    upper = np.array([-1.0, 0.0, 0.5, 3.0, 3.0])[:L]
    leaf = np.repeat(np.arange(L), 40)
    x = rng.uniform(lower[leaf], upper[leaf])
    x[leaf == 2] = 0.25  # all values equal: degenerate spread
    x[4 * 40:] = np.nan
    x[leaf == 4] = np.nan  # leaf 4 never observes the column
    cell = ColumnCell(lower=lower, upper=upper, allowed=None, data_min=-3.0, data_max=3.0)
    return x, leaf, cell


def check_leaf_model(leaf: LeafModel, *, random_state: int = 0) -> None:
    """Fit ``leaf`` (an unfitted instance) on paired data in 5 finite cells and check: NaN ->
    log 0; zero density outside the cell; a density that integrates to one over each cell
    (numeric) or a pmf summing to one over the allowed levels (discrete); interval / level
    probabilities and ``mean_interval`` consistent with the density; samples inside the cell
    (and inside a requested interval / level set) whose mean matches ``mean``; identical
    answers after a save/load round trip of ``param_arrays`` and ``get_params``; the torch
    hook, when present, equal to ``log_prob``; the torch sampling hook, when present, drawing
    inside each cell with the numpy sampler's distribution (two-sample KS / level
    frequencies); its own ``sample_uniform``, when present, equal to ``sample`` for the same
    generator; a declared packed form (``packed_form`` / ``packed_factors``) with its
    arrays and equal to ``log_prob`` / ``log_prob_interval`` / ``log_prob_levels``; its own
    ``fit_column``, when present, fitting what ``fit`` fits on the tiled pairs."""
    if not isinstance(leaf, LeafModel):
        raise TypeError(f"check_leaf_model needs a LeafModel instance, got {leaf!r}")
    rng = np.random.default_rng(random_state)
    name = type(leaf).__name__
    x, lv, cell = _cells(leaf.discrete, rng)
    L = len(cell.lower)
    fitted = type(leaf)(**leaf.get_params())
    fitted.fit(x, lv, cell, None)
    leaves = np.arange(L)
    lp_nan = fitted.log_prob(leaves, np.full(L, np.nan))
    check_that(np.array_equal(lp_nan, np.zeros(L)), f"{name}.log_prob", "NaN must give 0")
    if leaf.discrete:
        _check_discrete(fitted, cell, rng, name)
    else:
        _check_numeric(fitted, cell, rng, name)
    # its own fit_column fits what fit fits on the tiled pairs
    if type(leaf).fit_column is not LeafModel.fit_column:
        col = type(leaf)(**leaf.get_params()).fit_column(x, np.stack([lv, lv]), cell, None)
        tiled = type(leaf)(**leaf.get_params()).fit(np.tile(x, 2), np.tile(lv, 2), cell, None)
        a, b = col.param_arrays(), tiled.param_arrays()
        check_that(a.keys() == b.keys() and all(
            np.allclose(a[k], b[k], rtol=1e-12, atol=0.0, equal_nan=True) for k in a),
            f"{name}.fit_column", "must fit what fit fits on the pairs tree by tree")
    # persistence: parameters + arrays rebuild an identical model
    again = type(leaf)(**fitted.get_params())
    again.set_param_arrays({k: np.array(v) for k, v in fitted.param_arrays().items()})
    probe = _probe(fitted, cell, rng)
    check_that(np.array_equal(again.log_prob(*probe), fitted.log_prob(*probe)),
               f"{name} persistence", "param_arrays()/get_params() do not rebuild the same model")
    # its own sample_uniform draws what sample draws from the same generator
    if fitted.has_uniform_sampler:
        lf_u = np.random.default_rng(6).integers(0, L, 500)
        u = np.random.default_rng(7).random(500)
        check_that(np.array_equal(fitted.sample(lf_u, np.random.default_rng(7)),
                                  fitted.sample_uniform(lf_u, u)),
                   f"{name}.sample_uniform", "must equal sample for the same generator")
    # a declared packed form computes what the methods do (the fused walks read it)
    lf, xv = probe
    if leaf.discrete:
        check_packed_form(fitted, lf, xv, name, levels=np.arange(cell.n_levels) % 2 == 0)
    else:
        span = cell.upper[lf] - cell.lower[lf]
        ends = np.sort(cell.lower[lf, None] + span[:, None] * rng.uniform(-0.2, 1.2, (len(lf), 2)),
                       axis=1)
        check_packed_form(fitted, lf, xv, name, lo=ends[:, 0], hi=ends[:, 1])
    if fitted.has_torch:
        import torch

        params = fitted.torch_params(torch.float64, torch.device("cpu"))
        lf, xv = probe
        t = type(fitted).torch_log_prob(params, torch.as_tensor(lf),
                                        torch.as_tensor(np.nan_to_num(xv)))
        check_that(np.allclose(t.numpy(), fitted.log_prob(lf, np.nan_to_num(xv)), rtol=1e-10,
                               atol=1e-12, equal_nan=True),
                   f"{name}.torch_log_prob", "differs from log_prob")
    if fitted.has_torch_sampler:
        _check_torch_sample(fitted, cell, rng, name)
    if not leaf.discrete:
        for edge, check in EDGE_CELLS.items():
            if edge in leaf.handles_cells or edge == "extreme-scale":
                check(leaf, rng, f"{name} on {'an' if edge[0] in 'aeiou' else 'a'} {edge} "
                                 f"cell")


# ----------------------------------------------------------------------------- edge cells


def _edge_fit(leaf, lower, upper, x, leaf_ids, data_min, data_max):
    cell = ColumnCell(lower=np.asarray(lower, float), upper=np.asarray(upper, float),
                      allowed=None, data_min=float(data_min), data_max=float(data_max))
    lm = type(leaf)(**leaf.get_params())
    lm.fit(np.asarray(x, float), np.asarray(leaf_ids), cell, None)
    return lm, cell


def _no_nan(values, what, detail):
    check_that(not np.isnan(np.asarray(values, float)).any(), what, detail)


def _edge_zero_width(leaf, rng, where):
    """Leaf 0 is the zero-width cell ``(1, 1]``: only rows missing the column reached it (ARF
    and GeF grow such leaves). The model must fit and answer without NaN: ``sample`` and
    ``mean`` give the cell's point (or a value just above it, where the model widens the cell),
    densities and interval probabilities a number or ``-inf``."""
    x = np.r_[np.full(5, np.nan), rng.uniform(0.0, 2.0, 40)]
    ids = np.r_[np.zeros(5, int), np.ones(40, int)]
    lm, _ = _edge_fit(leaf, [1.0, 0.0], [1.0, 2.0], x, ids, 0.0, 2.0)
    z = np.zeros(3, int)
    lp = lm.log_prob(z, np.array([1.0, 1.5, np.nan]))
    _no_nan(lp, f"{where}: log_prob", f"gave {lp}")
    check_that(lp[2] == 0.0, f"{where}: log_prob", "NaN must give 0")
    iv = lm.log_prob_interval(np.zeros(2, int), np.array([0.0, -np.inf]),
                              np.array([2.0, np.inf]))
    _no_nan(iv, f"{where}: log_prob_interval", f"gave {iv}")
    mean = float(lm.mean(np.zeros(1, int))[0])
    check_that(1.0 - 1e-9 <= mean <= 1.0 + 1e-6, f"{where}: mean",
               f"{mean} is not the cell's point")
    s = lm.sample(np.zeros(50, int), rng)
    check_that(np.all((s >= 1.0 - 1e-9) & (s <= 1.0 + 1e-6)), f"{where}: sample",
               f"draws {s[:3]} are not the cell's point")
    mi = lm.mean_interval(np.zeros(1, int), np.array([0.0]), np.array([2.0]))
    _no_nan(mi, f"{where}: mean_interval", f"gave {mi}")


def _edge_unbounded(leaf, rng, where):
    """An unbounded cell ``(-inf, inf)`` (ARF's boundary leaves without ``finite_bounds``):
    a density that integrates to one, finite means and draws."""
    x = rng.normal(3.0, 2.0, 200)
    lm, _ = _edge_fit(leaf, [-np.inf], [np.inf], x, np.zeros(200, int), x.min(), x.max())
    span = x.max() - x.min()
    g = np.linspace(x.min() - 20 * span, x.max() + 20 * span, 400001)
    dens = np.exp(lm.log_prob(np.zeros(g.size, int), g))
    total = float(np.trapezoid(dens, g))
    check_that(abs(total - 1.0) < 5e-3, f"{where}: normalisation",
               f"the density integrates to {total:.5f}")
    whole = lm.log_prob_interval(np.zeros(1, int), np.array([-np.inf]), np.array([np.inf]))[0]
    check_that(abs(whole) < 1e-6, f"{where}: log_prob_interval", "the whole line must have mass 1")
    check_that(np.isfinite(lm.mean(np.zeros(1, int))).all(), f"{where}: mean", "not finite")
    check_that(np.isfinite(lm.sample(np.zeros(100, int), rng)).all(), f"{where}: sample",
               "non-finite draws")


def _edge_empty(leaf, rng, where):
    """A cell of positive width that no value reached (NaN-only): still a distribution on
    the cell."""
    x = np.r_[np.full(10, np.nan), rng.uniform(0.0, 1.0, 30)]
    ids = np.r_[np.zeros(10, int), np.ones(30, int)]
    lm, _ = _edge_fit(leaf, [2.0, 0.0], [5.0, 1.0], x, ids, 0.0, 5.0)
    g = 2.0 + (np.arange(20000) + 0.5) * 3.0 / 20000
    total = float(np.exp(lm.log_prob(np.zeros(g.size, int), g)).sum() * 3.0 / g.size)
    check_that(abs(total - 1.0) < 2e-3, f"{where}: normalisation",
               f"the density integrates to {total:.5f} over the empty cell")
    s = lm.sample(np.zeros(200, int), rng)
    check_that(np.all((s > 2.0) & (s <= 5.0)), f"{where}: sample", "draws outside the cell")


def _edge_scales(leaf, rng, where):
    """Values of magnitude 1e-300 and 1e+300: no overflow, underflow or NaN (every numeric
    leaf model)."""
    for scale in (1e-300, 1e300):
        lower, upper = np.array([-2.0, 0.5]) * scale, np.array([0.5, 3.0]) * scale
        ids = np.repeat([0, 1], 30)
        x = rng.uniform(lower[ids], upper[ids])
        lm, _ = _edge_fit(leaf, lower, upper, x, ids, -2.0 * scale, 3.0 * scale)
        lp = lm.log_prob(ids, x)
        check_that(np.isfinite(lp).all(), f"{where} x{scale:g}: log_prob",
                   "training values must have a finite density")
        whole = lm.log_prob_interval(np.arange(2), lower - scale, upper + scale)
        check_that(np.allclose(whole, 0.0, atol=1e-6), f"{where} x{scale:g}: log_prob_interval",
                   f"each cell must have mass 1, got {np.exp(whole)}")
        s = lm.sample(ids, rng)
        check_that(np.all((s > lower[ids]) & (s <= upper[ids])), f"{where} x{scale:g}: sample",
                   "draws outside the cell")


#: edge cells every numeric leaf model is checked on (LeafModel contract, "Edge cells")
EDGE_CELLS = {"zero-width": _edge_zero_width, "unbounded": _edge_unbounded,
              "empty": _edge_empty, "extreme-scale": _edge_scales}


def _check_torch_sample(lm, cell, rng, name, m: int = 3000):
    import torch
    from scipy import stats

    L = len(cell.lower)
    params = lm.torch_sample_params(L, torch.device("cpu"))
    g = torch.Generator().manual_seed(int(rng.integers(2**31)))
    for j in range(L):
        u = torch.rand(m, generator=g, dtype=torch.float64)
        t = type(lm).torch_sample(params, torch.full((m,), j), u)
        check_that(t.dtype == torch.float64 and t.shape == (m,), f"{name}.torch_sample",
                   f"must return float64 [m], got {t.dtype} {tuple(t.shape)}")
        t = t.numpy()
        s = lm.sample(np.full(m, j), rng)
        if lm.discrete:
            check_that(np.all(cell.allowed[j, t.astype(int)]), f"{name}.torch_sample",
                       f"a draw outside the levels of cell {j}")
            k = cell.allowed.shape[1]
            tv = 0.5 * np.abs(np.bincount(t.astype(int), minlength=k)
                              - np.bincount(s.astype(int), minlength=k)).sum() / m
            check_that(tv < 0.06, f"{name}.torch_sample", f"cell {j}: level frequencies differ "
                       f"from sample() by TV {tv:.3f}")
        else:
            a, b = cell.lower[j], cell.upper[j]
            check_that(np.all((t > a) & (t <= b)), f"{name}.torch_sample",
                       f"draws outside cell {j}")
            p = stats.ks_2samp(t, s).pvalue
            check_that(p > 1e-4, f"{name}.torch_sample",
                       f"cell {j}: draws differ from sample() (KS p = {p:.2g})")


def _probe(lm, cell, rng, m: int = 400):
    L = len(cell.lower)
    leaf = rng.integers(0, L, m)
    if lm.discrete:
        x = rng.integers(-1, cell.n_levels + 1, m).astype(float)
    else:
        span = cell.upper - cell.lower
        x = rng.uniform(cell.lower[leaf] - 0.2 * span[leaf], cell.upper[leaf] + 0.2 * span[leaf])
    return leaf, x


def _check_numeric(lm, cell, rng, name):
    for j in range(len(cell.lower)):
        a, b = cell.lower[j], cell.upper[j]
        # midpoint rule on a fine grid inside (a, b]
        g = a + (np.arange(20000) + 0.5) * (b - a) / 20000
        dens = np.exp(lm.log_prob(np.full(g.size, j), g))
        total = float(dens.sum() * (b - a) / g.size)
        check_that(abs(total - 1.0) < 2e-3, f"{name} normalisation",
                   f"density integrates to {total:.5f} over cell {j} ({a}, {b}]")
        out = np.array([a - 0.1 * (b - a), b + 0.1 * (b - a)])
        check_that(np.all(np.isneginf(lm.log_prob(np.full(2, j), out))), f"{name}.log_prob",
                   f"density outside cell {j} must be 0 (log -inf)")
        c = a + 0.3 * (b - a)
        mass = float(dens[g <= c].sum() * (b - a) / g.size)
        lpi = lm.log_prob_interval(np.array([j]), np.array([a]), np.array([c]))[0]
        check_that(abs(np.exp(lpi) - mass) < 3e-3, f"{name}.log_prob_interval",
                   f"P({a} < X <= {c}) = {np.exp(lpi):.5f}, the density integrates to {mass:.5f}")
        whole = lm.log_prob_interval(np.array([j]), np.array([a - 1.0]), np.array([b + 1.0]))[0]
        check_that(abs(whole) < 1e-6, f"{name}.log_prob_interval",
                   "the whole cell must have mass 1")
        m_full = float((g * dens).sum() * (b - a) / g.size)
        check_that(abs(lm.mean(np.array([j]))[0] - m_full) < 2e-3 * max(1.0, b - a),
                   f"{name}.mean", f"cell {j}: mean {lm.mean(np.array([j]))[0]:.5f}, "
                   f"density gives {m_full:.5f}")
        sel = g <= c
        m_int = float((g[sel] * dens[sel]).sum() / max(dens[sel].sum(), 1e-300))
        mi = lm.mean_interval(np.array([j]), np.array([a]), np.array([c]))[0]
        # (an interval without numerical mass on the grid has no mean to compare with)
        check_that(mass < 1e-9 or abs(mi - m_int) < 2e-3 * max(1.0, b - a),
                   f"{name}.mean_interval",
                   f"E[X | {a} < X <= {c}] = {mi:.5f}, the density gives {m_int:.5f}")
        s = lm.sample(np.full(4000, j), rng)
        check_that(np.all((s > a) & (s <= b)), f"{name}.sample", f"draws outside cell {j}")
        sd = float(np.sqrt(max((g - m_full) ** 2 @ dens * (b - a) / g.size, 1e-300)))
        check_that(abs(s.mean() - m_full) < 5 * sd / np.sqrt(s.size) + 1e-9, f"{name}.sample",
                   f"cell {j}: sample mean {s.mean():.4f} vs density mean {m_full:.4f}")
        s2 = lm.sample(np.full(4000, j), rng, lo=np.full(4000, a), hi=np.full(4000, c))
        check_that(np.all((s2 > a - 1e-12) & (s2 <= c + 1e-12)), f"{name}.sample",
                   "draws outside the requested interval")
        if mass > 1e-6:  # their law: the density restricted to (a, c] (KS, p < 1e-4)
            cum = np.cumsum(dens[sel]) / dens[sel].sum()
            emp = np.searchsorted(np.sort(s2), g[sel], side="right") / s2.size
            dist = float(np.max(np.abs(emp - cum)))
            check_that(dist < 2.3 / np.sqrt(s2.size) + 2e-3, f"{name}.sample",
                       f"cell {j}: draws given ({a}, {c}] are {dist:.3f} (KS distance) from "
                       f"the density restricted to it")


def _check_discrete(lm, cell, rng, name):
    L, k = cell.allowed.shape
    leaves = np.arange(L)
    p = lm.probs(leaves)
    check_that(p.shape == (L, k), f"{name}.probs", f"shape {p.shape}, expected {(L, k)}")
    check_that(np.allclose(p.sum(1), 1.0), f"{name}.probs", "rows must sum to 1")
    check_that(np.all(p[~cell.allowed] == 0), f"{name}.probs", "mass on a level the cell excludes")
    for code in range(k):
        lp = lm.log_prob(leaves, np.full(L, float(code)))
        ok = p[:, code] > 0
        check_that(np.allclose(np.exp(lp[ok]), p[ok, code], rtol=1e-9), f"{name}.log_prob",
                   f"level {code} disagrees with probs")
    lpl = lm.log_prob_levels(leaves, cell.allowed)
    check_that(np.allclose(lpl, 0.0, atol=1e-9), f"{name}.log_prob_levels",
               "the allowed levels must have mass 1")
    for j in range(L):
        s = lm.sample(np.full(3000, j), rng)
        check_that(np.all(cell.allowed[j, s.astype(int)]), f"{name}.sample",
                   f"a draw outside the levels of cell {j}")
        freq = np.bincount(s.astype(int), minlength=k) / s.size
        check_that(np.all(np.abs(freq - p[j]) < 5 * np.sqrt(p[j] * (1 - p[j]) / s.size) + 1e-9),
                   f"{name}.sample", f"cell {j}: frequencies {freq} vs probs {p[j]}")
        mean = float(p[j] @ np.arange(k))
        check_that(abs(lm.mean(np.array([j]))[0] - mean) < 1e-9, f"{name}.mean",
                   "mean of the level codes")


# ----------------------------------------------------------------------------- splitters


def _tree_data(random_state: int):
    from forestgen.data.binning import Binner
    from forestgen.data.encoder import TableEncoder
    from forestgen.families.boxes import discrete_levels, root_box
    from forestgen.splitters.base import TreeData

    df = small_tables(random_state)["mixed"][0].dropna().reset_index(drop=True)
    enc = TableEncoder().fit(df)
    Z = enc.transform(df)
    schema = enc.schema
    nominal, nlev = discrete_levels(schema)
    lo, hi = root_box(Z, schema)
    b = Binner.fit(Z, nominal, nlev)
    vref = np.zeros((schema.d, int(b.n_bins.max())))
    for j in range(schema.d):
        vref[j, : b.n_bins[j]] = 1.0 / b.n_bins[j]
    y = (Z[:, -1] > 0).astype(np.int64)
    return TreeData(b.transform(Z), b.n_bins, b.nominal, b.thresholds, Z=Z, n_levels=nlev,
                        box_lo=lo, box_hi=hi, vref=vref), y, nominal, nlev


def check_splitter(splitter, *, random_state: int = 0) -> None:
    """Grow trees with ``splitter`` on a small mixed table and check: a valid
    :class:`~forestgen.tree.record.TreeRecord`; the same Generator seed gives the same tree;
    rows of weight 0 do not influence the tree; recorded leaf cells contain the in-bag rows
    routed to them; a forest of such trees routes every row to one leaf per tree."""
    from forestgen.splitters.base import GrowLimits, Splitter
    from forestgen.tree.forest import grow_forest, tree_generators
    from forestgen.tree.record import TreeRecord

    if not isinstance(splitter, Splitter):
        raise TypeError(f"check_splitter needs a Splitter instance, got {splitter!r}")
    if splitter.grows == "cell table":
        from forestgen.testing.components import check_cell_splitter

        return check_cell_splitter(splitter, random_state=random_state)
    name = type(splitter).__name__
    data, y, nominal, nlev = _tree_data(random_state)
    n = data.Xb.shape[1]
    rng = np.random.default_rng(random_state)
    w = rng.poisson(1.0, n).astype(float)
    limits = GrowLimits(max_features="sqrt", max_depth=6, max_leaves=32, n_classes=2,
                            min_class_leaf=np.zeros(2))

    def grow(d, yy, ww):
        gen = np.random.default_rng(random_state + 1)
        return splitter.grow(d, yy, ww, gen, limits)

    t = grow(data, y, w)
    check_that(isinstance(t, TreeRecord), f"{name}.grow", f"returned {type(t).__name__}")
    try:
        t.check(n_features=data.d)
    except ValueError as e:
        fail(f"{name}.grow", str(e))
    check_that(t.n_leaves >= 2, f"{name}.grow", "grew no split on an easy table")
    t2 = grow(data, y, w)
    check_that(all(np.array_equal(getattr(t, f), getattr(t2, f), equal_nan=True)
                   for f in ("feature", "threshold", "left", "right", "cat_left")),
               f"{name}.grow", "the same Generator seed gave a different tree")
    # out-of-bag rows must not matter: scramble their labels and values
    oob = w == 0
    y3 = np.where(oob, 1 - y, y)
    Xb3 = data.Xb.copy()
    Xb3[:, oob] = Xb3[:, oob][:, ::-1]
    Z3 = data.Z.copy()
    Z3[oob] = Z3[oob][::-1]
    import dataclasses

    t3 = grow(dataclasses.replace(data, Xb=Xb3, Z=Z3), y3, w)
    check_that(all(np.array_equal(getattr(t, f), getattr(t3, f), equal_nan=True)
                   for f in ("feature", "threshold", "left", "right", "cat_left")),
               f"{name}.grow", "rows of weight 0 changed the tree")
    rngs = tree_generators(np.random.SeedSequence(random_state), 3)
    W = np.stack([w, np.ones(n), w[::-1].copy()])
    forest = grow_forest(splitter, data, y, W, rngs, limits,
                             n_levels=np.where(nominal, nlev, 0), n_jobs=1)
    leaves = forest.apply(data.Z)
    check_that(leaves.shape == (n, 3) and (leaves >= 0).all(), f"{name} forest",
               "apply() must give one leaf per row and tree")
    boxes = forest.boxes(data.d, np.where(nominal, nlev, 0))
    for b in range(3):
        lf = leaves[:, b]
        inbag = W[b] > 0
        for j in range(data.d):
            if nominal[j]:
                    o = boxes.nom_off[j]
                    ok = boxes.mask[lf, o + data.Z[:, j].astype(int)]
            else:
                    ok = (data.Z[:, j] > boxes.lower[lf, j]) & (data.Z[:, j] <= boxes.upper[lf, j])
            check_that(bool(ok[inbag].all()), f"{name} leaf cells",
                       f"tree {b}: an in-bag row lies outside its leaf's cell in column {j}")


# ----------------------------------------------------------------------------- learners


def check_learner(model, *, fit_kwargs: dict | None = None, tables: list[str] | None = None,
                      random_state: int = 0, statistics: bool = True) -> None:
    """Fit a fresh copy of ``model`` on each small table and check the queries every learner
    answers: samples with the training columns and levels; ``log_prob`` per row (one bad row
    does not fail the batch, out-of-range rows give a number or -inf, never NaN); NaN entries
    marginalised (a column's marginal integrates / sums to one); conditional samples honour
    their evidence; interval expectations; imputation fills exactly the missing entries;
    identical answers and components (ensembler, sampler) after save/load; the torch
    distribution equals ``log_prob``. Queries outside the model's declared ``capabilities``
    (:mod:`forestgen.families`) are skipped.
    ``statistics``: also run the statistical checks of :mod:`forestgen.testing.statistical`
    (draws against the density, ``expect`` against the draws, conditionals, torch against
    numpy) on their own small table."""
    fit_kwargs = dict(fit_kwargs or {})
    name = type(model).__name__
    for tname, (train, query_rows) in small_tables(random_state).items():
        if tables is not None and tname not in tables:
            continue
        if "target" in fit_kwargs and fit_kwargs["target"] not in train.columns:
            continue
        m = type(model)(**model.get_params())
        m.fit(train, **fit_kwargs)
        where = f"{name} on {tname!r}"
        _check_queries(m, train, query_rows, where, random_state)
    if statistics:
        from forestgen.testing.statistical import check_learner_statistics

        check_learner_statistics(model, fit_kwargs=fit_kwargs, random_state=random_state)


def _check_queries(m, train, query_rows, where, seed) -> None:
    """Each query the model declares (``capabilities``; all when it declares none)."""
    caps = getattr(m, "capabilities", None)
    checks = (("sample", lambda: _check_sample(m, train, where, seed)),
              ("log_prob", lambda: _check_log_prob(m, train, query_rows, where)),
              ("marginal", lambda: _check_marginals(m, train, where)),
              ("conditional_sample", lambda: _check_conditions(m, train, where, seed)),
              ("impute", lambda: _check_impute(m, train, where, seed)),
              ("save", lambda: _check_reload(m, query_rows, where)),
              ("torch", lambda: _check_torch(m, train, where)))
    for query, check in checks:
        if caps is None or query == "save" or query in caps:
            check()


def _numeric_cols(m, train):
    return [c.name for c in m.schema_.columns if not c.is_discrete and c.name in train]


def _discrete_cols(m, train):
    return [c.name for c in m.schema_.columns if c.is_discrete and c.name in train]


def _check_sample(m, train, where, seed):
    s = m.sample(300, random_state=seed)
    check_that(list(s.columns) == list(train.columns), f"{where}: sample", "columns differ")
    for c in _discrete_cols(m, train):
        # the model's levels: the training values, or every integer of a dense integer range
        seen = set(train[c].dropna().unique()) | set(m.schema_[c].categories or [])
        drawn = set(s[c].dropna().unique())
        check_that(drawn <= seen, f"{where}: sample", f"column {c!r} drew unknown levels "
                   f"{sorted(map(str, drawn - seen))}")
    for c in _numeric_cols(m, train):
        v = s[c].dropna().to_numpy(float)
        check_that(np.isfinite(v).all(), f"{where}: sample", f"column {c!r} has non-finite draws")
        if pd.api.types.is_integer_dtype(train[c]):
            check_that(np.all(v == np.round(v)), f"{where}: sample", f"integer column {c!r}")
    again = m.sample(300, random_state=seed)
    pd.testing.assert_frame_equal(s, again, obj=f"{where}: same seed, same sample")


def _check_log_prob(m, train, query, where):
    lp = m.log_prob(query)
    check_that(lp.shape == (len(query),) and not np.isnan(lp).any(), f"{where}: log_prob",
               "out-of-range / unseen-level query rows must give a number or -inf, not NaN")
    one = np.array([m.log_prob(query.iloc[[i]])[0] for i in range(len(query))])
    check_that(np.allclose(one, lp, rtol=1e-9, atol=1e-9, equal_nan=True)
               and np.array_equal(np.isneginf(one), np.isneginf(lp)), f"{where}: log_prob",
               "rows are not scored independently of the batch")
    lt = m.log_prob(train)
    check_that(np.isfinite(lt).mean() > 0.95, f"{where}: log_prob",
               "training rows should have positive density")


def _check_marginals(m, train, where):
    cols = list(train.columns)
    disc = _discrete_cols(m, train)
    for c in _numeric_cols(m, train):
        v = train[c].dropna().to_numpy(float)
        if np.unique(v, return_counts=True)[1].max() > 0.05 * len(v):
            continue  # a point mass: no density to integrate on a grid
        lo, hi = v.min(), v.max()
        pad = max(hi - lo, 1.0)
        g, wq = _quadrature(m, cols.index(c), lo - 3 * pad, hi + 3 * pad, points=v)
        frame = pd.DataFrame({k: np.full(len(g), np.nan) for k in cols})
        frame[c] = g
        total = float(np.exp(m.log_prob_encoded(m.encoder_.transform(frame))) @ wq)
        check_that(abs(total - 1.0) < 0.02, f"{where}: NaN marginal",
                   f"the marginal density of {c!r} integrates to {total:.4f}")
    for c in disc:
        levels = list(pd.Series(train[c].dropna().unique()))
        levels += [v for v in (m.schema_[c].categories or []) if v not in set(levels)]
        frame = pd.DataFrame({k: [np.nan] * len(levels) for k in cols})
        frame[c] = levels
        tot = float(np.exp(m.log_prob(frame)).sum())
        check_that(abs(tot - 1.0) < 1e-6, f"{where}: NaN marginal",
                   f"the marginal pmf of {c!r} sums to {tot:.6f}")
    if disc:
        # marginalising a discrete column = summing over its levels (row by row)
        c = disc[0]
        levels = list(pd.Series(train[c].dropna().unique()))
        levels += [v for v in (m.schema_[c].categories or []) if v not in set(levels)]
        rows = train.dropna().head(10).reset_index(drop=True)
        blank = rows.copy()
        blank[c] = None
        parts = []
        for lv in levels:
            r = rows.copy()
            r[c] = lv
            parts.append(m.log_prob_encoded(m.encoder_.transform(r)))
        with np.errstate(divide="ignore"):
            summed = np.log(np.exp(np.stack(parts)).sum(0))
        check_that(np.allclose(m.log_prob_encoded(m.encoder_.transform(blank)), summed, rtol=1e-8,
                               atol=1e-8),
                       f"{where}: NaN marginal", f"a missing {c!r} is not the sum over its levels")


def _quadrature(m, j: int, a: float, b: float, per_piece: int = 16, points=None):
    """Nodes and weights integrating over ``(a, b)`` piecewise between every leaf-cell face of
    column ``j`` (the mixture is smooth between faces), Gauss-Legendre on each piece. Around
    each of ``points`` (the training values, where kernel leaves centre narrow kernels) faces
    at geometrically shrinking distances resolve peaks far narrower than the grid."""
    faces = leaf_faces(m, j, a, b)
    # split long pieces too, so a smooth density far from any face is resolved
    fine = np.linspace(a, b, 2001)
    extra = []
    if points is not None and len(points):
        steps = (b - a) * np.geomspace(1e-3, 1e-7, 9)
        p = np.unique(np.asarray(points, float))
        extra = [p] + [p + sgn * h for h in steps for sgn in (-1.0, 1.0)]
    faces = np.unique(np.concatenate([faces, fine, *extra]))
    faces = faces[(faces >= a) & (faces <= b)]
    x, w = np.polynomial.legendre.leggauss(per_piece)
    left, width = faces[:-1], np.diff(faces)
    nodes = (left[:, None] + 0.5 * width[:, None] * (x[None, :] + 1)).ravel()
    weights = (0.5 * width[:, None] * w[None, :]).ravel()
    return nodes, weights


def _check_conditions(m, train, where, seed):
    disc = [c for c in _discrete_cols(m, train)]
    if disc:
        c = disc[0]
        level = train[c].dropna().iloc[0]
        s = m.sample(50, conditions={c: level}, random_state=seed)
        check_that(bool((s[c] == level).all()), f"{where}: conditions",
                   f"samples given {c}={level!r} do not all have it")
    num = _numeric_cols(m, train)
    if num:
        c = num[0]
        v = train[c].dropna()
        a, b = float(v.quantile(0.25)), float(v.quantile(0.75))
        s = m.sample(50, conditions={c: (a, b)}, random_state=seed)
        check_that(bool(((s[c] >= a) & (s[c] <= b)).all()), f"{where}: conditions",
                   f"samples given {c} in ({a}, {b}) fall outside")
        if len(num) > 1 and "expect" in getattr(m, "capabilities", {"expect"}):
            e = m.expect(num[1], conditions={c: (a, b)})
            check_that(np.isfinite(np.asarray(e, float)).all(), f"{where}: expect",
                       "interval evidence gave a non-finite expectation")


def _check_impute(m, train, where, seed):
    X = train.head(40).copy()
    rng = np.random.default_rng(seed)
    for c in X.columns:
        X.loc[rng.random(len(X)) < 0.2, c] = None
    out = m.impute(X, random_state=seed)
    check_that(not out.isna().any().any(), f"{where}: impute", "missing entries remain")
    obs = X.notna()
    for c in X.columns:
        a, b = X.loc[obs[c], c], out.loc[obs[c], c]
        if pd.api.types.is_numeric_dtype(train[c]):
            same = np.isclose(a.astype(float), b.astype(float))
        else:
            same = a.astype(str).to_numpy() == b.astype(str).to_numpy()
        check_that(bool(np.all(same)), f"{where}: impute", f"observed entries of {c!r} changed")


def _check_reload(m, query, where):
    from forestgen.base import GenerativeForest

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.fgm"
        m.save(path)
        again = GenerativeForest.load(path)
    check_that(np.array_equal(m.log_prob(query), again.log_prob(query), equal_nan=True),
               f"{where}: save/load", "log_prob differs after reloading")
    check_that(repr(again) == repr(m), f"{where}: save/load",
               f"parameters differ after reloading: {again!r}")
    for slot in ("ensembler", "sampler"):
        if slot in m.get_params() and slot not in type(m).ruled_out:
            a, b = m.component(slot), again.component(slot)
            check_that(type(a) is type(b) and a.get_params() == b.get_params(),
                       f"{where}: save/load", f"the {slot} reloads as {b!r}, not {a!r}")


def _check_torch(m, train, where):
    import torch

    dist = m.to_torch()
    Z = m.encoder_.transform(train.head(50))
    x = torch.tensor(Z, dtype=torch.float64, requires_grad=dist.torch_path)
    lp = dist.log_prob(x)
    check_that(np.allclose(lp.detach().numpy(), m.log_prob_encoded(Z), rtol=1e-9, atol=1e-9,
                           equal_nan=True), f"{where}: torch", "to_torch().log_prob differs")
    if dist.torch_path:
        lp[torch.isfinite(lp)].sum().backward()
        check_that(bool(torch.isfinite(x.grad).all()), f"{where}: torch", "non-finite gradient")
