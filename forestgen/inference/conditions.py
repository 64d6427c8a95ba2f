"""The evidence language: parse user conditions into encoded per-row evidence.

See the module docstring of :mod:`forestgen.inference` for the user-facing reference.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forestgen.data.calendar import MONTH, to_month_scale
from forestgen.data.encoder import time_scalar_to_seconds
from forestgen.data.rules import Rules
from forestgen.data.schema import ColumnSpec, Schema, to_python_scalar
from forestgen.data.support import grid_step, latent_interval, off_levels
from forestgen.validation import warn_input

__all__ = ["Not", "Evidence", "ZeroProbabilityError", "parse_conditions", "evidence_from_frame",
           "ON_EMPTY", "check_on_empty", "blank_rows", "sample_conditions", "report_empty",
           "column_index", "target_index"]


class ZeroProbabilityError(ValueError):
    """The evidence has probability (or density) zero under the model."""


#: What a conditional query does with evidence of probability zero: raise
#: :class:`ZeroProbabilityError` (naming the row and column), draw those rows without their
#: evidence, or return them with every entry but their given values missing (both with a warning).
ON_EMPTY = ("raise", "unconditional", "nan")


def check_on_empty(on_empty: str | None, per_row: bool) -> str:
    """``on_empty`` checked against :data:`ON_EMPTY`; ``None`` (the default) is ``"nan"`` for
    per-row evidence (as per-row queries answer NaN for such a row) and ``"raise"`` for one
    evidence set."""
    if on_empty is None:
        return "nan" if per_row else "raise"
    if on_empty not in ON_EMPTY:
        raise ValueError(f"on_empty must be one of {ON_EMPTY}, got {on_empty!r}")
    return on_empty


def sample_conditions(model, n, conditions, on_empty: str | None):
    """``(evidence, per_row, on_empty, n, index)`` of a conditional ``sample`` call: the parsed
    ``conditions``, ``on_empty`` checked (:func:`check_on_empty`), ``n`` checked (with per-row
    evidence ``None`` or the number of rows, which it becomes) and the evidence rows' labels
    (``None`` for one evidence set)."""
    if on_empty is not None:
        check_on_empty(on_empty, False)
    ev, per_row = parse_conditions(model, conditions, on_empty)
    on_empty = check_on_empty(on_empty, per_row)
    index = None
    if per_row:
        index = conditions.index
        if n is not None and n != ev.m:
            raise ValueError(f"with per-row evidence n must be None or len(conditions) = {ev.m},"
                             f" got {n!r}")
        n = ev.m
    elif n is None:
        raise ValueError("n is required with a dict of conditions")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    return ev, per_row, on_empty, int(n), index


def report_empty(msg: str, n_bad: int, on_empty: str, unit: str = "row(s)",
                 stacklevel: int = 3) -> None:
    """What a conditional draw does with ``n_bad`` rows of zero-probability evidence
    (``msg`` names the first): raise :class:`ZeroProbabilityError` (``on_empty="raise"``), or
    warn that they are drawn unconditionally / returned with their given values only."""
    if on_empty == "raise":
        raise ZeroProbabilityError(f"{msg}; pass on_empty='unconditional' to fall back to "
                                   f"unconditional sampling for such rows, or 'nan' to return "
                                   f"them as missing")
    what = ("drawn unconditionally" if on_empty == "unconditional"
            else "returned with their given values only")
    warnings.warn(f"{msg}; {n_bad} {unit} {what} (on_empty={on_empty!r})", RuntimeWarning,
                  stacklevel=stacklevel + 1)


def blank_rows(df: pd.DataFrame, rows: np.ndarray, keep: np.ndarray) -> pd.DataFrame:
    """``df`` with the entries of its positional ``rows`` missing, except where ``keep`` (bool
    ``[len(rows), n_columns]``, the rows' given values) holds (``on_empty="nan"``). Integer and
    bool columns that receive a missing entry become pandas' nullable ``Int64`` / ``boolean``,
    so the other rows keep their values."""
    rows = np.asarray(rows, np.int64)
    if len(rows) == 0:
        return df
    df = df.copy()
    for j, c in enumerate(df.columns):
        r = rows[~np.asarray(keep, bool)[:, j]]
        if len(r) == 0:
            continue
        col = df[c]
        if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iu":
            col = col.astype("Int64")
        elif isinstance(col.dtype, np.dtype) and col.dtype.kind == "b":
            col = col.astype("boolean")
        else:
            col = col.copy()
        col.iloc[r] = np.nan if col.dtype == object else None
        df[c] = col
    return df


class Not:
    """Negation of a level set of a discrete column: ``{"sex": Not({"Male"})}``.

    ``Not(level)`` and ``Not({level, ...})`` both work; the complement is taken over the levels
    seen at fit time. Only discrete (categorical, bool, binary, ordinal-integer) columns.
    """

    __slots__ = ("levels",)

    def __init__(self, levels: Any):
        if isinstance(levels, Not):
            raise TypeError("Not(Not(...)) is not supported; pass the level set itself")
        if isinstance(levels, tuple):
            raise TypeError("Not(...) negates level sets, not intervals")
        if isinstance(levels, (set, frozenset, list)):
            self.levels = frozenset(to_python_scalar(v) for v in levels)
        else:
            self.levels = frozenset([to_python_scalar(levels)])

    def __repr__(self) -> str:
        return f"Not({set(self.levels)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Not) and other.levels == self.levels

    def __hash__(self) -> int:
        return hash(("Not", self.levels))


_COMPLEX = (tuple, set, frozenset, list, Not)


@dataclass
class Evidence:
    """Encoded evidence for ``m`` rows over the ``d`` model columns.

    ``point[i, j]``: an encoded value (numeric value or level code), NaN = none; it routes rows
    through the trees and contributes ``leaf_model.log_prob``. ``lo``/``hi``: interval evidence on
    numeric columns (NaN = none, +-inf = open end). ``sets[j] = (active [m], mask [m, k])``:
    level-set evidence on discrete columns.
    """

    point: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sets: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    unseen: np.ndarray | None = None  # bool [m, d]: levels unseen at fit, left free

    @classmethod
    def empty(cls, m: int, d: int) -> Evidence:
        nan = np.full((m, d), np.nan)
        return cls(nan.copy(), nan.copy(), nan.copy(), {})

    @property
    def m(self) -> int:
        return self.point.shape[0]

    @property
    def d(self) -> int:
        return self.point.shape[1]

    def interval_active(self) -> np.ndarray:
        return ~np.isnan(self.lo)

    def active(self) -> np.ndarray:
        """bool ``[m, d]``: which columns carry evidence in each row."""
        act = ~np.isnan(self.point) | self.interval_active()
        for j, (a, _) in self.sets.items():
            act[:, j] |= a
        return act

    def take(self, idx: np.ndarray) -> Evidence:
        return Evidence(self.point[idx], self.lo[idx], self.hi[idx],
                        {j: (a[idx], mk[idx]) for j, (a, mk) in self.sets.items()})

    def only(self, row: int, j: int) -> Evidence:
        """Row ``row`` restricted to column ``j``'s evidence."""
        ev = Evidence.empty(1, self.d)
        ev.point[0, j] = self.point[row, j]
        ev.lo[0, j] = self.lo[row, j]
        ev.hi[0, j] = self.hi[row, j]
        if j in self.sets:
            a, mk = self.sets[j]
            ev.sets[j] = (a[row : row + 1].copy(), mk[row : row + 1].copy())
        return ev

    def broadcast(self, n: int) -> Evidence:
        """Repeat a one-row evidence ``n`` times (views, no copies of level masks)."""
        if self.m != 1:
            raise ValueError("only one-row evidence can be broadcast")
        rep = np.zeros(n, np.int64)
        return self.take(rep)

    def copy(self) -> Evidence:
        return Evidence(self.point.copy(), self.lo.copy(), self.hi.copy(),
                        {j: (a.copy(), mk.copy()) for j, (a, mk) in self.sets.items()})

    def drop_column(self, j: int) -> Evidence:
        ev = self.copy()
        ev.point[:, j] = np.nan
        ev.lo[:, j] = np.nan
        ev.hi[:, j] = np.nan
        ev.sets.pop(j, None)
        return ev


# --------------------------------------------------------------------------- helpers


def column_index(schema: Schema, name: Any) -> int:
    """Index of the column ``name`` in ``schema`` (a label of the same type first, then any
    equal one); ``KeyError`` naming the model's columns if there is none."""
    name = to_python_scalar(name)
    for j, spec in enumerate(schema.columns):
        if spec.name == name and type(spec.name) is type(name):
            return j
    for j, spec in enumerate(schema.columns):
        if spec.name == name:
            return j
    raise KeyError(f"unknown column {name!r} in conditions; the model's columns are "
                   f"{schema.names}")


def target_index(schema: Schema, target: Any) -> int:
    """Index of a query's ``target`` column; ``KeyError`` naming the model's columns."""
    try:
        return column_index(schema, target)
    except KeyError:
        raise KeyError(f"unknown target column {target!r}; the model's columns are "
                       f"{schema.names}") from None


_column_index = column_index  # the former name, for code written against it


def _is_missing(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    try:
        return isinstance(v, (float, np.floating)) and math.isnan(v)
    except TypeError:
        return False


def _level_code(spec: ColumnSpec, value: Any) -> int:
    value = to_python_scalar(value)
    if _is_missing(value):
        raise ValueError(f"column {spec.name!r}: missing value (NaN/None) is not a level; "
                         f"leave the column out to keep it free")
    cats = spec.categories or []
    for c, cat in enumerate(cats):
        if cat == value and type(cat) is type(value):
            return c
    for c, cat in enumerate(cats):
        try:
            if cat == value and not (isinstance(cat, str) ^ isinstance(value, str)):
                return c
        except Exception:  # noqa: BLE001 - exotic comparisons
            continue
    raise ValueError(f"column {spec.name!r}: level {value!r} was not seen at fit time "
                     f"(known levels: {cats})")


def _level_mask(spec: ColumnSpec, levels: Iterable) -> np.ndarray:
    mask = np.zeros(spec.n_levels, bool)
    for v in levels:
        mask[_level_code(spec, v)] = True
    return mask


def _as_number(spec: ColumnSpec, value: Any, what: str) -> float:
    if not _is_missing(value) and not isinstance(value, (int, float, np.number)):
        try:  # a datetime / timedelta column takes times (Timestamp, ISO string, Timedelta)
            t = time_scalar_to_seconds(value, spec.dtype, spec.wall_clock)
        except (ValueError, TypeError) as err:
            raise ValueError(f"column {spec.name!r} holds times; {what} {value!r} is not "
                             f"a time ({err})") from None
        if t is not None:
            value = t if spec.month_anchor is None else float(
                to_month_scale(np.array([t]), spec.month_anchor)[0])
    value = to_python_scalar(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, bool)) or (
            isinstance(value, bool) and not spec.is_discrete):
        raise ValueError(f"column {spec.name!r} is numeric ({spec.kind}); {what} {value!r} "
                         f"is not a number")
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"column {spec.name!r}: {what} is NaN; leave the column out to keep "
                         f"it free")
    if math.isinf(x):
        raise ValueError(f"column {spec.name!r}: {what} {x} is not finite")
    return x


