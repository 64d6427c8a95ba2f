"""Shared input handling for :mod:`forestgen.metrics`.

Column typing (from dtypes or a declared schema), column alignment, subsampling and the
encodings the metrics use:

* a *standardised one-hot* embedding (numeric columns median-imputed and z-scored with the
  reference statistics plus a missing indicator, categorical columns one-hot with missing as
  its own level) for every distance/kernel based metric;
* an *ordinal* encoding (numeric with NaN kept, categorical as integer codes) for the
  gradient-boosting classifiers/regressors with native categorical support.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

MISSING = "<missing>"
#: Largest integer code handed to HistGradientBoosting (its ``max_bins`` - 1 is 254).
_MAX_CODE = 250


def as_frame(X: object, columns: Sequence[str] | None = None, name: str = "data") -> pd.DataFrame:
    """Return ``X`` as a DataFrame (numpy arrays get columns ``x0, x1, ...`` or ``columns``)."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame()
    if hasattr(X, "detach") and hasattr(X, "cpu"):  # torch tensor, without importing torch
        X = X.detach().cpu().numpy()
    arr = np.asarray(X)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows x columns), got shape {arr.shape}")
    cols = list(columns) if columns is not None else [f"x{j}" for j in range(arr.shape[1])]
    if len(cols) != arr.shape[1]:
        raise ValueError(f"{name} has {arr.shape[1]} columns but {len(cols)} names were given")
    df = pd.DataFrame(arr, columns=cols)
    return df.infer_objects() if arr.dtype == object else df


def align(reference: pd.DataFrame, other: pd.DataFrame, name: str = "synthetic") -> pd.DataFrame:
    """Return ``other`` with the columns of ``reference`` (same order) or raise ``ValueError``."""
    ref_cols = [str(c) for c in reference.columns]
    oth_cols = [str(c) for c in other.columns]
    missing = [c for c in ref_cols if c not in oth_cols]
    extra = [c for c in oth_cols if c not in ref_cols]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing column(s) {missing}")
        if extra:
            parts.append(f"extra column(s) {extra}")
        raise ValueError(f"columns of {name} do not match the real data: " + "; ".join(parts))
    other = other.copy(deep=False)
    other.columns = oth_cols
    return other[ref_cols]


def require_rows(n: int, name: str, least: int, why: str = "") -> None:
    """A clear error where a metric gets fewer than ``least`` rows of ``name`` (no score is
    made up from an empty or one-row frame)."""
    if n < least:
        raise ValueError(f"{name} has {n} row(s); this metric needs at least {least}"
                         + (f" ({why})" if why else ""))


def prepare(
    real: object, *others: object, names: Sequence[str] | None = None, min_rows: int = 1
) -> list[pd.DataFrame]:
    """Convert all inputs to DataFrames with string column names aligned to ``real``; each
    needs at least ``min_rows`` rows (:func:`require_rows`)."""
    names = list(names) if names is not None else [f"input {i + 1}" for i in range(len(others))]
    ref = as_frame(real, name="real").copy(deep=False)
    require_rows(len(ref), "real", min_rows)
    ref.columns = [str(c) for c in ref.columns]
    if ref.columns.duplicated().any():
        raise ValueError("real data has duplicated column names")
    out = [ref]
    for frame, nm in zip(others, names):
        if frame is None:
            out.append(None)
            continue
        df = as_frame(frame, columns=None if isinstance(frame, pd.DataFrame) else ref.columns,
                      name=nm)
        require_rows(len(df), nm, min_rows)
        out.append(align(ref, df, nm))
    return out


def subsample(df: pd.DataFrame, max_rows: int | None, rng: np.random.Generator) -> pd.DataFrame:
    """Random subsample of at most ``max_rows`` rows (no-op when ``max_rows`` is None)."""
    if max_rows is None or len(df) <= max_rows:
        return df
    idx = np.sort(rng.choice(len(df), size=max_rows, replace=False))
    return df.iloc[idx]


