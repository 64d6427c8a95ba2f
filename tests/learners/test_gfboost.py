"""GF.Boost and EOGT (spec generative_forests.md §8): normalisation, cell law of the samplers,
monotone Bayes risk, closed forms, imputation at maximum density, persistence."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import GenerativeForest
from forestgen.families.boxes import box_log_volume, column_layout, root_mask
from forestgen.families.intersection.star import StarNodeSampler, TreeGeometry
from forestgen.inference import ZeroProbabilityError
from forestgen.learners import EOGT, GFBoost

#: the paper's cells and the spec's uniform smoothing (GF.Boost's defaults shape each cell by
#: the column marginals and smooth toward them, tests/learners/test_gf_marginal_smoothing.py);
#: with ``smoothing=1e-3`` also EOGT's paper model (tests/learners/test_eogt_backoff.py)
PAPER = dict(cell_shape="uniform", smooth_toward="uniform")


def mixed(n=300, seed=0, missing=False):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    df = pd.DataFrame({
        "a": a,
        "n": np.clip(np.round(20 + 8 * a + rng.normal(0, 4, n)), 0, 60).astype(int),
        "c": pd.Categorical(np.where(a > 0, rng.choice(["x", "y"], n), rng.choice(["y", "z"], n))),
        "b": rng.random(n) < 0.3,
    })
    if missing:
        df.loc[rng.random(n) < 0.2, "a"] = np.nan
        df["c"] = df["c"].astype(object)
        df.loc[rng.random(n) < 0.2, "c"] = None
    return df


def exact_integral(m: GFBoost) -> float:
    """∫ q dμ by enumeration: piecewise constant between the thresholds (and the marginal
    cells' histogram faces) on the continuous column, every integer / level on the others
    (counting measure)."""
    f = m.forest_
    lm = m.leaf_models_[0]
    thr = np.sort(np.r_[f.threshold[(f.feature == 0)],
                        getattr(getattr(lm, "base_", lm), "edges", [])])
    edges = np.unique(np.r_[m.box_lo_[0], thr[(thr > m.box_lo_[0]) & (thr < m.box_hi_[0])],
                            m.box_hi_[0]])
    mids, widths = 0.5 * (edges[1:] + edges[:-1]), np.diff(edges)
    spec = m.schema_
    ints = np.arange(spec["n"].lower, spec["n"].upper + 1)
    rows, w = [], []
    for (x, wx), v, c, b in itertools.product(zip(mids, widths), ints, spec["c"].categories,
                                              [False, True]):
        rows.append((x, v, c, b))
        w.append(wx)
    X = pd.DataFrame(rows, columns=["a", "n", "c", "b"])
    X["c"] = pd.Categorical(X["c"], categories=spec["c"].categories)
    return float(np.sum(np.exp(m.log_prob(X, floor=None)) * np.asarray(w)))


@pytest.mark.parametrize("missing", [False, True])
def test_density_integrates_to_one_on_mixed_domain(missing):
    df = mixed(missing=missing)
    m = GFBoost(n_trees=4, n_iter=24, random_state=0).fit(df)
    assert m.schema_["n"].kind == "integer" and not m.schema_["n"].is_discrete
    assert exact_integral(m) == pytest.approx(1.0, abs=1e-9)
    assert np.exp(m.leaf_log_weight_).sum() == pytest.approx(1.0, abs=1e-12)
    assert m.n_cells_ <= len(df) * (2 if missing else 1)
    if not missing:  # every training row lies in a cell holding mass
        assert np.isfinite(m.log_prob(df)).all()


def test_no_split_is_uniform_on_the_box():
    df = mixed(missing=False)
    m = GFBoost(n_trees=3, n_iter=0, **PAPER).fit(df)
    vol = (m.box_hi_[0] - m.box_lo_[0]) * (m.box_hi_[1] - m.box_lo_[1]) * 3 * 2
    lp = m.log_prob(df)
    assert np.allclose(lp, -math.log(vol))
    out = df.head(1).copy()
    out["a"] = 100.0
    assert m.log_prob(out, floor=None)[0] == -np.inf
    # outside the training box: the density floor, relative to the box (as RFDE / DEF)
    assert m.log_prob(out)[0] == pytest.approx(math.log(1e-5) - math.log(vol))


def test_sampler_matches_cell_masses():
    m = GFBoost(n_trees=3, n_iter=12).fit(mixed())
    n = 20000
    Z = m.sample_encoded(n, random_state=1)
    leaf = m.forest_.apply(Z)[:, 0]
    assert np.isfinite(m.log_prob_encoded(Z)).all()
    p = np.exp(m.leaf_log_weight_)  # cells and (smoothing) empty regions
    obs = np.bincount(leaf, minlength=len(p))
    assert stats.chisquare(obs, p * n).pvalue > 1e-3


@pytest.mark.parametrize("order", ["iterative", "random"])
def test_star_node_sampler_has_the_cell_law(order):
    """Lemma 4.4: the paper's sampler (data-based Bernoulli branching, any tree order) puts mass
    R(C) on each cell."""
    m = GFBoost(n_trees=3, n_iter=9).fit(mixed(n=200))
    kind, nlev, nom_off, _ = column_layout(m.schema_)
    geo = TreeGeometry(m.trees_, m.box_lo_, m.box_hi_, nom_off, nlev)
    lo, hi, mask, R = m.cells()
    s = StarNodeSampler(geo, kind, branch="exact", order=order, cells=(lo, hi, mask, R))
    n = 4000
    Z = s.draw(n, np.random.default_rng(0))
    obs = np.bincount(m.forest_.apply(Z)[:, 0], minlength=len(R))
    held = R > 0
    assert obs[~held].sum() == 0  # never an empty region
    assert stats.chisquare(obs[held], R[held] * n).pvalue > 1e-3


@pytest.mark.parametrize("loss", ["matusita", "log", "square"])
def test_bayes_risk_decreases_and_matches_recomputation(loss):
    m = GFBoost(n_trees=5, n_iter=40, loss=loss, smoothing=1e-3, **PAPER).fit(mixed())
    path = np.asarray(m.risk_path_)
    assert len(path) == 41
    assert np.all(np.diff(path) <= 1e-12)
    assert path[-1] < path[0] - 1e-3
    assert m.cell_risk() == pytest.approx(path[-1], abs=1e-10)
    ll = [GFBoost(n_trees=5, n_iter=j, loss=loss, smoothing=1e-3, **PAPER).fit(mixed())
          .score(mixed())
          for j in (5, 20, 40)]
    assert ll[0] <= ll[1] + 1e-12 <= ll[2] + 2e-12


def test_closed_forms_at_prior_one_half():
    m = GFBoost(n_trees=3, n_iter=15, loss="matusita").fit(mixed())
    R, U = m.cells()[3], m._cell_volume_share()
    R, U = R[R > 0], U[R > 0]
    assert m.cell_risk() == pytest.approx(np.sum(np.sqrt(R * U)), abs=1e-12)
    m = GFBoost(n_trees=3, n_iter=15, loss="log").fit(mixed())
    R, U = m.cells()[3], m._cell_volume_share()
    R, U = R[R > 0], U[R > 0]
    # U restricted to the cells holding data: the rest of U sits in zero-mass cells
    M = (R + U) / 2
    js = 0.5 * np.sum(R * np.log(R / M)) + 0.5 * np.sum(U * np.log(U / M)) + 0.5 * (
        1 - U.sum()) * math.log(2)
    assert m.cell_risk() == pytest.approx(math.log(2) - js, abs=1e-12)


def test_stumps_first():
    T = 6
    m = GFBoost(n_trees=T, n_iter=T).fit(mixed())
    assert m.trees_.n_trees == T
    assert np.all(np.diff(m.trees_.node_offsets) == 3)


def test_max_density_imputation_equals_brute_force():
    df = mixed(n=250, seed=3)[["a", "c", "b"]]
    m = GFBoost(n_trees=4, n_iter=20, smoothing=1e-3, **PAPER).fit(df)
    X = df.head(20).copy()
    X.loc[:, "a"] = np.nan
    imp = m.impute(X, method="max_density", random_state=0, walk="exact")
    grid = np.linspace(m.box_lo_[0] + 1e-9, m.box_hi_[0], 4001)
    for i in range(len(X)):
        G = pd.DataFrame({"a": grid, "c": X["c"].iloc[i], "b": X["b"].iloc[i]})
        G["c"] = pd.Categorical(G["c"], categories=m.schema_["c"].categories)
        best = m.log_prob(G).max()
        got = m.log_prob(imp.iloc[[i]])[0]
        assert got == pytest.approx(best, abs=1e-9)
    sampled = m.impute(X, method="sample", random_state=0, walk="exact")
    assert np.isfinite(m.log_prob(sampled)).all()


def _walk_by_rows(m: GFBoost, Z: np.ndarray, x: np.ndarray) -> list:
    """The back-off walk of spec §4.2 on the training rows themselves (complete rows, so
    each row is one unit of mass): regions as (row set, box), trees in order."""
    f = m.trees_
    nom_off = column_layout(m.encoder_.schema)[2]

    def left(node, v):
        if f.cat_off[node] >= 0:
            return f.cat_left[f.cat_off[node] + int(v)] == 1
        return v <= f.threshold[node]

    def go(rows, lo, hi, mask, t, node):
        while True:
            if f.feature[node] < 0:
                t += 1
                if t == f.n_trees:
                    return [(rows, lo, hi, mask)]
                node = f.roots[t]
                continue
            j = f.feature[node]
            side = np.array([left(node, v) for v in Z[rows, j]], bool)
            parts = []
            for g, child in ((True, f.left[node]), (False, f.right[node])):
                b = (lo.copy(), hi.copy(), mask.copy())
                if f.cat_off[node] >= 0:
                    k = f.n_levels[j]
                    lv = f.cat_left[f.cat_off[node]: f.cat_off[node] + k].astype(bool)
                    b[2][nom_off[j]: nom_off[j] + k] &= lv if g else ~lv
                elif g:
                    b[1][j] = min(b[1][j], f.threshold[node])
                else:
                    b[0][j] = max(b[0][j], f.threshold[node])
                parts.append((rows[side == g], b, child))
            if not np.isnan(x[j]):
                keep, b, child = parts[0] if left(node, x[j]) else parts[1]
                if not len(keep):
                    return [(rows, lo, hi, mask)]  # back off: keep the coarser region
                rows, (lo, hi, mask), node = keep, b, child
                continue
            out = []
            for keep, b, child in parts:
                if len(keep):
                    out += go(keep, *b, t, child)
            return out

    r0 = f.roots[0]
    return go(np.arange(len(Z)), m.box_lo_.copy(), m.box_hi_.copy(),
              np.ones(m.cell_mask_.shape[1], bool), 0, r0)


def test_backoff_walk_equals_walk_on_rows():
    from forestgen.families.intersection.backoff import BackoffTrees, backoff_regions
    from forestgen.families.intersection.cells import CellBoxes

    df = mixed(n=200, seed=4)
    m = GFBoost(n_trees=5, n_iter=30).fit(df)
    Z = m.encoder_.transform(df)
    f = m.trees_
    rng = np.random.default_rng(0)
    queries = [np.where(rng.random(4) < 0.5, np.nan, Z[i]) for i in range(12)]
    queries.append(np.array([3.0, 0.0, np.nan, 1.0]))  # off the data: the walk backs off
    mass = m.cell_mass_ * m.n_train_
    stopped = 0
    for x in queries:
        trees = BackoffTrees(f.feature.astype(np.int64), f.threshold, f.left.astype(np.int64),
                             f.right.astype(np.int64), f.cat_off, f.cat_left,
                             f.roots.astype(np.int64))
        cells = CellBoxes(np.ascontiguousarray(m.cell_lo_), np.ascontiguousarray(m.cell_hi_),
                          m.cell_mask_.astype(np.uint8))
        box = CellBoxes(m.box_lo_, m.box_hi_,
                        root_mask(m.encoder_.schema, m.cell_mask_.shape[1]))
        R, lo, hi, mask, *_ = backoff_regions(
            x, trees, cells, mass, column_layout(m.encoder_.schema)[2],
            column_layout(m.encoder_.schema)[1], box)
        ref = _walk_by_rows(m, Z, x)
        got = sorted((round(float(r), 9), tuple(a), tuple(b), tuple(c.astype(bool)))
                     for r, a, b, c in zip(R, lo, hi, mask))
        want = sorted((float(len(rows)), tuple(a), tuple(b), tuple(c))
                      for rows, a, b, c in ref)
        assert got == want
        stopped += sum(len(rows) > 1 for rows, *_ in ref)
    assert stopped > 0


def test_backoff_imputation_large_forest():
    """Every row alone in its cell: the exact conditional of a masked training row is its own
    cell (uniform over the masked column), the back-off walk imputes from the other rows."""
    rng = np.random.default_rng(0)
    n = 400
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.2, n), "c": rng.normal(size=n)})
    masked = df.copy()
    hole = rng.random(n) < 0.2
    masked.loc[hole, "b"] = np.nan
    m = GFBoost(n_trees=40, n_iter=200, random_state=0).fit(masked)
    assert m.n_cells_ >= 0.9 * n

    def rmse(imp):
        err = imp["b"].to_numpy()[hole] - df["b"].to_numpy()[hole]
        return float(np.sqrt(np.mean(err**2)))

    exact = rmse(m.impute(masked, walk="exact", method="max_density", random_state=0))
    walk = rmse(m.impute(masked, method="max_density", random_state=0))
    mean = rmse(m.impute(masked))  # the default: the mean along the back-off walk
    sd = float(df["b"].std())
    # (seeded: exact 1.25, walk 0.63, mean 0.53 for sd 1.03; a draw from the marginal: 1.46)
    assert walk < 0.75 * sd and mean < 0.65 * sd and walk < 0.6 * exact
    # the reference code's score and a uniform draw in the chosen region also impute sensibly
    assert rmse(m.impute(masked, method="max_density", score="reference", within="uniform",
                         random_state=0)) < sd
    assert np.array_equal(m.impute(masked, method="sample", random_state=3),
                          m.impute(masked, method="sample", random_state=3))


def test_queries_roundtrip_and_determinism(tmp_path):
    df = mixed()
    m = GFBoost(n_trees=4, n_iter=20, random_state=0).fit(df)
    m2 = GFBoost(n_trees=4, n_iter=20, random_state=0).fit(df)
    assert np.array_equal(m.log_prob(df), m2.log_prob(df))
    path = m.save(tmp_path / "gf.fg")
    m3 = GenerativeForest.load(path)
    assert isinstance(m3, GFBoost)
    assert np.array_equal(m3.log_prob(df), m.log_prob(df))
    assert m3.risk_path_ == m.risk_path_
    pp = m.predict_proba(df.head(10), "c")
    assert np.allclose(pp.sum(1), 1.0)
    dist = m.to_torch()
    Z = m.encoder_.transform(df.head(10))
    import torch

    assert np.allclose(dist.log_prob(torch.as_tensor(Z)).numpy(), m.log_prob(df.head(10)))
    # marginalising a column = integrating it out
    X = df.head(5).copy()
    X["b"] = None
    both = [df.head(5).assign(b=v) for v in (False, True)]
    marg = np.log(sum(np.exp(m.log_prob(x)) for x in both))
    assert np.allclose(m.log_prob(X), marg)


def test_bad_parameters_name_themselves():
    with pytest.raises(ValueError, match="loss"):
        GFBoost(loss="hinge").fit(mixed())
    with pytest.raises(ValueError, match="prior"):
        GFBoost(prior=1.5).fit(mixed())
    with pytest.raises(ValueError, match="n_iter"):
        GFBoost(n_iter=-1).fit(mixed())


def test_eogt_sampler_matches_its_density():
    rng = np.random.default_rng(0)
    n = 400
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.5, n)})
    m = EOGT(**PAPER, smoothing=1e-3, n_trees=3, n_iter=10).fit(df)
    f = m.trees_
    edges = []
    for j in range(2):
        thr = f.threshold[f.feature == j]
        edges.append(np.unique(np.r_[m.box_lo_[j], thr, m.box_hi_[j]]))
    mx = 0.5 * (edges[0][1:] + edges[0][:-1])
    my = 0.5 * (edges[1][1:] + edges[1][:-1])
    G = np.array([(x, y) for x in mx for y in my])
    area = np.array([wx * wy for wx in np.diff(edges[0]) for wy in np.diff(edges[1])])
    p = np.exp(m.log_prob_encoded(G)) * area
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    N = 6000
    S = m.sample_encoded(N, random_state=2)
    ix = np.searchsorted(edges[0], S[:, 0], side="left") - 1
    iy = np.searchsorted(edges[1], S[:, 1], side="left") - 1
    obs = np.bincount(ix * len(my) + iy, minlength=len(p))
    keep = p > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], p[keep] * N).pvalue > 1e-3
    # the Python star-node walk (the reference oracle) draws the same law
    kind, nlev, nom_off, _ = column_layout(m.schema_)
    geo = TreeGeometry(m.trees_, m.box_lo_, m.box_hi_, nom_off, nlev)
    P = StarNodeSampler(geo, kind, branch="approx").draw(3000, np.random.default_rng(5))
    ix = np.searchsorted(edges[0], P[:, 0], side="left") - 1
    iy = np.searchsorted(edges[1], P[:, 1], side="left") - 1
    obs = np.bincount(ix * len(my) + iy, minlength=len(p))
    assert stats.chisquare(obs[keep], p[keep] * 3000).pvalue > 1e-3


def test_eogt_single_tree_equals_gf():
    df = mixed(n=200)[["a", "n", "c"]]
    g = GFBoost(n_trees=1, n_iter=8, smoothing=1e-3, **PAPER).fit(df)
    e = EOGT(**PAPER, smoothing=1e-3, n_trees=1, n_iter=8).fit(df)
    assert np.allclose(g.log_prob(df), e.log_prob(df))


def test_eogt_unsupported_queries_raise():
    m = EOGT(**PAPER, smoothing=1e-3, n_trees=2, n_iter=4).fit(mixed())
    with pytest.raises(NotImplementedError, match="EOGT.*'expect' queries"):
        m.expect("a")
    with pytest.raises(ZeroProbabilityError, match="EOGT"):  # torch condition: numpy queries
        m.to_torch().condition({"a": (1e6, 2e6)}).sample((5,))


def test_eogt_ranges_and_level_sets_are_exact():
    """Closed ranges and level sets: P(evidence) is the integral / sum of the density over
    it, conditional densities integrate to one, and draws stay inside the evidence with the
    conditional's frequencies."""
    df = mixed(n=300)[["a", "n", "c"]]
    m = EOGT(**PAPER, n_trees=3, n_iter=15, smoothing=0.05).fit(df)
    (ma,), (wa,) = _eogt_grid(m, cols=(0,))
    ints = np.arange(m.schema_["n"].lower, m.schema_["n"].upper + 1)
    levels = list(m.schema_["c"].categories)
    lo, hi = -0.4, 0.9
    cond = {"a": (lo, hi), "n": (15, 30), "c": {levels[0], levels[-1]}}
    # the joint on a grid fine enough that the density is constant on each piece
    cuts = np.unique(np.r_[m.box_lo_[0], lo, hi, m.trees_.threshold[m.trees_.feature == 0],
                           m.box_hi_[0]])
    cuts = cuts[(cuts >= m.box_lo_[0]) & (cuts <= m.box_hi_[0])]
    mids, widths = 0.5 * (cuts[1:] + cuts[:-1]), np.diff(cuts)
    G = pd.DataFrame([(x, v, c) for x in mids for v in ints for c in levels],
                     columns=["a", "n", "c"])
    G["c"] = pd.Categorical(G["c"], categories=levels)
    w = np.repeat(widths, len(ints) * len(levels))
    p = np.exp(m.log_prob(G, floor=None)) * w
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    inside = (G["a"].between(lo, hi) & G["n"].between(15, 30)
              & G["c"].isin(cond["c"])).to_numpy()
    pe = p[inside].sum()
    # log p(n | a in range, c in set) = log P(n, e) - log P(e): a pmf over n
    e2 = {"a": cond["a"], "c": cond["c"]}
    in2 = (G["a"].between(lo, hi) & G["c"].isin(cond["c"])).to_numpy()
    pn = np.array([p[in2 & (G["n"] == v).to_numpy()].sum() for v in ints]) / p[in2].sum()
    lp = m.log_prob(pd.DataFrame({"a": np.nan, "n": ints, "c": np.nan}), conditions=e2)
    assert np.allclose(np.exp(lp), pn, atol=1e-12)
    only_c = m.log_prob(G[["a", "n"]].assign(c=np.nan), conditions={"c": cond["c"]})
    marg = np.exp(only_c) * w / len(levels)  # each (a, n) repeated once per level
    assert marg.sum() == pytest.approx(1.0, abs=1e-9)
    # draws: inside the evidence, cells visited in proportion to the conditional
    N = 3000
    s = m.sample(N, conditions=cond, random_state=0)
    assert s["a"].between(lo, hi).all() and s["n"].between(15, 30).all()
    assert s["c"].isin(cond["c"]).all()
    cell = np.searchsorted(cuts, s["a"].to_numpy(), side="left") - 1
    obs = np.bincount(cell, minlength=len(mids))
    pa = np.bincount(np.repeat(np.arange(len(mids)), len(ints) * len(levels))[inside],
                     weights=p[inside], minlength=len(mids)) / pe
    keep = pa > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], pa[keep] * N).pvalue > 1e-3
    # past max_regions, ranges and sets alone are drawn by rejection from the law: same law
    m.max_regions = 1
    r = m.sample(N, conditions=cond, random_state=7)
    assert r["n"].between(15, 30).all() and r["c"].isin(cond["c"]).all()
    obs = np.bincount(np.searchsorted(cuts, r["a"].to_numpy(), side="left") - 1,
                      minlength=len(mids))
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], pa[keep] * N).pvalue > 1e-3
    # ... and so are point values, forced in the walk (eogt_forced): per row and as a dict
    c0 = cond["c"][0] if isinstance(cond["c"], (list, tuple)) else sorted(cond["c"])[0]
    a0 = float(G["a"].iloc[0])
    rows = pd.DataFrame({"n": [20, 22, np.nan], "c": [c0, np.nan, c0],
                         "a": [np.nan, np.nan, a0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = m.sample(conditions=rows, random_state=3)
    assert r.loc[0, "n"] == 20 and r.loc[0, "c"] == c0 and r.loc[1, "n"] == 22
    assert r.notna().all().all() and r.loc[2, "c"] == c0 and r.loc[2, "a"] == a0
    big = m.sample(400, conditions={"n": 20}, random_state=4)
    assert (big["n"] == 20).all()
    forced = m.sample(400, conditions={"a": a0, "c": c0}, random_state=5)
    assert (forced["a"] == a0).all() and (forced["c"] == c0).all()
    m.max_regions = EOGT.max_regions
    exact = m.sample(400, conditions={"n": 20}, random_state=4)
    assert stats.ks_2samp(big["a"], exact["a"]).pvalue > 1e-3
    pn = np.exp(m.log_prob(pd.DataFrame({"a": np.nan, "n": ints, "c": np.nan}),
                           conditions={"a": a0, "c": c0}))
    assert pn.sum() == pytest.approx(1.0, abs=1e-9)
    obs = (forced["n"].to_numpy()[:, None] == ints[None, :]).sum(0)
    assert obs[pn == 0].sum() == 0
    assert stats.chisquare(obs[pn > 0], pn[pn > 0] * 400).pvalue > 1e-3
    per_row = m.sample(conditions=pd.DataFrame({"a": [(lo, hi), (0.0, None)]}), random_state=1)
    assert lo <= per_row["a"].iloc[0] <= hi and per_row["a"].iloc[1] >= 0


def test_eogt_conditions_on_values_are_exact():
    rng = np.random.default_rng(2)
    n = 300
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.3, n)})
    m = EOGT(**PAPER, smoothing=1e-3, n_trees=3, n_iter=15).fit(df)
    (ma, mb), (wa, wb) = _eogt_grid(m)
    v = float(df["a"].iloc[0])
    G = pd.DataFrame({"a": 0.0, "b": mb})  # "a" in X is ignored: the evidence gives it
    lp = m.log_prob(G, conditions={"a": v})
    assert np.sum(np.exp(lp) * wb) == pytest.approx(1.0, abs=1e-9)  # a density in b
    joint = m.log_prob(G.assign(a=v))
    assert np.allclose(lp, joint - m.log_prob(pd.DataFrame({"a": [v], "b": [np.nan]}))[0])
    # draws: "a" fixed, "b" distributed as the conditional density (chi-square on the grid)
    s = m.sample(3000, conditions={"a": v}, random_state=1)
    assert (s["a"] == v).all()
    edges = np.r_[mb - wb / 2, mb[-1] + wb[-1] / 2]
    obs = np.bincount(np.searchsorted(edges, s["b"], side="left") - 1, minlength=len(mb))
    p = np.exp(lp) * wb
    keep = p > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], p[keep] * 3000).pvalue > 1e-3
    per_row = m.sample(conditions=df[["a"]].head(5), random_state=0)
    assert np.allclose(per_row["a"], df["a"].head(5)) and list(per_row.index) == list(range(5))


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_eogt_values_past_max_regions_are_exact(smoothing):
    """Past ``max_regions`` a numeric value is forced in the walk and each proposal accepted
    by its importance ratio (``eogt_forced``): the draws follow the exact conditional density
    of the enumerating path, the smoothing component's share included."""
    rng = np.random.default_rng(2)
    n = 300
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.3, n)})
    m = EOGT(**PAPER, n_trees=3, n_iter=15, smoothing=smoothing).fit(df)
    (ma, mb), (wa, wb) = _eogt_grid(m)
    edges = np.r_[mb - wb / 2, mb[-1] + wb[-1] / 2]
    for v in (float(df["a"].iloc[0]), float(ma[0]), float(ma[-1])):
        p = np.exp(m.log_prob(pd.DataFrame({"a": 0.0, "b": mb}), conditions={"a": v})) * wb
        m.max_regions = 1
        s = m.sample(3000, conditions={"a": v}, random_state=1)
        m.max_regions = EOGT.max_regions
        assert (s["a"] == v).all()
        obs = np.bincount(np.searchsorted(edges, s["b"], side="left") - 1, minlength=len(mb))
        keep = p > 0
        assert obs[~keep].sum() == 0
        assert stats.chisquare(obs[keep], p[keep] * 3000).pvalue > 1e-3
    # a value outside the box has probability zero: per row blank with a warning
    m.max_regions = 1
    with pytest.warns(RuntimeWarning, match="probability zero|max_regions"):
        r = m.sample(conditions=pd.DataFrame({"a": [0.0, 1e6]}), random_state=0)
    assert r.loc[0].notna().all() and r.loc[1, "b"] != r.loc[1, "b"]


