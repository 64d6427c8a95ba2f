"""Short hashes of every output of a few ARF fits, to show that a speed change keeps the bits
(issue 33: same seed, same bits at any thread count).

    NUMBA_NUM_THREADS=1 PYTHONPATH=<tree> python -P benchmarks/hash_arf_outputs.py > h1.json
    NUMBA_NUM_THREADS=2 PYTHONPATH=<tree> python -P benchmarks/hash_arf_outputs.py > h2.json

Seven fits (``n_jobs`` = ``NUMBA_NUM_THREADS``): the mixed table of ``bench_arf_rarf.py`` at
8,000 and 3,000 rows (hard votes, ``marginal_weight=0``), 3,000 rows with soft votes and with
``marginal_weight="auto"``, and a table with a mapping, an affine rule and an inequality at
6,000 and 2,000 rows. Per fit: every array of ``forest_``, the leaf log-weights, ``log_prob``
of 2,000 held-out rows, a 3,000-row draw, the detected rules, the out-of-bag accuracies of the
rounds, the marginal weight, ``predict_proba`` of the first categorical column and
``expect()``; one hash of all of them per fit (and the parts). Two trees (``git archive REV
forestgen``) or two thread counts with equal JSON have the same bits on these fits. The fits
at ``marginal_weight=0`` pin the default leaf law (``prior_strength=0.3``, and
``numeric_prior=0`` where the checkout has it), so their hashes compare across checkouts
whatever their defaults; the ``"auto"`` fits take the defaults.
"""

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402

import forestgen as fg  # noqa: E402

warnings.filterwarnings("ignore")


def h(a) -> str:
    return hashlib.sha1(np.ascontiguousarray(np.asarray(a)).tobytes()).hexdigest()[:10]


def rules_table(n: int, seed: int) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    a = r.choice(["x", "y", "z"], n)
    c = r.normal(size=n).round(3)
    return pd.DataFrame({"a": a, "b": pd.Series(a).map({"x": "p", "y": "q", "z": "p"}),
                         "c": c, "d": (c + r.exponential(size=n)).round(3),
                         "e": 2 * c + 1, "f": r.integers(0, 5, n)})


def main() -> None:
    threads = int(os.environ.get("NUMBA_NUM_THREADS", "1"))
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "8000,3000").split(",")]
    out = {}
    cases = [(n, "hard", 0.0, "mixed") for n in sizes] + [
        (3000, "soft", 0.0, "mixed"), (3000, "hard", "auto", "mixed"),
        (6000, "hard", 0.0, "rules"), (2000, "hard", "auto", "rules")]
    old_law = {"prior_strength": 0.3}
    if "numeric_prior" in fg.ARF().get_params():  # (checkouts since stop 54)
        old_law["numeric_prior"] = 0
    for n, mode, mw, tab in cases:
        tr = mixed_table(n, 1) if tab == "mixed" else rules_table(n, 1)
        te = mixed_table(2000, 2) if tab == "mixed" else rules_table(2000, 2)
        m = fg.ARF(n_trees=30, min_node_size=5, n_jobs=threads, marginal_weight=mw,
                   oob_mode=mode, random_state=3, **(old_law if mw == 0 else {})).fit(tr)
        parts = {k: h(v) for k, v in sorted(vars(m.forest_).items())
                 if isinstance(v, np.ndarray)}
        parts["llw"] = h(m.leaf_log_weight_)
        parts["lp"] = h(m.log_prob(te))
        parts["sample"] = h(m.sample(3000, random_state=5).to_numpy(dtype=str))
        parts["rules"] = json.dumps(m.encoder_.schema.rules, sort_keys=True, default=str)[:2000]
        parts["diag"] = str([round(d["oob_accuracy"], 15) for d in m.fit_diagnostics_])
        parts["mw"] = str(getattr(m, "marginal_weight_", None))
        cat = [c for c in tr.columns if tr[c].dtype == object
               or str(tr[c].dtype).startswith(("cat", "str"))]
        if cat:
            pp = m.predict_proba(te.drop(columns=[cat[0]]).iloc[:500], target=cat[0])
            parts["pp"] = h(np.asarray(pp, float))
        parts["expect"] = str(m.expect())
        key = f"{tab}-{n}-{mode}-{mw}"
        out[key] = h(json.dumps(parts, sort_keys=True).encode())
        out[key + "-parts"] = parts
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
