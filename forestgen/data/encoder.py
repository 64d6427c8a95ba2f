"""Encode mixed-type tables (DataFrame / ndarray / tensor) as float64 matrices and back.

Numeric columns are stored as their values, discrete columns (categorical, bool, binary,
ordinal integers and floats) as integer codes ``0..k-1``; ``NaN`` marks a missing value and code
``k`` marks a level unseen at fit time. The input forms are read by :mod:`forestgen.data.frames`,
each column's spec is fitted by :mod:`forestgen.data.column_kinds`, and values are converted
and cast back by :mod:`forestgen.data.dtypes`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

from forestgen.data.calendar import from_month_scale, to_month_scale
from forestgen.data.column_kinds import (
    check_level_count,
    fit_column,
    infer_kind,
    mark_unobserved,
    warn_identifiers,
)
from forestgen.data.dtypes import (
    MAX_EXACT_INT,
    cast_labels,
    cast_numeric,
    is_category_str,
    is_numeric_str,
    is_time_dtype,
    nullable_int,
    parse_category,
    str_to_dtype,
    time_scalar_to_seconds,
    time_seconds,
    to_float,
)
from forestgen.data.frames import as_frame, check_duplicates, is_tensor
from forestgen.data.inequalities import detected_inequalities
from forestgen.data.metadata import apply_column_metadata, constrain, kind_for, split_kinds
from forestgen.data.rules import (
    MAX_THRESHOLD_VALUES,
    Affine,
    Mapping,
    Rules,
    find_affine,
    find_mappings,
    find_thresholds,
    parse_constraints,
    threshold_cuts,
)
from forestgen.data.schema import KINDS, ColumnSpec, Schema, to_python_scalar
from forestgen.validation import check_text_in_numbers

# infer_kind, mark_unobserved, time_scalar_to_seconds and time_seconds stood here before and
# are re-exported
__all__ = ["TableEncoder", "infer_kind", "mark_unobserved", "time_scalar_to_seconds",
           "time_seconds"]

_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


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


def _note_numbers_from_text(series: pd.Series, v: np.ndarray, spec: ColumnSpec,
                            notes: list) -> None:
    """Note the values of a column of number levels that came as text (``'10'``) and were
    read as a number, for the query's warning (as :func:`_levels_from_text`)."""
    cats = spec.categories or []
    text = np.fromiter((isinstance(x, str) for x in series.to_numpy(dtype=object)), bool,
                       len(series)) & np.isin(v, np.asarray(cats, np.float64))
    if text.any():
        r = int(np.argmax(text))
        level = next(c for c in cats if float(c) == v[r])
        notes.append(("text", spec.name, int(text.sum()), series.iloc[r], level))


def _text_dtype(dtype: Any) -> bool:
    """A pandas string dtype (values are ``str`` or missing), not ``object``."""
    return isinstance(dtype, pd.StringDtype)


