"""Summary tables and figures of ``bench_augmentation.py``'s results (``--report``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from _common import REPO, RESULTS

FIGURES = REPO / "docs" / "augmentation_figures"
METHOD_ORDER = ["real", "arf@1", "arf@3", "gfboost@1", "nrgboost@1", "autoforest@1",
                "gaussiancopula@1", "noise@1", "mixup@1", "smote", "oversample", "arf-balance",
                "gfboost-balance", "nrgboost-balance"]


def _load(path: Path) -> pd.DataFrame:
    df = pd.DataFrame([json.loads(x) for x in path.read_text().splitlines() if x.strip()])
    df = df.drop_duplicates(["table", "n", "seed", "method", "learner"], keep="last")
    df["score"] = np.where(df["task"] == "regression", df.get("r2"), df.get("auc"))
    return df


def _se(x: pd.Series) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def _fmt(mu: float, se: float, digits: int = 3, sign: bool = False) -> str:
    m = f"{mu:+.{digits}f}" if sign else f"{mu:.{digits}f}"
    return f"{m} +- {se:.{digits}f}" if np.isfinite(se) else m


def paired(df: pd.DataFrame, col: str = "score") -> pd.DataFrame:
    """Per row: the method's score minus real-only's, same table / size / seed / learner."""
    key = ["table", "n", "seed", "learner"]
    base = df[df["method"] == "real"].set_index(key)[col]
    out = df[df["method"] != "real"].copy()
    out["delta"] = out[col].to_numpy() - base.reindex(out.set_index(key).index).to_numpy()
    return out.dropna(subset=["delta"])


def summary(d: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean delta +- s.e. over cells (a cell = table x size: its seeds averaged first), and
    how many cells the method wins / loses by more than two standard errors."""
    cell = d.groupby(["table", "n", "method", "learner"]).agg(
        m=("delta", "mean"), s=("delta", _se), k=("delta", "size")).reset_index()
    rows = []
    for keys, g in cell.groupby(by, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        sig = g["m"] / g["s"].replace(0, np.nan)
        rows.append({**dict(zip(by, keys)), "mean": g["m"].mean(), "se": _se(g["m"]),
                     "cells": len(g), "better": int((sig > 2).sum()),
                     "worse": int((sig < -2).sum())})
    return pd.DataFrame(rows)


def _order(methods) -> list[str]:
    return [m for m in METHOD_ORDER if m in set(methods)] + sorted(
        set(methods) - set(METHOD_ORDER))


def report(path: Path) -> None:
    df = _load(path)
    bal = df[~df["table"].str.contains("-imb")]
    imb = df[df["table"].str.contains("-imb")]
    lines = ["# Augmentation benchmark: real vs real + synthetic rows", "",
             "Produced by `python benchmarks/bench_augmentation.py` (protocol in its docstring) "
             "and `--report`. Score = test AUC (classification) or R^2 (regression); "
             "`delta` = score minus real-only's at the same table, size, seed and learner. "
             "Means over cells (table x training size, each the mean over its seeds) +- s.e. "
             "over cells; better / worse = cells where the mean delta is more than two standard "
             "errors (over seeds) above / below zero.", ""]
    tables = sorted(bal["table"].unique())
    lines += [f"Tables: {', '.join(tables)}; sizes: "
              f"{', '.join(map(str, sorted(bal['n'].unique())))} (a table too small for a "
              "size is left out of it); "
              f"{len(bal)} trained models, {bal['cpu_s'].sum() / 3600:.2f} CPU hours of "
              "learner training (generators and SDV not included).", ""]
    lines += _coverage(bal)
    d = paired(bal)
    s = summary(d, ["method", "learner"])
    lines += ["## Summary over all tables and sizes", "",
              "| method | MLP delta | better / worse (of cells) | GBM delta | better / worse |",
              "|---|---:|---:|---:|---:|"]
    for m in _order(s["method"]):
        r = {lr: s[(s["method"] == m) & (s["learner"] == lr)] for lr in ("mlp", "gbm")}
        cells = []
        for lr in ("mlp", "gbm"):
            if r[lr].empty:
                cells += ["", ""]
                continue
            x = r[lr].iloc[0]
            cells += [f"{x['mean']:+.4f} +- {x['se']:.4f}",
                      f"{x['better']} / {x['worse']} ({x['cells']})"]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    s2 = summary(d, ["n", "method", "learner"])
    lines += ["", "## By training size (mean delta +- s.e. over tables)", "",
              "| method | learner | " + " | ".join(f"n = {n}" for n in sorted(s2["n"].unique()))
              + " |", "|---|---|" + "---:|" * s2["n"].nunique()]
    for m in _order(s2["method"]):
        for lr in ("mlp", "gbm"):
            g = s2[(s2["method"] == m) & (s2["learner"] == lr)].set_index("n")
            if g.empty:
                continue
            lines.append(f"| {m} | {lr} | " + " | ".join(
                _fmt(g.loc[n, "mean"], g.loc[n, "se"], 4, sign=True) if n in g.index else ""
                for n in sorted(s2["n"].unique())) + " |")
    lines += _autoforest(d) + _generator_cost(bal)
    if not imb.empty:
        lines += _imbalance(imb)
    lines += ["", "## Every table (score mean +- s.e. over seeds; accuracy for classification "
              "in the second block)", ""]
    lines += _full_tables(bal, cols=["score"])
    cls = bal[bal["task"] != "regression"]
    if not cls.empty:
        lines += ["", "### Accuracy (classification tables)", ""]
        lines += _full_tables(cls, cols=["acc"])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "augmentation.md").write_text("\n".join(lines) + "\n")
    figures(d, bal)
    print((RESULTS / "augmentation.md").read_text())


