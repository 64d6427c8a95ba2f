"""Issue 37's view of the leaderboard: every peer (the synthyverse ones included) against
``AutoForest`` and forestgen's learners at their defaults.

    python benchmarks/leaderboard/modern.py RESULTS.jsonl [MORE.jsonl ...] \\
        --out benchmarks/results/leaderboard_modern.md [--note "how the shards were run"] \\
        [--stored OLD.jsonl ...] [--jsonl-out CELLS.jsonl]

Reads leaderboard cells (``run.py``'s JSONL; a cell present in several files counts once, from
the first file). ``--stored`` adds the *peers'* cells of earlier runs (their forestgen cells,
run at older code, are dropped), each only where this run has the same split: same table and
seed, same table metadata, same numbers of training and test rows, and the same TRTR (the
real-data baseline, a function of the split and seed alone) to 1e-9; the others are listed as
not reused. Writes per
table: C2ST with its interval, TSTR, out-of-range rows, rule
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

#: forestgen entries shown beside the peers (AutoForest, Anchored: synthyverse's synthpop
#: sampler as a leaf mixture, the README's learner, and the chain of conditional trees built
#: after synthpop's sequential CART)
FORESTGEN = ["forestgen:auto", "forestgen:anchored", "forestgen:arf", "forestgen:chain",
             "forestgen:nrgboost", "forestgen:gfboost"]
AUTO = "forestgen:auto"
DIFFUSION = ["synthyverse:tabddpm", "synthyverse:tabsyn", "synthyverse:tabdiff",
             "synthyverse:cdtd"]


def _read(paths: list[Path]) -> list[dict]:
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
    return rows


def same_split(fresh: list[dict], stored: list[dict]) -> tuple[list[dict], list[str]]:
    """The peer cells of ``stored`` whose split is provably that of ``fresh`` at the same
    (table, seed): equal metadata, row counts and TRTR (to 1e-9); forestgen cells (older code) and
    cells of a generator the fresh run has are dropped. Returns (kept, notes on the dropped)."""
    base: dict = {}
    for r in fresh:
        if r.get("status") == "ok" and r.get("trtr") is not None:
            base.setdefault((r["table"], r["seed"]), r)
    have = {(r["generator"], r["table"], r["seed"]) for r in fresh}
    kept, dropped = [], {}
    for r in stored:
        g = r["generator"]
        if g.startswith("forestgen:") or (g, r["table"], r["seed"]) in have:
            continue
        b = base.get((r["table"], r["seed"]))
        # split version 1 differs from 2 only in a capped test set, which changes the TRTR
        ok = b is not None and r.get("n_train") == b["n_train"] and \
            r.get("n_test") == b["n_test"] and r.get("meta_full") == b.get("meta_full")
        if ok and r.get("status") == "ok":
            ok = r.get("trtr") is not None and abs(r["trtr"] - b["trtr"]) <= 1e-9
        if ok:
            kept.append({**r, "stored": True})
        else:
            dropped.setdefault(g, {}).setdefault(r["table"], []).append(str(r["seed"]))
    return kept, [f"{short(g)}: " + ", ".join(f"{t} s{','.join(v)}" for t, v in d.items())
                  for g, d in dropped.items()]


def load(paths: list[Path], stored: list[Path] | None = None,
         rescore_rules: bool = False) -> pd.DataFrame:
    rows = _read(paths)
    if rescore_rules:  # the cells whose training and synthetic files still exist
        from score import rescore_rules as again

        for r in rows:
            if r.get("status") == "ok" and Path(str(r.get("synth"))).exists() \
                    and Path(str(r.get("train"))).exists():
                r.update(again(r))
    notes: list[str] = []
    if stored:
        extra, notes = same_split(rows, _read(stored))
        rows += extra
    df = pd.DataFrame(rows)
    df.attrs["not_reused"] = notes
    keep = ~df["generator"].str.contains("[@~]", regex=True)
    df = df[keep & (df["generator"].isin(FORESTGEN) | ~df["generator"].str.startswith(
        "forestgen:"))]
    return df


def _fmt(v, nd=3) -> str:
    return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{nd}f}"


def pivot(ok: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per table and generator: the mean over seeds (CPU seconds: the median, so that a cell
    that paid for compiling forestgen's kernels into a fresh cache counts once)."""
    return ok.pivot_table(index="table", columns="generator", values=value,
                          aggfunc="median" if value == "cpu_s" else "mean")


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
        f"- **C2ST** (at least as close to 0.5 as every peer on >= 80% of tables, within 0.02 on "
        f"the rest): closest on {won} of {n}, within 0.02 on {within}, further on "
        f"{len(lost)} {lost} — {'MET' if won >= 0.8 * n and not lost else 'NOT MET'}.",
        f"- **TSTR** (within 0.02 of the best peer on >= 80%): {tstr_ok} of {n} — "
        f"{'MET' if tstr_ok >= 0.8 * n else 'NOT MET'}; further than 0.02 on "
        f"{g.loc[g['TSTR gap'] > 0.02, 'table'].tolist()}.",
        f"- **Out of range** (zero on every table and seed): {int((oor > 0).sum())} table(s) "
        f"with any out-of-range value {oor[oor > 0].index.tolist()} — "
        f"{'MET' if len(oor) and not (oor > 0).any() else 'NOT MET'}.",
        f"- **Rule violations** (of the rules that hold in every training row; zero on every "
        f"table and seed): {int((viol > 0).sum())} table(s) with any "
        f"{viol[viol > 0].index.tolist()} — "
        f"{'MET' if len(viol) and viol.notna().all() and not (viol > 0).any() else 'NOT MET'}"
        f"{'' if viol.notna().all() else ' (some cells not scored)'}.",
    ]
    cpu = pivot(ok, "cpu_s")
    if AUTO in cpu.columns:
        for d in [x for x in DIFFUSION if x in cpu.columns]:
            r = (cpu[d] / cpu[AUTO]).dropna()
            if len(r):
                lines.append(f"- CPU seconds, {short(d)} / AutoForest: median {r.median():.1f}x "
                             f"over {len(r)} tables (at the caps stated above).")
    return lines, g


