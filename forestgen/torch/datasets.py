"""Synthetic rows from a fitted forest as PyTorch datasets (DESIGN.md §7).

* :class:`SyntheticDataset` — a map-style dataset of synthetic *rows*, optionally
  class-conditional: ``DataLoader(ds, batch_size=64)`` yields ``(64, d)`` batches (torch's
  fetcher asks for a batch's rows in one ``__getitems__`` call, drawn together), a bare
  ``DataLoader(ds)`` yields one row per item (``(1, d)``). Row ``j`` is row ``j % batch_size``
  of drawn batch ``j // batch_size``, so a row depends only on its index: any DataLoader batch
  size, worker count or sampler sees the same rows.
* :class:`SyntheticBatches` (``ds.batches()``) — the same stream as an ``IterableDataset`` of
  whole drawn batches, finite or infinite: ``DataLoader(ds.batches(), batch_size=None)``.
* :class:`AugmentedDataset` — a map-style dataset of real rows plus synthetic ones at a given
  ratio, with a fixed synthetic pool or a fresh one per epoch (:meth:`~AugmentedDataset.set_epoch`).
* :class:`EpochDataLoader` — a ``DataLoader`` that calls ``dataset.set_epoch(k)`` on its k-th pass.

Seeding. Batch ``i`` of epoch ``e`` on rank ``r`` is drawn from its own generator,
``SeedSequence(seed, spawn_key=(e, r, i))``. Row indexing is therefore reproducible by
construction. In :class:`SyntheticBatches`, DataLoader worker ``w`` of ``W`` produces the
rank's batches ``w, w + W, w + 2W, ...``; since the DataLoader returns worker outputs
round-robin, the stream a rank sees is *the same for any number of workers*, no two workers or
ranks draw the same batch, and resuming at batch ``k`` (:meth:`SyntheticDataset.load_state_dict`)
continues the stream exactly. Rank and world size come from ``torch.distributed`` when it is
initialised, unless given explicitly.
"""

from __future__ import annotations

import inspect
import math
from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from forestgen.data.support import rows_to_support
from forestgen.inference.rules import rules_of
from forestgen.torch.encoding import TensorEncoder, encoded_target
from forestgen.torch.rules import RuleKeeper
from forestgen.torch.sampling import (
    DeviceSampler,
    checked_device,
    device_sampler_gap,
    generator_for,
)


def _dist_info(rank: int | None, world_size: int | None) -> tuple[int, int]:
    r, w = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        r, w = torch.distributed.get_rank(), torch.distributed.get_world_size()
    r = r if rank is None else int(rank)
    w = w if world_size is None else int(world_size)
    if w < 1 or not 0 <= r < w:
        raise ValueError(f"rank must be in [0, world_size); got rank={r}, world_size={w}")
    return r, w


