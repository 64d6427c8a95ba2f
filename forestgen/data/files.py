"""Tables from files, typed as their values say: what the command line reads and writes.

:func:`read_table` reads a CSV (``.csv``, ``.csv.gz``, ``.tsv``) or a Parquet file and gives
each text column the type its values have, so a model sees dates as dates:

- dates and date-times (``2012-01-31``, ``2012/01/31``, ``2012-01-31 14:05:00``,
  ``2012-01-31T14:05:00+01:00``, or the form a schema entry's ``datetime_format`` names) become
  ``datetime64`` columns, modelled as seconds and decoded as dates again; times of day
  (``14:05``, ``14:05:30``) become ``timedelta64`` columns (time since midnight), written back
  as ``HH:MM:SS``;
- ``True``/``False`` text with missing entries becomes pandas' nullable ``boolean``;
- whole numbers with missing entries become nullable ``Int64`` (pandas would read them as
  floats), so synthetic values are written as integers;
- a column whose values are numbers except for a few stray strings (at least
  ``NUMERIC_SHARE`` of its values parse as numbers) is refused, naming the column and the
  strings, unless ``metadata`` declares it: as ``numerical`` (the strays become missing, with
  a warning) or as ``categorical`` (the column is kept as text);
- the text ``None`` is a level of a text column (R tables such as ``Arthritis`` code an
  outcome ``None`` / ``Some`` / ``Marked``) and missing in any other column (numbers, dates,
  booleans; a column of nothing else), or wherever ``na_values`` names it.

``metadata`` is the SDV-style dict that ``kinds=`` takes (:mod:`forestgen.data.metadata`);
columns it declares are converted to the declared type. :func:`write_table` writes a frame in
the form :func:`read_table` reads back with the same types.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

__all__ = ["NA_VALUES", "NUMERIC_SHARE", "StrayValuesError", "read_table", "table_format",
           "write_table"]

#: text read as missing: pandas' defaults except ``None`` (a level of text columns, see
#: :func:`read_table`), and ``?``
NA_VALUES = ["", "?", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
             "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null"]
#: text that is missing in a column of numbers, dates or booleans, and a level of a text column
NONE_TEXT = "None"
#: a text column where at least this share of the values are numbers is numeric with strays
NUMERIC_SHARE = 0.9

_DATE = r"\d{4}[-/]\d{1,2}[-/]\d{1,2}"
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
_ISO = re.compile(rf"^{_DATE}(?:[ T]{_TIME})?(?:Z|[+-]\d{{2}}:?\d{{2}})?$")
_OTHER_DATE = re.compile(rf"^\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}(?:[ T]{_TIME})?$")
_TIME_OF_DAY = re.compile(rf"^{_TIME}$")


class StrayValuesError(ValueError):
    """A numeric column holds a few non-numeric strings (named in the message)."""


def table_format(path: str | Path) -> str:
    """``"csv"`` or ``"parquet"`` from a file name (``.csv``, ``.csv.gz``, ``.tsv``, ``.txt``,
    ``.parquet``, ``.pq``); raises ``ValueError`` for anything else."""
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt")):
        return "csv"
    raise ValueError(f"{path}: unknown table format; use a .csv, .csv.gz, .tsv or .parquet file")


def read_table(path: str | Path, metadata: dict | None = None,
               na_values: list[str] | None = None, absent_ok: bool = False) -> pd.DataFrame:
    """Read a CSV or Parquet table and type its columns (module docstring). ``metadata``:
    SDV-style metadata declaring column types (a declared column the file lacks raises unless
    ``absent_ok``); ``na_values``: extra text read as missing."""
    from forestgen.data.metadata import as_metadata_dict

    path = Path(path)
    kind = table_format(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if kind == "parquet":
        try:
            df = pd.read_parquet(path)
        except ImportError:
            raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from None
    else:
        sep = "\t" if path.name.lower().endswith((".tsv", ".tsv.gz")) else ","
        df = _read_csv(path, sep, NA_VALUES + list(na_values or []))
    declared = _declared_columns(as_metadata_dict(metadata) if metadata else None)
    holds_none = [c for c in df.columns if kind == "csv" and _holds_none(df[c])]
    if holds_none:  # "None" is missing where the column is not text without it
        as_missing = _read_csv(path, sep, NA_VALUES + list(na_values or []) + [NONE_TEXT])
        for c in holds_none:
            sdtype = declared.get(c, {}).get("sdtype")
            if sdtype in ("numerical", "datetime", "boolean") or (
                    sdtype is None and _not_text(as_missing[c], path)):
                df[c] = as_missing[c]
    unknown = [c for c in declared if c not in df.columns]
    if unknown and not absent_ok:
        raise ValueError(f"{path}: the schema declares column(s) {unknown} that the file does "
                         f"not have; its columns are {list(df.columns)}")
    for c in df.columns:
        df[c] = _typed(df[c], declared.get(c), path)
    return df


def _read_csv(path: Path, sep: str, na_values: list[str]) -> pd.DataFrame:
    try:
        return pd.read_csv(path, sep=sep, na_values=na_values, keep_default_na=False,
                           skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (no header, no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable CSV ({' '.join(str(e).split())})") from None


def _holds_none(col: pd.Series) -> bool:
    if not (pdt.is_object_dtype(col.dtype) or pdt.is_string_dtype(col.dtype)):
        return False
    return bool((col.dropna().astype(str).str.strip() == NONE_TEXT).any())


def _not_text(col: pd.Series, path: Path) -> bool:
    """Whether a column read with ``None`` as missing is not a text column: numbers (with a
    few stray strings too), dates, times, booleans, or nothing at all."""
    if col.isna().all():
        return True
    try:
        typed = _typed(col, None, path)
    except StrayValuesError:
        return True
    except ValueError:  # unparseable dates: a text column
        return False
    return not (pdt.is_object_dtype(typed.dtype) or pdt.is_string_dtype(typed.dtype))


def _declared_columns(meta: dict | None) -> dict:
    if not meta:
        return {}
    cols = meta.get("columns", meta)
    return {k: v for k, v in cols.items() if isinstance(v, dict)}


def _typed(col: pd.Series, entry: dict | None, path: Path) -> pd.Series:
    """One column in the type its values (or its declaration) say."""
    sdtype = entry.get("sdtype") if entry else None
    text = pdt.is_object_dtype(col.dtype) or pdt.is_string_dtype(col.dtype)
    if sdtype == "datetime":
        return _as_datetime(col, entry.get("datetime_format"), path)
    if sdtype in ("categorical", "ordinal", "id"):
        return col
    if sdtype == "boolean":
        return _as_boolean(col, path) if text else col
    if sdtype == "numerical":
        if text and _is_times_of_day(col):  # a timedelta column exported as numerical
            return _as_timedelta(col)
        if text:
            num = pd.to_numeric(col, errors="coerce")
            bad = num.isna() & col.notna()
            if bad.any():
                warnings.warn(f"{path}: column {col.name!r} is declared numerical; "
                              f"{int(bad.sum())} non-numeric value(s) such as "
                              f"{_examples(col[bad])} are read as missing", UserWarning,
                              stacklevel=3)
            col = num
        if entry.get("computer_representation", "Int64").lower().startswith("float"):
            return col.astype("float64") if pdt.is_integer_dtype(col.dtype) else col
        return _integers(col)
    if not text:
        return _integers(col)
    values = col.dropna().astype(str).str.strip()
    if values.empty:
        return col
    if values.map(lambda v: bool(_ISO.match(v))).all():
        return _as_datetime(col, "ISO8601", path)
    if values.map(lambda v: bool(_OTHER_DATE.match(v))).all():
        return _day_month_dates(col, path)
    if _is_times_of_day(col):
        return _as_timedelta(col)
    low = set(values.str.lower())
    if low <= {"true", "false"}:
        return _as_boolean(col, path)
    num = pd.to_numeric(values, errors="coerce")
    bad = num.isna().to_numpy()
    if bad.any() and (~bad).sum() >= NUMERIC_SHARE * len(values):
        raise StrayValuesError(
            f"{path}: column {col.name!r} holds numbers except for {int(bad.sum())} value(s): "
            f"{_examples(values[bad])}; fix or blank them, pass them as missing "
            f"(--na-values), or declare the column in --schema: {{\"{col.name}\": "
            f"{{\"sdtype\": \"numerical\"}}}} reads them as missing, \"categorical\" keeps "
            f"the column as text")
    return col


def _examples(values: pd.Series, k: int = 3) -> str:
    uniq = pd.unique(values.astype(str))
    more = f" and {len(uniq) - k} more" if len(uniq) > k else ""
    return ", ".join(repr(v) for v in uniq[:k]) + more


def _integers(col: pd.Series) -> pd.Series:
    """Whole floats with missing entries as nullable ``Int64``."""
    if not pdt.is_float_dtype(col.dtype) or not col.isna().any():
        return col
    v = col.dropna().to_numpy(dtype=float)
    if v.size and np.all(v == np.round(v)) and np.all(np.abs(v) < 2.0**53):
        return col.astype("Int64")
    return col


def _is_times_of_day(col: pd.Series) -> bool:
    values = col.dropna().astype(str).str.strip()
    if values.empty or not values.map(lambda v: bool(_TIME_OF_DAY.match(v))).all():
        return False
    return bool(_as_timedelta(col).notna().sum() == len(values))


def _as_timedelta(col: pd.Series) -> pd.Series:
    return pd.to_timedelta(col.map(_pad_time, na_action="ignore"), errors="coerce")


def _pad_time(v: Any) -> Any:
    v = str(v).strip()
    return v + ":00" if v.count(":") == 1 else v


def _day_month_dates(col: pd.Series, path: Path) -> pd.Series:
    """``01/02/2012``-style dates: month first or day first, whichever reads every value (month
    first, with a warning, when both do and disagree)."""
    month_first = _try_datetime(col, None, dayfirst=False)
    day_first = _try_datetime(col, None, dayfirst=True)
    if month_first is None and day_first is None:
        raise ValueError(f"{path}: column {col.name!r} looks like dates but not every value "
                         f"parses (e.g. {_examples(col.dropna(), 2)}); declare its "
                         f"\"datetime_format\" in --schema")
    if month_first is not None and day_first is not None and not month_first.equals(day_first):
        warnings.warn(f"{path}: column {col.name!r} reads as month/day or day/month dates; "
                      f"read month first (declare \"datetime_format\" in --schema to choose)",
                      UserWarning, stacklevel=4)
    return month_first if month_first is not None else day_first


def _try_datetime(col: pd.Series, fmt: str | None, dayfirst: bool = False
                  ) -> pd.Series | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' "could not infer format" notice
        for utc in (False, True):
            try:
                out = pd.to_datetime(col, format=fmt, errors="coerce", utc=utc,
                                     dayfirst=dayfirst)
            except (ValueError, TypeError):
                continue
            if out.notna().sum() == col.notna().sum():
                return out
    return None


def _as_datetime(col: pd.Series, fmt: str | None, path: Path) -> pd.Series:
    if pdt.is_datetime64_any_dtype(col.dtype):
        return col
    out = _try_datetime(col, fmt)
    if out is None:
        parsed = pd.to_datetime(col, format=fmt, errors="coerce")
        bad = parsed.isna() & col.notna()
        raise ValueError(f"{path}: column {col.name!r} is declared datetime but "
                         f"{int(bad.sum())} value(s) such as {_examples(col[bad])} do not "
                         f"parse{f' with format {fmt!r}' if fmt else ''}")
    return out


def _as_boolean(col: pd.Series, path: Path) -> pd.Series:
    lut = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
    out = col.map(lambda v: lut.get(str(v).strip().lower(), v) if not pd.isna(v) else None)
    bad = [v for v in out.dropna() if not isinstance(v, (bool, np.bool_))]
    if bad:
        raise ValueError(f"{path}: column {col.name!r} is boolean except for value(s) "
                         f"{_examples(pd.Series(bad))}")
    return out.astype("boolean")


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV (``.csv``, ``.csv.gz``, ``.tsv``) or Parquet, atomically (a
    temporary file renamed over ``path``); times of day (timedeltas within one day) as
    ``HH:MM:SS``, so :func:`read_table` gives the same types back."""
    path = Path(path)
    kind = table_format(path)
    tmp = path.with_name(f".{path.name}.partial")
    try:
        if kind == "parquet":
            try:
                df.to_parquet(tmp, index=False)
            except ImportError:
                raise ImportError("writing Parquet needs pyarrow: pip install pyarrow") \
                    from None
        else:
            sep = "\t" if path.name.lower().endswith((".tsv", ".tsv.gz")) else ","
            comp = "gzip" if path.name.lower().endswith(".gz") else None
            csv_frame(df).to_csv(tmp, index=False, sep=sep, compression=comp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its times of day as ``HH:MM:SS`` text (what :func:`write_table` writes)."""
    out = df
    for j in range(df.shape[1]):
        col = df.iloc[:, j]
        if not pdt.is_timedelta64_dtype(col.dtype):
            continue
        s = col.dt.total_seconds()
        if not ((s.dropna() >= 0) & (s.dropna() < 86400)).all():
            continue
        sec = s.round().astype("Int64")
        text = sec.map(lambda v: None if pd.isna(v) else
                       f"{v // 3600:02d}:{v % 3600 // 60:02d}:{v % 60:02d}", na_action=None)
        if out is df:
            out = df.copy()
        out.isetitem(j, text)
    return out
