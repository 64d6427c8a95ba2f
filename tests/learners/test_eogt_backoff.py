"""EOGT's back-off toward the column marginals (issue 37 item 4): regions spread by the product
of the marginals restricted to them (``cell_shape="marginal"``) and the smoothing component the
product of the marginals (``smooth_toward="marginals"``). The density integrates to one, the
draws follow it, the conditionals normalise and their draws (listed regions or the forced-walk
rejection sampler) follow them, save/load keeps the law, and the paper's model with the old
options is bit-for-bit the one before the change."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen.learners import EOGT

SHAPES = [("marginal", "marginals"), ("uniform", "marginals"), ("marginal", "uniform")]


def table(n=240, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    return pd.DataFrame({
        "a": a,
        # a grid (one decimal) of repeated values, noisy: an exact 2 * a is an affine rule
        "r": np.round(2 * a + np.random.default_rng(seed + 7).normal(0, 0.5, n), 1),
        "c": np.where(a > 0, rng.choice(["x", "y"], n), rng.choice(["y", "z"], n)),
        "z": np.where(rng.random(n) < 0.4, 0.0, rng.exponential(size=n) + (a > 0)),
    })


def fit(df, cell_shape="marginal", smooth_toward="marginals", smoothing=0.3):
    return EOGT(n_trees=4, n_iter=16, smoothing=smoothing, cell_shape=cell_shape,
                smooth_toward=smooth_toward, random_state=0).fit(df)


def grid(m, j):
    """Faces between which the density of numeric column ``j`` is constant: the trees'
    thresholds, the marginal's histogram edges, the box."""
    f = m.trees_
    e = np.r_[f.threshold[f.feature == j], m.shape_.marg[j].edges, m.box_lo_[j], m.box_hi_[j]]
    e = np.unique(e[(e >= m.box_lo_[j]) & (e <= m.box_hi_[j])])
    return e, 0.5 * (e[1:] + e[:-1]), np.diff(e)


def col_mass(m, rows: pd.DataFrame, j: int, widths) -> float:
    """Mass of rows at the midpoints of numeric column ``j``'s cells (plus its atoms)."""
    return float(np.sum(np.exp(m.log_prob(rows, floor=None)) * widths))


@pytest.mark.parametrize("cells,toward", SHAPES)
def test_density_integrates_to_one(cells, toward):
    df = table()
    m = fit(df[["a", "c"]], cells, toward)
    assert (m.cell_shape_, m.smooth_toward_) == (cells, toward)
    _, mids, widths = grid(m, 0)
    cats = list(m.schema_["c"].categories)
    rows = pd.DataFrame([(x, c) for x in mids for c in cats], columns=["a", "c"])
    assert col_mass(m, rows, 0, np.repeat(widths, len(cats))) == pytest.approx(1.0, abs=1e-9)
    # a column with a grid and its repeated values' spikes
    m = fit(df[["r", "c"]], cells, toward)
    _, mids, widths = grid(m, 0)
    rows = pd.DataFrame([(x, c) for x in mids for c in cats], columns=["r", "c"])
    assert col_mass(m, rows, 0, np.repeat(widths, len(cats))) == pytest.approx(1.0, abs=1e-9)
    # with point masses: zeros of "z" (counting measure) plus its continuous part
    m = fit(df[["z", "c"]], cells, toward)
    assert list(m.region_atoms_.columns) == [0]
    _, mids, widths = grid(m, 0)
    mids = mids[~np.isin(mids, m.region_atoms_.atoms[0])]
    cont = pd.DataFrame([(x, c) for x in mids for c in cats], columns=["z", "c"])
    at = pd.DataFrame([(0.0, c) for c in cats], columns=["z", "c"])
    total = col_mass(m, cont, 0, np.repeat(widths, len(cats))) + float(
        np.exp(m.log_prob(at, floor=None)).sum())
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("cells,toward", SHAPES)
def test_missing_entries_are_marginalised(cells, toward):
    df = table()
    m = fit(df[["a", "c"]], cells, toward)
    cats = list(m.schema_["c"].categories)
    _, mids, widths = grid(m, 0)
    for x in (-1.3, 0.2, 0.9):
        joint = np.exp(m.log_prob(pd.DataFrame({"a": [x] * len(cats), "c": cats}), floor=None))
        alone = np.exp(m.log_prob(pd.DataFrame({"a": [x], "c": [None]}), floor=None))
        assert alone[0] == pytest.approx(joint.sum(), rel=1e-9)
    p_c = np.exp(m.log_prob(pd.DataFrame({"a": [np.nan] * len(cats), "c": cats}), floor=None))
    rows = pd.DataFrame({"a": mids, "c": cats[0]})
    assert p_c[0] == pytest.approx(col_mass(m, rows, 0, widths), rel=1e-9)


def _cdf(m, rows_fn, j):
    """CDF of numeric column ``j`` at its grid faces from the density at the midpoints."""
    e, mids, widths = grid(m, j)
    mass = np.exp(m.log_prob(rows_fn(mids), floor=None)) * widths
    cum = np.r_[0.0, np.cumsum(mass)]
    return lambda v: np.interp(v, e, cum / cum[-1]), cum[-1]


