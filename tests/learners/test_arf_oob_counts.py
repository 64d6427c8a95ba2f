"""ARF's out-of-bag accuracy counts hard votes in one compiled pass: the same counts as
``oob_correct`` (ties broken by the same uniforms, rows never out of bag left out)."""

import numpy as np

from forestgen.families.mixture.arf import _hard_correct, oob_correct


def test_hard_counts_equal_oob_correct():
    rng = np.random.default_rng(0)
    n = 5000
    count = rng.integers(0, 7, n)  # out-of-bag trees per row, some rows none
    half = np.array([rng.integers(0, 2 * c + 1) for c in count])  # half votes: 0 .. 2 c
    y = rng.integers(0, 2, n)
    seed = 11
    u = np.random.default_rng(seed).random(n)
    got = _hard_correct(half, count, y, u)
    want = oob_correct(half * 0.5, count, y, "hard", np.random.default_rng(seed))
    assert got == want
    assert (half == count).sum() > 100 and (count == 0).sum() > 100  # ties and unused rows
    # a different tie-breaking draw changes the count: the uniforms are read
    assert _hard_correct(half, count, y, 1.0 - u) != got
