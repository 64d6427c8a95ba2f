"""Quality scores defined as SDMetrics' single-table ``QualityReport`` defines them, so the numbers
are comparable with those papers report (TabSyn, TabDDPM and others quote Column Shapes and
Column Pair Trends). No SDMetrics import: the definitions below follow SDMetrics 0.32 and
``tests/metrics/test_sdmetrics_scores.py`` checks them against the package's own output.

* **Column Shapes**: per column, ``KSComplement = 1 - D`` (two-sample Kolmogorov-Smirnov statistic
  on the non-missing values, rounded to 14 decimals) for numerical and datetime columns,
  ``TVComplement = 1 - TV`` for categorical, ordinal and boolean ones (frequencies of the
  non-missing values; a level only the synthetic data has gets a real count of ``1e-6``, as in
  SDMetrics); the property score is the mean over columns.
* **Column Pair Trends**: per pair, ``CorrelationSimilarity = 1 - |r_real - r_syn| / 2`` (Pearson,
  rows complete in the pair) for two continuous columns, otherwise
  ``ContingencySimilarity = 1 - TV`` of the joint frequencies with missing as its own value,
  where each continuous column is cut into the 10 ``numpy.histogram_bin_edges`` of its own
  table (SDMetrics bins the real and the synthetic table separately); the property score is the
  mean over the pairs whose *real* data shows an association: ``|r_real| > 0.5`` for
  correlations, Cramér's V ``> 0.3`` for contingency tables (SDMetrics 0.32's defaults; with
  both thresholds 0 every pair counts, the definition of earlier SDMetrics releases).
* **Overall score**: the mean of the two property scores.

SDMetrics subsamples 50,000 rows for contingency tables of larger inputs; these functions use
every row, so they agree exactly below that size and up to subsampling noise above it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from forestgen.metrics._prep import as_frame, require_rows
from forestgen.metrics.fidelity import ks_statistic

__all__ = ["SDMetricsScores", "column_pair_trends", "column_shapes", "contingency_similarity",
           "correlation_similarity", "cramers_v", "ks_complement", "sdmetrics_quality",
           "tv_complement"]

_DECIMALS = 14  # sys.float_info.dig - 1, SDMetrics' rounding before the KS test
_CONTINUOUS = ("numerical", "datetime")
_DISCRETE = ("categorical", "ordinal", "boolean")


def _numeric(s: pd.Series) -> np.ndarray:
    if ptypes.is_datetime64_any_dtype(s.dtype):
        out = s.to_numpy(dtype="datetime64[ns]").astype(np.int64).astype(float)
        out[s.isna().to_numpy()] = np.nan
        return out
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def ks_complement(real, synthetic) -> float:
    """``1 - D`` of the two-sample Kolmogorov-Smirnov test (missing values dropped)."""
    a = np.round(_numeric(pd.Series(real)), _DECIMALS)
    b = np.round(_numeric(pd.Series(synthetic)), _DECIMALS)
    return 1.0 - ks_statistic(a, b)


def tv_complement(real, synthetic) -> float:
    """``1 - TV`` between the frequencies of the non-missing values of two columns."""
    r = pd.Series(real).dropna().astype(object).value_counts()
    s = pd.Series(synthetic).dropna().astype(object).value_counts()
    if len(r) == 0 or len(s) == 0:
        return float("nan")
    extra = s.index.difference(r.index)
    r = pd.concat([r.astype(float), pd.Series(1e-6, index=extra)])
    p, q = (r / r.sum()).align(s / s.sum(), fill_value=0.0)
    return float(1.0 - 0.5 * np.abs(p.to_numpy() - q.to_numpy()).sum())


def _pearson(df: pd.DataFrame) -> float:
    x, y = _numeric(df.iloc[:, 0]), _numeric(df.iloc[:, 1])
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    return float(np.clip((x @ y) / np.sqrt((x @ x) * (y @ y)), -1.0, 1.0))


def correlation_similarity(real: pd.DataFrame, synthetic: pd.DataFrame,
                           real_correlation_threshold: float = 0.0) -> float:
    """``1 - |r_real - r_syn| / 2`` for the Pearson correlation of two continuous columns
    (rows with a missing entry dropped). NaN if a column is constant or if the real
    ``|r_real| <= real_correlation_threshold``."""
    r = _pearson(real)
    if np.isnan(r) or abs(r) <= real_correlation_threshold:
        return float("nan")
    return 1.0 - abs(r - _pearson(synthetic)) / 2.0


def _joint(df: pd.DataFrame) -> pd.Series:
    cols = [df.iloc[:, 0].astype(object).rename("a"), df.iloc[:, 1].astype(object).rename("b")]
    return pd.concat(cols, axis=1).groupby(["a", "b"], dropna=False).size()


def cramers_v(counts: pd.Series) -> float:
    """Cramér's V (no continuity correction) of joint counts indexed by ``(a, b)``; NaN for a
    table with fewer than two rows or columns."""
    from scipy.stats.contingency import association

    table = counts.unstack(fill_value=0).to_numpy()
    if table.sum() == 0 or min(table.shape) < 2:
        return float("nan")
    return float(association(table, method="cramer"))


def contingency_similarity(real: pd.DataFrame, synthetic: pd.DataFrame,
                           real_association_threshold: float = 0.0) -> float:
    """``1 - TV`` of the joint frequencies of two discrete columns (missing = its own value).
    With ``real_association_threshold > 0``: NaN unless the real Cramér's V exceeds it."""
    counts = _joint(real)
    if real_association_threshold > 0:
        v = cramers_v(counts)
        if np.isnan(v) or v <= real_association_threshold:
            return float("nan")
    p, q = (counts / len(real)).align(_joint(synthetic) / len(synthetic), fill_value=0.0)
    return float(1.0 - 0.5 * np.abs(p.to_numpy() - q.to_numpy()).sum())


