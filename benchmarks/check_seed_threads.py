"""Same seed, same result, whatever the thread count (issue 37, stop 46): the held-out
log-likelihoods and draws of ARF, the Chain and the one-column ARF marginals of
bench_scaled_defaults, as short hashes, in one process per thread count.

    python benchmarks/check_seed_threads.py --tables Cars93,tips,quine,Boston,wide5000 \\
        --out benchmarks/results/seed_threads_s46.md

Each learner at its defaults with ``random_state=0`` on bench_scaled_defaults' split; its
mean held-out log-likelihood, a hash of the per-row values and one hash of the draws of each
size in ``--draws`` (a comma list, ``50`` by default; ``random_state=1``); ``--arf-params``
(a JSON object) adds parameters to ARF's. The same hashes at
``NUMBA_NUM_THREADS=1`` and ``2`` (and ``n_jobs`` following it) mean the same bits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402
from bench_scaled_defaults import commit_label, load_table, marginal_ll  # noqa: E402

LEARNERS = ("marginals", "ARF", "Chain")


def _hash(a) -> str:
    return hashlib.sha1(np.ascontiguousarray(np.asarray(a, float)).tobytes()).hexdigest()[:10]


def one(tables: list[str], work: Path, draws_n: str = "50", arf_params: str = "{}") -> dict:
    import forestgen as fg

    warnings.simplefilter("ignore")
    threads = int(os.environ["NUMBA_NUM_THREADS"])
    out = {}
    for table in tables:
        train, test, _ = load_table(table, work)
        out[f"{table}/marginals"] = [marginal_ll(train, test), "", ""]
        for name in LEARNERS[1:]:
            extra = json.loads(arf_params) if name == "ARF" else {}
            m = getattr(fg, name)(random_state=0, n_jobs=threads, **extra).fit(train)
            lp = m.log_prob(test)
            h = hashlib.sha1()
            for q in draws_n.split(","):
                h.update(m.sample(int(q), random_state=1).to_csv().encode())
            out[f"{table}/{name}"] = [float(np.mean(lp)), _hash(lp), h.hexdigest()[:10]]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="Cars93,tips,quine,Boston,wide5000")
    ap.add_argument("--work", type=Path, default=Path("/tmp/forestgen-scaled"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/seed_threads.md"))
    ap.add_argument("--draws", default="50", help="rows sampled per learner, a comma list "
                    "(from COLUMN_ROWS = 2,048 FORGE draws the columns on the threads, from "
                    "THREAD_ROWS = 16,384 on chunks of them)")
    ap.add_argument("--arf-params", default="{}", help="more of ARF's parameters, a JSON "
                    "object (e.g. '{\"grid_spikes\": \"oob\"}')")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    tables = a.tables.split(",")
    if a.one:
        print(json.dumps(one(tables, a.work, a.draws, a.arf_params)))
        return 0
    runs = {}
    for t in (1, 2):
        r = subprocess.run([sys.executable, __file__, "--one", "--tables", a.tables, "--work",
                            str(a.work), "--draws", str(a.draws),
                            "--arf-params", a.arf_params],
                           env={**os.environ, "NUMBA_NUM_THREADS": str(t)},
                           capture_output=True, text=True, check=True)
        runs[t] = json.loads(r.stdout.strip().splitlines()[-1])
    rows = [[k, *runs[1][k], *runs[2][k][:1], *runs[2][k][1:],
             "same" if runs[1][k] == runs[2][k] else "DIFFERENT"] for k in runs[1]]
    a.out.write_text("\n".join([
        "# Same seed at one and two threads", "",
        f"Command: `python benchmarks/check_seed_threads.py {' '.join(argv or sys.argv[1:])}`",
        "", f"Commit: {commit_label()}.", "",
        md_table(["table/learner", "mean LL (1 thread)", "LL hash (1)", "draws hash (1)",
                  "mean LL (2 threads)", "LL hash (2)", "draws hash (2)", "bits"], rows), ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
