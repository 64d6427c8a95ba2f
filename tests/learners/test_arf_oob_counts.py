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


def test_tally_while_growing_equals_votes_of_the_grown_forest():
    """The votes counted in the trees' tasks (two threads, per-task buffers) are the counts
    of the half-vote kernel over the finished forest's leaves, ties included; they reach
    oob_accuracy_from_leaves (a tally given there is used instead of recounting)."""
    from forestgen.data.binning import Binner
    from forestgen.ensemble.bagging import draw_weights
    from forestgen.families.mixture import arf as A
    from forestgen.families.mixture.arf import ARF, HardVoteTally, _hard_votes_kernel, leaf_p_real
    from forestgen.splitters.base import TreeData
    from forestgen.tree.forest import grow_forest_routed, tree_generators

    rng = np.random.default_rng(1)
    n, B = 3000, 12
    Z = np.c_[rng.normal(size=n), rng.integers(0, 3, n)].astype(float)
    y = rng.integers(0, 2, n)
    binner = Binner.fit(Z, np.array([False, True]), np.array([0, 3]))
    data = TreeData(binner.transform(Z), binner.n_bins, binner.nominal, binner.thresholds,
                    route_rows=True)
    m = ARF(min_node_size=3, random_state=0)
    splitter, limits = m.discriminator_setup()
    oob = np.empty((B, n), bool)
    rngs = tree_generators(np.random.SeedSequence(5), B)

    def weights(b):
        w = draw_weights(n, rngs[b])
        oob[b] = w == 0
        return w

    tally = HardVoteTally(n, oob)
    forest, leaves = grow_forest_routed(splitter, data, y, weights, rngs, limits, n_jobs=2,
                                        on_routed=tally)
    votes = tally.totals(B)
    p = leaf_p_real(forest, leaves, y, None)
    half = np.where(p > 0.5, 2, np.where(p < 0.5, 0, 1)).astype(np.uint8)
    want = _hard_votes_kernel(leaves, oob, half)
    assert (votes[0] == want[0]).all() and (votes[1] == want[1]).all()
    assert (half == 1).any() and (half == 2).any() and (half == 0).any()  # ties, both sides
    assert votes[1].sum() == oob.sum() and tally.totals(B + 1) is None
    acc = A.oob_accuracy_from_leaves(forest, leaves, oob, y, "hard",
                                     np.random.default_rng(3), None, votes=votes)
    assert acc == A.oob_accuracy_from_leaves(forest, leaves, oob, y, "hard",
                                             np.random.default_rng(3), None)
    # a different tally changes the accuracy: the one given is the one used
    assert acc != A.oob_accuracy_from_leaves(forest, leaves, oob, y, "hard",
                                             np.random.default_rng(3), None,
                                             votes=(votes[1] * 2 - votes[0], votes[1]))
