"""Does training on real + synthetic rows help a network? An honest augmentation benchmark.

For each public table (``_aug_tables.TABLES``), training size ``n`` and seed, ``n`` real rows are
drawn for training and up to 2,000 of the rest held out for testing. Each training set below
trains a Lightning MLP and a gradient-boosted baseline (scikit-learn's
``HistGradientBoosting*``); both stop early on the same 20% of the *real* training rows, which
no generator sees. Test AUC and accuracy (classification) or R^2 (regression).

Training sets (``ratio`` = synthetic rows per real row):

* ``real``: the real rows only;
* ``arf@1``, ``arf@3``, ``gfboost@1``, ``nrgboost@1``: real + rows drawn from a forestgen model
  fitted on the training rows (not the early-stopping ones), labels included (the joint), at
  ratio 1 (and 3 for ARF, the recommended default);
* ``autoforest@1``: the same from ``AutoForest`` choosing among those three generators (at the
  same cheap settings) by its held-out C2ST; the chosen learner is recorded as ``gen_choice``;
* ``gaussiancopula@1``: real + SDV's ``GaussianCopulaSynthesizer`` rows (run in its own venv,
  ``~/.cache/forestgen-peers/sdv``, as a subprocess);
* ``noise@1``: real + a copy with numeric columns jittered by 10% of their SD;
* ``mixup@1``: real + convex mixes of two rows of the same class (numeric columns
  ``lam a + (1-lam) b``, ``lam ~ Beta(0.4, 0.4)``; categorical columns from the nearer parent;
  regression mixes the target too);
* classification only, to a balanced training set: ``smote`` (imbalanced-learn's SMOTE, SMOTENC
  with categorical columns), ``oversample`` (random duplicates), ``arf-balance`` (ARF rows
  drawn conditionally on the minority class; ``gfboost-balance`` and ``nrgboost-balance`` the
  same from GF.Boost and NRGBoost, in the class-imbalance case).

``--imbalance 0.1`` additionally runs binary tables with the minority class subsampled to 10% of
the training rows (the class-imbalance case; its test rows keep the table's class shares, as
many as the rows left over allow, at most 2,000). Its cells (table ``<name>-imb0.1``) run
real-only, ``arf@1``, ``noise@1``, ``mixup@1`` and the five balancing sets. Classification
rows also record balanced accuracy (``bacc``). Fitted synthetic tables are cached under
``~/.cache/forestgen-bench/augmentation``; results are appended to
``benchmarks/results/augmentation.jsonl`` or ``--out PATH`` (cells already there are skipped, so
the run can be sharded with ``--tables`` and resumed), then summarised by ``--report`` into
``benchmarks/results/augmentation.md`` and ``docs/augmentation_figures/``.

    python benchmarks/bench_augmentation.py --tables adult --sizes 100 300 1000 --seeds 5  # a shard
    python benchmarks/bench_augmentation.py --methods autoforest@1  # one method, every cell
    python benchmarks/bench_augmentation.py --tables adult males --sizes 1000 --imbalance 0.1 \
        --imbalance-only
    python benchmarks/bench_augmentation.py --report
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _aug_tables import TABLES  # noqa: E402
from _common import REPO, RESULTS  # noqa: E402

CACHE = Path.home() / ".cache" / "forestgen-bench" / "augmentation"
SDV_PYTHON = Path.home() / ".cache" / "forestgen-peers" / "sdv" / "bin" / "python"
OUT = RESULTS / "augmentation.jsonl"
FIGURES = REPO / "docs" / "augmentation_figures"
MAX_TEST = 2000
RATIOS = (1, 3)
# cheap generator settings (stated in the results)
GENERATORS = {
    "arf": dict(n_trees=20),
    "gfboost": dict(n_trees=20, n_iter=100),
    "nrgboost": dict(n_trees=30, pool_size=10_000, n_normaliser_samples=10_000),
}
FOREST_METHODS = ("arf", "gfboost", "nrgboost", "autoforest")
# batch size: about 16 steps per epoch, between 32 and 512 rows
MLP = dict(hidden=64, lr=3e-3, weight_decay=1e-4, steps_per_epoch=16, max_epochs=30, patience=4)
# the tables run by default (all methods, sizes 100/300/1000, 5 seeds: about one CPU hour on
# one core of this machine, some 60% of it the autoforest@1 arm)
DEFAULT_TABLES = ["adult", "breast_cancer", "males", "benefits", "fair", "diabetes", "abalone",
                  "california"]


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------- splits
def split(df: pd.DataFrame, target: str, task: str, n: int, seed: int,
          imbalance: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``n`` training rows and up to ``MAX_TEST`` test rows; ``imbalance``: the minority
    class is subsampled to that share of the training rows (binary tables)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(df))
    if imbalance is None:
        if len(df) < n + 140:
            return None
        return (df.iloc[perm[:n]].reset_index(drop=True),
                df.iloc[perm[n:n + MAX_TEST]].reset_index(drop=True))
    y = df[target].to_numpy()
    minority = pd.Series(y).value_counts().index[-1]
    n_min = max(int(round(imbalance * n)), 5)
    idx_min = perm[y[perm] == minority]
    idx_maj = perm[y[perm] != minority]
    if len(idx_min) < n_min + 40 or len(idx_maj) < n - n_min + 60:
        return None
    train = np.r_[idx_min[:n_min], idx_maj[:n - n_min]]
    # the test rows keep the table's class shares: as many as the rows left over allow
    share = len(idx_min) / len(y)
    rest_min, rest_maj = idx_min[n_min:], idx_maj[n - n_min:]
    n_test = int(min(MAX_TEST, len(rest_min) / share, len(rest_maj) / (1 - share)))
    k_min = int(round(share * n_test))
    rest = rng.permutation(np.r_[rest_min[:k_min], rest_maj[:n_test - k_min]])
    return df.iloc[rng.permutation(train)].reset_index(drop=True), \
        df.iloc[rest].reset_index(drop=True)


# ---------------------------------------------------------------------------- generators
def _cache(key: str) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE / f"{key}.pkl"


def forest_rows(name: str, train: pd.DataFrame, n_rows: int, seed: int, key: str,
                conditions: dict | None = None) -> pd.DataFrame:
    """``n_rows`` rows of a forestgen learner fitted on ``train`` (cached by ``key``)."""
    path = _cache(key)
    if path.exists():
        return pd.read_pickle(path)
    import forestgen as fg

    classes = {"arf": fg.ARF, "gfboost": fg.GFBoost, "nrgboost": fg.NRGBoost}
    t0 = cpu_seconds()
    if name == "autoforest":  # chooses among the generators above, at their settings here
        model = fg.AutoForest(candidates=[(k, c(**GENERATORS[k])) for k, c in classes.items()],
                              random_state=seed).fit(train)
    else:
        model = classes[name](random_state=seed, **GENERATORS[name]).fit(train)
    rows = model.sample(n_rows, random_state=seed + 1, conditions=conditions)
    rows = rows[list(train.columns)]
    rows.attrs["fit_sample_cpu_s"] = cpu_seconds() - t0
    if name == "autoforest":
        rows.attrs["chosen"] = model.best_name_
    rows.to_pickle(path)
    return rows


SDV_SCRIPT = """
import sys, json, pandas as pd
from sdv.metadata import Metadata
from sdv.single_table import GaussianCopulaSynthesizer
for job in json.load(open(sys.argv[1])):
    df = pd.read_csv(job["train"], dtype={c: str for c in job["strings"]})
    md = Metadata.detect_from_dataframes({"table": df})
    s = GaussianCopulaSynthesizer(md)
    s.fit({"table": df})
    out = s.sample(job["n"])
    (out["table"] if isinstance(out, dict) else out).to_csv(job["csv"], index=False)
