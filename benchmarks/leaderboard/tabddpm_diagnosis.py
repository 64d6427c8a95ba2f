"""Why synthyverse's TabDDPM puts most numeric values on a column's bounds (issue 37).

    ~/.cache/forestgen-peers/synthyverse/bin/python benchmarks/leaderboard/tabddpm_diagnosis.py \\
        TRAIN.csv CATEGORICAL[,CATEGORICAL...] [STEPS ...]

Fits TabDDPM (synthyverse 0.2.7, one CPU thread) on the complete rows of a training CSV at its
defaults and with early stopping off at the given numbers of gradient steps, and prints for
each: the steps it trained, its last Gaussian loss, the share of sampled values on each numeric
column's training bounds (against the training rows' share) and the size of the sampled values
in the model's (quantile-normal) space, where a well-trained model stays within a few units.
"""

from __future__ import annotations

import resource
import sys

import numpy as np
import pandas as pd
import torch
from synthyverse.generators import TabDDPMGenerator


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    torch.set_num_threads(1)
    train = pd.read_csv(sys.argv[1]).dropna().reset_index(drop=True)
    disc = [c for c in sys.argv[2].split(",") if c]
    for c in disc:
        train[c] = train[c].astype(str)
    runs = [{}] + [{"training_steps": int(s), "val_steps": 0} for s in sys.argv[3:]]
    num = [c for c in train.columns if c not in disc]
    for kw in runs:
        c0 = cpu()
        g = TabDDPMGenerator(random_state=0, **kw).fit(train, disc)
        hist = g.loss_history
        print(f"{kw or 'defaults'}: {len(train)} rows, fit {cpu() - c0:.0f} CPU s, "
              f"{int(hist.index.max())} steps logged, Gaussian loss {hist['gloss'].iloc[0]:.3f}"
              f" -> {hist['gloss'].iloc[-1]:.3f}", flush=True)
        s = g.generate(len(train), random_state=0)
        for c in num:
            lo, hi = train[c].min(), train[c].max()
            print(f"  {c}: {np.mean((s[c] <= lo) | (s[c] >= hi)):.2f} of samples on the "
                  f"bounds (training rows {np.mean((train[c] == lo) | (train[c] == hi)):.2f})")
        with torch.no_grad():
            z = g.diffusion.sample(200).numpy()[:, :g.diffusion.num_numerics]
        q = np.quantile(np.abs(z), [0.5, 0.9, 0.99])
        print(f"  model-space |x| quantiles 50/90/99%: {q.round(1).tolist()}", flush=True)


if __name__ == "__main__":
    main()
