"""One-command leaderboard: forestgen's learners against R arf, arfpy, nrgboost, SDV, ForestFlow
and synthyverse (synthpop, SMOTE, TabDDPM, TabSyn, TabDiff, CDTD).

    python benchmarks/leaderboard/run.py                  # set up peers, run, score, write the page
    python benchmarks/leaderboard/run.py --full           # 3 seeds, uncapped rows, longer limits
    python benchmarks/leaderboard/run.py --peers DIR      # where peer environments live
                                                          # (default $FORESTGEN_PEERS or
                                                          #  ~/.cache/forestgen-peers)

Every (generator, table, seed) cell runs in its own subprocess, with the generator's own
interpreter, under a limit on CPU seconds (so that a loaded machine does not turn slow cells
into timeouts) with a wall-clock backstop of ``WALL_FACTOR`` times that; a failure or timeout
is a recorded cell, never a crashed run.
All samples are scored by the same :mod:`forestgen.metrics` code in this process. Results go to
``benchmarks/results/leaderboard.jsonl`` (one line per cell) and the page
``benchmarks/results/leaderboard.md`` with figures in ``benchmarks/results/leaderboard_figures/``.
Every learner in forestgen's registry is run with its defaults; peers with the settings below.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import peers  # noqa: E402
from page import write_page  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
#: Version of :func:`split`: cells of an older version are scored again by ``--rescore``
#: (their held-out figures computed inside the cell, such as the test LL, are dropped).
SPLIT_VERSION = 2

#: Wall-clock backstop of a cell, as a multiple of its CPU-second limit: it only catches a
#: stalled cell (a process at low priority on a loaded machine gets a small share of a core).
WALL_FACTOR = 40.0

# (generator, environment, params in quick mode, params in full mode)
PEER_GENERATORS = [
    ("rarf", "rarf", {"num_trees": 30, "min_node_size": 5}, {"num_trees": 30, "min_node_size": 5}),
    ("arfpy", "arfpy", {"num_trees": 30, "min_node_size": 5},
     {"num_trees": 30, "min_node_size": 5}),
    # quick: 10,000 model samples instead of the package's 80,000 (its fit cost is the Gibbs
    # pool, whatever the table's size: 50-60 CPU s per 150-row table at 80,000)
    ("nrgboost", "nrgboost", {"num_trees": 30, "num_steps": 10, "num_model_samples": 10000},
     {"num_trees": 200, "num_steps": 100}),
    ("sdv:gaussiancopula", "sdv", {}, {}),
    ("sdv:ctgan", "sdv", {"epochs": 10}, {"epochs": 300}),
    ("sdv:tvae", "sdv", {"epochs": 10}, {"epochs": 300}),
    ("forestflow", "forestdiffusion", {"n_t": 10, "duplicate_K": 10, "n_estimators": 50},
     {}),
    # synthyverse 0.2.7 (issue 37), on one CPU thread: synthpop (bagged sequential CART),
    # SMOTE and TabDDPM at their defaults; TabSyn, TabDiff and CDTD capped in the quick run (at
    # their defaults a 350-row table costs them about 4,400 / 3,500 / 6,000 CPU seconds here:
    # 10.5M / 10.6M / 5M-parameter networks for 10,001 epochs / 8,000 epochs / 30,000 steps),
    # at 2-5% of their training: TabSyn 200 of 4,000 VAE and 200 of 10,001 diffusion epochs,
    # TabDiff 200 of 8,000 epochs, CDTD 500 of 30,000 steps
    ("synthyverse:synthpop", "synthyverse", {}, {}),
    ("synthyverse:smote", "synthyverse", {}, {}),
    ("synthyverse:tabddpm", "synthyverse", {}, {}),
    ("synthyverse:tabsyn", "synthyverse", {"vae_num_epochs": 200, "epochs": 200}, {}),
    ("synthyverse:tabdiff", "synthyverse", {"epochs": 200}, {}),
    ("synthyverse:cdtd", "synthyverse", {"training_steps": 500}, {}),
]


#: One-parameter departures from a learner's defaults, run as ``forestgen:NAME~k=v``: the
#: evidence for choosing its defaults (each is compared table by table with the defaults). They
#: are not counted as forestgen entries in the ranking.
ABLATIONS = {
    "arf": [{"n_trees": 30}, {"min_node_size": 5}, {"alpha": 0.1},
            {"n_trees": 30, "min_node_size": 5},  # R arf's settings on this leaderboard
            {"prior_strength": 0.0}, {"prior_strength": 1.0},  # the leaf prior (issue 11)
            # integer coding, the one trait the four near-tied tables share (anes96, diabetes,
            # adult, penguins): numbers with atoms (0), the spec's 32 levels, the kernel width
            {"max_ordinal_levels": 0}, {"max_ordinal_levels": 32},
            {"integer_bandwidth": 0.0},
            {"n_trees": 20}, {"min_node_size": 3},
            # R arf's size with integers coded as numbers, as R arf codes them: the likelihood
            # comparison on the base measure of that coding (page: one base measure)
            {"n_trees": 30, "min_node_size": 5, "max_ordinal_levels": 0},
            # R arf's rounded normal mixed into the integer-level pmfs (issue 19's likelihood
            # gap): at the defaults for the samples, at R arf's size for the likelihood
            {"integer_tail": 10}, {"integer_tail": 30},
            {"n_trees": 30, "min_node_size": 5, "integer_tail": 10},
            {"n_trees": 30, "min_node_size": 5, "integer_tail": 30}],
    # NRGBoost at its quick size: the previous draws inside a bin (issue 19's defaults), the
    # reference code's one bin per grid point, its sampling protocol (an independent chain per
    # row from q0, 10 sweeps)
    "nrgboost": [{"decode": "observed"}, {"grid_bins": True},
                 {"sample_start": "q0", "sample_burn_in": 10, "sample_chains": 1000000}],
}

#: Further one-parameter departures, run only when named in ``--generators`` (the diagnosis of
#: why forestgen's NRGBoost samples differ from the nrgboost package's: results/nrgboost_samples.md)
DIAGNOSTICS = {
    "nrgboost": [{"sample_warm_burn_in": 10},
                 {"persistent_chains": False, "refill_trees": None}, {"max_bins": 32},
                 {"grid_bins": True, "decode": "observed"}, {"p_refresh": 1.0},
                 {"p_refresh": 1.0, "persistent_chains": False, "refill_trees": None},
                 {"refill_trees": None}, {"n_trees": 60},
                 {"learning_rate": 0.05}, {"max_leaves": 64}, {"uniform_mix": 0.5}],
}

#: Reduced settings of a forestgen learner in the quick run (its defaults with ``--full``), each
#: named on the page: NRGBoost's 200 default trees did not finish a 500-row table in the limit,
#: so it runs at the nrgboost peer's quick size (30 trees, a 10,000-row model-sample pool).
QUICK = {"nrgboost": {"n_trees": 30, "pool_size": 10000}}


def forestgen_generators(diagnostics: bool = False) -> list[tuple[str, str, dict, dict]]:
    """Every learner in forestgen's registry with its defaults (quick run: :data:`QUICK`), each
    of its presets, then the ablations of :data:`ABLATIONS` (and :data:`DIAGNOSTICS`)."""
    from forestgen import registry

    out = [("forestgen:auto", "forestgen", {}, {})]  # AutoForest at its defaults
    for name in registry.available("learner"):
        out.append((f"forestgen:{name}", "forestgen", QUICK.get(name, {}), {}))
        for preset, params in getattr(registry.get("learner", name), "PRESETS", {}).items():
            out.append((f"forestgen:{name}@{preset.replace(' ', '_')}", "forestgen", params,
                        params))
    extra = DIAGNOSTICS if diagnostics else {}
    for name in sorted(set(ABLATIONS) | set(extra)):
        for params in ABLATIONS.get(name, []) + extra.get(name, []):
            tag = "+".join(f"{k}={v}" for k, v in params.items())
            quick = {**QUICK.get(name, {}), **params}  # a departure from the quick size
            out.append((f"forestgen:{name}~{tag}", "forestgen", quick, params))
    return out


def departure(name: str) -> tuple[str, str, dict, dict]:
    """A generator spec ``forestgen:LEARNER~k=v+k2=v2`` not listed in :data:`ABLATIONS`: the
    learner's quick size with those parameters (values read as Python literals, else strings)."""
    import ast

    from forestgen import registry

    head, _, tag = name.partition("~")
    learner = head.removeprefix("forestgen:")
    if not head.startswith("forestgen:") or not tag or learner not in registry.available(
            "learner"):
        raise ValueError(f"unknown generator {name!r}: name a peer, a forestgen learner or "
                         f"preset, or a departure 'forestgen:LEARNER~param=value[+...]'")
    params = {}
    for kv in tag.split("+"):
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise ValueError(f"generator {name!r}: {kv!r} is not 'param=value'")
        try:
            params[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            params[k] = v
    return name, "forestgen", {**QUICK.get(learner, {}), **params}, params


def select_generators(gens: list, names: list[str]) -> list:
    """The generators named in ``--generators``, in the registry's order; a departure from a
    learner's defaults that is not pre-listed is built by :func:`departure`; any other unknown
    name is an error (never silently dropped)."""
    known = {g[0] for g in gens}
    return [g for g in gens if g[0] in names] + [departure(n) for n in names if n not in known]


def kinds_for_metrics(meta: dict) -> dict:
    cat = ("categorical", "ordered", "bool")
    return {c: "categorical" if s["kind"] in cat else "numeric"
            for c, s in meta["columns"].items()}


def split(table_dir: Path, seed: int, max_train: int | None, work: Path) -> dict:
    """Train/test CSVs for one seed (70/30, train capped); datetimes become float days."""
    meta = json.loads((table_dir / "meta.json").read_text())
    df = pd.read_csv(table_dir / "full.csv", keep_default_na=False, na_values=[""])
    for c, s in meta["columns"].items():
        if s["kind"] == "datetime":
            df[c] = (pd.to_datetime(df[c]) - pd.Timestamp("1970-01-01")).dt.days.astype(float)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(df))
    n_test = int(round(0.3 * len(df)))
    test, train = df.iloc[np.sort(perm[:n_test])], df.iloc[np.sort(perm[n_test:])]
    if max_train is not None and len(train) > max_train:
        train = train.iloc[np.sort(rng.choice(len(train), max_train, replace=False))]
    if max_train is not None and len(test) > max_train:
        # a random subset: the tables' own row order is often sorted (diamonds by price, fair
        # by affairs), so the first rows are not a sample (split version 1 took them)
        test = test.iloc[np.sort(rng.choice(len(test), max_train, replace=False))]
    d = work / f"{meta['name']}_s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    train.to_csv(d / "train.csv", index=False)
    test.to_csv(d / "test.csv", index=False)
    return {"meta": meta, "train": str(d / "train.csv"), "test": str(d / "test.csv"),
            "n_train": len(train), "n_test": len(test)}


