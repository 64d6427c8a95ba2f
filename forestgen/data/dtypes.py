"""Column dtypes and values: how a column's pandas dtype is recorded in the schema, how its
values become float64 (datetimes and timedeltas as seconds) and how they are cast back.

The string forms (:func:`dtype_to_str`) are what model files store; :func:`str_to_dtype`
restores them. :func:`to_float` validates the values it converts (non-numeric text and
infinite values raise naming the column); :func:`cast_numeric` / :func:`cast_labels` give
decoded values the training dtype (nullable where values are missing).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

__all__ = ["MAX_EXACT_INT", "MAX_MAGNITUDE", "cast_labels", "cast_numeric", "check_exact_integers",
           "dtype_to_str", "is_category_str", "is_numeric_dtype", "is_numeric_str",
           "is_time_dtype", "nullable_int", "parse_category", "seconds_to_time", "str_to_dtype",
           "time_scalar_to_seconds", "time_seconds", "to_float"]


def dtype_to_str(dtype: Any) -> str:
    """String form of a dtype that :func:`str_to_dtype` can restore."""
    if isinstance(dtype, pd.CategoricalDtype):
        inner = str(dtype.categories.dtype)
        return f"category[{inner},ordered]" if dtype.ordered else f"category[{inner}]"
    if isinstance(dtype, pd.StringDtype) and dtype.na_value is pd.NA:
        return f"string[{dtype.storage}]"
    return str(dtype)


def parse_category(dtype_str: str) -> tuple[str | None, bool]:
    inner = dtype_str[len("category") :].strip("[]")
    parts = [p for p in inner.split(",") if p]
    ordered = "ordered" in parts
    parts = [p for p in parts if p != "ordered"]
    return (parts[0] if parts else None), ordered


@lru_cache(maxsize=512)
def str_to_dtype(dtype_str: str) -> Any:
    """The dtype a schema's dtype string names (parsed once per string: dtypes are immutable)."""
    return pd.api.types.pandas_dtype(dtype_str)


def is_category_str(dtype_str: str) -> bool:
    return dtype_str.startswith("category")


def is_numeric_dtype(dtype: Any) -> bool:
    """Real numeric dtype (numpy or nullable), excluding bool and complex."""
    return (
        pdt.is_numeric_dtype(dtype)
        and not pdt.is_bool_dtype(dtype)
        and not pdt.is_complex_dtype(dtype)
    )


def is_numeric_str(dtype_str: str) -> bool:
    if is_category_str(dtype_str):
        return False
    try:
        return is_numeric_dtype(str_to_dtype(dtype_str))
    except TypeError:
        return False


def nullable_int(dtype: np.dtype) -> str:
    bits = dtype.itemsize * 8
    return f"UInt{bits}" if dtype.kind == "u" else f"Int{bits}"


# --------------------------------------------------------------------------- value helpers


def is_time_dtype(dtype: Any) -> bool:
    return pdt.is_datetime64_any_dtype(dtype) or pdt.is_timedelta64_dtype(dtype)


def _time_to_seconds(series: pd.Series, wall: bool = False) -> np.ndarray:
    """Datetimes as seconds since 1970-01-01 UTC, timedeltas as seconds (NaN for NaT), read
    in the column's own unit (a ``datetime64[s]`` date in 2500 has no nanosecond count).
    ``wall``: a time-zone-aware column's local wall-clock times instead (its midnights whole
    days whatever the daylight-saving offset)."""
    s = series
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_localize(None) if wall else s.dt.tz_convert("UTC").dt.tz_localize(None)
    v = s.to_numpy()
    if v.dtype.kind not in "mM":  # (an object column of times: nanoseconds, as pandas reads)
        kind = "datetime64[ns]" if pdt.is_datetime64_any_dtype(s.dtype) else "timedelta64[ns]"
        v = s.astype(kind).to_numpy()
    unit, count = np.datetime_data(v.dtype)
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}.get(unit)
    if per_second is None:  # (days, weeks ...: whole seconds)
        v = v.astype(f"{v.dtype.kind}8[s]")
        unit, count, per_second = "s", 1, 1
    out = v.view(np.int64).astype(np.float64) * count / per_second
    out[s.isna().to_numpy()] = np.nan
    return out


def time_seconds(series: pd.Series, wall: bool = False) -> np.ndarray:
    """A datetime column as seconds since 1970-01-01 UTC, a timedelta column as seconds (NaN
    for NaT): the units datetime columns are modelled in (``wall``: a time-zone-aware
    column's local wall-clock seconds, :attr:`ColumnSpec.wall_clock`)."""
    return _time_to_seconds(series, wall)


