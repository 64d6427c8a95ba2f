"""Rule violations: the share of synthetic rows that break a logical rule of the real table.

The rules are the mappings that hold in every real row (a column that is a function of a
discrete column: adult's ``education`` -> ``education-num``; found as forestgen's encoder finds
them, :func:`forestgen.data.rules.find_mappings`), thresholds (a column that is a step function
of a numeric one, one interval per value: ``birthwt``'s ``low`` = ``bwt < 2500``,
:func:`forestgen.data.rules.find_thresholds`), affine relations between numeric columns
(``msleep``'s ``awake = 24 - sleep_total``, to the columns' rounding, each column's decimals
read off its real values: :func:`forestgen.data.rules.find_affine`), orders two numeric
columns never break (``mean radius <= worst radius``,
:func:`forestgen.data.inequalities.find_inequalities`), nested missing entries (a column
missing only where another is, :func:`forestgen.data.rules.missing_parents`) and, optionally,
declared SDV-style ``constraints`` (``Inequality``, ``Range``, ``FixedCombinations``). Any
generator's output can be scored: the rules are read from the real rows alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forestgen.data.inequalities import find_inequalities
from forestgen.data.rules import (
    Affine,
    decimal_grid,
    find_affine,
    find_mappings,
    find_thresholds,
    frame_codes,
    missing_parents,
    threshold_cuts,
)
from forestgen.metrics._prep import prepare

__all__ = ["RuleViolations", "rule_violations"]


@dataclass
class RuleViolations:
    """``table``: one row per rule (``rule``, ``kind``, ``violations``, ``share`` of the
    synthetic rows); ``rate``: share of synthetic rows breaking at least one rule."""

    table: pd.DataFrame
    rate: float
    n_rules: int


def _key(v) -> object:
    """A value comparable across a real and a synthetic column (CSV round trips turn 13 into
    13.0 and categories into strings)."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    return str(v)


