"""Re-run NRGBoost cells of a finished leaderboard run with other seeds and sampling protocols.

A leaderboard run of one seed cannot rank generators whose C2ST differ by less than the seed
spread. This script re-fits, on the *same* train/test split of a run's work directory, forestgen's
NRGBoost at the cell's size (sampled by its default protocol and by independent chains from q0
with a few sweeps each) and, with ``--package``, the nrgboost package at the cell's settings (run
by the package's own venv), and scores every sample with the leaderboard's scoring code::

    python benchmarks/leaderboard/reseed.py --work /tmp/forestgen-leaderboard-XXXX \\
        --tables anes96,fair,california --seeds 1,2 --package /work/peers/nrgboost/bin/python

Prints one line per table: mean C2ST AUC per protocol over the seeds (and the per-seed values).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

_PACKAGE = """
import json, sys
sys.path.insert(0, {here!r})
from cell import typed, run_nrgboost
job = json.load(open({job!r}))
train = typed(job["train"], job["meta"])
syn, *_ = run_nrgboost(job["params"], train, None, job["n_synth"], {seed})
syn.to_csv({out!r}, index=False)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="a leaderboard run's --work dir")
    ap.add_argument("--tables", required=True)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--burn-in", default="3,10,30", help="q0-chain sweeps per row to try")
    ap.add_argument("--package", default=None, help="python of the nrgboost package's venv")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import numpy as np
    import pandas as pd
    from cell import typed
    from run import kinds_for_metrics
    from score import score_cell

    import forestgen as fg

    seeds = [int(s) for s in a.seeds.split(",")]
    burn = [int(b) for b in a.burn_in.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="reseed-"))
    for table in a.tables.split(","):
        cell = a.work / f"{table}_s0"
        job = json.loads((cell / "forestgen_nrgboost" / "job.json").read_text())
        meta, n = job["meta"], job["n_synth"]
        data = {"meta": meta, "train": job["train"], "test": job["test"]}
        kinds = kinds_for_metrics(meta)
        train = typed(job["train"], meta)

        def c2st(df, data=data, kinds=kinds) -> float:
            path = tmp / "synth.csv"
            df.to_csv(path, index=False)
            return float(score_cell(data, str(path), kinds, 0)["c2st_auc"])

        res: dict[str, list[float]] = {"default": [], **{f"q0 x{b}": [] for b in burn}}
        if a.package:
            res["package"] = []
        for s in seeds:
            m = fg.NRGBoost(**job["params"], random_state=s).fit(train)
            res["default"].append(c2st(m.sample(n, random_state=s)))
            for b in burn:
                res[f"q0 x{b}"].append(c2st(m.sample(n, random_state=s, chains=n, burn_in=b,
                                                     start="q0")))
            if a.package:
                pjob = str(cell / "nrgboost" / "job.json")
                out = str(tmp / "pkg.csv")
                code = _PACKAGE.format(here=str(HERE), job=pjob, seed=s, out=out)
                run = subprocess.run([a.package, "-c", code], capture_output=True, text=True)
                if run.returncode:  # e.g. NaN rows the package cannot take: not scored
                    res["package"].append(float("nan"))
                    continue
                res["package"].append(c2st(pd.read_csv(out)))
        print(table, "; ".join(f"{k}: {np.mean(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})"
                               for k, v in res.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