def seconds_to_time(vals: np.ndarray, dtype: Any, wall: bool = False) -> Any:
    """Inverse of :func:`_time_to_seconds` into ``dtype`` (unit and time zone restored),
    counted in the dtype's own unit; ``wall``: ``vals`` are local wall-clock seconds (a
    wall time that daylight saving skips moves forward, one it repeats is the later)."""
    unit = getattr(dtype, "unit", None) or np.datetime_data(np.dtype(dtype))[0]
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}.get(unit, 10**9)
    unit = unit if unit in ("s", "ms", "us", "ns") else "ns"
    miss = np.isnan(vals)
    counts = np.where(miss, 0.0, np.rint(np.where(miss, 0.0, vals) * per_second))
    counts = np.clip(counts, -2.0**63 + 1024, 2.0**63 - 1024).astype(np.int64)
    kind = "m" if pdt.is_timedelta64_dtype(dtype) else "M"
    arr = counts.view(f"{kind}8[{unit}]").copy()
    arr[miss] = np.array("NaT", dtype=arr.dtype)
    out = pd.Series(arr)
    if isinstance(dtype, pd.DatetimeTZDtype) and wall:
        out = out.dt.tz_localize(dtype.tz, ambiguous=np.zeros(len(out), bool),
                                 nonexistent="shift_forward")
    elif isinstance(dtype, pd.DatetimeTZDtype):
        out = out.dt.tz_localize("UTC").dt.tz_convert(dtype.tz)
    return out.astype(dtype).array


def time_scalar_to_seconds(value: Any, dtype_str: str, wall: bool = False) -> float | None:
    """One datetime/timedelta value (a Timestamp, ``datetime``, ``np.datetime64``, ISO string or
    ``Timedelta``) in the encoded units of a column of dtype ``dtype_str`` (seconds since the
    epoch, UTC, or seconds; ``wall``: local wall-clock seconds); None when the column is not a
    time column. A naive value given for a time-zone-aware column is read in the column's
    time zone."""
    dtype = str_to_dtype(dtype_str)
    if not is_time_dtype(dtype):
        return None
    if pdt.is_timedelta64_dtype(dtype):
        return pd.Timedelta(value).total_seconds()
    ts = pd.Timestamp(value)
    tz = getattr(dtype, "tz", None)
    if tz is not None and wall:  # (a naive value is the wall-clock time itself)
        ts = ts if ts.tzinfo is None else ts.tz_convert(tz).tz_localize(None)
    elif tz is not None:
        ts = ts.tz_localize(tz) if ts.tzinfo is None else ts.tz_convert(tz)
    elif ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return float(_time_to_seconds(pd.Series([ts]))[0])


def to_float(series: pd.Series, name: Any, infinite: bool = False,
             wall: bool = False) -> np.ndarray:
    """Numeric values of ``series`` as float64 with NaN for missing; validates content.
    Datetimes / timedeltas are seconds (since the epoch, UTC). ``infinite``: keep ``±inf``
    (a query's value outside every column's range) instead of raising (training data)."""
    dtype = series.dtype
    if is_time_dtype(dtype):
        return _time_to_seconds(series, wall)
    if pdt.is_bool_dtype(dtype) or is_numeric_dtype(dtype):
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
    if not infinite and np.isinf(v).any():
        raise ValueError(f"column {name!r} contains infinite values")
    return v


MAX_MAGNITUDE = 2.0**1020  # numeric columns beyond this would overflow range arithmetic
MAX_EXACT_INT = 2**53  # float64 represents every integer up to this exactly


def check_exact_integers(series: pd.Series, name: Any) -> None:
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


# --------------------------------------------------------------------------- decode


def cast_numeric(vals: np.ndarray, dtype_str: str, wall: bool = False) -> Any:
    """Cast float values (NaN = missing) to ``dtype_str``, switching to nullable if needed
    (``wall``: times given as local wall-clock seconds, :func:`seconds_to_time`)."""
    dtype = str_to_dtype(dtype_str)
    if is_time_dtype(dtype):
        return seconds_to_time(vals, dtype, wall)
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
            dtype = str_to_dtype(nullable_int(dtype))
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


def cast_labels(labels: np.ndarray, missing: np.ndarray, dtype_str: str) -> Any:
    """Cast an object array of labels to ``dtype_str`` (non-numeric, non-category dtypes)."""
    dtype = str_to_dtype(dtype_str)
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