def _eogt_grid(m, cols=(0, 1)):
    """Midpoints and widths of the grid cut by every threshold of the trees (EOGT's density is
    constant on each grid cell)."""
    f = m.trees_
    edges = [np.unique(np.r_[m.box_lo_[j], f.threshold[f.feature == j], m.box_hi_[j]])
             for j in cols]
    return [0.5 * (e[1:] + e[:-1]) for e in edges], [np.diff(e) for e in edges]


def test_eogt_marginals_are_exact_integrals():
    """NaN entries: the marginal equals the sum / integral of the joint density."""
    rng = np.random.default_rng(1)
    n = 300
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.5, n),
                       "c": pd.Categorical(np.where(a > 0, "p", rng.choice(["q", "r"], n)))})
    m = EOGT(**PAPER, n_trees=3, n_iter=12, smoothing=0.05).fit(df)
    (ma, mb), (wa, wb) = _eogt_grid(m)
    levels = m.schema_["c"].categories
    # a missing categorical = the sum over its levels
    rows = df.head(15)
    parts = [m.log_prob(rows.assign(c=lv)) for lv in levels]
    assert np.allclose(m.log_prob(rows.assign(c=None)), np.logaddexp.reduce(parts, axis=0))
    # a missing numeric = the integral over it (the joint is constant between thresholds)
    for i in range(5):
        G = pd.DataFrame({"a": rows["a"].iloc[i], "b": mb, "c": rows["c"].iloc[i]})
        G["c"] = pd.Categorical(G["c"], categories=levels)
        integral = np.sum(np.exp(m.log_prob(G)) * wb)
        got = m.log_prob(rows.iloc[[i]].assign(b=np.nan))[0]
        assert got == pytest.approx(math.log(integral), abs=1e-9)
    # everything missing: log 1; only c observed: its pmf sums to one
    assert m.log_prob(pd.DataFrame({"a": [np.nan], "b": [np.nan], "c": [None]}))[0] == \
        pytest.approx(0.0, abs=1e-12)
    pc = np.exp(m.log_prob(pd.DataFrame({"a": np.nan, "b": np.nan, "c": list(levels)})))
    assert pc.sum() == pytest.approx(1.0, abs=1e-9)
    # predict_proba = normalised joint over the target's levels
    pp = m.predict_proba(rows, "c").to_numpy()
    joint = np.exp(np.stack(parts, 1))
    assert np.allclose(pp, joint / joint.sum(1, keepdims=True))


