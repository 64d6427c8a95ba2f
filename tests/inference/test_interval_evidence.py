"""Interval and level-set evidence through the fused kernels (issue 15): ``log p(e)`` equals the
enumerating path, draws follow the enumerated posterior, and neither depends on threads or
batching."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numba
import numpy as np
import pandas as pd
import pytest
from numba import njit
from scipy import stats

from forestgen.families.mixture.arf import ARF
from forestgen.families.mixture.gef import GeF
from forestgen.inference import ZeroProbabilityError, evidence_log_prob
from forestgen.inference.conditions import Not, evidence_from_frame, parse_conditions
from forestgen.inference.evidence_mass import evidence_log_mass, linear_tables, subtree_tables
from forestgen.inference.interval_factors import (
    evidence_arrays,
    kernel_columns,
    kernel_rows,
    log_ndtr_diff,
    row_columns,
    row_linear_weight,
    row_log_weight,
)
from forestgen.inference.leaf_factors import leaf_pack
from forestgen.inference.leaf_search import bounded_draws, draw_leaves_bounded, node_bounds
from forestgen.inference.posterior import iter_posterior
from forestgen.leaves.normal_math import log_ndtr_diff as np_log_ndtr_diff
from forestgen.tree.kernels import EvidenceRows


def paper_arf(**kw):
    """The paper's ARF (no back-off tree: the walk reads FORDE's leaves, not stacked ones)."""
    return ARF(marginal_weight=0, **kw)

def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    cat = rng.integers(0, 4, n)
    return pd.DataFrame({
        "x0": z[:, 0] + 0.5 * cat, "x1": np.exp(0.4 * z[:, 1]) + 0.3 * z[:, 0],
        "x2": rng.gamma(2.0, 1.0, n), "c0": np.array(list("abcd"))[cat],
        "c1": np.where(z[:, 1] > 0, "hi", "lo"), "i0": rng.integers(0, 4, n) + (z[:, 0] > 0),
        "x3": np.where(rng.random(n) < 0.3, 0.0, rng.gamma(2.0, 1.0, n)),  # a point mass
        "x4": np.where(rng.random(n) < 0.2, np.nan, z[:, 1])})  # missing values at fit


@pytest.fixture(scope="module")
def models():
    df = _table(600)
    return {"arf": paper_arf(n_trees=3, random_state=0, n_jobs=1).fit(df),
            "smooth": paper_arf(n_trees=3, alpha=0.5, random_state=1, n_jobs=1).fit(df),
            "unif": paper_arf(n_trees=3, family="unif", random_state=2, n_jobs=1).fit(df),
            "tail": paper_arf(n_trees=2, integer_tail=10, random_state=3, n_jobs=1).fit(df)}


def _conditions(n, seed):
    """Random per-row evidence: intervals (some one-sided, some covering everything), level
    sets and their negations, the odd point value, free cells."""
    rng = np.random.default_rng(seed)
    q = _table(n, seed + 100)
    cols = {c: [None] * n for c in ("x0", "x1", "x2", "x3", "x4", "c0", "c1", "i0")}
    for i in range(n):
        a, w = q.x0[i], rng.choice([0.05, 0.5, 2.0, 50.0])
        cols["x0"][i] = (a - w, a + w) if rng.random() < 0.8 else None
        if i % 11 == 5:  # far past the training range: probability zero
            cols["x0"][i] = (40.0 + w, None)
        pick = [(None, q.x1[i]), (q.x1[i], None), (0.5, 1.5)][rng.integers(3)]
        cols["x1"][i] = (pick if rng.random() < 0.5
                         else (float(q.x1[i]) if rng.random() < 0.3 else None))
        cols["x2"][i] = (None, q.x2[i]) if rng.random() < 0.6 else None
        cols["x3"][i] = (-1.0, q.x3[i] + 0.5) if rng.random() < 0.15 else None
        cols["x4"][i] = (q.x4[i] - 1, q.x4[i] + 1) if rng.random() < 0.3 and q.x4[i] == q.x4[i] \
            else None
        lv = set(rng.choice(list("abcd"), rng.integers(1, 4), replace=False).tolist())
        cols["c0"][i] = (lv if rng.random() < 0.6 else Not(lv)) if rng.random() < 0.7 else None
        cols["c1"][i] = {"hi"} if rng.random() < 0.2 else None
        cols["i0"][i] = (0, int(q.i0[i]) + 1) if rng.random() < 0.4 else None
    return pd.DataFrame(cols, dtype=object)


def _with_empty_sets(m, ev, every=9):
    """Every ``every``-th row gets an empty level set on c1 (as a level unseen at fit time)."""
    j = m.encoder_.schema.names.index("c1")
    act, mk = ev.sets.get(j, (np.zeros(ev.m, bool), np.ones((ev.m, 2), bool)))
    act, mk = act.copy(), mk.copy()
    act[::every] = True
    mk[::every] = False
    ev.sets[j] = (act, mk)
    return ev


def _reference(m, ev):
    out = np.empty(ev.m)
    for ch in iter_posterior(m, ev):
        out[ch.rows] = ch.lognorm
    return out


def test_scalar_log_ndtr_diff_matches_numpy():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.normal(0, 3, 400), rng.uniform(-60, 60, 200), [-np.inf, -40, 8]])
    b = a + np.concatenate([rng.exponential(1.0, 600), [1.0, 0.5, np.inf]])
    ref = np_log_ndtr_diff(a, b)
    got = np.array([log_ndtr_diff(x, y) for x, y in zip(a, b)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13)
    assert log_ndtr_diff(1.0, 1.0) == -np.inf


@pytest.mark.parametrize("name", ["arf", "smooth", "unif", "tail"])
def test_log_mass_equals_enumeration(models, name):
    m = models[name]
    ev = _with_empty_sets(m, evidence_from_frame(m, _conditions(120, seed=len(name))))
    ref = _reference(m, ev)
    done, got = evidence_log_mass(m, ev)
    point, iv, sets = kernel_columns(m)
    names = m.encoder_.schema.names
    act = ev.active()
    # rows with evidence on a column without in-kernel factors are left to the enumeration
    cheap = iv | sets
    assert (done == ~(act & ~cheap[None, :]).any(1)).all()
    if name == "tail":
        assert not cheap[names.index("i0")]
    assert not cheap[names.index("x3")]  # the point mass's leaf model
    assert done.sum() > 40 and np.isinf(ref).any() and np.isfinite(ref).any()
    fin = np.isfinite(ref[done])
    assert (np.isfinite(got[done]) == fin).all()
    np.testing.assert_allclose(got[done][fin], ref[done][fin], rtol=0, atol=1e-10)
    # the public query (rows without in-kernel factors through the enumeration) agrees too
    ref = _reference(m, evidence_from_frame(m, _conditions(120, seed=len(name))))
    np.testing.assert_allclose(evidence_log_prob(m, _conditions(120, seed=len(name))), ref,
                               rtol=0, atol=1e-10)


def test_conditional_log_prob_equals_enumeration(models):
    m = models["smooth"]
    cond = _conditions(60, seed=7).drop(columns=["x3"])
    X = _table(60, seed=8)
    ev = evidence_from_frame(m, cond)
    log_e = _reference(m, ev)
    ok = np.isfinite(log_e)
    cond, X, ev, log_e = cond[ok], X[ok], ev.take(np.flatnonzero(ok)), log_e[ok]
    joint = ev.copy()
    Zx = m.encode_rows(X)
    free = ~ev.active() & ~np.isnan(Zx)
    joint.point[free] = Zx[free]
    ref = _reference(m, joint) - log_e
    got = m.log_prob(X, conditions=cond.reset_index(drop=True).set_index(X.index))
    fin = np.isfinite(ref)
    assert (np.isfinite(got) == fin).all() and fin.sum() > 20
    np.testing.assert_allclose(got[fin], ref[fin], rtol=0, atol=1e-10)


def _chi2_p(draws, leaves, w):
    pos = {int(k): i for i, k in enumerate(leaves)}
    assert all(int(k) in pos for k in draws)
    cnt = np.bincount([pos[int(k)] for k in draws], minlength=len(leaves))
    assert cnt[w == 0].sum() == 0  # never a leaf of zero posterior weight
    exp = w * len(draws)
    big = exp >= 5
    obs, ex = np.r_[cnt[big], cnt[~big].sum()], np.r_[exp[big], exp[~big].sum()]
    return stats.chisquare(obs[ex > 0], ex[ex > 0]).pvalue


@pytest.mark.parametrize("name", ["arf", "smooth", "unif"])
def test_draws_follow_enumerated_posterior(models, name):
    m = models[name]
    cond = pd.DataFrame({"x0": [(0.0, 1.0), (1.2, 1.3)], "c0": [{"a", "b"}, Not({"a"})],
                         "x2": [(None, 2.0), (1.0, None)], "i0": [None, (1, 3)],
                         "x1": [None, 1.1]}, dtype=object)
    ev = evidence_from_frame(m, cond)
    n = 5000
    for row in range(2):
        ch = next(iter_posterior(m, ev.take(np.array([row]))))
        rep = np.zeros(n, np.int64) + row
        big = ev.take(rep)
        leaf, _ = draw_leaves_bounded(m, big.point, np.arange(n), 17, 10**6,
                                      evidence_arrays(big, np.arange(n)))
        assert (leaf >= 0).all()
        assert _chi2_p(leaf, ch.leaf, ch.weights()) > 1e-3


def test_draws_do_not_depend_on_threads_or_batches(models):
    m = models["arf"]
    ev = evidence_from_frame(m, _conditions(80, seed=3).drop(columns=["x3"]))
    rows = np.arange(ev.m)
    whole, info = bounded_draws(m, ev, rows, key=9)
    assert info["searched"] > 0
    parts = np.concatenate([bounded_draws(m, ev, rows[:37], key=9)[0],
                            bounded_draws(m, ev, rows[37:], key=9)[0]])
    # (the probe rows of each pattern differ between batches; a searched row's draw does not)
    both = (whole >= 0) & (parts >= 0)
    assert both.sum() > 40 and (whole[both] == parts[both]).all()
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = bounded_draws(m, ev, rows, key=9)[0]
        mass1 = evidence_log_mass(m, ev)[1]
    finally:
        numba.set_num_threads(threads)
    assert (one == whole).all()
    mass = evidence_log_mass(m, ev)[1]
    assert np.array_equal(mass1, mass, equal_nan=True)
    assert np.array_equal(evidence_log_mass(m, ev, rows[5:9])[1], mass[5:9], equal_nan=True)


def test_impossible_evidence_keeps_on_empty(models):
    m = models["unif"]  # uniform leaves on finite cells: no mass beyond the data
    cond = pd.DataFrame({"x0": [(1e6, 2e6), (0.0, 1.0)], "c0": [{"a"}, {"b", "c"}]},
                        dtype=object)
    ev = evidence_from_frame(m, cond)
    done, lm = evidence_log_mass(m, ev)
    assert done.all() and lm[0] == -np.inf and np.isfinite(lm[1])
    assert bounded_draws(m, ev, np.arange(2), key=1)[0][0] == -1  # left to the enumeration
    with pytest.raises(ZeroProbabilityError, match="x0"):
        m.sample(conditions=cond, random_state=0, on_empty="raise")
    with pytest.warns(RuntimeWarning, match="zero probability"):
        s = m.sample(conditions=cond, random_state=0)
    assert s.iloc[0].isna().all() and 0.0 < s["x0"].iloc[1] <= 1.0
    assert s["c0"].iloc[1] in ("b", "c")
    # a level unseen at fit time is an empty level set: probability zero for that row only
    unseen = pd.DataFrame({"c0": ["zz", "a"], "x0": [(0.0, 1.0), (0.0, 1.0)]}, dtype=object)
    with pytest.warns(RuntimeWarning):
        s = m.sample(conditions=unseen, random_state=0)
    assert s.iloc[0].drop("c0").isna().all() and s["c0"].iloc[1] == "a"


def test_samples_respect_interval_evidence(models):
    m = models["smooth"]
    cond = _conditions(300, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = m.sample(conditions=cond, random_state=0)
    ok = s.notna().any(axis=1).to_numpy()
    assert ok.sum() > 200
    for c in ("x0", "x1", "x2"):
        for v, e in zip(s[c][ok], cond[c][ok]):
            if isinstance(e, tuple) and not pd.isna(v):  # (NaN: evidence outside the range)
                assert (e[0] is None or v >= e[0]) and (e[1] is None or v <= e[1])
    for v, e in zip(s["c0"][ok], cond["c0"][ok]):
        if pd.isna(v):  # a row whose evidence lies past the training range
            continue
        if isinstance(e, set):
            assert v in e
        elif isinstance(e, Not):
            assert v not in e.levels


def test_level_bounds_bound_every_subtree(models):
    """Each internal node's per-level bound is at least its subtree's summed ``pi_k p_k(c)``
    (and, summed over a level set, its weight under that set)."""
    m = models["smooth"]
    j = m.encoder_.schema.names.index("c0")
    nb = node_bounds(m)
    V, off, top = nb.levels([j])
    assert off[j] == 0 and V.shape == (int((m.forest_.feature >= 0).sum()), 4)
    f = m.forest_
    pmf = m.leaf_models_[j].probs(np.arange(f.n_leaves)) * np.exp(m.leaf_log_weight_)[:, None]

    def subtree(n):
        if f.feature[n] < 0:
            return pmf[f.node_leaf[n]]
        s = subtree(f.left[n]) + subtree(f.right[n])
        exact = s / np.exp(top)
        assert (V[nb.inner[n]] >= exact).all()
        np.testing.assert_allclose(V[nb.inner[n]], exact, rtol=1e-5, atol=1e-9)  # (margins)
        return s

    for r in f.roots:
        subtree(r)


# ----------------------------------------------------------------------------- containment


def _wide_conditions(n, seed):
    """Per-row evidence wide enough that whole subtrees lie inside it: long and half-open
    intervals, the whole line, level sets of most levels (a finite interval never contains a
    box unbounded on that column, whose truncated normal has mass beyond it)."""
    rng = np.random.default_rng(seed)
    q = _table(n, seed + 200)
    cols = {c: [None] * n for c in ("x0", "x1", "x2", "x4", "c0", "c1", "i0")}
    for i in range(n):
        w = rng.choice([0.5, 2.0, 1e6])
        cols["x0"][i] = [(q.x0[i] - w, q.x0[i] + w), (None, q.x0[i]), (q.x0[i], None),
                         (None, None), None][rng.integers(5)]
        cols["x1"][i] = [(None, q.x1[i] + 1.0), (-1e6, 1e6), None][rng.integers(3)]
        cols["x2"][i] = (None, 2.0 + q.x2[i]) if rng.random() < 0.5 else None
        cols["x4"][i] = (-3.0, 3.0) if rng.random() < 0.3 else None
        lv = set(rng.choice(list("abcd"), rng.integers(2, 5), replace=False).tolist())
        cols["c0"][i] = (lv if rng.random() < 0.7 else Not({"a"})) if rng.random() < 0.7 \
            else None
        cols["c1"][i] = [{"hi"}, {"hi", "lo"}, None][rng.integers(3)]
        cols["i0"][i] = (-1, int(q.i0[i]) + 2) if rng.random() < 0.4 else None
    return pd.DataFrame(cols, dtype=object)


@pytest.fixture(scope="module")
def prune_models(models):
    df = _table(600)
    return {**models,
            "local": paper_arf(n_trees=3, finite_bounds="local", epsilon=0.3, alpha=0.2,
                         random_state=4, n_jobs=1).fit(df),
            "gef": GeF(n_trees=3, random_state=5).fit(df, target="c1")}


@pytest.mark.parametrize("name", ["arf", "smooth", "unif", "tail", "local", "gef"])
def test_containment_pruning_equals_unpruned_walk(prune_models, name):
    """The pruned walk equals the unpruned one (and the enumeration) to 1e-10, per row and
    for one broadcast condition set, and prunes: fewer leaves scored on wide evidence."""
    m = prune_models[name]
    for cond in (_wide_conditions(150, seed=len(name)), _conditions(80, seed=len(name) + 1)):
        ev = _with_empty_sets(m, evidence_from_frame(m, cond), every=13)
        done, got, n_got = evidence_log_mass(m, ev, leaves=True)
        done0, ref, n_ref = evidence_log_mass(m, ev, prune=False, leaves=True)
        assert (done == done0).all() and done.sum() > len(cond) // 4
        fin = np.isfinite(ref[done])
        assert (np.isfinite(got[done]) == fin).all() and (~fin).any()
        np.testing.assert_allclose(got[done][fin], ref[done][fin], rtol=0, atol=1e-10)
        enum = _reference(m, ev)
        np.testing.assert_allclose(got[done][fin], enum[done][fin], rtol=0, atol=1e-10)
        assert (n_got[done] <= n_ref[done]).all()
    ev = evidence_from_frame(m, _wide_conditions(150, seed=len(name)))
    _, _, n_got = evidence_log_mass(m, ev, leaves=True)
    _, _, n_ref = evidence_log_mass(m, ev, prune=False, leaves=True)
    assert (n_got < n_ref).mean() > 0.15 and n_got.sum() < n_ref.sum()
    one = {"x0": (-1e6, 0.5), "c0": {"a", "b", "c"}, "x2": (None, 3.0)}
    if name == "gef":
        one.pop("x2")
    np.testing.assert_allclose(evidence_log_prob(m, one), _reference(
        m, parse_conditions(m, one)[0])[0], rtol=0, atol=1e-10)


def test_containment_flags_are_computed(prune_models):
    """Smoothing over a box's levels keeps a leaf's bit; a leaf model without an in-kernel
    factor loses it. (A leaf whose truncation reached past its cell, ``finite_bounds='local'``
    with ``epsilon``, lost its bit; leaves now end at their cells, inside the support.)"""
    m = prune_models["local"]
    st = subtree_tables(m)
    pack = leaf_pack(m)
    names = m.encoder_.schema.names
    leaf = (pack.nodes[0][:, 1] >> 2) & 1 == 1
    bit = {c: (st.ok >> names.index(c)) & 1 for c in names}
    assert bit["x0"][leaf].all()  # every truncation ends at its cell (issue 32)
    assert bit["c0"][leaf].all() and bit["c1"][leaf].all()  # alpha over the allowed levels
    assert not bit["x3"].any()  # the point mass's leaf model has no in-kernel factor
    node, _, roots = pack.nodes
    inner = np.flatnonzero(~leaf)
    lft = node[inner, 1] >> 24
    assert ((st.ok[inner] & ~(st.ok[lft] & st.ok[inner + 1])) == 0).all()
    lw = np.logaddexp(st.logw[lft], st.logw[inner + 1])
    np.testing.assert_allclose(st.logw[inner], lw, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.logaddexp.reduce(st.logw[roots]),
                               np.logaddexp.reduce(m.leaf_log_weight_), rtol=0, atol=1e-12)


def test_impossible_evidence_raises_with_pruning(prune_models):
    m = prune_models["unif"]
    X = _table(3, seed=9)
    with pytest.raises(ZeroProbabilityError, match="x0"):
        m.log_prob(X, conditions={"x0": (1e6, 2e6), "c0": {"a", "b", "c", "d"}})
    cond = pd.DataFrame({"x0": [(None, None)] * 3, "c1": [{"hi", "lo"}] * 3}, dtype=object)
    ev = evidence_from_frame(m, cond)
    _, lm, n = evidence_log_mass(m, ev, leaves=True)
    assert (n == 0).all()  # the whole forest inside the evidence: no leaf scored
    np.testing.assert_allclose(lm, 0.0, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- linear space


class _Linear(NamedTuple):
    pi: np.ndarray
    edge: np.ndarray
    slot: np.ndarray


@njit
def _both_weights(ev, tabs, lin_tables, n_rec):
    """Per (row, leaf record): the linear-space weight and the log-space one."""
    X, lo, sact = ev.X, ev.lo, ev.sact
    m, d = X.shape
    lin = np.empty((m, n_rec))
    lg = np.empty((m, n_rec))
    ecols = np.empty(d, np.int64)
    icols = np.empty(d, np.int64)
    scols = np.empty(d, np.int64)
    scratch = np.zeros((1, tabs[9].shape[1]))
    for i in range(m):
        ne, ni, ns = row_columns(i, X, lo, sact, ecols, icols, scols)
        for r in range(n_rec):
            lin[i, r] = row_linear_weight(i, r, ev, icols.reshape(1, d), ni,
                                          scols.reshape(1, d), ns, tabs, lin_tables)
            lg[i, r] = row_log_weight(i, r, ev, ecols, ne, icols, ni, scols, ns, tabs,
                                      scratch)
    return lin, lg


@pytest.mark.parametrize("name", ["arf", "smooth", "unif", "local"])
def test_linear_leaf_weights_equal_log_weights(prune_models, name):
    """Every leaf's linear-space weight is the exponential of its log-space weight to a
    relative 1e-12 (zero where that is -inf), or -1 (left to log space) only where the weight
    lies beyond linear space's reach (below 1e-280), as in the far-tail rows."""
    m = prune_models[name]
    cond = _conditions(60, seed=7).drop(columns=["x3"])
    cond.loc[3, "x0"] = (-0.3, 1e-9)  # both ends near 0 of some leaves' standardised axis
    ev = evidence_from_frame(m, cond)
    ev.point[:] = np.nan  # (intervals and level sets only: the rows the linear path takes)
    rows = np.flatnonzero(kernel_rows(m, ev, np.arange(ev.m)))
    lo, hi, sact, smask, soff, sk = evidence_arrays(ev, rows)
    pack, lt = leaf_pack(m), linear_tables(m)
    er = EvidenceRows(np.ascontiguousarray(ev.point[rows]), lo, hi, sact, smask, soff, sk)
    lin, lg = _both_weights(er, pack.args, _Linear(lt.pi, lt.edge, lt.slot), len(pack.leaf_id))
    fast = lin >= 0
    assert fast.mean() > 0.9
    assert ((lin[fast] == 0) == (lg[fast] == -np.inf)).all()
    pos = fast & (lin > 0)
    np.testing.assert_allclose(np.log(lin[pos]), lg[pos], rtol=0, atol=1e-12)
    assert (lg[~fast] < np.log(1e-280)).all() or name == "unif"  # (uniform: never -1)
    far = np.array([isinstance(v, tuple) and v[0] is not None and v[0] >= 40
                    for v in cond.x0])[rows]
    # far past the training range: no mass in any leaf (the support ends there, issue 32)
    assert far.any() and (lg[far] == -np.inf).all()