def _bounds(spec: ColumnSpec, value: tuple) -> tuple[float, float]:
    """A closed interval condition ``(low, high)``: on an ordinal-number column its bounds; on
    a numeric column the stored latent interval ``(lo, hi]``
    (:func:`forestgen.data.support.latent_interval`: on a grid the rounding cells of the grid
    points in ``[low, high]``, else ``(nextafter(low, -inf), high]``; open past the observed
    range, empty outside it)."""
    if len(value) != 2:
        raise ValueError(f"column {spec.name!r}: an interval is a pair (low, high), got {value!r}")
    low = -np.inf if value[0] is None else _as_number(spec, value[0], "interval bound")
    high = np.inf if value[1] is None else _as_number(spec, value[1], "interval bound")
    if not low < high:
        raise ValueError(f"column {spec.name!r}: empty interval ({low}, {high}); need low < high "
                         f"(use a plain value for equality)")
    if spec.is_discrete:  # ordinal numbers: the caller takes the levels in [low, high]
        return low, high
    out = latent_interval(spec, low, high)
    if out is None:
        what = "integers" if spec.kind == "integer" else _grid_words(spec)
        raise ValueError(f"column {spec.name!r} holds {what} and none lies in "
                         f"[{value[0]}, {value[1]}]")
    return out


