"""Defaults that follow the table (issue 37): NRGBoost's rounds and pool, GF.Boost's and
EOGT's trees and splits chosen on held-out rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.families.energy.nrgboost import ROUND_BUDGET, sized_defaults, sized_leaves
from forestgen.families.intersection.gfboost import SIZES


def test_nrgboost_sizes_follow_rows_and_columns():
    # the most rounds n_trees="auto" tries: 200, fewer where pool x columns x leaf words
    # (64 leaves a word) exceed the budget
    assert sized_defaults(150, 5, "auto", "auto") == (200, 10_000)
    assert sized_defaults(380, 14, "auto", "auto") == (200, 10_000)  # 64 leaves: one word
    t, pool = sized_defaults(4000, 20, "auto", "auto")  # 256 leaves: four words
    assert pool == 10_000 and t == 100 and t * pool * 20 * 4 <= ROUND_BUDGET
    assert sized_defaults(4000, 20, "auto", "auto", max_leaves=64)[0] == 200
    assert sized_defaults(20_000, 20, "auto", "auto") == (25, 40_000)
    assert sized_defaults(100_000, 9, "auto", "auto")[1] == 80_000
    assert sized_defaults(500, 10, 7, 1234) == (7, 1234)  # given values are kept


def table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x.round(2), "y": (x + rng.normal(0, 0.5, n)).round(2),
                         "c": np.where(x > 0, "a", "b")})


def test_nrgboost_leaves_follow_rows():
    # about 8 training rows per leaf, a power of two in [8, 256]
    assert [sized_leaves(n, "auto") for n in (20, 110, 183, 241, 500, 1500, 2048, 10**6)] == [
        8, 16, 32, 32, 64, 256, 256, 256]
    assert sized_leaves(183, 100) == 100  # a given value is kept


def leaves_per_tree(m) -> np.ndarray:
    trees = m.energy_.trees
    is_leaf = np.r_[0, np.cumsum(trees.feature < 0)]
    return np.diff(is_leaf[trees.node_offsets])


def test_nrgboost_auto_fits_the_sized_model():
    m = fg.NRGBoost(random_state=0).fit(table())
    assert m.pool_size_ == 10_000 and m.n_trees_ == int(np.argmax(m.rounds_scores_)) > 0
    assert m.max_leaves_ == 32  # 300 rows / 8, to the nearest power of two
    assert leaves_per_tree(m).max() <= 32
    wide = fg.NRGBoost(n_trees=3, max_leaves=256, random_state=0).fit(table())
    assert leaves_per_tree(wide).max() > 32  # the cap, not the data, stopped the auto trees
    assert m.get_params()["n_trees"] == "auto" and m.get_params()["max_leaves"] == "auto"
    with pytest.raises(ValueError, match="max_leaves"):
        fg.NRGBoost(max_leaves=1).fit(table())


@pytest.mark.parametrize("cls", [fg.GFBoost, fg.EOGT])
def test_gf_sizes_chosen_on_held_out_rows(cls):
    df = table()
    m = cls(random_state=0).fit(df)
    scores = m.sizes_["held_out_ll"]
    chosen = str((m.sizes_["n_trees"], m.sizes_["n_iter"]))
    assert chosen in scores and scores[chosen] == max(scores.values())
    assert set(scores) <= {str(s) for s in SIZES}
    assert "(50, 200)" not in scores  # at most one split per two rows: 150 rows allow 150
    fixed = cls(n_trees=4, n_iter=8, random_state=0).fit(df)
    assert {k: fixed.sizes_[k] for k in ("n_trees", "n_iter")} == {"n_trees": 4, "n_iter": 8}
    assert fixed.n_splits_ <= 8
    with pytest.raises(ValueError, match="n_iter"):
        cls(n_iter=-1).fit(df)