def test_eogt_imputation_modes():
    rng = np.random.default_rng(2)
    n = 300
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "b": a + rng.normal(0, 0.3, n)})
    m = EOGT(**PAPER, smoothing=1e-3, n_trees=3, n_iter=15).fit(df)
    X = df.head(12).copy()
    X["b"] = np.nan
    (ma, mb), (wa, wb) = _eogt_grid(m)
    imp = m.impute(X, method="max_density", random_state=0)
    for i in range(len(X)):  # max density = brute force over the grid of b
        G = pd.DataFrame({"a": X["a"].iloc[i], "b": mb})
        assert m.log_prob(imp.iloc[[i]])[0] == pytest.approx(m.log_prob(G).max(), abs=1e-9)
    # the conditional mean: a grid integral of b p(a, b) / p(a)
    mean = m.impute(X, method="expectation")["b"].to_numpy()
    for i in range(len(X)):
        G = pd.DataFrame({"a": X["a"].iloc[i], "b": mb})
        w = np.exp(m.log_prob(G)) * wb
        assert mean[i] == pytest.approx(np.sum(w * mb) / w.sum(), rel=1e-9, abs=1e-9)
    # conditional draws: their mean is near the conditional mean
    draws = np.stack([m.impute(X.iloc[[0] * 400], method="sample", random_state=s)["b"]
                      .to_numpy() for s in range(3)]).ravel()
    G = pd.DataFrame({"a": X["a"].iloc[0], "b": mb})
    w = np.exp(m.log_prob(G)) * wb
    sd = math.sqrt(np.sum(w * mb**2) / w.sum() - mean[0] ** 2)
    assert abs(draws.mean() - mean[0]) < 4 * sd / math.sqrt(len(draws))
    assert np.array_equal(m.impute(X, method="sample", random_state=5),
                          m.impute(X, method="sample", random_state=5))


