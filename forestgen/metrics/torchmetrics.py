"""torchmetrics ``Metric`` wrappers for metrics accumulated over batches.

Import explicitly (``from forestgen.metrics.torchmetrics import MMD``); ``forestgen.metrics``
itself does not import torch. All states are sum- or cat-reduced (``full_state_update=False``),
so the metrics work under DDP and with :meth:`~torchmetrics.Metric.merge_state`. Sample-based
metrics (MMD, energy, C2ST) keep list states and compute on CPU with the numpy functions.

Batches are numeric tensors, so they carry no column kinds: categorical columns arrive as
integer codes. Declare them with ``kinds`` (a mapping ``{column: kind}`` with ``columns`` naming
the batch columns in order, a :class:`forestgen.data.schema.Schema` or a fitted forestgen
model, whose column names are used); ``MMD`` and ``EnergyDistance`` then preprocess by
default (``preprocess=None``), as the kinds need. Without ``kinds`` every column is numeric;
the number of distinct values is never used to guess (on a small batch every float column has
few).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from forestgen.metrics._prep import infer_schema
from forestgen.metrics.density import check_log_prob
from forestgen.metrics.fidelity import c2st, energy_distance, mmd

__all__ = ["C2ST", "MMD", "EnergyDistance", "ForestLogLikelihood", "MarginalDistance"]


def _as_2d_tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, pd.DataFrame):
        x = x.to_numpy(dtype=float, na_value=np.nan)
    t = torch.as_tensor(x).detach()
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2:
        raise ValueError(f"{name} batch must be 2-D, got shape {tuple(t.shape)}")
    return t.to(torch.float64)


def _preprocess(preprocess: bool | None, kinds: object) -> bool:
    """MMD's and the energy distance's ``preprocess``: by default on where ``kinds`` are
    declared (they are read by the preprocessing: one-hot levels, scaled numbers), else off."""
    return kinds is not None if preprocess is None else bool(preprocess)


def _kind_columns(columns: Sequence[str] | None, kinds: object) -> list[str] | None:
    """Batch column names: ``columns``, else those of a schema/model or mapping ``kinds``."""
    if columns is not None:
        return [str(c) for c in columns]
    source = getattr(kinds, "schema_", kinds)
    if isinstance(source, Mapping):
        return [str(c) for c in source]
    if source is not None and hasattr(source, "columns"):
        return [str(c.name) for c in source.columns]
    return None


def _frame(x: np.ndarray, columns: list[str] | None, name: str) -> np.ndarray | pd.DataFrame:
    if columns is None:
        return x
    if x.shape[1] != len(columns):
        raise ValueError(f"{name} batches have {x.shape[1]} columns but {len(columns)} column "
                         f"names/kinds were declared ({columns})")
    return pd.DataFrame(x, columns=columns)


class ForestLogLikelihood(Metric):
    """Mean log-likelihood (nats per row, or per dimension) of a forest's ``log_prob``.

    ``update(batch)`` accepts a tensor, numpy array or DataFrame; tensors/arrays are wrapped in a
    DataFrame with ``columns`` when given, then passed to ``model.log_prob``. With
    ``encoded=True`` a batch is the torch layer's encoded rows (``model.to_torch().encode``,
    ``as_dataset`` batches: level codes, all columns in the model's order), decoded by the
    model's encoder first (read as a table, a code would be an unseen level). NaN log densities
    raise ``ValueError``; ``-inf`` rows are counted in the ``n_neginf`` state (the mean then is
    ``-inf``).
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = True

    def __init__(self, model: Any, columns: Sequence[str] | None = None,
                 per_dimension: bool = False, encoded: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not hasattr(model, "log_prob"):
            raise TypeError(f"{type(model).__name__} has no log_prob(X) method")
        if encoded and not hasattr(model, "encoder_"):
            raise TypeError(f"{type(model).__name__} has no encoder_ to read encoded rows")
        if encoded and columns is not None:
            raise ValueError("encoded rows hold every column in the model's order: pass "
                             "columns=None with encoded=True")
        self.model = model
        self.encoded = bool(encoded)
        self.columns = list(columns) if columns is not None else None
        self.per_dimension = per_dimension
        f64 = torch.float64
        self.add_state("sum_log_prob", default=torch.tensor(0.0, dtype=f64), dist_reduce_fx="sum")
        self.add_state("n_rows", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("n_neginf", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("n_dims", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="max")

    def update(self, batch: Any) -> None:
        if isinstance(batch, Tensor):
            batch = batch.detach().cpu().numpy()
        if self.columns is not None and not isinstance(batch, pd.DataFrame):
            batch = pd.DataFrame(np.asarray(batch), columns=self.columns)
        n = len(batch)
        if n == 0:
            return
        if self.encoded:
            Z = np.asarray(batch, np.float64).reshape(n, -1)
            d = self.model.schema_.d
            if Z.shape[1] != d:
                raise ValueError(f"encoded rows have {Z.shape[1]} columns; the model has {d}")
            batch = self.model.encoder_.inverse_transform(Z)
        lp = check_log_prob(self.model.log_prob(batch), n)
        dims = batch.shape[1] if len(batch.shape) == 2 else 1
        dev = self.sum_log_prob.device
        self.sum_log_prob += torch.tensor(float(lp.sum()), dtype=torch.float64, device=dev)
        self.n_rows += n
        self.n_neginf += int(np.isneginf(lp).sum())
        self.n_dims = torch.maximum(self.n_dims, torch.tensor(dims, device=dev))

    def compute(self) -> Tensor:
        mean = self.sum_log_prob / self.n_rows.clamp(min=1)
        if self.per_dimension:
            mean = mean / self.n_dims.clamp(min=1)
        return mean


class _TwoSample(Metric):
    """Base: keeps real and synthetic samples as ``cat``-reduced list states.

    ``kinds`` / ``columns``: the column kinds of the batches (see the module docstring).
    """

    full_state_update = False
    is_differentiable = False

    def __init__(self, kinds: object = None, columns: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kinds = kinds
        self.columns = _kind_columns(columns, kinds)
        self.add_state("real", default=[], dist_reduce_fx="cat")
        self.add_state("synthetic", default=[], dist_reduce_fx="cat")

    def update(self, real: Any = None, synthetic: Any = None) -> None:
        """Add a batch of real and/or synthetic rows (numeric 2-D tensors/arrays/DataFrames)."""
        if real is not None:
            self.real.append(_as_2d_tensor(real, "real"))
        if synthetic is not None:
            self.synthetic.append(_as_2d_tensor(synthetic, "synthetic"))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if (isinstance(self.real, list) and not self.real) or (
                isinstance(self.synthetic, list) and not self.synthetic):
            raise RuntimeError(f"{type(self).__name__}: update with real and synthetic data first")
        r = dim_zero_cat(self.real).cpu().numpy()
        s = dim_zero_cat(self.synthetic).cpu().numpy()
        return _frame(r, self.columns, "real"), _frame(s, self.columns, "synthetic")


class MMD(_TwoSample):
    """Unbiased squared MMD with an RBF kernel (Gretton et al., 2012); see :func:`mmd`.

    ``preprocess=False`` uses the numeric batches as given; ``True`` applies the column typing /
    standardisation of :func:`forestgen.metrics.mmd`; the default ``None`` is ``True`` where
    ``kinds`` are declared, else ``False``.
    """

    higher_is_better = False

    def __init__(self, bandwidth: float | None = None, max_rows: int | None = 2000,
                 preprocess: bool | None = None, random_state: int | None = 0,
                 kinds: object = None, columns: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(kinds=kinds, columns=columns, **kwargs)
        self.bandwidth, self.max_rows = bandwidth, max_rows
        self.preprocess, self.random_state = _preprocess(preprocess, kinds), random_state

    def compute(self) -> Tensor:
        r, s = self._arrays()
        return torch.tensor(mmd(r, s, bandwidth=self.bandwidth, max_rows=self.max_rows,
                                preprocess=self.preprocess, random_state=self.random_state,
                                kinds=self.kinds),
                            dtype=torch.float64)


class EnergyDistance(_TwoSample):
    """Energy distance (Székely & Rizzo, 2013); see :func:`forestgen.metrics.energy_distance`."""

    higher_is_better = False

    def __init__(self, max_rows: int | None = 2000, preprocess: bool | None = None,
                 random_state: int | None = 0, kinds: object = None,
                 columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(kinds=kinds, columns=columns, **kwargs)
        self.max_rows, self.random_state = max_rows, random_state
        self.preprocess = _preprocess(preprocess, kinds)

    def compute(self) -> Tensor:
        r, s = self._arrays()
        return torch.tensor(energy_distance(r, s, max_rows=self.max_rows,
                                            preprocess=self.preprocess,
                                            random_state=self.random_state,
                                            kinds=self.kinds),
                            dtype=torch.float64)


class C2ST(_TwoSample):
    """Classifier two-sample test (Lopez-Paz & Oquab, 2017) computed on CPU by :func:`c2st`.

    ``compute()`` returns a dict of tensors ``auc``, ``auc_ci_low``, ``auc_ci_high``,
    ``accuracy``; the full :class:`~forestgen.metrics.C2STResult` is kept in ``self.result``.
    Categorical columns (declared in ``kinds``) are one level per code for the classifier.
    Feed it real rows the generator never saw: against its training rows, samples that copy
    them read below 0.5 (see :func:`c2st`).
    """

    higher_is_better = False

    def __init__(self, n_folds: int = 5, max_rows: int | None = 5000,
                 random_state: int | None = 0, kinds: object = None,
                 columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(kinds=kinds, columns=columns, **kwargs)
        self.n_folds, self.max_rows, self.random_state = n_folds, max_rows, random_state
        self.result = None

    def compute(self) -> dict[str, Tensor]:
        r, s = self._arrays()
        res = c2st(r, s, n_folds=self.n_folds, max_rows=self.max_rows,
                   random_state=self.random_state, kinds=self.kinds)
        self.result = res
        vals = {"auc": res.auc, "auc_ci_low": res.auc_ci[0], "auc_ci_high": res.auc_ci[1],
                "accuracy": res.accuracy}
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in vals.items()}


class MarginalDistance(Metric):
    """Per-column binned marginal distances with fixed bins from a reference sample.

    Categorical columns (declared in ``kinds``, see the module docstring) get one bin per level
    of the reference plus one bin for levels the reference lacks; numeric columns get
    ``n_bins`` quantile bins. A last bin counts NaN. Histogram states are sum-reduced.
    ``update(synthetic, real=None)``: when no real batches were given, the reference histogram
    itself is the real side. ``compute()`` returns ``{"tv": (d,), "ks": (d,)}``: total
    variation between binned marginals and the KS statistic evaluated at the bin edges.
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = False

    def __init__(self, reference: Any, n_bins: int = 20, kinds: object = None,
                 columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        ref = _as_2d_tensor(reference, "reference")
        if isinstance(reference, pd.DataFrame) and columns is None:
            columns = [str(c) for c in reference.columns]
        names = _kind_columns(columns, kinds) or [f"x{j}" for j in range(ref.shape[1])]
        if len(names) != ref.shape[1]:
            raise ValueError(f"reference has {ref.shape[1]} columns but {len(names)} column "
                             f"names/kinds were declared ({names})")
        schema = infer_schema(pd.DataFrame(np.zeros((0, len(names))), columns=names), kinds)
        categorical = [schema.kind(c) == "categorical" for c in names]
        edges = []
        for j in range(ref.shape[1]):
            col = ref[:, j]
            col = col[~torch.isnan(col)]
            if categorical[j]:
                edges.append(torch.unique(col))  # the levels themselves
            else:
                q = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)[1:-1]
                edges.append(torch.unique(torch.quantile(col, q)))
        n_inner = max((len(e) for e in edges), default=0)
        padded = torch.full((ref.shape[1], n_inner), float("inf"), dtype=torch.float64)
        for j, e in enumerate(edges):
            padded[j, :len(e)] = e
        self.register_buffer("edges", padded)
        self.register_buffer("categorical", torch.tensor(categorical, dtype=torch.bool))
        # value bins (n_inner + 1), unseen-level bin, missing bin
        self.n_bins_total = n_inner + 3
        self.register_buffer("reference_counts", self._counts(ref))
        shape = (ref.shape[1], self.n_bins_total)
        f64 = torch.float64
        self.add_state("real_counts", default=torch.zeros(shape, dtype=f64), dist_reduce_fx="sum")
        self.add_state("synthetic_counts", default=torch.zeros(shape, dtype=f64),
                       dist_reduce_fx="sum")

    def _counts(self, x: Tensor) -> Tensor:
        x = x.to(self.edges.device)
        if x.shape[1] != self.edges.shape[0]:
            raise ValueError(f"batch has {x.shape[1]} columns, reference {self.edges.shape[0]}")
        counts = torch.zeros((x.shape[1], self.n_bins_total), dtype=torch.float64,
                             device=x.device)
        for j in range(x.shape[1]):
            col = x[:, j].contiguous()
            edges = self.edges[j].contiguous()
            idx = torch.bucketize(col, edges, right=False)
            if self.categorical[j]:  # a level is its own bin; any other value is unseen
                hit = edges[idx.clamp(max=len(edges) - 1)] == col if len(edges) else col != col
                idx = torch.where(hit, idx, self.n_bins_total - 2)
            idx = torch.where(torch.isnan(col), self.n_bins_total - 1, idx)
            counts[j] += torch.bincount(idx, minlength=self.n_bins_total).to(torch.float64)
        return counts

    def update(self, synthetic: Any, real: Any = None) -> None:
        self.synthetic_counts += self._counts(_as_2d_tensor(synthetic, "synthetic"))
        if real is not None:
            self.real_counts += self._counts(_as_2d_tensor(real, "real"))

    def compute(self) -> dict[str, Tensor]:
        real = self.real_counts if self.real_counts.sum() > 0 else self.reference_counts
        p = real / real.sum(1, keepdim=True).clamp(min=1)
        q = self.synthetic_counts / self.synthetic_counts.sum(1, keepdim=True).clamp(min=1)
        tv = 0.5 * (p - q).abs().sum(1)
        ks = (p.cumsum(1) - q.cumsum(1)).abs().amax(1)
        return {"tv": tv, "ks": ks}