def _grid_words(spec: ColumnSpec) -> str:
    """A numeric column's grid as a user reads it: ``dates every 3 months``, ``times every
    1 day``, ``values on a 0.5 grid``."""
    step = grid_step(spec)
    if spec.month_anchor is not None:
        return f"dates every {step / MONTH:g} month(s)"
    if spec.dtype.startswith(("datetime", "timedelta")) and spec.step is not None:
        for unit, size in (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0)):
            if step % size == 0:
                return f"times every {step / size:g} {unit}(s)"
    return f"values on a {step:g} grid"


def _set_cell(ev: Evidence, i: int, j: int, spec: ColumnSpec, value: Any) -> None:
    """Write one condition ``value`` for column ``j`` of evidence row ``i``."""
    k = spec.n_levels
    if isinstance(value, Not):
        if not spec.is_discrete:
            raise ValueError(f"column {spec.name!r} is {spec.kind}; Not(...) needs a discrete "
                             f"column")
        mask = ~_level_mask(spec, value.levels)
        if not mask.any():
            raise ValueError(f"column {spec.name!r}: Not({set(value.levels)!r}) excludes every "
                             f"level")
        _put_set(ev, i, j, k, mask)
    elif isinstance(value, tuple):
        if spec.is_discrete and not spec.ordinal:
            raise ValueError(f"column {spec.name!r} is {spec.kind}; intervals need a numeric, "
                             f"ordinal or ordered-categorical column (use a level set instead)")
        if spec.is_discrete and spec.kind == "categorical":  # ordered categorical: levels
            lo_c = 0 if value[0] is None else _level_code(spec, value[0])
            hi_c = spec.n_levels - 1 if value[1] is None else _level_code(spec, value[1])
            if len(value) != 2 or lo_c > hi_c:
                raise ValueError(f"column {spec.name!r}: an interval of ordered levels is "
                                 f"(low, high) with low before high, got {value!r}")
            _put_set(ev, i, j, k, (np.arange(k) >= lo_c) & (np.arange(k) <= hi_c))
            return
        low, high = _bounds(spec, value)
        if spec.is_discrete:  # ordinal numbers: closed [low, high] over the level values
            cats = np.asarray(spec.categories, float)
            mask = (cats >= low) & (cats <= high)  # no level in it: probability zero
            _put_set(ev, i, j, k, mask)
        else:
            ev.lo[i, j], ev.hi[i, j] = low, high
    elif isinstance(value, (set, frozenset, list)):
        if not spec.is_discrete:
            raise ValueError(f"column {spec.name!r} is {spec.kind}; level sets need a discrete "
                             f"column (use an interval (low, high) instead)")
        if len(value) == 0:
            raise ValueError(f"column {spec.name!r}: empty level set")
        _put_set(ev, i, j, k, _level_mask(spec, value))
    elif spec.is_discrete:
        ev.point[i, j] = _level_code(spec, value)
    else:
        ev.point[i, j] = _as_number(spec, value, "value")


