"""The serial twins of ``@parallel_kernel`` kernels against the parallel kernels on one thread,
for every learner: the twin as compiled now (the parallel pipeline, parfors lowered as plain
loops: :mod:`forestgen.parallel`) and as it was compiled before (a plain ``njit`` of the same
function, built here without the cache).

    NUMBA_NUM_THREADS=1 python benchmarks/bench_serial_twins.py --rows 20000 --out serial_twins

Each learner is fitted on the mixed table of ``bench_arf_rarf.py`` (``--rows`` rows; ARF 30
trees, the others ``--trees``) and queried as ``framework_bitcheck.py`` does (``log_prob``
with and without missing values, ``sample``, a conditional ``sample`` and ``log_prob``,
``impute``; ``--query-rows`` rows each). Every module-level ``parallel_kernel`` of forestgen
is wrapped meanwhile to keep a copy of the arguments of its largest call (by bytes). Then each
recorded call is replayed on fresh copies of its arguments through the three versions (best
of ``--reps`` CPU times) and their outputs (return value and arguments written in place) are
compared bit for bit. Run it with ``NUMBA_NUM_THREADS=1``: the parallel kernel then runs on
one thread, the reference the twin must match.
"""

from __future__ import annotations

import argparse
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import md_table, write_result  # noqa: E402


def _kernels() -> dict[int, tuple[str, object]]:
    """Every ``parallel_kernel`` bound at module level in an imported forestgen module."""
    found = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("forestgen") or mod is None:
            continue
        for v in list(vars(mod).values()):
            if callable(v) and hasattr(v, "parallel") and hasattr(v, "serial"):
                found.setdefault(id(v), (f"{v.__module__}.{v.__name__}", v))
    return found


