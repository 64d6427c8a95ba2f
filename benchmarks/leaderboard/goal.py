"""Issue 37's goal lines for any generator's cells against every peer's (means over seeds).

    python benchmarks/leaderboard/goal.py CELLS.jsonl [MORE.jsonl ...] \\
        --peers benchmarks/results/leaderboard_s54.jsonl [MORE.jsonl ...] \\
        --generators forestgen:anchored,...

Peers are the cells of ``--peers`` whose generator is not ``forestgen:*`` (the page's own
reuse rule keeps only cells at the same split; the splits of ``run.py`` are fixed by seed).
Per generator, as ``modern.py`` counts them for ``AutoForest``: tables where its mean test
C2ST over seeds is at least as close to 0.5 as every peer's mean, within 0.02, further
(named), and tables where its mean TSTR is within 0.02 of the best peer's; then its mean
``|AUC - 0.5|`` over cells, mean TSTR and CPU minutes, and any out-of-range rows or rule
violations.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def read(paths: list[Path]) -> list[dict]:
    out = []
    for p in paths:
        out += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return [r for r in out if r.get("status") == "ok"]


def mean_by(cells: list[dict], key: str) -> dict:
    by: dict = {}
    for r in cells:
        if r.get(key) is not None:
            by.setdefault((r["generator"], r["table"]), []).append(r[key])
    return {k: statistics.mean(v) for k, v in by.items()}


def lines(gen: str, cells: list[dict], peers: list[dict]) -> str:
    mine = [r for r in cells if r["generator"] == gen]
    tables = sorted({r["table"] for r in mine})
    c2, ts = mean_by(mine + peers, "c2st_auc"), mean_by(mine + peers, "tstr")
    pgens = sorted({r["generator"] for r in peers})
    closest = within = tstr_ok = 0
    far = []
    for t in tables:
        pd_ = [abs(c2[(g, t)] - 0.5) for g in pgens if (g, t) in c2]
        me = abs(c2[(gen, t)] - 0.5)
        if me <= min(pd_):
            closest += 1
        elif me <= min(pd_) + 0.02:
            within += 1
        else:
            far.append(t)
        top = max(ts[(g, t)] for g in pgens if (g, t) in ts)
        tstr_ok += ts.get((gen, t), -9) >= top - 0.02
    seeds = len({r["seed"] for r in mine})
    return (f"- `{gen}` ({len(mine)} cells, {len(tables)} tables, {seeds} seed(s)): C2ST closest "
            f"on {closest}, within 0.02 on {within}, further on {len(far)} {far}; TSTR within "
            f"0.02 of the best peer on {tstr_ok}; mean |AUC - 0.5| "
            f"{statistics.mean(abs(r['c2st_auc'] - 0.5) for r in mine):.4f}, mean TSTR "
            f"{statistics.mean(r['tstr'] for r in mine):.4f}, CPU "
            f"{sum(r.get('cpu_s') or 0 for r in mine) / 60:.1f} min; out-of-range rows (max) "
            f"{max(r.get('out_of_range_rows') or 0 for r in mine):.3f}, rule violations (max) "
            f"{max(r.get('rule_violation_rate') or 0 for r in mine):.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cells", nargs="+", type=Path)
    ap.add_argument("--peers", type=Path, nargs="+", required=True)
    ap.add_argument("--generators", required=True)
    ap.add_argument("--seeds", default=None, help="comma-separated seeds to keep")
    a = ap.parse_args(argv)
    keep = None if a.seeds is None else {int(s) for s in a.seeds.split(",")}
    cells = [r for r in read(a.cells) if keep is None or r["seed"] in keep]
    peers = [r for r in read(a.peers) if not r["generator"].startswith("forestgen:")
             and (keep is None or r["seed"] in keep)]
    for g in a.generators.split(","):
        print(lines(g, cells, peers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