def test_grid100_candidates_and_thread_count():
    import numba

    df = mixed()
    m = GFBoost(n_trees=3, n_iter=15, candidates="grid100").fit(df)
    assert np.all(np.diff(m.risk_path_) <= 1e-12)
    f = m.trees_
    a = f.threshold[f.feature == 0]
    lo, hi = m.box_lo_[0], m.box_hi_[0]
    root_thr = f.threshold[f.roots[f.feature[f.roots] == 0]]
    # a root split on the continuous column sits on the 100-point grid of the box
    k = (root_thr - lo) / (hi - lo) * 101
    assert np.allclose(k, np.round(k)) and len(a) > 0
    # its compiled star-node sampler runs in parallel
    e = EOGT(**PAPER, smoothing=1e-3, n_trees=3, n_iter=15).fit(df)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        lp1, s1, e1 = m.log_prob(df), m.sample(50, random_state=3), e.sample(300, random_state=3)
        numba.set_num_threads(max(2, before))
        lp2, s2, e2 = m.log_prob(df), m.sample(50, random_state=3), e.sample(300, random_state=3)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(lp1, lp2)
    pd.testing.assert_frame_equal(s1, s2)
    pd.testing.assert_frame_equal(e1, e2)
    assert not e1.equals(e.sample(300, random_state=4))


