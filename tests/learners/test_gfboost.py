"""GF.Boost and EOGT (spec generative_forests.md §8): normalisation, cell law of the samplers,
monotone Bayes risk, closed forms, imputation at maximum density, persistence."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import GenerativeForest
from forestgen.learners import EOGT, GFBoost
from forestgen.learners.rfde import column_layout
from forestgen.sampling.star import StarNodeSampler, TreeGeometry


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
    """∫ q dμ by enumeration: piecewise constant between the thresholds on the continuous
    column, every integer / level on the others (counting measure)."""
    f = m.forest_
    thr = np.sort(f.threshold[(f.feature == 0)])
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
    return float(np.sum(np.exp(m.log_prob(X)) * np.asarray(w)))


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
    m = GFBoost(n_trees=3, n_iter=0).fit(df)
    vol = (m.box_hi_[0] - m.box_lo_[0]) * (m.box_hi_[1] - m.box_lo_[1]) * 3 * 2
    lp = m.log_prob(df)
    assert np.allclose(lp, -math.log(vol))
    out = df.head(1).copy()
    out["a"] = 100.0
    assert m.log_prob(out)[0] == -np.inf


def test_sampler_matches_cell_masses():
    m = GFBoost(n_trees=3, n_iter=12).fit(mixed())
    n = 20000
    Z = m.sample_encoded(n, random_state=1)
    leaf = m.forest_.apply(Z)[:, 0]
    assert np.isfinite(m.log_prob_encoded(Z)).all()
    p = np.exp(m.leaf_log_weight_)
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
    assert stats.chisquare(obs, R * n).pvalue > 1e-3


@pytest.mark.parametrize("loss", ["matusita", "log", "square"])
def test_bayes_risk_decreases_and_matches_recomputation(loss):
    m = GFBoost(n_trees=5, n_iter=40, loss=loss).fit(mixed())
    path = np.asarray(m.risk_path_)
    assert len(path) == 41
    assert np.all(np.diff(path) <= 1e-12)
    assert path[-1] < path[0] - 1e-3
    assert m.cell_risk() == pytest.approx(path[-1], abs=1e-10)
    ll = [GFBoost(n_trees=5, n_iter=j, loss=loss).fit(mixed()).score(mixed())
          for j in (5, 20, 40)]
    assert ll[0] <= ll[1] + 1e-12 <= ll[2] + 2e-12


def test_closed_forms_at_prior_one_half():
    m = GFBoost(n_trees=3, n_iter=15, loss="matusita").fit(mixed())
    R, U = np.exp(m.leaf_log_weight_), m._cell_volume_share()
    assert m.cell_risk() == pytest.approx(np.sum(np.sqrt(R * U)), abs=1e-12)
    m = GFBoost(n_trees=3, n_iter=15, loss="log").fit(mixed())
    R, U = np.exp(m.leaf_log_weight_), m._cell_volume_share()
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
    m = GFBoost(n_trees=4, n_iter=20).fit(df)
    X = df.head(20).copy()
    X.loc[:, "a"] = np.nan
    imp = m.impute(X, method="max_density", random_state=0)
    grid = np.linspace(m.box_lo_[0] + 1e-9, m.box_hi_[0], 4001)
    for i in range(len(X)):
        G = pd.DataFrame({"a": grid, "c": X["c"].iloc[i], "b": X["b"].iloc[i]})
        G["c"] = pd.Categorical(G["c"], categories=m.schema_["c"].categories)
        best = m.log_prob(G).max()
        got = m.log_prob(imp.iloc[[i]])[0]
        assert got == pytest.approx(best, abs=1e-9)
    sampled = m.impute(X, method="sample", random_state=0)
    assert np.isfinite(m.log_prob(sampled)).all()


def test_queries_roundtrip_and_determinism(tmp_path):
    df = mixed()
    m = GFBoost(n_trees=4, n_iter=20).fit(df)
    m2 = GFBoost(n_trees=4, n_iter=20).fit(df)
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
    m = EOGT(n_trees=3, n_iter=10).fit(df)
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


def test_eogt_single_tree_equals_gf():
    df = mixed(n=200)[["a", "n", "c"]]
    g = GFBoost(n_trees=1, n_iter=8).fit(df)
    e = EOGT(n_trees=1, n_iter=8).fit(df)
    assert np.allclose(g.log_prob(df), e.log_prob(df))


def test_eogt_unsupported_queries_raise():
    m = EOGT(n_trees=2, n_iter=4).fit(mixed())
    for call in (lambda: m.predict_proba(mixed().head(2), "c"), lambda: m.impute(mixed()),
                 m.to_torch, lambda: m.sample(2, conditions={"b": True})):
        with pytest.raises(NotImplementedError, match="EOGT"):
            call()


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
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        lp1, s1 = m.log_prob(df), m.sample(50, random_state=3)
        numba.set_num_threads(max(2, before))
        lp2, s2 = m.log_prob(df), m.sample(50, random_state=3)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(lp1, lp2)
    pd.testing.assert_frame_equal(s1, s2)


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
