"""FORDE's leaf fits of this checkout against another's, in one process (issue 33): one thread.

Fits ``ARF(n_trees, min_node_size, n_jobs=1, marginal_weight=0)`` on the mixed table of
``_arf_side.mixed_table`` (``--rows`` rows, seed 0), keeps the pairs FORDE fits its leaves on
(the real rows' leaves, tree-major, and each column's cells), then fits every numeric column's
:class:`~forestgen.leaves.truncnorm.TruncNormalLeaf` and every discrete column's
:class:`~forestgen.leaves.categorical.CategoricalLeaf` ``--repeats`` times with this
checkout's classes and with ``--before``'s (its ``leaves/truncnorm.py`` and
``leaves/categorical.py`` loaded beside them under other names), alternating which goes first,
timed in thread CPU seconds. Every fitted array is compared (they must be identical). A control
row times this checkout's classes against themselves (what the alternation leaves as bias).
Writes ``results/<--out>.md``.

    python benchmarks/bench_leaf_fit_ab.py --before /tmp/fg_before --out leaf_fit_ab
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import md_table, write_result  # noqa: E402


def load_before(src: Path, rel: str, name: str):
    """``src/forestgen/<rel>`` as module ``name`` (its registrations skipped: the names are
    this checkout's; its imports resolve to this checkout's unchanged modules)."""
    import forestgen.registry as reg

    orig = reg.register
    reg.register = lambda *a, **k: (lambda c: c)
    try:
        spec = importlib.util.spec_from_file_location(name, src / "forestgen" / rel)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    finally:
        reg.register = orig
    return mod


def forde_inputs(rows: int, trees: int, mns: int):
    """The pairs and cells of an ARF fit's FORDE: ``x`` per column, the flat leaves and the
    cells, and which columns are discrete."""
    import forestgen as fg
    from forestgen import base

    df = mixed_table(rows, 0)
    for c in ("c0", "c1", "c2"):
        df[c] = df[c].astype("category")
    got: dict = {}
    fit_leaves, lmc = base.GenerativeForest.fit_leaves, base.GenerativeForest._leaf_model_and_cell

    def spy_fit(self, Z, leaves, *a, **k):
        got["Z"], got["leaves"], got["w"] = Z, leaves, a[3] if len(a) > 3 else k.get(
            "pair_weight")
        return fit_leaves(self, Z, leaves, *a, **k)

    def spy_cell(self, j, *a, **k):
        lm, cell = lmc(self, j, *a, **k)
        got.setdefault("cells", {})[j] = cell
        return lm, cell

    base.GenerativeForest.fit_leaves = spy_fit
    base.GenerativeForest._leaf_model_and_cell = spy_cell
    try:
        m = fg.ARF(n_trees=trees, min_node_size=mns, n_jobs=1, marginal_weight=0.0,
                   random_state=0).fit(df)
    finally:
        base.GenerativeForest.fit_leaves = fit_leaves
        base.GenerativeForest._leaf_model_and_cell = lmc
    B = got["leaves"].shape[1]
    flat = np.ascontiguousarray(got["leaves"].T).ravel()  # tree-major, as FORDE fits
    xs = {j: np.tile(got["Z"][:, j], B) for j in got["cells"]}
    discrete = [s.is_discrete for s in m.encoder_.schema.columns]
    return xs, flat, got["cells"], got["w"], discrete, m.forest_.n_leaves


def ab(a_cls, b_cls, cols, xs, flat, cells, w, repeats: int) -> tuple[float, float, bool]:
    """Median thread CPU ms of fitting ``cols`` with ``a_cls`` and ``b_cls``, alternating,
    and whether every fitted array is identical."""
    ta, tb, same = [], [], True
    for r in range(repeats):
        outs = {}
        for name, cls in ((("a", a_cls), ("b", b_cls)) if r % 2 == 0
                          else (("b", b_cls), ("a", a_cls))):
            t0 = time.thread_time()
            outs[name] = [cls().fit(xs[j], flat, cells[j], w) for j in cols]
            (ta if name == "a" else tb).append(time.thread_time() - t0)
        if r == 0:
            for la, lb in zip(outs["a"], outs["b"]):
                for k, v in vars(la).items():
                    if isinstance(v, np.ndarray):
                        u = getattr(lb, k)
                        same &= v.dtype == u.dtype and v.tobytes() == u.tobytes()
    return 1e3 * float(np.median(ta)), 1e3 * float(np.median(tb)), bool(same)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the checkout compared")
    ap.add_argument("--rows", type=int, default=8000)
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--out", default="leaf_fit_ab")
    args = ap.parse_args()
    from forestgen.leaves.categorical import CategoricalLeaf
    from forestgen.leaves.truncnorm import TruncNormalLeaf

    old_tn = load_before(args.before, "leaves/truncnorm.py", "truncnorm_before")
    old_cat = load_before(args.before, "leaves/categorical.py", "categorical_before")
    xs, flat, cells, w, discrete, L = forde_inputs(args.rows, args.trees, args.min_node_size)
    num = [j for j in sorted(cells) if not discrete[j]]
    disc = [j for j in sorted(cells) if discrete[j]]
    rows = []
    for label, cols, new, old in (("truncnorm", num, TruncNormalLeaf, old_tn.TruncNormalLeaf),
                                  ("categorical", disc, CategoricalLeaf,
                                   old_cat.CategoricalLeaf)):
        for _ in range(2):  # warm-up: both compiled and loaded
            for cls in (new, old):
                cls().fit(xs[cols[0]], flat, cells[cols[0]], w)
        t_new, t_old, same = ab(new, old, cols, xs, flat, cells, w, args.repeats)
        c1, c2, _ = ab(new, new, cols, xs, flat, cells, w, args.repeats)
        rows.append([label, len(cols), t_old, t_new, t_old / t_new, "yes" if same else "NO",
                     f"{c1:.2f} / {c2:.2f}"])
    sections = [
        "## Leaf fits of all columns of a kind, thread CPU ms (medians)",
        md_table(["leaf model", "columns", "before ms", "after ms", "before / after",
                  "identical arrays", "control: after / after ms"], rows, digits=2),
        f"Pairs: {args.rows} real rows x {args.trees} trees (tree-major, as FORDE fits), "
        f"{L} leaves; {args.repeats} repeats per side, alternating which side goes first.",
    ]
    write_result(args.out, "FORDE's leaf fits, this checkout against another (one thread)",
                 sections)


if __name__ == "__main__":
    main()
