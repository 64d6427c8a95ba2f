"""Per-tree row weights (``forestgen.ensemble.bagging.draw_weights``): bootstrap counts of
``round(fraction * n)`` draws, subsamples without replacement, stratified alike per class."""

from __future__ import annotations

import numpy as np
import pytest

from forestgen.ensemble.bagging import draw_weights


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
@pytest.mark.parametrize("fraction", [0.3, 1.0, 2.5])
def test_bootstrap_weights_are_the_counts_of_the_draws(n, fraction):
    rng = np.random.default_rng(n)
    w = draw_weights(n, rng, fraction=fraction)
    m = max(1, int(round(fraction * n)))
    ref = np.random.default_rng(n)
    draws = ref.integers(0, n, m)  # the same generator's draws
    assert w.dtype == np.float64 and w.shape == (n,)
    np.testing.assert_array_equal(w, np.bincount(draws, minlength=n))
    assert rng.random() == ref.random()  # and the stream continues where integers leaves it
    assert w.sum() == m
    # one stratum holding every row draws the same weights
    np.testing.assert_array_equal(
        draw_weights(n, np.random.default_rng(n), fraction=fraction, strata=np.zeros(n)), w)


def test_stratified_and_subsampled_weights_keep_their_rules():
    strata = np.arange(900) % 3
    w = draw_weights(900, np.random.default_rng(1), fraction=0.5, strata=strata)
    assert [w[strata == s].sum() for s in range(3)] == [150, 150, 150]
    s = draw_weights(900, np.random.default_rng(1), mode="subsample", fraction=0.5)
    assert set(np.unique(s)) == {0.0, 1.0} and s.sum() == 450
    assert draw_weights(0, np.random.default_rng(1)).shape == (0,)
    np.testing.assert_array_equal(draw_weights(5, np.random.default_rng(1), mode="none"),
                                  np.ones(5))


def test_bootstrap_counts_are_bincounts_past_a_byte():
    """The byte-counted bootstrap gives ``bincount`` of the same draws, also where a row is
    drawn 256 times or more (a count that wraps)."""
    from forestgen.ensemble.bagging import _bootstrap_counts

    for n, m in [(1, 1000), (3, 5000), (1000, 1000), (16000, 16000), (7, 3)]:
        got = _bootstrap_counts(np.random.default_rng(5), n, m)
        want = np.bincount(np.random.default_rng(5).integers(0, n, m), minlength=n)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want)
    assert _bootstrap_counts(np.random.default_rng(5), 1, 1000)[0] == 1000.0