def rule_violations(real: object, synthetic: object, constraints: list | None = None,
                    ) -> RuleViolations:
    """Share of ``synthetic`` rows breaking the rules of ``real``: its detected mappings and
    the declared ``constraints`` (SDV-style dicts, as in forestgen's metadata). A synthetic
    row whose determinant holds a value no real row has breaks no mapping (that is a support
    question, not a rule); a missing entry breaks no mapping and no constraint, only a nesting
    of missing entries (kind ``"missing"``: ``"b missing => a missing"``, or ``<=>`` where the
    real rows miss both in the same rows)."""
    real, synthetic = prepare(real, synthetic, names=["synthetic"])[:2]
    codes, values, discrete = frame_codes(real)
    cols = list(real.columns)
    rows, broken = [], np.zeros(len(synthetic), bool)
    for a, b in find_mappings(codes, values, discrete):
        ca, cb = cols[a], cols[b]
        f = dict(zip(map(_key, real[ca]), map(_key, real[cb])))
        sa = synthetic[ca].map(_key)
        sb = synthetic[cb].map(_key)
        img = sa.map(f)
        bad = (img.notna() & sb.notna() & (img != sb)).to_numpy()
        broken |= bad
        rows.append({"rule": f"{ca} -> {cb}", "kind": "mapping", "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    taken = {j for pair in find_mappings(codes, values, discrete) for j in pair}
    numeric = [pd.api.types.is_numeric_dtype(real[c].dtype) and
               not pd.api.types.is_bool_dtype(real[c].dtype) for c in cols]
    for a, b, gaps, images in find_thresholds(values, numeric, taken):
        if threshold_cuts(gaps, np.nanmin(values[a]), np.nanmax(values[a])) is None:
            continue  # no evident cut (neighbouring identifiers): not a rule forestgen keeps
        ca, cb = cols[a], cols[b]
        x = pd.to_numeric(synthetic[ca], errors="coerce").to_numpy(float)
        y = synthetic[cb].map(_key)
        labels = dict(zip(values[b], map(_key, real[cb])))
        # interval k spans [first real value, last real value] of its run (the ends open):
        # a synthetic value in a gap between runs is judged by neither side
        lo = np.r_[-np.inf, gaps[:, 1]]
        hi = np.r_[gaps[:, 0], np.inf]
        bad = np.zeros(len(synthetic), bool)
        for k, v in enumerate(images):
            inside = (x >= lo[k]) & (x <= hi[k])
            bad |= inside & y.notna().to_numpy() & (y != labels[v]).to_numpy()
        broken |= bad
        rows.append({"rule": f"{ca} -> {cb} (threshold)", "kind": "threshold",
                     "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    taken |= {j for a, b, *_ in find_thresholds(values, numeric, taken) for j in (a, b)}
    numbers = [numeric[j] and not pd.api.types.is_integer_dtype(real[c].dtype) or
               numeric[j] and real[c].nunique() > 32 for j, c in enumerate(cols)]
    grids = [decimal_grid(values[j]) if numbers[j] else 0.0 for j in range(len(cols))]
    affine = find_affine(values, numbers, taken, grids)
    for a, b, alpha, beta, tol, grid in affine:
        rule = Affine(a, b, alpha, beta, tol, grid)
        x = pd.to_numeric(synthetic[cols[a]], errors="coerce").to_numpy(float)
        y = pd.to_numeric(synthetic[cols[b]], errors="coerce").to_numpy(float)
        bad = rule.broken(x, y)
        broken |= bad
        rows.append({"rule": rule.describe(cols), "kind": "affine",
                     "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    determined = ({b for _, b in find_mappings(codes, values, discrete)}
                  | {b for _, b, *_ in affine})
    for a, b in find_inequalities(values, [j for j in range(len(cols))
                                           if numeric[j] and j not in determined]):
        ca, cb = cols[a], cols[b]
        x = pd.to_numeric(synthetic[ca], errors="coerce").to_numpy(float)
        y = pd.to_numeric(synthetic[cb], errors="coerce").to_numpy(float)
        with np.errstate(invalid="ignore"):
            bad = x > y
        broken |= bad
        rows.append({"rule": f"{ca} <= {cb}", "kind": "inequality",
                     "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    miss = real.isna().to_numpy()
    some = np.flatnonzero(miss.any(axis=0))
    for k, p in enumerate(missing_parents(miss[:, some])):
        if p < 0:
            continue
        ck, cp = cols[some[k]], cols[some[p]]
        sk, sp = synthetic[ck].isna().to_numpy(), synthetic[cp].isna().to_numpy()
        same = bool((miss[:, some[k]] == miss[:, some[p]]).all())
        bad = (sk & ~sp) | ((sp & ~sk) if same else False)
        broken |= bad
        rows.append({"rule": f"{ck} missing {'<=>' if same else '=>'} {cp} missing",
                     "kind": "missing", "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    for c in constraints or []:
        cls, p = c.get("constraint_class"), dict(c.get("constraint_parameters") or {})
        if cls in ("Inequality", "Range"):
            names = ([p["low_column_name"], p["high_column_name"]] if cls == "Inequality" else
                     [p["low_column_name"], p["middle_column_name"], p["high_column_name"]])
            bad = np.zeros(len(synthetic), bool)
            for lo, hi in zip(names[:-1], names[1:]):
                x = pd.to_numeric(synthetic[lo], errors="coerce").to_numpy(float)
                y = pd.to_numeric(synthetic[hi], errors="coerce").to_numpy(float)
                with np.errstate(invalid="ignore"):
                    bad |= (x >= y) if p.get("strict_boundaries") else (x > y)
            rule = " <= ".join(map(str, names))
        elif cls == "FixedCombinations":
            names = list(p["column_names"])
            seen = {tuple(map(_key, r)) for r in real[names].itertuples(index=False)}
            keys = [tuple(map(_key, r)) for r in synthetic[names].itertuples(index=False)]
            bad = np.array([None not in k and k not in seen for k in keys], bool)
            rule = f"combinations of {names}"
        else:
            raise ValueError(f"unknown constraint_class {cls!r}; expected Inequality, Range "
                             f"or FixedCombinations")
        broken |= bad
        rows.append({"rule": rule, "kind": cls, "violations": int(bad.sum()),
                     "share": float(bad.mean()) if len(bad) else 0.0})
    table = pd.DataFrame(rows, columns=["rule", "kind", "violations", "share"])
    return RuleViolations(table, float(broken.mean()) if len(broken) else 0.0, len(rows))