def _encode_distinct(series: pd.Series, index: pd.Index, k: int,
                     strict: bool) -> np.ndarray | None:
    """Codes of a text or categorical column (``k`` for a value not in ``index``, NaN for a
    missing one) from its distinct values: the codes a lookup of every row gives. ``None``
    when ``strict`` and a value is not a level (the caller's row-by-row path reads such values
    and notes them)."""
    rows, distinct = pd.factorize(series, use_na_sentinel=True)
    idx = index.get_indexer(np.asarray(distinct, dtype=object))
    if strict and (idx < 0).any():
        return None
    table = np.append(np.where(idx < 0, k, idx).astype(np.float64), np.nan)
    return table[rows]  # (row code -1, a missing value, reads the last entry: NaN)


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
    max_spiky_levels:
        ``None`` (default: ``max_ordinal_levels``) or the most distinct values of a column with
        a point mass (the two codings above that need one) coded as ordered levels, so that a
        learner may code spiky columns as levels and dense scales past ``max_ordinal_levels``
        as numbers (``Anchored``: 128 and 16).
    heaps:
        ``True``: a numeric column's heaps (:func:`~forestgen.data.column_kinds.heaps`: values
        that recur far more often than their neighbours, such as rounded incomes) are point
        masses (atoms) beside the values holding >= 10% of its rows, and so are the values seen
        twice or more of a discrete-valued column without such a value (a score on a sparse
        set of values); ``Anchored`` asks for them; default ``False``.

    Notes
    -----
    The table's logical rules (:mod:`forestgen.data.rules`) are found at fit and kept in the
    schema: mappings between columns that hold in every training row (unless the metadata
    says ``"detect_mappings": False``), the inequalities between numeric columns that hold in
    every training row and are unlikely by chance (:mod:`forestgen.data.inequalities`; off with
    ``"detect_inequalities": False``) and the metadata's declared ``"constraints"`` (SDV's
    ``FixedCombinations``, ``Inequality``, ``Range``).
    """

    def __init__(self, kinds: dict | None = None, max_ordinal_levels: int = 32,
                 max_spiky_levels: int | None = None, heaps: bool = False) -> None:
        self.constraints: list = []
        self.detect_mappings = True
        self.detect_inequalities = True
        if isinstance(kinds, dict) and (isinstance(kinds.get("constraints"), list)
                                        or isinstance(kinds.get("detect_mappings"), bool)
                                        or isinstance(kinds.get("detect_inequalities"), bool)):
            kinds = dict(kinds)
            if isinstance(kinds.get("constraints"), list):
                self.constraints = kinds.pop("constraints")
            if isinstance(kinds.get("detect_mappings"), bool):
                self.detect_mappings = kinds.pop("detect_mappings")
            if isinstance(kinds.get("detect_inequalities"), bool):
                self.detect_inequalities = kinds.pop("detect_inequalities")
        self.kinds, self.metadata = split_kinds(kinds)
        self.max_ordinal_levels = int(max_ordinal_levels)
        self.max_spiky_levels = None if max_spiky_levels is None else int(max_spiky_levels)
        self.heaps = bool(heaps)
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
        self._fit(X)
        return self

    def _fit(self, X: Any, background_rules: bool = False) -> np.ndarray:
        """Fit on ``X`` and return its encoding (encoded once: the unobserved levels and the
        rules are read off the same matrix :meth:`transform` returns)."""
        self.wait_rules(reraise=False)  # (a search an earlier fit left running: not this fit's)
        df, input_type = as_frame(X)
        if df.shape[0] == 0 or df.shape[1] == 0:
            raise ValueError(f"cannot fit on an empty table of shape {df.shape}")
        check_duplicates(df)
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
        while unlike := [j for j in self._unlike_scales(specs, names)  # (orders compare
                         if specs[j].month_anchor is not None or specs[j].wall_clock]:
            for j in unlike:
                specs[j] = self._fit_declared(df.iloc[:, j], names[j], calendar=False)
        self.schema = Schema(columns=specs, input_type=input_type)  # type: ignore[arg-type]
        self._prepare()
        Z = self.transform(df)  # (the encoding reads neither unobserved levels nor rules)
        for j, spec in enumerate(specs):
            if spec.kind in ("categorical", "bool", "binary"):
                mark_unobserved(spec, Z[:, j])
        warn_identifiers(df, specs)
        if self.constraints or (not background_rules and (self.detect_mappings
                                                          or self.detect_inequalities)):
            rules = self._find_rules(Z)  # (declared constraints: their errors raised here)
            self.schema.rules = rules.to_dict() if rules else None
        elif self.detect_mappings or self.detect_inequalities:
            self._start_rules(Z)
        return Z

    def _start_rules(self, Z: np.ndarray) -> None:
        """The rule search of ``Z`` on a thread of its own; :meth:`wait_rules` joins it."""
        box: dict[str, Any] = {}

        def search() -> None:
            try:
                rules = self._find_rules(Z)
                box["rules"] = rules.to_dict() if rules else None
            except BaseException as e:  # (re-raised by wait_rules in the caller's thread)
                box["error"] = e

        thread = threading.Thread(target=search, name="forestgen-rules", daemon=True)
        self._pending_rules = (thread, box)
        thread.start()

    def wait_rules(self, reraise: bool = True) -> None:
        """Wait for a rule search that ``fit_transform(..., background_rules=True)`` left
        running and put its rules in the schema; an error the search raised is raised here
        (with ``reraise=False`` it is dropped: for a caller already failing for another
        reason). Nothing to do when no search is pending."""
        pending, self._pending_rules = getattr(self, "_pending_rules", None), None
        if pending is None:
            return
        thread, box = pending
        thread.join()
        if "error" in box:
            if reraise:
                raise box["error"]
            return
        self._require_schema().rules = box["rules"]

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
            taken = {m.determined for m in maps} | {m.determinant for m in maps}
            numeric = [not s.is_discrete and not str(s.dtype).startswith(("datetime", "timedelta"))
                       for s in schema.columns]
            few = {j for j, s in enumerate(schema.columns)  # level-coded, few levels
                   if s.is_discrete and 2 <= k[j] <= MAX_THRESHOLD_VALUES}
            for a, b, gaps, images in find_thresholds([Z[:, j] for j in range(schema.d)],
                                                      numeric, taken, candidates=few):
                spec = schema.columns[a]
                grid = (spec.step if spec.step is not None else
                        10.0 ** -spec.decimals if spec.decimals is not None else 0.0)
                cuts = threshold_cuts(gaps, float(np.min(Z[:, a])), float(np.max(Z[:, a])),
                                      grid)
                if cuts is not None:
                    maps.append(Mapping(a, b, images.astype(np.float64), cuts))
            taken = {m.determined for m in maps} | {m.determinant for m in maps}
            grids = [0.0 if s.is_discrete else s.step if s.step is not None else
                     10.0 ** -s.decimals if s.decimals is not None else
                     1.0 if s.kind == "integer" else 0.0 for s in schema.columns]
            for a, b, alpha, beta, tol, grid in find_affine(
                    [Z[:, j] for j in range(schema.d)], numeric, taken, grids):
                maps.append(Affine(a, b, alpha, beta, tol, grid))
        cons = parse_constraints(self.constraints, schema.names, Z, schema)
        if self.detect_inequalities:
            cons += detected_inequalities(Z, schema, {m.determined for m in maps}, cons)
        return Rules(maps, cons)

    def _fit_declared(self, series: pd.Series, name: Any, calendar: bool = True) -> ColumnSpec:
        entry = self._lookup(self.metadata, name)
        if entry is None:
            kind = self._override(name)
            if kind is None:
                check_text_in_numbers(series, name)
            return check_level_count(fit_column(
                series, kind, self.max_ordinal_levels,
                discrete_floats=getattr(self, "_discrete_floats", True),
                max_spiky_levels=self.max_spiky_levels, with_heaps=self.heaps,
                calendar=calendar))
        kind = kind_for(series, entry, infer_kind(series))
        spec = fit_column(series, kind, self.max_ordinal_levels,
                          discrete_floats=getattr(self, "_discrete_floats", True),
                          max_spiky_levels=self.max_spiky_levels, with_heaps=self.heaps,
                          calendar=calendar)
        return check_level_count(apply_column_metadata(spec, series, entry))

    def _unlike_scales(self, specs: list, names: list) -> list[int]:
        """The columns of a declared order (``Inequality``, ``Range``) whose columns are not
        all on one scale — a date on a month scale (:mod:`forestgen.data.calendar`) beside
        seconds or another anchor's months: they keep seconds, in which orders compare."""
        out: set[int] = set()
        for c in self.constraints or []:
            params = c.get("constraint_parameters") if isinstance(c, dict) else None
            if not isinstance(params, dict) or c.get("constraint_class") not in (
                    "Inequality", "Range"):
                continue
            cols = [next((j for j, n in enumerate(names) if n == params.get(k)
                          and type(n) is type(params.get(k))), None)
                    for k in ("low_column_name", "middle_column_name", "high_column_name")]
            cols = [j for j in cols if j is not None]
            if len({(specs[j].month_anchor, specs[j].wall_clock) for j in cols}) > 1:
                out.update(cols)
        return sorted(out)

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
        df, input_type = as_frame(X)
        if input_type != "dataframe":
            if df.shape[1] != schema.d:
                raise ValueError(f"expected {schema.d} columns, got {df.shape[1]}")
            return [df.iloc[:, j] for j in range(schema.d)]
        check_duplicates(df)
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
            # a level unseen at fit (code k) or declared without training rows (no support)
            unseen = codes == spec.n_levels
            if spec.unobserved:
                unseen |= np.isin(codes, spec.unobserved)
            if unseen.any():
                example = to_python_scalar(series.to_numpy()[np.argmax(unseen)])
                known = [c for c, ok in zip(spec.categories or [], spec.support) if ok]
                notes.append(("unseen", spec.name, int(unseen.sum()), example, known))
        return codes

    def _encode_column(self, series: pd.Series, spec: ColumnSpec, index: pd.Index | None,
                       notes: list | None) -> np.ndarray:
        if not spec.is_discrete:  # (fit refused infinite values; a query's are out of range)
            if spec.dtype.startswith(("datetime", "timedelta")) and not pdt.is_numeric_dtype(
                    series.dtype) and not is_time_dtype(series.dtype):
                series = _read_times(series, spec)  # (text dates of a query's rows)
            elif spec.wall_clock and isinstance(series.dtype, pd.DatetimeTZDtype):
                series = series.dt.tz_convert(str_to_dtype(spec.dtype).tz)  # (its own zone)
            v = to_float(series, spec.name, infinite=True, wall=spec.wall_clock)
            return v if spec.month_anchor is None else to_month_scale(v, spec.month_anchor)
        k = spec.n_levels
        exact = pdt.is_integer_dtype(series.dtype) and any(
            isinstance(c, int) and abs(c) > MAX_EXACT_INT for c in spec.categories)
        if is_numeric_str(spec.dtype) and not exact:
            v = to_float(series, spec.name, infinite=True)
            if notes is not None and not pdt.is_numeric_dtype(series.dtype):
                _note_numbers_from_text(series, v, spec, notes)
            cats = np.asarray(spec.categories, dtype=np.float64)
            order = np.argsort(cats, kind="stable")
            sorted_cats = cats[order]
            pos = np.clip(np.searchsorted(sorted_cats, v), 0, k - 1)
            hit = sorted_cats[pos] == v
            codes = np.where(hit, order[pos], k).astype(np.float64)
            codes[np.isnan(v)] = np.nan
            return codes
        assert index is not None
        if (_text_dtype(series.dtype) or isinstance(series.dtype, pd.CategoricalDtype)) \
                and spec.kind != "bool":
            # text and categorical columns: each distinct value looked up once (no Python
            # object per row)
            codes = _encode_distinct(series, index, k, notes is not None)
            if codes is not None:
                return codes
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

    def fit_transform(self, X: Any, background_rules: bool = False) -> np.ndarray:
        """Fit on ``X`` and return its encoding (the same matrix as ``fit(X).transform(X)``,
        with ``X`` encoded once instead of twice).

        ``background_rules=True``: the search for detected rules (mappings, thresholds,
        affine relations, inequalities) runs on a thread of its own while the caller goes
        on, and ``schema.rules`` stays ``None`` until :meth:`wait_rules`, which the caller
        must call before anything reads the rules (and also when it fails, so that the
        thread ends). The rules are the same (a function of the returned matrix). Declared
        ``constraints`` are always searched at once."""
        return self._fit(X, background_rules)

    # ------------------------------------------------------------------ inverse
    @staticmethod
    def _decode(z: np.ndarray, spec: ColumnSpec) -> Any:
        missing = np.isnan(z)
        if not spec.is_discrete:
            vals = spec.to_grid(z) + 0.0  # (+ 0.0: a draw rounded up to 0 is 0, not -0)
            if spec.month_anchor is not None:
                vals = from_month_scale(vals, spec.month_anchor)
            return cast_numeric(vals, spec.dtype, spec.wall_clock)
        k = spec.n_levels
        codes = np.clip(np.rint(np.where(missing, 0.0, z)), 0, k - 1).astype(np.int64)
        cats = spec.categories or []
        if is_category_str(spec.dtype):
            inner, ordered = parse_category(spec.dtype)
            cat_index = pd.Index(np.array(cats + [None], dtype=object)[:-1])
            if inner is not None:
                cat_index = cat_index.astype(inner)
            codes[missing] = -1
            dtype = pd.CategoricalDtype(cat_index, ordered=ordered)
            return pd.Categorical.from_codes(codes, dtype=dtype)
        dtype = str_to_dtype(spec.dtype) if is_numeric_str(spec.dtype) else None
        if dtype is not None and dtype.kind in "iu" and any(
                isinstance(c, int) and abs(c) > MAX_EXACT_INT for c in cats):
            # integers beyond 2**53: index the exact levels, never through float64
            exact = pd.array(cats, dtype=nullable_int(np.dtype(dtype.name.lower())))[codes]
            exact[missing] = pd.NA
            return exact if missing.any() or not isinstance(dtype, np.dtype) else \
                exact.to_numpy(dtype=dtype)
        if is_numeric_str(spec.dtype):
            vals = np.asarray(cats, dtype=np.float64)[codes]
            vals[missing] = np.nan
            return cast_numeric(vals, spec.dtype)
        cat_arr = np.empty(k, dtype=object)
        cat_arr[:] = cats
        dtype = str_to_dtype(spec.dtype)
        if isinstance(dtype, pd.StringDtype):  # the k levels converted once, then taken
            codes[missing] = -1
            return pd.array(cat_arr, dtype=dtype).take(codes, allow_fill=True)
        return cast_labels(cat_arr[codes], missing, spec.dtype)

    def decode_mean(self, j: int, values: np.ndarray) -> Any:
        """Conditional means of numeric column ``j`` (encoded units, NaN = none) in the
        column's training dtype where a mean is a value of it — float columns in their float
        dtype, datetime / timedelta columns as times (nanoseconds) — and float64 for integer
        and bool columns, whose means are generally not integers (``impute`` puts them on the
        column's values instead)."""
        spec = self._require_schema().columns[j]
        vals = np.asarray(values, dtype=np.float64)
        dtype = str_to_dtype(spec.dtype) if is_numeric_str(spec.dtype) or \
            spec.dtype.startswith(("datetime", "timedelta")) else None
        if dtype is None or dtype.kind in "iub":
            return vals
        if spec.month_anchor is not None:
            vals = from_month_scale(vals, spec.month_anchor)
        return cast_numeric(vals, spec.dtype, spec.wall_clock)

    def inverse_transform(self, Z: Any) -> pd.DataFrame:
        """Decode a float matrix back to a DataFrame with the fitted columns and dtypes."""
        schema = self._require_schema()
        if is_tensor(Z):
            Z = Z.detach().cpu().numpy()
        Z = np.array(Z, dtype=np.float64, order="F")  # (a copy: each column contiguous)
        if Z.ndim != 2 or Z.shape[1] != schema.d:
            raise ValueError(f"expected an array of shape (n, {schema.d}), got {Z.shape}")
        constrain(Z, schema)
        data = {j: self._decode(Z[:, j], spec) for j, spec in enumerate(schema.columns)}
        out = pd.DataFrame(data, index=pd.RangeIndex(Z.shape[0]), copy=False)
        out.columns = pd.Index(np.array(schema.names + [None], dtype=object)[:-1]).infer_objects()
        return out


def _read_times(series: pd.Series, spec: ColumnSpec) -> pd.Series:
    """A query's times given as text (or objects) for a datetime / timedelta column: each
    distinct value read as :func:`time_scalar_to_seconds` reads a condition's (a naive time
    in the column's time zone), as seconds; ``ValueError`` naming the column and value."""
    obj = series.astype(object)
    missing = obj.isna().to_numpy()
    out = np.full(len(obj), np.nan)
    vals = obj.to_numpy()
    seen: dict = {}
    for i in np.flatnonzero(~missing):
        v = vals[i]
        if v not in seen:
            try:
                seen[v] = time_scalar_to_seconds(v, spec.dtype, spec.wall_clock)
            except (ValueError, TypeError, OverflowError):
                raise ValueError(f"column {spec.name!r} holds times; {v!r} is not a time"
                                 ) from None
        out[i] = seen[v]
    return pd.Series(out, index=series.index, name=series.name)
