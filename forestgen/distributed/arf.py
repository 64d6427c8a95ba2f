"""ARF (Watson et al. 2023, Alg. 1-2) with its trees grown on Dask workers.

The partitions of the table are grouped into ``n_blocks`` blocks; each block is encoded once
and stays where it is computed. Tree ``t`` grows on block ``t mod n_blocks``: its real rows
plus that block's synthetic rows (round 0: each column resampled independently within the
block; later rounds: the leafwise resampling of R arf with the whole accepted forest), binned on
the block's own quantiles, with the learner's own splitter and limits
(:meth:`~forestgen.learners.ARF.discriminator_setup`). Each tree is one task; the only numbers
that reach the client each round are the trees and every block's (correct, classified)
out-of-bag counts, whose sum is the accuracy that decides, exactly as in
:meth:`ARF.fit <forestgen.learners.ARF.fit>`, whether another round runs. FORDE then fits the
leaves from statistics merged over the blocks (:mod:`forestgen.distributed.stats`).

Randomness: tree ``t`` of round ``r`` uses ``seed_child(root, r, 0, t)``, block ``b``'s synthetic
rows ``seed_child(root, r, 1, b)`` and its out-of-bag tie-breaks ``seed_child(root, r, 2, b)``,
where ``root = seed_sequence(random_state)``: the model depends on the data, the parameters and
``n_blocks``, never on the number of workers or the order tasks run in. With ``n_blocks=1``
every tree sees the whole table, as in a single-machine fit.
"""

from __future__ import annotations

import time

import dask
import numpy as np
import pandas as pd

from forestgen.data.binning import Binner
from forestgen.distributed.encoding import fit_encoder, merge_summaries, summarise, widen
from forestgen.distributed.graph import share, tree_reduce
from forestgen.distributed.stats import encoded_stats, reduce_stats
from forestgen.ensemble.bagging import draw_weights
from forestgen.families.mixture.arf import ARF, leafwise_resample, oob_correct, oob_votes
from forestgen.splitters.base import TreeData
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.forest import grow_forest
from forestgen.validation import check_int, seed_child, seed_sequence

_TREE, _SYNTH, _TIE = 0, 1, 2


def _generator(seed: np.random.SeedSequence) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


# ---------------------------------------------------------------------------- block tasks
def _encode_block(encoder, *frames: pd.DataFrame) -> np.ndarray:
    return encoder.transform(pd.concat(frames) if len(frames) > 1 else frames[0])


def _fit_binner(Z: np.ndarray, schema, max_bins: int) -> Binner:
    return Binner.fit(Z, schema.nominal_mask, schema.n_levels, max_bins)


def _marginal_synth(Z: np.ndarray, seed) -> np.ndarray:
    """Round 0: every column resampled independently (product of the block's marginals)."""
    n, d = Z.shape
    return Z[_generator(seed).integers(0, n, size=(n, d)), np.arange(d)]


def _leafwise_synth(forest: ForestArrays, Z: np.ndarray, seed) -> np.ndarray:
    return leafwise_resample(forest, Z, _generator(seed))


class _Round:
    """One block's real and synthetic rows, stacked and binned, for one round."""

    def __init__(self, Z: np.ndarray, synth: np.ndarray, binner: Binner):
        self.stacked = np.vstack([Z, synth])
        self.y = np.r_[np.ones(len(Z), np.int64), np.zeros(len(synth), np.int64)]
        self.data = TreeData(binner.transform(self.stacked), binner.n_bins, binner.nominal,
                             binner.thresholds)


def _grow_tree(rd: _Round, seed, learner: ARF) -> tuple[ForestArrays, np.ndarray, np.ndarray]:
    """One discriminator tree on a block, and its out-of-bag votes for the block's rows."""
    splitter, limits = learner.discriminator_setup()
    rng = _generator(seed)
    W = draw_weights(len(rd.y), rng, mode=learner.sampling,
                     fraction=learner.sample_fraction)[None]
    tree = grow_forest(splitter, rd.data, rd.y, W, [rng], limits, n_jobs=1)
    votes, n_oob = oob_votes(tree, rd.stacked, rd.y, W, learner.oob_mode)
    return tree, votes, n_oob


def _tree_only(res):
    return res[0]


def _block_counts(rd: _Round, seed, mode: str, *results) -> tuple[int, int]:
    """(correct, classified) out-of-bag rows of a block, from the votes of its trees."""
    votes = sum(r[1] for r in results)
    n_oob = sum(r[2] for r in results)
    return oob_correct(votes, n_oob, rd.y, mode, _generator(seed))


def _stats(Z: np.ndarray, forest: ForestArrays, schema):
    return encoded_stats(Z, forest, schema)


