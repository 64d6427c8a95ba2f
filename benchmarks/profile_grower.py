"""Where the impurity grower's time goes, per Numba function (issue 33): ``perf`` samples of a
process growing ARF's discriminator trees, with the JIT addresses named by ``gdb``.

    python benchmarks/profile_grower.py --rows 80000 --seconds 20

A child process compiles the kernels into a fresh Numba cache directory (so they are JIT
compiled in that process and registered with gdb's JIT interface), then grows 30-tree forests
on the mixed table of ``bench_arf_rarf.py`` (round-0 synthetic rows, leaves of 5 real rows,
one thread) until killed. The parent waits ``--warm`` seconds (compilation), records
``perf record -F 999 -p CHILD`` for ``--seconds``, asks ``gdb -p CHILD`` for ``info symbol`` of
every sampled JIT address, and prints the share of all samples per function (helpers that the
Numba compiler inlines count as their caller). Needs ``perf`` and ``gdb`` and
``kernel.perf_event_paranoid <= 2``. Nothing is written to ``results/``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(n: int) -> None:
    sys.path.insert(0, str(HERE))
    from bench_grower_floor import grow, stacked

    grow(stacked(2000, 0), 2, 5, 0)
    data = stacked(n, 0)
    print("ready", flush=True)
    seed = 0
    while True:
        grow(data, 30, 5, seed)
        seed += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=80000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--warm", type=int, default=240, help="most seconds to wait for 'ready'")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.rows)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_NUM_THREADS": "1", "NUMBA_CACHE_DIR": tmp}
        proc = subprocess.Popen([sys.executable, __file__, "--child", "--rows", str(args.rows)],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            t0 = time.time()
            while proc.stdout.readline().strip() != "ready":
                if time.time() - t0 > args.warm or proc.poll() is not None:
                    raise RuntimeError("the child did not get ready")
            data = Path(tmp) / "perf.data"
            subprocess.run(["timeout", "-s", "INT", str(args.seconds), "perf", "record",
                            "-F", "999", "-p", str(proc.pid), "-o", str(data)],
                           capture_output=True)
            rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "dso,sym",
                                  "--stdio"], capture_output=True, text=True).stdout
            shares: dict[str, float] = collections.defaultdict(float)
            jit: list[tuple[float, str]] = []
            for line in rep.splitlines():
                m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s+\[\.\]\s+(\S+)", line)
                if not m:
                    continue
                pct, dso, sym = float(m[1]), m[2], m[3]
                if dso.startswith("[JIT]"):
                    jit.append((pct, sym))
                else:
                    shares[f"{sym} ({Path(dso).name})"] += pct
            cmds = Path(tmp) / "gdb.cmds"
            cmds.write_text("".join(f"info symbol {a}\n" for _, a in jit))
            out = subprocess.run(["gdb", "-p", str(proc.pid), "-batch", "-x", str(cmds)],
                                 capture_output=True, text=True).stdout
            names = [ln for ln in out.splitlines() if "in section" in ln or "No symbol" in ln]
            for (pct, _), name in zip(jit, names):
                fn = re.split(r" \+ | in section", name)[0]
                shares[re.sub(r"\[abi.*", "", fn)] += pct
        finally:
            proc.kill()
            proc.wait()
    print(f"perf samples of growing 30-tree forests at {args.rows} rows, share of all samples:")
    for name, pct in sorted(shares.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{pct:6.2f}%  {name}")


if __name__ == "__main__":
    main()
