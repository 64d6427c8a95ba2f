"""ForestDataModule end to end with a Lightning Trainer on the CPU."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch import nn

from forestgen import ARF, load_adult, registry
from forestgen.torch import ForestDataModule


class TinyClassifier(pl.LightningModule):
    def __init__(self, d: int, k: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, k))
        self.seen = 0

    def training_step(self, batch, _):
        x, y = batch
        self.seen += len(y)
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def test_step(self, batch, _):
        x, y = batch
        self.log("test_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def _trainer():
    return pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)


@pytest.mark.parametrize("mode", ["mixed", "synthetic"])
def test_trainer_runs_end_to_end(mode, tmp_path):
    df = load_adult(n=800)
    dm = ForestDataModule(df, target="income", learner_kwargs={"n_trees": 3},
                          test_data=load_adult("test", n=300), train_mode=mode, ratio=1.0,
                          n_synthetic_batches=4, class_probs="balanced", batch_size=128, seed=0)
    dm.setup("fit")
    # three trees, and the back-off tree where marginal_weight="auto" chose one (a 3-tree ARF
    # on 800 rows of adult does)
    assert dm.model_.forest_.n_trees == 3 + (dm.model_.marginal_weight_ > 0)
    assert dm.n_classes == 2
    net = TinyClassifier(dm.n_features, dm.n_classes)
    trainer = _trainer()
    trainer.fit(net, datamodule=dm)
    n_train = len(dm.train_df)
    assert net.seen == (2 * n_train if mode == "mixed" else 4 * 128)
    res = trainer.test(net, datamodule=dm, verbose=False)
    assert 0.0 <= res[0]["test_acc"] <= 1.0


def test_setup_is_deterministic_and_loads_saved(tmp_path):
    df = load_adult(n=500)
    a = ForestDataModule(df, target="income", learner_kwargs={"n_trees": 2}, seed=3)
    b = ForestDataModule(df, target="income", learner_kwargs={"n_trees": 2}, seed=3)
    a.setup("fit")
    b.setup("fit")  # what another rank does: the same split, the same forest
    assert a.train_df.equals(b.train_df)
    Z = a.model_.encoder_.transform(a.val_df)
    assert (a.model_.log_prob_encoded(Z) == b.model_.log_prob_encoded(Z)).all()
    path = a.model_.save(tmp_path / "m.forestgen")
    c = ForestDataModule(df, target="income", model=str(path), seed=3)
    c.setup("fit")
    assert (c.model_.log_prob_encoded(Z) == a.model_.log_prob_encoded(Z)).all()
    d = ForestDataModule(df, target="income", model=ARF(n_trees=2, random_state=3), seed=3)
    d.setup("fit")
    assert (d.model_.log_prob_encoded(Z) == a.model_.log_prob_encoded(Z)).all()
    with pytest.raises(ValueError, match="'nope'"):
        ForestDataModule(df, target="nope").setup("fit")


def test_gef_learner_gets_the_target(natural):
    """ForestDataModule(learner="gef") fits GeF with the module's target as its class."""
    dm = ForestDataModule(natural.dropna(), target="cut", learner="gef",
                          learner_kwargs={"n_trees": 3}, batch_size=64, seed=0)
    dm.setup("fit")
    assert dm.model_.target_ == "cut" and dm.n_classes == 5
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape[1] == dm.n_features and y.dtype == torch.long


_FITS = []


class _CountingARF(ARF):
    """ARF that counts its fits (registered: only a registered learner class can be saved)."""

    def fit(self, *a, **k):
        _FITS.append(1)
        return super().fit(*a, **k)


def test_prepare_data_fits_once_and_setup_memory_maps(tmp_path):
    """prepare_data fits and saves to model_path; a second module (another rank) maps it."""
    fits = _FITS
    fits.clear()
    df = load_adult(n=400)
    path = tmp_path / "shared.fgm"
    # marginal_weight=0: at "auto" ARF's held-out choice fits a copy of its own class once
    # more inside each fit (documented at ARF's marginal_weight), which this counter would
    # count; the module's own fits are what is counted here
    kw = dict(target="income", learner=_CountingARF,
              learner_kwargs={"n_trees": 2, "marginal_weight": 0}, seed=1, model_path=path)
    a = ForestDataModule(df, **kw)
    a.prepare_data()
    assert path.exists() and len(fits) == 1
    a.prepare_data()  # the file is there: no second fit
    b = ForestDataModule(df, **kw)
    b.setup("fit")
    a.setup("fit")
    assert len(fits) == 1
    arr = b.model_.forest_.threshold
    while not isinstance(arr, np.memmap) and isinstance(arr.base, np.ndarray):
        arr = arr.base
    assert isinstance(arr, np.memmap)
    # the same forest as a single process fitting in memory with no model_path
    c = ForestDataModule(df, **{**kw, "model_path": None})
    c.setup("fit")
    assert len(fits) == 2
    Z = c.model_.encoder_.transform(c.val_df)
    assert (b.model_.log_prob_encoded(Z) == c.model_.log_prob_encoded(Z)).all()
    assert b.train_df.equals(c.train_df)


@pytest.fixture(scope="module", autouse=True)
def _test_doubles():
    """This module's test doubles, registered while its tests run (and removed after them:
    later modules see the registry as the package leaves it)."""
    with registry.registered(
            ("learner", "test_datamodule_counting_arf", _CountingARF),
    ):
        yield


def test_a_csv_path_is_read_as_the_cli_reads_it(tmp_path):
    """``data="file.csv"`` read with plain ``pd.read_csv`` made a date column a categorical of
    90 text levels; it is read by ``read_table``, as ``forestgen fit`` reads it."""
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"day": pd.date_range("2024-01-01", periods=90).strftime("%Y-%m-%d"),
                       "x": rng.normal(size=90), "y": rng.choice(["a", "b"], 90)})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    dm = ForestDataModule(str(path), target="y", learner_kwargs={"n_trees": 2}, seed=0)
    dm.setup("fit")
    assert dm.model_.schema_["day"].dtype.startswith("datetime64")



def test_a_fitted_nrgboost_is_used_as_it_is():
    """A fitted NRGBoost (no ``forest_``) passed as ``model=`` was refitted on the training
    split: the module now asks the learner whether it is fitted."""
    from forestgen import NRGBoost

    df = load_adult(n=300)[["age", "sex", "income"]]
    m = NRGBoost(n_trees=3, random_state=0).fit(df)
    energy = m.energy_
    dm = ForestDataModule(df, target="income", model=m, seed=1)
    dm.setup("fit")
    assert dm.model_ is m and m.energy_ is energy  # not refitted in place