@pytest.mark.parametrize("missing", ["fractional", "random_hard"])
def test_missing_values_in_training_keep_mass_and_monotone_risk(missing):
    df = mixed(missing=True)
    m = GFBoost(n_trees=4, n_iter=24, missing=missing, random_state=0).fit(df)
    assert exact_integral(m) == pytest.approx(1.0, abs=1e-9)
    path = np.asarray(m.risk_path_)
    assert np.all(np.diff(path) <= 1e-12)
    assert m.cell_risk() == pytest.approx(path[-1], abs=1e-10)
    if missing == "random_hard":
        assert m.n_cells_ <= len(df)  # one fragment per row
    again = GFBoost(n_trees=4, n_iter=24, missing=missing, random_state=0).fit(df)
    assert np.array_equal(again.log_prob(df), m.log_prob(df))


def _held_out(n=600, seed=0):
    """A real-shaped table (skewed amount with NaN, count, point mass, categorical with NaN,
    binary label; forestgen.testing.small_tables) split 80/20."""
    from forestgen.testing import small_tables

    df = small_tables(random_state=seed, n=n)["mixed"][0]
    k = int(0.8 * len(df))
    return df.iloc[:k], df.iloc[k:]


def test_held_out_rows_have_finite_sensible_density():
    """The paper's q_G is zero in every cell without training rows, where most held-out rows
    fall; the smoothed model (default) scores every held-out row, above the uniform density on
    the box and no worse than the model's own smoothing floor."""
    train, test = _held_out()
    exact = GFBoost(n_trees=20, n_iter=100, smoothing=0.0, random_state=0, **PAPER).fit(train)
    lp0 = exact.log_prob(test, floor=None)
    assert np.isneginf(lp0).mean() > 0.5  # the defect: most held-out rows get -inf
    m = GFBoost(n_trees=20, n_iter=100, smoothing=1e-3, random_state=0, **PAPER).fit(train)
    lp = m.log_prob(test)
    assert np.isfinite(lp).all()

    lv = box_log_volume(m.schema_, m.box_lo_, m.box_hi_)
    inside = np.isfinite(m.log_prob(test, floor=None))
    assert inside.mean() > 0.9
    # the smoothing component: uniform on the box; the point-mass column "spike" (zeros)
    # keeps the training share of zeros in each region's uniform part, so rows off the atom
    # get ε (1 - share) / μ(X) from it, rows at the atom a positive probability
    assert m.schema_["spike"].atoms == [0.0]
    share = float((train["spike"].dropna() == 0).mean())
    off = (test["spike"] != 0).to_numpy() & test["spike"].notna().to_numpy()
    unif = math.log(m.smoothing_) - lv + math.log(1 - share)
    assert np.all(lp[inside & off] >= unif - 1e-9)
    assert np.isfinite(m.log_prob(test, floor=None)[~off & test["spike"].notna().to_numpy()]).all()
    # complete training rows off the atom: exactly (1 - ε) q_G + ε (1 - share) / μ(X)
    tr = train[train.notna().all(axis=1) & (train["spike"] != 0)]
    assert len(tr) > 5
    assert np.allclose(m.log_prob(tr), np.logaddexp(
        math.log(1 - 1e-3) + exact.log_prob(tr, floor=None), unif))
    # "auto" (Good-Turing) puts more weight on the uniform and fits held-out rows better
    auto = GFBoost(n_trees=20, n_iter=100, smoothing="auto", random_state=0, **PAPER).fit(train)
    assert 1e-3 < auto.smoothing_ < 1
    assert auto.score(test) > m.score(test) > -lv + math.log(1e-3)
    # the defaults (marginal cells, smoothing toward the marginals chosen on held-out rows)
    default = GFBoost(n_trees=20, n_iter=100, random_state=0).fit(train)
    assert default.score(test) > auto.score(test)


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_smoothed_density_integrates_to_one(smoothing):
    df = mixed(missing=True)
    m = GFBoost(n_trees=4, n_iter=24, smoothing=smoothing, random_state=0).fit(df)
    assert exact_integral(m) == pytest.approx(1.0, abs=1e-9)
    lo, hi, mask, R = m.cells()
    assert R.sum() == pytest.approx(1.0) and (R == 0).any()  # empty regions are leaves too
    assert (np.isneginf(m.leaf_log_weight_) == (R == 0)).all() if smoothing == 0 else \
        np.isfinite(m.leaf_log_weight_).all()
    # the leaves tile the box: uniform points reach exactly the leaf whose box holds them
    U = m.sample_encoded(2000, random_state=0) if smoothing else None
    if U is not None:
        leaf = m.forest_.apply(U)[:, 0]
        num = [j for j, c in enumerate(m.schema_.columns) if not c.is_discrete]
        assert np.all((U[:, num] > lo[leaf][:, num]) & (U[:, num] <= hi[leaf][:, num]))


