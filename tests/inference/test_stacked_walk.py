"""The fused walk of a backed-off model (stacked leaves, stop 54) gives the enumerating path's
values: its head's trees packed, the back-off tree's leaf scored by the pair scorer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.inference.api as api
from forestgen.families.mixture.arf import ARF
from forestgen.families.mixture.stacked import StackedLeaf
from forestgen.inference import evidence_mass, leaf_factors, marginal_walk
from forestgen.inference.conditions import parse_conditions
from forestgen.inference.leaf_factors import fused_head, leaf_kind, leaf_pack
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.marginal_cell import MarginalCellLeaf
from forestgen.leaves.truncnorm import TruncNormalLeaf


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    cat = rng.integers(0, 4, n)
    return pd.DataFrame({
        "x0": z[:, 0] + 0.5 * cat, "x1": np.exp(0.4 * z[:, 1]) + 0.3 * z[:, 0],
        "spend": np.where(rng.random(n) < 0.6, 0.0, rng.gamma(2.0, 10.0, n)),
        "rating": rng.integers(1, 11, n), "i0": rng.integers(0, 4, n) + (z[:, 0] > 0),
        "c0": np.array(list("abcd"))[cat], "b0": rng.random(n) < 0.3 + 0.4 * (z[:, 1] > 0)})


def _queries(n, seed, frac=0.3, spend=False):
    q = _table(n, seed).astype({"rating": float, "i0": float, "b0": object})
    if not spend:
        q = q.drop(columns="spend")
    rng = np.random.default_rng(seed + 100)
    for c in q.columns:
        q.loc[rng.random(n) < frac, c] = np.nan
    return q


@pytest.fixture(scope="module")
def backed():
    """ARF with a back-off tree of weight 0.3: every column a stacked leaf, FORDE's truncated
    normals and pmfs for the forest's leaves, the marginals for the back-off leaf."""
    m = ARF(n_trees=4, marginal_weight=0.3, random_state=1, n_jobs=1).fit(
        _table(600).drop(columns="spend"))
    assert all(isinstance(lm, StackedLeaf) for lm in m.leaf_models_)
    return m


@pytest.fixture(scope="module")
def backed_mixed():
    """The same with a zero-inflated column (point-mass leaves: no in-kernel factor)."""
    m = ARF(n_trees=3, marginal_weight=0.2, random_state=2, n_jobs=1).fit(_table(500))
    assert all(isinstance(lm, StackedLeaf) for lm in m.leaf_models_)
    return m


def _enumerated(monkeypatch, fn):
    """``fn()`` on the enumerating paths (no fused head: the model as before stop 54)."""
    with monkeypatch.context() as mp:
        for mod in (leaf_factors, marginal_walk, evidence_mass):
            mp.setattr(mod, "fused_head", lambda model: None)
        return fn()


def _col(model, name):
    return list(model.encoder_.schema.names).index(name)


def test_head_is_the_forest_and_tail_the_backoff_leaf(backed):
    head = fused_head(backed)
    f = backed.forest_
    assert head is fused_head(backed)  # kept while the model lives
    assert head.forest_.n_trees == f.n_trees - 1 == 4
    assert list(head.tail) == [f.n_leaves - 1]  # the back-off tree's one leaf
    L0 = head.forest_.n_leaves
    assert L0 == f.n_leaves - 1 == backed.leaf_models_[0].sizes[0]
    assert np.array_equal(head.leaf_log_weight_, backed.leaf_log_weight_[:L0])
    kinds = {type(lm) for lm in head.leaf_models_}
    assert TruncNormalLeaf in kinds and CategoricalLeaf in kinds  # FORDE's own leaves
    assert all(h is lm.parts[0] for h, lm in zip(head.leaf_models_, backed.leaf_models_))
    tail_kinds = {type(p) for lm in backed.leaf_models_ for p in lm.parts[1:]}
    assert MarginalCellLeaf in tail_kinds and MarginalCellLeaf not in kinds  # the histograms
    assert all(leaf_kind(lm) for lm in head.leaf_models_)
    assert marginal_walk.fused_rows(backed, np.zeros((1, f.n_levels.shape[0]))).all()
    # the head's leaves are the model's: same leaf of the first trees for any row
    Z = backed.encode_rows(_queries(50, 1, frac=0.0), missing_columns="nan")
    assert np.array_equal(head.forest_.apply(Z), f.apply(Z)[:, :-1])
    # the paper's model and a model whose stacked parts do not end in trees that never
    # split have no head
    assert fused_head(ARF(n_trees=2, marginal_weight=0, random_state=0, n_jobs=1).fit(
        _table(200).drop(columns="spend"))) is None


