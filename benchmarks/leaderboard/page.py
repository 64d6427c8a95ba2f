"""Write the leaderboard page (Markdown tables + PNG figures) from the JSONL records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def _fmt(v, nd=3):
    if isinstance(v, (float, np.floating)) and np.isinf(v):
        return "-inf" if v < 0 else "inf"
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    return f"{v:.{nd}f}" if isinstance(v, (float, np.floating)) else str(v)


def _md(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join([df.index.name or ""] + cols) + " |",
             "|" + "---|" * (len(cols) + 1)]
    for idx, row in df.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [str(v) for v in row]) + " |")
    return "\n".join(lines)


def _cell_table(ok: pd.DataFrame, rec: pd.DataFrame, value: str, best: str | None,
                nd: int = 3) -> pd.DataFrame:
    """Tables x generators; failures shown by status; the best value per table in bold."""
    gens = list(dict.fromkeys(rec["generator"]))
    tables = list(dict.fromkeys(rec["table"]))
    mean = ok.groupby(["table", "generator"])[value].mean() if len(ok) else pd.Series(dtype=float)
    sd = ok.groupby(["table", "generator"])[value].std() if len(ok) else pd.Series(dtype=float)
    out = pd.DataFrame(index=pd.Index(tables, name="table"), columns=gens, dtype=object)
    for t in tables:
        vals = {g: mean.get((t, g)) for g in gens}
        fin = {g: v for g, v in vals.items() if v is not None and not np.isnan(v)}
        star = None
        if fin and best == "half":
            star = min(fin, key=lambda g: abs(fin[g] - 0.5))
        elif fin and best == "min":
            star = min(fin, key=fin.get)
        elif fin and best == "max":
            star = max(fin, key=fin.get)
        for g in gens:
            v = vals[g]
            if v is None or np.isnan(v):
                st = rec[(rec.table == t) & (rec.generator == g)]["status"]
                out.loc[t, g] = st.iloc[0] if len(st) and st.iloc[0] != "ok" else ""
                continue
            s = _fmt(float(v), nd)
            e = sd.get((t, g))
            if e is not None and np.isfinite(e):
                s += f" ± {e:.{nd}f}"
            out.loc[t, g] = f"**{s}**" if g == star else s
    out.columns = [g.replace("forestgen:", "fg:") for g in gens]
    return out


def _c2st_heatmap(ok: pd.DataFrame, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    m = ok.groupby(["table", "generator"])["c2st_auc"].mean().unstack()
    fig = Figure(figsize=(1.0 + 0.7 * m.shape[1], 1.0 + 0.4 * m.shape[0]))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(m.to_numpy(dtype=float), cmap="RdYlGn_r", vmin=0.5, vmax=1.0, aspect="auto")
    ax.set_xticks(range(m.shape[1]))
    ax.set_xticklabels([c.replace("forestgen:", "fg:") for c in m.columns], rotation=60,
                       ha="right", fontsize=8)
    ax.set_yticks(range(m.shape[0]))
    ax.set_yticklabels(m.index, fontsize=8)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            v = m.iat[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
    ax.set_title("C2ST AUC vs held-out rows (0.5 = indistinguishable)", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def _time_scatter(ok: pd.DataFrame, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    g = ok.assign(t=ok.fit_s + ok.sample_s).groupby("generator")[["t", "c2st_auc"]].median()
    fig = Figure(figsize=(6, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(g.t, g.c2st_auc)
    for name, r in g.iterrows():
        ax.annotate(name.replace("forestgen:", "fg:"), (r.t, r.c2st_auc), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("median fit + sample seconds (log)")
    ax.set_ylabel("median C2ST AUC over tables")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def _is_ablation(gen: str) -> bool:
    return "~" in gen


def _short(gen: str) -> str:
    return gen.replace("forestgen:", "fg:")


def _learner_vs_peers(ok: pd.DataFrame) -> pd.DataFrame:
    """Per forestgen entry: tables won / within 0.02 / lost against the best peer on C2ST."""
    m = ok.groupby(["table", "generator"])["c2st_auc"].mean().unstack()
    dist = (m - 0.5).abs()
    pe = [c for c in m.columns if not c.startswith("forestgen:")]
    rows = []
    for g in [c for c in m.columns if c.startswith("forestgen:")]:
        margin = (dist[g] - dist[pe].min(axis=1)).dropna()
        if margin.empty:
            continue
        rows.append({"learner": _short(g), "tables": len(margin),
                     "won": int((margin <= 0).sum()),
                     "within 0.02": int(((margin > 0) & (margin <= 0.02)).sum()),
                     "lost": int((margin > 0.02).sum()),
                     "median margin": _fmt(float(margin.median())),
                     "worst table (margin)": f"{margin.idxmax()} ({margin.max():+.3f})"})
    return pd.DataFrame(rows).set_index("learner") if rows else pd.DataFrame()


def _goal(ok: pd.DataFrame) -> list[str]:
    """The issue's goal, criterion by criterion, on the cells that finished."""
    main = ok[~ok.generator.map(_is_ablation)]
    fg = main[main.generator.str.startswith("forestgen:")]
    pe = main[~main.generator.str.startswith("forestgen:")]
    if fg.empty or pe.empty:
        return []
    c2 = main.groupby(["table", "generator"])["c2st_auc"].mean().unstack()
    d = (c2 - 0.5).abs()
    fcols = [c for c in d.columns if c.startswith("forestgen:")]
    pcols = [c for c in d.columns if not c.startswith("forestgen:")]
    both = d[fcols].notna().any(axis=1) & d[pcols].notna().any(axis=1)
    margin = (d.loc[both, fcols].min(axis=1) - d.loc[both, pcols].min(axis=1))
    n = len(margin)
    won, close = int((margin <= 0).sum()), int(((margin > 0) & (margin <= 0.02)).sum())
    c2_ok = n > 0 and won >= 0.8 * n and won + close == n
    lost = ", ".join(f"{t} ({v:+.3f})" for t, v in margin[margin > 0.02].items()) or "none"
    ts = main.groupby(["table", "generator"])["tstr"].mean().unstack()
    tf = ts[[c for c in ts.columns if c.startswith("forestgen:")]].max(axis=1)
    tp = ts[[c for c in ts.columns if not c.startswith("forestgen:")]].max(axis=1)
    gap = (tp - tf).dropna()
    bad_t = ", ".join(f"{t} ({v:.3f})" for t, v in gap[gap > 0.02].items()) or "none"
    arf = main[main.generator == "forestgen:arf"]
    oor = sorted(arf.loc[arf.out_of_range_rows > 0, "table"].unique())
    unseen = sorted(arf.loc[arf.unseen_level_rate > 0, "table"].unique())
    every = d[pcols].notna().all(axis=1) & d[fcols].notna().any(axis=1)
    m_all = margin[every[both]] if len(margin) else margin
    won_all = int((m_all <= 0).sum())
    L = ["## The issue's goal and whether it is met", "",
         f"Goal (issue #19): {GOAL}", "",
         "Measured on the cells that finished (tables where both a forestgen learner and a peer "
         "finished; means over the seeds that finished). The best forestgen entry is the best "
         "of the learners' defaults (NRGBoost at its quick size) and ARF's documented presets, "
         "never an ablation.", "",
         f"- **C2ST** (best forestgen at least as close to 0.5 as every peer on >= 80% of "
         f"tables, within 0.02 on the rest): {'MET' if c2_ok else 'NOT MET'} — won {won} of "
         f"{n}, within 0.02 on {close}, lost by more than 0.02 on {n - won - close}: {lost}. "
         f"On the {len(m_all)} table(s) where all {len(pcols)} peers finished: won {won_all}.",
         f"- **TSTR** (best forestgen within 0.02 of the best peer on every table): "
         f"{'MET' if len(gap) and (gap <= 0.02).all() else 'NOT MET'} — best peer ahead by "
         f"more than 0.02 on: {bad_t}.",
         f"- **Support** (default ARF: zero out-of-range numeric values and zero unseen levels): "
         f"{'MET' if not oor and not unseen else 'NOT MET'} — out of range on "
         f"{len(oor)} table(s) {oor}, unseen levels on {len(unseen)} {unseen}."]
    diff, diff_grid = _ll_vs_rarf(ok, "test_ll"), _ll_vs_rarf(ok, "test_ll_grid")
    if len(diff_grid):
        worse = ", ".join(f"{t} ({v:+.2f})" for t, v in diff_grid[diff_grid < 0].items())
        L.append(f"- **Likelihood** (ARF's normalised held-out LL >= R arf's at equal trees, 30 "
                 f"trees / min_node_size 5, **on one base measure**: R arf's probability of "
                 f"the held-out value's cell wherever forestgen scores a probability mass): "
                 f"{'MET' if (diff_grid >= 0).all() else 'NOT MET'} — compared on "
                 f"{len(diff_grid)} table(s), lower on: {worse or 'none'}; mean difference "
                 f"{diff_grid.mean():+.2f} nats/row.")
    tail = _ll_vs_rarf(ok, "test_ll_grid", TAIL_ARF)
    if len(tail):
        worse = ", ".join(f"{t} ({v:+.2f})" for t, v in tail[tail < 0].items())
        L.append(f"- The same with ARF's `integer_tail=10` (not the default: R arf's rounded "
                 f"normal mixed into the integer-level leaf pmfs): compared on {len(tail)} "
                 f"table(s), lower on: {worse or 'none'}; mean difference "
                 f"{tail.mean():+.2f} nats/row.")
    if len(diff):
        worse = ", ".join(f"{t} ({v:+.2f})" for t, v in diff[diff < 0].items()) or "none"
        L.append(f"- Likelihood as first measured (R arf's *density* at every numeric value, "
                 f"forestgen's masses at discrete values: two base measures, kept for "
                 f"reference): lower on {int((diff < 0).sum())} of {len(diff)}: {worse}.")
    cpu = ok.cpu_s if "cpu_s" in ok else pd.Series(np.nan, index=ok.index)
    tt = ok.assign(t=cpu).groupby(["table", "generator"])["t"].median().unstack()
    pairs = [("forestgen:arf~n_trees=30+min_node_size=5", "rarf"),
             ("forestgen:arf~n_trees=30+min_node_size=5", "arfpy"),
             ("forestgen:nrgboost", "nrgboost")]
    parts = []
    for a, b in pairs:
        if a in tt and b in tt:
            r = (tt[b] / tt[a]).dropna()
            if len(r):
                parts.append(f"{_short(a)} vs {b}: median CPU-time ratio {r.median():.1f}x, "
                             f"slower "
                             f"on {int((r < 1).sum())} of {len(r)} tables")
    if parts:
        L.append("- **Time** (fit + sample faster than every peer at equal model size; CPU "
                 "seconds, peer time / forestgen time): " + "; ".join(parts) + ".")
    return L + [""]