def _imbalance(imb: pd.DataFrame) -> list[str]:
    """The class-imbalance case: deltas of AUC, balanced accuracy and accuracy."""
    sizes = sorted(imb["n"].unique())
    seeds = imb[imb["learner"] == "mlp"].groupby(["table", "n", "method"]).size()
    out = ["", "## Class-imbalance case (minority subsampled to 10% of the training rows; "
           "test rows keep the table's class shares)", "",
           f"Tables: {', '.join(sorted(imb['table'].unique()))}; sizes: "
           f"{', '.join(map(str, sizes))} (a table too small for a size is left out of it); "
           + (f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}")
           + f" seeds per cell; {len(imb)} trained models. "
           "Balanced accuracy = mean recall of the two classes (argmax prediction). "
           "Per size and learner: mean delta against real-only over tables (each the mean over "
           "its seeds) +- s.e. over tables; in brackets: tables better / worse by more than two "
           "s.e. over seeds.", ""]
    cols = [c for c in ("score", "bacc", "acc") if c in imb and imb[c].notna().any()]
    for n in sizes:
        for lr in ("mlp", "gbm"):
            sub = imb[(imb["learner"] == lr) & (imb["n"] == n)]
            base = sub[sub["method"] == "real"]
            out += [f"**{lr.upper()}, n = {n}** ({base['table'].nunique()} tables; real-only "
                    f"mean AUC {base['score'].mean():.3f}, balanced accuracy "
                    f"{base['bacc'].mean():.3f}, accuracy {base['acc'].mean():.3f})", "",
                    "| method | " + " | ".join({"score": "AUC delta",
                                                 "bacc": "balanced acc. delta",
                                                 "acc": "accuracy delta"}[c] for c in cols)
                    + " |", "|---|" + "---:|" * len(cols)]
            stats = {c: summary(paired(sub, c), ["method"]).set_index("method") for c in cols}
            for m in _order(stats[cols[0]].index):
                row = []
                for c in cols:
                    x = stats[c].loc[m]
                    row.append(f"{x['mean']:+.4f} +- {x['se']:.4f} "
                               f"({int(x['better'])} / {int(x['worse'])})")
                out.append(f"| {m} | " + " | ".join(row) + " |")
            out.append("")
    out += ["Per table (mean +- s.e. over seeds):", ""]
    out += _full_tables(imb, cols=["score", "bacc"])
    return out


