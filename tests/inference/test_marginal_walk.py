"""The fused marginal walk (issue 15) gives the enumerating path's values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.inference.api as api
from forestgen.families.mixture.arf import ARF
from forestgen.inference import leaf_factors, marginal_walk
from forestgen.inference.leaf_factors import (
    CATEGORICAL,
    TRUNCNORM,
    LeafPack,
    leaf_kind,
    leaf_pack,
)
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.leaves.rounded_normal import RoundedNormalTailLeaf


def paper_arf(**kw):
    """The paper's ARF (no back-off tree: the walk reads FORDE's leaves, not stacked ones)."""
    return ARF(marginal_weight=0, **kw)

def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    cat = rng.integers(0, 4, n)
    return pd.DataFrame({
        "x0": z[:, 0] + 0.5 * cat, "x1": np.exp(0.4 * z[:, 1]) + 0.3 * z[:, 0],
        "spend": np.where(rng.random(n) < 0.6, 0.0, rng.gamma(2.0, 10.0, n)),
        "rating": rng.integers(1, 11, n), "i0": rng.integers(0, 4, n) + (z[:, 0] > 0),
        "c0": np.array(list("abcd"))[cat], "b0": rng.random(n) < 0.3 + 0.4 * (z[:, 1] > 0)})


def _queries(n, seed, frac=0.3):
    q = _table(n, seed).astype({"rating": float, "i0": float, "b0": object})
    rng = np.random.default_rng(seed + 100)
    for c in q.columns:
        q.loc[rng.random(n) < frac, c] = np.nan
    q.loc[q.index[0], ["x0", "x1"]] = [1e6, np.nan]  # far outside the range: probability 0
    return q


@pytest.fixture(scope="module")
def mixed():
    """Truncated-normal, point-mass, rounded-normal-tail, ordinal-kernel and categorical
    leaves."""
    m = paper_arf(n_trees=4, integer_tail=10, random_state=0, n_jobs=1).fit(_table(600))
    kinds = [type(lm) for lm in m.leaf_models_]
    assert PointMassLeaf in kinds and RoundedNormalTailLeaf in kinds
    assert {leaf_kind(lm) for lm in m.leaf_models_} == {0, TRUNCNORM, CATEGORICAL}
    return m


@pytest.fixture(scope="module")
def plain():
    """Every column with an in-kernel leaf factor."""
    m = paper_arf(n_trees=4, random_state=1, n_jobs=1).fit(_table(600).drop(columns="spend"))
    assert all(leaf_kind(lm) for lm in m.leaf_models_)
    return m


@pytest.fixture(scope="module")
def unif():
    return paper_arf(n_trees=3, family="unif", random_state=2, n_jobs=1).fit(
        _table(500).drop(columns="spend"))


def _enumerated(monkeypatch, fn):
    """``fn()`` on the enumerating paths (the fused ones switched off)."""
    with monkeypatch.context() as mp:
        mp.setattr(marginal_walk, "fused_rows", lambda model, Z: np.zeros(len(Z), bool))
        mp.setattr(api, "_fused_moments", lambda *a, **k: None)
        return fn()


@pytest.mark.parametrize("name", ["mixed", "plain", "unif"])
def test_nan_log_prob_matches_enumeration(request, monkeypatch, name):
    m = request.getfixturevalue(name)
    q = _queries(300, 3)
    if name != "mixed":
        q = q.drop(columns="spend")
    seen = []
    real = marginal_walk.marginal_log_prob
    monkeypatch.setattr(marginal_walk, "marginal_log_prob",
                        lambda model, Z: seen.append(len(Z)) or real(model, Z))
    fused = m.log_prob(q, floor=None)  # (the exact density: -inf past the support)
    Z = m.encode_rows(q, missing_columns="nan")
    inc = np.isnan(Z).any(1)
    expect = marginal_walk.fused_rows(m, Z).sum()  # complete rows too
    assert sum(seen) == expect > 5  # rows with an unsupported column observed fall back
    if name == "mixed":
        assert expect < len(Z)
    else:
        assert marginal_walk.fused_rows(m, Z[~inc]).all() and (~inc).sum() > 5
    ref = _enumerated(monkeypatch, lambda: m.log_prob(q, floor=None))
    assert fused[0] < -1e9
    # Same factors up to rounding: an unlisted level's log(rest) + log(base) is an ulp from
    # log(rest * base), and the running logsumexp rescales where the enumerating one does
    # not; a few ulps of the ~10 summed terms, far below 1e-12.
    np.testing.assert_allclose(fused, ref, rtol=1e-12, atol=1e-12)


def test_same_values_for_any_block_order_and_thread_count(plain, monkeypatch):
    Z = plain.encode_rows(_queries(400, 4).drop(columns="spend"), missing_columns="nan")
    base = marginal_walk.marginal_log_prob(plain, Z)
    perm = np.random.default_rng(0).permutation(len(Z))
    assert np.array_equal(marginal_walk.marginal_log_prob(plain, Z[perm]), base[perm])
    monkeypatch.setattr(marginal_walk, "BLOCK", 16)
    assert np.array_equal(marginal_walk.marginal_log_prob(plain, Z), base)
    monkeypatch.setattr(marginal_walk, "_batch_walk", marginal_walk._batch_walk.serial)
    assert np.array_equal(marginal_walk.marginal_log_prob(plain, Z), base)


def test_single_rows_and_buffers_that_grow(plain, monkeypatch):
    """One row at a time, and every entry missing (each row reaches every leaf)."""
    Z = plain.encode_rows(_queries(20, 5).drop(columns="spend"), missing_columns="nan")
    ref = _enumerated(monkeypatch, lambda: plain.log_prob_encoded(Z))
    one = np.concatenate([marginal_walk.marginal_log_prob(plain, Z[i:i + 1])
                          for i in range(len(Z)) if np.isnan(Z[i]).any()])
    np.testing.assert_allclose(one, ref[np.isnan(Z).any(1)], rtol=1e-12, atol=1e-12)
    empty = np.full((3, Z.shape[1]), np.nan)
    np.testing.assert_allclose(marginal_walk.marginal_log_prob(plain, empty), 0.0, atol=1e-12)


def test_predict_proba_predict_and_impute_match_enumeration(plain, monkeypatch):
    q = _queries(300, 6).drop(columns="spend")
    calls = []
    real = api._fused_moments
    monkeypatch.setattr(api, "_fused_moments", lambda *a: calls.append(1) or real(*a))
    fused = (plain.predict_proba(q, target="c0"), plain.predict_proba(q, target="i0"),
             plain.predict(q, target="x1"))
    imp = plain.impute(q)
    assert len(calls) == 4

    def ref_calls():
        return (plain.predict_proba(q, target="c0"), plain.predict_proba(q, target="i0"),
                plain.predict(q, target="x1")), plain.impute(q)

    ref, ref_imp = _enumerated(monkeypatch, ref_calls)
    for a, b in zip(fused, ref):
        a, b = np.asarray(a, float), np.asarray(b, float)
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fused[0].sum(1), 1.0, rtol=1e-12)
    for c in q.columns:
        if q[c].dtype == float:
            np.testing.assert_allclose(imp[c].astype(float), ref_imp[c].astype(float),
                                       rtol=1e-10)
        else:
            assert imp[c].equals(ref_imp[c])
    assert not imp.isna().any().any()


def test_unsupported_columns_fall_back(mixed, monkeypatch):
    """Point-mass or rounded-normal-tail columns in the evidence send predict_proba to the
    enumerating path."""
    q = _queries(120, 7)
    calls = []
    real = marginal_walk.marginal_moments
    monkeypatch.setattr(api, "marginal_moments", lambda *a: calls.append(1) or real(*a))
    p = mixed.predict_proba(q, target="c0")
    assert not calls
    free = q.assign(spend=np.nan, rating=np.nan, i0=np.nan)
    p2 = mixed.predict_proba(free, target="c0")
    assert calls  # without those columns the fused walk runs
    ref = _enumerated(monkeypatch, lambda: mixed.predict_proba(free, target="c0"))
    np.testing.assert_allclose(p2, ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(p.to_numpy().sum(1), 1.0, rtol=1e-12)


def test_pack_memory_as_documented(mixed):
    pack = leaf_pack(mixed)
    L, N = mixed.forest_.n_leaves, len(mixed.forest_.feature)
    kinds = [leaf_kind(lm) for lm in mixed.leaf_models_]
    cats = [lm for lm, k in zip(mixed.leaf_models_, kinds) if k == CATEGORICAL]
    nnz_k = np.sum([np.diff(lm.offset_) for lm in cats], axis=0)
    nbits = sum(lm.allowed_.shape[1] for lm in cats)
    h = (1 + 5 * kinds.count(TRUNCNORM) + 2 * len(cats) + -(-(1 + 2 * len(cats)) // 4)
         + -(-nbits // 8))
    records = 8 * (L * h + nnz_k.sum() + (-(-nnz_k // 4)).sum() + 2)  # 2 spare words
    d = len(kinds)
    kmax = max(lm.n_levels for lm in cats)
    small = 8 * d * 6 + 16 * d * kmax + 32 + 8 * mixed.forest_.n_trees
    assert pack.nbytes == records + 8 * (L + 1) + 16 * N + 16 * L + small
    assert leaf_pack(mixed) is pack  # kept while the model lives


def test_zero_probability_rows_answer_nan(unif, monkeypatch):
    """Uniform leaves give a value outside every cell probability zero: that row's moments
    are NaN with a warning, the other rows are unaffected, as on the enumerating path.
    (``predict_proba`` itself answers a held-out row past the range at its nearest end,
    issue 32; the clamp is switched off here to reach the kernel's zero-probability path.)"""
    q = _queries(60, 8).drop(columns="spend")
    calls = []
    real = api._fused_moments
    monkeypatch.setattr(api, "_fused_moments", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(api, "clamp_query_rows", lambda model, Z, query, skip=(): Z)
    with pytest.warns(RuntimeWarning, match="zero-probability"):
        p = unif.predict_proba(q, target="c0")
    assert calls
    assert np.isnan(p.iloc[0]).all() and np.isfinite(p.iloc[1:]).all().all()
    lp = unif.log_prob(q, floor=None)
    assert lp[0] == -np.inf and np.isfinite(lp[1:]).all()

    def ref():
        with pytest.warns(RuntimeWarning, match="zero-probability"):
            return unif.predict_proba(q, target="c0")

    np.testing.assert_allclose(p, _enumerated(monkeypatch, ref), rtol=1e-10, atol=1e-12)


def _col(model, name):
    return list(model.encoder_.schema.names).index(name)


def test_moments_same_for_any_block_order_and_thread_count(plain, monkeypatch):
    Z = plain.encode_rows(_queries(300, 9).drop(columns="spend"), missing_columns="nan")
    cols = [_col(plain, "c0"), _col(plain, "i0"), _col(plain, "x1")]
    lp, mom = marginal_walk.marginal_moments(plain, Z, cols)
    perm = np.random.default_rng(1).permutation(len(Z))
    runs = [(Z[perm], perm)]
    monkeypatch.setattr(marginal_walk, "BLOCK", 16)
    runs.append((Z, slice(None)))
    for Zr, idx in runs:
        lp2, mom2 = marginal_walk.marginal_moments(plain, Zr, cols)
        assert np.array_equal(lp2, lp[idx])
        assert all(np.array_equal(mom2[j], mom[j][idx], equal_nan=True) for j in cols)
    monkeypatch.setattr(marginal_walk, "_batch_walk", marginal_walk._batch_walk.serial)
    lp3, mom3 = marginal_walk.marginal_moments(plain, Z, cols)
    assert np.array_equal(lp3, lp) and all(np.array_equal(mom3[j], mom[j], equal_nan=True)
                                          for j in cols)


@pytest.mark.parametrize("n_trees", [1, 4, 15, 16, 17, 100, 1000])
@pytest.mark.parametrize("width", [0, 3, 1000])
def test_tree_groups_are_balanced_and_bounded(n_trees, width):
    rows, bounds = marginal_walk.walk_plan(n_trees, width)
    sizes = np.diff(bounds)
    assert bounds[0] == 0 and bounds[-1] == n_trees and (sizes > 0).all()
    assert sizes.max() - sizes.min() <= 1  # nearly equal shares of the trees
    assert len(sizes) <= marginal_walk.GROUPS and rows >= marginal_walk.BLOCK
    if len(sizes) > 1:  # several groups only where their sums fit the budget
        assert len(sizes) * rows * 8 * (2 + width) <= marginal_walk.TASK_BYTES
    assert len(sizes) == min(n_trees, marginal_walk.GROUPS) or width == 1000


@pytest.mark.parametrize("m", [1, 5, 32768, 32769, 40000, 65536, 70000, 262144])
def test_row_blocks_are_as_few_as_allowed_and_even(m):
    """The threads deal (group, block) tasks in turn: blocks of nearly equal size keep them
    equally busy (40,000 rows were a block of 32,768 and one of 7,232)."""
    block = marginal_walk.even_block(m)
    n_blocks = -(-m // block)
    assert block <= marginal_walk.BLOCK and n_blocks == -(-m // marginal_walk.BLOCK)
    assert block * n_blocks - m < n_blocks  # the last block is at most one row short


def test_same_bits_for_any_thread_count_chunk_and_block(plain, monkeypatch):
    """The tasks (a group of trees, a block of rows) are dealt to any number of threads, and
    the rows come in chunks and blocks of any size: every row adds its leaves and its groups
    in the same order, so the bits do not change; other tree groups change only rounding."""
    import numba

    Z = plain.encode_rows(_queries(300, 14).drop(columns="spend"), missing_columns="nan")
    cols = [_col(plain, "c0"), _col(plain, "x1")]
    base = marginal_walk.marginal_moments(plain, Z, cols)
    kernels = marginal_walk._batch_walk.parallel, marginal_walk._batch_walk.serial
    for threads in (1, 3, 7):
        monkeypatch.setattr(numba, "get_num_threads", lambda t=threads: t)
        for kernel in kernels:
            monkeypatch.setattr(marginal_walk, "_batch_walk", kernel)
            lp, mom = marginal_walk.marginal_moments(plain, Z, cols)
            assert np.array_equal(lp, base[0])
            assert all(np.array_equal(mom[j], base[1][j], equal_nan=True) for j in cols)
    monkeypatch.setattr(marginal_walk, "BLOCK", 16)
    width = plain.leaf_models_[cols[0]].n_levels + 1
    monkeypatch.setattr(marginal_walk, "TASK_BYTES", 16 * 16 * 8 * (2 + width))
    rows, bounds = marginal_walk.walk_plan(4, width)
    assert rows == 16 and len(bounds) == 5  # 16-row chunks, one tree per group as before
    lp, mom = marginal_walk.marginal_moments(plain, Z, cols)
    assert np.array_equal(lp, base[0]) and all(np.array_equal(mom[j], base[1][j], equal_nan=True)
                                         for j in cols)
    monkeypatch.setattr(marginal_walk, "GROUPS", 1)  # one group: other rounding only
    lp, mom = marginal_walk.marginal_moments(plain, Z, cols)
    np.testing.assert_allclose(lp, base[0], rtol=1e-13, atol=1e-13)
    for j in cols:
        np.testing.assert_allclose(mom[j], base[1][j], rtol=1e-12, atol=1e-13)


def test_level_masks_and_search_give_the_same_bits(plain, monkeypatch):
    """A categorical level found by its rank in the listed-level mask scores as the binary
    search of the listed codes finds it (columns of more than MASK_LEVELS levels)."""
    Z = plain.encode_rows(_queries(300, 15).drop(columns="spend"), missing_columns="nan")
    base = marginal_walk.marginal_log_prob(plain, Z)
    monkeypatch.setattr(leaf_factors, "MASK_LEVELS", 0)
    searched = LeafPack(plain)
    assert searched.args[4][3] == 0 and leaf_pack(plain).args[4][3] == 64
    monkeypatch.setattr(marginal_walk, "leaf_pack", lambda model: searched)
    assert np.array_equal(marginal_walk.marginal_log_prob(plain, Z), base)


def test_moments_of_a_row_do_not_depend_on_the_others(plain, monkeypatch):
    """Each leaf's pmf is built once per visit and weighed into every row there that misses
    the column: rows that observe it, miss it or miss everything, in one block or alone, get
    the same bits."""
    q = _queries(120, 12, frac=0.4).drop(columns="spend")
    Z = plain.encode_rows(q, missing_columns="nan")
    Z[:3] = np.nan
    cols = [_col(plain, "c0"), _col(plain, "i0"), _col(plain, "b0"), _col(plain, "x1")]
    assert all(0 < np.isnan(Z[:, j]).mean() < 0.8 for j in cols)
    lp, mom = marginal_walk.marginal_moments(plain, Z, cols)
    for i in range(0, len(Z), 7):
        lp1, mom1 = marginal_walk.marginal_moments(plain, Z[i:i + 1], cols)
        assert np.array_equal(lp1, lp[i:i + 1])
        assert all(np.array_equal(mom1[j], mom[j][i:i + 1], equal_nan=True) for j in cols)


def test_same_values_at_two_threads(plain):
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba was started with one thread")
    Z = plain.encode_rows(_queries(500, 13).drop(columns="spend"), missing_columns="nan")
    cols = [_col(plain, "c0"), _col(plain, "x1")]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = marginal_walk.marginal_moments(plain, Z, cols)
        numba.set_num_threads(2)
        two = marginal_walk.marginal_moments(plain, Z, cols)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one[0], two[0])
    assert all(np.array_equal(one[1][j], two[1][j], equal_nan=True) for j in cols)


def test_bad_rows_do_not_break_a_batch(plain, monkeypatch):
    """An all-missing row, a level unseen at fit time, a non-integer code and a value far
    outside the range (the last three of probability zero: no level of the column, or past
    the end of the support) each get their own answer; every row gets the value it gets
    alone."""
    Z = plain.encode_rows(_queries(40, 10).drop(columns="spend"), missing_columns="nan")
    c0, i0, x0, x1 = (_col(plain, c) for c in ("c0", "i0", "x0", "x1"))
    Z[2:6, x1] = np.nan
    Z[1] = np.nan
    Z[2, c0] = plain.leaf_models_[c0].n_levels  # the encoder's code of an unseen level
    Z[3, i0] = 1.5
    Z[4, x0] = -1e6
    lp = marginal_walk.marginal_log_prob(plain, Z)
    alone = np.concatenate([marginal_walk.marginal_log_prob(plain, Z[i:i + 1])
                            for i in range(len(Z))])
    assert np.array_equal(lp, alone)
    assert lp[1] == pytest.approx(0.0, abs=1e-12)  # nothing observed: probability one
    assert np.isneginf(lp[2:5]).all()  # no level of the column, or past the range
    ref = _enumerated(monkeypatch, lambda: plain.log_prob_encoded(Z))
    np.testing.assert_allclose(lp, ref, rtol=1e-12, atol=1e-12)
    _, mom = marginal_walk.marginal_moments(plain, Z, [c0])
    ok = np.isnan(Z[:, c0]) & np.isfinite(lp)
    np.testing.assert_allclose(mom[c0][ok].sum(1), 1.0, rtol=1e-12)


def test_wide_level_codes_give_the_same_values(plain, monkeypatch):
    """Records with 32-bit level codes (categorical columns with 65,536 levels or more in
    all) score as the 16-bit ones."""
    Z = plain.encode_rows(_queries(200, 11).drop(columns="spend"), missing_columns="nan")
    c0 = _col(plain, "c0")
    base = marginal_walk.marginal_moments(plain, Z, [c0])
    monkeypatch.setattr(leaf_factors, "CODE16", 0)
    wide = LeafPack(plain)
    assert wide.args[2].dtype == np.int32 and leaf_pack(plain).args[2].dtype == np.uint16
    monkeypatch.setattr(marginal_walk, "leaf_pack", lambda model: wide)
    lp, mom = marginal_walk.marginal_moments(plain, Z, [c0])
    assert np.array_equal(lp, base[0]) and np.array_equal(mom[c0], base[1][c0], equal_nan=True)
