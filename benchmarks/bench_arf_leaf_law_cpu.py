"""Fit CPU of ARF's leaf laws side by side in one process, per leaderboard table.

    python benchmarks/bench_arf_leaf_law_cpu.py TABLES_DIR [--repeat 3] [--max-train 500]
        [--configs '{"forde": {}, "oob": {"numeric_prior": "oob"}}']

Each table uses the leaderboard's split of seed 0 (``run.split``); after one warm-up fit per
configuration (Numba's kernels compiled), the configurations are fitted in turn ``--repeat``
times (``ARF(random_state=0, **config)``, CPU seconds of this process); prints per table the
median CPU of each and its ratio to the first configuration, then the ratio of the summed
medians.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaderboard"))

import numpy as np  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-train", type=int, default=500)
    ap.add_argument("--configs", default='{"forde": {}, "oob": {"numeric_prior": "oob"}}')
    ap.add_argument("--work", type=Path, default=Path("/tmp/arf_leaf_law_cpu"))
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    from cell import typed
    from run import split

    import forestgen as fg

    configs = json.loads(a.configs)
    names = sorted(p.name for p in a.tables.iterdir() if (p / "meta.json").exists())
    totals = dict.fromkeys(configs, 0.0)
    print("| table | " + " | ".join(f"{k} CPU s" for k in configs) + " | ratio |")
    print("|---|" + "---|" * (len(configs) + 1))
    for t in names:
        a.work.mkdir(parents=True, exist_ok=True)
        data = split(a.tables / t, 0, a.max_train, a.work)
        train = typed(data["train"], data["meta"])
        times: dict = {k: [] for k in configs}
        for kw in configs.values():  # (warm-up)
            fg.ARF(random_state=0, **kw).fit(train)
        for _ in range(a.repeat):
            for k, kw in configs.items():
                t0 = cpu()
                fg.ARF(random_state=0, **kw).fit(train)
                times[k].append(cpu() - t0)
        med = {k: float(np.median(v)) for k, v in times.items()}
        first = next(iter(med))
        for k in med:
            totals[k] += med[k]
        ratios = " / ".join(f"{med[k] / med[first]:.2f}" for k in list(med)[1:])
        print(f"| {t} | " + " | ".join(f"{med[k]:.3f}" for k in med) + f" | {ratios} |",
              flush=True)
    first = next(iter(totals))
    print("\nSummed medians: " + ", ".join(f"{k} {v:.2f} s" for k, v in totals.items())
          + "; ratio " + " / ".join(f"{totals[k] / totals[first]:.2f}"
                                    for k in list(totals)[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
