"""A real 2-process Lightning DDP run (CPU, gloo) on synthetic batches from a forest.

Run by ``test_ddp.py`` as ``python ddp_synthetic_run.py OUT_DIR``: Lightning's DDP launcher
starts the second rank by re-running this script. ``ForestDataModule.prepare_data`` fits the
ARF once (rank 0) and saves it under the trainer's root directory; every rank memory-maps it in
``setup`` and trains on its own synthetic stream. ``validation_step`` feeds two forestgen
torchmetrics metrics (a sum-reduced :class:`ForestLogLikelihood` of the probe's predictions and
a cat-reduced :class:`MMD`), which Lightning syncs across ranks. Each rank writes what it saw to
``OUT_DIR/rank{r}.npz``: digests of every batch and of its forest, its final weights, how many
forests it fitted, whether its forest arrays are memory-mapped, and the synced metric values.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from forestgen import ARF, registry

BATCH, N_BATCHES, EPOCHS, SEED, N_ROWS, VAL_FRACTION = 32, 6, 2, 0, 400, 0.2
FITS = []  # forests fitted in this process
ENTRY = ("learner", "test_ddp_counting_arf")


class CountingARF(ARF):
    """ARF that records each fit in this process (registered under :data:`ENTRY` while the job
    runs: only a registered learner class can be saved, and the ranks load the shared file as
    a CountingARF; registering at import would leave it in the test session's registry)."""

    def fit(self, *args, **kwargs):
        FITS.append(1)
        return super().fit(*args, **kwargs)


def table():
    rng = np.random.default_rng(0)
    import pandas as pd

    x = rng.normal(size=N_ROWS)
    return pd.DataFrame({"x": x, "y": 2 * x + 0.1 * rng.normal(size=N_ROWS),
                         "c": rng.choice(["a", "b"], size=N_ROWS)})


def datamodule():
    from forestgen.torch import ForestDataModule

    return ForestDataModule(table(), train_mode="synthetic", n_synthetic_batches=N_BATCHES,
                            batch_size=BATCH, seed=SEED, categorical="codes",
                            val_fraction=VAL_FRACTION, learner=CountingARF,
                            # marginal_weight=0: at "auto" each fit fits a held-out copy
                            # of its class too, which FITS would count
                            learner_kwargs={"n_trees": 5, "max_iters": 1,
                                            "marginal_weight": 0})


def metrics(dm):
    """The validation metrics (fresh states)."""
    from forestgen.metrics.torchmetrics import MMD, ForestLogLikelihood

    return ForestLogLikelihood(dm.model_), MMD()


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


def forest_digest(model) -> str:
    h = hashlib.sha256()
    for v in model.forest_.to_arrays().values():
        h.update(np.ascontiguousarray(v).tobytes())
    h.update(np.ascontiguousarray(model.leaf_log_weight_).tobytes())
    return h.hexdigest()[:16]


def memory_mapped(a: np.ndarray) -> bool:
    while a is not None:
        if isinstance(a, np.memmap):
            return True
        a = a.base if isinstance(a.base, np.ndarray) else None
    return False


def update(ll, mmd, lin, x, dm) -> None:
    """Score validation rows whose ``y`` is the probe's prediction: their forest
    log-likelihood, and their MMD to the real rows (both in the forest's encoding)."""
    y = dm.encoder_.feature_names_out_.index("y")
    inputs = x[:, [j for j in range(x.shape[1]) if j != y]]
    xhat = x.clone()
    xhat[:, y] = lin(inputs).squeeze(-1).detach()
    pred, real = dm.encoder_.inverse_transform(xhat), dm.encoder_.inverse_transform(x)
    ll.update(pred)
    enc = dm.model_.encoder_
    mmd.update(real=enc.transform(real), synthetic=enc.transform(pred))


class Probe(pl.LightningModule):
    """Predicts the standardised ``y`` from the other encoded columns; layers are built in
    ``configure_model``, once the data module has been set up."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[int, str]] = []
        self.synced: list[tuple[float, float]] = []

    def configure_model(self):
        if hasattr(self, "lin"):
            return
        dm = self.trainer.datamodule
        self.lin = torch.nn.Linear(dm.n_features - 1, 1)
        self.ll, self.mmd = metrics(dm)

    def split(self, x, dm):
        y = dm.encoder_.feature_names_out_.index("y")
        return x[:, [j for j in range(x.shape[1]) if j != y]], x[:, y], y

    def training_step(self, batch, batch_idx):
        x = batch
        self.seen.append((self.current_epoch, digest(x)))
        inputs, y, _ = self.split(x, self.trainer.datamodule)
        return ((self.lin(inputs).squeeze(-1) - y) ** 2).mean()

    def validation_step(self, batch, batch_idx):
        update(self.ll, self.mmd, self.lin, batch, self.trainer.datamodule)
        self.log("val_ll", self.ll, on_epoch=True)

    def on_validation_epoch_end(self):
        self.synced.append((float(self.ll.compute()), float(self.mmd.compute())))
        self.mmd.reset()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main(out: Path) -> None:
    dm = datamodule()
    probe = Probe()
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=EPOCHS,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         default_root_dir=str(out))
    trainer.fit(probe, datamodule=dm)
    r = trainer.global_rank
    np.savez(out / f"rank{r}.npz", epochs=np.array([e for e, _ in probe.seen]),
             batches=np.array([d for _, d in probe.seen]), world=trainer.world_size,
             forest=forest_digest(dm.model_), fits=len(FITS),
             mmap=memory_mapped(dm.model_.forest_.threshold),
             synced=np.array(probe.synced), n_val=len(dm.val_df),
             weights=torch.cat([p.detach().flatten() for p in probe.lin.parameters()]).numpy())


if __name__ == "__main__":
    with registry.registered((*ENTRY, CountingARF)):
        main(Path(sys.argv[1]))