# ---------------------------------------------------------------------------- drawing rows
class _RowDrawer:
    """Draws encoded rows, unconditionally or with labels from ``class_probs`` — exact for leaf
    mixtures: a label, then a leaf from the leaf posterior given that label
    (:func:`~forestgen.inference.posterior.iter_posterior`, as conditional sampling), then the
    other columns in that leaf through the model's sampler (or the device sampler)."""

    def __init__(self, model, target: Any = None, class_probs: Any = None):
        model.check_fitted()
        self.model = model
        self._samplers: dict = {}
        schema = model.schema_
        self.target_index = None if target is None else _column_index(schema, target)
        self.probs = None
        rules = rules_of(model)
        self.keeper = None if not rules else RuleKeeper(model, rules, np.arange(schema.d))
        if class_probs is None or (isinstance(class_probs, str) and class_probs == "model"):
            return
        if self.target_index is None:
            raise ValueError("class_probs needs a target column (target=...)")
        spec = schema.columns[self.target_index]
        if rules and self.target_index in rules.determined:
            rule = rules.determined[self.target_index]
            a = schema.names[rule.determinant]
            if rule.threshold:
                raise NotImplementedError(
                    f"{type(model).__name__}: class_probs on {spec.name!r}, a threshold of the "
                    f"numeric {a!r} (a rule of the table), is not implemented: draw each class "
                    f"with model.sample(conditions={{{spec.name!r}: ...}})")
            raise NotImplementedError(
                f"{type(model).__name__}: class_probs on {spec.name!r}, which a rule of the "
                f"table determines from {a!r}: draw classes of {a!r} instead")
        if not spec.is_discrete:
            raise ValueError(f"class_probs needs a discrete target; column {spec.name!r} is "
                             f"{spec.kind}")
        self.k = spec.n_levels
        self.class_log_w = None  # [k, L] leaf log-weights per class, for a leaf mixture
        if type(model).leaf_mixture_law and hasattr(model, "leaf_log_weight_"):
            try:
                self.class_log_w, log_mass = _class_posteriors(model, self.target_index, self.k)
            except NotImplementedError:  # (an unnormalised ensembler: no shared posterior)
                pass
        if self.class_log_w is None:  # the model's own conditional draws, class by class
            model.require("conditional_sample")
            with np.errstate(divide="ignore"):
                log_mass = np.log(np.asarray(spec.support, np.float64))
        self.probs = _parse_class_probs(class_probs, spec, np.exp(log_mass))

    def draw_torch(self, n: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
        """``draw`` with torch ops on ``device`` (float64 rows ``[n, d]``), keeping the table's
        rules (:mod:`forestgen.torch.rules`)."""
        def raw(k: int) -> torch.Tensor:
            return self._draw_torch(k, generator, device)

        return raw(n) if self.keeper is None else self.keeper.draw(raw, n)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Encoded rows ``[n, d]`` drawn with ``rng``, keeping the table's rules."""
        if self.keeper is None:
            return self._draw(n, rng)
        return self.keeper.draw(lambda k: torch.as_tensor(self._draw(k, rng)), n).numpy()

    def _draw_torch(self, n: int, generator: torch.Generator, device: torch.device
                    ) -> torch.Tensor:
        key = str(device)
        if key not in self._samplers:
            sampler = DeviceSampler(self.model, device)
            cdf = None if self.probs is None else sampler.cdf(self.class_log_w)
            probs = None if self.probs is None else sampler.T(self.probs)
            self._samplers[key] = (sampler, cdf, probs)
        sampler, cdf, probs = self._samplers[key]
        if probs is None:
            return sampler.sample(n, generator, torch.float64)
        if self.class_log_w is None:  # the model's conditional draws, moved to the device
            seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=device))
            return torch.as_tensor(self._draw(n, np.random.default_rng(seed)), device=device)
        y = torch.multinomial(probs, n, replacement=True, generator=generator)
        leaf = torch.empty(n, dtype=torch.long, device=device)
        for c in range(self.k):  # leaf | class by inverse CDF over that class's posterior
            sel = y == c
            leaf[sel] = sampler.leaves(int(sel.sum()), generator, cdf[c])
        Z = sampler.columns_at(leaf, generator, torch.float64)
        Z[:, self.target_index] = y.to(torch.float64)
        return Z

    def _draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.probs is None:
            return self.model.sample_encoded(n, random_state=rng, missing=False)
        y = rng.choice(self.k, size=n, p=self.probs)
        Z = np.empty((n, self.model.schema_.d))
        if self.class_log_w is None:  # not a leaf mixture: its conditional sampler per class
            spec = self.model.schema_.columns[self.target_index]
            for c in np.unique(y):
                sel = y == c
                rows = self.model.sample(int(sel.sum()), random_state=rng, missing=False,
                                         conditions={spec.name: spec.categories[int(c)]})
                Z[sel] = self.model.encoder_.transform(rows)
            return Z
        sampler = self.model.component("sampler")
        if "log_weight" not in inspect.signature(sampler.sample).parameters:
            raise NotImplementedError(f"{type(self.model).__name__}: class-conditional draws "
                                      f"need a sampler taking log_weight= (a leaf posterior); "
                                      f"{type(sampler).__name__} does not")
        for c in np.unique(y):
            sel = y == c
            Z[sel] = sampler.sample(self.model, int(sel.sum()), rng,
                                    log_weight=self.class_log_w[c])
        Z[:, self.target_index] = y
        return rows_to_support(Z, self.model.schema_)


