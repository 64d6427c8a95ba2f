"""EOGT's compiled region enumeration (spec generative_forests.md §4.3) against the pure-Python
walk it replaced, kept here as the oracle: the same regions in the same order (log Q̂, boxes,
masks, leaves, log measures to 1e-12), the same ``max_regions`` cut-off, and the same answers
from every query built on it (NaN log_prob, conditional log_prob and sampling with values,
ranges and level sets, the three imputations, predict)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forestgen.families.boxes import column_layout
from forestgen.families.intersection import regions
from forestgen.families.intersection.region_atoms import region_leaves
from forestgen.families.intersection.regions import (
    ApproxRegions,
    approx_regions,
    region_log_measures,
)
from forestgen.families.intersection.star import TreeGeometry
from forestgen.learners import EOGT


# ---------------------------------------------------------------- the oracle (Python walk)
def _py_regions(g: TreeGeometry, x, box_lo, box_hi, budget):
    """The depth-first walk of EOGT's compatible regions in Python (the code before it was
    compiled): ``(log Q̂, lo, hi, mask)``, empty outside the box, ``None`` past ``budget``."""
    f = g.forest
    roots = f.roots
    T = len(roots)
    obs = ~np.isnan(x)
    nom = np.flatnonzero((g.nom_off >= 0) & obs)
    ordered = np.flatnonzero((g.nom_off < 0) & obs)
    d = len(x)
    empty = (np.zeros(0), np.zeros((0, d)), np.zeros((0, d)), np.zeros((0, g.mask.shape[1]),
                                                                        bool))
    if (np.any(x[ordered] <= box_lo[ordered]) or np.any(x[ordered] > box_hi[ordered])
            or any(x[j] < 0 or x[j] >= g.nlev[j] or x[j] != int(x[j]) for j in nom)):
        return empty
    r0 = roots[0]
    stack = [(0, int(r0), 0.0, g.lo[r0].copy(), g.hi[r0].copy(), g.mask[r0].copy())]
    out = []
    n_live = 1
    while stack:
        t, node, lp, lo, hi, mask = stack.pop()
        while True:
            if f.feature[node] < 0:
                t += 1
                if t == T:
                    break
                node = int(roots[t])
                continue
            j = f.feature[node]
            q = g.approx_left(node, lo, hi, mask)
            if obs[j]:
                if f.cat_off[node] >= 0:
                    go_left = f.cat_left[f.cat_off[node] + int(x[j])] == 1
                else:
                    go_left = x[j] <= f.threshold[node]
                p = q if go_left else 1.0 - q
                if p <= 0:
                    lp = -math.inf
                    break
                lp += math.log(p)
                g.cut(node, go_left, lo, hi, mask)
                node = int(f.left[node] if go_left else f.right[node])
                continue
            if q < 1:
                n_live += 1
                if n_live > budget:
                    return None
                rlo, rhi, rmask = lo.copy(), hi.copy(), mask.copy()
                g.cut(node, False, rlo, rhi, rmask)
                stack.append((t, int(f.right[node]), lp + math.log(1.0 - q), rlo, rhi, rmask))
            if q <= 0:
                lp = -math.inf
                break
            lp += math.log(q)
            g.cut(node, True, lo, hi, mask)
            node = int(f.left[node])
        if lp > -math.inf:
            out.append((lp, lo, hi, mask))
        else:
            n_live -= 1
    if not out:
        return empty
    return tuple(np.array(a) for a in zip(*out))


def _py_log_measure(g: TreeGeometry, lo, hi, mask, cols) -> float:
    out = 0.0
    for j in cols:
        if g.nom_off[j] >= 0:
            o = g.nom_off[j]
            out += math.log(mask[o: o + g.nlev[j]].sum())
        else:
            out += math.log(hi[j] - lo[j])
    return out


def _oracle(g, x, box_lo, box_hi, budget=100_000):
    """:func:`approx_regions`'s answer from the Python walk: leaves by routing each region's
    box (``region_leaves``), measures one region at a time."""
    reg = _py_regions(g, x, box_lo, box_hi, budget)
    if reg is None:
        return None
    lq, lo, hi, mask = reg
    obs = np.flatnonzero(~np.isnan(x))
    leaves = (region_leaves(g.forest, lo, hi, mask, g.nom_off, g.nlev) if len(lq)
              else np.zeros((0, g.forest.n_trees), np.int32))
    mu = np.array([_py_log_measure(g, lo[i], hi[i], mask[i], obs) for i in range(len(lq))])
    return ApproxRegions(lq, lo, hi, mask.astype(bool), leaves.astype(np.int32), mu)


# ---------------------------------------------------------------- models and rows
def _table(n=260, seed=0):
    """Numeric, zero-inflated numeric (atoms), integer with a spike level, nominal and bool
    columns, some entries missing."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    zero = rng.random(n) < 0.5
    df = pd.DataFrame({
        "a": a,
        "z": np.where(zero, 0.0, rng.exponential(2.0, n) + 0.5 * (a > 0)),
        "k": np.where(rng.random(n) < 0.3, 4, rng.integers(0, 9, n)),
        "c": np.where(a > 0, rng.choice(["x", "y"], n), rng.choice(["y", "z", "w"], n)),
        "b": rng.random(n) < 0.4,
    })
    df.loc[rng.random(n) < 0.1, "a"] = np.nan
    df["k"] = df["k"].astype("Int64")
    df.loc[rng.random(n) < 0.1, "k"] = pd.NA
    return df