def _discretize(s: pd.Series) -> pd.Series:
    """SDMetrics' pair-trend binning: 10 histogram bins of the column's own values."""
    v = _numeric(s)
    edges = np.histogram_bin_edges(v[~np.isnan(v)])
    return pd.Series(np.digitize(v, bins=edges), index=s.index)


def sdtypes_of(df: pd.DataFrame, metadata: dict | None = None) -> dict[str, str]:
    """Column -> sdtype: from SDV-style ``metadata`` (``{"columns": {name: {"sdtype": ...}}}``)
    when given, else bool → boolean, datetime → datetime, other numeric → numerical, the
    rest → categorical."""
    if metadata is not None:
        cols = metadata.get("columns", metadata)
        missing = [c for c in df.columns if c not in cols]
        if missing:
            raise ValueError(f"metadata has no entry for column {missing[0]!r}")
        return {c: cols[c]["sdtype"] for c in df.columns}
    out = {}
    for c in df.columns:
        dt = df[c].dtype
        if ptypes.is_bool_dtype(dt):
            out[c] = "boolean"
        elif ptypes.is_datetime64_any_dtype(dt):
            out[c] = "datetime"
        elif ptypes.is_numeric_dtype(dt):
            out[c] = "numerical"
        else:
            out[c] = "categorical"
    return out