def _plain_bound(v: Any, default: float) -> float | None:
    """An interval bound that is ``None`` or a finite plain number, else None."""
    if v is None:
        return default
    if type(v) in (float, int, np.float64, np.float32, np.int64, np.int32):
        x = float(v)
        return x if math.isfinite(x) else None
    return None


def _set_cells(ev: Evidence, j: int, spec: ColumnSpec, values: np.ndarray) -> None:
    """Write column ``j``'s cells (values, intervals, level sets, :class:`Not`) into ``ev`` as
    :func:`_set_cell` does: each distinct level set is parsed once, and an interval of plain
    numbers on a continuous column is written directly."""
    plain_iv = spec.kind == "continuous" and not spec.is_discrete
    first: dict[Any, int] = {}
    for i, v in enumerate(values):
        if plain_iv and type(v) is tuple and len(v) == 2:
            low, high = _plain_bound(v[0], -np.inf), _plain_bound(v[1], np.inf)
            iv = latent_interval(spec, low, high) if (
                low is not None and high is not None and low < high) else None
            if iv is not None:
                ev.lo[i, j], ev.hi[i, j] = iv
                continue
        key = None
        if isinstance(v, Not):
            key = v
        elif isinstance(v, (set, frozenset)):
            key = frozenset(v)
        if key is not None and key in first:
            _put_set(ev, i, j, spec.n_levels, ev.sets[j][1][first[key]])
            continue
        if isinstance(v, _COMPLEX) or not _is_missing(v):
            _set_cell(ev, i, j, spec, v)
            if key is not None:
                first[key] = i


