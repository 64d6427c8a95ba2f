"""Fork pools and thread pools scoring with one model, at the same time, under each available
Numba threading layer (old main: the fork pool hangs under ``omp``; concurrent threads abort the
process under ``workqueue``). Each scenario runs in a subprocess with a timeout, so a hang or an
abort fails the test instead of blocking or killing the test run."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from forestgen.parallel import in_forked_child

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import multiprocessing as mp
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pandas as pd

    from forestgen import ARF

    rng = np.random.default_rng(0)
    n = 2000
    df = pd.DataFrame({"x": rng.normal(size=n), "y": rng.normal(size=n),
                       "c": rng.choice(list("abcd"), n)})
    df.loc[::7, "x"] = np.nan                       # incomplete rows take the reach() path
    model = ARF(n_trees=5, random_state=0, n_jobs=1).fit(df)
    want = model.log_prob(df)                       # the parent runs the parallel kernels
    want_sample = model.sample(50, random_state=3)
    chunks = [df.iloc[i:i + 100] for i in range(0, n, 100)]

    def score(i):
        return model.log_prob(chunks[i])

    def draw(seed):
        return model.sample(50, random_state=seed)

    stop = threading.Event()
    thread_results = []

    def hammer():
        with ThreadPoolExecutor(4) as ex:
            while not stop.is_set():
                thread_results.append(np.concatenate(list(ex.map(score, range(len(chunks))))))

    t = threading.Thread(target=hammer)
    t.start()
    try:
        with mp.get_context("fork").Pool(2) as pool:
            forked = pool.map_async(score, range(len(chunks))).get(timeout=120)
            samples = pool.map_async(draw, [3, 3]).get(timeout=120)
    finally:
        stop.set()
        t.join(timeout=120)
    assert not t.is_alive(), "thread pool did not finish"
    assert np.array_equal(np.concatenate(forked), want), "fork pool scores differ"
    assert all(s.equals(want_sample) for s in samples), "fork pool samples differ"
    assert thread_results and all(np.array_equal(r, want) for r in thread_results)
    print("OK", len(thread_results))
""")


def _layers() -> list[str]:
    out = ["default", "omp", "workqueue"]
    try:  # TBB is optional (pip install tbb); test it where Numba can load it
        importlib.import_module("numba.np.ufunc.tbbpool")
        out.append("tbb")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("layer", _layers())
def test_fork_pool_and_thread_pool_concurrently(layer):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if layer == "default":
        env.pop("NUMBA_THREADING_LAYER", None)
    else:
        env["NUMBA_THREADING_LAYER"] = layer
    try:
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           env=env, timeout=240)
    except subprocess.TimeoutExpired:  # pragma: no cover - the failure being tested
        pytest.fail(f"fork pool + thread pool hung under the {layer} threading layer")
    if r.returncode != 0 and "No threading layer could be loaded" in r.stderr:
        pytest.skip(f"Numba threading layer {layer} is not installed here")
    assert r.returncode == 0 and r.stdout.startswith("OK"), (r.returncode, r.stderr[-2000:])


def test_threads_get_identical_results(arf_small, mixed_small):
    """Eight threads scoring and sampling at once: every result equals the single-threaded one."""
    want = arf_small.log_prob(mixed_small)
    want_sample = arf_small.sample(200, random_state=3)
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda _: arf_small.log_prob(mixed_small), range(32)))
        drawn = list(ex.map(lambda _: arf_small.sample(200, random_state=3), range(16)))
    for g in got:
        np.testing.assert_array_equal(g, want)
    for d in drawn:
        assert d.equals(want_sample)


def test_serial_and_parallel_kernels_agree(arf_small, mixed_small):
    from forestgen.tree.kernels import apply_kernel

    f = arf_small.forest_
    Z = arf_small.encoder_.transform(mixed_small)
    args = (Z, f.feature, f.threshold, f.nan_left, f.left, f.right, f.cat_off, f.cat_left,
            f.n_levels, f.roots, f.node_leaf)
    np.testing.assert_array_equal(apply_kernel.parallel(*args), apply_kernel.serial(*args))
    assert not in_forked_child()


def test_parallel_kernel_error_model():
    """``@parallel_kernel(error_model="numpy")``: both compiled kernels divide by zero as
    NumPy does (inf, no exception) and agree."""
    from numba import prange

    from forestgen.parallel import parallel_kernel

    @parallel_kernel(error_model="numpy")
    def ratio(a, b, out):
        for i in prange(a.shape[0]):
            out[i] = a[i] / b[i]

    a, b = np.array([1.0, -2.0, 3.0]), np.array([2.0, 0.0, 4.0])
    for k in (ratio, ratio.parallel, ratio.serial):
        out = np.empty(3)
        k(a, b, out)
        np.testing.assert_array_equal(out, [0.5, -np.inf, 0.75])


def test_parallel_kernel_twins_agree_on_division_by_zero():
    """At the default error model the parallel kernel and its serial twin give the same
    ``inf`` / ``nan`` (under Python's model the twin raised where the parallel one did not)."""
    from numba import prange

    from forestgen.parallel import parallel_kernel

    @parallel_kernel
    def ratio(a, b):
        out = np.empty(a.shape[0])
        for i in prange(a.shape[0]):
            out[i] = a[i] / b[i]
        return out

    a, b = np.array([1.0, -2.0, 0.0, 3.0]), np.array([2.0, 0.0, 0.0, 4.0])
    want = [0.5, -np.inf, np.nan, 0.75]
    np.testing.assert_array_equal(ratio.parallel(a, b), want)
    np.testing.assert_array_equal(ratio.serial(a, b), want)


