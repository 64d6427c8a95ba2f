"""Which held-out cells forestgen's ARF scores as probability masses, and the cell of each.

forestgen's ``log_prob`` is a density with respect to a mixed base measure: counting measure on
the values of a column coded as levels (an integer scale, a discrete-valued float column) and at
the point masses (``atoms``) of a numeric column, Lebesgue measure elsewhere. R arf scores every
numeric value with a truncated-normal density. To put both on one base measure, R arf's factor
for each cell listed here is the probability of an interval around the value under its leaf's
truncated normal (``rarf_run.R``: ``ll_grid``):

* a level of a column coded as levels: the values that round to it, i.e. the interval between
  the midpoints to its neighbouring levels (open-ended at the lowest and highest level), so R
  arf's distribution rounded to the levels is a pmf over the same values as forestgen's
  (for an integer scale, ``(x - 0.5, x + 0.5]``);
* a point mass of a numeric column (and a held-out value outside a column's levels): its grid
  cell ``(x - h, x + h]``, ``h`` half the column's grid step ``10**-decimals``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _half_step(spec) -> float:
    if spec.decimals is not None:
        return 0.5 * 10.0 ** -spec.decimals
    levels = np.unique(np.asarray(spec.categories or spec.atoms or [], dtype=float))
    return 0.5 * float(np.diff(levels).min()) if levels.size > 1 else 0.0


def _same(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[len(x), len(values)]: x equals the value (up to float noise in the CSV round trip)."""
    tol = 1e-9 * max(1.0, float(np.max(np.abs(values))))
    return np.abs(x[:, None] - values[None, :]) <= tol


def mass_cells(train: pd.DataFrame, test: pd.DataFrame,
               max_ordinal_levels: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Lower and upper ends of the cell of each ``test`` cell that an ARF fitted on ``train``
    scores as a mass (NaN where it scores a density, and for categorical columns, which both
    models score as level probabilities).

    ``max_ordinal_levels``: ARF's (its default when None), which decides the integer coding.
    """
    from forestgen.data import TableEncoder
    from forestgen.families.mixture.arf import ARF

    mol = ARF().max_ordinal_levels if max_ordinal_levels is None else max_ordinal_levels
    schema = TableEncoder(max_ordinal_levels=mol).fit(train).schema
    lo = pd.DataFrame(np.nan, index=test.index, columns=test.columns)
    hi = lo.copy()
    for spec in schema:
        if spec.kind not in ("integer", "continuous"):
            continue
        x = pd.to_numeric(test[spec.name], errors="coerce").to_numpy(dtype=float)
        fin = np.isfinite(x)
        h = _half_step(spec)
        a, b = np.full(x.shape, np.nan), np.full(x.shape, np.nan)
        if spec.numeric_levels:
            lv = np.asarray(spec.categories, dtype=float)
            mid = np.r_[-np.inf, (lv[1:] + lv[:-1]) / 2, np.inf]
            hit = _same(x, lv)
            on = hit.any(axis=1)
            k = hit.argmax(axis=1)
            a[on], b[on] = mid[k[on]], mid[k[on] + 1]
            off = fin & ~on  # a value no level holds: forestgen's floor mass, a grid cell here
            a[off], b[off] = x[off] - h, x[off] + h
        elif spec.atoms and h > 0:
            at = _same(x, np.asarray(spec.atoms, dtype=float)).any(axis=1)
            a[at], b[at] = x[at] - h, x[at] + h
        lo[spec.name], hi[spec.name] = a, b
    return lo, hi
