"""NRGBoost's base measure ``q0`` = the column marginals' law (``base_measure="marginals"``):
round 0 scores as ``forestgen.auto.marginals_model()``, and every query follows the same
within-bin law (densities, draws, bin means, model files)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import NRGBoost
from forestgen.auto import marginals_model
from forestgen.families.energy.grid import Grid


def _table(n: int = 240, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "x": rng.gamma(2.0, 1.5, n),  # continuous, skewed
        "y": rng.normal(0, 1, n) + np.where(rng.random(n) < 0.3, 4.0, 0.0),  # two modes
        # on a 0.1 grid with repeated values (grid spikes), none of them an atom (10% of rows)
        "wind": np.round(rng.gamma(4.0, 1.0, n), 1),
        "c": rng.choice(["a", "b", "c", "d"], n, p=[0.5, 0.3, 0.15, 0.05]),
    })


@pytest.fixture(scope="module")
def fitted():
    df = _table()
    train, test = df.iloc[:180], df.iloc[180:]
    m = NRGBoost(n_trees=3, max_leaves=8, pool_size=2000, random_state=0).fit(train)
    return train, test, m


def test_round_zero_scores_as_the_column_marginals(fitted):
    """Round 0 is the marginals model's law itself: on held-out rows inside the training range
    the two log-likelihoods agree per row (columns without atoms or missing values, which the
    two score on different measures)."""
    train, test, m = fitted
    q0 = m.truncated(0)
    inside = np.ones(len(test), bool)
    for c in ("x", "y", "wind"):
        inside &= test[c].between(train[c].min(), train[c].max()).to_numpy()
    rows = test[inside]
    ours = q0.log_prob(rows)
    marg = marginals_model().fit(train).log_prob(rows)
    np.testing.assert_allclose(ours, marg, rtol=0, atol=1e-9)
    # the former base measure (the paper's 10% uniform blend over bins) is below on these rows
    old = NRGBoost(n_trees=1, max_leaves=8, pool_size=2000, base_measure="blend",
                   random_state=0).fit(train).truncated(0)
    assert old.log_prob(rows).mean() < ours.mean() - 0.1


def test_density_integrates_to_one_over_the_within_bin_law():
    """One numeric column: the density summed over the law's pieces (it is constant on each)
    is 1 at round 0 exactly and within the ``log Z`` estimate's noise after rounds."""
    df = _table()[["wind"]]
    m = NRGBoost(n_trees=4, max_leaves=4, pool_size=2000, random_state=0).fit(df)
    g = m.grid_
    fe = g.fine_edges[0]
    mid = 0.5 * (fe[:-1] + fe[1:])
    for model, tol in ((m.truncated(0), 1e-9), (m, 0.05)):
        lp = model.log_prob(pd.DataFrame({"wind": mid}))
        assert float(np.exp(lp) @ np.diff(fe)) == pytest.approx(1.0, abs=tol)


def test_draws_inside_a_bin_follow_the_law():
    """Draws of one bin follow the within-bin law's CDF (Kolmogorov-Smirnov), and their mean
    is the bin mean ``predict`` uses."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x": rng.gamma(1.5, 2.0, 400)})
    m = NRGBoost(n_trees=1, max_leaves=4, pool_size=2000, max_bins=4, random_state=0).fit(df)
    g = m.grid_
    c = int(g.n_values[0]) - 1  # the tail bin: a density far from flat
    C = np.full((40_000, 1), c, np.int32)
    z = g.decode(C, np.random.default_rng(2))[:, 0]
    e = g.edges[0]
    assert (z >= e[c]).all() and (z <= e[c + 1]).all()
    fe, fm = g.fine_edges[0], g.fine_mass[0]
    s = g.fine_start[0]
    cdf = np.r_[0.0, np.cumsum(fm[s[c]:s[c + 1]])]
    cdf /= cdf[-1]
    q = np.linspace(e[c], e[c + 1], 200)
    law = np.interp(q, fe[s[c]:s[c + 1] + 1], cdf)
    emp = np.searchsorted(np.sort(z), q, side="right") / len(z)
    assert np.abs(emp - law).max() < 0.015
    uniform = (q - e[c]) / (e[c + 1] - e[c])
    assert np.abs(uniform - law).max() > 0.05  # the law is not the uniform one here
    assert z.mean() == pytest.approx(g.bin_means(0)[c], rel=0.01)


def test_model_file_keeps_the_law_and_rejects_a_bad_one(fitted, tmp_path):
    train, test, m = fitted
    path = m.save(tmp_path / "m.fgm")
    back = NRGBoost.load(path)
    np.testing.assert_array_equal(back.log_prob(test), m.log_prob(test))
    pd.testing.assert_frame_equal(back.sample(50, random_state=4), m.sample(50, random_state=4))
    arrays = m.grid_.to_arrays()
    arrays["fine_mass0"] = -arrays["fine_mass0"]
    bad = Grid.from_arrays(arrays)
    with pytest.raises(ValueError, match="'x'.*within-bin law"):
        bad.check(m.schema_)


def test_bad_base_measure_is_refused():
    with pytest.raises(ValueError, match="base_measure"):
        NRGBoost(base_measure="uniform").fit(_table(40))


def test_a_file_written_before_the_base_measure_loads_as_blend(tmp_path):
    """A model file without ``base_measure`` and without a within-bin law (written before
    them) loads as ``base_measure="blend"``, uniform within bins, scoring as it was saved."""
    import forestgen.modelfile as mf

    df = _table(120)
    m = NRGBoost(n_trees=2, max_leaves=4, pool_size=1000, base_measure="blend",
                 random_state=0).fit(df)
    arrays, meta = mf.read_model_file(m.save(tmp_path / "new.fgm"), mmap=False)
    assert not any(k.startswith("grid.fine_") for k in arrays)
    del meta["params"]["base_measure"]
    back = NRGBoost.load(mf.write_model_file(tmp_path / "old.fgm", arrays, meta))
    assert back.base_measure == "blend" and back.grid_.fine_edges is None
    np.testing.assert_array_equal(back.log_prob(df), m.log_prob(df))