GOAL = ("On the leaderboard tables, forestgen's best learner has a C2ST at least as close to "
        "0.5 as every peer on >= 80% of tables, and within 0.02 of the best on the rest. Its "
        "TSTR is within 0.02 of the best peer on every table, with zero out-of-range numeric "
        "values and zero unseen levels by default. ARF's normalised held-out LL is at least R "
        "arf's normalised LL at equal trees. Fit plus sample time beats every peer at equal "
        "model size.")


#: ARF at R arf's size on this leaderboard: the pair compared for the likelihood goal.
EQUAL_ARF = "forestgen:arf~n_trees=30+min_node_size=5"
#: the same with R arf's rounded normal in the integer-level pmfs (``integer_tail``, issue 19)
TAIL_ARF = "forestgen:arf~n_trees=30+min_node_size=5+integer_tail=10"


def _ll_vs_rarf(ok: pd.DataFrame, rarf_value: str, arf: str = EQUAL_ARF) -> pd.Series:
    """Per table: ARF's (``arf``) mean held-out LL at R arf's size minus R arf's
    ``rarf_value``."""
    if rarf_value not in ok or "test_ll" not in ok:
        return pd.Series(dtype=float)
    a = ok[ok.generator == arf].groupby("table")["test_ll"].mean()
    r = ok[ok.generator == "rarf"].groupby("table")[rarf_value].mean()
    return (a - r).replace([np.inf, -np.inf], np.nan).dropna() if len(a) and len(r) else \
        pd.Series(dtype=float)


