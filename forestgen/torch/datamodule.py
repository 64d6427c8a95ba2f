"""``ForestDataModule``: a Lightning DataModule serving real, synthetic or mixed tabular data.

The forest is fitted once per job: under multi-process training Lightning calls
``prepare_data`` on one process per node, which fits the forest on the training split and saves
it (uncompressed); ``setup`` then runs on every rank: it splits the real table (fixed seed),
memory-maps the saved forest (a single process with nothing saved fits in ``setup``), calls
``model.warmup()`` so Numba compiles before DataLoader workers fork, and fits a
:class:`~forestgen.torch.encoding.TensorEncoder` on the training split.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from forestgen import registry
from forestgen.base import GenerativeForest
from forestgen.data.files import read_table
from forestgen.torch.datasets import AugmentedDataset, EpochDataLoader, SyntheticDataset
from forestgen.torch.encoding import TensorEncoder


class ForestDataModule(pl.LightningDataModule):
    """Train / val / test loaders of encoded real, synthetic or mixed rows.

    Parameters
    ----------
    data : training table (DataFrame, or a path to a CSV or Parquet file, read by
        :func:`forestgen.data.files.read_table` as the CLI reads it).
    target : label column, served as ``y`` (``long`` codes for a discrete target).
    model : ``None`` (fit ``learner``), an unfitted learner instance (fitted in ``setup``), a
        fitted model, or a path written by ``model.save``.
    learner, learner_kwargs : registry name / class and its arguments when ``model`` is None
        (``random_state`` defaults to ``seed``: the same forest in every run).
    test_data : optional held-out table for ``test_dataloader``.
    val_fraction : share of ``data`` held out for validation (fixed split by ``seed``).
    train_mode : ``"real"``, ``"synthetic"`` (a :class:`SyntheticDataset` of
        ``n_synthetic_batches`` per epoch) or ``"mixed"`` (an :class:`AugmentedDataset` with
        ``ratio`` synthetic rows per real one, redrawn every epoch if ``fresh_per_epoch``).
    class_probs : label distribution of synthetic rows (e.g. ``"balanced"``).
    categorical : ``"onehot"`` or ``"codes"`` (see :class:`TensorEncoder`).
    fit_on : ``"train"`` (default: the forest sees only the training split) or ``"all"``; for a
        forest this module fits. A fitted model (or a saved one) is used as it is, whatever rows
        it was fitted on: fit it on ``data`` and the validation rows are rows it has seen.
    model_path : where the forest fitted by :meth:`prepare_data` is saved and every rank's
        :meth:`setup` memory-maps it from; a file already there is loaded, not refitted.
        By default, when a trainer runs more than one process, a file named by a digest of the
        table, learner, arguments and forestgen version under the trainer's
        ``default_root_dir`` (so a rerun with the same data and settings reuses it; delete it
        to refit); a single process fits in memory and saves nothing.
    """

    def __init__(self, data, target: Any = None, *, model: Any = None, learner: Any = "arf",
                 learner_kwargs: dict | None = None, test_data=None, val_fraction: float = 0.2,
                 train_mode: str = "real", ratio: float = 1.0, n_synthetic_batches: int = 50,
                 fresh_per_epoch: bool = True, class_probs: Any = None,
                 categorical: str = "onehot", batch_size: int = 256, num_workers: int = 0,
                 seed: int = 0, fit_on: str = "train", model_path: str | Path | None = None):
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
        self.model_path = model_path
        self.model_: GenerativeForest | None = None

    # ------------------------------------------------------------------ setup
    def _frame(self, data) -> pd.DataFrame:
        if isinstance(data, (str, Path)):
            return read_table(data)  # typed as the CLI reads it (dates, booleans, "NA")
        return data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)

    def _needs_fit(self) -> bool:
        m = self.model
        return m is None or (isinstance(m, GenerativeForest) and not m.__sklearn_is_fitted__())

    def _learner(self) -> GenerativeForest:
        if self.model is not None:
            return self.model
        cls = registry.get("learner", self.learner) if isinstance(self.learner, str) \
            else self.learner
        return cls(**{"random_state": self.seed, **self.learner_kwargs})

    def _fit(self, train: pd.DataFrame) -> GenerativeForest:
        m = self._learner()
        if self.target is not None and "target" in inspect.signature(m.fit).parameters:
            return m.fit(train, target=self.target)  # supervised learners (GeF)
        return m.fit(train)

    def _split(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """``(all rows with a target, train split, validation split)``, fixed by ``seed``."""
        df = self._frame(self.data).reset_index(drop=True)
        if self.target is not None:
            if self.target not in df.columns:
                raise ValueError(f"target column {self.target!r} is not in the data "
                                 f"({list(df.columns)})")
            df = df[df[self.target].notna()].reset_index(drop=True)
        perm = np.random.default_rng(self.seed).permutation(len(df))
        n_val = int(round(self.val_fraction * len(df)))
        return (df, df.iloc[perm[n_val:]].reset_index(drop=True),
                df.iloc[perm[:n_val]].reset_index(drop=True))

    def _model_file(self, df: pd.DataFrame | None = None) -> Path | None:
        """Where the fitted forest is shared between processes (see ``model_path``)."""
        if not self._needs_fit():
            return None
        if self.model_path is not None:
            return Path(self.model_path)
        tr = getattr(self, "trainer", None)
        if tr is None or tr.world_size <= 1:
            return None
        from forestgen import __version__

        df = self._split()[0] if df is None else df
        learner = self._learner()
        h = hashlib.sha256(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
        h.update(json.dumps([type(learner).__name__, repr(learner.get_params()), self.target,
                             self.seed, self.val_fraction, self.fit_on, list(map(str, df.columns)),
                             __version__], default=str).encode())
        return Path(tr.default_root_dir) / "forestgen" / f"datamodule-{h.hexdigest()[:16]}.fgm"

    def prepare_data(self) -> None:
        """Fit the forest and save it to the shared model file (Lightning calls this on one
        process per node, before :meth:`setup` on every rank); nothing to do when the file
        exists, the model is given fitted, or a single process fits in :meth:`setup`."""
        df, train, _ = self._split()
        path = self._model_file(df)
        if path is None or path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fit(train if self.fit_on == "train" else df).save(path, compress=False)

    def setup(self, stage: str | None = None) -> None:
        if self.model_ is not None:
            return
        df, self.train_df, self.val_df = self._split()
        self.test_df = None if self.test_data is None else self._frame(self.test_data)
        if self.test_df is not None and self.target is not None:
            self.test_df = self.test_df[self.test_df[self.target].notna()].reset_index(drop=True)
        m, path = self.model, self._model_file(df)
        if isinstance(m, (str, Path)):
            model = GenerativeForest.load(m)
        elif not self._needs_fit():
            model = m
        elif path is not None and path.exists():
            model = GenerativeForest.load(path, mmap=True)  # fitted once by prepare_data
        else:
            model = self._fit(self.train_df if self.fit_on == "train" else df)
            if path is not None:  # setup() called without prepare_data(): share it still
                path.parent.mkdir(parents=True, exist_ok=True)
                model.save(path, compress=False)
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