"""


def sdv_rows(jobs: list[dict]) -> None:
    """Fit SDV GaussianCopula per job in SDV's own venv (one subprocess for all jobs)."""
    todo = [j for j in jobs if not Path(j["out"]).exists()]
    if not todo:
        return
    if not SDV_PYTHON.exists():
        print(f"SDV venv not found ({SDV_PYTHON}); skipping gaussiancopula", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory() as d:
        for i, j in enumerate(todo):  # CSV across the two venvs' pandas versions
            frame = j["frame"]
            j["train"], j["csv"] = f"{d}/train{i}.csv", f"{d}/synth{i}.csv"
            j["strings"] = [c for c in frame.columns if frame[c].dtype.kind not in "if"]
            frame.to_csv(j["train"], index=False)
        spec = Path(d) / "jobs.json"
        spec.write_text(json.dumps([{k: j[k] for k in ("train", "csv", "n", "strings")}
                                    for j in todo]))
        script = Path(d) / "gc.py"
        script.write_text(SDV_SCRIPT)
        subprocess.run([str(SDV_PYTHON), str(script), str(spec)], check=True,
                       env={**os.environ, "PYTHONPATH": ""})
        for j in todo:
            frame = j["frame"]
            rows = pd.read_csv(j["csv"], dtype={c: str for c in j["strings"]})
            for c in j["strings"]:
                rows[c] = rows[c].where(rows[c].notna(), None).astype(frame[c].dtype)
            rows[list(frame.columns)].to_pickle(j["out"])


def noise_rows(train: pd.DataFrame, target: str, task: str, rng) -> pd.DataFrame:
    out = train.copy()
    for c in train.columns:
        if train[c].dtype.kind in "if" and not (c == target and task != "regression"):
            sd = float(np.nanstd(train[c].to_numpy(float)))
            out[c] = train[c].to_numpy(float) + rng.normal(scale=0.1 * sd, size=len(train))
    return out


def mixup_rows(train: pd.DataFrame, target: str, task: str, rng) -> pd.DataFrame:
    n = len(train)
    a = np.arange(n)
    if task == "regression":
        b = rng.integers(0, n, size=n)
    else:  # a partner of the same class
        y = train[target].to_numpy()
        b = a.copy()
        for level in np.unique(y.astype(str)):
            idx = np.flatnonzero(y.astype(str) == level)
            b[idx] = rng.choice(idx, size=len(idx))
    lam = rng.beta(0.4, 0.4, size=n)
    A, B = train.iloc[a].reset_index(drop=True), train.iloc[b].reset_index(drop=True)
    out = A.copy()
    for c in train.columns:
        if train[c].dtype.kind in "if" and not (c == target and task != "regression"):
            out[c] = lam * A[c].to_numpy(float) + (1 - lam) * B[c].to_numpy(float)
        else:
            out[c] = np.where(lam >= 0.5, A[c].to_numpy(object), B[c].to_numpy(object))
    return out


def balance_rows(method: str, train: pd.DataFrame, target: str, seed: int,
                 key: str) -> pd.DataFrame | None:
    """Rows to add so every class has as many rows as the majority."""
    counts = train[target].value_counts()
    need = {lvl: int(counts.iloc[0] - c) for lvl, c in counts.items() if c < counts.iloc[0]}
    if not need or sum(need.values()) == 0:
        return train.iloc[:0]
    rng = np.random.default_rng(seed)
    if method == "oversample":
        parts = [train[train[target] == lvl].sample(k, replace=True, random_state=seed)
                 for lvl, k in need.items()]
        return pd.concat(parts, ignore_index=True)
    gen = method.removesuffix("-balance")
    if gen in FOREST_METHODS:  # rows drawn given the class, from a model of all the rows
        parts = [forest_rows(gen, train, k, seed, f"{key}-{gen}-cond-{lvl}",
                             conditions={target: lvl}) for lvl, k in need.items()]
        out = pd.concat(parts, ignore_index=True)
        out.attrs["fit_sample_cpu_s"] = sum(p.attrs.get("fit_sample_cpu_s", 0.0) for p in parts)
        return out
    # SMOTE / SMOTENC on the rows, with missing values filled (the library needs no NaN)
    from imblearn.over_sampling import SMOTE, SMOTENC

    X = train.drop(columns=[target])
    cats = [c for c in X.columns if X[c].dtype.kind not in "if"]
    X = X.copy()
    for c in X.columns:
        X[c] = X[c].fillna("NA") if c in cats else X[c].fillna(X[c].median())
    k = max(1, min(5, int(counts.min()) - 1))
    sm = (SMOTENC(categorical_features=[X.columns.get_loc(c) for c in cats], k_neighbors=k,
                  random_state=seed) if cats else SMOTE(k_neighbors=k, random_state=seed))
    Xr, yr = sm.fit_resample(X, train[target].astype(str))
    new = Xr.iloc[len(X):].copy()
    new[target] = yr.iloc[len(X):].to_numpy()
    del rng
    return new[list(train.columns)].reset_index(drop=True)


# ---------------------------------------------------------------------------- learners
class Features:
    """One-hot categoricals, standardised numerics (fitted on the real training rows)."""

    def __init__(self, train: pd.DataFrame, target: str, task: str):
        self.target, self.task = target, task
        X = train.drop(columns=[target])
        self.num = [c for c in X.columns if X[c].dtype.kind in "if"]
        self.cat = [c for c in X.columns if c not in self.num]
        self.levels = {c: sorted(X[c].dropna().astype(str).unique()) for c in self.cat}
        self.mu = X[self.num].astype(float).mean()
        self.sd = X[self.num].astype(float).std().replace(0, 1).fillna(1)
        if task != "regression":
            self.classes = sorted(train[target].astype(str).unique())
        else:
            self.y_mu, self.y_sd = float(train[target].mean()), float(train[target].std() or 1)

    def x(self, df: pd.DataFrame) -> np.ndarray:
        parts = [((df[self.num].astype(float) - self.mu) / self.sd).fillna(0.0).to_numpy()]
        for c in self.cat:
            v = df[c].astype(str).to_numpy()
            parts.append(np.stack([v == lvl for lvl in self.levels[c]], 1).astype(float))
        return np.concatenate(parts, 1).astype(np.float32)

    def y(self, df: pd.DataFrame) -> np.ndarray:
        if self.task == "regression":
            return ((df[self.target].astype(float) - self.y_mu) / self.y_sd).to_numpy(np.float32)
        lut = {c: i for i, c in enumerate(self.classes)}
        return np.array([lut.get(str(v), -1) for v in df[self.target]], np.int64)


def fit_mlp(X, y, Xv, yv, n_out: int, seed: int):
    """A Lightning MLP (2 x 64, AdamW), early stopping on the real validation rows."""
    import lightning.pytorch as pl
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            h = MLP["hidden"]
            self.net = nn.Sequential(nn.Linear(X.shape[1], h), nn.ReLU(), nn.Dropout(0.1),
                                     nn.Linear(h, h), nn.ReLU(), nn.Linear(h, n_out))

        def loss(self, batch):
            xb, yb = batch
            out = self.net(xb)
            if n_out == 1:
                return nn.functional.mse_loss(out.squeeze(-1), yb)
            return nn.functional.cross_entropy(out, yb)

        def training_step(self, batch, _):
            return self.loss(batch)

        def validation_step(self, batch, _):
            self.log("val_loss", self.loss(batch))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=MLP["lr"],
                                     weight_decay=MLP["weight_decay"])

    pl.seed_everything(seed, verbose=False)
    net = Net()
    g = torch.Generator().manual_seed(seed)
    train = DataLoader(TensorDataset(torch.as_tensor(X), torch.as_tensor(y)),
                       batch_size=int(np.clip(len(X) // MLP["steps_per_epoch"], 32, 512)),
                       shuffle=True, generator=g)
    val = DataLoader(TensorDataset(torch.as_tensor(Xv), torch.as_tensor(yv)), batch_size=4096)
    stop = pl.callbacks.EarlyStopping("val_loss", patience=MLP["patience"])
    best = pl.callbacks.ModelCheckpoint(monitor="val_loss", dirpath=tempfile.mkdtemp(),
                                        save_top_k=1, save_weights_only=True)
    trainer = pl.Trainer(max_epochs=MLP["max_epochs"], accelerator="cpu", logger=False,
                         callbacks=[stop, best], enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(net, train, val)
    state = torch.load(best.best_model_path, weights_only=True)["state_dict"]
    net.load_state_dict(state)
    Path(best.best_model_path).unlink()
    net.eval()

    def predict(Xt):
        with torch.no_grad():
            out = net.net(torch.as_tensor(Xt))
        return out.squeeze(-1).numpy() if n_out == 1 else torch.softmax(out, 1).numpy()

    return predict


def fit_gbm(X, y, Xv, yv, n_out: int, seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingRegressor if n_out == 1 else HistGradientBoostingClassifier
    m = cls(max_iter=300, learning_rate=0.05, early_stopping=True, n_iter_no_change=15,
            random_state=seed)
    m.fit(X, y, X_val=Xv, y_val=yv)
    return m.predict if n_out == 1 else m.predict_proba


def scores(task: str, y, pred, n_classes: int) -> dict:
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, r2_score, roc_auc_score

    if task == "regression":
        return {"r2": float(r2_score(y, pred))}
    ok = y >= 0
    y, pred = y[ok], pred[ok]
    if n_classes == 2:
        auc = roc_auc_score(y, pred[:, 1]) if len(np.unique(y)) == 2 else float("nan")
    else:
        auc = roc_auc_score(y, pred, multi_class="ovr", labels=list(range(n_classes)))
    return {"auc": float(auc), "acc": float(accuracy_score(y, pred.argmax(1))),
            "bacc": float(balanced_accuracy_score(y, pred.argmax(1)))}


# ---------------------------------------------------------------------------- one cell
def methods(task: str, imbalanced: bool = False) -> list[str]:
    """The training sets of a cell; an imbalanced cell runs the balancing sets (every forest
    generator drawing given the minority class) against real-only, ARF, noise and mixup."""
    if imbalanced:
        return ["real", "arf@1", "noise@1", "mixup@1", "smote", "oversample",
                "arf-balance", "gfboost-balance", "nrgboost-balance"]
    m = ["real"] + [f"arf@{r}" for r in RATIOS] + ["gfboost@1", "nrgboost@1", "autoforest@1"]
    m += ["gaussiancopula@1", "noise@1", "mixup@1"]
    if task != "regression":
        m += ["smote", "oversample", "arf-balance"]
    return m


def extra_rows(method: str, train, target, task, seed, key) -> pd.DataFrame | None:
    n = len(train)
    rng = np.random.default_rng(seed + 17)
    if method == "real":
        return train.iloc[:0]
    gen, _, ratio = method.partition("@")
    if gen in FOREST_METHODS:
        rows = forest_rows(gen, train, max(RATIOS) * n, seed, f"{key}-{gen}")
        out = rows.iloc[: int(ratio) * n].copy()
        out.attrs = dict(rows.attrs)
        return out
    if gen == "gaussiancopula":
        path = _cache(f"{key}-gaussiancopula")
        return pd.read_pickle(path).iloc[: int(ratio) * n] if path.exists() else None
    if gen == "noise":
        return noise_rows(train, target, task, rng)
    if gen == "mixup":
        return mixup_rows(train, target, task, rng)
    return balance_rows(method, train, target, seed, key)


def run_cell(table: str, n: int, seed: int, imbalance: float | None, done: set,
             only: list[str] | None = None):
    """Yield one result record per (training set, learner) of a cell not already ``done``
    (``only``: just these methods, ``real`` always being one)."""
    df, target, task = TABLES[table]()
    parts = split(df, target, task, n, seed, imbalance)
    if parts is None:
        return
    train, test = parts
    if task != "regression" and train[target].nunique() < 2:
        return
    name = table if imbalance is None else f"{table}-imb{imbalance:g}"
    key = f"{name}-{n}-{seed}"
    # early-stopping rows: 20% of the real training rows, never seen by a generator
    n_val = max(int(0.2 * n), 10)
    val, fit_rows = train.iloc[:n_val], train.iloc[n_val:].reset_index(drop=True)
    feats = Features(fit_rows, target, task)
    n_out = 1 if task == "regression" else len(feats.classes)
    Xv, yv, Xt, yt = feats.x(val), feats.y(val), feats.x(test), feats.y(test)
    if task != "regression":  # early-stopping rows of a class unseen in training: dropped
        Xv, yv = Xv[yv >= 0], yv[yv >= 0]
    for method in methods(task, imbalanced=imbalance is not None):
        if only is not None and method not in only:
            continue
        if all((name, n, seed, method, lr) in done for lr in ("mlp", "gbm")):
            continue
        extra = extra_rows(method, fit_rows, target, task, seed, key)
        if extra is None:
            continue
        gen = {k: extra.attrs[a] for k, a in (("gen_cpu_s", "fit_sample_cpu_s"),
                                              ("gen_choice", "chosen")) if a in extra.attrs}
        if "gen_cpu_s" in gen:
            gen["gen_cpu_s"] = round(gen["gen_cpu_s"], 2)
        full = pd.concat([fit_rows, extra], ignore_index=True)
        X, y = feats.x(full), feats.y(full)
        keep = y >= 0 if task != "regression" else np.isfinite(y)
        X, y = X[keep], y[keep]
        for learner, fit in (("mlp", fit_mlp), ("gbm", fit_gbm)):
            if (name, n, seed, method, learner) in done:
                continue
            t0 = cpu_seconds()
            pred = fit(X, y, Xv, yv, n_out, seed)(Xt)
            yield {"table": name, "n": n, "seed": seed, "method": method, "learner": learner,
                   "task": task, "n_train": int(len(X)), "cpu_s": round(cpu_seconds() - t0, 2),
                   **gen, **scores(task, yt, pred, n_out)}


def sdv_phase(cells: list[tuple]) -> None:
    jobs = []
    for table, n, seed, imbalance in cells:
        if imbalance is not None:  # the imbalanced cells run no Gaussian copula
            continue
        df, target, task = TABLES[table]()
        parts = split(df, target, task, n, seed, imbalance)
        if parts is None:
            continue
        name = table if imbalance is None else f"{table}-imb{imbalance:g}"
        fit_rows = parts[0].iloc[max(int(0.2 * n), 10):].reset_index(drop=True)
        jobs.append({"frame": fit_rows, "out": str(_cache(f"{name}-{n}-{seed}-gaussiancopula")),
                     "n": len(fit_rows), "seed": seed})
    sdv_rows(jobs)


def done_keys(out: Path) -> set:
    if not out.exists():
        return set()
    return {(r["table"], r["n"], r["seed"], r["method"], r["learner"])
            for r in map(json.loads, out.read_text().splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="*", default=DEFAULT_TABLES, choices=list(TABLES))
    ap.add_argument("--sizes", nargs="*", type=int, default=[100, 300, 1000])
    ap.add_argument("--methods", nargs="*", default=None,
                    help="run only these training sets (default: all of them)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--imbalance", type=float, default=None,
                    help="also run binary tables with the minority at this training share")
    ap.add_argument("--imbalance-only", action="store_true")
    ap.add_argument("--report", action="store_true", help="summarise the jsonl and plot")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"results file to append to / report from (default {OUT.name})")
    a = ap.parse_args()
    if a.report:
        from _aug_report import report

        return report(a.out)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    cells = []  # seed-major: a run stopped early still covers every table
    tasks = {t: TABLES[t]()[2] for t in a.tables}
    for seed in range(a.seeds):
        for table in a.tables:
            for n in a.sizes:
                if not a.imbalance_only:
                    cells.append((table, n, seed, None))
                if a.imbalance and tasks[table] == "binary":
                    cells.append((table, n, seed, a.imbalance))
    if a.methods is None or "gaussiancopula@1" in a.methods:
        sdv_phase(cells)
    only = None if a.methods is None else ["real", *a.methods]
    done = done_keys(a.out)
    t_all = cpu_seconds()
    for cell in cells:
        t0, w0, k = cpu_seconds(), time.time(), 0
        for rec in run_cell(*cell, done, only):  # written as they come: a stopped run resumes
            with a.out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            k += 1
        print(f"{cell}: {k} results, {cpu_seconds() - t0:.0f} CPU s, "
              f"{time.time() - w0:.0f} s", flush=True)
    print(f"total {cpu_seconds() - t_all:.0f} CPU s")


if __name__ == "__main__":
    main()
