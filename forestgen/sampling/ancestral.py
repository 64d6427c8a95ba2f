"""Ancestral sampling from a leaf mixture (FORGE, Watson et al. 2023 Alg. 3): pick a leaf of
the whole forest with probability ``cvg / B`` (tree uniform, then leaf by coverage, in one
draw), then every column independently from its leaf model, mapped to the column's values
(the support policy of :mod:`forestgen.data.support`).

Both steps are inverse-CDF draws from one uniform each. The leaf draw finds each uniform's
leaf through a guide table (Chen & Asau 1974: ``O(1)`` expected probes instead of a binary
search over all leaves), with the result of ``searchsorted``; the model's cumulative leaf
probabilities and guide table are built once and kept. The column draws read the
leaves' parameters in leaf order (the rows sorted by leaf, the draws put back in row order),
so the per-leaf tables stream through the cache instead of being read at random. Below
:data:`THREAD_ROWS` rows each row's values are those of drawing it alone
(:meth:`~forestgen.leaves.base.LeafModel.sample_uniform` from the uniforms ``sample`` would
draw, every column's uniforms from the one Generator in column order; from
:data:`COLUMN_ROWS` rows the columns are then drawn from their uniforms on the model's ``n_jobs``
threads, one task per column). From
:data:`THREAD_ROWS` rows on, the rows in leaf order are cut into chunks of
:data:`THREAD_ROWS`, and each (column, chunk) draws its uniforms from its own stream
(:func:`chunk_seeds`, seeded from the Generator), so the chunks are drawn on the model's
``n_jobs`` threads with the same bits at any thread count.
"""

from __future__ import annotations

import weakref

import numpy as np
from numba import njit, prange

from forestgen.parallel import parallel_kernel, thread_map
from forestgen.registry import register
from forestgen.sampling.base import Sampler, leaf_draws
from forestgen.sampling.missingness import blank
from forestgen.sampling.support import draw_column, draw_column_uniform

THREAD_ROWS = 16384  # draws from which (column, chunk) tasks run on the model's n_jobs threads
COLUMN_ROWS = 2048  # draws from which the columns (below THREAD_ROWS) run on n_jobs threads
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # AncestralSampler.table