def test_no_head_where_the_tail_splits_or_sizes_differ(backed):
    class View:
        def __init__(self, forest, models):
            self.forest_, self.leaf_models_ = forest, models
            self.leaf_log_weight_ = backed.leaf_log_weight_
            self.encoder_ = backed.encoder_

    f = backed.forest_
    L = f.n_leaves
    cut = int(f.leaf_offsets[-3])  # the tail would hold the forest's last tree, which splits
    assert f.leaf_offsets[-2] - cut > 1
    moved = [StackedLeaf(parts=[lm.parts[0], lm.parts[1]], sizes=[cut, L - cut])
             for lm in backed.leaf_models_]
    assert fused_head(View(f, moved)) is None
    odd = [StackedLeaf(parts=[lm.parts[0], lm.parts[1]], sizes=[cut + 1, L - cut - 1])
           for lm in backed.leaf_models_]
    assert fused_head(View(f, odd)) is None  # a part that ends inside a tree
    mixed = list(backed.leaf_models_[:-1]) + [backed.leaf_models_[-1].parts[0]]
    assert fused_head(View(f, mixed)) is None  # a column not stacked


@pytest.mark.parametrize("name", ["backed", "backed_mixed"])
def test_nan_log_prob_matches_enumeration(request, monkeypatch, name):
    m = request.getfixturevalue(name)
    q = _queries(300, 3, spend=name == "backed_mixed")
    q.loc[q.index[0], ["x0", "x1"]] = [1e6, np.nan]  # past the range: probability 0
    seen = []
    real = marginal_walk.marginal_log_prob
    monkeypatch.setattr(marginal_walk, "marginal_log_prob",
                        lambda model, Z: seen.append(len(Z)) or real(model, Z))
    fused = m.log_prob(q, floor=None)
    Z = m.encode_rows(q, missing_columns="nan")
    n_fused = marginal_walk.fused_rows(m, Z).sum()
    assert sum(seen) == n_fused > 50
    if name == "backed_mixed":  # rows with the point-mass column observed fall back
        assert n_fused < len(Z)
    seen.clear()
    ref = _enumerated(monkeypatch, lambda: m.log_prob(q, floor=None))
    assert not seen  # (the reference took the enumerating path)
    assert fused[0] == ref[0] == -np.inf
    assert np.array_equal(np.isfinite(fused), np.isfinite(ref))
    assert np.isfinite(fused).sum() > 250
    np.testing.assert_allclose(fused, ref, rtol=1e-12, atol=1e-12)
    # every entry missing: log 1
    empty = np.full((3, Z.shape[1]), np.nan)
    np.testing.assert_allclose(marginal_walk.marginal_log_prob(m, empty), 0.0, atol=1e-12)


def test_moments_match_enumeration(backed, monkeypatch):
    q = _queries(300, 6)
    calls = []
    real = marginal_walk.marginal_moments
    monkeypatch.setattr(api, "marginal_moments", lambda *a: calls.append(1) or real(*a))

    def run():
        return ((backed.predict_proba(q, target="c0"), backed.predict_proba(q, target="b0"),
                 backed.predict(q, target="x1"), backed.predict(q, target="rating")),
                backed.impute(q), backed.expect(["x0", "i0", "c0"], conditions=q[["x1", "c0"]]))

    fused, imp, ex = run()
    assert len(calls) == 6
    calls.clear()
    ref, ref_imp, ref_ex = _enumerated(monkeypatch, run)
    assert not calls
    for a, b in zip(fused, ref):
        a, b = np.asarray(a, float), np.asarray(b, float)
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fused[0].sum(1), 1.0, rtol=1e-12)
    for got, want in ((imp, ref_imp), (ex, ref_ex)):
        for c in got.columns:
            if got[c].dtype.kind == "f":
                np.testing.assert_allclose(got[c].astype(float), want[c].astype(float),
                                           rtol=1e-12)
            else:
                assert got[c].equals(want[c])
    assert not imp.isna().any().any()


def test_prior_moments_weigh_the_backoff_leaf(backed):
    """A row with every entry missing: the prior mixture of every leaf's pmf, the back-off
    leaf's with weight 0.3."""
    Z = np.full((1, len(backed.leaf_models_)), np.nan)
    head = fused_head(backed)
    tail = int(head.tail[0])
    c0 = _col(backed, "c0")
    lp, mom = marginal_walk.marginal_moments(backed, Z, [c0])
    assert lp[0] == pytest.approx(0.0, abs=1e-12)
    w = np.exp(backed.leaf_log_weight_)
    pmf = backed.leaf_models_[c0].probs(np.arange(len(w)))
    np.testing.assert_allclose(mom[c0][0], w @ pmf, rtol=1e-12)
    assert w[tail] == pytest.approx(0.3)