def test_missing_categorical_is_the_sum_over_its_levels():
    df = mixed(missing=True)  # NaN in the categorical column during training too
    m = GFBoost(n_trees=5, n_iter=30, random_state=0).fit(df)
    rows = df.dropna().head(25).copy()
    levels = m.schema_["c"].categories
    parts = [m.log_prob(rows.assign(c=lv)) for lv in levels]
    blank = rows.copy()
    blank["c"] = None
    assert np.allclose(m.log_prob(blank), np.logaddexp.reduce(parts, axis=0), atol=1e-10)


def test_point_mass_zero_inflated_column():
    """fair-like zero inflation: 60% of ``x`` is exactly 0; samples, the density (counting
    measure at the atom) and imputations keep the spike."""
    rng = np.random.default_rng(0)
    n = 400
    zero = rng.random(n) < 0.6
    x = np.where(zero, 0.0, rng.exponential(2.0, n))
    df = pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.5, n),
                       "c": np.where(zero, "a", rng.choice(["a", "b"], n))})
    m = GFBoost(n_trees=8, n_iter=40, smoothing=1e-3, random_state=0).fit(df)
    assert m.schema_["x"].atoms == [0.0]
    share = zero.mean()
    s = m.sample(20_000, random_state=1)
    assert abs((s["x"] == 0).mean() - share) < 4 * math.sqrt(share * (1 - share) / 20_000)
    # P(x = 0): the marginal at the atom is a probability (counting measure)
    p0 = np.exp(m.log_prob(pd.DataFrame({"x": [0.0], "y": [np.nan], "c": [None]})))[0]
    assert p0 == pytest.approx(share, abs=2e-3)
    # in the rows with c = "b" (no zeros in the data) the model puts almost no zeros
    sb = s[s["c"] == "b"]
    assert (sb["x"] == 0).mean() < 0.05
    # imputing x: the back-off walk draws the atom exactly
    masked = df.copy()
    masked.loc[::4, "x"] = np.nan
    imp = m.impute(masked, method="max_density", random_state=0)
    assert (imp["x"].to_numpy()[::4] == 0).mean() > 0.3
    assert m.cell_risk() > 0


def _zero_inflated(n=400, seed=0):
    rng = np.random.default_rng(seed)
    zero = rng.random(n) < 0.6
    x = np.where(zero, 0.0, rng.exponential(2.0, n))
    return pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.5, n),
                         "c": np.where(zero, "a", rng.choice(["a", "b"], n))}), zero


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_eogt_point_mass_density_is_exactly_normalised(smoothing):
    """EOGT's regions carry atom shares: the density (counting measure at the atom, Lebesgue
    off it) sums and integrates to one over the mixed domain, and a NaN entry is the sum of
    the atom and the integral off it."""
    df, _ = _zero_inflated()
    m = EOGT(**PAPER, n_trees=4, n_iter=24, smoothing=smoothing).fit(df)
    assert m.schema_["x"].atoms == [0.0]
    (mx, my), (wx, wy) = _eogt_grid(m)
    assert not np.isin(0.0, mx)
    levels = m.schema_["c"].categories
    total = 0.0
    for lv in levels:
        for xs, wxs in ((mx, wx), (np.array([0.0]), np.array([1.0]))):  # off / at the atom
            G = pd.DataFrame([(x, y) for x in xs for y in my], columns=["x", "y"]).assign(c=lv)
            w = np.array([a * b for a in wxs for b in wy])
            total += float(np.sum(np.exp(m.log_prob(G, floor=None)) * w))
    assert total == pytest.approx(1.0, abs=1e-9)
    # marginals: x = 0 with y, c missing is the atom's probability; summed with the integral
    # of x off the atom it gives one
    p0 = np.exp(m.log_prob(pd.DataFrame({"x": [0.0], "y": [np.nan], "c": [None]}),
                           floor=None))[0]
    off = np.exp(m.log_prob(pd.DataFrame({"x": mx, "y": np.nan, "c": None}), floor=None))
    assert p0 + float(np.sum(off * wx)) == pytest.approx(1.0, abs=1e-9)
    row = df.head(3)
    joint = [m.log_prob(row.assign(y=y), floor=None) for y in my]
    integral = np.log(np.sum(np.exp(np.stack(joint, 1)) * wy, 1))
    assert np.allclose(m.log_prob(row.assign(y=np.nan), floor=None), integral, atol=1e-9)