def _frames(real, synthetic, min_rows: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    real = as_frame(real, name="real")
    synthetic = as_frame(synthetic, columns=list(real.columns), name="synthetic")
    require_rows(len(real), "real", min_rows)
    require_rows(len(synthetic), "synthetic", min_rows)
    absent = [c for c in real.columns if c not in synthetic.columns]
    if absent:
        raise ValueError(f"synthetic data is missing column {absent[0]!r}")
    return real, synthetic[list(real.columns)]


def column_shapes(real, synthetic, metadata: dict | None = None) -> pd.DataFrame:
    """Per-column ``Column``, ``Metric`` (KSComplement / TVComplement) and ``Score``."""
    real, synthetic = _frames(real, synthetic)
    rows = []
    for col, sdtype in sdtypes_of(real, metadata).items():
        if sdtype in _CONTINUOUS:
            rows.append((col, "KSComplement", ks_complement(real[col], synthetic[col])))
        elif sdtype in _DISCRETE:
            rows.append((col, "TVComplement", tv_complement(real[col], synthetic[col])))
    return pd.DataFrame(rows, columns=["Column", "Metric", "Score"])


def column_pair_trends(real, synthetic, metadata: dict | None = None, *,
                       real_correlation_threshold: float = 0.5,
                       real_association_threshold: float = 0.3) -> pd.DataFrame:
    """Per-pair ``Column 1``, ``Column 2``, ``Metric`` (CorrelationSimilarity /
    ContingencySimilarity) and ``Score``; NaN for a pair below the thresholds (it does not
    count in the property score)."""
    real, synthetic = _frames(real, synthetic, min_rows=2)  # (correlations of 2 rows at least)
    sdtypes = {c: t for c, t in sdtypes_of(real, metadata).items() if t in _CONTINUOUS + _DISCRETE}
    cont = {c for c, t in sdtypes.items() if t in _CONTINUOUS}
    binned = {side: {c: _discretize(df[c]) for c in cont}
              for side, df in (("real", real), ("synthetic", synthetic))}
    rows = []
    for a, b in itertools.combinations(sdtypes, 2):
        if a in cont and b in cont:
            score = correlation_similarity(real[[a, b]], synthetic[[a, b]],
                                           real_correlation_threshold)
            rows.append((a, b, "CorrelationSimilarity", score))
            continue
        pair = []
        for side, df in (("real", real), ("synthetic", synthetic)):
            pair.append(pd.concat([binned[side][c] if c in cont else df[c] for c in (a, b)],
                                  axis=1))
        rows.append((a, b, "ContingencySimilarity",
                     contingency_similarity(*pair, real_association_threshold)))
    return pd.DataFrame(rows, columns=["Column 1", "Column 2", "Metric", "Score"])


@dataclass
class SDMetricsScores:
    """``overall`` = mean of ``column_shapes`` and ``column_pair_trends`` (property scores);
    ``shapes`` / ``pair_trends`` hold the per-column / per-pair details."""

    overall: float
    column_shapes: float
    column_pair_trends: float
    shapes: pd.DataFrame
    pair_trends: pd.DataFrame


def sdmetrics_quality(real, synthetic, metadata: dict | None = None, *,
                      real_correlation_threshold: float = 0.5,
                      real_association_threshold: float = 0.3) -> SDMetricsScores:
    """Column Shapes, Column Pair Trends and the overall quality score of SDMetrics'
    single-table ``QualityReport`` (NaN scores skipped in the means, as there).

    The thresholds are SDMetrics 0.32's defaults: only pairs whose real correlation
    ``|r| > 0.5`` or real Cramér's V ``> 0.3`` count. Set both to 0 for the earlier definition
    over every pair (the one TabSyn / TabDDPM-era papers report)."""
    shapes = column_shapes(real, synthetic, metadata)
    pairs = column_pair_trends(real, synthetic, metadata,
                               real_correlation_threshold=real_correlation_threshold,
                               real_association_threshold=real_association_threshold)
    s = float(np.nanmean(shapes["Score"])) if shapes["Score"].notna().any() else np.nan
    p = float(np.nanmean(pairs["Score"])) if pairs["Score"].notna().any() else np.nan
    overall = float(np.nanmean([s, p])) if np.isfinite([s, p]).any() else np.nan
    return SDMetricsScores(overall=overall, column_shapes=s, column_pair_trends=p, shapes=shapes,
                           pair_trends=pairs)