@pytest.mark.parametrize("cells,toward", SHAPES)
def test_draws_follow_the_density(cells, toward):
    df = table()
    m = fit(df[["a", "c"]], cells, toward)
    S = m.sample(6000, random_state=1)
    cdf, _ = _cdf(m, lambda v: pd.DataFrame({"a": v, "c": None}), 0)
    assert stats.kstest(S["a"].to_numpy(), cdf).pvalue > 1e-3
    cats = list(m.schema_["c"].categories)
    p = np.exp(m.log_prob(pd.DataFrame({"a": np.nan, "c": cats}), floor=None))
    obs = S["c"].astype(str).value_counts().reindex(cats).fillna(0).to_numpy()
    assert stats.chisquare(obs, p / p.sum() * len(S)).pvalue > 1e-3
    # a column with a grid: the draws land on it, each value with its cell's mass
    m = fit(df[["r"]], cells, toward)
    S = m.sample(6000, random_state=3)["r"].to_numpy()
    cdf, tot = _cdf(m, lambda v: pd.DataFrame({"r": v}), 0)
    vals = np.round(np.arange(m.box_lo_[0], m.box_hi_[0] + 0.1, 0.1), 1)
    p = cdf(vals + 0.05) - cdf(vals - 0.05)
    keep = p > 0
    obs = np.array([np.sum(np.isclose(S, v)) for v in vals[keep]])
    assert obs.sum() == len(S) and p.sum() == pytest.approx(1.0, abs=1e-9)
    assert stats.chisquare(obs, p[keep] / p[keep].sum() * len(S)).pvalue > 1e-3
    # the point mass of "z" at zero
    m = fit(df[["z"]], cells, toward)
    S = m.sample(6000, random_state=2)["z"].to_numpy()
    p0 = float(np.exp(m.log_prob(pd.DataFrame({"z": [0.0]}), floor=None))[0])
    assert stats.binomtest(int((S == 0).sum()), len(S), p0).pvalue > 1e-3
    cdf, tot = _cdf(m, lambda v: pd.DataFrame({"z": v}), 0)
    assert tot == pytest.approx(1.0 - p0, abs=1e-9)
    assert stats.kstest(S[S != 0], cdf).pvalue > 1e-3


@pytest.mark.parametrize("cells,toward", SHAPES)
def test_conditionals_normalise_and_their_draws_follow_them(cells, toward):
    df = table()
    m = fit(df[["a", "c"]], cells, toward)
    # a | c = "x": a density in a, through the listed regions and through rejection
    cdf, tot = _cdf(m, lambda v: pd.DataFrame({"a": v, "c": None}), 0)
    e, mids, widths = grid(m, 0)
    cond = np.exp(m.log_prob(pd.DataFrame({"a": mids}), conditions={"c": "x"}))
    assert float(np.sum(cond * widths)) == pytest.approx(1.0, abs=1e-9)
    cum = np.r_[0.0, np.cumsum(cond * widths)]
    S = m.sample(4000, conditions={"c": "x"}, random_state=3)
    assert (S["c"] == "x").all()
    assert stats.kstest(S["a"].to_numpy(), lambda v: np.interp(v, e, cum)).pvalue > 1e-3
    # c | a in a range
    cats = list(m.schema_["c"].categories)
    p = np.exp(m.log_prob(pd.DataFrame({"c": cats}), conditions={"a": (-0.5, 0.7)}))
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    S = m.sample(4000, conditions={"a": (-0.5, 0.7)}, random_state=4)
    assert S["a"].between(-0.5, 0.7).all()
    obs = S["c"].astype(str).value_counts().reindex(cats).fillna(0).to_numpy()
    assert stats.chisquare(obs, p * len(S)).pvalue > 1e-3
    # c | a = v: the listed regions and the forced-walk rejection sampler
    for v in (-0.8, 0.3):
        p = np.exp(m.log_prob(pd.DataFrame({"c": cats}), conditions={"a": v}))
        assert p.sum() == pytest.approx(1.0, abs=1e-9)
        for budget in (m.max_regions, 1):
            m.max_regions = budget
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                S = m.sample(3000, conditions={"a": v}, random_state=5)
            m.max_regions = EOGT.max_regions
            assert np.allclose(S["a"], v)
            obs = S["c"].astype(str).value_counts().reindex(cats).fillna(0).to_numpy()
            assert stats.chisquare(obs, p * len(S)).pvalue > 1e-3


def test_rejection_draws_of_free_numeric_columns_follow_the_conditional():
    df = table()
    m = fit(df[["a", "c", "z"]])
    e, mids, widths = grid(m, 0)
    rows = pd.DataFrame({"a": mids})
    cond = np.exp(m.log_prob(rows, conditions={"c": "y", "z": 0.0}))
    assert float(np.sum(cond * widths)) == pytest.approx(1.0, abs=1e-9)
    cum = np.r_[0.0, np.cumsum(cond * widths)]
    m.max_regions = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        S = m.sample(3000, conditions={"c": "y", "z": 0.0}, random_state=6)
    assert stats.kstest(S["a"].to_numpy(), lambda v: np.interp(v, e, cum)).pvalue > 1e-3


