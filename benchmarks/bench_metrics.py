"""Time ``forestgen.metrics.report`` on adult (30k x 15 mixed): real train vs a bootstrap resample.

Usage: ``python benchmarks/bench_metrics.py [--threads N] [--out PATH]``. Writes
``benchmarks/results/metrics_timing.md`` with per-metric timings and the machine description.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "adult"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=1,
                    help="n_threads passed to report() (default 1 as in report; 0 = None)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "metrics_timing.md"))
    args = ap.parse_args(argv)

    import sklearn

    from forestgen.metrics import report
    from forestgen.metrics.cli import read_table

    real = read_table(DATA / "adult.train.csv")
    holdout = read_table(DATA / "adult.test.csv")
    synthetic = real.sample(len(real), replace=True, random_state=1).reset_index(drop=True)
    load_before = os.getloadavg()

    t0 = time.perf_counter()
    rep = report(real, synthetic, holdout=holdout, target="income", n_threads=args.threads or None)
    total = time.perf_counter() - t0
    t1 = time.perf_counter()
    tmp = Path(args.out).with_suffix(".tmp")
    rep.to_html(tmp)
    export = time.perf_counter() - t1
    tmp.unlink(missing_ok=True)
    load_after = os.getloadavg()

    lines = [
        "# forestgen.metrics.report() timing",
        "",
        f"- data: adult train {real.shape[0]} x {real.shape[1]} (real) vs a bootstrap resample "
        f"of it (synthetic); holdout adult test {holdout.shape[0]} rows; target `income`",
        f"- machine: nproc={os.cpu_count()}, CPU {_cpu_model()}, {platform.system()} "
        f"{platform.machine()}",
        f"- software: Python {platform.python_version()}, numpy {np.__version__}, "
        f"pandas {pd.__version__}, scikit-learn {sklearn.__version__}",
        f"- n_threads: {args.threads}; load average before/after (1 min): "
        f"{load_before[0]:.1f} / {load_after[0]:.1f} (shared machine)",
        "",
        f"**report() total: {total:.2f} s** (+ HTML export with plots: {export:.2f} s)",
        "",
        "| metric | seconds |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:.3f} |" for k, v in rep.timings.items()]
    lines += [f"| other (typing, bookkeeping) | {total - sum(rep.timings.values()):.3f} |", "",
              "```", rep.summary(), "```", ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
