"""Column schema describing how a mixed-type table is encoded as a float matrix."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from forestgen.data.calendar import DAY, MAX_START_ANCHOR, MONTH

ColumnKind = Literal["continuous", "integer", "categorical", "bool", "binary"]
KINDS: tuple[str, ...] = ("continuous", "integer", "categorical", "bool", "binary")
InputType = Literal["dataframe", "ndarray", "tensor"]


def to_python_scalar(value: Any) -> Any:
    """Convert numpy scalars to the equivalent built-in Python scalar."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _tag_value(value: Any) -> list:
    """Encode a scalar as ``[type_tag, json_value]`` so its Python type survives JSON."""
    value = to_python_scalar(value)
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, str):
        return ["str", value]
    if value is None:
        return ["none", None]
    raise TypeError(f"cannot serialise value {value!r} of type {type(value).__name__}")


def _untag_value(tagged: list) -> Any:
    tag, value = tagged
    if tag == "bool":
        return bool(value)
    if tag == "int":
        return int(value)
    if tag == "float":
        return float(value)
    if tag == "str":
        return str(value)
    if tag == "none":
        return None
    raise ValueError(f"unknown value tag {tag!r}")


def _float_to_json(x: float) -> float | str:
    x = float(x)
    return repr(x) if not math.isfinite(x) else x