@dataclass(frozen=True)
class Schema:
    """Column typing: ``numeric`` and ``categorical`` column names (in frame order)."""

    columns: tuple[str, ...]
    numeric: tuple[str, ...]
    categorical: tuple[str, ...]

    def kind(self, col: str) -> str:
        return "numeric" if col in self.numeric else "categorical"


#: What a column kind of :mod:`forestgen.data.schema` (or a plain label) means to the metrics.
_KIND_MAP = {"numeric": "numeric", "continuous": "numeric", "integer": "numeric",
             "categorical": "categorical", "bool": "categorical", "binary": "categorical"}


def _declared_kinds(kinds: object) -> dict[str, str]:
    """``{column: "numeric" | "categorical"}`` from a mapping, a forestgen schema or model."""
    if kinds is None:
        return {}
    if hasattr(kinds, "schema_"):  # a fitted forestgen learner
        kinds = kinds.schema_
    if hasattr(kinds, "columns") and all(hasattr(c, "kind") for c in kinds.columns):
        kinds = {c.name: c.kind for c in kinds.columns}
    if not isinstance(kinds, Mapping) and callable(getattr(kinds, "to_dict", None)):
        kinds = kinds.to_dict()  # an SDV Metadata object
    if not isinstance(kinds, Mapping):
        raise TypeError("kinds must be a mapping {column: kind}, SDV-style metadata, a "
                        f"forestgen Schema or a fitted forestgen model; got "
                        f"{type(kinds).__name__}")
    if "columns" in kinds or "tables" in kinds:
        from forestgen.data.metadata import as_metadata_dict

        meta = as_metadata_dict(dict(kinds))
        kinds = {c: e for c, e in {**meta["columns"], **{
            k: v for k, v in meta.items() if not isinstance(v, (dict, list, str))}}.items()}
    out = {}
    for col, kind in kinds.items():
        if isinstance(kind, Mapping):  # an SDV column entry
            kind = "numeric" if kind.get("sdtype") in ("numerical", "datetime") else \
                "categorical"
        if kind not in _KIND_MAP:
            raise ValueError(f"column {col!r}: unknown kind {kind!r}; expected one of "
                             f"{sorted(_KIND_MAP)}")
        out[str(col)] = _KIND_MAP[kind]
    return out


def infer_schema(df: pd.DataFrame, kinds: object = None) -> Schema:
    """Column kinds from ``kinds`` where declared, else from the dtype.

    ``kinds`` is a mapping ``{column: "numeric" | "categorical"}`` (forestgen's kind names
    ``continuous``, ``integer``, ``bool`` and ``binary`` are accepted too), a
    :class:`forestgen.data.schema.Schema` or a fitted forestgen model (its ``schema_``).
    Undeclared columns: bool, object, string and category dtypes are categorical, every other
    numeric dtype is numeric. The number of distinct values is never used: on a small sample a
    float column has few of them, and treating it as categorical makes every new value an
    unseen level.
    """
    declared = _declared_kinds(kinds)
    unknown = sorted(set(declared) - {str(c) for c in df.columns})
    if unknown:
        raise ValueError(f"kinds names column(s) {unknown} that are not in the data")
    num, cat = [], []
    for col in df.columns:
        kind = declared.get(str(col))
        if kind is None:
            s = df[col]
            numeric = (ptypes.is_numeric_dtype(s.dtype) and not ptypes.is_bool_dtype(s.dtype)
                       or _is_time(s.dtype))
            kind = "numeric" if numeric else "categorical"
        (num if kind == "numeric" else cat).append(col)
    return Schema(tuple(df.columns), tuple(num), tuple(cat))


def _is_time(dtype) -> bool:
    return ptypes.is_datetime64_any_dtype(dtype) or ptypes.is_timedelta64_dtype(dtype)


