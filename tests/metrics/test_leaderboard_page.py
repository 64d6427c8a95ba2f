"""The leaderboard page's verdicts, computed from hand-made cells (benchmarks/leaderboard)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "leaderboard"))
from page import write_page  # noqa: E402

META = {"rows": 150, "target": "y", "task": "classification", "source": "test",
        "tests": "-", "nan_rate": 0.0}


def cell(gen: str, table: str, seed: int, c2st: float, **kw) -> dict:
    return {"generator": gen, "table": table, "seed": seed, "status": "ok", "c2st_auc": c2st,
            "tstr": 0.9, "trtr": 0.9, "fit_s": 1.0, "sample_s": 0.1, "cpu_s": 1.0,
            "peak_rss_mb": 100.0, "ks_mean": 0.1, "tv_mean": 0.1, "corr_gap": 0.1,
            "contingency_gap": None, "out_of_range_rows": 0.0, "unseen_level_rate": 0.0,
            "nan_rate_gap": 0.0, "dtype_match": 1.0, "dcr_closer_to_train": 0.5,
            "exact_copy_rate": 0.0, "table_meta": META,
            "commit": "abc1234" if gen.startswith("forestgen:") else "", **kw}


def test_goal_counts_wins_losses_and_failures(tmp_path):
    recs = [cell("forestgen:arf", "a", 0, 0.55), cell("forestgen:arf", "a", 1, 0.57),
            cell("rarf", "a", 0, 0.60),  # fg 0.06 from 0.5 vs 0.10: a win
            cell("forestgen:arf", "b", 0, 0.70), cell("rarf", "b", 0, 0.52),  # a loss
            cell("forestgen:arf", "c", 0, 0.61),
            {"generator": "rarf", "table": "c", "seed": 0, "status": "timeout",
             "error": "over the limit", "table_meta": META}]
    info = {"command": "cmd", "seeds": 2, "max_train": 500, "limit_s": 60.0,
            "setup": {"rarf": "ok"}}
    text = write_page(recs, tmp_path, info).read_text()
    goal = text[text.index("## The issue's goal"):text.index("## How it was run")]
    assert "**C2ST**" in goal and "NOT MET — won 1 of 2" in goal and "b (+0.180)" in goal
    assert "0.560 ± 0.014" in text  # two seeds: mean ± sd
    cov = text[text.index("## Coverage"):text.index("## Tables")]
    assert "| rarf | 2 | 2 | 1 |  | 1 | 0 |" in cov
    assert "| fg:arf | 3 | 4 | 1-2 | abc1234 | 0 | 0 |" in cov
    assert "timeout" in text[text.index("## C2ST AUC"):]


def test_defaults_evidence_pairs_cells_of_the_same_code(tmp_path):
    """A variant is compared with the defaults run by the same forestgen code only."""
    recs = [cell("forestgen:arf", "a", 0, 0.60), cell("forestgen:arf~n_trees=30", "a", 0, 0.55),
            cell("forestgen:arf", "b", 0, 0.60, commit="new"),
            cell("forestgen:arf~n_trees=30", "b", 0, 0.70), cell("rarf", "a", 0, 0.6)]
    info = {"command": "cmd", "seeds": 1, "max_train": 500, "limit_s": 60.0, "setup": {}}
    write_page(recs, tmp_path, info)
    text = (tmp_path / "leaderboard_defaults.md").read_text()
    row = next(x for x in text.splitlines() if x.startswith("| fg:arf~n_trees=30 |"))
    assert row.startswith("| fg:arf~n_trees=30 | 1 | 1 | 1 / 0 | -0.050 |"), row


def test_likelihood_goal_is_read_on_one_base_measure(tmp_path):
    """R arf's grid-cell figure decides the likelihood criterion; the density figure stays."""
    eq = "forestgen:arf~n_trees=30+min_node_size=5"
    recs = [cell("forestgen:arf", "a", 0, 0.55, test_ll=-10.0), cell(eq, "a", 0, 0.55,
                                                                      test_ll=-9.0),
            cell("rarf", "a", 0, 0.6, test_ll=-8.0, test_ll_grid=-9.5, test_ll_grid_cells=30,
                 test_ll_mixture=-7.5, test_ll_grid_numbers=-8.5),
            cell(eq + "+max_ordinal_levels=0", "a", 0, 0.55, test_ll=-8.25),
            cell("forestgen:arf", "b", 0, 0.55, test_ll=-3.0), cell(eq, "b", 0, 0.55,
                                                                    test_ll=-3.0),
            cell("rarf", "b", 0, 0.6, test_ll=-2.5, test_ll_grid=-2.5, test_ll_grid_cells=0)]
    info = {"command": "cmd", "seeds": 1, "max_train": 500, "limit_s": 60.0, "setup": {}}
    text = write_page(recs, tmp_path, info).read_text()
    goal = text[text.index("## The issue's goal"):text.index("## How it was run")]
    assert "**on one base measure**" in goal and "NOT MET — compared on 2 table(s), lower " \
        "on: b (-0.50); mean difference +0.00" in goal
    assert "two base measures, kept for reference): lower on 2 of 2: a (-1.00), b (-0.50)" in goal
    one = text[text.index("### The same likelihoods on one base measure"):]
    row = next(x for x in one.splitlines() if x.startswith("| a |"))
    assert row == "| a | -10.00 | **-9.00** | -9.50 |", row
    assert "Tables with no held-out value scored as a mass: b." in one
    assert "a -7.50 (-8.00)" in one
    num = one[one.index("With integers coded as numbers"):]
    assert "| a | **-8.25** | -8.50 |" in num


def test_a_shard_of_ablations_only_writes_its_page(tmp_path):
    """A shard that ran only one-parameter departures (``~k=v``) still gets a page (the
    tables section read its tables from the default cells only: KeyError 'table')."""
    recs = [cell("forestgen:nrgboost~decode=observed", "a", 0, 0.61),
            cell("forestgen:nrgboost~decode=observed", "b", 0, 0.66)]
    info = {"command": "cmd", "seeds": 1, "max_train": 500, "limit_s": 60.0, "setup": {}}
    text = write_page(recs, tmp_path, info).read_text()
    tables = text[text.index("## Tables"):]
    assert "| a | 150 |" in tables and "| b | 150 |" in tables


def test_merged_shards_list_peers_then_learners_then_ablations():
    """``--merge`` orders the page's columns the same whatever the order of its shards."""
    from run import _generator_rank

    gens = ["forestgen:nrgboost", "forestgen:arf~alpha=0.1", "sdv:tvae", "forestgen:arf",
            "rarf", "forestgen:arf@fastest", "nrgboost"]
    ranked = sorted(gens, key=lambda g: _generator_rank({"generator": g}))
    assert ranked == ["rarf", "nrgboost", "sdv:tvae", "forestgen:arf", "forestgen:arf@fastest",
                      "forestgen:nrgboost", "forestgen:arf~alpha=0.1"]
