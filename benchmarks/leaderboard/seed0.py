"""Seed-0 goal lines of AutoForest cells against every peer's seed-0 cell (issue 37).

    python benchmarks/leaderboard/seed0.py benchmarks/results/leaderboard_s54.jsonl \\
        benchmarks/results/leaderboard_s54_seed0_8557356.jsonl \\
        benchmarks/results/leaderboard_s54_seed0_af62bbd.jsonl

The first file holds the peers' cells (every generator not ``forestgen:*``, seed 0); each
further file holds ``forestgen:auto`` cells of seed 0. Per file: tables where AutoForest's test
C2ST is at least as close to 0.5 as every peer's, within 0.02 of the closest, further (named),
and tables where its TSTR is within 0.02 of the best peer's; then, for the last two files, the
per-table change (choice, C2ST, TSTR, CPU seconds, test log-likelihood) as Markdown rows.
"""

from __future__ import annotations

import json
import statistics
import sys


def _cells(path: str) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def goal_lines(auto: list[dict], peers: list[dict]) -> tuple[int, int, list[str], int]:
    closest = within = tstr_ok = 0
    far = []
    for a in auto:
        ps = [p for p in peers if p["table"] == a["table"]]
        best = min(abs(p["c2st_auc"] - 0.5) for p in ps)
        me = abs(a["c2st_auc"] - 0.5)
        if me <= best:
            closest += 1
        elif me <= best + 0.02:
            within += 1
        else:
            far.append(a["table"])
        top = max(p["tstr"] for p in ps if p.get("tstr") is not None)
        tstr_ok += a.get("tstr") is not None and a["tstr"] >= top - 0.02
    return closest, within, far, tstr_ok


def main(paths: list[str]) -> int:
    base = _cells(paths[0])
    peers = [r for r in base if r["seed"] == 0 and not r["generator"].startswith("forestgen")
             and r.get("c2st_auc") is not None]
    runs = [[r for r in base if r["generator"] == "forestgen:auto" and r["seed"] == 0]]
    runs += [_cells(p) for p in paths[1:]]
    for name, auto in zip([paths[0] + " (its own auto cells)", *paths[1:]], runs):
        c, w, far, t = goal_lines(auto, peers)
        print(f"{name}: closest {c}, within 0.02 {w}, further {far}; TSTR within 0.02 {t}")
    if len(runs) >= 3:
        old, new = runs[-2], runs[-1]
        by = {r["table"]: r for r in old}
        for r in new:
            p = by[r["table"]]
            print(f"| {r['table']} | {p['auto_choice']} -> {r['auto_choice']} | "
                  f"{p['c2st_auc']:.3f} -> {r['c2st_auc']:.3f} | {p['tstr']:.3f} -> "
                  f"{r['tstr']:.3f} | {p['cpu_s']:.1f} -> {r['cpu_s']:.1f} | "
                  f"{p['test_ll']:.2f} -> {r['test_ll']:.2f} |")
        for label, f in (("CPU-min", lambda rs: sum(r["cpu_s"] for r in rs) / 60),
                         ("mean abs(AUC-0.5)",
                          lambda rs: statistics.mean(abs(r["c2st_auc"] - 0.5) for r in rs)),
                         ("mean TSTR", lambda rs: statistics.mean(r["tstr"] for r in rs))):
            print(f"{label}: {f(old):.3f} -> {f(new):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