@pytest.mark.parametrize("name", ["arf", "unif", "local"])
def test_block_walk_does_not_depend_on_blocks_threads_or_order(prune_models, name,
                                                                monkeypatch):
    """Rows walking the trees in blocks give the same sums bit for bit whatever the block
    size, the thread count and the order of the rows, equal to the enumeration to 1e-10."""
    from forestgen.inference import evidence_mass

    m = prune_models[name]
    cond = pd.concat([_wide_conditions(60, seed=3), _conditions(60, seed=4)],
                     ignore_index=True).drop(columns=["x3"])
    ev = _with_empty_sets(m, evidence_from_frame(m, cond), every=17)
    ev.point[:] = np.nan
    ref = _reference(m, ev)
    runs = []
    for block in (1, 3, 64):
        monkeypatch.setattr(evidence_mass, "BLOCK", block)
        runs.append(evidence_log_mass(m, ev, leaves=True))
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        runs.append(evidence_log_mass(m, ev, leaves=True))
    finally:
        numba.set_num_threads(threads)
    perm = np.random.default_rng(0).permutation(ev.m)
    done, got, n = evidence_log_mass(m, ev, rows=perm, leaves=True)
    inv = np.argsort(perm)
    runs.append((done[inv], got[inv], n[inv]))
    done, got, n = runs[0]
    assert done.all() and np.isinf(got).any() and np.isfinite(got).sum() > 80
    for d2, g2, n2 in runs[1:]:
        assert np.array_equal(g2, got) and np.array_equal(n2, n) and d2.all()
    fin = np.isfinite(ref)
    assert (np.isfinite(got) == fin).all()
    np.testing.assert_allclose(got[fin], ref[fin], rtol=0, atol=1e-10)


