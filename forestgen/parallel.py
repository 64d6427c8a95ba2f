"""Parallel Numba kernels that are safe under ``fork`` and under concurrent threads.

Numba's threading layers are not all safe for every pattern: GNU OpenMP (``omp``, the usual
layer of the Numba wheels) hangs a ``fork``-ed child once the parent has run a parallel kernel,
and ``workqueue`` aborts the process when two threads launch parallel kernels at once (only
TBB is safe for both, and it is an optional install). :func:`parallel_kernel` therefore
compiles each kernel twice — with ``parallel=True`` and as a serial twin — and runs the
parallel one only when that is safe under every layer:

* never in a process created by ``fork`` (``os.register_at_fork``): forked children such as
  ``multiprocessing`` fork-pool or DataLoader workers run the serial kernels;
* by one thread at a time: a thread that finds another thread inside a parallel kernel runs
  the serial kernel instead of waiting
  (except on the worker threads of :func:`thread_map`, which wait for it).

Both versions compute every output element independently, so results are identical whichever
runs. The serial version is compiled (or loaded from the cache) in the parent as soon as the
parallel one is, so a forked child never has to compile.

OpenMP's worker threads sleep as soon as a parallel kernel ends: importing forestgen sets
``OMP_WAIT_POLICY=PASSIVE`` unless the environment already chooses how OpenMP threads wait
(``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` set;
:mod:`forestgen.openmp_policy`). The OpenMP runtime reads it when it loads, which Numba's
``omp`` layer does at the first parallel kernel; torch loads the same runtime at its import, so
forestgen has to be imported before torch for this to take effect
(:func:`openmp_waits_passively` says whether it did). Child processes
inherit the variable. Left to their default, GNU OpenMP's idle workers spin for 4-7 ms of
CPU after each kernel (``benchmarks/results/arf_threads_s50.md``); they took the core a
:func:`thread_map` worker or the next serial step needed (``sample(40000)`` at two threads:
18.9 CPU ms for 10.9 ms wall with spinning workers, 11.7 CPU ms for 8.5 ms without,
``benchmarks/results/arf_threads_s49.md``).

The twin goes through the same parallel pipeline (array expressions and ``prange`` loops to
parfors, copy propagation, hoisting) and only its parfors are lowered as plain loops, with no
call into the threading layer. A twin compiled as a plain ``njit`` loop instead ran 5-11x
slower than the parallel kernel on one thread: without the parfor passes' copy propagation,
every helper inlined with ``inline="always"`` kept an atomic reference-count increment and
decrement per array argument in each iteration of the hot loop
(``benchmarks/bench_serial_twins.py``).
"""

from __future__ import annotations

import functools
import os
import threading
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numba.parfors.parfor as _parfor
from numba import njit
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core.typed_passes import ParforPass, ParforPreLoweringPass, _reload_parfors

from forestgen.openmp_policy import WAIT_VARIABLES as WAIT_VARIABLES  # (re-exported)
from forestgen.openmp_policy import openmp_waits_passively as openmp_waits_passively

_state = {"forked": False}
_lock = threading.Lock()
_local = threading.local()  # .wait: this thread is one of thread_map's workers


_pools: dict[int, ThreadPoolExecutor] = {}  # thread_map's pools, by thread count
_pools_lock = threading.Lock()


def _in_forked_child() -> None:
    global _lock, _pools_lock
    _state["forked"] = True
    _lock = threading.Lock()  # the parent's lock may have been held at fork time
    _pools_lock = threading.Lock()
    _pools.clear()  # (the parent's pool threads do not exist in the child)


os.register_at_fork(after_in_child=_in_forked_child)


def in_forked_child() -> bool:
    """True in a process created by ``fork`` after forestgen was imported."""
    return _state["forked"]


@register_pass(mutates_CFG=True, analysis_only=False)
class _SequentialParforLowering(ParforPreLoweringPass):
    """Numba's parfor pre-lowering with the parfors lowered as sequential loops (the switch
    Numba itself uses for a parfor nested in a parallel region). Passes run under Numba's
    global compiler lock, so setting the module-level switch here races with nothing."""

    _name = "forestgen_sequential_parfor_lowering"

    def run_pass(self, state):
        before = _parfor.sequential_parfor_lowering
        _parfor.sequential_parfor_lowering = True
        try:
            ParforPreLoweringPass.run_pass(self, state)
        finally:
            _parfor.sequential_parfor_lowering = before
        # the twin starts no threads: loading it from the cache need not start the layer
        state.reload_init[:] = [f for f in state.reload_init if f is not _reload_parfors]
        return True