@dataclass
class ColumnSpec:
    """Encoding metadata of one column.

    ``categories`` holds the original level values in code order for discrete columns
    (categorical, bool, binary, ordinal integers and floats). ``lower``/``upper`` are the observed
    range in encoded units (``0`` and ``n_levels - 1`` for discrete columns). ``ordinal`` marks
    ordered levels (integers coded as levels, or a categorical declared ordinal: its codes
    follow the declared order). ``range_min``/``range_max`` and ``nullable`` are declared
    constraints (:mod:`forestgen.data.metadata`) that decoded values always satisfy.
    ``atoms`` are the point masses of a numeric column (values holding >= 10% of its rows,
    e.g. zero inflation; in a discrete-valued column every value holding >= 1% and seen twice, see
    ``forestgen.data.encoder``): leaves model them exactly (:mod:`forestgen.leaves.point_mass`).
    ``decimals`` and ``step`` put decoded values on a grid: multiples of ``10**-decimals`` for
    numbers, or of a coarser ``step`` their training values all keep (``0.5`` for years of
    experience counted in halves, ``1000`` for incomes in thousands; written with ``decimals``,
    :meth:`on_step`), or of ``step`` seconds for a datetime/timedelta column whose training
    values all fall on whole days, hours or minutes, or on a coarser multiple of one they all
    keep (quarter hours, weeks): the grid points are ``step_origin + k * step`` (the origin is
    0 except on such a coarser time step, where it is the values' common offset in
    ``[0, step)``: weekly dates on Mondays). A datetime column whose values all fall on one
    day of the month (monthly, quarterly, yearly dates) is encoded on a month scale instead of
    in seconds (:mod:`forestgen.data.calendar`, ``month_anchor`` the anchor of each month; None
    for seconds), its ``step`` a whole number of months. ``wall_clock``: a time-zone-aware
    datetime column whose local times all fall on whole days (or one day of the month) is
    modelled in local wall-clock seconds, so its midnights are whole days whatever the
    daylight-saving offset (in UTC seconds a Berlin midnight is 22:00 or 23:00).
    ``unobserved`` lists the codes of a label column's levels (categorical, boolean, binary) that
    no training row takes, e.g. declared ``values`` or unused categories of a categorical dtype;
    they lie outside the column's support (:attr:`support`).
    """

    name: Any
    kind: ColumnKind
    dtype: str
    categories: list | None = None
    ordinal: bool = False
    lower: float = math.nan
    upper: float = math.nan
    decimals: int | None = None
    has_missing: bool = False
    range_min: float = -math.inf
    range_max: float = math.inf
    nullable: bool = True
    atoms: list | None = None
    step: float | None = None
    unobserved: list | None = None
    step_origin: float = 0.0
    month_anchor: float | None = None
    wall_clock: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r}")

    @property
    def n_levels(self) -> int:
        """Number of levels (0 for numeric columns)."""
        return len(self.categories) if self.categories is not None else 0

    @property
    def is_discrete(self) -> bool:
        """True if the column is modelled as a pmf over integer codes."""
        if self.kind in ("categorical", "bool", "binary"):
            return True
        return self.kind in ("integer", "continuous") and self.ordinal

    @property
    def support(self) -> np.ndarray | None:
        """Levels in the support (bool ``[max(n_levels, 1)]``), the discrete analogue of a
        numeric column's observed range: a nominal column's levels seen in training; an
        ordered column's levels from the lowest to the highest seen (an interior level without
        rows stays, as an unseen value inside a numeric range does). ``None`` for numeric
        columns."""
        if not self.is_discrete:
            return None
        out = np.ones(max(self.n_levels, 1), bool)
        out[list(self.unobserved or [])] = False
        if not self.is_nominal and out.any():
            seen = np.flatnonzero(out)
            out[seen[0]:seen[-1] + 1] = True
        return out

    @property
    def is_nominal(self) -> bool:
        """True for unordered categorical columns with more than two levels."""
        return self.kind == "categorical" and self.n_levels > 2 and not self.ordinal

    @property
    def numeric_levels(self) -> bool:
        """True for discrete columns whose levels are numbers (ordinal integers and floats)."""
        return self.is_discrete and self.kind in ("integer", "continuous")

    @property
    def has_grid(self) -> bool:
        """True when decoded values of this numeric column lie on a grid (``decimals``/``step``)."""
        return not self.is_discrete and (self.step is not None or self.decimals is not None)

    def to_grid(self, x: np.ndarray, how: str = "nearest") -> np.ndarray:
        """``x`` (encoded units) moved to the column's grid: the ``nearest`` grid point, or the
        one below (``floor``) or above (``ceil``). Columns without a grid return ``x``, and
        so does a value so large that the grid's arithmetic overflows (a query's value far
        outside the range, e.g. ``1e308`` on a grid of 0.01)."""
        op = {"nearest": np.round, "floor": np.floor, "ceil": np.ceil}[how]
        if self.step is None and self.decimals is None:
            return x
        with np.errstate(over="ignore", invalid="ignore"):
            if self.step is not None:
                out = self.on_step(op(self.step_units(x)))
            elif how == "nearest":
                out = np.round(x, self.decimals)
            else:
                q = 10.0 ** self.decimals
                out = np.round(op(x * q) / q, self.decimals)
        out = np.where(np.isfinite(x) & ~np.isfinite(out), x, out)
        return out[()] if out.ndim == 0 else out

    def step_units(self, x):
        """``(x - step_origin) / step``: ``x`` in steps from the grid's origin (whole numbers
        on the grid); the inverse of :meth:`on_step`."""
        return (x - self.step_origin) / self.step if self.step_origin else x / self.step

    def on_step(self, k):
        """The grid points ``step_origin + k * step`` (``k`` whole numbers, array or scalar),
        written with the column's decimals (``3 * 0.1`` is ``0.3``, not
        ``0.30000000000000004``); the same float64 operations as
        :func:`forestgen.data.support.torch_to_support`."""
        z = k * self.step
        if self.step_origin:
            z = z + self.step_origin
        if self.decimals is None:
            return z
        q = 10.0 ** int(self.decimals)
        return np.rint(z * q) / q

    def to_dict(self) -> dict:
        """JSON-serialisable representation (label types are preserved)."""
        return {
            "name": _tag_value(self.name),
            "kind": self.kind,
            "dtype": self.dtype,
            "categories": None
            if self.categories is None
            else [_tag_value(c) for c in self.categories],
            "ordinal": bool(self.ordinal),
            "lower": _float_to_json(self.lower),
            "upper": _float_to_json(self.upper),
            "decimals": None if self.decimals is None else int(self.decimals),
            "has_missing": bool(self.has_missing),
            "range_min": _float_to_json(self.range_min),
            "range_max": _float_to_json(self.range_max),
            "nullable": bool(self.nullable),
            "atoms": None if self.atoms is None else [repr(float(a)) for a in self.atoms],
            "step": None if self.step is None else float(self.step),
            **({"unobserved": [int(c) for c in self.unobserved]} if self.unobserved else {}),
            **({"step_origin": float(self.step_origin)} if self.step_origin else {}),
            **({"month_anchor": float(self.month_anchor)} if self.month_anchor is not None
               else {}),
            **({"wall_clock": True} if self.wall_clock else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> ColumnSpec:
        """Inverse of :meth:`to_dict`."""
        cats = d.get("categories")
        return cls(
            name=_untag_value(d["name"]),
            kind=d["kind"],
            dtype=d["dtype"],
            categories=None if cats is None else [_untag_value(c) for c in cats],
            ordinal=bool(d.get("ordinal", False)),
            lower=float(d.get("lower", math.nan)),
            upper=float(d.get("upper", math.nan)),
            decimals=d.get("decimals"),
            has_missing=bool(d.get("has_missing", False)),
            range_min=float(d.get("range_min", -math.inf)),
            range_max=float(d.get("range_max", math.inf)),
            nullable=bool(d.get("nullable", True)),
            atoms=None if d.get("atoms") is None else [float(a) for a in d["atoms"]],
            step=None if d.get("step") is None else float(d["step"]),
            unobserved=[int(c) for c in d["unobserved"]] if d.get("unobserved") else None,
            step_origin=float(d.get("step_origin", 0.0)),
            month_anchor=None if d.get("month_anchor") is None else float(d["month_anchor"]),
            wall_clock=d.get("wall_clock", False),
        )


@dataclass
class Schema:
    """Ordered collection of :class:`ColumnSpec` plus the type of the fitted input."""

    columns: list[ColumnSpec] = field(default_factory=list)
    input_type: InputType = "dataframe"
    #: the table's logical rules in JSON form (:class:`forestgen.data.rules.Rules`), or None
    rules: dict | None = None

    @property
    def names(self) -> list:
        """Column labels in order."""
        return [c.name for c in self.columns]

    @property
    def d(self) -> int:
        """Number of columns."""
        return len(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self):
        return iter(self.columns)

    def index(self, name: Any) -> int:
        """Position of the column labelled ``name``."""
        for i, c in enumerate(self.columns):
            if type(c.name) is type(to_python_scalar(name)) and c.name == name:
                return i
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise KeyError(f"no column named {name!r}")

    def __getitem__(self, key: Any) -> ColumnSpec:
        """Look up by column label first, then by integer position."""
        try:
            return self.columns[self.index(key)]
        except KeyError:
            if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                return self.columns[int(key)]
            raise

    @property
    def discrete_mask(self) -> np.ndarray:
        """Boolean mask (d,) of discrete columns."""
        return np.array([c.is_discrete for c in self.columns], dtype=bool)

    @property
    def nominal_mask(self) -> np.ndarray:
        """Boolean mask (d,) of nominal (unordered, > 2 levels) columns."""
        return np.array([c.is_nominal for c in self.columns], dtype=bool)

    @property
    def n_levels(self) -> np.ndarray:
        """Number of levels per column (0 for numeric columns)."""
        return np.array([c.n_levels for c in self.columns], dtype=np.int64)

    def to_dict(self) -> dict:
        """JSON-serialisable representation."""
        out = {"input_type": self.input_type, "columns": [c.to_dict() for c in self.columns]}
        if self.rules:
            out["rules"] = self.rules
        return out

    def check(self) -> None:
        """Raise ``ValueError`` naming the column unless every spec (read from a model file)
        is one a fit produces: distinct names and levels, a discrete column's levels, a
        numeric column's finite range, decimals in 0..15, a positive step and its origin in
        ``[0, step)``, finite atoms, a dtype pandas reads and numeric levels it holds."""
        names = self.names
        if len({(type(n), n) for n in names}) != len(names):
            raise ValueError("duplicate column names in the schema")
        for c in self.columns:
            where = f"column {c.name!r}"
            _check_dtype(c, where)
            for flag in ("ordinal", "has_missing", "nullable"):
                if not isinstance(getattr(c, flag), bool):
                    raise ValueError(f"{where}: {flag} must be True or False")
            cats = c.categories
            if c.is_discrete and not cats:
                raise ValueError(f"{where}: a discrete column needs its categories")
            if cats is not None and len({(type(v), v) for v in cats}) != len(cats):
                raise ValueError(f"{where}: duplicate categories")
            if c.unobserved is not None and any(
                    isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < c.n_levels
                    for v in c.unobserved):
                raise ValueError(f"{where}: unobserved levels out of range")
            nums = [c.lower, c.upper]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and math.isfinite(v) for v in nums) or c.lower > c.upper:
                raise ValueError(f"{where}: lower / upper must be finite, lower <= upper")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and not math.isnan(v) for v in (c.range_min, c.range_max)) or \
                    c.range_min > c.range_max:
                raise ValueError(f"{where}: range_min / range_max must be numbers in order")
            if c.decimals is not None and (isinstance(c.decimals, bool) or not isinstance(
                    c.decimals, int) or not 0 <= c.decimals <= 15):
                raise ValueError(f"{where}: decimals must be an integer in 0..15")
            if c.step is not None and (isinstance(c.step, bool) or not isinstance(
                    c.step, (int, float)) or not (math.isfinite(c.step) and c.step > 0)):
                raise ValueError(f"{where}: step must be a positive number")
            if isinstance(c.step_origin, bool) or not isinstance(c.step_origin, (int, float)) \
                    or not math.isfinite(c.step_origin) or (c.step_origin and (
                        c.step is None or not 0 < c.step_origin < c.step)):
                raise ValueError(f"{where}: step_origin must be a number in [0, step)")
            a = c.month_anchor
            if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float))
                                  or not -DAY <= a < MAX_START_ANCHOR
                                  or not c.dtype.startswith("datetime64") or c.step is None
                                  or c.step % MONTH != 0 or c.step_origin % MONTH != 0):
                raise ValueError(f"{where}: month_anchor must be a number in [-86400, 28 days) "
                                 f"of a datetime column on a grid of whole months")
            if c.wall_clock is not False and (c.wall_clock is not True or not (
                    c.dtype.startswith("datetime64") and "," in c.dtype)):
                raise ValueError(f"{where}: wall_clock must be True (a time-zone-aware "
                                 f"datetime column) or False")
            if c.atoms is not None and not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) for v in c.atoms):
                raise ValueError(f"{where}: atoms must be finite numbers")

    @classmethod
    def from_dict(cls, d: dict) -> Schema:
        """Inverse of :meth:`to_dict`."""
        return cls(
            columns=[ColumnSpec.from_dict(c) for c in d["columns"]],
            input_type=d.get("input_type", "dataframe"),
            rules=d.get("rules") or None,
        )


def _check_dtype(c: ColumnSpec, where: str) -> None:
    """A spec's dtype is one pandas reads, and a column of numeric levels holds numbers its
    dtype can hold (an integer column's levels integers within its range)."""
    from forestgen.data.dtypes import is_category_str, parse_category, str_to_dtype

    if not isinstance(c.dtype, str):
        raise ValueError(f"{where}: dtype must be a dtype name, got {c.dtype!r}")
    try:
        dtype = str_to_dtype(parse_category(c.dtype)[0] or "object"
                             if is_category_str(c.dtype) else c.dtype)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: dtype {c.dtype!r} is not one pandas reads") from None
    if not c.numeric_levels or is_category_str(c.dtype):
        return
    cats = c.categories or []
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in cats):
        raise ValueError(f"{where}: numeric levels must be finite numbers")
    if getattr(dtype, "kind", None) in ("i", "u"):
        info = np.iinfo(dtype.numpy_dtype if hasattr(dtype, "numpy_dtype") else dtype)
        if not all(isinstance(v, int) and info.min <= v <= info.max for v in cats):
            raise ValueError(f"{where}: the levels of an integer column must be integers "
                             f"of its dtype {c.dtype}")
