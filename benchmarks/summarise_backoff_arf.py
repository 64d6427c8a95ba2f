"""Per-table means of two runs of ``bench_backoff_arf.py`` side by side (markdown).

    python benchmarks/summarise_backoff_arf.py BEFORE.jsonl AFTER.jsonl

Columns: ``λ`` per seed, held-out log-likelihood of ``ARF()`` (before, after), of the column
marginals, after minus marginals, C2ST AUC and TSTR (before, after), fit CPU seconds (before,
after; the median of the seeds' ``ARF()`` fits, its held-out look included: the first cell
of a fresh checkout also compiles Numba's kernels), and whether the hashed outputs of
``ARF(marginal_weight=0, prior_strength=0.3)`` (``paper_bits``) agree in every seed. Then the
mean over tables of ``|C2ST - 0.5|``, TSTR, the held-out log-likelihood's change and fit CPU
(of the medians), and the count of tables at or above the marginals.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def load(path: str) -> dict:
    out: dict = {}
    for line in open(path):
        r = json.loads(line)
        if "error" not in r:
            out.setdefault(r["table"], []).append(r)
    return out


def main() -> int:
    before, after = load(sys.argv[1]), load(sys.argv[2])
    print("| table | λ before | λ after | LL before | LL after | marginals | after − marg. "
          "| C2ST before | C2ST after | TSTR before | TSTR after | fit CPU s before | after "
          "| λ=0, prior 0.3 bits |")
    print("|---|" + "---|" * 13)
    agg = {k: [] for k in ("c2b", "c2a", "tb", "ta", "cb", "ca", "dll")}
    above = [0, 0]
    for t in sorted(after):
        b, a = sorted(before.get(t, []), key=lambda r: r["seed"]), sorted(after[t],
                                                                          key=lambda r: r["seed"])
        if not b:
            continue
        m = lambda rs, k: float((np.median if k == "fit_cpu_s" else np.mean)(  # noqa: E731
            [r[k] for r in rs]))
        lam = lambda rs: "/".join(f"{r['lambda']:g}" for r in rs)  # noqa: E731
        same = all(x["paper_bits"] == y["paper_bits"] for x, y in zip(b, a))
        marg = m(a, "test_ll_marginals")
        above[0] += m(b, "test_ll") >= marg
        above[1] += m(a, "test_ll") >= marg
        print(f"| {t} | {lam(b)} | {lam(a)} | {m(b, 'test_ll'):.2f} | {m(a, 'test_ll'):.2f} "
              f"| {marg:.2f} | {m(a, 'test_ll') - marg:+.2f} | {m(b, 'c2st'):.3f} "
              f"| {m(a, 'c2st'):.3f} | {m(b, 'tstr'):.3f} | {m(a, 'tstr'):.3f} "
              f"| {m(b, 'fit_cpu_s'):.2f} | {m(a, 'fit_cpu_s'):.2f} "
              f"| {'same' if same else 'DIFFER'} |")
        agg["c2b"].append(np.mean([abs(r["c2st"] - 0.5) for r in b]))
        agg["c2a"].append(np.mean([abs(r["c2st"] - 0.5) for r in a]))
        agg["tb"].append(m(b, "tstr"))
        agg["ta"].append(m(a, "tstr"))
        agg["dll"].append(m(a, "test_ll") - m(b, "test_ll"))
        agg["cb"].append(m(b, "fit_cpu_s"))
        agg["ca"].append(m(a, "fit_cpu_s"))
    n = len(agg["c2b"])
    print(f"\nMean over {n} tables: |C2ST − 0.5| {np.mean(agg['c2b']):.3f} before, "
          f"{np.mean(agg['c2a']):.3f} after; TSTR {np.mean(agg['tb']):.3f} before, "
          f"{np.mean(agg['ta']):.3f} after; held-out LL {np.mean(agg['dll']):+.3f} nats/row "
          f"(higher on {sum(x > 0.005 for x in agg['dll'])}, lower on "
          f"{sum(x < -0.005 for x in agg['dll'])}); fit CPU s {np.mean(agg['cb']):.3f} before, "
          f"{np.mean(agg['ca']):.3f} after (ratio {np.mean(agg['ca']) / np.mean(agg['cb']):.2f}). "
          f"At or above the marginals: {above[0]} of {n} before, {above[1]} of {n} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
