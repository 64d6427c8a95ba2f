"""SDV-style table metadata as a plain dict (no SDV import): declare column types and
constraints, and export a fitted schema in the same form.

Accepted form (SDV's single-table layout plus constraint keys)::

    {"columns": {
        "age":    {"sdtype": "numerical", "range_min": 17, "range_max": 90,
                   "decimal_places": 0, "nullable": False},
        "income": {"sdtype": "numerical", "range_min": 0.0, "decimal_places": 2},
        "sex":    {"sdtype": "categorical", "values": ["F", "M"]},
        "grade":  {"sdtype": "ordinal", "values": ["low", "mid", "high"]},  # in order
        "member": {"sdtype": "boolean"},
     },
     "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}

Pass it wherever a learner takes ``kinds`` (``ARF().fit(df, kinds=metadata)``) or to
:class:`~forestgen.data.TableEncoder`. Columns the dict does not name are inferred as usual.
Training data that break a declaration raise a ``ValueError`` naming the column. The fitted
model then keeps every decoded value inside ``[range_min, range_max]`` (values are clipped,
then rounded to ``decimal_places`` on the grid inside the range), draws only declared levels
(declared but unseen levels have probability zero) and never emits a missing value in a column
declared ``nullable: False``.

``datetime`` columns (a datetime64 dtype, naive or with a time zone) are modelled as seconds
since the epoch like any inferred datetime column, and decoded to the same dtype and time zone;
text dates must be parsed first (``pd.to_datetime(df[col], format=...)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

from forestgen.data.rules import Rules
from forestgen.data.schema import ColumnSpec, Schema, to_python_scalar

__all__ = ["SDTYPES", "apply_column_metadata", "as_metadata_dict", "constrain",
           "declared_bounds", "from_sdv_entry", "kind_for", "split_kinds", "to_metadata"]

SDTYPES = ("numerical", "categorical", "boolean", "datetime", "ordinal")
_TABLE_KEYS = {"METADATA_SPEC_VERSION", "primary_key", "alternate_keys", "sequence_key",
               "sequence_index", "column_relationships", "relationships", "tables"}
_COLUMN_KEYS = {"sdtype", "range_min", "range_max", "values", "nullable", "decimal_places",
                "computer_representation", "datetime_format", "pii", "order_by"}


def as_metadata_dict(metadata: Any) -> dict:
    """The single-table dict form of SDV metadata: an SDV ``Metadata`` /
    ``SingleTableMetadata`` object (anything with ``to_dict()``, read without importing SDV),
    SDV's multi-table dict (``{"tables": {name: {...}}}``) holding one table, or the
    single-table dict itself (returned as is)."""
    if not isinstance(metadata, dict) and callable(getattr(metadata, "to_dict", None)):
        metadata = metadata.to_dict()
    if not isinstance(metadata, dict):
        raise TypeError(f"kinds / metadata must be a dict or an SDV Metadata object, got "
                        f"{type(metadata).__name__}")
    tables = metadata.get("tables")
    if isinstance(tables, dict) and "columns" not in metadata:
        if len(tables) != 1:
            raise ValueError(f"the metadata describes {len(tables)} tables {sorted(tables)}; "
                             f"forestgen models one table: pass that table's metadata")
        (table,) = tables.values()
        metadata = {**table, "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}
    return metadata


def split_kinds(kinds: Any) -> tuple[dict, dict]:
    """Split a ``kinds`` argument into plain kind overrides and per-column metadata entries.

    ``kinds`` may map column → kind name, column → SDV column dict, or be a whole SDV metadata
    dict (``{"columns": {...}, ...}``), possibly with extra column → kind entries beside it,
    or an SDV ``Metadata`` object or its multi-table dict (:func:`as_metadata_dict`).
    """
    if kinds is None or (isinstance(kinds, dict) and not kinds):
        return {}, {}
    entries = dict(as_metadata_dict(kinds))
    if isinstance(entries.get("columns"), dict):
        cols = entries.pop("columns")
        entries = {k: v for k, v in entries.items() if k not in _TABLE_KEYS}
        entries = {**cols, **entries}
    plain, meta = {}, {}
    for name, v in entries.items():
        if isinstance(v, dict):
            meta[name] = _validate_entry(name, from_sdv_entry(name, v))
        else:
            plain[name] = v
    return plain, meta


#: sdtypes of SDV's keys: forestgen models no key column
KEY_SDTYPES = ("id",)


def from_sdv_entry(name: Any, entry: dict) -> dict:
    """An SDV column entry in forestgen's form: SDV 2's ``range_is_nullable`` as ``nullable``
    and ``range_values`` as the ``values`` of a categorical / ordinal / boolean column (both
    recorded by ``Metadata.detect_from_dataframes``), its ``high_cardinality`` flag and a
    datetime column's text range dropped (the observed range is kept anyway), and a PII or
    ``unknown`` sdtype (``first_name``, ``email``...) modelled as categorical. A key column
    (sdtype ``id``) is refused: drop it, or use the SDV-style synthesizer
    (:class:`forestgen.adapters.sdv.ForestSynthesizer`), which regenerates keys."""
    out = dict(entry)
    sdtype = out.get("sdtype")
    if sdtype in KEY_SDTYPES:
        raise ValueError(f"column {name!r} is a key (sdtype {sdtype!r}): forestgen models no "
                         f"keys; drop the column, or fit "
                         f"forestgen.adapters.sdv.ForestSynthesizer, which regenerates them")
    if isinstance(sdtype, str) and sdtype not in SDTYPES and (out.get("pii") or
                                                             sdtype == "unknown"):
        out = {"sdtype": "categorical", **{k: v for k, v in out.items() if k == "nullable"}}
        sdtype = "categorical"
    if "range_is_nullable" in out:
        nullable = out.pop("range_is_nullable")
        out.setdefault("nullable", bool(nullable))
    out.pop("high_cardinality", None)
    if "range_values" in out:
        values = [v for v in out.pop("range_values") if not _is_missing(v)]
        if sdtype in ("categorical", "ordinal") and "values" not in out:
            out["values"] = values
    if sdtype == "datetime":
        out.pop("range_min", None)
        out.pop("range_max", None)
    return out


def _is_missing(v: Any) -> bool:
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _validate_entry(name: Any, entry: dict) -> dict:
    sdtype = entry.get("sdtype")
    if sdtype not in SDTYPES:
        raise ValueError(f"column {name!r}: sdtype must be one of {SDTYPES}, got {sdtype!r}")
    unknown = sorted(set(entry) - _COLUMN_KEYS)
    if unknown:
        raise ValueError(f"column {name!r}: unknown metadata key(s) {unknown}")
    for key in ("nullable", "pii"):
        if key in entry and not isinstance(entry[key], (bool, np.bool_)):
            raise ValueError(f"column {name!r}: {key} must be True or False, got "
                             f"{entry[key]!r} ({type(entry[key]).__name__})")
    if "values" in entry and not isinstance(entry["values"], (list, tuple)):
        raise ValueError(f"column {name!r}: 'values' must be a list of the column's levels, "
                         f"got {type(entry['values']).__name__}")
    if sdtype == "ordinal" and not entry.get("values"):
        raise ValueError(f"column {name!r}: an ordinal column needs its ordered 'values'")
    numeric_keys = [k for k in ("range_min", "range_max", "decimal_places") if k in entry]
    if numeric_keys and sdtype != "numerical":
        raise ValueError(f"column {name!r}: {numeric_keys[0]!r} applies to numerical columns, "
                         f"not {sdtype!r}")
    if "values" in entry and sdtype == "numerical":
        raise ValueError(f"column {name!r}: 'values' applies to categorical/ordinal/boolean "
                         "columns")
    lo, hi = entry.get("range_min"), entry.get("range_max")
    for key, v in (("range_min", lo), ("range_max", hi)):
        if v is not None and not (isinstance(v, (int, float, np.integer, np.floating))
                                  and math.isfinite(float(v))):
            raise ValueError(f"column {name!r}: {key} must be a finite number, got {v!r}")
    if lo is not None and hi is not None and float(lo) > float(hi):
        raise ValueError(f"column {name!r}: range_min {lo} > range_max {hi}")
    dp = entry.get("decimal_places")
    if dp is not None and (not isinstance(dp, (int, np.integer)) or isinstance(dp, bool)
                           or not 0 <= dp <= 15):
        raise ValueError(f"column {name!r}: decimal_places must be an integer in [0, 15], "
                         f"got {dp!r}")
    values = entry.get("values")
    if values is not None and len(set(map(_key, values))) != len(values):
        raise ValueError(f"column {name!r}: 'values' has duplicates")
    return entry


def _key(v: Any) -> Any:
    v = to_python_scalar(v)
    return (type(v).__name__, v) if isinstance(v, bool) else v


def kind_for(series: pd.Series, entry: dict, inferred: str) -> str:
    """The encoder kind that implements an sdtype for this column (``inferred``: the kind the
    encoder would infer)."""
    sdtype = entry["sdtype"]
    if sdtype == "numerical":
        if not (pdt.is_numeric_dtype(series.dtype) and not pdt.is_bool_dtype(series.dtype)):
            raise ValueError(f"column {series.name!r} of dtype {series.dtype} cannot be "
                             "sdtype 'numerical'")
        return "integer" if pdt.is_integer_dtype(series.dtype) else "continuous"
    if sdtype == "datetime":
        if not pdt.is_datetime64_any_dtype(series.dtype):
            raise ValueError(f"column {series.name!r} of dtype {series.dtype} cannot be sdtype "
                             "'datetime'; parse it first, e.g. pd.to_datetime(df[col], "
                             "format=...)")
        return "continuous"  # seconds since the epoch; dtype and time zone restored
    if sdtype == "boolean":
        return "bool"
    if sdtype == "categorical" and inferred in ("binary", "bool"):
        return inferred
    return "categorical"


def apply_column_metadata(spec: ColumnSpec, series: pd.Series, entry: dict) -> ColumnSpec:
    """Check the training column against its declaration and record the declaration in the
    column's spec (declared levels, order, range, decimals, nullability)."""
    name = spec.name
    missing = series.isna().to_numpy()
    if entry.get("nullable") is False and missing.any():
        raise ValueError(f"column {name!r} is declared nullable=False but has "
                         f"{int(missing.sum())} missing value(s)")
    if entry["sdtype"] == "numerical":
        v = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        obs = v[~missing]
        lo, hi = entry.get("range_min"), entry.get("range_max")
        if lo is not None and (obs < float(lo)).any():
            raise ValueError(f"column {name!r}: value {float(obs[obs < float(lo)][0])!r} is below "
                             f"range_min {lo}")
        if hi is not None and (obs > float(hi)).any():
            raise ValueError(f"column {name!r}: value {float(obs[obs > float(hi)][0])!r} is above "
                             f"range_max {hi}")
        dp = entry.get("decimal_places")
        if dp is not None:
            bad = np.abs(np.round(obs, dp) - obs) > 4 * np.spacing(np.abs(obs))
            if bad.any():
                raise ValueError(f"column {name!r}: value {float(obs[bad][0])!r} has more than "
                                 f"{dp} decimal places")
            spec.decimals = int(dp)
        spec.range_min = -math.inf if lo is None else float(lo)
        spec.range_max = math.inf if hi is None else float(hi)
    elif entry["sdtype"] == "datetime":
        pass  # kept inside the observed range like every numeric column; nullability below
    else:
        values = entry.get("values")
        if entry["sdtype"] == "boolean":
            values = [False, True] if values is None else values
        if values is not None:
            declared = [to_python_scalar(x) for x in values]
            keys = {_key(x) for x in declared}
            seen = pd.unique(series.dropna().astype(object).to_numpy())
            extra = [x for x in seen if _key(x) not in keys]
            if extra:
                raise ValueError(f"column {name!r}: value {to_python_scalar(extra[0])!r} is not "
                                 f"among the declared values {declared}")
            if spec.kind != "bool":
                spec.categories = declared
            spec.upper = float(len(spec.categories) - 1)
        spec.ordinal = entry["sdtype"] == "ordinal"
    spec.nullable = bool(entry.get("nullable", True))
    return spec