def _class_posteriors(model, j: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per level ``c`` of discrete column ``j``: the leaf log-weights given ``x_j = c``
    (unnormalised, ``-inf`` outside the posterior) ``[k, L]`` and ``log P(x_j = c)`` ``[k]``."""
    from forestgen.inference.conditions import Evidence
    from forestgen.inference.posterior import iter_posterior

    ev = Evidence.empty(k, model.schema_.d)
    ev.point[:, j] = np.arange(k)
    lw = np.full((k, model.forest_.n_leaves), -np.inf)
    log_mass = np.full(k, -np.inf)
    for ch in iter_posterior(model, ev):
        lw[ch.rows[ch.prow], ch.leaf] = ch.logw
        log_mass[ch.rows] = ch.lognorm
    return lw, log_mass


def _column_index(schema, name) -> int:
    try:
        return schema.index(name)
    except KeyError:
        raise ValueError(f"target column {name!r} is not one of the model's columns "
                         f"{schema.names}") from None


def _parse_class_probs(class_probs, spec, mass: np.ndarray) -> np.ndarray:
    k = spec.n_levels
    if isinstance(class_probs, str):
        if class_probs != "balanced":
            raise ValueError(f"class_probs must be 'balanced', 'model', a dict or an array, got "
                             f"{class_probs!r}")
        p = (mass > 0).astype(np.float64)
    elif isinstance(class_probs, dict):
        p = np.zeros(k)
        cats = list(spec.categories)
        for label, v in class_probs.items():
            if label not in cats:
                raise ValueError(f"class_probs: {label!r} is not a level of column "
                                 f"{spec.name!r} (levels {cats})")
            p[cats.index(label)] = float(v)
    else:
        p = np.asarray(class_probs, np.float64).ravel()
        if p.shape != (k,):
            raise ValueError(f"class_probs for column {spec.name!r} needs {k} entries, got "
                             f"{p.shape[0]}")
    if not np.all(np.isfinite(p)) or (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"class_probs must be non-negative with a positive sum, got {p}")
    dead = (p > 0) & (mass <= 0)
    if dead.any():
        lv = [spec.categories[i] for i in np.nonzero(dead)[0]]
        raise ValueError(f"class_probs asks for levels {lv} of column {spec.name!r}, which "
                         "have zero probability under the model")
    return p / p.sum()


# ---------------------------------------------------------------------------- encoded -> batch
class _RawEncoding:
    """Model-encoded floats as features (target column dropped) and the target as codes."""

    def __init__(self, model, target_index: int | None, dtype: torch.dtype):
        self.schema = model.schema_
        self.target_index = target_index
        self.cols = np.array([j for j in range(self.schema.d) if j != target_index], np.int64)
        self.dtype = dtype

    def transform_encoded(self, Z):
        Z = torch.as_tensor(Z)
        return Z[:, torch.as_tensor(self.cols, device=Z.device)].to(self.dtype)

    def target_encoded(self, Z):
        return encoded_target(torch.as_tensor(Z)[:, self.target_index],
                              self.schema.columns[self.target_index], self.dtype)


def _make_encoding(model, target_index, encoding, dtype):
    if encoding is None or (isinstance(encoding, str) and encoding == "encoded"):
        return _RawEncoding(model, target_index, dtype)
    if isinstance(encoding, str):
        name = None if target_index is None else model.schema_.names[target_index]
        return TensorEncoder.from_model(model, categorical=encoding, target=name, dtype=dtype)
    if isinstance(encoding, TensorEncoder):
        if not hasattr(encoding, "mean_"):
            raise ValueError("encoding: the TensorEncoder must be fitted")
        te = encoding.table_encoder_
        if te is not model.encoder_ and te.schema.to_dict() != model.schema_.to_dict():
            raise ValueError("encoding: the TensorEncoder must be built on the model's encoder "
                             "(TensorEncoder(table_encoder=model.encoder_))")
        if encoding.target_index_ != target_index:
            name = None if target_index is None else model.schema_.names[target_index]
            raise ValueError(f"encoding: the TensorEncoder's target differs from target={name!r}")
        return encoding
    raise ValueError(f"encoding must be None, 'onehot', 'codes' or a TensorEncoder, got "
                     f"{encoding!r}")


def _check_output(output, target):
    if output is None:
        return "dict" if target is not None else "tensor"
    if output not in ("tensor", "dict"):
        raise ValueError(f"output must be 'tensor' or 'dict', got {output!r}")
    return output


def _pack(enc, Z, target_index, output):
    x = enc.transform_encoded(Z)
    if target_index is None:
        return {"x": x} if output == "dict" else x
    y = enc.target_encoded(Z)
    return {"x": x, "y": y} if output == "dict" else (x, y)


# ---------------------------------------------------------------------------- iterable dataset
class SyntheticDataset(Dataset):
    """Synthetic rows from a fitted forest, as a map-style dataset of
    ``n_batches * batch_size`` rows per rank (see the module docstring).

    ``DataLoader(ds, batch_size=k)`` yields ``(k, d)`` batches; at ``k == batch_size`` (no
    shuffling) each is one drawn batch, in stream order. Rows are i.i.d., so ``shuffle=True``
    adds nothing and makes each DataLoader batch draw up to ``k`` stream batches. An infinite
    stream (``n_batches=None``) has no length: iterate :meth:`batches` instead.

    Parameters
    ----------
    model : fitted forest. Call ``model.warmup()`` before forking DataLoader workers.
    batch_size : rows per batch.
    n_batches : batches per epoch over all ranks (each of ``world_size`` ranks yields
        ``ceil(n_batches / world_size)``, so ranks get equal counts); ``None`` = infinite
        (:meth:`batches` only).
    seed : user seed; see the module docstring for how batch streams are derived.
    target : a column served separately as ``y`` (discrete: ``long`` codes).
    class_probs : label distribution for class-conditional generation, e.g. ``"balanced"``, a
        dict ``{label: p}`` or an array over the target's levels; ``None``/``"model"`` samples
        from the model's own joint.
    output : ``"tensor"`` (``x``, or ``(x, y)`` with a target) or ``"dict"`` (``{"x", "y"}``;
        the default when a target is named).
    encoding : ``None`` -> the model's encoded floats (codes for categorical columns);
        ``"onehot"`` / ``"codes"`` or a fitted :class:`TensorEncoder` -> model-ready tensors.
    rank, world_size : override ``torch.distributed``.
    device : draw batches with torch ops on this device (:mod:`forestgen.torch.sampling`;
        needs a leaf mixture with a device sampler); ``encoding`` features (one-hot, codes,
        standardised numerics) are built there too. Batch ``i`` uses a
        ``torch.Generator`` seeded from the same ``SeedSequence`` as the numpy stream, so the
        rank / worker / resume guarantees above hold; the values differ from the CPU stream.
        With a CUDA device iterate in the main process (``num_workers=0``).
    """

    def __init__(self, model, batch_size: int = 256, n_batches: int | None = None, seed: int = 0,
                 target: Any = None, class_probs: Any = None, output: str | None = None,
                 encoding: Any = None, rank: int | None = None, world_size: int | None = None,
                 dtype: torch.dtype = torch.float32, device: Any = None):
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if n_batches is not None and (not isinstance(n_batches, (int, np.integer))
                                      or n_batches < 0):
            raise ValueError(f"n_batches must be None or a non-negative integer, got {n_batches!r}")
        self.model = model
        self.batch_size = int(batch_size)
        self.n_batches = None if n_batches is None else int(n_batches)
        self.seed = int(seed)
        self.target = target
        self.output = _check_output(output, target)
        self.rank = rank
        self.world_size = world_size
        self._drawer = _RowDrawer(model, target, class_probs)
        self._enc = _make_encoding(model, self._drawer.target_index, encoding, dtype)
        self.device = None if device is None else checked_device(device)
        if self.device is not None:
            why = device_sampler_gap(model)
            if why is not None:
                raise NotImplementedError(f"{type(model).__name__}: no on-device sampler ({why}); "
                                          "leave device=None")
        self.epoch = 0
        self._start = 0
        self._index = 0
        self._cache: OrderedDict = OrderedDict()  # recently drawn batches, for row lookups

    # ------------------------------------------------------------------ bookkeeping
    def batches_per_rank(self) -> int | None:
        if self.n_batches is None:
            return None
        _, w = _dist_info(self.rank, self.world_size)
        return math.ceil(self.n_batches / w)

    def __len__(self) -> int:
        """Rows per rank: ``batches_per_rank() * batch_size``."""
        n = self.batches_per_rank()
        if n is None:
            raise TypeError("an infinite SyntheticDataset (n_batches=None) has no length: give "
                            "n_batches for DataLoader(ds, batch_size=k), or iterate whole "
                            "batches with DataLoader(ds.batches(), batch_size=None)")
        return n * self.batch_size

    def batches(self) -> SyntheticBatches:
        """The stream as an ``IterableDataset`` of whole drawn batches (finite or infinite),
        for ``DataLoader(ds.batches(), batch_size=None)``; it shares this dataset's epoch and
        :meth:`state_dict`."""
        return SyntheticBatches(self)

    def set_epoch(self, epoch: int) -> None:
        """Select epoch ``epoch``'s streams (a new epoch starts from its first batch)."""
        if int(epoch) != self.epoch:
            self._start = 0
            self._index = 0
        self.epoch = int(epoch)

    def state_dict(self) -> dict:
        """Where the stream stands: epoch and the next batch index of this rank. Tracked when
        iterating in the main process; with workers, set ``index`` to the number of batches
        consumed (the stream does not depend on the number of workers)."""
        return {"seed": self.seed, "epoch": self.epoch, "index": self._index}

    def load_state_dict(self, state: dict) -> None:
        if int(state.get("seed", self.seed)) != self.seed:
            raise ValueError(f"state_dict is for seed {state['seed']}, this dataset has seed "
                             f"{self.seed}")
        self.epoch = int(state["epoch"])
        self._start = self._index = int(state["index"])

    # ------------------------------------------------------------------ data
    def batch(self, index: int, epoch: int | None = None, rank: int | None = None):
        """Batch ``index`` of this rank's stream (what iteration yields at that position)."""
        r = _dist_info(self.rank, self.world_size)[0] if rank is None else rank
        e = self.epoch if epoch is None else epoch
        ss = np.random.SeedSequence(self.seed, spawn_key=(e, r, int(index)))
        if self.device is not None:
            Z = self._drawer.draw_torch(self.batch_size, generator_for(ss, self.device),
                                        self.device)
        else:
            Z = self._drawer.draw(self.batch_size, np.random.default_rng(ss))
        return _pack(self._enc, Z, self._drawer.target_index, self.output)

    def __getitem__(self, index: int):
        """Row ``index`` (``x``, ``(x, y)`` or ``{"x", "y"}``)."""
        return self.__getitems__([index])[0]

    def __getitems__(self, indices) -> list:
        """Rows ``indices`` as a list of items (torch's default fetcher calls this once per
        DataLoader batch and collates the list); each stream batch is drawn once."""
        n = len(self)
        idx = [int(i) + n if int(i) < 0 else int(i) for i in indices]
        bad = [i for i in idx if not 0 <= i < n]
        if bad:
            raise IndexError(f"row {bad[0]} is out of range for {n} rows")
        self._check_device_in_worker()
        rank = _dist_info(self.rank, self.world_size)[0]
        out = []
        for i in idx:
            b, r = divmod(i, self.batch_size)
            out.append(_row(self._cached_batch(b, rank), r))
        return out

    def _cached_batch(self, b: int, rank: int):
        key = (self.epoch, rank, b)
        if key not in self._cache:
            self._cache[key] = self.batch(b, self.epoch, rank)
            while len(self._cache) > 4:
                self._cache.popitem(last=False)
        return self._cache[key]

    def _check_device_in_worker(self) -> None:
        if (get_worker_info() is not None and self.device is not None
                and self.device.type != "cpu"):
            raise RuntimeError(f"SyntheticDataset(device={str(self.device)!r}) draws on the "
                               "device: iterate it with num_workers=0")

    def _batches(self):
        rank, _ = _dist_info(self.rank, self.world_size)
        total = self.batches_per_rank()
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        self._check_device_in_worker()
        epoch = self.epoch
        i = self._start + wid
        while total is None or i < total:
            out = self.batch(i, epoch, rank)
            if info is None:
                self._index = i + 1
            yield out
            i += nw
        if info is None:
            self._start = self._index = 0


class SyntheticBatches(IterableDataset):
    """The stream of a :class:`SyntheticDataset` as whole drawn batches (``ds.batches()``):
    ``DataLoader(ds.batches(), batch_size=None)`` yields ``(batch_size, d)`` tensors, the same
    for any number of workers (module docstring). Epoch and resume state are the dataset's."""

    def __init__(self, dataset: SyntheticDataset):
        self.dataset = dataset

    def __iter__(self):
        return self.dataset._batches()

    def __len__(self) -> int:
        n = self.dataset.batches_per_rank()
        if n is None:
            raise TypeError("an infinite SyntheticDataset (n_batches=None) has no length")
        return n

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def state_dict(self) -> dict:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dataset.load_state_dict(state)


def _row(batch, i: int):
    """Row ``i`` of a packed batch (``x``, ``(x, y)`` or ``{"x", "y"}``)."""
    if isinstance(batch, dict):
        return {k: v[i] for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(v[i] for v in batch)
    return batch[i]


# ---------------------------------------------------------------------------- map dataset
class AugmentedDataset(Dataset):
    """Real rows plus ``round(ratio * n_real)`` synthetic rows, as one map-style dataset.

    Items are ``x`` / ``(x, y)`` / ``{"x", "y"}`` like :class:`SyntheticDataset`; indices
    ``< n_real`` are real rows (see :attr:`is_synthetic`). ``fresh_per_epoch=True`` redraws the
    synthetic pool in :meth:`set_epoch` (seeded by ``(seed, epoch)``); otherwise it is drawn once.
    ``class_probs`` draws class-conditional synthetic rows (e.g. ``"balanced"`` to augment
    minority classes).
    """

    def __init__(self, real, model, ratio: float = 1.0, *, fresh_per_epoch: bool = False,
                 seed: int = 0, target: Any = None, class_probs: Any = None,
                 encoding: Any = None, output: str | None = None,
                 dtype: torch.dtype = torch.float32):
        if not (isinstance(ratio, (int, float)) and ratio >= 0 and math.isfinite(ratio)):
            raise ValueError(f"ratio must be a finite number >= 0, got {ratio!r}")
        self.model = model
        self.ratio = float(ratio)
        self.fresh_per_epoch = fresh_per_epoch
        self.seed = int(seed)
        self.output = _check_output(output, target)
        self._drawer = _RowDrawer(model, target, class_probs)
        self._tidx = self._drawer.target_index
        Zr = real if isinstance(real, np.ndarray) else model.encoder_.transform(real)
        self._enc = _make_encoding(model, self._tidx, encoding, dtype)
        self._xr = self._enc.transform_encoded(Zr)
        self._yr = None if self._tidx is None else self._enc.target_encoded(Zr)
        self.n_real = len(Zr)
        self.n_synthetic = int(round(self.ratio * self.n_real))
        self.epoch = -1
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Draw this epoch's synthetic pool (only changes it when ``fresh_per_epoch``)."""
        key = int(epoch) if self.fresh_per_epoch else 0
        if self.epoch >= 0 and (not self.fresh_per_epoch or key == self.epoch):
            return
        self.epoch = key
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(key,)))
        Z = self._drawer.draw(self.n_synthetic, rng)
        self._xs = self._enc.transform_encoded(Z)
        self._ys = None if self._tidx is None else self._enc.target_encoded(Z)
        self._x = torch.cat([self._xr, self._xs])
        self._y = None if self._tidx is None else torch.cat([self._yr, self._ys])

    @property
    def is_synthetic(self) -> torch.Tensor:
        out = torch.zeros(len(self), dtype=torch.bool)
        out[self.n_real:] = True
        return out

    def __len__(self) -> int:
        return self.n_real + self.n_synthetic

    def __getitem__(self, i):
        x = self._x[i]
        if self._y is None:
            return {"x": x} if self.output == "dict" else x
        return {"x": x, "y": self._y[i]} if self.output == "dict" else (x, self._y[i])


class EpochDataLoader(DataLoader):
    """A ``DataLoader`` that calls ``dataset.set_epoch(k)`` when its k-th pass starts, so
    synthetic streams / pools change between epochs (Lightning only informs samplers).
    ``persistent_workers=True`` is refused with workers: they keep the dataset copy of the
    first epoch, which ``set_epoch`` never reaches (every epoch would repeat epoch 0)."""

    def __init__(self, dataset, *args, **kwargs):
        if kwargs.get("persistent_workers") and kwargs.get("num_workers", 0) > 0 \
                and hasattr(dataset, "set_epoch"):
            raise ValueError("EpochDataLoader: persistent_workers=True keeps the workers' copy "
                             "of the dataset at epoch 0 (set_epoch does not reach it, so every "
                             "epoch would repeat the first); use persistent_workers=False")
        super().__init__(dataset, *args, **kwargs)

    def __iter__(self):
        k = getattr(self, "_passes", 0)
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(k)
        self._passes = k + 1
        return super().__iter__()