def test_eogt_keeps_point_masses_in_samples_and_imputations(tmp_path):
    """fair-like zero inflation (60% of x is exactly 0): EOGT's samples hit the atom at the
    data's share, at the rate its own density gives, and more where the data put zeros."""
    df, zero = _zero_inflated()
    m = EOGT(**PAPER, smoothing=1e-3, n_trees=8, n_iter=40).fit(df)
    N = 20_000
    s = m.sample(N, random_state=1)
    share = float((s["x"] == 0).mean())
    assert abs(share - zero.mean()) < 0.05
    p0 = np.exp(m.log_prob(pd.DataFrame({"x": [0.0], "y": [np.nan], "c": [None]})))[0]
    assert abs(share - p0) < 4 * math.sqrt(p0 * (1 - p0) / N)  # sampler = density
    # no zeros with c = "b" in the data; EOGT's law puts mass in regions holding no training
    # row, whose share is the column's within the region's interval (module region_atoms)
    assert (s.loc[s["c"] == "b", "x"] == 0).mean() < (s.loc[s["c"] == "a", "x"] == 0).mean()
    assert (s["x"] >= 0).all()
    masked = df.copy()
    masked.loc[::4, "x"] = np.nan
    # conditional draws hit the atom at the rate the density gives: P(x = 0 | y, c)
    rows = masked.iloc[::4]
    p_atom = np.exp(m.log_prob(rows.assign(x=0.0)) - m.log_prob(rows))
    draws = np.stack([m.impute(rows, method="sample", random_state=r)["x"].to_numpy() == 0
                      for r in range(5)])
    assert abs(draws.mean() - p_atom.mean()) < 4 * math.sqrt(0.25 / draws.size)
    assert p_atom[zero[::4]].mean() > p_atom[~zero[::4]].mean()
    # maximum density under log_prob's measure (counting at the atom): brute force over the
    # atom and the grid of x
    (mx, _), _ = _eogt_grid(m)
    best = m.impute(masked.head(20), method="max_density", random_state=0)
    for i in range(0, 20, 4):
        G = pd.DataFrame({"x": np.r_[0.0, mx], "y": df["y"].iloc[i], "c": df["c"].iloc[i]})
        assert m.log_prob(best.iloc[[i]])[0] == pytest.approx(m.log_prob(G).max(), abs=1e-9)
    given = m.sample(4000, conditions={"c": "a"}, random_state=0)
    assert (given["x"] == 0).mean() > zero.mean()  # zeros all have c = "a"
    m.save(tmp_path / "e.fgm")
    back = GenerativeForest.load(tmp_path / "e.fgm")
    assert np.array_equal(back.log_prob(df), m.log_prob(df))
    assert back.sample(50, random_state=3).equals(m.sample(50, random_state=3))


def test_gfboost_keeps_spike_levels_of_integer_columns():
    """An integer column coded as levels with a spike (adult's education-num = 9, 32% of
    rows): GF.Boost's cells keep the spike's share (uniform cells gave it 6%), and the
    density over levels x grid still sums to one (smoothing and rows missing it included)."""
    rng = np.random.default_rng(0)
    n = 400
    edu = np.where(rng.random(n) < 0.35, 9, rng.integers(1, 17, n))
    # a very skewed column takes the few splits, so no cell isolates the spike level
    df = pd.DataFrame({"edu": edu, "a": np.exp(rng.normal(0, 2.5, n))})
    df.loc[rng.random(n) < 0.1, "edu"] = np.nan
    df["edu"] = df["edu"].astype("Int64")
    m = GFBoost(n_trees=2, n_iter=4, smoothing=0.1, random_state=0, **PAPER).fit(df)
    assert not (m.trees_.feature == 0).any()
    spec = m.schema_["edu"]
    assert spec.is_discrete
    share = float((df["edu"].dropna() == 9).mean())
    p9 = float(np.exp(m.log_prob(pd.DataFrame({"edu": pd.array([9], "Int64"), "a": [np.nan]})))[0])
    # the data's share, less what smoothing (10%) and the rows missing edu spread uniformly
    assert 0.8 * share < p9 <= share
    s = m.sample(20_000, random_state=1, missing=False)
    assert abs(float((s["edu"] == 9).mean()) - p9) < 4 * math.sqrt(p9 * (1 - p9) / 20_000)
    (ma,), (wa,) = _eogt_grid(m, cols=(1,))
    G = pd.DataFrame([(v, x) for v in spec.categories for x in ma], columns=["edu", "a"])
    G["edu"] = G["edu"].astype("Int64")
    w = np.tile(wa, len(spec.categories))
    assert float(np.sum(np.exp(m.log_prob(G, floor=None)) * w)) == pytest.approx(1.0, abs=1e-9)
    assert m.cell_risk() == pytest.approx(m.risk_path_[-1], abs=1e-10)


