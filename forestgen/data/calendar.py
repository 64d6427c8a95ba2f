"""Calendar grids: datetime columns whose values fall on one day of the month.

Monthly, quarterly and yearly dates (the first of each month, each quarter's last day, the
first of January of each year) lie on no grid of equal steps in seconds (months have 28 to
31 days), so a step of seconds would spread a model's draws over every day. Such a column is
modelled on a *month scale* instead: its encoded value is ``MONTH * (m + f)``, ``m`` the
number of months since January 1970 of the last anchor at or before the value and ``f`` the
value's share of the way to the next anchor. Anchors are the month's start plus
``month_anchor`` seconds (``>= 0``: a day of the month up to the 28th and a time of day), or,
for ``month_anchor < 0``, the next month's start plus it (the month's last day). The scale is
strictly increasing and continuous, so intervals, orders and densities keep their meaning,
and its anchors are the whole multiples of :data:`MONTH`: the grid of steps of ``k`` months
(:func:`month_step`) that every encoded value then keeps.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MONTH", "find_month_anchor", "from_month_scale", "month_step", "to_month_scale"]

#: the mean Gregorian month in seconds (365.2425 days / 12): the month scale's unit
MONTH = 2629746.0
DAY = 86400.0
#: the latest anchor counted from a month's start: the 28th, the last day every month has
MAX_START_ANCHOR = 28 * DAY
#: values share a day of the month by chance with probability about ``28 ** -(m - 1)`` for
#: ``m`` distinct months; a calendar grid is taken when that is below this
CALENDAR_CHANCE = 1e-3


def _months(t: np.ndarray) -> np.ndarray:
    """The month of each whole second ``t`` (int64), as months since January 1970."""
    return t.astype("datetime64[s]").astype("datetime64[M]").astype(np.int64)


def _month_start(m: np.ndarray) -> np.ndarray:
    """The first second of month ``m`` (months since January 1970), in seconds."""
    return np.asarray(m, np.int64).astype("datetime64[M]").astype("datetime64[s]").astype(
        np.int64).astype(np.float64)


def _anchor(m: np.ndarray, anchor: float) -> np.ndarray:
    """The anchor of month ``m``, in seconds since the epoch."""
    return _month_start(m + (1 if anchor < 0 else 0)) + anchor


def find_month_anchor(seconds: np.ndarray) -> float | None:
    """The ``month_anchor`` every value of ``seconds`` (finite, seconds since the epoch) falls
    on — the same day of the month (up to the 28th) and time of day, or the month's last day
    and one time of day — when so many distinct months bear it out that chance could not
    (:data:`CALENDAR_CHANCE`); else None."""
    s = np.unique(seconds)
    if s.size < 2 or not np.all(s == np.floor(s)) or np.abs(s).max() > 2.0 ** 52:
        return None
    t = s.astype(np.int64)
    month = _months(t)
    if (np.unique(month).size - 1) * math.log(28) < math.log(1 / CALENDAR_CHANCE):
        return None
    off = t - _month_start(month).astype(np.int64)
    if np.all(off == off[0]) and off[0] < MAX_START_ANCHOR:
        return float(off[0])
    back = t - _month_start(month + 1).astype(np.int64)
    if np.all(back == back[0]) and back[0] >= -DAY:
        return float(back[0])
    return None


def to_month_scale(seconds: np.ndarray, anchor: float) -> np.ndarray:
    """``seconds`` (float, NaN and infinities kept) on the month scale of ``anchor``."""
    x = np.asarray(seconds, np.float64)
    out = x.copy()
    ok = np.isfinite(x) & (np.abs(x) < 2.0 ** 52)
    if ok.any():
        v = x[ok]
        m = _months(np.floor(v - anchor).astype(np.int64)) - (1 if anchor < 0 else 0)
        a0 = _anchor(m, anchor)
        a1 = _anchor(m + 1, anchor)
        out[ok] = MONTH * (m + (v - a0) / (a1 - a0))
    return out


def from_month_scale(values: np.ndarray, anchor: float) -> np.ndarray:
    """Inverse of :func:`to_month_scale`: month-scale values back to seconds (a whole multiple
    of :data:`MONTH` to its anchor exactly)."""
    x = np.asarray(values, np.float64)
    out = x.copy()
    ok = np.isfinite(x) & (np.abs(x) < 2.0 ** 52)
    if ok.any():
        u = x[ok] / MONTH
        m = np.floor(u)
        f = u - m
        m = m.astype(np.int64)
        a0 = _anchor(m, anchor)
        out[ok] = np.where(f == 0.0, a0, a0 + f * (_anchor(m + 1, anchor) - a0))
    return out


def month_step(values: np.ndarray) -> tuple[float, float]:
    """``(step, origin)`` of a month-scale column whose ``values`` are all anchors: steps of
    ``k`` months (quarters, years) from the values' common offset when their distinct months
    bear it out beyond chance (``k ** -(m - 1)`` below :data:`CALENDAR_CHANCE`), else one
    month from the origin."""
    units = np.rint(np.unique(values) / MONTH).astype(np.int64)
    rel = units - units[0]
    k = int(np.gcd.reduce(rel)) if rel.size > 1 else 0
    if k >= 2 and (units.size - 1) * math.log(k) >= math.log(1 / CALENDAR_CHANCE):
        return MONTH * k, MONTH * float(int(units[0]) % k)
    return MONTH, 0.0
