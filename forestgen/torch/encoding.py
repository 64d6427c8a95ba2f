"""Model-ready tensors from tables: one-hot (or embedding codes) and standardised numerics.

:class:`TensorEncoder` sits on top of a :class:`~forestgen.data.encoder.TableEncoder` (usually
the forest's own ``model.encoder_``), so synthetic rows drawn in the forest's encoded space are
turned into network inputs without a DataFrame round trip (:meth:`TensorEncoder.transform_encoded`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from forestgen.data.encoder import TableEncoder


class TensorEncoder:
    """Table -> float tensor for a neural network, and back.

    Parameters
    ----------
    categorical : ``"onehot"`` (one column per level; a missing or unseen level is all zeros) or
        ``"codes"`` (one column of integer codes per discrete column, for embedding layers; a
        missing / unseen level gets the extra code ``k``, see :attr:`cardinalities_`).
    standardize : centre and scale numeric columns by the fitted mean / SD (missing -> 0, the
        mean).
    target : a column kept out of the features; :meth:`transform_target` encodes it (level codes
        as ``long`` for a discrete target, floats for a numeric one).
    table_encoder : a fitted :class:`TableEncoder` to build on (e.g. ``model.encoder_``); by
        default one is fitted in :meth:`fit`.
    dtype : float dtype of the features.
    """

    def __init__(self, *, categorical: str = "onehot", standardize: bool = True,
                 target: Any = None, table_encoder: TableEncoder | None = None,
                 dtype: torch.dtype = torch.float32):
        self.categorical = categorical
        self.standardize = standardize
        self.target = target
        self.table_encoder = table_encoder
        self.dtype = dtype

    # ------------------------------------------------------------------ fit
    @classmethod
    def from_model(cls, model, df=None, **kwargs) -> TensorEncoder:
        """Encoder on a fitted forest's table encoder; numeric scaling from ``df`` (or from a
        sample of the model when ``df`` is None)."""
        enc = cls(table_encoder=model.encoder_, **kwargs)
        if df is None:
            return enc.fit_encoded(model.sample_encoded(4096, random_state=0))
        return enc.fit(df)

    def fit(self, df) -> TensorEncoder:
        """Fit on a DataFrame (or array) of training rows."""
        te = self.table_encoder if self.table_encoder is not None else TableEncoder().fit(df)
        self.table_encoder_ = te
        return self.fit_encoded(te.transform(df))

    def fit_encoded(self, Z: np.ndarray) -> TensorEncoder:
        """Fit from rows already encoded by ``table_encoder``."""
        if self.categorical not in ("onehot", "codes"):
            raise ValueError(f"categorical must be 'onehot' or 'codes', got {self.categorical!r}")
        if not hasattr(self, "table_encoder_"):
            if self.table_encoder is None:
                raise ValueError("fit_encoded needs table_encoder=...; use fit(df) instead")
            self.table_encoder_ = self.table_encoder
        schema = self.table_encoder_.schema
        self.target_index_ = None if self.target is None else schema.index(self.target)
        cols = [j for j in range(schema.d) if j != self.target_index_]
        disc = schema.discrete_mask
        self.num_cols_ = np.array([j for j in cols if not disc[j]], np.int64)
        self.cat_cols_ = np.array([j for j in cols if disc[j]], np.int64)
        self.levels_ = schema.n_levels[self.cat_cols_]
        Z = np.asarray(Z, np.float64)
        if self.standardize and self.num_cols_.size:
            with np.errstate(invalid="ignore"):
                mu = np.nanmean(Z[:, self.num_cols_], axis=0) if len(Z) else np.zeros(0)
                sd = np.nanstd(Z[:, self.num_cols_], axis=0) if len(Z) else np.zeros(0)
            mu = np.where(np.isfinite(mu), mu, 0.0)
            sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
        else:
            mu, sd = np.zeros(self.num_cols_.size), np.ones(self.num_cols_.size)
        self.mean_, self.scale_ = mu, sd
        names = schema.names
        out = [names[j] for j in self.num_cols_]
        if self.categorical == "onehot":
            for j, k in zip(self.cat_cols_, self.levels_):
                cats = schema.columns[j].categories
                out += [f"{names[j]}={c}" for c in cats[:k]]
        else:
            out += [names[j] for j in self.cat_cols_]
        self.feature_names_out_ = out
        return self

    @property
    def n_features_out_(self) -> int:
        return len(self.feature_names_out_)

    @property
    def cat_positions_(self) -> np.ndarray:
        """Positions of the code columns in the output (``categorical="codes"``)."""
        return np.arange(self.num_cols_.size, self.num_cols_.size + self.cat_cols_.size)

    @property
    def cardinalities_(self) -> list[int]:
        """Embedding sizes of the code columns (``k + 1``: the last code means missing)."""
        return [int(k) + 1 for k in self.levels_]

    def _check(self):
        if not hasattr(self, "mean_"):
            raise RuntimeError("TensorEncoder is not fitted; call fit() first")

    # ------------------------------------------------------------------ transform
    def transform(self, df) -> torch.Tensor:
        """DataFrame -> features ``[n, n_features_out_]``."""
        self._check()
        return self.transform_encoded(self.table_encoder_.transform(df))

    def transform_encoded(self, Z) -> torch.Tensor:
        """Rows encoded by ``table_encoder_`` (numpy array, or a tensor on any device) ->
        features, with torch ops on the input's device (numpy input: the CPU)."""
        self._check()
        Z = torch.as_tensor(Z).to(torch.float64)
        dev = Z.device

        def T(a, dt=torch.float64):
            return torch.as_tensor(np.asarray(a), dtype=dt, device=dev)

        num = (Z[:, T(self.num_cols_, torch.long)] - T(self.mean_)) / T(self.scale_)
        num = torch.where(torch.isnan(num), torch.zeros_like(num), num)
        codes = Z[:, T(self.cat_cols_, torch.long)]
        k = T(self.levels_)
        bad = torch.isnan(codes) | (codes < 0) | (codes >= k) | (codes != torch.round(codes))
        ci = torch.where(bad, k, codes)
        if self.categorical == "codes":
            out = torch.cat([num, ci], dim=1)
        else:
            offs = np.r_[0, np.cumsum(self.levels_)].astype(np.int64)
            oh = torch.zeros(len(Z), int(offs[-1]) + 1, dtype=torch.float64, device=dev)
            # invalid codes land in a spare last slot, dropped below
            pos = torch.where(bad, int(offs[-1]), T(offs[:-1], torch.long) + ci.long())
            oh.scatter_(1, pos, 1.0)
            out = torch.cat([num, oh[:, :-1]], dim=1)
        return out.to(self.dtype)

    def split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``categorical="codes"`` output -> (numeric floats, long codes for embeddings)."""
        p = self.num_cols_.size
        return x[..., :p], x[..., p:].long()

    def transform_target(self, df) -> torch.Tensor:
        """Target column of a DataFrame (long codes if discrete, else float)."""
        self._check()
        return self.target_encoded(self.table_encoder_.transform(df))

    def target_encoded(self, Z) -> torch.Tensor:
        """The target column of encoded rows (numpy or a tensor; the result stays on its
        device): long level codes for a discrete target, floats otherwise."""
        self._check()
        if self.target_index_ is None:
            raise ValueError("this TensorEncoder has no target column")
        return encoded_target(torch.as_tensor(Z)[:, self.target_index_],
                              self.table_encoder_.schema.columns[self.target_index_], self.dtype)

    # ------------------------------------------------------------------ inverse
    def inverse_transform(self, x: torch.Tensor, y: torch.Tensor | None = None):
        """Features (and optional target) -> DataFrame with the table's columns and dtypes; the
        target column is missing (NaN) when ``y`` is not given."""
        self._check()
        x = np.asarray(torch.as_tensor(x).detach().cpu().to(torch.float64).numpy())
        schema = self.table_encoder_.schema
        Z = np.full((len(x), schema.d), np.nan)
        p = self.num_cols_.size
        Z[:, self.num_cols_] = x[:, :p] * self.scale_ + self.mean_
        if self.categorical == "codes":
            c = np.rint(x[:, p:])
            Z[:, self.cat_cols_] = np.where((c >= 0) & (c < self.levels_), c, np.nan)
        else:
            o = p
            for j, k in zip(self.cat_cols_, self.levels_):
                blk = x[:, o : o + k]
                Z[:, j] = np.where(blk.max(1) > 0, blk.argmax(1), np.nan) if k else np.nan
                o += k
        if self.target_index_ is not None and y is not None:
            Z[:, self.target_index_] = torch.as_tensor(y).detach().cpu().double().numpy()
        return self.table_encoder_.inverse_transform(Z)


def encoded_target(y: torch.Tensor, spec, dtype: torch.dtype) -> torch.Tensor:
    """An encoded column ``y`` (described by ``spec``) as a target, on its device: long codes
    if discrete (missing or unseen labels raise, naming the column), else ``dtype`` floats."""
    if not spec.is_discrete:
        return y.to(dtype)
    y = y.to(torch.float64)
    bad = torch.isnan(y) | (y < 0) | (y >= spec.n_levels)
    if bool(bad.any()):
        raise ValueError(f"target column {spec.name!r} has {int(bad.sum())} missing or "
                         "unseen labels; drop those rows first")
    return y.long()
