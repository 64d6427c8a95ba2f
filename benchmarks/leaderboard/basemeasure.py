"""Which held-out cells forestgen's ARF scores as probability masses, and the grid cell of each.

forestgen's ``log_prob`` is a density with respect to a mixed base measure: counting measure on
the values of a column coded as levels (an integer scale, a discrete-valued float column) and at
the point masses (``atoms``) of a numeric column, Lebesgue measure elsewhere. R arf scores every
numeric value with a truncated-normal density. To put both on one base measure, R arf's factor for
each cell listed here is the probability of the value's grid cell ``(x - h, x + h]`` under its
leaf's truncated normal (``rarf_run.R``: ``ll_grid``), where ``h`` is half the column's grid step
(``10**-decimals``: 0.5 for integers).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _half_step(spec) -> float:
    if spec.decimals is not None:
        return 0.5 * 10.0 ** -spec.decimals
    levels = np.unique(np.asarray(spec.categories or spec.atoms or [], dtype=float))
    return 0.5 * float(np.diff(levels).min()) if levels.size > 1 else 0.0


def grid_halfwidths(train: pd.DataFrame, test: pd.DataFrame,
                    max_ordinal_levels: int | None = None) -> pd.DataFrame:
    """Half-width of each ``test`` cell that ARF fitted on ``train`` scores as a mass, else 0.

    ``max_ordinal_levels``: ARF's (its default when None), which decides the integer coding.
    Categorical columns are 0 here: both models already score them as level probabilities.
    """
    from forestgen.data import TableEncoder
    from forestgen.learners.arf import ARF

    mol = ARF().max_ordinal_levels if max_ordinal_levels is None else max_ordinal_levels
    schema = TableEncoder(max_ordinal_levels=mol).fit(train).schema
    out = pd.DataFrame(0.0, index=test.index, columns=test.columns)
    for spec in schema:
        if spec.kind not in ("integer", "continuous"):
            continue
        x = pd.to_numeric(test[spec.name], errors="coerce").to_numpy(dtype=float)
        if spec.numeric_levels:
            mass = np.isfinite(x)
        elif spec.atoms:
            mass = np.isclose(x[:, None], np.asarray(spec.atoms, float)[None, :],
                              rtol=0.0, atol=1e-9 * max(1.0, np.nanmax(np.abs(spec.atoms)))
                              ).any(axis=1)
        else:
            continue
        out.loc[mass, spec.name] = _half_step(spec)
    return out