def test_conditional_log_prob_and_evidence_mass_match_enumeration(backed, monkeypatch):
    """Point evidence goes through the walk (head and tail); intervals and level sets stay on
    the enumerating path; both give its values."""
    q = _queries(200, 7, frac=0.2)
    cond_pt = q[["x1", "c0"]]
    iv = pd.DataFrame({"x0": [(a - 0.5, a + 0.5) if np.isfinite(a) else None
                              for a in q["x0"]]}, dtype=object)
    ev, _ = parse_conditions(backed, cond_pt.dropna())
    done, mass = evidence_mass.evidence_log_mass(backed, ev)
    assert done.all()
    ev_iv, _ = parse_conditions(backed, iv.dropna())
    done_iv, _ = evidence_mass.evidence_log_mass(backed, ev_iv)
    assert not done_iv.any()

    def run():
        return (backed.log_prob(q, conditions=cond_pt),
                backed.log_prob(q, conditions=iv),
                evidence_mass.evidence_log_mass(backed, ev)[1])

    fused = run()
    ref = _enumerated(monkeypatch, run)
    ref_mass = ref[2]
    assert np.isnan(ref_mass).all()  # before: every row left to the enumerating path
    ch_mass = _enumerated(monkeypatch, lambda: api._lognorm(backed, ev))
    np.testing.assert_allclose(mass, ch_mass, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused[:2], ref[:2]):
        fin = np.isfinite(b)
        assert np.array_equal(np.isfinite(a), fin) and fin.sum() > 100
        np.testing.assert_allclose(a[fin], b[fin], rtol=1e-12, atol=1e-12)


def test_leaf_counts_include_the_backoff_leaf(backed):
    """A row without evidence reaches every leaf, the back-off's included."""
    Z = np.full((4, len(backed.leaf_models_)), np.nan)
    Z[:, _col(backed, "x1")] = [0.5, 1.0, 1.5, np.nan]
    ev, _ = parse_conditions(backed, pd.DataFrame({"x1": [0.5, 1.0, 1.5, None]},
                                                   dtype=object))
    done, lp, cnt = evidence_mass.evidence_log_mass(backed, ev, prune=False, leaves=True)
    assert done.all()
    f = backed.forest_
    assert cnt[3] == f.n_leaves  # no evidence: every leaf
    head = fused_head(backed)
    reach = head.forest_.reach(Z[:3])[0]
    assert np.array_equal(cnt[:3], np.diff(reach) + 1)
    full = pd.DataFrame({c: [np.nan] * 3 for c in backed.encoder_.schema.names})
    full["x1"] = Z[:3, 1]
    np.testing.assert_allclose(lp[:3], backed.log_prob(full, floor=None), rtol=1e-12)


def test_same_bits_for_any_order_block_and_thread_count(backed, monkeypatch):
    import numba

    Z = backed.encode_rows(_queries(400, 9), missing_columns="nan")
    cols = [_col(backed, "c0"), _col(backed, "x1"), _col(backed, "i0")]
    lp, mom = marginal_walk.marginal_moments(backed, Z, cols)
    perm = np.random.default_rng(1).permutation(len(Z))
    lp2, mom2 = marginal_walk.marginal_moments(backed, Z[perm], cols)
    assert np.array_equal(lp2, lp[perm])
    assert all(np.array_equal(mom2[j], mom[j][perm], equal_nan=True) for j in cols)
    for i in range(0, len(Z), 37):  # a row alone
        lp1, mom1 = marginal_walk.marginal_moments(backed, Z[i:i + 1], cols)
        assert np.array_equal(lp1, lp[i:i + 1])
        assert all(np.array_equal(mom1[j], mom[j][i:i + 1], equal_nan=True) for j in cols)
    before = numba.get_num_threads()
    try:
        for t in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
            numba.set_num_threads(t)
            lp3, mom3 = marginal_walk.marginal_moments(backed, Z, cols)
            assert np.array_equal(lp3, lp)
            assert all(np.array_equal(mom3[j], mom[j], equal_nan=True) for j in cols)
    finally:
        numba.set_num_threads(before)


def test_head_pack_is_smaller_than_a_pack_of_every_tree(backed):
    """The head's pack holds the forest's leaves with their in-kernel factors; the model's
    own pack (every column stacked: no factors) is kept for the evidence kernels."""
    head = fused_head(backed)
    hp = leaf_pack(head)
    assert len(hp.leaf_id) == head.forest_.n_leaves == backed.forest_.n_leaves - 1
    assert (hp.kind > 0).all()
    assert (leaf_pack(backed).kind == 0).all()
