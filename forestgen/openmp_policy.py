"""How idle OpenMP worker threads wait, chosen once when forestgen is imported.

Unless the environment already chooses (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or
``KMP_BLOCKTIME`` set), forestgen sets ``OMP_WAIT_POLICY=PASSIVE`` so that the workers of a
finished parallel kernel sleep instead of spinning for 4-7 ms of CPU on the second core
(:mod:`forestgen.parallel`; ``benchmarks/results/arf_threads_s50.md``). The OpenMP runtime reads
the variable when it loads: Numba's ``omp`` layer at the first parallel kernel, torch at its
import. This module imports nothing heavy, so ``import forestgen`` before ``import torch`` is
enough; :func:`openmp_waits_passively` says whether it took effect.
"""

from __future__ import annotations

import os

__all__ = ["WAIT_VARIABLES", "openmp_waits_passively"]

#: the variables by which a user chooses how idle OpenMP threads wait (GNU, LLVM and Intel)
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _openmp_loaded() -> bool:
    """Whether an OpenMP runtime Numba's layer would share is already mapped into this
    process (Linux; elsewhere assumed not). Copies vendored under a hashed name
    (``scikit_learn.libs/libgomp-<hash>.so``) are separate runtimes and do not count."""
    try:
        with open("/proc/self/maps") as f:
            names = {line.rsplit("/", 1)[-1].strip() for line in f if ".so" in line}
    except OSError:
        return False
    return any(n.startswith(("libgomp.so", "libiomp5.so", "libomp.so")) for n in names)


_PASSIVE = not any(v in os.environ for v in WAIT_VARIABLES)
if _PASSIVE:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    _PASSIVE = not _openmp_loaded()


def openmp_waits_passively() -> bool:
    """True when forestgen chose ``OMP_WAIT_POLICY=PASSIVE`` before any OpenMP runtime was
    loaded (so idle OpenMP workers sleep); False when the environment set the wait policy or a
    runtime was already loaded (torch imported before forestgen)."""
    return _PASSIVE