def test_predictions_use_the_shape():
    df = table()
    m = fit(df)
    rows = df.iloc[:5]
    P = m.predict_proba(rows, target="c")
    cats = list(m.schema_["c"].categories)
    for i in range(len(rows)):
        q = pd.DataFrame([rows.iloc[i]] * len(cats)).assign(c=cats)
        p = np.exp(m.log_prob(q, floor=None))
        assert np.allclose(P.iloc[i].to_numpy(float), p / p.sum(), rtol=1e-9)
    # the conditional mean of "a" given c against the density
    e, mids, widths = grid(m, 0)
    dens = np.exp(m.log_prob(pd.DataFrame({"a": mids}), conditions={"c": "x"}))
    one = pd.DataFrame({"a": [np.nan], "c": ["x"], "z": [np.nan]})
    mean = float(m.predict(one, target="a").iloc[0])
    # within a cell the density is constant: the midpoint rule is the exact first moment
    assert mean == pytest.approx(float(np.sum(dens * widths * mids)), abs=1e-9)
    filled = m.impute(one, method="sample", random_state=0)
    assert filled.notna().all().all() and filled["c"].iloc[0] == "x"


def test_save_load_keeps_the_law(tmp_path):
    df = table()
    df.loc[df.index[:10], "a"] = np.nan
    m = fit(df)
    m.save(tmp_path / "m.fg")
    r = EOGT.load(tmp_path / "m.fg")
    assert (r.cell_shape_, r.smooth_toward_) == ("marginal", "marginals")
    rows = pd.concat([df.iloc[:30], m.sample(30, random_state=1)])
    assert np.array_equal(m.log_prob(rows), r.log_prob(rows))
    assert np.array_equal(m.sample_encoded(50, random_state=2),
                          r.sample_encoded(50, random_state=2))
    a = m.sample(20, conditions={"c": "y"}, random_state=3)
    b = r.sample(20, conditions={"c": "y"}, random_state=3)
    pd.testing.assert_frame_equal(a, b)


def test_to_torch_density_is_the_law():
    torch = pytest.importorskip("torch")
    m = fit(table())
    Z = m.sample_encoded(40, random_state=0)
    d = m.to_torch(dtype=torch.float64)
    assert np.allclose(d.log_prob(torch.as_tensor(Z)).numpy(), m.log_prob_encoded(Z),
                       rtol=1e-12)


def test_defaults_are_the_back_off_and_the_paper_model_is_unchanged():
    m = EOGT()
    assert (m.cell_shape, m.smooth_toward, m.smoothing) == ("marginal", "marginals", "held_out")
    # the paper's model (uniform regions, uniform smoothing) is bit-for-bit the model before
    # the back-off: hashes of its answers computed with the code of 7b7962c
    rng = np.random.default_rng(7)
    n = 240
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.choice(list("xyz"), n),
                       "c": rng.integers(0, 5, n)})
    df["a2"] = np.round(df.a * 2 + rng.normal(size=n), 2)
    df["z"] = np.where(rng.random(n) < 0.4, 0.0, rng.exponential(size=n))
    m = EOGT(n_trees=5, n_iter=20, smoothing=1e-3, cell_shape="uniform",
             smooth_toward="uniform", random_state=0).fit(df)
    assert m.shape_ is None
    q = df.iloc[:20].copy()
    q.loc[q.index[:6], "a"] = np.nan
    q.loc[q.index[3:9], "b"] = None

    def h(a):
        a = np.round(np.asarray(a, float), 8)
        return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = {
            "log_prob": h(m.log_prob(q)),
            "sample": h(m.sample_encoded(200, random_state=1)),
            "cond_sample": h(m.encode_rows(m.sample(50, conditions={"a": 0.3, "b": ["x", "y"]},
                                                    random_state=2))),
            "cond_log_prob": h(m.log_prob(df.iloc[:10], conditions={"c": 2})),
            "impute": h(m.encode_rows(m.impute(q, method="max_density", random_state=3))),
            "impute_exp": h(m.encode_rows(m.impute(q, method="expectation"))),
            "proba": h(m.predict_proba(df.iloc[:10], target="b").to_numpy()),
        }
        m.max_regions = 1
        got["rejection"] = h(m.encode_rows(m.sample(30, conditions={"a": 0.3},
                                                     random_state=4)))
    assert got == {"log_prob": "54f4ff1d0a5fdcdf", "sample": "71980ec76c331b6b",
                   "cond_sample": "1d2d269ff7b2d4d8", "cond_log_prob": "340a8ec38eb9b955",
                   "impute": "6b350ca24ef88975", "impute_exp": "3485932e9a1e2041",
                   "proba": "000c2ea51130de8c", "rejection": "f812f8280afe542f"}
