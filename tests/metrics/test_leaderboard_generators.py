"""``--generators`` of the leaderboard runner: named departures are built, unknown names fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "leaderboard"))
from run import PEER_GENERATORS, QUICK, forestgen_generators, select_generators  # noqa: E402


def test_listed_and_new_departures_are_selected_with_the_quick_size():
    gens = forestgen_generators(diagnostics=True) + PEER_GENERATORS
    got = select_generators(gens, ["rarf", "forestgen:nrgboost~sample_thin=3+decode=observed",
                                   "forestgen:arf~n_trees=30"])
    by = {g[0]: g for g in got}
    assert set(by) == {"rarf", "forestgen:nrgboost~sample_thin=3+decode=observed",
                       "forestgen:arf~n_trees=30"}
    _, kind, params, departs = by["forestgen:nrgboost~sample_thin=3+decode=observed"]
    assert kind == "forestgen"
    assert departs == {"sample_thin": 3, "decode": "observed"}
    assert params == {**QUICK["nrgboost"], **departs}
    assert by["forestgen:arf~n_trees=30"][3] == {"n_trees": 30}


@pytest.mark.parametrize("name", ["rarff", "forestgen:nosuch~a=1", "forestgen:arf~n_trees"])
def test_unknown_generators_are_an_error_not_dropped(name):
    gens = forestgen_generators() + PEER_GENERATORS
    with pytest.raises(ValueError, match="generator"):
        select_generators(gens, [name])