def _put_set(ev: Evidence, i: int, j: int, k: int, mask: np.ndarray) -> None:
    if j not in ev.sets:
        ev.sets[j] = (np.zeros(ev.m, bool), np.ones((ev.m, k), bool))
    a, mk = ev.sets[j]
    a[i] = True
    mk[i] = mask


# --------------------------------------------------------------------------- entry points


def parse_conditions(model, conditions: Any, on_empty: str | None = "raise",
                     ) -> tuple[Evidence, bool]:
    """``(evidence, per_row)``: a dict (or None) gives one row, a DataFrame one row per row.

    A DataFrame cell holding a level not seen at fit time raises when ``on_empty`` is
    ``"raise"`` (the default here); with any other ``on_empty`` of a sampling query (``None``:
    its per-row default, ``"nan"``) that row's evidence has probability zero (an empty level
    set, with one warning), so ``on_empty`` decides the row as it does any other impossible
    row instead of one row failing the batch."""
    schema = model.encoder_.schema
    if conditions is None:
        return Evidence.empty(1, schema.d), False
    if isinstance(conditions, pd.Series):
        conditions = conditions.to_frame().T if conditions.name is not None else dict(conditions)
    if isinstance(conditions, pd.DataFrame):
        unseen = "raise" if on_empty == "raise" else "empty"
        return evidence_from_frame(model, conditions, strict=True, unseen=unseen), True
    if not isinstance(conditions, dict):
        raise TypeError(f"conditions must be a dict or a DataFrame, got "
                        f"{type(conditions).__name__}")
    ev = Evidence.empty(1, schema.d)
    for name, value in conditions.items():
        j = column_index(schema, name)
        _set_cell(ev, 0, j, schema.columns[j], value)
    keep_rules(ev, schema)
    return ev, False