def numeric_values(s: pd.Series) -> np.ndarray:
    """Float array of a numeric column (numbers given as text are read); a text entry that
    is no number raises ``ValueError`` naming the column (it was read as missing)."""
    if _is_time(s.dtype):  # seconds (since the epoch, UTC, for datetimes)
        from forestgen.data.encoder import time_seconds

        return time_seconds(s)
    if ptypes.is_numeric_dtype(s.dtype) and not ptypes.is_bool_dtype(s.dtype):
        return s.to_numpy(dtype=float, na_value=np.nan)
    out = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(out) & ~s.isna().to_numpy()
    if bad.any():
        raise ValueError(f"column {s.name!r} is numeric but holds {int(bad.sum())} value(s) "
                         f"that are no numbers, e.g. {s.to_numpy()[np.argmax(bad)]!r}")
    return out


def _fmt_number(v: float) -> str:
    if np.isnan(v):
        return MISSING
    if np.isfinite(v) and v == np.round(v):
        return str(int(v))
    return repr(float(v))


def category_strings(s: pd.Series) -> np.ndarray:
    """Canonical string labels of a categorical column (missing -> ``MISSING``).

    Numeric labels are canonicalised so that ``1``, ``1.0`` and ``True``-free ints agree.
    """
    if ptypes.is_numeric_dtype(s.dtype) and not ptypes.is_bool_dtype(s.dtype):
        f = s.to_numpy(dtype=float, na_value=np.nan)
        uniq, inv = np.unique(f, return_inverse=True)
        labels = np.array([_fmt_number(v) for v in uniq], dtype=object)
        return labels[inv.reshape(-1)]
    miss = s.isna().to_numpy()
    vals = s.astype(object).to_numpy()
    out = np.empty(len(vals), dtype=object)
    out[miss] = MISSING
    out[~miss] = [str(v) for v in vals[~miss]]
    return out


