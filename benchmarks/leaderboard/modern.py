"""Issue 37's view of the leaderboard: every peer (the synthyverse ones included) against
``AutoForest`` and forestgen's learners at their defaults.

    python benchmarks/leaderboard/modern.py RESULTS.jsonl [MORE.jsonl ...] \\
        --out benchmarks/results/leaderboard_modern.md [--note "how the shards were run"]

Reads leaderboard cells (``run.py``'s JSONL; a cell present in several files counts once, from
the first file), and writes per table: C2ST with its interval, TSTR, out-of-range rows, rule
violations, exact copies and distance to the closest record, CPU seconds; then the goal of
issue 37 for ``forestgen:auto`` (``AutoForest()`` at its defaults).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import md_table  # noqa: E402

#: forestgen entries shown beside the peers (the README's learner, AutoForest, and the chain of
#: conditional trees built after synthpop's sequential CART)
FORESTGEN = ["forestgen:auto", "forestgen:arf", "forestgen:chain", "forestgen:nrgboost",
             "forestgen:gfboost"]
AUTO = "forestgen:auto"
DIFFUSION = ["synthyverse:tabddpm", "synthyverse:tabsyn", "synthyverse:tabdiff",
             "synthyverse:cdtd"]


def load(paths: list[Path]) -> pd.DataFrame:
    seen, rows = set(), []
    for p in paths:
        for line in p.read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            key = (r["generator"], r["table"], r["seed"])
            if key in seen:
                continue
            seen.add(key)
            rows.append(r)
    df = pd.DataFrame(rows)
    keep = ~df["generator"].str.contains("[@~]", regex=True)
    df = df[keep & (df["generator"].isin(FORESTGEN) | ~df["generator"].str.startswith(
        "forestgen:"))]
    return df


def _fmt(v, nd=3) -> str:
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{nd}f}"


def pivot(ok: pd.DataFrame, value: str) -> pd.DataFrame:
    return ok.pivot_table(index="table", columns="generator", values=value, aggfunc="mean")


def order(gens) -> list[str]:
    fg = [g for g in FORESTGEN if g in gens]
    return fg + sorted(g for g in gens if g not in fg)


def short(g: str) -> str:
    return g.replace("forestgen:", "fg:").replace("synthyverse:", "sv:")


def table_md(df: pd.DataFrame, fmt, best=None) -> str:
    cols = order(df.columns)
    head = "| table | " + " | ".join(short(c) for c in cols) + " |"
    out = [head, "|" + "---|" * (len(cols) + 1)]
    for t in df.index:
        row = df.loc[t, cols]
        b = best(row) if best else None
        cells = [("**" + fmt(t, c) + "**") if c == b else fmt(t, c) for c in cols]
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def goal(ok: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """Issue 37's goal for AutoForest against every peer, per table."""
    c2 = pivot(ok, "c2st_auc")
    ts = pivot(ok, "tstr")
    peers = [g for g in c2.columns if not g.startswith("forestgen:")]
    rows = []
    for t in c2.index:
        if AUTO not in c2.columns or not np.isfinite(c2.loc[t, AUTO]):
            continue
        d = (c2.loc[t, peers] - 0.5).abs()
        bp = d.idxmin()
        margin = abs(c2.loc[t, AUTO] - 0.5) - d.min()
        tp = ts.loc[t, peers]
        rows.append({"table": t, "auto C2ST": c2.loc[t, AUTO], "best peer": bp,
                     "peer C2ST": c2.loc[t, bp], "margin": margin,
                     "auto TSTR": ts.loc[t, AUTO], "best peer TSTR": tp.max(),
                     "TSTR peer": tp.idxmax(), "TSTR gap": tp.max() - ts.loc[t, AUTO]})
    g = pd.DataFrame(rows)
    if g.empty:
        return ["No AutoForest cells."], g
    n = len(g)
    won = int((g["margin"] <= 0).sum())
    within = int(((g["margin"] > 0) & (g["margin"] <= 0.02)).sum())
    lost = g.loc[g["margin"] > 0.02, "table"].tolist()
    tstr_ok = int((g["TSTR gap"] <= 0.02).sum())
    auto = ok[ok["generator"] == AUTO]
    oor = auto.groupby("table")["out_of_range_rows"].max()
    viol = auto.groupby("table")["rule_violation_rate"].max() if \
        "rule_violation_rate" in auto else pd.Series(dtype=float)
    lines = [
        f"- **C2ST** (closest to 0.5 among all generators on >= 80% of tables, within 0.02 on "
        f"the rest): closest on {won} of {n}, within 0.02 on {within}, further on "
        f"{len(lost)} {lost} — {'MET' if won >= 0.8 * n and not lost else 'NOT MET'}.",
        f"- **TSTR** (within 0.02 of the best peer on >= 80%): {tstr_ok} of {n} — "
        f"{'MET' if tstr_ok >= 0.8 * n else 'NOT MET'}; further than 0.02 on "
        f"{g.loc[g['TSTR gap'] > 0.02, 'table'].tolist()}.",
        f"- **Out of range**: {int((oor > 0).sum())} table(s) with any out-of-range value "
        f"{oor[oor > 0].index.tolist()}.",
        f"- **Rule violations** (mappings that hold in every training row): "
        f"{int((viol > 0).sum())} table(s) with any {viol[viol > 0].index.tolist()}.",
    ]
    cpu = pivot(ok, "cpu_s")
    if AUTO in cpu.columns:
        for d in [x for x in DIFFUSION if x in cpu.columns]:
            r = (cpu[d] / cpu[AUTO]).dropna()
            if len(r):
                lines.append(f"- CPU seconds, {short(d)} / AutoForest: median {r.median():.1f}x "
                             f"over {len(r)} tables (at the caps stated above).")
    return lines, g


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/leaderboard_modern.md"))
    ap.add_argument("--note", default="")
    ap.add_argument("--seeds", default=None,
                    help="comma-separated seeds to keep (default: all); one seed for every "
                         "generator keeps the comparison paired")
    a = ap.parse_args(argv)
    df = load(a.jsonl)
    if a.seeds is not None:
        df = df[df["seed"].isin([int(s) for s in a.seeds.split(",")])]
    ok = df[df["status"] == "ok"].copy()
    for c in ("rule_violation_rate", "dcr_closer_to_train", "exact_copy_rate"):
        if c not in ok:
            ok[c] = np.nan
    ok["ci_lo"] = [c[0] if isinstance(c, list) else np.nan for c in ok["c2st_ci"]]
    ok["ci_hi"] = [c[1] if isinstance(c, list) else np.nan for c in ok["c2st_ci"]]
    seeds = ok.groupby("generator")["seed"].nunique()
    c2, lo, hi = pivot(ok, "c2st_auc"), pivot(ok, "ci_lo"), pivot(ok, "ci_hi")

    def c2fmt(t, g):
        v = c2.loc[t, g] if g in c2 else np.nan
        if not np.isfinite(v):
            return "—"
        return f"{v:.3f} [{lo.loc[t, g]:.2f}, {hi.loc[t, g]:.2f}]"

    def closest(row):
        d = (row - 0.5).abs().dropna()
        return d.idxmin() if len(d) else None

    L = ["# Leaderboard with the modern peers (issue 37)", "", a.note, "",
         "Generators: " + ", ".join(f"{short(g)} ({seeds[g]} seed{'s' if seeds[g] > 1 else ''})"
                                    for g in order(seeds.index)) + ".", ""]
    lines, g = goal(ok)
    L += ["## The goal for `AutoForest()` at its defaults", ""] + lines + [""]
    if not g.empty:
        gg = g.copy()
        for c in ("auto C2ST", "peer C2ST", "margin", "auto TSTR", "best peer TSTR",
                  "TSTR gap"):
            gg[c] = gg[c].map(lambda v: f"{v:.3f}")
        gg["best peer"] = gg["best peer"].map(short)
        gg["TSTR peer"] = gg["TSTR peer"].map(short)
        L += [md_table(list(gg.columns), gg.to_numpy().tolist()), ""]
    if "auto_choice" in ok:
        ch = ok[ok["generator"] == AUTO].groupby("table")["auto_choice"].agg(
            lambda s: ", ".join(sorted(set(map(str, s)))))
        L += ["AutoForest's choice per table (over seeds): "
              + "; ".join(f"{t}: {c}" for t, c in ch.items()), ""]
    L += ["## C2ST AUC against held-out rows [95% interval] (closest to 0.5 in bold)", "",
          "Mean over seeds; the interval is the mean of the seeds' intervals.", "",
          table_md(c2, c2fmt, closest), ""]
    ts = pivot(ok, "tstr")
    L += ["## TSTR (ROC AUC for class targets, R² for regression; higher is better)", "",
          table_md(ts, lambda t, c: _fmt(ts.loc[t, c]),
                   lambda r: r.dropna().idxmax() if r.notna().any() else None), ""]
    for value, title, nd in (
            ("out_of_range_rows", "Share of synthetic rows with a numeric value outside the "
                                  "training range", 3),
            ("rule_violation_rate", "Share of synthetic rows breaking a mapping that holds in "
                                    "every training row (— : not scored, sample not kept)", 3),
            ("exact_copy_rate", "Share of synthetic rows that copy a training row exactly", 3),
            ("dcr_closer_to_train", "DCR: share of synthetic rows closer to a training row than "
                                    "held-out rows are (0.5: as far as unseen real rows)", 3),
            ("cpu_s", "CPU seconds (fit + sample, one thread)", 1)):
        p = pivot(ok, value)
        L += [f"## {title}", "", table_md(p, lambda t, c, p=p, nd=nd: _fmt(
            p.loc[t, c] if c in p else np.nan, nd)), ""]
    if "bound_pile_columns" in ok:
        piles = ok[ok["bound_pile_columns"].map(lambda d: bool(d) if isinstance(d, dict)
                                                 else False)]
        if len(piles):
            L += ["## Values piled on a column's training bound (excess share > 0.05)", ""]
            for r in piles.itertuples():
                L.append(f"- {short(r.generator)} on {r.table} (seed {r.seed}): "
                         f"{r.bound_pile_columns}")
            L.append("")
    bad = df[df["status"] != "ok"]
    if len(bad):
        L += ["## Failed cells", ""] + [f"- {short(r.generator)} {r.table} s{r.seed}: "
                                        f"{r.status} {str(getattr(r, 'error', ''))[:160]}"
                                        for r in bad.itertuples()] + [""]
    a.out.write_text("\n".join(L))
    print("\n".join(L[:40]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
