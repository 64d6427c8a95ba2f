"""Issue 37's comparison with the classical peers over several seeds: the Chain (new and earlier
numeric leaves), ``ARF()``, ``AutoForest()``, synthpop and SMOTE at the same splits.

    python benchmarks/leaderboard/classical.py RESULTS.jsonl --out PAGE.md [--note "..."]

Per table: C2ST (mean over seeds, with the mean of the seeds' 95% intervals), TSTR, out-of-range
rows, rule violations, exact copies, distance to closest record and CPU seconds (the tables of
:mod:`modern`); before them a summary over (table, seed) cells — mean ``|AUC - 0.5|``, tables
won, the chain against synthpop seed by seed — and AutoForest's choices and validation scores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import modern  # noqa: E402
from _common import md_table  # noqa: E402

OLD_CHAIN = "forestgen:chain~numeric_leaf=truncnorm"
#: the chain with the column's normal as its defensive kernel (run after the others, from
#: a copy of the code with that default; optional)
COL_CHAIN = "forestgen:chain~defensive_scale=column"
GENERATORS = ["forestgen:auto", "forestgen:arf", "forestgen:chain", OLD_CHAIN,
              "synthyverse:synthpop", "synthyverse:smote"]


_SHORT = modern.short


def short(g: str) -> str:
    return {OLD_CHAIN: "fg:chain (truncnorm leaves)",
            COL_CHAIN: "fg:chain (column defensive)"}.get(g, _SHORT(g))


def load(path: Path) -> pd.DataFrame:
    df = pd.read_json(path, lines=True)
    if COL_CHAIN in set(df["generator"]) and COL_CHAIN not in GENERATORS:
        GENERATORS.insert(3, COL_CHAIN)
    if OLD_CHAIN not in set(df["generator"]) and OLD_CHAIN in GENERATORS:  # optional too
        GENERATORS.remove(OLD_CHAIN)
    df = df[df["generator"].isin(GENERATORS) & (df["status"] == "ok")].copy()
    # only (table, seed) cells where every generator ran: the comparison stays paired
    full = df.groupby(["table", "seed"])["generator"].nunique() == len(GENERATORS)
    keep = set(full[full].index)
    return df[[(t, s) in keep for t, s in zip(df["table"], df["seed"])]]


def summary(ok: pd.DataFrame) -> list[str]:
    ok = ok.assign(dist=(ok["c2st_auc"] - 0.5).abs())
    c2 = modern.pivot(ok, "c2st_auc")
    wins = (c2 - 0.5).abs().idxmin(axis=1).value_counts()
    ts = modern.pivot(ok, "tstr")
    gap = ts.max(axis=1).to_numpy()[:, None] - ts
    rows = []
    for g in GENERATORS:
        s = ok[ok["generator"] == g]
        rows.append([short(g), f"{s['dist'].mean():.3f}", f"{s['dist'].std():.3f}",
                     str(int(wins.get(g, 0))), f"{gap[g].mean():.3f}",
                     f"{gap[g].max():.3f}", f"{s['cpu_s'].median():.1f}"])
    head = ["generator", "mean abs(AUC - 0.5) over cells", "SD over cells",
            "tables closest (mean C2ST)", "mean TSTR gap to best", "largest TSTR gap",
            "median CPU s"]
    return [md_table(head, rows)]


def paired(ok: pd.DataFrame, a: str, b: str) -> list[str]:
    """Per table, ``|AUC_a - 0.5| - |AUC_b - 0.5|`` seed by seed (negative: ``a`` closer)."""
    d = ok.assign(dist=(ok["c2st_auc"] - 0.5).abs()).pivot_table(
        index=["table", "seed"], columns="generator", values="dist")
    diff = (d[a] - d[b]).unstack("seed")
    rows = []
    for t, r in diff.iterrows():
        v = r.dropna().to_numpy()
        rows.append([t, " / ".join(f"{x:+.3f}" for x in v), f"{v.mean():+.3f}",
                     f"{int((v < 0).sum())} of {len(v)}"])
    allv = diff.to_numpy().ravel()
    allv = allv[np.isfinite(allv)]
    rows.append(["all", "", f"{allv.mean():+.3f}", f"{int((allv < 0).sum())} of {len(allv)}"])
    return [md_table(["table", "per seed", "mean", f"{short(a)} closer"], rows)]


def auto_boards(ok: pd.DataFrame) -> list[str]:
    auto = ok[ok["generator"] == "forestgen:auto"]
    if "auto_board" not in auto:
        return []
    rows = []
    for r in auto.sort_values(["table", "seed"]).itertuples():
        board = pd.DataFrame(r.auto_board)
        if board.empty:
            continue
        dist = dict(zip(board["candidate"], (board["c2st_auc"] - 0.5).abs()))
        rows.append([r.table, str(r.seed), str(r.auto_choice)]
                    + [f"{dist.get(c, np.nan):.3f}" for c in CANDIDATES])
    return [md_table(["table", "seed", "chosen"] + CANDIDATES, rows)]


CANDIDATES = ["ARF", "ARF best samples", "NRGBoost", "GFBoost", "Chain"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--title", default="The Chain, AutoForest and the classical peers over "
                    "seeds (issue 37)")
    a = ap.parse_args(argv)
    ok = load(a.jsonl)
    for c in ("rule_violation_rate", "dcr_closer_to_train", "exact_copy_rate"):
        if c not in ok:
            ok[c] = np.nan
    ok["ci_lo"] = [c[0] if isinstance(c, list) else np.nan for c in ok["c2st_ci"]]
    ok["ci_hi"] = [c[1] if isinstance(c, list) else np.nan for c in ok["c2st_ci"]]
    modern.FORESTGEN = [g for g in GENERATORS if g.startswith("forestgen:")]
    modern.short = short
    cells = ok.groupby("table")["seed"].nunique()
    L = [f"# {a.title}", "", a.note, "",
         f"Tables and seeds (cells where all {len(GENERATORS)} generators ran): "
         + ", ".join(f"{t} ({n})" for t, n in cells.items()) + ".", "",
         "## Summary over (table, seed) cells", "", *summary(ok), "",
         "## The chain against synthpop, seed by seed", "",
         "`|AUC - 0.5|` of the chain minus synthpop's (negative: the chain is closer).", "",
         *paired(ok, "forestgen:chain", "synthyverse:synthpop"), "",
         *(["The chain's kernel leaves against its earlier truncated-normal leaves:", "",
            *paired(ok, "forestgen:chain", OLD_CHAIN), ""] if OLD_CHAIN in GENERATORS else []),
         *(["The chain with the column's normal as its defensive kernel against synthpop, "
            "and against the chain with the leaf's normal:", "",
            *paired(ok, COL_CHAIN, "synthyverse:synthpop"), "",
            *paired(ok, COL_CHAIN, "forestgen:chain"), ""] if COL_CHAIN in GENERATORS else []),
         "AutoForest against synthpop:", "",
         *paired(ok, "forestgen:auto", "synthyverse:synthpop"), "",
         "## AutoForest's choice and its candidates' validation `|AUC - 0.5|`", "",
         *auto_boards(ok), ""]
    lines, g = modern.goal(ok)
    L += ["## The goal for `AutoForest()` (against synthpop and SMOTE, means over seeds)", ""]
    L += lines + [""]
    c2, lo, hi = (modern.pivot(ok, v) for v in ("c2st_auc", "ci_lo", "ci_hi"))

    def c2fmt(t, gen):
        v = c2.loc[t, gen] if gen in c2 else np.nan
        if not np.isfinite(v):
            return "—"
        return f"{v:.3f} [{lo.loc[t, gen]:.2f}, {hi.loc[t, gen]:.2f}]"

    L += ["## C2ST AUC against held-out rows [95% interval] (closest to 0.5 in bold)", "",
          "Mean over seeds; the interval is the mean of the seeds' intervals.", "",
          modern.table_md(c2, c2fmt, lambda r: (r - 0.5).abs().idxmin()), ""]
    ts = modern.pivot(ok, "tstr")
    L += ["## TSTR (ROC AUC for class targets, R² for regression; higher is better)", "",
          modern.table_md(ts, lambda t, c: modern._fmt(ts.loc[t, c]),
                          lambda r: r.idxmax()), ""]
    for value, title, nd in (
            ("out_of_range_rows", "Share of synthetic rows with a numeric value outside the "
                                  "training range", 3),
            ("rule_violation_rate", "Share of synthetic rows breaking a mapping that holds in "
                                    "every training row", 3),
            ("exact_copy_rate", "Share of synthetic rows that copy a training row exactly", 3),
            ("dcr_closer_to_train", "DCR: share of synthetic rows closer to a training row than "
                                    "held-out rows are (0.5: as far as unseen real rows)", 3),
            ("test_ll", "Held-out log-likelihood (nats per row; density models only)", 2),
            ("cpu_s", "CPU seconds (fit + sample, one thread; median over seeds)", 1)):
        if value not in ok:
            continue
        p = ok.pivot_table(index="table", columns="generator", values=value,
                           aggfunc="median" if value == "cpu_s" else "mean")
        L += [f"## {title}", "", modern.table_md(p, lambda t, c, p=p, nd=nd: modern._fmt(
            p.loc[t, c] if c in p else np.nan, nd)), ""]
    a.out.write_text("\n".join(L))
    print("\n".join(L[:60]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