@pytest.fixture(scope="module", params=[0, 1])
def model(request):
    seed = request.param
    return EOGT(n_trees=3 + seed, n_iter=14, smoothing=0.05, random_state=seed).fit(
        _table(seed=seed))


def _geometry(m):
    kind, nlev, nom_off = column_layout(m.schema_)[:3]
    return TreeGeometry(m.trees_, m.box_lo_, m.box_hi_, nom_off, nlev)


def _encoded_rows(m, seed=0, n=25):
    """Training rows with random entries missing (each pattern, up to all missing), plus rows
    outside the box and with an invalid level code."""
    rng = np.random.default_rng(seed)
    Z = m.encoder_.transform(_table(seed=seed).head(n))
    Z = np.where(rng.random(Z.shape) < rng.random((len(Z), 1)), np.nan, Z)
    Z[0] = np.nan
    out = Z[1].copy()
    out[0] = m.box_hi_[0] + 1.0
    bad = Z[2].copy()
    bad[3] = 99.0  # column c: not a level
    return np.vstack([Z, out, bad])


def _assert_same(got: ApproxRegions, ref: ApproxRegions):
    assert len(got.log_q) == len(ref.log_q)
    np.testing.assert_allclose(got.log_q, ref.log_q, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.lo, ref.lo)
    np.testing.assert_array_equal(got.hi, ref.hi)
    np.testing.assert_array_equal(got.mask, ref.mask)
    np.testing.assert_array_equal(got.leaves, ref.leaves)
    np.testing.assert_allclose(got.log_measure, ref.log_measure, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- the enumeration itself
def test_compiled_regions_equal_the_python_walk(model):
    g = _geometry(model)
    rows = _encoded_rows(model)
    sizes = []
    for x in rows:
        got = approx_regions(g, x, model.box_lo_, model.box_hi_)
        _assert_same(got, _oracle(g, x, model.box_lo_, model.box_hi_))
        sizes.append(len(got.log_q))
    assert sizes[-2] == 0 and sizes[-1] == 0  # outside the box, invalid level
    assert sizes[0] == max(sizes) > 20  # the fully missing row branches on every node
    # every region of the fully missing row: the law's total mass
    assert np.logaddexp.reduce(approx_regions(g, rows[0], model.box_lo_,
                                              model.box_hi_).log_q) == pytest.approx(0, abs=1e-12)


def test_budget_cut_off_is_the_python_walk_s(model):
    g = _geometry(model)
    x = _encoded_rows(model)[0]
    n = len(approx_regions(g, x, model.box_lo_, model.box_hi_).log_q)
    for budget in sorted({1, 2, 3, n // 2, n - 1, n, n + 1, 2 * n}):
        got = approx_regions(g, x, model.box_lo_, model.box_hi_, budget)
        ref = _oracle(g, x, model.box_lo_, model.box_hi_, budget)
        assert (got is None) == (ref is None), budget
        if got is not None:
            _assert_same(got, ref)


def test_region_log_measures_per_region(model):
    g = _geometry(model)
    reg = approx_regions(g, _encoded_rows(model)[0], model.box_lo_, model.box_hi_)
    for cols in ([], [0], [0, 2, 3], list(range(model.schema_.d))):
        got = region_log_measures(g, reg.lo, reg.hi, reg.mask, cols)
        ref = [_py_log_measure(g, reg.lo[i], reg.hi[i], reg.mask[i], cols)
               for i in range(len(reg.lo))]
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def test_region_ids_lookup(model):
    atoms = model.region_atoms_
    assert atoms and len(atoms.keys)
    index = {k.tobytes(): i for i, k in enumerate(atoms.keys)}
    rng = np.random.default_rng(0)
    probe = np.vstack([atoms.keys[rng.permutation(len(atoms.keys))],
                       rng.integers(0, model.trees_.n_leaves, (50, model.trees_.n_trees))])
    want = [index.get(np.ascontiguousarray(k, np.int32).tobytes(), -1) for k in probe]
    np.testing.assert_array_equal(atoms.region_ids(probe), want)


# ---------------------------------------------------------------- queries built on it
@pytest.fixture
def python_walk(monkeypatch):
    """Every EOGT query answered from the Python walk instead."""
    monkeypatch.setattr(regions, "approx_regions", _oracle)


def _queries(m):
    df = _table(seed=5).head(12)
    holes = df.mask(np.random.default_rng(1).random(df.shape) < 0.4)
    levels = list(m.schema_["c"].categories)
    ev = {"a": (-0.5, 0.8), "c": {levels[0], levels[-1]}, "k": (2, 6)}
    per_row = df[["a", "c"]].head(4)
    out = {
        "nan_log_prob": m.log_prob(holes, floor=None),
        "cond_log_prob": m.log_prob(df[["z", "b"]].assign(a=np.nan, c=None, k=pd.NA),
                                    conditions=ev),
        "cond_value_log_prob": m.log_prob(df.assign(a=np.nan), conditions={"b": True}),
        "sample": m.sample(30, conditions=ev, random_state=2),
        "sample_rows": m.sample(conditions=per_row, random_state=3),
        "predict_proba": m.predict_proba(holes, "c"),
        "predict": m.predict(holes, "a"),
    }
    for method in ("max_density", "sample", "expectation"):
        out["impute_" + method] = m.impute(holes, method=method, random_state=4)
    return out


def test_queries_equal_those_of_the_python_walk(model, request):
    got = _queries(model)
    request.getfixturevalue("python_walk")
    ref = _queries(model)
    assert np.isfinite(got["nan_log_prob"]).all()
    for key, value in got.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_allclose(value, ref[key], rtol=0, atol=1e-12, err_msg=key)
        elif isinstance(value, pd.Series):
            pd.testing.assert_series_equal(value, ref[key], rtol=0, atol=1e-12, obj=key)
        else:
            pd.testing.assert_frame_equal(value, ref[key], rtol=0, atol=1e-12, obj=key)


def test_rejection_batches_grow_geometrically(model, monkeypatch):
    """Past ``max_regions``, evidence holding few draws of the law is met in a few rounds of
    growing batches, every draw inside it, the same draws for the same seed."""
    calls = []
    draw = EOGT.sample_encoded

    def counted(self, n, random_state=None, missing=False):
        calls.append(n)
        return draw(self, n, random_state, missing)

    monkeypatch.setattr(EOGT, "sample_encoded", counted)
    monkeypatch.setattr(model, "max_regions", 1)
    lo = float(np.quantile(_table(seed=0)["a"].dropna(), 0.995))
    ev = {"a": (lo, lo + 0.01), "b": {True}}
    s = model.sample(3, conditions=ev, random_state=0)
    assert s["a"].between(lo, lo + 0.01).all() and s["b"].all()
    assert sum(calls) > 4000 and len(calls) <= 10
    assert all(b >= 2 * a for a, b in zip(calls[:-2], calls[1:-1]))
    pd.testing.assert_frame_equal(s, model.sample(3, conditions=ev, random_state=0))


@pytest.mark.parametrize("seed", [0, 1])
def test_evidence_the_trees_cannot_tell_apart_shares_one_walk(seed, monkeypatch):
    """Per-row evidence whose values lie on the same side of every split (and atom) is walked
    once: conditional draws and log densities equal those of one walk per row. (With regions
    spread by the marginals, also in the same histogram bin and at the same level: here the
    paper's uniform regions.)"""
    model = EOGT(n_trees=3 + seed, n_iter=14, smoothing=0.05, cell_shape="uniform",
                 smooth_toward="uniform", random_state=seed).fit(_table(seed=seed))
    df = _table(seed=3).head(16)
    ev = df[["z", "c", "b"]]
    walks = []
    regions = EOGT._evidence_regions

    def counted(self, x, cons):
        walks.append(1)
        return regions(self, x, cons)

    monkeypatch.setattr(EOGT, "_evidence_regions", counted)
    got = model.sample(conditions=ev, random_state=0)
    n_shared = len(walks)
    lp = model.log_prob(df, conditions=ev)
    monkeypatch.setattr(EOGT, "_row_keys", lambda self, Z: (np.arange(len(Z)),
                                                             np.arange(len(Z))))
    walks.clear()
    ref = model.sample(conditions=ev, random_state=0)
    assert n_shared < len(walks)
    pd.testing.assert_frame_equal(got, ref)
    np.testing.assert_allclose(lp, model.log_prob(df, conditions=ev), rtol=0, atol=1e-12)