def test_eogt_keeps_spike_levels_of_integer_columns(tmp_path):
    """EOGT's regions carry the spike levels of an integer column coded as levels (adult's
    education-num = 9) with their shares (module region_atoms; uniform regions gave the spike
    ~1/16): the density over levels x grid sums to one (smoothing and rows missing the column
    included), the sampler draws the spike at the density's rate, close to the data's share,
    level sets are grid sums of the joint, and a saved model answers the same."""
    rng = np.random.default_rng(0)
    n = 400
    edu = np.where(rng.random(n) < 0.35, 9, rng.integers(1, 17, n))
    df = pd.DataFrame({"edu": edu, "a": np.exp(rng.normal(0, 2.5, n)) + 0.1 * edu})
    df.loc[rng.random(n) < 0.1, "edu"] = np.nan
    df["edu"] = df["edu"].astype("Int64")
    m = EOGT(**PAPER, n_trees=3, n_iter=12, smoothing=0.1, random_state=0).fit(df)
    spec = m.schema_["edu"]
    assert spec.is_discrete
    (ma,), (wa,) = _eogt_grid(m, cols=(1,))
    G = pd.DataFrame([(v, x) for v in spec.categories for x in ma], columns=["edu", "a"])
    G["edu"] = G["edu"].astype("Int64")
    w = np.tile(wa, len(spec.categories))
    p = np.exp(m.log_prob(G, floor=None)) * w
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-9)
    # the marginal of edu = 9 is the grid sum of the joint and near the data's share
    # (less what smoothing, shrinkage and the rows missing edu spread over other levels)
    share = float((df["edu"].dropna() == 9).mean())
    nine = (G["edu"] == 9).to_numpy()
    p9 = float(np.exp(m.log_prob(pd.DataFrame({"edu": pd.array([9], "Int64"),
                                               "a": [np.nan]}), floor=None))[0])
    assert p9 == pytest.approx(float(p[nine].sum()), abs=1e-9)
    assert 0.85 * share < p9 <= share
    N = 20_000
    s = m.sample(N, random_state=1, missing=False)
    got = float((s["edu"] == 9).mean())
    assert abs(got - p9) < 4 * math.sqrt(p9 * (1 - p9) / N)
    # a level set: its probability and conditional draws are those of the joint
    levels = {9, 10, 3}
    ins = G["edu"].isin(levels).to_numpy()
    lp = m.log_prob(pd.DataFrame({"edu": pd.array([pd.NA] * len(ma), "Int64"), "a": ma}),
                    conditions={"edu": levels})
    pa = np.bincount(np.tile(np.arange(len(ma)), len(spec.categories))[ins], weights=p[ins],
                     minlength=len(ma)) / p[ins].sum()
    assert np.allclose(np.exp(lp) * wa, pa, atol=1e-12)
    c = m.sample(4000, conditions={"edu": levels}, random_state=2)
    assert c["edu"].isin(levels).all()
    p9_set = p[nine].sum() / p[ins].sum()
    assert abs(float((c["edu"] == 9).mean()) - p9_set) < 4 * math.sqrt(0.25 / 4000)
    # a closed range on the level column: its levels 5..10
    ins = G["edu"].between(5, 10).to_numpy()
    lp = m.log_prob(pd.DataFrame({"edu": pd.array([pd.NA] * len(ma), "Int64"), "a": ma}),
                    conditions={"edu": (5, 10)})
    pa = np.bincount(np.tile(np.arange(len(ma)), len(spec.categories))[ins], weights=p[ins],
                     minlength=len(ma)) / p[ins].sum()
    assert np.allclose(np.exp(lp) * wa, pa, atol=1e-12)
    c = m.sample(4000, conditions={"edu": (5, 10)}, random_state=2)
    assert c["edu"].between(5, 10).all()
    p9_set = p[nine].sum() / p[ins].sum()
    assert abs(float((c["edu"] == 9).mean()) - p9_set) < 4 * math.sqrt(0.25 / 4000)
    # imputation by sampling draws the spike at the conditional's rate
    rows = df.dropna().head(40).assign(edu=pd.array([pd.NA] * 40, "Int64"))
    p_row = np.exp(m.log_prob(rows.assign(edu=pd.array([9] * 40, "Int64")), floor=None)
                   - m.log_prob(rows, floor=None))
    draws = np.stack([m.impute(rows, method="sample", random_state=r)["edu"].to_numpy() == 9
                      for r in range(10)])
    assert abs(draws.mean() - p_row.mean()) < 4 * math.sqrt(0.25 / draws.size)
    proba = m.predict_proba(rows.head(5), target="edu")
    assert np.allclose(proba[9], p_row[:5], atol=1e-9)
    best = m.impute(rows.head(5), method="max_density", random_state=0)
    for i in range(5):
        Gi = pd.DataFrame({"edu": pd.array(list(spec.categories), "Int64"),
                           "a": rows["a"].iloc[i]})
        assert m.log_prob(best.iloc[[i]])[0] == pytest.approx(m.log_prob(Gi).max(), abs=1e-9)
    m.save(tmp_path / "e.fgm")
    back = GenerativeForest.load(tmp_path / "e.fgm")
    assert np.array_equal(back.log_prob(G), m.log_prob(G))
    assert back.sample(50, random_state=3).equals(m.sample(50, random_state=3))


def test_eogt_level_outside_the_training_levels_scores_zero_per_row():
    """A held-out integer value beyond the training levels of a spike column (adult's
    education-num = 16 when training stops at 15) has density zero; predict_proba answers its
    row from the other entries, with a warning (stop 48; was a NaN row, before that an
    IndexError), and the other rows of the batch as before."""
    rng = np.random.default_rng(0)
    n = 400
    edu = np.where(rng.random(n) < 0.35, 9, rng.integers(1, 17, n))
    df = pd.DataFrame({"edu": pd.array(edu, "Int64"), "c": rng.choice(["x", "y"], n),
                       "a": np.exp(rng.normal(0, 2.5, n)) + 0.1 * edu})
    m = EOGT(**PAPER, n_trees=3, n_iter=12, smoothing=0.1, random_state=0).fit(df)
    q = pd.DataFrame({"edu": pd.array([17, 9], "Int64"), "c": ["x", "x"], "a": [1.0, 1.0]})
    lp = m.log_prob(q, floor=None)
    assert lp[0] == -np.inf and np.isfinite(lp[1])
    with pytest.warns(RuntimeWarning, match="outside the training box"):
        P = m.predict_proba(q, target="c").to_numpy()
    free = m.predict_proba(q.assign(edu=pd.array([None, 9], "Int64")), target="c").to_numpy()
    assert np.allclose(P, free) and np.allclose(P.sum(1), 1.0)


@pytest.mark.parametrize("decimals", [None, 1])
def test_eogt_point_mass_values_past_max_regions_are_exact(decimals):
    """A value of a zero-inflated column past ``max_regions``: the forced walk's draws are kept
    with the region's atom share (at the atom), its continuous share (off it) or both (a grid
    value), and follow the enumerating path's conditional density of the other column."""
    rng = np.random.default_rng(3)
    n = 400
    z = rng.normal(size=n)
    a = np.where(rng.random(n) < 0.4, 0.0, np.exp(z))
    if decimals is not None:
        a = np.round(a, decimals)
    df = pd.DataFrame({"a": a, "b": z + rng.normal(0, 0.4, n)})
    m = EOGT(**PAPER, n_trees=3, n_iter=15, smoothing=0.05).fit(df)
    assert m.schema_["a"].atoms is not None and 0.0 in m.schema_["a"].atoms
    (mb,), (wb,) = _eogt_grid(m, cols=(1,))
    edges = np.r_[mb - wb / 2, mb[-1] + wb[-1] / 2]
    for v in (0.0, float(np.round(np.exp(0.3), 1))):
        p = np.exp(m.log_prob(pd.DataFrame({"a": 0.0, "b": mb}), conditions={"a": v})) * wb
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        m.max_regions = 1
        s = m.sample(3000, conditions={"a": v}, random_state=2)
        m.max_regions = EOGT.max_regions
        assert (s["a"] == v).all()
        obs = np.bincount(np.searchsorted(edges, s["b"], side="left") - 1, minlength=len(mb))
        keep = p > 0
        assert obs[~keep].sum() == 0
        assert stats.chisquare(obs[keep], p[keep] * 3000).pvalue > 1e-3