# ---------------------------------------------------------------------------- fit
def fit_arf(ddf, learner: ARF | None = None, *, n_blocks: int | None = None,
            kinds: dict | None = None, encoder_rows: int = 100_000, **params) -> ARF:
    """Fit an :class:`~forestgen.learners.ARF` on the Dask DataFrame ``ddf`` with its trees
    grown on Dask workers (see the module docstring). Returns a fitted, ordinary ``ARF``.

    ``learner``: an unfitted ARF whose parameters are used (or pass them as ``params``);
    ``coverage="oob"`` is not supported. ``n_blocks``: how many blocks of partitions trees
    grow on (default ``min(npartitions, n_trees)``; at most ``n_trees``); a worker holding a
    block needs about five times its encoded size (8 bytes per cell). ``kinds``,
    ``encoder_rows``: see :func:`~forestgen.distributed.fit_encoder`. ``n_jobs`` and
    ``progress`` are ignored (parallelism is Dask's). ``marginal_weight``: the model is the
    paper's (``marginal_weight_ = 0``); the default ``"auto"`` is accepted and settles there
    without its held-out fit (that guard backs off only where the marginals beat the forest
    on held-out rows, which the tables Dask is for do not show: ARF on adult's 32,561 rows
    scores 7 standard errors above them, ``benchmarks/results/flip_s48.md``); a weight or
    ``"held_out"`` is refused. ``grid_spikes``: ``"oob"`` is accepted and fits FORDE's law
    (``grid_spikes_ = {}``: the leaves' statistics carry no repeated values); a weight above
    0 is refused.
    """
    learner = ARF(**params) if learner is None else learner.set_params(**params)
    learner.validate_params()
    if learner.marginal_weight not in (0, "auto"):
        raise NotImplementedError(
            f"forestgen.distributed.fit_arf: marginal_weight={learner.marginal_weight!r} "
            f"needs a held-out single-machine fit; use marginal_weight=0 (or 'auto', which "
            f"fits the paper's model here) or ARF.fit on one machine")
    if getattr(learner, "numeric_prior", 0) != 0:
        raise NotImplementedError(
            f"forestgen.distributed.fit_arf: numeric_prior={learner.numeric_prior!r} needs "
            f"the columns' marginal histograms and the out-of-bag rows; use numeric_prior=0 "
            f"(FORDE's law, the default) or ARF.fit on one machine")
    spikes = getattr(learner, "grid_spikes", 0)
    if not (isinstance(spikes, str) or spikes == 0):
        raise NotImplementedError(
            f"forestgen.distributed.fit_arf: grid_spikes={spikes!r} needs the leaves' own "
            f"repeated values, which the leaves' sufficient statistics do not carry; use "
            f"grid_spikes=0 (or 'oob', which fits FORDE's law here) or ARF.fit on one machine")
    if learner.coverage != "all":
        raise NotImplementedError("forestgen.distributed.fit_arf: coverage='oob' needs each "
                                  "tree's bootstrap weights of every row; use coverage='all'")
    B = learner.n_trees
    P = ddf.npartitions
    n_blocks = min(P, B) if n_blocks is None else n_blocks
    check_int("n_blocks", n_blocks, 1, min(P, B))
    encoder = fit_encoder(ddf, kinds=kinds, max_ordinal_levels=learner.max_ordinal_levels,
                          encoder_rows=encoder_rows)
    parts = ddf.to_delayed()
    groups = np.array_split(np.arange(P), n_blocks)
    enc_d = share(encoder)
    blocks = [dask.delayed(_encode_block)(enc_d, *[parts[i] for i in g]) for g in groups]
    blocks = list(dask.persist(*blocks))
    # the encoder saw a sample: ranges and missing flags of all rows, and no unseen level
    total = tree_reduce([dask.delayed(summarise)(Z, encoder.schema) for Z in blocks],
                        merge_summaries).compute()
    if int(total["rows"]) < 2:
        raise ValueError(f"ARF needs at least 2 rows, got {int(total['rows'])}")
    encoder = widen(encoder, total)
    schema = encoder.schema
    binners = list(dask.persist(*[dask.delayed(_fit_binner)(Z, schema, learner.max_bins)
                                  for Z in blocks]))
    root = seed_sequence(learner.random_state)
    lrn = share(learner)
    synth = [dask.delayed(_marginal_synth)(Z, seed_child(root, 0, _SYNTH, b))
             for b, Z in enumerate(blocks)]
    tree_block = [t % n_blocks for t in range(B)]
    history: list[dict] = []
    accepted: ForestArrays | None = None
    prev_acc = np.inf
    for it in range(learner.max_iters + 1):
        t0 = time.perf_counter()
        rounds = list(dask.persist(*[dask.delayed(_Round)(Z, s, bn)
                                     for Z, s, bn in zip(blocks, synth, binners)]))
        grown = [dask.delayed(_grow_tree)(rounds[tree_block[t]], seed_child(root, it, _TREE, t),
                                          lrn) for t in range(B)]
        counts = [dask.delayed(_block_counts)(
            rounds[b], seed_child(root, it, _TIE, b), learner.oob_mode,
            *[grown[t] for t in range(B) if tree_block[t] == b]) for b in range(n_blocks)]
        trees, counts = dask.compute([dask.delayed(_tree_only)(g) for g in grown], counts)
        forest = ForestArrays.concat(trees)
        used = sum(c[1] for c in counts)
        acc = sum(c[0] for c in counts) / used if used else float("nan")
        history.append({"round": it, "oob_accuracy": acc, "n_leaves": forest.n_leaves,
                        "seconds": time.perf_counter() - t0})
        if accepted is None:
            accepted = forest
        else:
            if acc <= 0.5 + learner.delta or it >= learner.max_iters or (
                    learner.early_stop and prev_acc <= acc):
                break
            accepted = forest
        if acc <= 0.5 + learner.delta or it >= learner.max_iters:
            break
        prev_acc = acc
        forest_d = share(accepted)
        synth = [dask.delayed(_leafwise_synth)(forest_d, Z, seed_child(root, it + 1, _SYNTH, b))
                 for b, Z in enumerate(blocks)]
    learner.encoder_ = encoder
    learner.marginal_weight_, learner.marginal_weight_ll_ = 0.0, {}
    learner.grid_spikes_ = {}  # (FORDE's law: the statistics carry no repeated values)
    learner.forest_ = accepted
    learner.fit_diagnostics_ = history
    learner.n_rounds_ = len(history)
    forest_d = share(accepted)
    learner.fit_leaves_from_stats(reduce_stats([dask.delayed(_stats)(Z, forest_d, schema)
                                                for Z in blocks]))
    return learner