class _SerialTwinCompiler(CompilerBase):
    """Numba's nopython pipeline with ``parallel=True``, parfors lowered sequentially."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.passes = [(_SequentialParforLowering, "parfors as sequential loops")
                     if p is ParforPreLoweringPass else (p, d) for p, d in pm.passes]
        assert any(p is ParforPass for p, _ in pm.passes)
        pm.finalize()
        return [pm]


def parallel_kernel(fn: Callable | None = None, *, error_model: str = "numpy") -> Callable:
    """Decorator: ``fn`` (a kernel written with ``prange``) as a fork- and thread-safe pair of
    compiled kernels (see the module docstring). ``.parallel`` and ``.serial`` expose both.

    Division follows NumPy by default (``x / 0.0`` is ``inf`` or ``nan``, never an exception)
    in both kernels. With ``error_model="python"`` the two would disagree: a ``prange`` body
    run in parallel cannot raise, so it returns ``inf``, while the serial twin raises
    ``ZeroDivisionError`` — a result that would depend on the input's size or the caller's
    thread. Python's model also keeps raise paths that stop Numba from pruning the reference
    counting of the arrays inlined helpers take (atomic increments in every iteration)."""
    if fn is None:
        return functools.partial(parallel_kernel, error_model=error_model)
    par = njit(cache=True, parallel=True, error_model=error_model)(fn)
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial",
                              fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + "_seq"  # its own on-disk cache entry
    ser = njit(cache=True, nogil=True, parallel=True, error_model=error_model,
               pipeline_class=_SerialTwinCompiler)(twin)

    @functools.wraps(fn)
    def call(*args):
        if not _state["forked"] and _lock.acquire(blocking=getattr(_local, "wait", False)):
            try:
                out = par(*args)
            finally:
                _lock.release()
            if len(ser.overloads) < len(par.overloads):  # (dict sizes: no type hashing)
                for sig in par.signatures:
                    ser.compile(sig)
            return out
        return ser(*args)

    call.parallel = par
    call.serial = ser
    return call


#: elements of work below which callers run a kernel's serial twin: a parallel region's start
#: and barrier cost more than they save on small inputs (far more on a loaded machine, where
#: the barrier waits for a descheduled thread)
SMALL_WORK = 65_536


def sized(kernel: Callable, work: int) -> Callable:
    """``kernel`` (a :func:`parallel_kernel`) for ``work`` elements: its serial twin below
    :data:`SMALL_WORK`. Both give the same results."""
    return kernel.serial if work < SMALL_WORK else kernel


def default_n_jobs(n_jobs: int | None) -> int:
    """Threads for ``n_jobs``: ``None`` or 0 -> 1, ``-1`` -> all cores, ``-k`` -> all but
    ``k - 1``."""
    if n_jobs is None or n_jobs == 0:
        return 1
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return int(n_jobs)


def _pool(jobs: int) -> ThreadPoolExecutor:
    """The process's pool of ``jobs`` threads (started on first use and kept)."""
    with _pools_lock:
        pool = _pools.get(jobs)
        if pool is None:
            pool = _pools[jobs] = ThreadPoolExecutor(jobs, thread_name_prefix="forestgen")
        return pool


def thread_map(fn: Callable[[int], Any], n: int, n_jobs: int | None) -> list:
    """``[fn(k) for k in range(n)]``, on ``n_jobs`` threads (:func:`default_n_jobs`) when
    there is more than one task: for tasks whose work runs in Numba kernels and NumPy calls
    that release the GIL. Each task must write only its own outputs, so the results do not
    depend on ``n_jobs``. On the pool's threads a :func:`parallel_kernel` waits for another
    thread's parallel kernel to finish instead of running its serial twin: the tasks' kernels
    take the cores in turn (the serial twins of loop-heavy kernels run several times slower
    than the parallel ones do on one thread).

    The threads are kept between calls (one pool per thread count, started on first use, and
    anew in a forked child), so a call does not pay for starting and joining them. A call
    made from inside a task runs its tasks in that task's thread, in order (a task waiting for
    tasks queued behind it in the same pool would never see them run). Every task has ended
    when the call returns or raises; an exception is the first failing task's, in task order.
    """
    jobs = min(default_n_jobs(n_jobs), n)
    if jobs <= 1 or getattr(_local, "wait", False):
        return [fn(k) for k in range(n)]

    def task(k: int) -> Any:
        _local.wait = True
        try:
            return fn(k)
        finally:
            _local.wait = False

    futures = [_pool(jobs).submit(task, k) for k in range(n)]
    wait(futures)
    return [f.result() for f in futures]