def evidence_from_frame(model, df: pd.DataFrame, strict: bool = True,
                        skip: Iterable[int] = (), unseen: str = "raise",
                        rules: bool = True, rows: bool = False) -> Evidence:
    """Per-row evidence from a DataFrame (NaN cells are free).

    Plain columns are encoded in one vectorised pass; object columns holding intervals, level
    sets or :class:`Not` are parsed cell by cell. Columns in ``skip`` (indices) are left free.
    ``strict``: unknown column names raise (otherwise they are ignored). ``unseen``: a level
    not seen at fit time raises (``"raise"``), leaves that cell free with one
    ``RuntimeWarning`` (``"free"``, used by the per-row queries; recorded in ``ev.unseen``) or
    makes the row's evidence impossible, an empty level set, with one ``RuntimeWarning``
    (``"empty"``, used by per-row conditional sampling: see :func:`parse_conditions`).
    ``rules``: evidence on a column a mapping of the table's rules determines becomes evidence
    on its determinant (:func:`keep_rules`); ``False`` keeps it where it was given.
    ``rows``: ``df`` holds the rows of a query (predictors), not conditions, so a model
    column it lacks (and ``skip`` does not name) is noted as absent. What the input needed
    (absent columns, unseen levels, levels given as text) is reported in one
    :class:`~forestgen.validation.InputWarning` (a ``RuntimeWarning``).
    """
    if unseen not in ("raise", "free", "empty"):
        raise ValueError(f"unseen must be 'raise', 'free' or 'empty', got {unseen!r}")
    schema = model.encoder_.schema
    skip = set(skip)
    cols: dict[int, Any] = {}
    for c in df.columns:
        try:
            j = column_index(schema, c)
        except KeyError:
            if strict:
                raise
            continue
        if j in cols:
            raise ValueError(f"duplicate column {c!r} in conditions")
        cols[j] = c
    m = len(df)
    ev = Evidence.empty(m, schema.d)
    notes: list = []
    if rows:
        notes += [("absent", spec.name) for j, spec in enumerate(schema.columns)
                  if j not in cols and j not in skip]
    plain: dict[int, pd.Series] = {}
    for j, c in cols.items():
        if j in skip:
            continue
        s = df[c]
        if s.dtype == object and s.map(lambda v: isinstance(v, _COMPLEX)).any():
            _set_cells(ev, j, schema.columns[j], s.to_numpy())
        else:
            plain[j] = s
    if plain:
        full = pd.DataFrame({spec.name: (plain[j].to_numpy() if j in plain
                                         else np.full(m, np.nan))
                             for j, spec in enumerate(schema.columns)})
        full.columns = pd.Index(np.array(schema.names + [None], dtype=object)[:-1])
        Z = model.encoder_.transform(full, notes=notes)
        for j in plain:
            spec = schema.columns[j]
            z = Z[:, j]
            if spec.is_discrete:
                # a level unseen at fit (code k) or declared without training rows
                bad = off_levels([spec], z[:, None])[:, 0]
                if bad.any():
                    example = plain[j].to_numpy()[np.argmax(bad)]
                    known = [c for c, ok in zip(spec.categories, spec.support) if ok]
                    msg = (f"column {spec.name!r}: level {example!r} was not seen at fit time "
                           f"(known levels: {known})")
                    if unseen == "raise":
                        raise ValueError(msg)
                    if unseen == "empty":
                        for i in np.flatnonzero(bad):
                            _put_set(ev, int(i), j, spec.n_levels, np.zeros(spec.n_levels, bool))
                    else:
                        if ev.unseen is None:
                            ev.unseen = np.zeros((m, schema.d), bool)
                        ev.unseen[:, j] = bad
                    z = np.where(bad, np.nan, z)
            ev.point[:, j] = z
    if rules:
        keep_rules(ev, schema, frozenset(skip))
    what = {"empty": "such rows have evidence of probability zero",
            "free": "such cells are left out of the evidence of their rows"}.get(unseen, "")
    warn_input(notes, type(model).__name__, unseen=what)
    return ev


def keep_rules(ev: Evidence, schema: Schema, keep: frozenset = frozenset()) -> None:
    """Evidence on a column that a mapping of the table's rules determines becomes evidence
    on its determinant (:meth:`forestgen.data.rules.Rules.translate`)."""
    if schema.rules and schema.rules.get("mappings"):
        Rules.from_dict(schema.rules).translate(ev, keep)