def _ll_one_measure(all_ok: pd.DataFrame) -> pd.DataFrame:
    """ARF entries' held-out LL beside R arf's, with R arf scored on forestgen's base measure."""
    if "test_ll_grid" not in all_ok:
        return pd.DataFrame()
    arf = all_ok[all_ok.generator.isin(["forestgen:arf", "forestgen:arf@best_density",
                                        EQUAL_ARF, TAIL_ARF])]
    rg = all_ok[(all_ok.generator == "rarf") & all_ok.test_ll_grid.notna()]
    if arf.empty or rg.empty:
        return pd.DataFrame()
    both = pd.concat([arf, rg.assign(generator="rarf (cells)", test_ll=rg.test_ll_grid)])
    return _cell_table(both, both, "test_ll", "max", 2)


#: ARF at R arf's size with integers coded as numbers (R arf's own coding).
NUMBERS_ARF = "forestgen:arf~n_trees=30+min_node_size=5+max_ordinal_levels=0"


def _ll_numbers(all_ok: pd.DataFrame) -> pd.DataFrame:
    """ARF at R arf's size, integers as numbers, beside R arf on that coding's base measure."""
    if "test_ll_grid_numbers" not in all_ok:
        return pd.DataFrame()
    a = all_ok[all_ok.generator == NUMBERS_ARF]
    rg = all_ok[(all_ok.generator == "rarf") & all_ok.test_ll_grid_numbers.notna()]
    if a.empty or rg.empty:
        return pd.DataFrame()
    both = pd.concat([a, rg.assign(generator="rarf (cells of that coding)",
                                   test_ll=rg.test_ll_grid_numbers)])
    return _cell_table(both, both, "test_ll", "max", 2)


