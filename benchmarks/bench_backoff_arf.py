"""ARF's back-off toward the column marginals at its defaults, per leaderboard table and seed.

    python benchmarks/bench_backoff_arf.py TABLES_DIR OUT.jsonl [--seeds 3] [--max-train 500]
        [--label NAME] [--only a,b] [--marginal-weight auto] [--params JSON]

``TABLES_DIR``: the leaderboard's exported tables (``benchmarks/leaderboard/tables.py``). Each
cell uses the leaderboard's split (``run.split``: 70/30, training rows capped), fits ``ARF()``
at its defaults (``random_state=seed``; ``--marginal-weight``: that one parameter set;
``--params``: more of ARF's parameters, a JSON object, e.g. ``'{"numeric_prior": 3}'``) and
``ARF(marginal_weight=0, prior_strength=0.3, numeric_prior=0, grid_spikes=0)`` (the paper's
model with the former default leaf law pinned, whatever ``--params`` sets; a checkout without
``numeric_prior`` / ``grid_spikes`` gets ``ARF(marginal_weight=0, prior_strength=0.3)``, the
same model: its test log densities and a sample hashed as ``paper_bits``), and records the
chosen ``λ`` (``marginal_weight_``) and its statistics, the spike weights
(``grid_spikes_``), the mean held-out log-likelihood of both, that of the product of the
column marginals (``forestgen.auto.marginals_model``: kernel-smoothed histograms, discrete
pmfs), and the leaderboard's scores of ``ARF()``'s sample of ``n_train`` rows
(``score.score_cell``: C2ST AUC against the test rows, TSTR). ``forestgen`` is imported from
``PYTHONPATH`` (run once per checkout, ``--label`` naming it); the leaderboard's code from this
file's checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaderboard"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cell(table_dir: Path, seed: int, max_train: int, work: Path,
         weight: float | str = "auto", params: dict | None = None) -> dict:
    from cell import typed
    from run import kinds_for_metrics, split
    from score import score_cell

    import forestgen as fg
    from forestgen.auto import marginals_model

    data = split(table_dir, seed, max_train, work)
    meta = data["meta"]
    train, test = typed(data["train"], meta), typed(data["test"], meta)
    out = {"table": meta["name"], "seed": seed, "n_train": len(train), "n_test": len(test)}
    t0 = cpu()
    m = fg.ARF(random_state=seed, marginal_weight=weight, **(params or {})).fit(train)
    out["fit_cpu_s"] = cpu() - t0
    out["lambda"] = float(m.marginal_weight_)
    if hasattr(m, "numeric_prior_"):
        out["numeric_prior"] = m.numeric_prior_
    if hasattr(m, "grid_spikes_"):
        out["grid_spikes"] = {str(k): v for k, v in m.grid_spikes_.items()}
    ll = m.marginal_weight_ll_
    out["t"] = ll.get("t")
    out["t_marginals"] = ll.get("t_marginals", ll.get("t_screen"))
    out["test_ll"] = float(np.mean(m.log_prob(test)))
    old_law = {"prior_strength": 0.3}
    if "numeric_prior" in fg.ARF().get_params():  # (checkouts since stop 54)
        old_law["numeric_prior"] = 0
    if "grid_spikes" in fg.ARF().get_params():  # (checkouts since stop 54's spikes)
        old_law["grid_spikes"] = 0
    paper = fg.ARF(random_state=seed, marginal_weight=0, **old_law).fit(train)
    lp_paper = np.asarray(paper.log_prob(test), float)
    out["test_ll_paper"] = float(np.mean(lp_paper))
    # the paper's model, bit for bit: its test log densities and a sample, hashed
    draws = paper.sample(len(train), random_state=seed)
    out["paper_bits"] = hashlib.sha256(lp_paper.tobytes() + pd.util.hash_pandas_object(
        draws, index=False).to_numpy().tobytes()).hexdigest()[:16]
    out["test_ll_marginals"] = float(np.mean(marginals_model().fit(train).log_prob(test)))
    syn = m.sample(len(train), random_state=seed)
    path = work / f"{meta['name']}_s{seed}" / "arf_synth.csv"
    syn.to_csv(path, index=False)
    sc = score_cell(data, str(path), kinds_for_metrics(meta), seed)
    out.update(c2st=sc["c2st_auc"], tstr=sc["tstr"], tstr_metric=sc["tstr_metric"],
               out_of_range_rows=sc["out_of_range_rows"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--max-train", type=int, default=500)
    ap.add_argument("--label", default="")
    ap.add_argument("--only", default=None, help="comma-separated tables")
    ap.add_argument("--marginal-weight", default="auto",
                    help="ARF's marginal_weight in place of its default (a rule or a number)")
    ap.add_argument("--params", default="{}", help="more ARF parameters (a JSON object)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import forestgen

    names = sorted(p.name for p in a.tables.iterdir() if (p / "meta.json").exists())
    if a.only:
        names = [t for t in names if t in a.only.split(",")]
    work = a.out.parent / (a.out.stem + "_work")
    done = set()
    if a.out.exists():
        done = {(r["table"], r["seed"]) for r in map(json.loads, a.out.read_text().splitlines())}
    with open(a.out, "a") as fh:
        for t in names:
            for s in range(a.seeds):
                if (t, s) in done:
                    continue
                t0 = time.perf_counter()
                try:
                    w = a.marginal_weight
                    rec = cell(a.tables / t, s, a.max_train, work,
                               w if w in ("auto", "held_out") else float(w),
                               json.loads(a.params))
                except Exception as exc:  # noqa: BLE001 - a failed cell is recorded
                    rec = {"table": t, "seed": s, "error": repr(exc)[:300]}
                rec.update(label=a.label, forestgen=str(Path(forestgen.__file__).parent),
                           wall_s=time.perf_counter() - t0)
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                  for k, v in rec.items() if k != "forestgen"}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
