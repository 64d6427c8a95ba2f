"""Queries of a backed-off ARF against the same ARF without the back-off, side by side.

    python benchmarks/bench_backoff_walk.py /work/tables/usual --only airquality,diabetes \
        [--rows 20000] [--repeats 3] [--name backoff_walk_s54]

Per table (``TABLES_DIR/<name>/full.csv`` typed by its ``meta.json``, as the leaderboard reads
it): ``ARF(random_state=0)`` at its defaults (``marginal_weight="auto"``; the table is skipped
unless it picks ``λ > 0``: its columns are then stacked leaves, the forest's own and the
back-off tree's histogram marginals) and ``ARF(random_state=0, marginal_weight=0)``. Both answer
the same queries on ``--rows`` rows drawn from the table with 15% of the entries blanked:
``log_prob`` (NaN entries marginalised), ``predict_proba`` of the first discrete column,
``sample(conditions=)`` with per-row point evidence on two columns and an interval on a third,
``expect`` under the same per-row evidence, and ``log_prob(conditions=)`` (the interval
evidence). Each query is timed ``--repeats`` times in CPU seconds of this process
(``time.process_time``, ``--threads`` Numba threads), the three in turn: the paper's model,
the backed-off one (its stacked columns through the fused walk's head and tail,
:func:`forestgen.inference.leaf_factors.fused_head`), and the backed-off one on the enumerating
path (:func:`enumerating`: the head switched off, as before stop 54); the smallest time of
each is kept. ``vs_paper``: backed-off / paper; ``speed-up``: enumerating / fused, on the same
model; ``max_abs_diff``: the largest difference of the two paths' answers. ``--hash``
prints hashes of the backed-off model's answers instead (:func:`output_hashes`; run at
``--threads 1`` and ``2`` with ``NUMBA_NUM_THREADS=2``: equal output, the same bits).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "leaderboard"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _common import md_table, write_result  # noqa: E402


def load(table_dir: Path) -> tuple[pd.DataFrame, dict]:
    from cell import typed

    meta = json.loads((table_dir / "meta.json").read_text())
    return typed(str(table_dir / "full.csv"), meta), meta


def queries(df: pd.DataFrame, rows: int, seed: int = 1) -> dict:
    """The query frames: rows drawn from ``df`` with 15% of entries blanked, the discrete
    target, and per-row evidence (two point columns, an interval on a third)."""
    rng = np.random.default_rng(seed)
    q = df.sample(rows, replace=True, random_state=seed).reset_index(drop=True)
    for c in q.columns:
        blank = rng.random(rows) < 0.15
        if q[c].dtype.kind in "iub":
            q[c] = q[c].astype(float)
        q.loc[blank, c] = np.nan
    disc = [c for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)
            or df[c].dtype.kind == "b" or str(df[c].dtype) == "boolean"]
    num = [c for c in df.columns if c not in disc and df[c].dtype.kind == "f"
           or str(df[c].dtype) in ("Int64", "int64")]
    target = disc[0] if disc else None
    cond = pd.DataFrame(index=q.index, dtype=object)
    pts = [c for c in df.columns if c != target][:2]
    src = df.sample(rows, replace=True, random_state=seed + 1).reset_index(drop=True)
    for c in pts:
        cond[c] = src[c].astype(object).where(src[c].notna(), None)
    ivl = [c for c in num if c not in pts][:1]
    for c in ivl:
        v = src[c].astype(float)
        sd = float(np.nanstd(df[c].astype(float)))
        cond[c] = [None if np.isnan(a) else (a - 0.5 * sd, a + 0.5 * sd) for a in v]
    free = [c for c in df.columns if c not in cond.columns]
    return {"nan": q, "target": target, "cond": cond, "free": free}


def timed(fn, model) -> tuple[float, object]:
    """``(CPU seconds, result)`` of ``fn(model)``."""
    t = time.process_time()
    out = fn(model)
    return time.process_time() - t, out


@contextlib.contextmanager
def enumerating():
    """The backed-off model's queries as before the fused head (stop 54): no
    :func:`~forestgen.inference.leaf_factors.fused_head`, so stacked columns take the
    enumerating path."""
    from forestgen.inference import leaf_factors, marginal_walk

    saved = leaf_factors.fused_head
    leaf_factors.fused_head = marginal_walk.fused_head = lambda model: None
    try:
        yield
    finally:
        leaf_factors.fused_head = marginal_walk.fused_head = saved


def max_diff(a, b) -> float:
    """Largest absolute difference of two query results (numbers only; ``inf`` where one is
    finite and the other not; sampled frames are compared only as equal or not)."""
    if isinstance(a, (pd.DataFrame, pd.Series)):
        num = a.select_dtypes("number") if isinstance(a, pd.DataFrame) else a
        if isinstance(a, pd.DataFrame) and not a.drop(columns=num.columns).astype(str).equals(
                b.drop(columns=num.columns).astype(str)):
            return float("inf")
        a = num.to_numpy(float)
        b = (b[num.columns] if isinstance(b, pd.DataFrame) else b).to_numpy(float)
    a, b = np.asarray(a, float), np.asarray(b, float)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        d = np.where(same, 0.0, np.abs(a - b))
    return float(np.nan_to_num(d, nan=np.inf).max()) if d.size else 0.0


def run_table(name: str, tables: Path, rows: int, repeats: int) -> list[dict]:
    import forestgen as fg

    df, meta = load(tables / name)
    auto = fg.ARF(random_state=0).fit(df)
    lam = float(auto.marginal_weight_)
    paper = fg.ARF(random_state=0, marginal_weight=0).fit(df)
    print(f"{name}: λ = {lam}", flush=True)
    if lam <= 0:
        return [{"table": name, "lambda": lam, "query": "(no back-off)"}]
    qs = queries(df, rows)
    cond_rows = max(1, rows // 10)
    cond = qs["cond"].iloc[:cond_rows]
    ivl_only = qs["cond"].iloc[:cond_rows].copy()
    jobs = {"log_prob (NaN entries)": lambda m: m.log_prob(qs["nan"]),
            "sample(conditions=) per row": lambda m: m.sample(conditions=cond,
                                                               random_state=0),
            "expect (per-row evidence)": lambda m: m.expect(qs["free"], conditions=cond),
            "evidence log_prob (intervals)": lambda m: m.log_prob(
                m.sample(cond_rows, random_state=1)[qs["free"]], conditions=ivl_only)}
    if qs["target"] is not None:
        jobs["predict_proba"] = lambda m: m.predict_proba(qs["nan"], target=qs["target"])
    out = []
    for label, fn in jobs.items():
        fn(auto), fn(paper)  # compile and build the packs first
        with enumerating():
            fn(auto)
        ta, te, tp = np.inf, np.inf, np.inf
        for _ in range(repeats):
            t, va = timed(fn, auto)
            ta = min(ta, t)
            with enumerating():
                t, ve = timed(fn, auto)
            te = min(te, t)
            tp = min(tp, timed(fn, paper)[0])
        n = rows if label in ("log_prob (NaN entries)", "predict_proba") else cond_rows
        out.append({"table": name, "lambda": lam, "query": label, "rows": n,
                    "paper_s": tp, "backed_off_s": ta, "enumerating_s": te,
                    "vs_paper": ta / tp, "enumerating_vs_paper": te / tp,
                    "speed-up": te / ta, "max_abs_diff": max_diff(va, ve),
                    "trees": f"{auto.forest_.n_trees} / {paper.forest_.n_trees}"})
        print(json.dumps(out[-1]), flush=True)
    return out


def output_hashes(name: str, tables: Path, rows: int, threads: int) -> dict:
    """Short hashes of the backed-off model's answers (``n_jobs=threads``): its leaf weights,
    ``log_prob`` with NaN entries, ``predict_proba``, ``impute``, ``expect`` and
    ``log_prob(conditions=)`` under point evidence, and a sample; equal JSON at one and two
    threads: the same bits."""
    import hashlib

    import forestgen as fg

    def h(x) -> str:
        if isinstance(x, (pd.DataFrame, pd.Series)):
            x = pd.util.hash_pandas_object(x, index=False).to_numpy()
        return hashlib.sha1(np.ascontiguousarray(np.asarray(x)).tobytes()).hexdigest()[:10]

    df, _ = load(tables / name)
    m = fg.ARF(random_state=0, n_jobs=threads).fit(df)
    qs = queries(df, rows)
    pts = qs["cond"].iloc[:, :2]
    out = {"lambda": float(m.marginal_weight_), "llw": h(m.leaf_log_weight_),
           "log_prob": h(m.log_prob(qs["nan"])), "impute": h(m.impute(qs["nan"])),
           "expect": h(m.expect(qs["free"], conditions=pts)),
           "cond_log_prob": h(m.log_prob(qs["nan"], conditions=pts)),
           "sample": h(m.sample(1000, random_state=0))}
    if qs["target"] is not None:
        out["predict_proba"] = h(m.predict_proba(qs["nan"], target=qs["target"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("--only", default="airquality,diabetes")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--name", default="backoff_walk_s54")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hash", action="store_true",
                    help="print hashes of the backed-off model's answers (output_hashes)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import numba

    numba.set_num_threads(a.threads)
    if a.hash:
        print(json.dumps({t: output_hashes(t, a.tables, a.rows, a.threads)
                          for t in a.only.split(",")}, indent=1, sort_keys=True))
        return 0
    res = []
    for name in a.only.split(","):
        res += run_table(name, a.tables, a.rows, a.repeats)
    cols = ["table", "lambda", "trees", "query", "rows", "paper_s", "backed_off_s",
            "enumerating_s", "vs_paper", "enumerating_vs_paper", "speed-up", "max_abs_diff"]
    for r in res:
        if "max_abs_diff" in r:
            r["max_abs_diff"] = f"{r['max_abs_diff']:.1e}"
    body = md_table(cols, [[r.get(c, "") for c in cols] for r in res])
    print(body)
    if a.name:
        write_result(a.name, "Backed-off ARF against marginal_weight=0, per query", [body])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