def compare_auto(ok: pd.DataFrame, earlier: pd.DataFrame, label: str,
                 generator: str = AUTO) -> list[str]:
    """``generator``'s cells here (AutoForest by default) against its cells of an earlier run
    at the same (table, seed): mean C2ST AUC, ``|AUC - 0.5|``, TSTR and (AutoForest) the
    choices, per table and over all cells."""
    auto = generator == AUTO
    cols = ["table", "seed", "c2st_auc", "tstr"] + (["auto_choice"] if auto else [])
    new = ok.loc[ok["generator"] == generator, cols]
    old = earlier.loc[(earlier["generator"] == generator) & (earlier["status"] == "ok"), cols]
    m = new.merge(old, on=["table", "seed"], suffixes=("", "_old"))
    if m.empty:
        return []
    m["d"], m["d_old"] = (m["c2st_auc"] - 0.5).abs(), (m["c2st_auc_old"] - 0.5).abs()
    rows = []
    for t, g in m.groupby("table"):
        rows.append([t, str(len(g)), f"{g['c2st_auc_old'].mean():.3f}",
                     f"{g['c2st_auc'].mean():.3f}", f"{g['tstr_old'].mean():.3f}",
                     f"{g['tstr'].mean():.3f}"]
                    + ([", ".join(map(str, g["auto_choice_old"])),
                        ", ".join(map(str, g["auto_choice"]))] if auto else []))
    rows.append(["all: mean abs(AUC - 0.5); mean TSTR", str(len(m)), f"{m['d_old'].mean():.3f}",
                 f"{m['d'].mean():.3f}", f"{m['tstr_old'].mean():.3f}",
                 f"{m['tstr'].mean():.3f}"] + (["", ""] if auto else []))
    return [f"{short(generator)} here against {label}, on the (table, seed) cells both have"
            + (" (choices listed by seed):" if auto else ":"), "",
            md_table(["table", "cells", "C2ST before", "C2ST after", "TSTR before",
                      "TSTR after"] + (["chosen before", "chosen after"] if auto else []),
                     rows), ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/leaderboard_modern.md"))
    ap.add_argument("--note", default="")
    ap.add_argument("--seeds", default=None,
                    help="comma-separated seeds to keep (default: all); one seed for every "
                         "generator keeps the comparison paired")
    ap.add_argument("--stored", nargs="*", type=Path, default=[],
                    help="JSONL of earlier runs: their peers' cells at the same split")
    ap.add_argument("--jsonl-out", type=Path, default=None,
                    help="write the cells the page is made of (fresh and reused) here")
    ap.add_argument("--rescore-rules", action="store_true",
                    help="score rule violations again (with each rule's kind) for the cells "
                         "whose training and synthetic files still exist")
    ap.add_argument("--compare", type=Path, default=None,
                    help="JSONL of AutoForest cells at earlier code, compared cell by cell")
    ap.add_argument("--compare-label", default="an earlier run")
    ap.add_argument("--compare-generators", default=AUTO,
                    help="comma-separated generators compared with --compare (default: auto)")
    ap.add_argument("--title", default="Leaderboard with the modern peers (issue 37)")
    a = ap.parse_args(argv)
    df = load(a.jsonl, a.stored, rescore_rules=a.rescore_rules)
    not_reused = df.attrs.get("not_reused", [])
    if a.seeds is not None:
        df = df[df["seed"].isin([int(s) for s in a.seeds.split(",")])]
    if a.jsonl_out:
        with open(a.jsonl_out, "w") as fh:
            for r in df.to_dict("records"):
                r = {k: v for k, v in r.items() if not (isinstance(v, float) and np.isnan(v))}
                fh.write(json.dumps(r, default=str) + "\n")
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

    L = [f"# {a.title}", "", a.note, "",
         "Generators: " + ", ".join(f"{short(g)} ({seeds[g]} seed{'s' if seeds[g] > 1 else ''})"
                                    for g in order(seeds.index)) + ".", ""]
    if "stored" in ok:
        st = ok[ok["stored"].fillna(False).astype(bool)]
        if len(st):
            L += ["Cells reused from earlier runs (same split, checked; scored then, so no rule "
                  "violations): " + ", ".join(f"{short(g)} {n}" for g, n in
                                             st.groupby("generator").size().items()) + ".", ""]
    if not_reused:
        L += ["Stored cells not reused (no fresh cell at that split, or its split differs): "
              + "; ".join(not_reused) + ".", ""]
    lines, g = goal(ok)
    L += ["## The goal for `AutoForest()` at its defaults", "",
          "Means over each generator's seeds; every peer (diffusion models included) counts.",
          ""] + lines + [""]
    s0 = ok[ok["seed"] == 0]
    if ok["seed"].nunique() > 1 and len(s0):
        lines0, _ = goal(s0)
        L += ["Seed 0 alone (every generator on the same split):", ""] + lines0 + [""]
    if not g.empty:
        gg = g.copy()
        for c in ("auto C2ST", "peer C2ST", "margin", "auto TSTR", "best peer TSTR",
                  "TSTR gap"):
            gg[c] = gg[c].map(lambda v: f"{v:.3f}")
        gg["best peer"] = gg["best peer"].map(short)
        gg["TSTR peer"] = gg["TSTR peer"].map(short)
        L += ["`margin`: `|AUC(auto) - 0.5| - |AUC(closest peer) - 0.5|` (<= 0: AutoForest at "
              "least as close as every peer); `TSTR gap`: best peer's TSTR minus AutoForest's.",
              "", md_table(list(gg.columns), gg.to_numpy().tolist()), ""]
    if a.compare:
        earlier = pd.DataFrame(_read([a.compare]))
        for gen in a.compare_generators.split(","):
            L += compare_auto(ok, earlier, a.compare_label, gen)
    if "auto_choice" in ok:
        ch = ok[ok["generator"] == AUTO].groupby("table")["auto_choice"].agg(
            lambda s: ", ".join(sorted(set(map(str, s)))))
        L += ["AutoForest's choice per table (over seeds): "
              + "; ".join(f"{t}: {c}" for t, c in ch.items()), ""]
    if "rule_kinds" in ok:
        rk = {}
        for r in ok.sort_values("seed").itertuples():
            if isinstance(r.rule_kinds, dict) and r.table not in rk:
                rk[r.table] = r.rule_kinds
        if rk:
            L += ["## Rules detected in the training rows (seed 0's split where scored)", ""]
            L += [f"- {t}: " + ("; ".join(f"`{k}` ({v})" for k, v in rk[t].items()) or "none")
                  for t in sorted(rk)] + [""]
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
            ("rule_violation_rate", "Share of synthetic rows breaking a rule that holds in "
                                    "every training row (mappings, thresholds, affine relations, "
                                    "inequalities, nested missing entries; — : not scored)", 3),
            ("exact_copy_rate", "Share of synthetic rows that copy a training row exactly", 3),
            ("dcr_closer_to_train", "DCR: share of synthetic rows closer to a training row than "
                                    "held-out rows are (0.5: as far as unseen real rows)", 3),
            ("cpu_s", "CPU seconds (fit + sample, one thread; median over seeds)", 1)):
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