def run_cell(gen: str, env: str, params: dict, data: dict, seed: int, root: Path, work: Path,
             limit: float) -> dict:
    out = work / f"{data['meta']['name']}_s{seed}" / gen.replace(":", "_")
    out.mkdir(parents=True, exist_ok=True)
    job = {"generator": gen, "params": params, "train": data["train"], "test": data["test"],
           "meta": data["meta"],
           "out": str(out), "seed": seed, "n_synth": data["n_train"], "repo": str(REPO),
           "rlib": str(peers.rlib(root))}
    (out / "job.json").write_text(json.dumps(job))
    py = sys.executable if env in ("forestgen", "rarf") else str(peers.python_of(root, env))
    envvars = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
               "NUMBA_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    rec = {"generator": gen, "table": data["meta"]["name"], "seed": seed, "params": params,
           "n_train": data["n_train"], "n_test": data["n_test"], "time_limit_s": limit}
    cpu = int(np.ceil(limit))

    def cap_cpu() -> None:  # every process of the cell (R included) gets the CPU budget
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    t0 = time.perf_counter()
    try:
        r = subprocess.run([py, str(HERE / "cell.py"), str(out / "job.json")], env=envvars,
                           capture_output=True, text=True, timeout=WALL_FACTOR * limit,
                           preexec_fn=cap_cpu)
        rec["wall_s"] = time.perf_counter() - t0
        if r.returncode in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
            rec.update(status="timeout", error=f"over the {cpu} CPU-second limit")
            return rec
        if r.returncode != 0:
            lines = [x for x in (r.stderr or "").strip().splitlines() if x.strip()]
            rec.update(status="error", error=" | ".join(lines[-2:])[-400:])
            return rec
    except subprocess.TimeoutExpired:
        rec.update(status="stalled", wall_s=WALL_FACTOR * limit,
                   error=f"no result within the {WALL_FACTOR * limit:.0f} s wall-clock backstop "
                         "(CPU limit not reached: the machine's load starved the cell)")
        return rec
    rec.update(json.loads((out / "result.json").read_text()))
    rec["status"] = "ok"
    rec["synth"] = str(out / "synth.csv")
    return rec