def leaf_table(log_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse-CDF table of leaf weights ``exp(log_w)`` (normalised here): the cumulative
    probabilities and their guide table (:func:`_guide_table`). ``O(leaves)``, in two
    passes: a model's own table is built once (:meth:`AncestralSampler.table`)."""
    w = np.exp(log_w - np.max(log_w))
    cdf = _normalised_cumsum(w)
    return cdf, _guide_table(cdf)


def draw_leaves(log_w: np.ndarray, n: int, rng: np.random.Generator,
                table: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``n`` leaf ids with probabilities ``exp(log_w)`` (normalised here), by inverse CDF: the
    first leaf whose cumulative probability exceeds a uniform (``searchsorted(side="right")``,
    found through a guide table, :func:`_guided_draws`, in parallel from
    :data:`THREAD_ROWS` draws); ``table``: ``leaf_table(log_w)`` if already built."""
    cdf, guide = leaf_table(log_w) if table is None else table
    kernel = _guided_draws if n >= THREAD_ROWS else _guided_draws.serial
    return kernel(cdf, guide, rng.random(n))


def inverse_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``min(searchsorted(cdf, u, side="right"), len(cdf) - 1)`` for nondecreasing ``cdf``
    and ``u`` in ``[0, 1)``, through the guide table."""
    return _guided_draws(cdf, _guide_table(cdf), u)


@njit(cache=True, nogil=True)
def _guide_table(cdf):
    """``guide[k]``: the first index whose ``cdf`` exceeds ``k / G`` (``G`` a power of two at
    least ``len(cdf)``, so ``u * G`` and ``k / G`` are exact and ``floor(u * G) = k`` implies
    ``k / G <= u``); ``len(cdf)`` where none does. Without a search: ``k / G < cdf[i]``
    exactly when ``k < ceil(cdf[i] * G)`` (scaling by a power of two is exact), so
    ``guide[k]`` counts the leaves whose bound ``ceil(cdf[i] * G)`` is at most ``k`` (a NaN
    entry stops every search: bound ``G``), a prefix sum of the bounds' counts."""
    L = cdf.shape[0]
    G = 1
    while G < L:
        G *= 2
    count = np.zeros(G + 1, np.int64)
    for i in range(L):
        c = cdf[i] * G
        count[np.int64(np.ceil(c)) if c <= G else G] += 1
    guide = np.empty(G, np.int64)
    s = 0
    for k in range(G):
        s += count[k]
        guide[k] = s
    return guide


@njit(cache=True, nogil=True)
def _normalised_cumsum(w):
    """``np.cumsum(w) / its last entry`` (the same sums, in the same order)."""
    cdf = np.empty(w.shape[0])
    s = 0.0
    for i in range(w.shape[0]):
        s += w[i]
        cdf[i] = s
    for i in range(w.shape[0]):
        cdf[i] = cdf[i] / s
    return cdf


@parallel_kernel
def _guided_draws(cdf, guide, u):
    """``min(searchsorted(cdf, u, side="right"), len(cdf) - 1)`` per uniform: each search
    starts at its guide entry (:func:`_guide_table`) and steps on; every draw by itself."""
    L = cdf.shape[0]
    G = guide.shape[0]
    out = np.empty(u.shape[0], np.int64)
    for q in prange(u.shape[0]):
        x = u[q]
        i = guide[min(int(x * G), G - 1)]
        while i < L and cdf[i] <= x:
            i += 1
        out[q] = min(i, L - 1)
    return out


@njit(cache=True, nogil=True)
def _counting_order(leaf, n_leaves):
    """The rows sorted by leaf (stably), by counting: ``O(rows + leaves)``."""
    start = np.zeros(n_leaves + 1, np.int64)
    for q in range(leaf.shape[0]):
        start[leaf[q] + 1] += 1
    for k in range(n_leaves):
        start[k + 1] += start[k]
    order = np.empty(leaf.shape[0], np.int64)
    for q in range(leaf.shape[0]):
        k = leaf[q]
        order[start[k]] = q
        start[k] += 1
    return order


@njit(cache=True, nogil=True)
def _gather(u, order):
    """``u[order]``."""
    out = np.empty(order.shape[0])
    for i in range(order.shape[0]):
        out[i] = u[order[i]]
    return out


@parallel_kernel
def _scatter_rows(cols, order, out):
    """``out[order[i], j] = cols[j, i]``: the columns drawn in leaf order put back as rows, one
    row of ``out`` written whole at a time (``order`` a permutation: every row once)."""
    d = cols.shape[0]
    for i in prange(order.shape[0]):
        r = order[i]
        for j in range(d):
            out[r, j] = cols[j, i]


def chunk_entropy(rng: np.random.Generator) -> list[int]:
    """The entropy of a large draw's chunk streams: four 63-bit integers drawn from ``rng``
    (what ``rng`` gives next does not depend on the number of chunks)."""
    return [int(v) for v in rng.integers(0, 2**63, size=4)]


def chunk_seed(entropy: list[int], k: int) -> np.random.SeedSequence:
    """Chunk ``k``'s seed: child ``k`` of ``SeedSequence(entropy)`` (what its ``spawn``
    gives as the ``k``-th child), made without the others, in the chunk's own task."""
    return np.random.SeedSequence(entropy, spawn_key=(k,))


def chunk_seeds(rng: np.random.Generator, k: int) -> list[np.random.SeedSequence]:
    """The seeds of ``k`` independent streams for the chunks of a large draw (each task
    makes its Generator, ``Generator(PCG64(seed))``, on its own thread): children of one
    ``SeedSequence`` whose entropy is four 63-bit integers drawn from ``rng``
    (:func:`chunk_entropy`, :func:`chunk_seed`). What ``rng`` gives next does not depend on
    ``k``."""
    entropy = chunk_entropy(rng)
    return [chunk_seed(entropy, i) for i in range(k)]


def leaf_order(leaf: np.ndarray) -> np.ndarray:
    """The rows sorted by leaf id (stable): by counting where the ids span at most a few
    times the rows (or 65,536), else by ``argsort``."""
    leaf = np.asarray(leaf, np.int64)
    if len(leaf) == 0:
        return np.zeros(0, np.int64)
    top = int(leaf.max()) + 1
    if top <= 8 * len(leaf) + 65536:
        return _counting_order(leaf, top)
    return np.argsort(leaf, kind="stable").astype(np.int64)


@register("sampler", "ancestral")
class AncestralSampler(Sampler):
    """``missing=True`` also blanks entries with the per-leaf missing rates the model learned
    (``missing_rate_``); the values are drawn first, so the same seed gives the same values
    with and without missingness. ``log_weight`` replaces the leaf weights by a leaf posterior
    (``-inf`` outside it): conditional and class-conditional draws go through this sampler."""

    serves = frozenset({"leaf mixture"})
    device_twin = True
    in_support = True  # every column goes through draw_column / draw_column_uniform

    def draw_leaves(self, log_weight: np.ndarray, n: int, rng: np.random.Generator
                    ) -> np.ndarray:
        """``n`` leaf ids drawn independently with probabilities ``exp(log_weight)``
        (normalised here), by inverse CDF."""
        return draw_leaves(log_weight, n, rng)

    @staticmethod
    def table(model) -> tuple[np.ndarray, np.ndarray]:
        """:func:`leaf_table` of the model's leaf weights: built on first use and kept while
        the model lives and its ``leaf_log_weight_`` is the same array with the same values
        (a sample of a few rows from a large forest then costs no ``O(leaves)`` pass)."""
        lw = model.leaf_log_weight_
        hit = _TABLES.get(model)
        if hit is None or hit[0] is not lw or not np.array_equal(hit[1], lw):
            hit = (lw, lw.copy(), leaf_table(lw))
            _TABLES[model] = hit
        return hit[2]

    def sample(self, model, n, rng, missing: bool = False, within_support: bool = False,
               log_weight: np.ndarray | None = None):
        if log_weight is None and type(self).draw_leaves is AncestralSampler.draw_leaves:
            leaf = draw_leaves(model.leaf_log_weight_, n, rng, self.table(model))
        else:  # (a subclass's own leaf draw, or a leaf posterior)
            leaf = leaf_draws(self, model.leaf_log_weight_ if log_weight is None else log_weight,
                              n, rng)
        out = self.draw(model, leaf, rng, within_support)
        if missing:
            apply_missing(model, leaf, out, rng)
        return out

    def draw(self, model, leaf: np.ndarray, rng: np.random.Generator,
             within_support: bool = True) -> np.ndarray:
        """Every column independently from its leaf model in ``leaf [n]``: ``[n, d]``, mapped
        to the column's values (:func:`~forestgen.sampling.support.draw_column`; a leaf model
        with :meth:`~forestgen.leaves.base.LeafModel.sample_uniform` takes its uniforms from
        ``rng`` as its ``sample`` would and its rows in leaf order).
        ``within_support`` is accepted for compatibility: every draw is in the support."""
        n, models = len(leaf), model.leaf_models_
        out = np.empty((n, len(models)))
        if not any(lm.has_uniform_sampler for lm in models):
            for j in range(len(models)):
                out[:, j] = draw_column(model, j, leaf, rng)
            return out
        order = leaf_order(leaf)  # the rows by leaf: the leaves' tables are read in order
        by_leaf = np.asarray(leaf, np.int64)[order]
        cols = np.empty((len(models), n))  # each column's draws of the rows in that order
        if n >= THREAD_ROWS:
            self._draw_chunks(model, leaf, by_leaf, order, rng, cols)
            _scatter_rows(cols, order, out)  # (n >= THREAD_ROWS: the parallel kernel)
            return out
        todo = []  # (column, its uniforms): drawn from rng in column order, as lm.sample would
        for j, lm in enumerate(models):
            if lm.has_uniform_sampler:
                todo.append((j, rng.random(n)))
            else:
                cols[j] = draw_column(model, j, leaf, rng)[order]

        def task(k: int) -> None:  # (each column's uniforms already drawn: any order)
            j, u = todo[k]
            cols[j] = draw_column_uniform(model, j, by_leaf, _gather(u, order))

        thread_map(task, len(todo), getattr(model, "n_jobs", 1) if n >= COLUMN_ROWS else 1)
        _scatter_rows.serial(cols, order, out)
        return out

    @staticmethod
    def _draw_chunks(model, leaf: np.ndarray, by_leaf: np.ndarray, order: np.ndarray,
                     rng: np.random.Generator, cols: np.ndarray) -> None:
        """``cols [d, n]`` for ``n >= THREAD_ROWS`` rows, in leaf order, on the model's
        ``n_jobs`` threads: every (column, chunk of ``THREAD_ROWS`` rows in leaf order) is
        one task drawing its uniforms from its own stream (:func:`chunk_seeds`), so the
        tasks run in any order and on any thread with the same bits. Columns without
        :meth:`~forestgen.leaves.base.LeafModel.sample_uniform` draw from ``rng`` first, in
        column order."""
        models = model.leaf_models_
        n = len(by_leaf)
        for j, lm in enumerate(models):
            if not lm.has_uniform_sampler:
                cols[j] = draw_column(model, j, leaf, rng)[order]
        todo = [j for j, lm in enumerate(models) if lm.has_uniform_sampler]
        edges = list(range(0, n, THREAD_ROWS)) + [n]
        tasks = [(j, edges[c], edges[c + 1]) for j in todo for c in range(len(edges) - 1)]
        entropy = chunk_entropy(rng)  # (the streams of chunk_seeds, each made in its task)

        def task(k: int) -> None:
            j, a, b = tasks[k]
            u = np.random.Generator(np.random.PCG64(chunk_seed(entropy, k))).random(b - a)
            cols[j, a:b] = draw_column_uniform(model, j, by_leaf[a:b], u)

        thread_map(task, len(tasks), getattr(model, "n_jobs", 1))


def apply_missing(model, leaf: np.ndarray, out: np.ndarray, rng: np.random.Generator) -> None:
    """Set ``out[i, j]`` to NaN with probability ``missing_rate_[leaf[i], k]`` (in place),
    nested columns only where their parent is NaN (:mod:`forestgen.sampling.missingness`)."""
    cols = getattr(model, "missing_cols_", None)
    if cols is None or len(cols) == 0:
        return
    u = rng.random((len(leaf), len(cols)))
    rate = model.missing_rate_[leaf]
    parent = getattr(model, "missing_parent_", None)
    hit = blank(u, rate, rate[:, np.maximum(parent, 0)] if parent is not None else rate,
                parent)
    for k, j in enumerate(cols):
        out[hit[:, k], j] = np.nan