def _coverage(rec: pd.DataFrame) -> pd.DataFrame:
    """Per generator: tables and cells that finished, and the failures."""
    rows = []
    for g, v in rec.groupby("generator", sort=False):
        okv = v[v.status == "ok"]
        rows.append({"generator": _short(g), "tables ok": okv.table.nunique(),
                     "cells ok": len(okv),
                     "seeds per table": "-".join(str(x) for x in sorted(
                         {int(okv.groupby("table").seed.nunique().min()),
                          int(okv.groupby("table").seed.nunique().max())})) if len(okv) else "",
                     "forestgen code": ", ".join(sorted({str(c) for c in v.get(
                         "commit", pd.Series(dtype=object)).dropna()})) if g.startswith(
                         "forestgen:") else "",
                     "timeout": int((v.status == "timeout").sum()),
                     "error": int(v.status.isin(["error", "score_error", "stalled"]).sum())})
    return pd.DataFrame(rows).set_index("generator")


def _defaults_evidence(ok: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every ARF variant paired with the ARF defaults on the same (table, seed).

    Returns the per-variant summary and the per-table mean change of |C2ST - 0.5|.
    """
    arf = ok[ok.generator.str.startswith("forestgen:arf")].assign(
        dev=lambda x: (x.c2st_auc - 0.5).abs(),
        total_s=lambda x: x.cpu_s if "cpu_s" in x else np.nan,
        code=lambda x: (x.pair_code.fillna(x.commit) if "pair_code" in x else x.commit)
        .fillna("") if "commit" in x else "")
    # pairs come from the same forestgen code (a rerun after a change pairs with itself;
    # ``pair_code``: run.py --same-code, after the defaults gave identical samples at both)
    base = arf[arf.generator == "forestgen:arf"].set_index(["table", "seed", "code"])
    rows, per_table = [], {}
    for g, v in arf.groupby("generator", sort=False):
        v = v.set_index(["table", "seed", "code"])
        idx = v.index.intersection(base.index)
        if g == "forestgen:arf" or not len(idx):
            continue
        dv = v.loc[idx, "dev"] - base.loc[idx, "dev"]
        by_t = dv.groupby(level="table").mean()
        per_table[_short(g)] = by_t
        dts = (v.loc[idx, "tstr"] - base.loc[idx, "tstr"]).groupby(level="table").mean()
        dll = (v.loc[idx, "test_ll"] - base.loc[idx, "test_ll"]).replace(
            [np.inf, -np.inf], np.nan).groupby(level="table").mean()
        tr = (v.loc[idx, "total_s"] / base.loc[idx, "total_s"]).groupby(level="table").mean()
        rows.append({"variant": _short(g), "tables": len(by_t), "cells": len(idx),
                     "C2ST better / worse (tables)":
                     f"{int((by_t < -0.01).sum())} / {int((by_t > 0.01).sum())}",
                     "mean Δ abs(C2ST-0.5)": _fmt(float(by_t.mean())),
                     "mean Δ TSTR": _fmt(float(dts.mean())),
                     "mean Δ test LL": _fmt(float(dll.mean()), 2) if dll.notna().any() else "",
                     "LL better / worse (tables)":
                     f"{int((dll > 0.01).sum())} / {int((dll < -0.01).sum())}"
                     if dll.notna().any() else "",
                     "CPU-time ratio (median)": _fmt(float(tr.median()), 2),
                     "tables out of range": int((v.out_of_range_rows > 0).groupby(
                         level="table").any().sum())})
    summary = pd.DataFrame(rows).set_index("variant") if rows else pd.DataFrame()
    per = pd.DataFrame(per_table).map(lambda x: _fmt(x)) if per_table else pd.DataFrame()
    per.index.name = "table"
    return summary, per


def _defaults_section(ok: pd.DataFrame) -> list[str]:
    summary, per = _defaults_evidence(ok)
    if summary.empty:
        return []
    base = ok[ok.generator == "forestgen:arf"]
    return ["## ARF defaults: before/after evidence", "",
            "Each ARF variant (the documented presets `@...` and one-parameter departures "
            "`~k=v` from the defaults) is paired with the defaults on the same table and seed. "
            "Δ = variant minus defaults: a negative Δ abs(C2ST-0.5) is better samples, a "
            "positive Δ TSTR / Δ test LL is better. Better/worse counts tables whose mean "
            "change over seeds exceeds 0.01. The defaults themselves: "
            f"{base.table.nunique()} tables, mean abs(C2ST-0.5) "
            f"{_fmt(float((base.c2st_auc - 0.5).abs().mean()))}, out of range on "
            f"{int((base.out_of_range_rows > 0).sum())} cell(s).", "", _md(summary), "",
            "Per table, mean Δ abs(C2ST-0.5) against the defaults:", "", _md(per), ""]


def write_page(records: list[dict], out: Path, info: dict) -> Path:
    rec = pd.DataFrame(records)
    for col in ("c2st_auc", "tstr", "trtr", "test_ll", "test_ll_official", "test_ll_grid",
                "test_ll_mixture", "test_ll_grid_numbers", "fit_s", "sample_s",
                "peak_rss_mb", "ks_mean", "tv_mean", "corr_gap", "contingency_gap",
                "out_of_range_rows", "unseen_level_rate", "nan_rate_gap", "dtype_match",
                "dcr_closer_to_train", "exact_copy_rate"):
        if col in rec:  # R writes non-finite figures as strings ("-Inf")
            rec[col] = pd.to_numeric(rec[col].replace({"-Inf": -np.inf, "Inf": np.inf}),
                                     errors="coerce")
    for col in ("dcr_closer_to_train", "exact_copy_rate", "cpu_s", "test_ll", "tstr", "trtr"):
        if col not in rec:  # cells scored before these figures existed
            rec[col] = np.nan
    all_ok = rec[rec.status == "ok"].copy()
    ablations = rec[rec.generator.map(_is_ablation)]
    rec = rec[~rec.generator.map(_is_ablation)]
    ok = rec[rec.status == "ok"].copy()
    figs = out / "leaderboard_figures"
    figs.mkdir(parents=True, exist_ok=True)
    L = ["# Leaderboard: forestgen learners vs reference generators", ""]
    if len(ok):
        L += _goal(all_ok)
    L += ["## How it was run", "",
          f"Command: `{info['command']}` — {info['seeds']} seed(s), training rows capped at "
          f"{info['max_train']} (a 70/30 split; test rows: the 30%, capped at the same number), "
          f"{info['limit_s']:.0f} CPU seconds per cell. Every cell ran single-threaded "
          "(OMP/Numba/BLAS threads = 1, torch threads = 1) at `nice -n 19`. **The machine was "
          "loaded**: 2 cores shared with other jobs, so wall times are indicative only and the "
          "time comparisons use CPU seconds (fit + sample, the cell's process and its children: "
          "package imports, R start-up and JIT compilation included). `--full` runs 3 seeds, "
          "20,000 rows, long limits and the peers' longer settings.", ""]
    for sh in info.get("shards") or [info]:
        if "load_start" in sh:
            L += [f"- `{sh['command']}`: forestgen code `{sh.get('commit', 'unknown')}`, load "
                  f"average (1/5/15 min) {sh['load_start']} at the start, {sh['load_end']} at "
                  "the end."]
    L += [""]
    if info.get("limits"):
        L += ["Per-generator CPU-second limits: " + ", ".join(
            f"{_short(g)} {v:.0f}" for g, v in info["limits"].items()) + ".", ""]
    L += ["Peer environments: " + "; ".join(f"{k}: {v}" for k, v in info["setup"].items()), ""]
    L += ["Every forestgen learner in the registry runs with its defaults (`fg:` = forestgen), "
          "except NRGBoost, which runs at the peer's quick size (30 trees, a 10,000-row "
          "model-sample pool; its 200 default trees did not finish a 500-row table in the "
          "limit); ARF also runs with its documented presets (`@`), and one-parameter "
          "departures from ARF's defaults (`~k=v`) appear only in the defaults section. Peers: "
          "R arf 0.2.4 and arfpy 0.1.1 with 30 trees / min_node_size 5; nrgboost 0.0.3 with "
          "30 trees, 10 Gibbs steps per sample and 10,000 model samples (the package default, "
          "80,000, costs 50-60 CPU seconds on a 150-row table); SDV 2.0.0 GaussianCopula "
          "(defaults), CTGAN and TVAE (10 epochs on CPU in the quick run, 300 with `--full`); "
          "ForestDiffusion 1.0.6 ForestFlow with n_t=10, duplicate_K=10, 50 XGBoost trees (its "
          "defaults did not finish small tables in the limit). Datetimes are given to every "
          "generator as float days since 1970. A generator that failed on a table is missing "
          "from that table's ranking, so a win there is only a win over those that finished "
          "(see Coverage and Failures).", ""]
    L += ["## Coverage", "", "Cells that finished per generator (a cell is one table and "
          "seed).", "", _md(_coverage(pd.concat([rec, ablations]))), ""]
    tabs = pd.concat([rec, ablations]).drop_duplicates("table")[["table", "table_meta"]]
    tl = pd.DataFrame([{"table": r.table, "rows (full)": r.table_meta["rows"],
                        "target": f"{r.table_meta['target']} ({r.table_meta['task']})",
                        "source": r.table_meta["source"], "what it tests": r.table_meta["tests"],
                        "NaN rate": _fmt(r.table_meta["nan_rate"], 3)}
                       for r in tabs.itertuples()]).set_index("table")
    L += ["## Tables", "", _md(tl), ""]
    if len(ok):
        _c2st_heatmap(ok, figs / "c2st.png")
        _time_scatter(ok, figs / "time_vs_c2st.png")
    L += ["## C2ST AUC (closest to 0.5 in bold)", "",
          "The classifier separates synthetic rows from the **held-out test rows**, real rows "
          "the generator never saw, with an equal number of synthetic rows (random forest "
          "below 500 rows, gradient boosting above; 5 class-balanced folds); mean ± sd over "
          "seeds when more than one. Against the training rows instead, samples that sit on "
          "training rows read *below* 0.5 (the classifier learns 'synthetic' from the copy of "
          "the real row it is then tested on; copies of 20 training rows score 0.01-0.05), "
          "which is how earlier versions of this page showed AUCs of 0.31 for ARF on iris. "
          "Memorisation is measured separately below (DCR). On small tables the interval is "
          "wide (iris: 45 test rows per side, about ±0.15): read the per-seed spread and the "
          "intervals in the JSONL before a small margin. Cells read `timeout` / `error` where "
          "the generator failed (see Failures); the ranking uses |AUC - 0.5|.", "",
          _md(_cell_table(ok, rec, "c2st_auc", "half")), "",
          "![C2ST heatmap](leaderboard_figures/c2st.png)", ""]
    if "dcr_closer_to_train" in ok:
        L += ["## Memorisation: distance to the closest training row", "",
              "Share of (synthetic, held-out) row pairs in which the synthetic row is closer to "
              "its nearest training row than the held-out real row is to its own (DCR, "
              "standardised one-hot space; ties count one half). 0.5: the samples sit as far "
              "from the training rows as unseen real rows do; towards 1: near-copies. Bold: "
              "closest to 0.5.", "",
              _md(_cell_table(ok, rec, "dcr_closer_to_train", "half")), ""]
    # summary: wins
    if len(ok):
        m = ok.groupby(["table", "generator"])["c2st_auc"].mean().unstack()
        dist = (m - 0.5).abs()
        fg = [c for c in m.columns if c.startswith("forestgen:")]
        pe = [c for c in m.columns if not c.startswith("forestgen:")]
        rows = []
        for t in m.index:
            bf = dist.loc[t, fg].dropna()
            bp = dist.loc[t, pe].dropna()
            if bf.empty or bp.empty:
                continue
            rows.append({"table": t, "best forestgen": bf.idxmin().replace("forestgen:", "fg:"),
                         "its C2ST": _fmt(m.loc[t, bf.idxmin()]),
                         "best peer": bp.idxmin(), "peer C2ST": _fmt(m.loc[t, bp.idxmin()]),
                         "margin (fg minus peer distance to 0.5)": _fmt(bf.min() - bp.min()),
                         "result": "win" if bf.min() <= bp.min() else
                         ("within 0.02" if bf.min() - bp.min() <= 0.02 else "LOSS")})
        if rows:
            w = pd.DataFrame(rows).set_index("table")
            n_win = int((w.result == "win").sum())
            n_close = int((w.result == "within 0.02").sum())
            L += ["## forestgen's best learner vs the best peer, per table", "",
                  f"forestgen's best learner is at least as close to 0.5 as every peer on "
                  f"{n_win} of {len(w)} tables, within 0.02 on {n_close} more, and loses by "
                  f"more than 0.02 on {len(w) - n_win - n_close}.", "", _md(w), ""]
        wins = dist.idxmin(axis=1).value_counts()
        L += ["Tables won (C2ST closest to 0.5) per generator: "
              + ", ".join(f"{g.replace('forestgen:', 'fg:')} {n}" for g, n in wins.items()), ""]
    if len(ok):
        lv = _learner_vs_peers(ok)
        if not lv.empty:
            L += ["## Each forestgen entry against the best peer (C2ST)", "",
                  "Margin = the entry's abs(C2ST - 0.5) minus the best peer's on the same "
                  "table (negative: the forestgen entry is closer to 0.5).", "", _md(lv), ""]
    L += ["## TSTR next to TRTR", "",
          "Gradient boosting / random forest trained on the synthetic (TSTR) or the real "
          "training rows (TRTR), scored on the real test split: ROC AUC for classification "
          "targets, R² for regression.", "",
          _md(_cell_table(ok, rec, "tstr", "max")), ""]
    if len(ok):
        trtr = ok.groupby("table")["trtr"].mean()
        L += ["TRTR per table: " + ", ".join(f"{t} {v:.3f}" for t, v in trtr.items()), ""]
    ll = ok[ok.get("test_ll").notna()] if "test_ll" in ok else ok.iloc[:0]
    if len(ll):
        L += ["## Held-out log-likelihood (normalised, nats per test row; higher is better)", "",
              "forestgen's `log_prob` and R arf's *normalised* likelihood (arf 0.2.4's `lik()` "
              "with the leaf-factor filter removed; see shared/peers/rarf/README.md), as first "
              "compared: two base measures wherever a column is discrete-valued (the next "
              "table puts both on one). R arf's "
              "*official* `lik()` figure is listed beside it, labelled: on mixed tables it is not "
              "a normalised density and reads too high. Rows with a -inf score are counted in "
              "the mean as -inf and flagged.", "",
              _md(_cell_table(ll, rec[rec.generator.isin(ll.generator.unique())], "test_ll",
                              "max", 2))]
        if "test_ll_official" in ok:
            off = ok[ok.test_ll_official.notna()]
            if len(off):
                L += ["", "R arf official `lik()` (not normalised on mixed tables): "
                      + ", ".join(f"{r.table} {float(r.test_ll_official):.2f} (normalised "
                                  f"{float(r.test_ll):.2f})" for r in off.itertuples())]
        L += [""]
        one = _ll_one_measure(all_ok)
        if not one.empty:
            L += ["### The same likelihoods on one base measure", "",
                  "forestgen's `log_prob` is a density with respect to a mixed base measure: "
                  "counting measure on the values of a column it codes as levels (an integer "
                  "scale such as an age or a 1-7 rating, a discrete-valued float column) and at "
                  "the point masses of a numeric column, Lebesgue measure elsewhere; a missing "
                  "value is marginalised out. R arf gives every numeric value a "
                  "truncated-normal *density*, which a narrow leaf inflates without bound (a "
                  "leaf whose rows all hold age 40 has a density far above 1 there), and "
                  "`lik()` scores a row with a missing value -inf. The figures above are "
                  "therefore on different base measures wherever a column is discrete-valued. "
                  "Here R arf is scored on forestgen's, from its fitted FORDE parameters "
                  "(`benchmarks/leaderboard/rarf_run.R` writes them, `rarf_cells.py` scores "
                  "them): the mixture over every leaf, a missing value marginalised; for each "
                  "held-out value that forestgen scores as a mass, the leaf's factor is the "
                  "probability of the value's cell under its truncated normal instead of the "
                  "density: the values that round to that level (midpoints to the neighbouring "
                  "levels, so (x - 0.5, x + 0.5] on an integer scale, open-ended at the lowest "
                  "and highest level: R arf rounded to forestgen's levels is a pmf over the "
                  "same values), or the grid cell (x - h, x + h], h half the column's decimal "
                  "step, at a point mass of a numeric column (`basemeasure.py`). "
                  "`rarf (cells)` is that figure (bold: the highest on the table). "
                  "forestgen's figures are unchanged. At a point mass inside an otherwise "
                  "continuous column the cell figure slightly favours R arf (its density "
                  "elsewhere still counts the cell's mass).", "", _md(one), ""]
            num = _ll_numbers(all_ok)
            if not num.empty:
                L += ["With integers coded as numbers (`max_ordinal_levels=0`, as R arf codes "
                      "them: truncated-normal leaves, samples rounded), ARF at R arf's size "
                      "against R arf on the base measure of that coding (masses only at point "
                      "masses and discrete-valued floats):", "", _md(num), ""]
            rg = all_ok[all_ok.generator == "rarf"]
            if "test_ll_grid_cells" in rg:
                none = sorted(rg.loc[rg.test_ll_grid_cells == 0, "table"].unique())
                L += ["Tables with no held-out value scored as a mass: "
                      + (", ".join(none) or "none") + ".", ""]
            if "test_ll_mixture" in rg and rg.test_ll_mixture.notna().any():
                mix = rg.groupby("table")[["test_ll_mixture", "test_ll"]].mean().dropna(
                    subset=["test_ll_mixture"])
                L += ["R arf's mixture with densities everywhere (every leaf, missing values "
                      "marginalised), beside `lik()`'s normalised figure: " + ", ".join(
                          f"{t} {r.test_ll_mixture:.2f} ({_fmt(float(r.test_ll), 2)})"
                          for t, r in mix.iterrows()) + ". They agree on tables without "
                      "missing values up to rows on a split value; with missing training "
                      "values ranger's learned NaN directions make one tree's leaves overlap "
                      "and `lik()`, which keeps ranger's one leaf per tree, reads lower; with "
                      "a missing held-out value `lik()` gives -inf.", ""]
    if len(ok):
        agg = ok.assign(total_s=ok.fit_s + ok.sample_s,
                        cpu_s=ok.cpu_s if "cpu_s" in ok else np.nan).groupby("generator").agg(
            tables=("table", "nunique"), c2st_median=("c2st_auc", "median"),
            ks_mean=("ks_mean", "mean"), tv_mean=("tv_mean", "mean"),
            corr_gap=("corr_gap", "mean"), contingency_gap=("contingency_gap", "mean"),
            out_of_range_rows=("out_of_range_rows", "mean"),
            dcr_closer_to_train=("dcr_closer_to_train", "mean"),
            exact_copy_rate=("exact_copy_rate", "mean"),
            tables_out_of_range=("out_of_range_rows", lambda s: int((s > 0).sum())),
            unseen_level_rate=("unseen_level_rate", "mean"),
            nan_rate_gap=("nan_rate_gap", "mean"), dtype_match=("dtype_match", "mean"),
            fit_sample_s_median=("total_s", "median"), cpu_s_median=("cpu_s", "median"),
            peak_rss_mb_max=("peak_rss_mb", "max"))
        agg.index = [g.replace("forestgen:", "fg:") for g in agg.index]
        agg.index.name = "generator"
        L += ["## Fidelity details, averaged over the tables each generator finished", "",
              "KS (numeric) / TV (categorical) per column, mean |Δ| of Pearson correlations "
              "(numeric pairs) and of Cramér's V (categorical pairs), share of synthetic rows "
              "with a numeric value outside the training range, DCR closer-to-train share "
              "(0.5 ideal), share of synthetic rows equal to a training row, share of "
              "categorical values never seen in training, mean |Δ NaN rate|, share of "
              "columns whose output dtype equals the training dtype, median fit + sample "
              "wall seconds and CPU seconds, largest peak RSS.", "",
              _md(agg.map(lambda v: _fmt(v, 3) if isinstance(v, float) else v)), "",
              "![time vs C2ST](leaderboard_figures/time_vs_c2st.png)", ""]
        L += ["## Fit + sample seconds per table", "",
              _md(_cell_table(ok.assign(total_s=ok.fit_s + ok.sample_s), rec, "total_s",
                              "min", 2)), ""]
    defaults = _defaults_section(all_ok)
    decision = [info["defaults_decision"], ""] if info.get("defaults_decision") else []
    if info.get("same_code"):
        decision += [info["same_code"] + ".", ""]
    if defaults:
        defaults[2:2] = decision
    L += defaults
    if defaults:
        (out / "leaderboard_defaults.md").write_text(
            "\n".join(["# ARF defaults from the leaderboard", "",
                       f"From `{info['command']}` (see leaderboard.md for the setup).", "",
                       *defaults[2:]]) + "\n")
    steps: dict[tuple[str, str], list[str]] = {}
    for r in ok.itertuples():
        for st in getattr(r, "adapter_steps", None) or []:
            key = (r.generator, st.split(" (after ")[0].split(" dropped ")[0])
            steps.setdefault(key, []).append(f"{r.table}/s{r.seed}")
    L += ["## Adapter steps peers needed", "",
          "Adapters run only after the untouched table failed; each is listed with the cells "
          "that needed it (the first error is in the JSONL).", ""]
    L += [f"- {g}: {st} — {len(c)} cell(s): {', '.join(sorted(set(c))[:12])}"
          for (g, st), c in sorted(steps.items())] or ["None."]
    bad = pd.concat([rec, ablations])
    bad = bad[bad.status != "ok"]
    L += ["", "## Failures (recorded cells)", ""]
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in bad.itertuples():
        err = str(r.error)
        key = (r.generator, r.status, err if r.status != "timeout" else "no result in the limit")
        groups.setdefault(key, []).append(f"{r.table}/s{r.seed}")
    L += [f"- {_short(g)}: {st} — {e} — {len(c)} cell(s): {', '.join(c[:12])}"
          + (" ..." if len(c) > 12 else "") for (g, st, e), c in groups.items()] or ["None."]
    warn = sorted({w for r in ok.itertuples() for w in (getattr(r, "warnings", None) or [])})
    if warn:
        L += ["", "## Small-sample warnings raised while scoring", ""] + [f"- {w}" for w in warn]
    path = out / "leaderboard.md"
    path.write_text("\n".join(L) + "\n")
    (out / "leaderboard_summary.json").write_text(json.dumps(info, indent=1, default=str))
    return path