TWIN_SCRIPT = textwrap.dedent("""
    import numba
    import numpy as np
    from numba import prange

    from forestgen.parallel import parallel_kernel

    @parallel_kernel
    def scaled_rows(X, w):
        out = np.empty(X.shape[0])
        for i in prange(X.shape[0]):
            s = 0.0
            for j in range(X.shape[1]):
                s += X[i, j] * w[j]
            out[i] = s
        return out * 2.0 + np.sqrt(np.abs(out))   # array expressions: parfors too

    X = np.random.default_rng(0).normal(size=(500, 7))
    w = np.linspace(-1.0, 1.0, 7)
    got = scaled_rows.serial(X, w)
    try:
        numba.threading_layer()
        raise SystemExit("the serial twin started a threading layer")
    except ValueError:
        pass
    want = scaled_rows.parallel(X, w)
    assert numba.threading_layer()
    assert np.array_equal(got, want)
    print("OK")
""")


def test_serial_twin_starts_no_threads(tmp_path):
    """A kernel's serial twin (compiled through the parallel pipeline, its parfors lowered as
    plain loops) never starts Numba's threading layer, and gives the parallel kernel's bits."""
    script = tmp_path / "twin.py"  # (a file: the kernels are cached next to it)
    script.write_text(TWIN_SCRIPT)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith("OK")


IDLE_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from numba import prange
    from forestgen.parallel import openmp_waits_passively, parallel_kernel

    @parallel_kernel
    def total(x):
        s = 0.0
        for i in prange(x.shape[0]):
            s += x[i]
        return s

    x = np.ones(1_000_000)
    total(x)
    idle = 0.0
    for _ in range(10):  # CPU the process burns while its thread sleeps after a kernel
        total(x)
        c = time.process_time()
        time.sleep(0.03)
        idle += time.process_time() - c
    print(json.dumps({"policy": os.environ.get("OMP_WAIT_POLICY"),
                      "passive": openmp_waits_passively(), "idle": idle}))
""")


def _idle_run(tmp_path, **env):
    script = tmp_path / "idle.py"
    script.write_text(IDLE_SCRIPT)
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**base, "PYTHONPATH": str(REPO),
                                           "NUMBA_NUM_THREADS": "2",
                                           "NUMBA_THREADING_LAYER": "omp", **env})
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_openmp_workers_sleep_after_a_kernel(tmp_path):
    """Unless the environment chooses a wait policy, forestgen sets ``OMP_WAIT_POLICY=PASSIVE``
    before the OpenMP runtime loads: the workers of a finished kernel sleep instead of spinning
    on the second core (with ``ACTIVE``, kept as the user's choice, they spin through the
    calling thread's sleep)."""
    pytest.importorskip("numba.np.ufunc.omppool")
    ours = _idle_run(tmp_path)
    assert ours["policy"] == "PASSIVE" and ours["passive"]
    spin = _idle_run(tmp_path, OMP_WAIT_POLICY="ACTIVE")
    assert spin["policy"] == "ACTIVE" and not spin["passive"]
    assert spin["idle"] > 0.05  # a spinning worker: most of the 0.3 s slept
    assert ours["idle"] < spin["idle"] / 4
    kept = _idle_run(tmp_path, GOMP_SPINCOUNT="1000")
    assert kept["policy"] is None and not kept["passive"]


def test_import_forestgen_before_torch_is_enough_for_the_wait_policy():
    """``import forestgen`` (lazy: no learner, no Numba) already chooses the policy, so a torch
    imported next loads its OpenMP runtime with it."""
    pytest.importorskip("torch")
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    code = ("import os, sys, forestgen, torch; "
            "from forestgen.openmp_policy import openmp_waits_passively as p; "
            "print(os.environ.get('OMP_WAIT_POLICY'), p(), 'numba' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**base, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["PASSIVE", "True", "False"]


def test_thread_map_keeps_its_threads_and_runs_nested_calls_inline():
    """thread_map's pool threads serve later calls; a call from inside a task runs in that
    task's thread; every task has ended when a call raises (the first failing task's error)."""
    import threading
    import time

    from forestgen.parallel import thread_map

    def who(k):
        time.sleep(0.002)
        return threading.current_thread()

    first, second = thread_map(who, 8, 2), thread_map(who, 8, 2)
    assert set(second) <= set(first) and threading.main_thread() not in first
    outer = thread_map(lambda k: (threading.current_thread(),
                                  thread_map(lambda j: threading.current_thread(), 4, 2)), 3, 2)
    assert all(inner == [t] * 4 for t, inner in outer)
    done = []

    def task(k):
        if k == 1:
            raise KeyError("task 1")
        if k == 3:
            raise KeyError("task 3")
        time.sleep(0.01)
        done.append(k)
        return k

    with pytest.raises(KeyError, match="task 1"):
        thread_map(task, 6, 2)
    assert sorted(done) == [0, 2, 4, 5]


FORK_POOL_SCRIPT = textwrap.dedent("""
    import multiprocessing as mp
    from forestgen.parallel import thread_map

    def child(q):
        q.put(thread_map(lambda k: k * k, 6, 2))

    if __name__ == "__main__":
        assert thread_map(lambda k: k, 6, 2) == list(range(6))  # the parent's pool is started
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join(60)
""")


def test_thread_map_in_a_forked_child(tmp_path):
    """A forked child starts its own pool (the parent's threads are not in it)."""
    script = tmp_path / "forkpool.py"
    script.write_text(FORK_POOL_SCRIPT)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith("[0, 1, 4, 9, 16, 25]")
