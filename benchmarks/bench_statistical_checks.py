"""CPU cost of the statistical conformance checks, this checkout against another.

Each learner (defaults, ``random_state=0``) runs
:func:`forestgen.testing.statistical.check_learner_statistics` with the ``draws`` and
``conditional`` checks (the ones whose marginal CDFs cost) in a fresh process per side,
``NUMBA_NUM_THREADS=1``; the table gives the process CPU seconds (fit included), the number
of tests and of failures on each side. With ``--before`` the other side is another forestgen
checkout (e.g. a ``git archive`` of an earlier commit).

    python benchmarks/bench_statistical_checks.py --learners ARF,DEF --before /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO, md_table, write_result  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import forestgen as fg
from forestgen.testing.statistical import check_learner_statistics
name = sys.argv[1]
kw = {"fit_kwargs": {"target": "c"}} if name == "GeF" else {}
t = time.process_time()
res = check_learner_statistics(getattr(fg, name)(random_state=0), raise_on_failure=False,
                               checks=("draws", "conditional"), **kw)
print(json.dumps({"cpu": time.process_time() - t, "tests": len(res),
                  "failed": sum(not r.passed for r in res), "src": fg.__file__}))
"""


def side(src: str, learner: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), NUMBA_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-P", "-c", CHILD, learner], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--learners", default="ARF,DEF")
    ap.add_argument("--before", default=None, help="another forestgen checkout to compare")
    ap.add_argument("--out", default="statistical_checks_cost")
    args = ap.parse_args()
    rows = []
    for name in args.learners.split(","):
        after = side(str(REPO), name)
        row = [name, after["cpu"], after["tests"], after["failed"]]
        if args.before:
            before = side(args.before, name)
            assert before["src"] != after["src"], "both sides imported the same forestgen"
            row += [before["cpu"], before["tests"], before["failed"], before["cpu"] / after["cpu"]]
        rows.append(row)
        print(row, flush=True)
    headers = ["learner", "CPU s (this checkout)", "tests", "failed"]
    if args.before:
        headers += ["CPU s (before)", "tests (before)", "failed (before)", "before / this"]
    write_result(args.out, "Statistical checks (draws, conditional): CPU per learner",
                 [md_table(headers, rows, digits=1),
                  f"This checkout: {REPO}; before: {args.before or 'not run'}. "
                  "check_learner_statistics on statistical_table (300 rows), 4,000 draws, "
                  "one thread, fit included, one run per side."])


if __name__ == "__main__":
    main()
