"""Chain settings compared on the leaderboard's *training* rows only (issue 37).

    python benchmarks/leaderboard/chain_settings.py WORK TABLES CONFIGS OUT.csv

``WORK``: the ``--work`` directory of a leaderboard run that ran ``forestgen:chain`` (its
``<table>_s0/forestgen_chain/job.json`` names the training CSV and its column kinds); ``TABLES``
and ``CONFIGS`` comma-separated (configs: ``table``, ``discrete_first``, ``min_leaf=10``,
``DF+min_leaf=10``, ``DF+uniform``, or any ``param=value[+param=value]`` of ``Chain``, values
read as Python literals, e.g. ``numeric_leaf=truncnorm`` or
``numeric_leaf=KernelLeaf(bandwidth=0.3)``; separate configs by ``;`` when one holds a comma).
Each setting is fitted on 2 of 3 folds of the training rows (2 seeds x 3 folds) and scored as
``AutoForest`` scores candidates: the C2ST of its samples against the held-out fold,
``|AUC - 0.5|`` (``dist``), and the held-out log-likelihood (``cpu_s``: the setting's CPU
seconds). The leaderboard's test rows are never read.
"""
import ast
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cell import typed  # noqa: E402

import forestgen as fg  # noqa: E402
from forestgen.metrics import c2st  # noqa: E402

warnings.simplefilter("ignore")
WORK = sys.argv[1]



def disc_first(df):
    """Discrete columns first (fewest levels first), then the numeric ones in table order."""
    m = fg.Chain().fit(df)
    cols = m.schema_.columns
    d = sorted([c.name for c in cols if c.is_discrete], key=lambda n: m.schema_[n].n_levels)
    return d + [c.name for c in cols if not c.is_discrete]


def parse(spec):
    """``param=value[+param=value]``: Chain parameters (``KernelLeaf(...)`` builds a leaf)."""
    out = {}
    for kv in spec.split("+"):
        k, _, v = kv.partition("=")
        if v.startswith("KernelLeaf("):
            out[k] = eval(v, {"KernelLeaf": fg.leaves.KernelLeaf})  # noqa: S307
            continue
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k] = v
    return out


NAMED = {"table": {}, "discrete_first": "DF", "min_leaf=10": {"min_leaf": 10},
         "DF+min_leaf=10": ("DF", {"min_leaf": 10}),
         "DF+uniform": ("DF", {"numeric_leaf": "uniform"})}
SEP = ";" if ";" in sys.argv[3] else ","  # ";" between configs that hold commas
configs = {k: NAMED[k] if k in NAMED else parse(k) for k in sys.argv[3].split(SEP)}
rows = []
for t in sys.argv[2].split(","):
    job = json.load(open(f"{WORK}/{t}_s0/forestgen_chain/job.json"))
    X = typed(job["train"], job["meta"])
    n = len(X)
    for name, cfg in configs.items():
        aucs, lls = [], []
        cpu0 = time.process_time()
        for seed in (0, 1):
            perm = np.random.default_rng(100 + seed).permutation(n)
            for k in range(3):
                val = np.sort(perm[k::3])
                fit = np.setdiff1d(np.arange(n), val)
                params = {}
                if cfg == "DF" or isinstance(cfg, tuple):
                    params["order"] = disc_first(X.iloc[fit])
                    if isinstance(cfg, tuple):
                        params.update(cfg[1])
                elif isinstance(cfg, dict):
                    params.update(cfg)
                m = fg.Chain(**params, random_state=seed * 10 + k, n_jobs=1).fit(X.iloc[fit])
                s = m.sample(len(val), random_state=seed * 10 + k + 1)
                aucs.append(c2st(X.iloc[val], s, kinds=m, random_state=k, n_threads=1).auc)
                lls.append(float(np.mean(m.log_prob(X.iloc[val]))))
        rows.append({"table": t, "config": name, "val_c2st": np.mean(aucs),
                     "dist": np.mean(np.abs(np.array(aucs) - 0.5)), "sd": np.std(aucs),
                     "val_ll": np.mean(lls), "cpu_s": time.process_time() - cpu0})
        print(rows[-1], flush=True)
pd.DataFrame(rows).to_csv(sys.argv[4], index=False)