def _coverage(df: pd.DataFrame) -> list[str]:
    """Seeds per cell, per method and size (a method stopped early has fewer)."""
    k = df[df["learner"] == "mlp"].groupby(["method", "n", "table"]).size()
    k = k.groupby(["method", "n"]).agg(["min", "max", "size"]).reset_index()
    sizes = sorted(df["n"].unique())
    out = ["Seeds per cell (min-max over tables; number of tables):", "",
           "| method | " + " | ".join(f"n = {n}" for n in sizes) + " |",
           "|---|" + "---:|" * len(sizes)]
    def cell(g: pd.DataFrame, n: int) -> str:
        if n not in g.index:
            return ""
        lo, hi, tabs = g.loc[n, "min"], g.loc[n, "max"], g.loc[n, "size"]
        return (f"{lo}" if lo == hi else f"{lo}-{hi}") + f" ({tabs})"

    for m in _order(k["method"]):
        g = k[k["method"] == m].set_index("n")
        out.append(f"| {m} | " + " | ".join(cell(g, n) for n in sizes) + " |")
    return out + [""]


def _autoforest(d: pd.DataFrame) -> list[str]:
    """Which generator AutoForest chose, and its delta against the three arms it chooses
    among on exactly the runs (table, size, seed) where it ran."""
    a = d[(d["method"] == "autoforest@1") & (d["learner"] == "mlp")]
    if a.empty or "gen_choice" not in a:
        return []
    c = a.groupby(["n", "gen_choice"]).size().unstack(fill_value=0)
    out = ["", "## AutoForest: what it chose, and against the arms it chooses among", "",
           "`autoforest@1` fits `AutoForest(candidates=[ARF, GFBoost, NRGBoost])` at the "
           "settings of the three single-generator arms and draws from the one it chose "
           "(held-out C2ST, ties by held-out log-likelihood). Runs (table x seed) per choice:",
           "", "| size | " + " | ".join(c.columns) + " |", "|---|" + "---:|" * len(c.columns)]
    out += [f"| n = {n} | " + " | ".join(str(int(v)) for v in c.loc[n]) + " |" for n in c.index]
    key = ["table", "n", "seed", "learner"]
    runs = d[d["method"] == "autoforest@1"][key].drop_duplicates()
    same = d[d["method"].isin(["arf@1", "gfboost@1", "nrgboost@1", "autoforest@1"])].merge(runs)
    s = summary(same, ["method", "learner"])
    out += ["", f"Mean delta on the {len(runs) // 2} runs where `autoforest@1` ran (cells = "
            "table x size, seeds averaged; +- s.e. over cells):", "",
            "| method | MLP delta | GBM delta |", "|---|---:|---:|"]
    for m in _order(s["method"]):
        row = [s[(s["method"] == m) & (s["learner"] == lr)] for lr in ("mlp", "gbm")]
        out.append(f"| {m} (same runs) | " + " | ".join(
            "" if x.empty else _fmt(x.iloc[0]["mean"], x.iloc[0]["se"], 4, sign=True)
            for x in row) + " |")
    return out


