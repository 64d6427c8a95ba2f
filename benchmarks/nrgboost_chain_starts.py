"""NRGBoost's number of chain starts on the leaderboard splits (results/nrgboost_samples.md).

    python benchmarks/nrgboost_chain_starts.py WORK STARTS TABLE[,TABLE...]

``WORK`` is a leaderboard ``--work`` directory (its ``tables/`` and ``<table>_s<seed>/`` splits,
made by ``benchmarks/leaderboard/run.py``). NRGBoost at the leaderboard's quick size is fitted on
seeds 0-2 of each table with ``STARTS`` final-pool states as chain starts (the module constant
``CHAIN_STARTS``), draws as many rows as the training split and is scored by the leaderboard's
``score_cell``; 256 (the default) reproduces the leaderboard's ``forestgen:nrgboost`` cells.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaderboard"))
sys.path.insert(0, str(HERE.parent))

from cell import typed  # noqa: E402
from run import QUICK, kinds_for_metrics  # noqa: E402
from score import score_cell  # noqa: E402

import forestgen.families.energy.nrgboost as nb  # noqa: E402


def main(work: Path, starts: int, tables: list[str]) -> None:
    nb.CHAIN_STARTS = starts
    out_dir = Path(tempfile.mkdtemp(prefix="nrgboost-starts-"))
    for t in tables:
        res = []
        meta = json.loads((work / "tables" / t / "meta.json").read_text())
        for s in range(3):
            d = work / f"{t}_s{s}"
            train = typed(str(d / "train.csv"), meta)
            model = nb.NRGBoost(**QUICK["nrgboost"], max_leaves=256, random_state=s).fit(train)
            path = out_dir / f"{t}_s{s}.csv"
            model.sample(len(train), random_state=s).to_csv(path, index=False)
            data = {"meta": meta, "train": str(d / "train.csv"), "test": str(d / "test.csv"),
                    "n_train": len(train), "n_test": 0}
            r = score_cell(data, str(path), kinds_for_metrics(meta), s)
            res.append((r["c2st_auc"], r["tstr"]))
        a = np.array(res, float)
        print(f"starts={starts} {t}: C2ST per seed {np.round(a[:, 0], 3).tolist()} mean "
              f"{a[:, 0].mean():.3f}, TSTR mean {a[:, 1].mean():.3f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","))