def _copy(x):
    """A copy of a kernel argument: arrays copied, tuples (named or not) and Numba typed
    lists rebuilt from copies, anything else shared."""
    from numba.typed import List

    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, tuple):
        items = [_copy(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, List):
        return List([_copy(v) for v in x])
    return x


def _nbytes(args) -> int:
    return sum(a.nbytes for a in args if isinstance(a, np.ndarray))


def record(run) -> dict[str, tuple]:
    """Run ``run()`` with every kernel wrapped; the largest call's arguments per kernel."""
    import forestgen.learners  # noqa: F401  (imports the kernels' modules)

    kernels = _kernels()
    calls: dict[str, tuple] = {}
    patched = []

    def wrap(label, k):
        def rec(*args):
            if label not in calls or _nbytes(args) > _nbytes(calls[label][1]):
                calls[label] = (k, _copy(args))
            return k(*args)
        rec.parallel, rec.serial = k.parallel, k.serial
        return rec

    wrappers = {i: wrap(label, k) for i, (label, k) in kernels.items()}
    for name, mod in list(sys.modules.items()):
        if name.startswith("forestgen") and mod is not None:
            for attr, v in list(vars(mod).items()):
                if id(v) in wrappers and v is kernels[id(v)][1]:
                    setattr(mod, attr, wrappers[id(v)])
                    patched.append((mod, attr, v))
    try:
        run()
    finally:
        for mod, attr, v in patched:
            setattr(mod, attr, v)
    return calls


def old_twin(k):
    """The twin as compiled before: a plain ``njit`` loop of the same function."""
    from numba import njit

    fn = k.parallel.py_func
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_old",
                              fn.__defaults__, fn.__closure__)
    return njit(nogil=True, error_model=k.parallel.targetoptions.get("error_model", "python")
                )(twin)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.shape == b.shape
                and np.array_equal(a.view(np.uint8) if a.dtype.kind == "f" else a,
                                   b.view(np.uint8) if b.dtype.kind == "f" else b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return np.array_equal(np.float64(a).view(np.uint64), np.float64(b).view(np.uint64))
    return True  # numba typed containers and other objects: not compared


def replay(fn, args, reps: int):
    """Best CPU time of ``reps`` calls on fresh copies (after an untimed one that compiles),
    and the outputs."""
    best, out = np.inf, None
    for rep in range(reps + 1):
        a = _copy(args)
        t = time.process_time()
        r = fn(*a)
        if rep:
            best = min(best, time.process_time() - t)
        out = (r, a)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--query-rows", type=int, default=4000)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--learners", default="ARF,GeF,RFDE,DEF,NRGBoost,GFBoost,EOGT")
    ap.add_argument("--out", default="serial_twins")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import numba

    from forestgen.learners import ARF, DEF, EOGT, RFDE, GeF, GFBoost, NRGBoost

    T = args.trees
    make = {"ARF": lambda: ARF(n_trees=30, min_node_size=5, random_state=0),
            "GeF": lambda: GeF(n_trees=T, random_state=0),
            "RFDE": lambda: RFDE(n_trees=T, random_state=0),
            "DEF": lambda: DEF(n_trees=T, random_state=0),
            "NRGBoost": lambda: NRGBoost(n_trees=T, random_state=0),
            "GFBoost": lambda: GFBoost(n_trees=T, random_state=0),
            "EOGT": lambda: EOGT(n_trees=T, random_state=0)}
    df = mixed_table(args.rows, 0)
    q = mixed_table(args.query_rows, 1)
    rng = np.random.default_rng(0)
    qn = q.copy()
    qn.loc[rng.random(len(q)) < 0.4, "x1"] = np.nan
    qn.loc[rng.random(len(q)) < 0.3, "c0"] = np.nan
    rows, lines = [], []
    for name in args.learners.split(","):
        def run(name=name):
            m = make[name]().fit(df, target="c1") if name == "GeF" else make[name]().fit(df)
            m.log_prob(q)
            m.log_prob(qn)
            m.sample(args.query_rows, random_state=1)
            for query in (lambda: m.sample(args.query_rows, random_state=2,
                                           conditions={"c1": "hi"}),
                          lambda: m.log_prob(q[["x0", "x2", "c0"]], conditions={"c1": "hi"}),
                          lambda: m.impute(qn, random_state=3)):
                try:
                    query()
                except NotImplementedError:
                    pass

        calls = record(run)
        for label, (k, kargs) in sorted(calls.items()):
            old = old_twin(k)
            t_par, o_par = replay(k.parallel, kargs, args.reps)
            t_new, o_new = replay(k.serial, kargs, args.reps)
            t_old, o_old = replay(old, kargs, args.reps)
            same = _same(o_par, o_new) and _same(o_par, o_old)
            rows.append([name, label.removeprefix("forestgen."), f"{_nbytes(kargs) / 2**20:.1f}",
                         1e3 * t_par, 1e3 * t_old, 1e3 * t_new, t_old / max(t_par, 1e-9),
                         t_new / max(t_par, 1e-9), "yes" if same else "NO"])
            print(*rows[-1], file=sys.stderr, flush=True)
    tot = [sum(r[i] for r in rows) for i in (3, 4, 5)]
    lines.append(md_table(["learner", "kernel", "args MiB", "parallel ms (1 thread)",
                           "old twin ms", "new twin ms", "old / parallel", "new / parallel",
                           "same bits"], rows, digits=2))
    lines.append(f"Sum over the kernels: parallel {tot[0]:.1f} ms, old twins {tot[1]:.1f} ms "
                 f"({tot[1] / tot[0]:.2f}x), new twins {tot[2]:.1f} ms "
                 f"({tot[2] / tot[0]:.2f}x).")
    write_result(args.out, "Serial twins of the parallel kernels, before and after (CPU ms)", [
        f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}; mixed table, {args.rows} rows, "
        f"queries on {args.query_rows} rows; each kernel's largest call in the learner's fit "
        f"and queries, replayed (best of {args.reps} CPU times). `old twin`: a plain `njit` of "
        "the kernel (as compiled before); `new twin`: `kernel.serial` now. `same bits`: return "
        "values and in-place outputs of all three equal bit for bit.", *lines])


if __name__ == "__main__":
    main()