def _generator_cost(df: pd.DataFrame) -> list[str]:
    """Mean generator CPU seconds (fit + draw 3 rows per real row) where recorded."""
    if "gen_cpu_s" not in df:
        return []
    g = df[(df["learner"] == "mlp") & df["gen_cpu_s"].notna()
           & df["method"].isin(["arf@1", "gfboost@1", "nrgboost@1", "autoforest@1"])]
    if g.empty:
        return []
    t = g.groupby(["method", "n"])["gen_cpu_s"].agg(["mean", "size"]).reset_index()
    sizes = sorted(t["n"].unique())
    out = ["", "## Generator cost", "",
           "CPU seconds to fit one generator and draw three rows per real row, mean over the "
           "cells where it was recorded (one thread, shared machine; in brackets: cells):", "",
           "| generator | " + " | ".join(f"n = {n}" for n in sizes) + " |",
           "|---|" + "---:|" * len(sizes)]
    for m in _order(t["method"]):
        r = t[t["method"] == m].set_index("n")
        out.append(f"| {m.split('@')[0]} | " + " | ".join(
            f"{r.loc[n, 'mean']:.1f} ({r.loc[n, 'size']})" if n in r.index else ""
            for n in sizes) + " |")
    return out


def _full_tables(df: pd.DataFrame, cols: list[str]) -> list[str]:
    """One table per learner, score and training size: methods x public tables."""
    out = []
    for lr in ("mlp", "gbm"):
        for col in cols:
            label = {"score": "AUC / R^2", "acc": "accuracy", "bacc": "balanced accuracy"}[col]
            for n in sorted(df["n"].unique()):
                sub = df[(df["learner"] == lr) & (df["n"] == n)]
                tabs = sorted(sub["table"].unique())
                out += [f"**{lr.upper()}, {label}, n = {n}**", "",
                        "| method | " + " | ".join(tabs) + " |", "|---|" + "---:|" * len(tabs)]
                for m in _order(sub["method"]):
                    row = []
                    for t in tabs:
                        g = sub[(sub["method"] == m) & (sub["table"] == t)][col]
                        row.append("" if g.empty else _fmt(g.mean(), _se(g)))
                    out.append(f"| {m} | " + " | ".join(row) + " |")
                out.append("")
    return out


def figures(d: pd.DataFrame, df: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIGURES.mkdir(parents=True, exist_ok=True)
    s2 = summary(d, ["n", "method", "learner"])
    methods = _order(s2["method"])
    sizes = sorted(s2["n"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, lr in zip(axes, ("mlp", "gbm")):
        for i, n in enumerate(sizes):
            g = s2[(s2["learner"] == lr) & (s2["n"] == n)].set_index("method").reindex(methods)
            y = np.arange(len(methods)) + (i - 1) * 0.25
            ax.errorbar(g["mean"], y, xerr=2 * g["se"], fmt="o", ms=4, capsize=2,
                        label=f"n = {n}")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(np.arange(len(methods)), methods)
        ax.set_title(f"{lr.upper()}: test AUC / R^2 minus real-only")
        ax.set_xlabel("mean delta over tables (+- 2 s.e.)")
        ax.invert_yaxis()
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(FIGURES / "delta_by_size.png", dpi=110)
    plt.close(fig)
    # per table: ARF at ratio 1 and the best non-forest augmenter, each learner
    cell = d.groupby(["table", "n", "method", "learner"])["delta"].agg(["mean", _se])
    cell = cell.reset_index()
    tabs = sorted(cell["table"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.35 * len(tabs) * len(sizes) + 1.5),
                             sharey=True)
    labels = [f"{t} n={n}" for t in tabs for n in sizes]
    for ax, lr in zip(axes, ("mlp", "gbm")):
        for j, m in enumerate(["arf@1", "arf@3", "autoforest@1", "smote", "gaussiancopula@1"]):
            g = cell[(cell["learner"] == lr) & (cell["method"] == m)]
            g = g.set_index(["table", "n"]).reindex(
                pd.MultiIndex.from_tuples([(t, n) for t in tabs for n in sizes]))
            y = np.arange(len(labels)) + (j - 2) * 0.16
            ax.errorbar(g["mean"], y, xerr=2 * g["_se"], fmt="o", ms=3, capsize=1.5, label=m)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(np.arange(len(labels)), labels, fontsize=7)
        ax.set_title(f"{lr.upper()}: delta vs real-only per table")
        ax.invert_yaxis()
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(FIGURES / "delta_by_table.png", dpi=110)
    plt.close(fig)