def score(rec: dict, data: dict, seed: int) -> dict:
    """Score an ``ok`` cell's sample in place (a scoring failure is a recorded cell too)."""
    from score import score_cell  # forestgen.metrics: not needed to run cells elsewhere

    try:
        rec.update(score_cell(data, rec["synth"], kinds_for_metrics(data["meta"]), seed))
    except Exception as exc:
        rec.update(status="score_error", error=f"{type(exc).__name__}: {exc}"[:400])
    return rec


def rescore(records: list[dict], only_old_splits: bool = False) -> list[dict]:
    """Score cells again from their stored samples (after a change in the metrics, or every
    cell split by an older :func:`split`, whose test rows the split files now replace)."""
    out = []
    for r in records:
        old = r.get("split_version", 1) < SPLIT_VERSION and r["n_test"] >= r["n_train"]
        if only_old_splits and not old:
            out.append(r)
            continue
        if old:
            for k in ("test_ll", "test_ll_official", "test_ll_n_neg_inf"):
                r.pop(k, None)
            r["test_ll_note"] = "test rows of split version 1 (not a random subset): dropped"
            r["split_version"] = SPLIT_VERSION
        if r.get("status") in ("ok", "score_error") and Path(r.get("synth", "")).exists():
            data = {"meta": r["meta_full"], "train": r["train"], "test": r["test"],
                    "n_train": r["n_train"], "n_test": r["n_test"]}
            r = {k: v for k, v in r.items() if k not in ("error",)}
            r["status"] = "ok"
            score(r, data, r["seed"])
        out.append(r)
    return out


