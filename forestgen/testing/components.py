"""Conformance checks of the ``ensembler`` and ``sampler`` slots: the component alone, then
inside a learner of each family it declares it ``serves``."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from forestgen.testing.fixtures import check_that, small_tables
from forestgen.validation import InputWarning

#: a small learner of each family, by the contract name a component serves
_LEARNERS = {
    "leaf mixture": ("arf", dict(n_trees=5, random_state=0, n_jobs=1)),
    "intersection": ("gfboost", dict(n_trees=5, n_iter=30, random_state=0)),
    "energy": ("nrgboost", dict(n_trees=4, max_leaves=8, pool_size=2000, gibbs_burn_in=10,
                                n_normaliser_samples=5000, sample_burn_in=10, random_state=0)),
}


def _learner(family: str, slot: str, component, learner=None):
    from forestgen import registry

    if learner is not None:
        return type(learner)(**{**learner.get_params(), slot: component})
    name, params = _LEARNERS[family]
    return registry.get("learner", name)(**params, **{slot: component})


def _families(component, kind: str) -> list[str]:
    serves = sorted(getattr(component, "serves", ()))
    check_that(len(serves) > 0, f"{type(component).__name__}.serves",
               f"a {kind} must declare the families it serves (e.g. frozenset({{'leaf mixture'}}))")
    unknown = [f for f in serves if f not in _LEARNERS]
    check_that(not unknown, f"{type(component).__name__}.serves",
               f"unknown families {unknown}; known: {sorted(_LEARNERS)}")
    return serves


def _pmf_total(m, train: pd.DataFrame, column: str) -> float:
    levels = list(pd.Series(train[column].dropna().unique()))
    levels += [v for v in (m.schema_[column].categories or []) if v not in set(levels)]
    frame = pd.DataFrame({k: [np.nan] * len(levels) for k in train.columns})
    frame[column] = levels
    return float(np.exp(m.log_prob(frame)).sum())


def _reloaded(m, slot: str, query: pd.DataFrame, where: str):
    from forestgen.base import GenerativeForest

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.fgm"
        m.save(path)
        again = GenerativeForest.load(path)
    a, b = m.component(slot), again.component(slot)
    check_that(type(a) is type(b) and a.get_params() == b.get_params(), f"{where}: save/load",
               f"the {slot} reloads as {b!r}, not {a!r}")
    check_that(np.array_equal(m.log_prob(query), again.log_prob(query), equal_nan=True),
               f"{where}: save/load", "log_prob differs after reloading")
    return again


# ----------------------------------------------------------------------------- ensemblers


def check_ensembler(ensembler, *, learner=None, random_state: int = 0) -> None:
    """Check an :class:`~forestgen.ensemble.base.Ensembler` (an instance, or for the energy
    family its class): declared ``serves``; for leaf mixtures, leaf weights that sum to one
    over the forest (trees may weigh differently) from counts with empty leaves, and
    ``combine`` equal to ``combine_dense`` on complete rows, ``-inf`` for a row reaching no
    leaf, no NaN from finite or ``-inf`` scores; then, inside a learner of each family it
    serves (``learner``, or a small built-in one) on a small mixed table: the model is used
    (``component("ensembler")`` is of its class), a normalised model's marginal pmf of a
    discrete column sums to one, and save/load gives back the same ensembler and the same
    ``log_prob``."""
    from forestgen.ensemble.base import Ensembler

    cls = ensembler if isinstance(ensembler, type) else type(ensembler)
    if not issubclass(cls, Ensembler):
        raise TypeError(f"check_ensembler needs an Ensembler, got {ensembler!r}")
    name = cls.__name__
    rng = np.random.default_rng(random_state)
    for family in _families(cls, "ensembler"):
        if family == "leaf mixture":
            _check_mixture_contract(ensembler, name, rng)
        train, query = small_tables(random_state)["mixed"]
        m = _learner(family, "ensembler", ensembler, learner).fit(train)
        where = f"{name} in {type(m).__name__}"
        check_that(type(m.component("ensembler")) is cls, where,
                   f"the model combines with {type(m.component('ensembler')).__name__}")
        lp = m.log_prob(query)
        check_that(not np.isnan(lp).any(), f"{where}: log_prob", "NaN densities")
        if m.component("ensembler").normalised:
            tot = _pmf_total(m, train, "colour")
            check_that(abs(tot - 1.0) < 1e-6, f"{where}: normalisation",
                       f"the marginal pmf of 'colour' sums to {tot:.6f}")
        _reloaded(m, "ensembler", query, where)


def _check_mixture_contract(ens, name: str, rng: np.random.Generator) -> None:
    B, per = 3, 4
    leaf_tree = np.repeat(np.arange(B), per)
    cnt = rng.integers(0, 6, B * per).astype(float)
    cnt[[1, 6]] = 0.0  # empty leaves
    for t in range(B):
        cnt[t * per] += 1.0  # every tree has rows
    lw = np.asarray(ens.leaf_log_weights_from_counts(cnt, leaf_tree, B), float)
    check_that(lw.shape == (B * per,) and not np.isnan(lw).any() and not (lw == np.inf).any(),
               f"{name}.leaf_log_weights_from_counts", "one weight per leaf, no NaN or +inf")
    if ens.normalised:  # a mixture: the whole forest's weights sum to one (any tree weights)
        total = float(np.exp(lw).sum())
        check_that(abs(total - 1.0) <= 1e-9, f"{name}.leaf_log_weights_from_counts",
                   f"the leaf weights must sum to one over the forest; they sum to {total}")
    scores = rng.normal(size=(B, 7)) * 3.0
    scores[:, 2] = -np.inf  # a row no leaf gives mass
    scores[0, 4] = -np.inf
    dense = np.asarray(ens.combine_dense(scores), float)
    seg = np.asarray(ens.combine(np.arange(8) * B, scores.T.ravel()), float)
    check_that(dense.shape == (7,) and np.allclose(dense, seg, rtol=1e-12, equal_nan=False),
               f"{name}.combine", "combine and combine_dense disagree on complete rows")
    check_that(np.isneginf(dense[2]) and not np.isnan(dense).any(), f"{name}.combine",
               "a row whose scores are all -inf must give -inf, and no score gives NaN")
    empty = np.asarray(ens.combine(np.array([0, 0, 2]), np.array([0.5, -1.0])), float)
    check_that(np.isneginf(empty[0]) and np.isfinite(empty[1]), f"{name}.combine",
               "a row reaching no leaf must give -inf")


# ----------------------------------------------------------------------------- samplers


def check_sampler(sampler, *, learner=None, random_state: int = 0, n: int = 4000) -> None:
    """Check a :class:`~forestgen.sampling.base.Sampler` instance inside a learner of each
    family it declares it ``serves`` (``learner``, or a small built-in one), on a small mixed
    table: the model draws through it; draws have the training columns and levels, finite
    numbers, the same rows for the same seed; their level frequencies of a discrete column
    match the model's own marginal pmf (``log_prob`` with the other columns missing; total
    variation below ``0.05`` for leaf mixtures, ``0.1`` for Gibbs chains); for leaf mixtures
    ``draw_leaves`` draws leaves with the given probabilities, conditional draws honour
    their evidence and follow the model's conditional pmf, and the draws keep the dependence
    between two columns (:func:`_check_dependence`); save/load gives back the same sampler."""
    from forestgen.sampling.base import Sampler

    if not isinstance(sampler, Sampler):
        raise TypeError(f"check_sampler needs a Sampler instance, got {sampler!r}")
    name = type(sampler).__name__
    rng = np.random.default_rng(random_state)
    for family in _families(sampler, "sampler"):
        train, query = small_tables(random_state)["mixed"]
        m = _learner(family, "sampler", sampler, learner).fit(train)
        where = f"{name} in {type(m).__name__}"
        check_that(type(m.component("sampler")) is type(sampler), where,
                   f"the model draws with {type(m.component('sampler')).__name__}")
        tol = 0.1 if family == "energy" else 0.05
        k = n // 4 if family == "energy" else n
        s = m.sample(k, random_state=random_state)
        check_that(list(s.columns) == list(train.columns) and len(s) == k, f"{where}: sample",
                   "wrong shape or columns")
        again = m.sample(k, random_state=random_state)
        pd.testing.assert_frame_equal(s, again, obj=f"{where}: same seed, same sample")
        for c in ("amount", "count", "spike"):
            v = s[c].dropna().to_numpy(float)
            check_that(np.isfinite(v).all(), f"{where}: sample", f"non-finite draws in {c!r}")
        check_that(set(s["colour"].dropna()) <= set(train["colour"].dropna()),
                   f"{where}: sample", "unknown levels drawn")
        _check_frequencies(m, s, train, "colour", tol, where)
        if family != "energy":
            _check_leaf_draws(sampler, name, rng)
            cond = m.sample(k, conditions={"c": "yes"}, random_state=random_state)
            check_that(bool((cond["c"] == "yes").all()), f"{where}: conditions",
                       "conditional draws do not keep their evidence")
            _check_frequencies(m, cond, train, "colour", tol, f"{where}: conditional",
                               given={"c": "yes"})
            _check_dependence(m, s, train, tol, where)
        _reloaded(m, "sampler", query, where)


def _check_frequencies(m, s, train, column, tol, where, given=None) -> None:
    levels = sorted(train[column].dropna().unique())
    frame = pd.DataFrame({k: [np.nan] * len(levels) for k in train.columns})
    frame[column] = levels
    if given:
        for k, v in given.items():
            frame[k] = v
        base = frame.iloc[[0]].copy()
        base[column] = np.nan
        p = np.exp(m.log_prob(frame) - m.log_prob(base)[0])
    else:
        p = np.exp(m.log_prob(frame))
    drawn = s[column].dropna()
    freq = np.array([(drawn == lv).mean() for lv in levels])
    tv = 0.5 * np.abs(freq / max(freq.sum(), 1e-300) - p / p.sum()).sum()
    check_that(tv < tol, f"{where}: law", f"level frequencies of {column!r} {np.round(freq, 3)} "
               f"vs the model's pmf {np.round(p / p.sum(), 3)} (total variation {tv:.3f})")


def _check_dependence(m, s, train, tol, where) -> None:
    """The joint law, not only the marginals: among draws with ``count`` above its training
    median, the share of ``c == "yes"`` against the model's ``P(c = yes | count > median)``
    (``c`` and ``count`` depend on each other in the table; a sampler drawing each column from
    its own leaf keeps every marginal and loses this)."""
    cut = float(np.median(train["count"]))
    frame = pd.DataFrame({k: [np.nan, np.nan] for k in train.columns})
    frame["c"] = ["yes", "no"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        p = np.exp(m.log_prob(frame, conditions={"count": (cut, None)}))
    drawn = s.loc[s["count"] > cut, "c"].dropna()
    share = float((drawn == "yes").mean()) if len(drawn) else np.nan
    want = float(p[0] / p.sum())
    check_that(len(drawn) > 0 and abs(share - want) < tol, f"{where}: joint law",
               f"P(c = yes | count > {cut:g}) is {share:.3f} in the draws, {want:.3f} under the "
               f"model")


def _check_leaf_draws(sampler, name: str, rng: np.random.Generator, n: int = 20000) -> None:
    w = np.array([0.5, 0.0, 0.2, 0.3])
    with np.errstate(divide="ignore"):
        leaf = np.asarray(sampler.draw_leaves(np.log(w) - 7.0, n, rng))
    check_that(leaf.shape == (n,) and leaf.dtype.kind == "i", f"{name}.draw_leaves",
               "must return n integer leaf ids")
    freq = np.bincount(leaf, minlength=4) / n
    check_that(freq[1] == 0 and np.all(np.abs(freq - w) < 5 * np.sqrt(w * (1 - w) / n) + 1e-9),
               f"{name}.draw_leaves", f"frequencies {freq} vs probabilities {w}")


# ----------------------------------------------------------------------------- cell-table splitters


def check_cell_splitter(splitter, *, random_state: int = 0) -> None:
    """Check a splitter that grows the joint cell table (``grows == "cell table"``, GF.Boost /
    EOGT's Bayes-risk rule) inside the learner of its kind: every split lowers (or keeps) the
    partition's Bayes risk, the risk after training equals the splitter's risk of the fitted
    cells, training twice gives the same model, and :meth:`grow` refuses to grow a lone
    tree."""
    from forestgen import registry

    name = type(splitter).__name__
    learner = "eogt" if getattr(splitter, "approx", False) else "gfboost"
    train = small_tables(random_state)["numeric"][0]
    make = registry.get("learner", learner)
    m = make(n_trees=3, n_iter=20, splitter=splitter, random_state=random_state).fit(train)
    path = np.asarray(m.risk_path_)
    check_that(len(path) > 3 and np.all(np.diff(path) <= 1e-12), f"{name} in {learner}",
               f"the Bayes risk must not grow with a split: {np.round(path, 6)}")
    if learner == "gfboost":
        check_that(abs(m.cell_risk() - path[-1]) < 1e-9, f"{name} in {learner}",
                   f"risk of the fitted cells {m.cell_risk():.9f} vs training path {path[-1]:.9f}")
    again = make(**m.get_params()).fit(train)
    check_that(np.array_equal(m.log_prob(train), again.log_prob(train)), f"{name} in {learner}",
               "training twice gave different models")
    try:
        splitter.grow(None, None, None, None, None)
    except NotImplementedError:
        pass
    else:
        check_that(False, f"{name}.grow", "a cell-table splitter must not grow a lone tree")


# ----------------------------------------------------------------------------- energy parts


def _small_energy(random_state: int, **kw):
    from forestgen import registry

    train = small_tables(random_state)["numeric"][0]
    params = dict(n_trees=3, max_leaves=4, max_bins=6, pool_size=1000, gibbs_burn_in=5,
                  n_normaliser_samples=2000, sample_burn_in=5, random_state=random_state)
    return registry.get("learner", "nrgboost")(**{**params, **kw}).fit(train)


def _exact_log_z(energy) -> float:
    from forestgen.logsumexp import logsumexp

    grid = energy.grid
    sizes = np.diff(grid.code_offsets)
    codes = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), -1)
    C = codes.reshape(-1, len(sizes))
    return float(logsumexp(energy.energy(C)))


def check_normaliser(normaliser, *, random_state: int = 0) -> None:
    """Check a :class:`~forestgen.families.energy.normaliser.Normaliser` on a small NRGBoost
    whose grid can be enumerated: its ``(log Z, standard error)`` is finite, the error
    positive, and the estimate within five standard errors (plus 0.05) of the exact ``log Z``;
    the same Generator seed gives the same estimate."""
    from forestgen.families.energy.normaliser import Normaliser

    if not isinstance(normaliser, Normaliser):
        raise TypeError(f"check_normaliser needs a Normaliser instance, got {normaliser!r}")
    name = type(normaliser).__name__
    m = _small_energy(random_state)
    est, se = normaliser.estimate(m.energy_, np.random.default_rng(random_state))
    again = normaliser.estimate(m.energy_, np.random.default_rng(random_state))
    check_that(np.isfinite(est) and se > 0, f"{name}.estimate", f"gave ({est}, {se})")
    check_that((est, se) == tuple(again), f"{name}.estimate", "the same seed gave another estimate")
    exact = _exact_log_z(m.energy_)
    check_that(abs(est - exact) < 5 * se + 0.05, f"{name}.estimate",
               f"log Z {est:.4f} ± {se:.4f}, exactly {exact:.4f}")


def check_energy_leaf(leaf) -> None:
    """Check an :class:`~forestgen.families.energy.leaf.EnergyLeaf`: one finite value per leaf,
    zero where the data and the model put the same mass (``P == Q``), larger where the data
    put more (increasing in ``P``), and an error for a leaf of zero model mass."""
    from forestgen.families.energy.leaf import EnergyLeaf

    if not isinstance(leaf, EnergyLeaf):
        raise TypeError(f"check_energy_leaf needs an EnergyLeaf instance, got {leaf!r}")
    name = type(leaf).__name__
    P = np.array([0.1, 0.2, 0.3, 0.05, 0.35])
    Q = np.array([0.1, 0.3, 0.2, 0.25, 0.15])
    v = np.asarray(leaf.values(P, Q), float)
    check_that(v.shape == P.shape and np.isfinite(v).all(), f"{name}.values", f"gave {v}")
    check_that(abs(v[0]) < 1e-12, f"{name}.values", "P == Q must give energy 0")
    v2 = np.asarray(leaf.values(P * 1.5, Q), float)
    check_that(np.all(v2 > v), f"{name}.values", "more data mass must give a larger energy")
    try:
        leaf.values(P, np.r_[Q[:-1], 0.0])
    except ValueError:
        pass
    else:
        check_that(False, f"{name}.values", "a leaf of zero model mass must raise ValueError")