def declared_bounds(schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Per-column declared bounds ``(lo [d], hi [d])`` in encoded units: a numeric column's
    ``[range_min, range_max]`` narrowed to its grid (step or decimals); ``-inf``/``inf``
    where nothing is declared and for discrete columns (their codes are the declared levels)."""
    lo = np.full(schema.d, -np.inf)
    hi = np.full(schema.d, np.inf)
    for j, spec in enumerate(schema.columns):
        if spec.is_discrete:
            continue
        a, b = spec.range_min, spec.range_max
        if spec.step is not None:
            if math.isfinite(a):
                a = float(spec.on_step(math.ceil(round(spec.step_units(a), 6))))
            if math.isfinite(b):
                b = float(spec.on_step(math.floor(round(spec.step_units(b), 6))))
        elif spec.decimals is not None:
            scale = 10.0 ** spec.decimals
            if math.isfinite(a):
                a = math.ceil(round(a * scale, 6)) / scale
            if math.isfinite(b):
                b = math.floor(round(b * scale, 6)) / scale
        lo[j], hi[j] = a, b
    return lo, hi


def constrain(Z: np.ndarray, schema: Schema) -> np.ndarray:
    """Clip encoded numeric columns into their declared ranges, on the grid of their declared
    decimals, and set each column determined by a mapping of the table's rules to the image
    of its determinant (:mod:`forestgen.data.rules`), in place; returns ``Z``. Missing entries
    stay missing."""
    lo, hi = declared_bounds(schema)
    for j in np.nonzero(np.isfinite(lo) | np.isfinite(hi))[0]:
        np.clip(Z[:, j], lo[j], hi[j], out=Z[:, j])
    if schema.rules and schema.rules.get("mappings"):
        Rules.from_dict(schema.rules).apply(Z)
    return Z


def to_metadata(schema_or_model: Any) -> dict:
    """The schema of a fitted model (or a :class:`Schema`) as SDV-style metadata: sdtype,
    levels, range (declared, else observed), decimal places and nullability (``False`` when
    the training column had no missing value) per column. Fitting on the same data with this
    dict reproduces the schema's kinds, levels, ranges and decimals."""
    schema = schema_or_model if isinstance(schema_or_model, Schema) else schema_or_model.schema_
    cols: dict = {}
    for spec in schema.columns:
        if spec.dtype.startswith("datetime64"):
            entry: dict = {"sdtype": "datetime"}
        elif spec.kind == "bool":
            entry = {"sdtype": "boolean"}
        elif spec.kind in ("categorical", "binary"):
            entry = {"sdtype": "ordinal" if spec.ordinal else "categorical",
                     "values": list(spec.categories or [])}
        else:
            if spec.is_discrete:  # integer coded as its observed levels
                lo, hi = min(spec.categories), max(spec.categories)
            else:
                lo, hi = spec.lower, spec.upper
            entry = {"sdtype": "numerical",
                     "range_min": to_python_scalar(spec.range_min if math.isfinite(spec.range_min)
                                                   else lo),
                     "range_max": to_python_scalar(spec.range_max if math.isfinite(spec.range_max)
                                                   else hi),
                     "computer_representation": "Int64" if spec.kind == "integer" else "Float"}
            if spec.decimals is not None:
                entry["decimal_places"] = int(spec.decimals)
        entry["nullable"] = bool(spec.has_missing)
        cols[spec.name] = entry
    return {"columns": cols, "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}
