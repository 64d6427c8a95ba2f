"""ARF gives the same bits at one and two threads (issue 33 item 5): the fit (binning on
threads, trees on threads, FORDE's columns on threads), FORGE (column draws on threads, the
parallel leaf draw) and the likelihood (the parallel build of the packed leaf records), with
Numba's thread count and ``n_jobs`` both changed."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd
import pytest

from forestgen import ARF
from forestgen.inference.leaf_factors import LeafPack, _pack_nodes, _walk_order
from forestgen.sampling.ancestral import COLUMN_ROWS, THREAD_ROWS, _guide_table, _guided_draws


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(3)
    n = 800
    z = rng.standard_normal(n)
    return pd.DataFrame({"x": z, "y": np.exp(z + 0.3 * rng.standard_normal(n)),
                         "w": rng.gamma(2.0, 1.0, n),
                         "g": np.array(list("abcd"))[(z > 0) + 2 * (rng.random(n) < 0.3)],
                         "k": rng.integers(0, 3, n).astype(str)})


def _run(table, threads: int):
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        m = ARF(n_trees=6, min_node_size=3, n_jobs=threads, random_state=4).fit(table)
        s = m.sample_encoded(THREAD_ROWS + 100, random_state=1)  # (column, chunk) tasks
        s = (s, m.sample_encoded(COLUMN_ROWS + 100, random_state=2))  # one task per column
        lp = m.log_prob(table)
        pack = LeafPack(m)
    finally:
        numba.set_num_threads(before)
    return m, s, lp, pack


def test_same_bits_at_one_and_two_threads(table, monkeypatch):
    c, sc, lc, pc = _run(table, 2)  # small work: the serial twins of the new kernels
    monkeypatch.setattr("forestgen.parallel.SMALL_WORK", 0)  # the parallel kernels
    a, sa, la, pa = _run(table, 1)
    b, sb, lb, pb = _run(table, 2)
    for x, y, z in zip(sa, sb, sc):
        np.testing.assert_array_equal(x, z)
        np.testing.assert_array_equal(x, y)
    sa = sa[0]
    np.testing.assert_array_equal(la, lc)
    for x, y in zip(pa.args, pc.args):
        np.testing.assert_array_equal(x, y)
    assert [h["oob_accuracy"] for h in a.fit_diagnostics_] == \
        [h["oob_accuracy"] for h in b.fit_diagnostics_]
    for f in ("feature", "threshold", "left", "right", "cat_left", "node_value"):
        np.testing.assert_array_equal(getattr(a.forest_, f), getattr(b.forest_, f))
    np.testing.assert_array_equal(a.leaf_log_weight_, b.leaf_log_weight_)
    for la_m, lb_m in zip(a.leaf_models_, b.leaf_models_):
        pa_, pb_ = la_m.param_arrays(), lb_m.param_arrays()
        assert pa_.keys() == pb_.keys()
        for k in pa_:
            np.testing.assert_array_equal(pa_[k], pb_[k])
    np.testing.assert_array_equal(la, lb)
    for x, y in zip(pa.args, pb.args):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(pa.nodes, pb.nodes):
        np.testing.assert_array_equal(x, y)
    assert pa.depth == pb.depth
    # the draws are the model's: inside every column's observed range, all levels seen
    assert np.isfinite(sa).all()
    for j, spec in enumerate(a.schema_.columns):
        if not spec.is_discrete:
            assert spec.lower <= sa[:, j].min() and sa[:, j].max() <= spec.upper


def test_parallel_pack_kernels_equal_their_serial_twins(table):
    m = ARF(n_trees=6, min_node_size=3, random_state=4).fit(table)
    f = m.forest_
    args = (f.feature, f.left, f.right, f.roots, np.asarray(f.node_offsets, np.int64),
            int(np.diff(f.node_offsets).max()))
    order, start = _walk_order.parallel(*args)
    order_s, start_s = _walk_order.serial(*args)
    np.testing.assert_array_equal(order, order_s)
    np.testing.assert_array_equal(start, start_s)
    np.testing.assert_array_equal(start, f.node_offsets)  # every node reached
    assert sorted(order) == list(range(len(f.feature)))
    args = (order, start, f.feature, f.left, f.threshold.view(np.int64), f.cat_off,
            f.nan_left, f.node_leaf)
    for x, y in zip(_pack_nodes.parallel(*args), _pack_nodes.serial(*args)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("L", [3, 5000, 70_000])
def test_parallel_leaf_draw_equals_searchsorted(L):
    rng = np.random.default_rng(L)
    w = rng.exponential(size=L) * (rng.random(L) < 0.7)
    w[0] = 1.0
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    u = rng.random(50_000)
    ref = np.minimum(np.searchsorted(cdf, u, side="right"), L - 1)
    guide = _guide_table(cdf)
    G = len(guide)  # the first index whose cdf exceeds k / G (len(cdf) where none does)
    np.testing.assert_array_equal(guide, np.searchsorted(cdf, np.arange(G) / G, side="right"))
    np.testing.assert_array_equal(_guided_draws.parallel(cdf, guide, u), ref)
    np.testing.assert_array_equal(_guided_draws.serial(cdf, guide, u), ref)


@pytest.mark.parametrize("weight", [0.0, 0.2])
def test_forde_pool_tasks_equal_the_steps_after_it(table, weight, monkeypatch):
    """FORDE queues the missing rates behind the columns' tasks (``fit_leaves(also=)``): they
    equal those of ``_fit_missing`` run again (a table with missing values; with the back-off
    tree's extra leaf too). The fit builds no packed leaf records (``leaf_factors`` module
    docstring): the first ``leaf_pack`` does, equal to one built afresh, then keeps it."""
    from forestgen.inference import leaf_factors
    from forestgen.inference.leaf_factors import leaf_pack, pack_nodes

    t = table.copy()
    t.loc[::7, "w"] = np.nan
    t.loc[::11, "g"] = None
    built = []
    init = leaf_factors.LeafPack.__init__
    monkeypatch.setattr(leaf_factors.LeafPack, "__init__",
                        lambda self, *a, **k: built.append(1) or init(self, *a, **k))
    m = ARF(n_trees=6, min_node_size=3, n_jobs=2, random_state=4,
            marginal_weight=weight).fit(t)
    assert built == []
    assert m.missing_rate_.shape == (m.forest_.n_leaves, 2) and m.missing_rate_.max() > 0
    fresh = LeafPack(m)
    kept = leaf_pack(m)
    assert kept is leaf_pack(m) and kept is not fresh and len(built) == 2
    for x, y in zip(kept.args, fresh.args):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(kept.nodes, fresh.nodes):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(pack_nodes(m.forest_).arrays, pack_nodes(m.forest_, serial=True).arrays):
        np.testing.assert_array_equal(x, y)
    rate = m.missing_rate_.copy()
    m._fit_missing(m.encoder_.transform(t), m.forest_.apply(m.encoder_.transform(t)))
    np.testing.assert_array_equal(rate, m.missing_rate_)


def test_fit_leaves_runs_the_also_tasks_on_the_pool(table):
    """``fit_leaves(also=)``: every extra task runs once (on the pool's threads at two
    threads), and only the columns' models are returned."""
    import threading

    m = ARF(n_trees=4, min_node_size=3, n_jobs=2, random_state=1, marginal_weight=0).fit(table)
    Z = m.encoder_.transform(table)
    leaves = m.forest_.apply(Z)
    boxes = m.forest_.column_boxes(m.schema_.d, np.where(m.schema_.nominal_mask,
                                                         m.schema_.n_levels, 0))
    ran = []
    models = m.fit_leaves(Z, leaves, boxes, *m.leaf_prototypes(), None, m.leaf_overrides(),
                          also=[lambda k=k: ran.append((k, threading.current_thread().name))
                                for k in range(3)])
    assert len(models) == m.schema_.d
    assert sorted(k for k, _ in ran) == [0, 1, 2]
    assert all(name.startswith("forestgen") for _, name in ran)
    for a, b in zip(models, m.leaf_models_):
        pa, pb = a.param_arrays(), b.param_arrays()
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])
