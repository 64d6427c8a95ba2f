"""Where ARF's FORGE sampling and likelihood spend their CPU time, for one or more checkouts.

    python benchmarks/profile_arf_queries.py --rows 8000,32000,80000 --before /tmp/base \\
        --out arf_queries_profile

Issue 33's protocol (:func:`_arf_side.mixed_table`, 30 trees, leaves of at least 5 rows,
``n_jobs=1`` and ``NUMBA_NUM_THREADS=1``, categorical columns read from CSV text as in
``bench_arf_rarf.py``). Each checkout runs in its own subprocess on the same table; after a
warm-up fit (compilation excluded) it fits once and times, in CPU seconds (process time, the
best of ``--reps`` repetitions where a step can be repeated):

* ``sample(n)`` (first call) and its steps: the leaf draw (``draw_leaves``), the column
  draws (``AncestralSampler.draw``), the support map (``rows_to_support``) and decoding to a
  DataFrame (``inverse_transform``);
* ``log_prob`` of 4,000 held-out rows, first call (it builds the model's packed leaf
  records) and again, and its steps: encoding (``encode_rows``), building the packed records
  (``LeafPack``) and the walk (``marginal_walk.walk``).

Writes ``results/<--out>.md`` and ``.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import REPO, RESULTS, md_table, write_result  # noqa: E402

CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[4])
from _arf_side import read_table
import numpy as np, forestgen as fg
from forestgen.data.support import rows_to_support
from forestgen.inference import leaf_factors, marginal_walk
tr, te = read_table(sys.argv[1]), read_table(sys.argv[2])
reps = int(sys.argv[3])
T = time.process_time
kw = dict(n_trees=30, min_node_size=5, n_jobs=1, marginal_weight=0.0)
w = fg.ARF(**kw, random_state=1).fit(tr.iloc[:500]); w.sample(50); w.log_prob(te.iloc[:50])
m = fg.ARF(**kw, random_state=0).fit(tr)
n = len(tr)
def best(f):
    out = []
    for _ in range(reps):
        t = T(); f(); out.append(T() - t)
    return min(out)
r = {}
t = T(); m.sample(n, random_state=0); r["sample first"] = T() - t
r["sample"] = best(lambda: m.sample(n, random_state=0))
s = m.component("sampler")
rng = np.random.default_rng(0)
r["leaf draw"] = best(lambda: s.draw_leaves(m.leaf_log_weight_, n, rng))
leaf = s.draw_leaves(m.leaf_log_weight_, n, rng)
r["column draws"] = best(lambda: s.draw(m, leaf, rng))
Z = m.sample_encoded(n, 0)
r["support map"] = best(lambda: rows_to_support(Z.copy(), m.schema_))
r["decode"] = best(lambda: m.encoder_.inverse_transform(Z))
t = T(); m.log_prob(te); r["log_prob first"] = T() - t
r["log_prob"] = best(lambda: m.log_prob(te))
r["encode"] = best(lambda: m.encode_rows(te, missing_columns="nan"))
E = m.encode_rows(te, missing_columns="nan")
r["pack build"] = best(lambda: leaf_factors.LeafPack(m))
r["walk"] = best(lambda: marginal_walk.walk(m, E))
r["n_leaves"] = int(m.forest_.n_leaves)
print("RESULT " + json.dumps(r))
'''

SAMPLE = ["sample first", "sample", "leaf draw", "column draws", "support map", "decode"]
LIK = ["log_prob first", "log_prob", "encode", "pack build", "walk"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="8000,32000,80000")
    ap.add_argument("--before", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="arf_queries_profile")
    args = ap.parse_args()
    sides = [("forestgen", REPO)] + ([("forestgen before", args.before)] if args.before else [])
    runs = []
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        test = Path(tmp) / "test.csv"
        mixed_table(4000, 10_000).to_csv(test, index=False)
        for n in [int(x) for x in args.rows.split(",") if x]:
            train = Path(tmp) / f"train_{n}.csv"
            mixed_table(n, 0).to_csv(train, index=False)
            for name, src in sides:
                with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
                    fh.write(CHILD)
                res = subprocess.run([sys.executable, fh.name, str(train), str(test),
                                      str(args.reps), str(Path(__file__).resolve().parent)],
                                     capture_output=True, text=True,
                                     env={**env, "PYTHONPATH": str(src)})
                os.unlink(fh.name)
                if res.returncode:
                    raise RuntimeError(res.stderr[-3000:])
                line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")][-1]
                runs.append({"side": name, "rows": n, **json.loads(line[7:])})
                print(name, n, runs[-1], file=sys.stderr, flush=True)
    (RESULTS / f"{args.out}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in runs))
    ms = [[r["rows"], r["side"], r["n_leaves"], *[1e3 * r[k] for k in SAMPLE]] for r in runs]
    ml = [[r["rows"], r["side"], *[1e3 * r[k] for k in LIK]] for r in runs]
    write_result(args.out, "ARF queries: where FORGE and the likelihood spend CPU time (ms)", [
        "One thread, CPU milliseconds (process time; steps: best of the repetitions). "
        "`sample first` / `log_prob first`: the first call on the fitted model (the likelihood's "
        "includes building the packed leaf records, kept for later calls).",
        "## FORGE: sample(n) of n = training rows",
        md_table(["rows", "side", "leaves", *SAMPLE], ms, digits=1),
        "## Likelihood of 4,000 held-out rows",
        md_table(["rows", "side", *LIK], ml, digits=1)])


if __name__ == "__main__":
    main()