def test_interval_log_mass_is_the_evidence_mass_of_latent_pieces():
    """``interval_log_mass`` scores latent pieces ``(lo, hi]`` of one column, with or without
    a condition set: the pieces of a partition sum to one (to the condition's mass), and a
    piece is the evidence mass of the same interval given as a condition."""
    from forestgen.inference import interval_log_mass
    from forestgen.learners import NRGBoost
    from forestgen.testing.statistical import statistical_table

    train = statistical_table()
    m = paper_arf(n_trees=5, random_state=0).fit(train)
    j = m.schema_.names.index("x")
    v = np.quantile(train["x"].dropna(), [0.1, 0.3, 0.5, 0.9])
    lo, hi = np.concatenate([[-np.inf], v]), np.concatenate([v, [np.inf]])
    for cond in (None, {"c": "mid"}):
        pieces = np.exp(interval_log_mass(m, j, lo, hi, cond))
        whole = 1.0 if cond is None else np.exp(evidence_log_prob(m, cond))
        assert pieces.sum() == pytest.approx(whole, rel=1e-12)
        for a, b, p in zip(v[:-1], v[1:], pieces[1:-1]):
            given = {"x": (a, b), **(cond or {})}  # [a, b]: the latent (nextafter(a), b]
            lat = interval_log_mass(m, j, [np.nextafter(a, -np.inf)], [b], cond)[0]
            assert lat == pytest.approx(evidence_log_prob(m, given), rel=1e-12)
            assert np.exp(lat) == pytest.approx(p, rel=1e-9)  # a has no mass of its own
    assert interval_log_mass(m, j, [1.0], [1.0])[0] == -np.inf
    with pytest.raises(ValueError, match="'c' is discrete"):
        interval_log_mass(m, m.schema_.names.index("c"), [0.0], [1.0])
    with pytest.raises(ValueError, match="fix column 'x', the interval's own"):
        interval_log_mass(m, j, [0.0], [1.0], {"x": 0.5})
    a, b, c = v[0], v[1], v[2]  # an interval on x in the conditions intersects each piece
    both = interval_log_mass(m, j, [np.nextafter(a, -np.inf), a], [b, c], {"x": (a, b)})
    assert both[0] == pytest.approx(evidence_log_prob(m, {"x": (a, b)}), rel=1e-12)
    assert both[1] == pytest.approx(interval_log_mass(m, j, [a], [b])[0], rel=1e-12)
    assert interval_log_mass(m, j, [b], [c], {"x": (a, b)})[0] == -np.inf
    with pytest.raises(ValueError, match="equal length"):
        interval_log_mass(m, j, [0.0, 1.0], [1.0])
    nrg = NRGBoost(n_trees=2, random_state=0).fit(train)
    with pytest.raises(NotImplementedError, match="NRGBoost"):
        interval_log_mass(nrg, j, [0.0], [1.0])
