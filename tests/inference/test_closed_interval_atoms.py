"""A closed interval condition ``(low, high)`` keeps a point mass sitting at ``low`` (newcomer
check on a zero-inflated column: conditioning on ``(0, 5)`` drew zeros for 4% (ARF), 8% (DEF),
0.1% (GFBoost) of rows where the model's own draws with ``z <= 5`` hold 45-48%: evidence
intervals are ``(lo, hi]`` inside, and the closed end was stored as ``lo = low``; NRGBoost also
drew every interval-conditioned value uniformly over its bin, past the bin's point mass)."""

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.inference.conditions import parse_conditions


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 600
    z = np.where(rng.random(n) < 0.4, 0.0, np.round(rng.exponential(5, n), 3))
    return pd.DataFrame({"z": z, "y": rng.normal(size=n) + 0.1 * z})


@pytest.mark.parametrize("learner", ["ARF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost"])
def test_atom_at_the_closed_low_end_is_kept(table, learner):
    m = (fg.NRGBoost(n_trees=5, random_state=0) if learner == "NRGBoost"
         else getattr(fg, learner)(random_state=0)).fit(table)
    free = m.sample(4000, random_state=0)
    want = float((free.z[free.z <= 5] == 0).mean())  # the model's own P(z = 0 | z <= 5)
    assert want > 0.3
    for low in (0, -1):
        s = m.sample(4000, conditions={"z": (low, 5)}, random_state=1)
        assert s.z.between(0, 5).all()
        assert abs((s.z == 0).mean() - want) < 0.06, (low, (s.z == 0).mean(), want)


def test_closed_interval_is_stored_as_its_latent_rounding_cells(table):
    """``z`` has 3 decimals: ``(0, 5)`` holds the values 0.000..5.000, the latent interval
    whose rounding lands there; its low end is the range's minimum, so it is open below
    (forestgen.data.support.latent_interval). Off a grid the low end is one double below."""
    m = fg.ARF(n_trees=2, random_state=0).fit(table)
    for cond in ({"z": (0.0, 5.0)}, {"z": (0, 5)}):
        ev, _ = parse_conditions(m, cond)
        assert np.isneginf(ev.lo[0, 0]) and ev.hi[0, 0] == 5.0005
    ev, _ = parse_conditions(m, {"z": (1.0, 5.0)})
    assert ev.lo[0, 0] == 0.9995 and ev.hi[0, 0] == 5.0005
    assert np.isinf(parse_conditions(m, {"z": (None, 5)})[0].lo[0, 0])
    ev, _ = parse_conditions(m, {"y": (0.0, 1.0)})
    assert ev.lo[0, 1] == np.nextafter(0.0, -np.inf) and ev.hi[0, 1] == 1.0
