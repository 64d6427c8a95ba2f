"""``ForestDataModule``: a Lightning DataModule serving real, synthetic or mixed tabular data.

``setup`` runs on every rank: it splits the real table (fixed seed), fits the forest with a fixed
``random_state`` (so every rank holds the same model) or loads a saved one, calls
``model.warmup()`` so Numba compiles before DataLoader workers fork, and fits a
:class:`~forestgen.torch.encoding.TensorEncoder` on the training split.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from forestgen import registry
from forestgen.base import GenerativeForest
from forestgen.torch.datasets import AugmentedDataset, EpochDataLoader, SyntheticDataset
from forestgen.torch.encoding import TensorEncoder


class ForestDataModule(pl.LightningDataModule):
    """Train / val / test loaders of encoded real, synthetic or mixed rows.

    Parameters
    ----------
    data : training table (DataFrame, or a path to a CSV file).
    target : label column, served as ``y`` (``long`` codes for a discrete target).
    model : ``None`` (fit ``learner``), an unfitted learner instance (fitted in ``setup``), a
        fitted model, or a path written by ``model.save``.
    learner, learner_kwargs : registry name / class and its arguments when ``model`` is None
        (``random_state`` defaults to ``seed`` so every rank fits the same forest).
    test_data : optional held-out table for ``test_dataloader``.
    val_fraction : share of ``data`` held out for validation (fixed split by ``seed``).
    train_mode : ``"real"``, ``"synthetic"`` (a :class:`SyntheticDataset` of
        ``n_synthetic_batches`` per epoch) or ``"mixed"`` (an :class:`AugmentedDataset` with
        ``ratio`` synthetic rows per real one, redrawn every epoch if ``fresh_per_epoch``).
    class_probs : label distribution of synthetic rows (e.g. ``"balanced"``).
    categorical : ``"onehot"`` or ``"codes"`` (see :class:`TensorEncoder`).
    fit_on : ``"train"`` (default: the forest sees only the training split) or ``"all"``.
    """

    def __init__(self, data, target: Any = None, *, model: Any = None, learner: Any = "arf",
                 learner_kwargs: dict | None = None, test_data=None, val_fraction: float = 0.2,
                 train_mode: str = "real", ratio: float = 1.0, n_synthetic_batches: int = 50,
                 fresh_per_epoch: bool = True, class_probs: Any = None,
                 categorical: str = "onehot", batch_size: int = 256, num_workers: int = 0,
                 seed: int = 0, fit_on: str = "train"):
        super().__init__()
        if train_mode not in ("real", "synthetic", "mixed"):
            raise ValueError(f"train_mode must be 'real', 'synthetic' or 'mixed', got "
                             f"{train_mode!r}")
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
        if fit_on not in ("train", "all"):
            raise ValueError(f"fit_on must be 'train' or 'all', got {fit_on!r}")
        self.data = data
        self.target = target
        self.model = model
        self.learner = learner
        self.learner_kwargs = dict(learner_kwargs or {})
        self.test_data = test_data
        self.val_fraction = val_fraction
        self.train_mode = train_mode
        self.ratio = ratio
        self.n_synthetic_batches = n_synthetic_batches
        self.fresh_per_epoch = fresh_per_epoch
        self.class_probs = class_probs
        self.categorical = categorical
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.seed = seed
        self.fit_on = fit_on
        self.model_: GenerativeForest | None = None

    # ------------------------------------------------------------------ setup
    def _frame(self, data) -> pd.DataFrame:
        if isinstance(data, (str, Path)):
            return pd.read_csv(data)
        return data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)

    def _resolve_model(self, train: pd.DataFrame) -> GenerativeForest:
        m = self.model
        if isinstance(m, (str, Path)):
            return GenerativeForest.load(m)
        if isinstance(m, GenerativeForest) and hasattr(m, "forest_"):
            return m
        if m is None:
            cls = registry.get("learner", self.learner) if isinstance(self.learner, str) \
                else self.learner
            kw = {"random_state": self.seed, **self.learner_kwargs}
            m = cls(**kw)
        if self.target is not None and "target" in inspect.signature(m.fit).parameters:
            return m.fit(train, target=self.target)  # supervised learners (GeF)
        return m.fit(train)

    def setup(self, stage: str | None = None) -> None:
        if self.model_ is not None:
            return
        df = self._frame(self.data).reset_index(drop=True)
        if self.target is not None:
            if self.target not in df.columns:
                raise ValueError(f"target column {self.target!r} is not in the data "
                                 f"({list(df.columns)})")
            df = df[df[self.target].notna()].reset_index(drop=True)
        perm = np.random.default_rng(self.seed).permutation(len(df))
        n_val = int(round(self.val_fraction * len(df)))
        self.val_df = df.iloc[perm[:n_val]].reset_index(drop=True)
        self.train_df = df.iloc[perm[n_val:]].reset_index(drop=True)
        self.test_df = None if self.test_data is None else self._frame(self.test_data)
        if self.test_df is not None and self.target is not None:
            self.test_df = self.test_df[self.test_df[self.target].notna()].reset_index(drop=True)
        model = self._resolve_model(self.train_df if self.fit_on == "train" else df)
        model.warmup()
        self.model_ = model
        self.encoder_ = TensorEncoder(categorical=self.categorical, target=self.target,
                                      table_encoder=model.encoder_).fit(self.train_df)

    # ------------------------------------------------------------------ loaders
    def _real(self, df: pd.DataFrame) -> AugmentedDataset:
        return AugmentedDataset(df, self.model_, ratio=0.0, target=self.target,
                                encoding=self.encoder_, output="tensor")

    def _rank(self) -> tuple[int | None, int | None]:
        tr = getattr(self, "trainer", None)
        if tr is None:
            return None, None
        return tr.global_rank, tr.world_size

    def train_dataloader(self) -> DataLoader:
        self._need_setup()
        kw: dict = {"num_workers": self.num_workers,
                    "persistent_workers": False, "pin_memory": torch.cuda.is_available()}
        if self.train_mode == "synthetic":
            rank, world = self._rank()
            ds = SyntheticDataset(self.model_, batch_size=self.batch_size,
                                  n_batches=self.n_synthetic_batches, seed=self.seed,
                                  target=self.target, class_probs=self.class_probs,
                                  output="tensor", encoding=self.encoder_, rank=rank,
                                  world_size=world)
            return EpochDataLoader(ds.batches(), batch_size=None, **kw)
        if self.train_mode == "mixed":
            ds = AugmentedDataset(self.train_df, self.model_, ratio=self.ratio,
                                  fresh_per_epoch=self.fresh_per_epoch, seed=self.seed,
                                  target=self.target, class_probs=self.class_probs,
                                  encoding=self.encoder_, output="tensor")
        else:
            ds = self._real(self.train_df)
        g = torch.Generator().manual_seed(self.seed)
        return EpochDataLoader(ds, batch_size=self.batch_size, shuffle=True, generator=g, **kw)

    def val_dataloader(self) -> DataLoader:
        self._need_setup()
        return DataLoader(self._real(self.val_df), batch_size=self.batch_size,
                          num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        self._need_setup()
        if self.test_df is None:
            raise ValueError("ForestDataModule has no test_data")
        return DataLoader(self._real(self.test_df), batch_size=self.batch_size,
                          num_workers=self.num_workers)

    def _need_setup(self) -> None:
        if self.model_ is None:
            raise RuntimeError("call setup() first (Lightning does this for you)")

    @property
    def n_features(self) -> int:
        """Width of the feature tensors (after :meth:`setup`)."""
        self._need_setup()
        return self.encoder_.n_features_out_

    @property
    def n_classes(self) -> int:
        """Number of target levels (after :meth:`setup`; discrete targets)."""
        self._need_setup()
        return int(self.model_.schema_[self.target].n_levels)