def check_same_code(records: list[dict], new: str, old: str) -> int:
    """Number of (table, seed) cells on which ``forestgen:arf`` ran at commits ``new`` and
    ``old`` with byte-identical samples; raises unless there is at least one and all agree."""
    runs: dict[str, dict] = {new: {}, old: {}}
    for r in records:
        if r["generator"] == "forestgen:arf" and r.get("status") == "ok" \
                and r.get("commit") in runs:
            runs[r["commit"]][(r["table"], r["seed"])] = Path(r["synth"])
    both = sorted(set(runs[new]) & set(runs[old]))
    if not both:
        raise SystemExit(f"--same-code {new}={old}: forestgen:arf did not run at both commits")
    differ = [k for k in both if runs[new][k].read_bytes() != runs[old][k].read_bytes()]
    if differ:
        raise SystemExit(f"--same-code {new}={old}: forestgen:arf samples differ on {differ[:5]}")
    return len(both)


def _generator_rank(record: dict) -> tuple:
    """Peers first (in the order of ``PEER_GENERATORS``), then forestgen's learners and
    presets by name, then one-parameter ablations (``~``) by name."""
    g = record["generator"]
    if not g.startswith("forestgen:"):
        order = [p[0] for p in PEER_GENERATORS]
        return (0, order.index(g) if g in order else len(order), g)
    return (2 if "~" in g else 1, 0, g)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peers", type=Path, default=peers.default_root())
    ap.add_argument("--full", action="store_true", help="3 seeds, 20k-row cap, long limits")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--max-train", type=int, default=None, help="cap on training rows")
    ap.add_argument("--tables", default=None, help="comma-separated subset")
    ap.add_argument("--generators", default=None, help="comma-separated subset")
    ap.add_argument("--limit", type=float, default=None, help="CPU seconds per cell")
    ap.add_argument("--limit-for", default=None,
                    help="per-generator CPU-second limits, comma-separated GEN=SECONDS")
    ap.add_argument("--skip-setup", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--resume", action="store_true",
                    help="keep the cells already in --out/leaderboard.jsonl and run only the "
                         "missing ones (an interrupted run picks up where it stopped)")
    ap.add_argument("--merge", default=None,
                    help="comma-separated result dirs of shards run side by side: merge their "
                         "leaderboard.jsonl into --out and write the page, running nothing")
    ap.add_argument("--merge-note", default=None,
                    help="with --merge: the commands that produced the shards, for the page")
    ap.add_argument("--defaults-decision", type=Path, default=None,
                    help="with --merge: a Markdown file with the defaults chosen from this "
                         "evidence (before/after table), put first in the defaults section")
    ap.add_argument("--same-code", default=None, metavar="NEW=OLD[,NEW=OLD]",
                    help="with --merge: pair ARF variants run at forestgen commit NEW with the "
                         "defaults run at OLD in the defaults section; accepted only if the "
                         "defaults ran at both and gave byte-identical samples on every cell")
    ap.add_argument("--rescore", nargs="?", const="all", choices=["all", "old-splits"],
                    help="with --merge: score every cell again from its stored sample (or only "
                         "cells of an older split version)")
    ap.add_argument("--new-tables", nargs="?", const="new", default=None,
                    choices=("new", "regression", "counts"),
                    help="tables the leaderboard never used instead of the usual ones: "
                         "'new' (the default; tables.py --new: fatality, mroz, wages), "
                         "'regression' (--new-regression) or 'counts' (--new-counts: randhie, "
                         "rwm1984, doctor)")
    ap.add_argument("--work", type=Path, default=None,
                    help="where splits and samples are kept (default: a new temporary dir)")
    a = ap.parse_args(argv)
    if a.merge:
        records, infos = [], []
        for d in a.merge.split(","):
            shard = [json.loads(x) for x in (Path(d) / "leaderboard.jsonl").read_text()
                     .splitlines() if x.strip()]
            summary = Path(d) / "leaderboard_summary.json"
            if summary.exists():
                infos.append(json.loads(summary.read_text()))
                for r in shard:  # cells of a shard run outside a git checkout
                    if r.get("commit", "unknown") == "unknown":
                        r["commit"] = str(infos[-1].get("commit", "unknown")).split()[0]
            records += shard
        same_code = None
        if a.same_code:
            notes = []
            for pair in a.same_code.split(","):
                new, old = pair.split("=")
                n = check_same_code(records, new, old)
                for r in records:
                    if r.get("commit") == new:
                        r["pair_code"] = old
                notes.append(f"ARF variants run at forestgen {new} are paired with the defaults "
                             f"run at {old}: the defaults gave byte-identical samples at both on "
                             f"all {n} cells run at both")
            same_code = "; ".join(notes)
        seen, unique = set(), []
        for r in records:  # a cell run by two shards counts once (the first)
            key = (r["generator"], r["table"], r["seed"])
            if key not in seen:
                seen.add(key)
                unique.append(r)
        unique.sort(key=_generator_rank)  # the page's column order, whatever the shard order
        records = rescore(unique, only_old_splits=a.rescore == "old-splits") if a.rescore \
            else unique
        a.out.mkdir(parents=True, exist_ok=True)
        with open(a.out / "leaderboard.jsonl", "w") as fh:
            fh.writelines(json.dumps(r, default=str) + "\n" for r in records)
        info = dict(infos[0]) if infos else {
            "seeds": a.seeds or 1, "max_train": a.max_train, "limit_s": a.limit, "full": a.full,
            "setup": {k: "installed" for k in peers.PEERS} | {"rarf": "installed"},
            "command": "(shards stopped at the time budget; see the cells listed)"}
        if infos:
            info["command"] = " ; ".join(i["command"] for i in infos)
            info["shards"] = infos
        if a.merge_note:
            info["command"] = a.merge_note
        if a.defaults_decision:
            info["defaults_decision"] = a.defaults_decision.read_text().strip()
        if same_code:
            info["same_code"] = same_code
        write_page(records, a.out, info)
        return 0
    seeds = a.seeds or (3 if a.full else 1)
    max_train = a.max_train if a.max_train is not None else (20000 if a.full else 1000)
    limit = a.limit or (1800.0 if a.full else 120.0)
    limits = {g: float(v) for g, v in (x.rsplit("=", 1) for x in
                                       (a.limit_for.split(",") if a.limit_for else []))}
    root = a.peers
    root.mkdir(parents=True, exist_ok=True)
    load0 = [round(x, 1) for x in os.getloadavg()]
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    a.out.mkdir(parents=True, exist_ok=True)
    setup = {}
    for name in ("datasets", "rarf", "arfpy", "nrgboost", "sdv", "forestdiffusion",
                 "synthyverse"):
        if a.skip_setup:  # trust the environments as they are (a broken one fails its cells)
            setup[name] = (True, "setup skipped")
        else:
            setup[name] = peers.setup(root, name, root / f"{name}_setup.log")
        print(f"peer {name}: {setup[name][1]}", flush=True)
    work = a.work or Path(tempfile.mkdtemp(prefix="forestgen-leaderboard-"))
    work.mkdir(parents=True, exist_ok=True)
    tables_dir = work / "tables"
    ds_py = peers.python_of(root, "datasets")
    if not (setup["datasets"][0] and ds_py.exists()):  # the table sources in this interpreter
        ds_py = Path(sys.executable)
    subprocess.run([str(ds_py), str(HERE / "tables.py"), str(tables_dir)]
                   + ([{"new": "--new", "regression": "--new-regression",
                        "counts": "--new-counts"}[a.new_tables]] if a.new_tables else []),
                   check=True)
    # smallest tables first, so that a run stopped at a time budget has covered the most tables
    tables = sorted((p.name for p in tables_dir.iterdir()), key=lambda t: (json.loads(
        (tables_dir / t / "meta.json").read_text())["rows"], t))
    if a.tables:
        tables = [t for t in tables if t in a.tables.split(",")]
    gens = forestgen_generators(diagnostics=bool(a.generators)) + PEER_GENERATORS
    if a.generators:
        gens = select_generators(gens, a.generators.split(","))
    info = {"seeds": seeds, "max_train": max_train, "limit_s": limit, "limits": limits,
            "commit": commit, "load_start": load0, "load_end": "(stopped before the end)",
            "full": a.full, "setup": {k: v[1] for k, v in setup.items()},
            "command": " ".join(["python", "benchmarks/leaderboard/run.py",
                                 *(argv if argv is not None else sys.argv[1:])])}
    # written now too, so that a shard stopped at a time budget can still be merged
    (a.out / "leaderboard_summary.json").write_text(json.dumps(info, indent=1, default=str))
    jsonl = a.out / "leaderboard.jsonl"
    records = []
    if a.resume and jsonl.exists():
        records = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
    done = {(r["generator"], r["table"], r["seed"]) for r in records}
    with open(jsonl, "a" if a.resume else "w") as fh:
        for seed in range(seeds):
            for t in tables:
                data = split(tables_dir / t, seed, max_train, work)
                for gen, env, quick, full in gens:
                    if (gen, t, seed) in done:
                        continue
                    params = full if a.full else quick
                    if env != "forestgen" and not setup[env][0]:
                        rec = {"generator": gen, "table": t, "seed": seed, "status": "error",
                               "error": f"peer environment {env!r}: {setup[env][1]}"}
                    else:
                        rec = run_cell(gen, env, params, data, seed, root, work,
                                       limits.get(gen, limit))
                    if rec["status"] == "ok":
                        score(rec, data, seed)
                    # kept so that --merge --rescore can score the sample again
                    rec.update(train=data["train"], test=data["test"], meta_full=data["meta"],
                               commit=commit, split_version=SPLIT_VERSION)
                    rec["table_meta"] = {k: data["meta"][k] for k in
                                         ("rows", "target", "task", "source", "tests",
                                          "nan_rate")}
                    records.append(rec)
                    fh.write(json.dumps(rec, default=str) + "\n")
                    fh.flush()
                    print(f"{t:14s} s{seed} {gen:22s} {rec['status']:8s} "
                          f"c2st={rec.get('c2st_auc', float('nan')):.3f} "
                          f"{rec.get('error', '')[:80]}", flush=True)
    info["load_end"] = [round(x, 1) for x in os.getloadavg()]
    write_page(records, a.out, info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
