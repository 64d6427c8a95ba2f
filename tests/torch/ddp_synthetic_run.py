"""A real 2-process Lightning DDP run (CPU, gloo) on synthetic batches from a forest.

Run by ``test_ddp.py`` as ``python ddp_synthetic_run.py OUT_DIR``: Lightning's DDP launcher
starts the second rank by re-running this script. Every rank fits the same ARF in
``ForestDataModule.setup`` and trains on its own synthetic stream; each rank writes what it saw
to ``OUT_DIR/rank{r}.npz`` (digests of every batch, of its forest, and its final weights).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

BATCH, N_BATCHES, EPOCHS, SEED = 32, 6, 2, 0


def table():
    rng = np.random.default_rng(0)
    import pandas as pd

    x = rng.normal(size=400)
    return pd.DataFrame({"x": x, "y": 2 * x + 0.1 * rng.normal(size=400),
                         "c": rng.choice(["a", "b"], size=400)})


def datamodule():
    from forestgen.torch import ForestDataModule

    return ForestDataModule(table(), train_mode="synthetic", n_synthetic_batches=N_BATCHES,
                            batch_size=BATCH, seed=SEED, categorical="codes", val_fraction=0.0,
                            learner_kwargs={"n_trees": 5, "max_iters": 1})


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def forest_digest(model) -> str:
    h = hashlib.sha256()
    for v in model.forest_.to_arrays().values():
        h.update(np.ascontiguousarray(v).tobytes())
    h.update(model.leaf_log_weight_.tobytes())
    return h.hexdigest()[:16]


class Probe(pl.LightningModule):
    def __init__(self, width: int):
        super().__init__()
        self.lin = torch.nn.Linear(width, 1)
        self.seen: list[tuple[int, str]] = []

    def training_step(self, batch, batch_idx):
        x = batch
        self.seen.append((self.current_epoch, digest(x)))
        return ((self.lin(x[:, :-1]).squeeze(-1) - x[:, -1]) ** 2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(out: Path) -> None:
    dm = datamodule()
    dm.setup("fit")
    probe = Probe(dm.n_features - 1)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=EPOCHS,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         limit_val_batches=0)
    trainer.fit(probe, datamodule=dm)
    r = trainer.global_rank
    np.savez(out / f"rank{r}.npz", epochs=np.array([e for e, _ in probe.seen]),
             batches=np.array([d for _, d in probe.seen]), world=trainer.world_size,
             forest=forest_digest(dm.model_),
             weights=torch.cat([p.detach().flatten() for p in probe.parameters()]).numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
