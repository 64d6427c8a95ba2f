"""The evidence-pruned tree walk (issue 15): pruning by intervals and level sets drops only
leaves of zero evidence mass, so posteriors equal the unpruned enumeration; its output and
the conditional draws built on it do not depend on the thread count."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd
import pytest

from forestgen.ensemble.mixture import segment_logsumexp
from forestgen.families.mixture.arf import ARF
from forestgen.inference import Not
from forestgen.inference.conditions import evidence_from_frame
from forestgen.inference.posterior import evidence_log_factor, iter_posterior


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    n = 600
    x = rng.normal(size=n)
    df = pd.DataFrame({
        "x": x,
        "z": np.where(rng.random(n) < 0.4, 0.0, rng.gamma(2.0, 1.0, n)),  # point mass at 0
        "k": rng.integers(0, 6, n) + (x > 0),
        "c": pd.Categorical(np.where(x + rng.normal(size=n) > 0, "a",
                                     rng.choice(list("bcd"), n))),
    })
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    return ARF(n_trees=6, random_state=0, n_jobs=1).fit(df)


@pytest.fixture(scope="module")
def evidence(model):
    """Per-row evidence mixing points, NaN, intervals, level sets and negations."""
    rng = np.random.default_rng(1)
    m = 60
    xs = rng.normal(size=m)
    rows = []
    for i in range(m):
        r = {}
        kind = i % 6
        if kind == 0:
            r = {"x": (xs[i] - 0.5, xs[i] + 0.5), "c": {"a", "b"}}
        elif kind == 1:
            r = {"z": (-1.0, 0.0), "k": {1, 2}}  # the atom only
        elif kind == 2:
            r = {"x": xs[i], "z": (0.5, None), "c": Not("a")}
        elif kind == 3:
            r = {"k": (2, 4), "x": (None, xs[i])}
        elif kind == 4:
            r = {"c": "d", "z": 0.0}
        r_full = {c: r.get(c, np.nan) for c in ("x", "z", "k", "c")}
        rows.append(r_full)
    df = pd.DataFrame(rows, dtype=object)
    return evidence_from_frame(model, df)


def _reference(model, ev):
    """Unpruned enumeration (point evidence only routes) scored with the evidence factors."""
    ptr, leaf = model.forest_.reach(ev.point)
    leaf = leaf.astype(np.int64)
    prow = np.repeat(np.arange(ev.m), np.diff(ptr))
    logw = model.leaf_log_weight_[leaf] + evidence_log_factor(model, ev, prow, leaf,
                                                              np.arange(ev.m))
    return ptr, leaf, logw


def test_pruned_walk_keeps_every_leaf_of_positive_mass(model, evidence):
    ptr0, leaf0, logw0 = _reference(model, evidence)
    ptr, leaf = model.forest_.reach(evidence.point, evidence.lo, evidence.hi, evidence.sets)
    assert len(leaf) < len(leaf0)  # intervals and level sets do prune
    for i in range(evidence.m):
        kept = set(leaf[ptr[i]:ptr[i + 1]].tolist())
        ref = leaf0[ptr0[i]:ptr0[i + 1]]
        assert kept <= set(ref.tolist())
        dropped = ~np.isin(ref, list(kept))
        assert np.all(np.isneginf(logw0[ptr0[i]:ptr0[i + 1]][dropped]))
        assert kept >= set(ref[np.isfinite(logw0[ptr0[i]:ptr0[i + 1]])].tolist())


def test_pruned_posterior_equals_unpruned(model, evidence):
    ptr0, _, logw0 = _reference(model, evidence)
    ref = segment_logsumexp(ptr0, logw0)
    got = np.full(evidence.m, np.nan)
    for ch in iter_posterior(model, evidence):
        got[ch.rows] = ch.lognorm
    assert np.isfinite(ref).sum() > evidence.m // 2
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)


def test_walk_is_identical_at_any_thread_count(model, evidence):
    from forestgen.tree import kernels

    f = model.forest_
    X = np.ascontiguousarray(np.repeat(evidence.point, 50, axis=0))  # many row blocks
    lo, hi = np.repeat(evidence.lo, 50, axis=0), np.repeat(evidence.hi, 50, axis=0)
    sets = {j: (np.repeat(a, 50), np.repeat(mk, 50, axis=0))
            for j, (a, mk) in evidence.sets.items()}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = f.reach(X, lo, hi, sets)
        numba.set_num_threads(max(2, before))
        many = f.reach(X, lo, hi, sets)
    finally:
        numba.set_num_threads(before)
    assert kernels.walk_kernel.parallel.signatures  # the parallel kernel ran
    np.testing.assert_array_equal(one[0], many[0])
    np.testing.assert_array_equal(one[1], many[1])


def test_conditional_draws_are_identical_at_any_thread_count(model):
    cond = model.sample(40, random_state=2)[["x", "c"]]
    cond.loc[cond.index[::3], "x"] = np.nan
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = model.sample(conditions=cond, random_state=5)
        numba.set_num_threads(max(2, before))
        b = model.sample(conditions=cond, random_state=5)
    finally:
        numba.set_num_threads(before)
    pd.testing.assert_frame_equal(a, b)
    obs = cond["x"].notna()
    np.testing.assert_allclose(a.loc[obs, "x"], cond.loc[obs, "x"])


def test_segment_gumbel_argmax_draws_in_proportion():
    from forestgen.inference.posterior import segment_gumbel_argmax

    ptr = np.array([0, 3, 4, 6])
    logw = np.log(np.array([0.2, 0.5, 0.3, 1.0, 0.9, 0.1]))
    logw[2] = -np.inf  # never drawn
    rng = np.random.default_rng(0)
    picks = np.stack([segment_gumbel_argmax(ptr, logw, rng) for _ in range(4000)])
    assert (picks[:, 0] < 3).all() and (picks[:, 1] == 3).all() and (picks[:, 2] >= 4).all()
    np.testing.assert_allclose(np.bincount(picks[:, 0], minlength=3) / 4000,
                               [0.2 / 0.7, 0.5 / 0.7, 0.0], atol=0.03)
    np.testing.assert_allclose(np.mean(picks[:, 2] == 4), 0.9, atol=0.02)


@pytest.mark.parametrize("threads", [1, 2])
def test_one_walk_listing_equals_two_walks(model, evidence, threads):
    """With a per-row bound the leaves are listed in one walk (tree-major per block, then
    reordered row by row): the same CSR as counting then filling, at 1 and 2 threads; the
    blocks that overflow a tight bound are walked again, with the same result."""
    f = model.forest_
    X = np.ascontiguousarray(np.repeat(evidence.point, 20, axis=0))
    lo, hi = np.repeat(evidence.lo, 20, axis=0), np.repeat(evidence.hi, 20, axis=0)
    sets = {j: (np.repeat(a, 20), np.repeat(mk, 20, axis=0))
            for j, (a, mk) in evidence.sets.items()}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        ptr, leaf = f.reach(X, lo, hi, sets)
        mean = len(leaf) / len(X)
        assert np.diff(ptr).max() > 2 * mean  # rows differ: a tight bound overflows
        for bound in (f.n_leaves, int(4 * mean), 2):
            p2, l2 = f.reach(X, lo, hi, sets, per_row=bound)
            np.testing.assert_array_equal(p2, ptr)
            np.testing.assert_array_equal(l2, leaf)
    finally:
        numba.set_num_threads(before)


def test_chunked_posterior_equals_one_chunk(model, evidence):
    """Small budgets make many chunks whose later ones are listed in one walk; the posterior
    per row is the one of a single chunk."""
    whole = np.empty(evidence.m)
    for ch in iter_posterior(model, evidence):
        whole[ch.rows] = ch.lognorm
    parts = np.empty(evidence.m)
    n_chunks = 0
    for ch in iter_posterior(model, evidence, budget=200):
        parts[ch.rows] = ch.lognorm
        n_chunks += 1
    assert n_chunks > 3
    np.testing.assert_array_equal(parts, whole)