class Encoder:
    """Encodings fitted on a reference frame; category levels are the union over all frames."""

    def __init__(self, schema: Schema, reference: pd.DataFrame,
                 others: Sequence[pd.DataFrame] = ()) -> None:
        self.schema = schema
        frames = [reference, *[o for o in others if o is not None]]
        self.median: dict[str, float] = {}
        self.mean: dict[str, float] = {}
        self.std: dict[str, float] = {}
        self.indicator: dict[str, bool] = {}
        for col in schema.numeric:
            x = numeric_values(reference[col])
            med = float(np.nanmedian(x)) if np.isfinite(x).any() else 0.0
            xi = np.where(np.isnan(x), med, x)
            sd = float(np.std(xi))
            self.median[col], self.mean[col] = med, float(np.mean(xi))
            self.std[col] = sd if sd > 0 else 1.0
            self.indicator[col] = any(bool(np.isnan(numeric_values(f[col])).any())
                                      for f in frames)
        self.levels: dict[str, np.ndarray] = {}
        for col in schema.categorical:
            ref_lab = pd.Series(category_strings(reference[col]))
            order = list(ref_lab.value_counts(sort=True).index)
            seen = set(order)
            for f in frames[1:]:
                for lab in pd.unique(category_strings(f[col])):
                    if lab not in seen:
                        seen.add(lab)
                        order.append(lab)
            self.levels[col] = np.array(order, dtype=object)

    def codes(self, df: pd.DataFrame, col: str) -> np.ndarray:
        """Integer codes of a categorical column in ``self.levels[col]`` (unknown -> -1)."""
        lab = category_strings(df[col])
        return pd.Categorical(lab, categories=self.levels[col]).codes.astype(np.int64)

    def numeric(self, df: pd.DataFrame, col: str) -> np.ndarray:
        x = numeric_values(df[col])
        return np.where(np.isnan(x), self.median[col], x)

    def onehot(self, df: pd.DataFrame) -> np.ndarray:
        """Standardised one-hot embedding, shape ``(n_rows, n_features)``."""
        n = len(df)
        blocks = []
        for col in self.schema.columns:
            if col in self.median:
                raw = numeric_values(df[col])
                x = np.where(np.isnan(raw), self.median[col], raw)
                blocks.append(((x - self.mean[col]) / self.std[col])[:, None])
                if self.indicator[col]:
                    blocks.append(np.isnan(raw).astype(float)[:, None])
            else:
                c = self.codes(df, col)
                block = np.zeros((n, len(self.levels[col])))
                ok = c >= 0
                block[np.nonzero(ok)[0], c[ok]] = 1.0
                blocks.append(block)
        if not blocks:
            return np.zeros((n, 0))
        return np.hstack(blocks)

    def ordinal(self, df: pd.DataFrame,
                exclude: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Ordinal encoding for tree models: ``(X, categorical_mask)``; numeric NaN is kept."""
        cols = [c for c in self.schema.columns if c not in exclude]
        X = np.empty((len(df), len(cols)))
        mask = np.zeros(len(cols), dtype=bool)
        for j, col in enumerate(cols):
            if col in self.median:
                X[:, j] = numeric_values(df[col])
            else:
                c = self.codes(df, col)
                X[:, j] = np.where(c < 0, np.nan, np.minimum(c, _MAX_CODE))
                mask[j] = True
        return X, mask


def embed(real: pd.DataFrame, *others: pd.DataFrame, kinds: object = None) -> list[np.ndarray]:
    """Standardised one-hot embedding of ``real`` and ``others`` (statistics from ``real``)."""
    schema = infer_schema(real, kinds)
    enc = Encoder(schema, real, others)
    return [enc.onehot(real)] + [enc.onehot(o) for o in others]


def to_matrix(X: object, name: str = "data") -> np.ndarray:
    """Raw 2-D float matrix (used when a metric is asked not to preprocess)."""
    if hasattr(X, "detach") and hasattr(X, "cpu"):
        X = X.detach().cpu().numpy()
    if isinstance(X, pd.DataFrame):
        X = X.to_numpy(dtype=float, na_value=np.nan)
    arr = np.asarray(X, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; use preprocess=True to impute missing values")
    return arr


def sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between rows of ``a`` and ``b`` (clipped at 0)."""
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d, 0.0)


def nearest(a: np.ndarray, b: np.ndarray, k: int = 1, exclude_self: bool = False,
            chunk: int = 1024) -> np.ndarray:
    """Distances from each row of ``a`` to its ``k`` nearest rows of ``b``, shape ``(n_a, k)``.

    With ``exclude_self`` (``a is b``) the zero self-distance of row ``i`` is skipped.
    """
    out = np.empty((len(a), k))
    bb = (b * b).sum(1)
    for s in range(0, len(a), chunk):
        blk = a[s:s + chunk]
        d = (blk * blk).sum(1)[:, None] + bb[None, :] - 2.0 * (blk @ b.T)
        np.maximum(d, 0.0, out=d)
        if exclude_self:
            rows = np.arange(len(blk))
            d[rows, s + rows] = np.inf
        kk = min(k, d.shape[1])
        part = np.partition(d, kk - 1, axis=1)[:, :kk]
        out[s:s + chunk, :kk] = np.sqrt(np.sort(part, axis=1))
        if kk < k:
            out[s:s + chunk, kk:] = np.inf
    return out


@contextmanager
def limit_threads(n_threads: int | None) -> Iterator[None]:
    """Cap OpenMP/BLAS threads (via threadpoolctl) while fitting; no-op for ``None``.

    On small or shared machines OpenMP spin-waiting can make small HistGradientBoosting fits
    an order of magnitude slower; ``n_threads=1`` avoids that.
    """
    if n_threads is None:
        yield
        return
    import sklearn.ensemble  # noqa: F401  (load sklearn's OpenMP runtime before limiting it)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(n_threads)):
        yield
