"""The impurity grower against a memory-bandwidth floor (issue 33).

For ARF's discriminator forests on the mixed table of ``bench_arf_rarf.py`` (real rows stacked
with round-0 synthetic rows, 30 trees, at least ``--min-node-size`` real rows per leaf, ⌊√d⌋
candidate features, bootstrap), one thread:

* the measured CPU seconds of ``grow_forest_routed`` (median of ``--repeats``);
* the work any histogram grower must do on these trees: the *row-levels* (each in-bag row once
  per internal node on its path; counted from the grown trees) and the internal nodes;
* the machine's single-thread memory bandwidth, measured by a Numba streaming read and a copy
  over ``--mib`` MiB;
* two floors in seconds: **read floor** = row-levels x (mtry code bytes + 1 label byte + 8
  weight bytes) / read bandwidth: the bytes a histogram pass over the candidate features must
  read, streamed; **compact floor** = the read floor + each row-level moving its record (d
  code bytes, label, weight and a 4-byte row id) once, at the copy bandwidth: a grower that
  keeps every node's rows contiguous (LightGBM's ordered partitions).

Both floors ignore the per-node work (drawing features, scanning bins) and assume every byte
streams from memory at full speed, so they are lower bounds, not targets. Writes
``results/<--out>.md``.

With ``--before DIR`` (another checkout, e.g. ``git archive REV forestgen | tar -x -C DIR``)
the grower kernel of ``DIR/forestgen/tree/grow_impurity.py`` is loaded into this process
beside this checkout's, and the two grow the same trees (same rows, weights and Generators)
alternately, tree by tree, timed in thread CPU seconds: a side-by-side ratio that a loaded
machine skews equally for both. Their outputs are compared array by array (they must be
identical).

    /work/bin/heavy --quiet python benchmarks/bench_grower_floor.py --rows 8000,32000,80000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import md_table, write_result  # noqa: E402


@njit(cache=True, nogil=True)
def _read(a):
    s = np.uint64(0)
    for i in range(a.shape[0]):
        s += a[i]
    return s


@njit(cache=True, nogil=True)
def _copy(a, b):
    for i in range(a.shape[0]):
        b[i] = a[i]


def cpu() -> float:
    return time.process_time()


def bandwidth(mib: int, repeats: int) -> tuple[float, float]:
    """Single-thread (read, copy) bandwidth in GB/s (copy counts bytes read + written), timed
    in thread CPU seconds (a loaded machine's waits are not counted), best of ``repeats``."""
    n = mib * 2**20 // 8
    a = np.ones(n, np.uint64)
    b = np.zeros_like(a)  # touched: no page faults in the timed copies
    _read(a[:10])
    _copy(a[:10], b[:10])
    rd, cp = [], []
    for _ in range(repeats):
        t0 = time.thread_time()
        _read(a)
        rd.append(a.nbytes / (time.thread_time() - t0) / 1e9)
        t0 = time.thread_time()
        _copy(a, b)
        cp.append(2 * a.nbytes / (time.thread_time() - t0) / 1e9)
    return max(rd), max(cp)


def stacked(n: int, seed: int):
    """ARF's round-0 tree data for the mixed table (the learner's own steps)."""
    from forestgen.data.binning import Binner
    from forestgen.data.encoder import TableEncoder
    from forestgen.families.mixture.arf import narrow_codes, stack_codes
    from forestgen.splitters.base import TreeData

    df = mixed_table(n, seed)
    enc = TableEncoder().fit(df)
    Z = enc.transform(df)
    s = enc.schema
    b = Binner.fit(Z, s.nominal_mask, s.n_levels, 255)
    codes = narrow_codes(b.transform(Z))
    rng = np.random.default_rng(seed)
    donors = rng.integers(0, n, size=Z.shape)
    Xb = stack_codes(codes, donors)
    return TreeData(Xb, b.n_bins, b.nominal, b.thresholds, route_rows=True)


def grow(data, n_trees: int, mns: int, seed: int):
    from forestgen.ensemble.bagging import draw_weights
    from forestgen.learners import ARF
    from forestgen.tree.forest import grow_forest_routed, tree_generators

    n2 = data.Xb.shape[1]
    y = np.r_[np.ones(n2 // 2, np.int64), np.zeros(n2 - n2 // 2, np.int64)]
    splitter, limits = ARF(min_node_size=mns).discriminator_setup()
    rngs = tree_generators(np.random.SeedSequence(seed), n_trees)
    W = np.stack([draw_weights(n2, r) for r in rngs])
    c0 = cpu()
    forest, leaves = grow_forest_routed(splitter, data, y, W, rngs, limits, n_jobs=1)
    return cpu() - c0, forest, leaves, W


def load_kernel(src: Path):
    """``grow_tree`` of another checkout's ``forestgen/tree/grow_impurity.py`` (its helpers
    import from this checkout's unchanged modules). Loaded from a copy in a temporary
    folder: Numba caches the compiled kernel beside its source file, and an entry written
    under this module's name into the other checkout would break that checkout's own
    ``grow_tree`` (its cache index matches, the pickled module does not import)."""
    import importlib.util
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="grow_impurity_before_")) / "grow_impurity_before.py"
    shutil.copyfile(src / "forestgen" / "tree" / "grow_impurity.py", path)
    spec = importlib.util.spec_from_file_location("grow_impurity_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return positional(mod)


def positional(mod):
    """``mod.grow_tree`` called with the loose arguments of the kernels before stop 43
    (``Xb, n_bins, nominal, y, w, n_classes, ..., crit, rng, route_all, sparse_ratio``);
    kernels from stop 43 on take ``LabelledRows`` and ``GrowRule`` bundles."""
    if not hasattr(mod, "LabelledRows"):
        return mod.grow_tree

    def call(Xb, n_bins, nominal, y, w, C, depth, msl, mcl, mtry, gain, crit, rng, route,
             sparse):
        return mod.grow_tree(mod.LabelledRows(Xb, n_bins, nominal, y, w),
                             mod.grow_rule(C, depth, msl, mcl, mtry, gain, crit, sparse),
                             rng, route)

    return call


def kernel_ab(data, n_trees: int, mns: int, seed: int, before) -> tuple[float, float]:
    """Thread CPU seconds of this checkout's and ``before``'s ``grow_tree`` growing the same
    ``n_trees`` trees alternately; raises if any output differs."""
    from forestgen.ensemble.bagging import draw_weights
    from forestgen.learners import ARF
    from forestgen.splitters.base import resolve_max_features
    from forestgen.tree import grow_impurity
    from forestgen.tree.forest import tree_generators

    grow_tree = positional(grow_impurity)

    Xb = data.Xb
    n2 = Xb.shape[1]
    y = np.r_[np.ones(n2 // 2, np.int64), np.zeros(n2 - n2 // 2, np.int64)]
    _, limits = ARF(min_node_size=mns).discriminator_setup()
    args = (Xb, data.n_bins.astype(np.int64), data.nominal.astype(np.bool_), y)
    rest = (2, -1, float(limits.min_samples_leaf), np.asarray(limits.min_class_leaf, float),
            resolve_max_features(limits.max_features, Xb.shape[0]), 0.0, 0)
    t_after = t_before = 0.0
    for b, (ra, rb) in enumerate(zip(tree_generators(np.random.SeedSequence(seed), n_trees),
                                     tree_generators(np.random.SeedSequence(seed), n_trees))):
        wa, wb = draw_weights(n2, ra), draw_weights(n2, rb)
        first = (grow_tree, ra, wa, "after"), (before, rb, wb, "before")
        outs = {}
        for fn, rng, w, name in (first if b % 2 == 0 else first[::-1]):
            t0 = time.thread_time()
            outs[name] = fn(*args, w, *rest, rng, True, 1.0)
            dt = time.thread_time() - t0
            if name == "after":
                t_after += dt
            else:
                t_before += dt
        for u, v in zip(outs["after"], outs["before"]):
            if not np.array_equal(u, v):
                raise AssertionError(f"tree {b}: the kernels grew different trees")
    return t_after, t_before


def row_levels(forest, leaves, W) -> int:
    """Sum over trees of each in-bag row's leaf depth (internal nodes on its path)."""
    depth = np.zeros(len(forest.feature), np.int64)
    for b in range(forest.n_trees):
        for node in range(forest.node_offsets[b], forest.node_offsets[b + 1]):
            if forest.feature[node] >= 0:
                depth[forest.left[node]] = depth[node] + 1
                depth[forest.right[node]] = depth[node] + 1
    leaf_depth = depth[forest.leaf_node]
    return int(sum(leaf_depth[leaves[W[b] > 0, b]].sum() for b in range(forest.n_trees)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="8000,32000,80000")
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--out", default="grower_floor")
    ap.add_argument("--before", type=Path, default=None,
                    help="another checkout whose grower kernel is timed alternately")
    args = ap.parse_args()
    before = load_kernel(args.before) if args.before is not None else None
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    rd, cp = bandwidth(args.mib, args.repeats)
    print(f"bandwidth read {rd:.1f} GB/s, copy {cp:.1f} GB/s", file=sys.stderr)
    small = stacked(2000, 0)
    grow(small, 2, args.min_node_size, 0)  # compile
    if before is not None:
        kernel_ab(small, 2, args.min_node_size, 0, before)
    rows = []
    for n in [int(x) for x in args.rows.split(",")]:
        data = stacked(n, 0)
        d = data.Xb.shape[0]
        mtry = max(1, int(np.floor(np.sqrt(d))))
        times = []
        for r in range(args.repeats):
            t, forest, leaves, W = grow(data, args.trees, args.min_node_size, r)
            times.append(t)
        lv = row_levels(forest, leaves, W)
        internal = int((forest.feature >= 0).sum())
        read_b = lv * (mtry + 1 + 8)
        move_b = lv * (d + 1 + 8 + 4) * 2
        f_read = read_b / (rd * 1e9)
        f_compact = f_read + move_b / (cp * 1e9)
        t = float(np.median(times))
        ab = []
        if before is not None:
            ka, kb = zip(*(kernel_ab(data, args.trees, args.min_node_size, r, before)
                           for r in range(args.repeats)))
            ka, kb = float(np.median(ka)), float(np.median(kb))
            ab = [kb, ka, kb / ka, ka / f_compact]
        rows.append([n, 2 * n, d, mtry, f"{lv:,}", f"{internal:,}",
                     f"{int(forest.depth().mean())}", t, f_read, f_compact, t / f_read,
                     t / f_compact, 1e9 * t / lv, *ab])
        print(rows[-1], file=sys.stderr, flush=True)
    table = md_table(["real rows", "stacked rows", "d", "mtry", "row-levels (30 trees)",
                      "internal nodes", "mean depth", "grow CPU s (median)", "read floor s",
                      "compact floor s", "measured / read floor", "measured / compact floor",
                      "ns per row-level"]
                     + (["kernel CPU s before", "kernel CPU s after", "before / after",
                         "kernel after / compact floor"] if before is not None else []),
                     rows, digits=3)
    notes = [f"Single-thread bandwidth (Numba loop over {args.mib} MiB, best of "
             f"{args.repeats}): streaming read {rd:.1f} GB/s, copy {cp:.1f} GB/s (read + "
             "written bytes).",
             f"Forest: {args.trees} trees, min_node_size {args.min_node_size} real rows, "
             "bootstrap, one thread, round-0 synthetic rows; grow time includes routing the "
             "out-of-bag rows (row_node) and building the ForestArrays."]
    if before is not None:
        notes.append(f"Kernel columns: `grow_tree` alone (no ForestArrays), this checkout "
                     f"against `{args.before}`, the same {args.trees} trees grown alternately "
                     f"tree by tree (median over {args.repeats} forests of thread CPU s); "
                     "every output array identical.")
    write_result(args.out, "Impurity grower vs a memory-bandwidth floor", [table, *notes])


if __name__ == "__main__":
    main()
