"""A forest density as a prior that regularises a network: a VAE decoder penalised by
``-log_prob`` of its outputs, against the same VAE without the prior.

On a numeric table (abalone without ``Sex``), ``n`` training rows fit an ``ARF`` (20 trees)
and train a small VAE (2 x 64 hidden units, latent 4, standardised columns, Adam, 150
epochs). The prior adds ``lam * mean(-log p_forest(decoder(z)))`` for fresh
``z ~ N(0, I)`` at every step (``model.to_torch()``: differentiable in the numeric inputs,
evaluated in the table's units). The prior sees nothing the VAE does not: both use the same
training rows. Rows the trained decoder generates from fresh ``z`` are compared with 2,000
held-out real rows: C2ST AUC (:func:`forestgen.metrics.c2st`, 0.5 = indistinguishable),
squared MMD (:func:`forestgen.metrics.mmd`) and the held-out rows' kNN recall (share of real
rows whose nearest generated row is closer than their 5th-nearest real neighbour: mode
coverage, which a prior that collapses samples onto modes would lower) and the share of
generated rows with a value outside the training range (e.g. a negative weight). Mean +- s.e.
over seeds.

    python benchmarks/bench_density_prior.py --seeds 5   # writes results/density_prior.md
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _aug_tables import TABLES  # noqa: E402
from _common import RESULTS  # noqa: E402

OUT = RESULTS / "density_prior.jsonl"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def table(name: str) -> pd.DataFrame:
    df = TABLES[name]()[0]
    return df.drop(columns=[c for c in df.columns if df[c].dtype.kind not in "if"]).astype(float)


def train_vae(train: pd.DataFrame, lam: float, seed: int, dist=None, epochs: int = 150):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    x = torch.as_tensor(train.to_numpy(), dtype=torch.float32)
    mu, sd = x.mean(0), x.std(0)
    z_all = (x - mu) / sd
    d, k = x.shape[1], 4
    enc = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, 2 * k))
    dec = nn.Sequential(nn.Linear(k, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, d))
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=2e-3)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(z_all), generator=g).split(100):
            xb = z_all[idx]
            m, logv = enc(xb).chunk(2, 1)
            z = m + torch.randn(m.shape, generator=g) * (0.5 * logv).exp()
            rec = ((dec(z) - xb) ** 2).sum(1).mean()
            kl = 0.5 * (m ** 2 + logv.exp() - 1 - logv).sum(1).mean()
            loss = rec + kl
            if lam > 0:
                gen = dec(torch.randn(len(xb), k, generator=g)) * sd + mu
                lp = dist.log_prob(gen.double())
                loss = loss + lam * (-lp.clamp(min=-1e4)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    def sample(n: int, s: int) -> pd.DataFrame:
        gs = torch.Generator().manual_seed(s)
        with torch.no_grad():
            out = dec(torch.randn(n, k, generator=gs)) * sd + mu
        return pd.DataFrame(out.numpy().astype(float), columns=train.columns)

    return sample


def knn_recall(real: np.ndarray, gen: np.ndarray, k: int = 5) -> float:
    from sklearn.neighbors import NearestNeighbors

    radius = NearestNeighbors(n_neighbors=k + 1).fit(real).kneighbors(real)[0][:, k]
    nearest_gen = NearestNeighbors(n_neighbors=1).fit(gen).kneighbors(real)[0][:, 0]
    return float(np.mean(nearest_gen <= radius))


def run(tables: list[str], n: int, seeds: int, lams: list[float]) -> list[dict]:
    import forestgen as fg
    from forestgen.metrics import c2st, mmd

    out = []
    for name in tables:
        df = table(name)
        for seed in range(seeds):
            perm = np.random.default_rng(seed).permutation(len(df))
            train = df.iloc[perm[:n]].reset_index(drop=True)
            test = df.iloc[perm[n:n + 2000]].reset_index(drop=True)
            forest = fg.ARF(n_trees=20, random_state=seed).fit(train)
            dist = forest.to_torch()
            mu, sd = train.mean(), train.std()
            for lam in lams:
                t0 = cpu_seconds()
                sample = train_vae(train, lam, seed, dist)
                gen = sample(2000, seed + 100)
                zt, zg = ((test - mu) / sd).to_numpy(), ((gen - mu) / sd).to_numpy()
                rec = {"table": name, "n": n, "seed": seed, "lam": lam,
                       "c2st_auc": float(c2st(test, gen, random_state=seed).auc),
                       "mmd": float(mmd(test, gen, random_state=seed)),
                       "knn_recall": knn_recall(zt, zg),
                       "out_of_range": float(np.mean(((gen < train.min()) | (gen > train.max()))
                                                     .any(axis=1))),
                       "forest_ll_of_samples": float(np.mean(np.maximum(
                           forest.log_prob(gen), -1e4))),
                       "cpu_s": round(cpu_seconds() - t0, 1)}
                out.append(rec)
                print(rec, flush=True)
    return out


def report(records: list[dict]) -> str:
    df = pd.DataFrame(records)
    cols = ["c2st_auc", "mmd", "knn_recall", "out_of_range", "forest_ll_of_samples"]
    lines = ["# A forest density as a prior for a VAE decoder", "",
             "`python benchmarks/bench_density_prior.py --seeds 5` (protocol in its docstring). "
             "Generated rows against 2,000 held-out real rows; mean +- s.e. over seeds. "
             "C2ST AUC and MMD: lower is better; kNN recall: higher is better (mode coverage); "
             "out of range: share of generated rows with a value outside the training range; "
             "forest log-likelihood of the samples: what the prior optimises (not a quality "
             "measure by itself).", "",
             "| table | n | lam | C2ST AUC | MMD | kNN recall | out of range "
             "| forest LL of samples | CPU s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (t, n, lam), g in df.groupby(["table", "n", "lam"], sort=False):
        cells = []
        for c in cols:
            se = g[c].std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else float("nan")
            cells.append(f"{g[c].mean():.4g} +- {se:.2g}")
        lines.append(f"| {t} | {n} | {lam:g} | " + " | ".join(cells)
                     + f" | {g['cpu_s'].mean():.0f} |")
    # paired differences against lam = 0
    lines += ["", "Paired difference against no prior (same seed, same forest and data), mean "
              "+- s.e.:", "",
              "| table | lam | d C2ST AUC | d MMD | d kNN recall | d out of range |",
              "|---|---:|---:|---:|---:|---:|"]
    base = df[df["lam"] == 0].set_index(["table", "n", "seed"])
    for (t, lam), g in df[df["lam"] > 0].groupby(["table", "lam"], sort=False):
        g = g.set_index(["table", "n", "seed"])
        cells = []
        for c in cols[:4]:
            dlt = (g[c] - base.loc[g.index, c])
            cells.append(f"{dlt.mean():+.4f} +- {dlt.std(ddof=1) / np.sqrt(len(dlt)):.4f}")
        lines.append(f"| {t} | {lam:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="*", default=["abalone"])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--lams", nargs="*", type=float, default=[0.0, 0.1, 1.0])
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    if not a.report:
        recs = run(a.tables, a.n, a.seeds, a.lams)
        OUT.write_text("".join(json.dumps(r) + "\n" for r in recs))
    records = [json.loads(line) for line in OUT.read_text().splitlines()]
    (RESULTS / "density_prior.md").write_text(report(records))
    print((RESULTS / "density_prior.md").read_text())


if __name__ == "__main__":
    main()
