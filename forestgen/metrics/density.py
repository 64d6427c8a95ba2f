"""Density evaluation: mean test log-likelihood of a forestgen learner."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LogLikelihoodResult", "check_log_prob", "log_likelihood"]


@dataclass(frozen=True)
class LogLikelihoodResult:
    """Mean test log-likelihood in nats.

    ``mean`` is over all rows (``-inf`` if any row has zero density), ``mean_finite`` over rows
    with finite log density, ``per_dim`` = ``mean / n_dims``; ``stderr`` is the standard error
    of the finite mean and ``n_neginf`` counts rows with ``-inf`` log density.
    """

    mean: float
    per_dim: float
    mean_finite: float
    stderr: float
    n_rows: int
    n_dims: int
    n_neginf: int


def check_log_prob(values: object, n_rows: int) -> np.ndarray:
    """Validate a ``log_prob`` output: 1-D float array of length ``n_rows`` without NaN/+inf."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    lp = np.asarray(values, dtype=float).reshape(-1)
    if lp.shape[0] != n_rows:
        raise ValueError(f"log_prob returned {lp.shape[0]} values for {n_rows} rows")
    n_nan = int(np.isnan(lp).sum())
    if n_nan:
        raise ValueError(f"model.log_prob returned NaN for {n_nan} of {n_rows} rows")
    if np.isposinf(lp).any():
        raise ValueError("model.log_prob returned +inf (degenerate density)")
    return lp


def _n_dims(X: object) -> int:
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2:
        return int(shape[1])
    return int(np.asarray(X).reshape(len(X), -1).shape[1])


def log_likelihood(model: object, X: object) -> LogLikelihoodResult:
    """Mean log-likelihood of ``X`` under ``model`` (any object with ``log_prob(X)``).

    ``model.log_prob(X)`` must return one log density (nats) per row. Raises ``ValueError`` for
    NaN outputs; ``-inf`` rows are counted in ``n_neginf``.
    """
    if not hasattr(model, "log_prob"):
        raise TypeError(f"{type(model).__name__} has no log_prob(X) method")
    n_rows = len(X)
    if n_rows == 0:
        raise ValueError("X has no rows")
    lp = check_log_prob(model.log_prob(X), n_rows)
    n_dims = _n_dims(X)
    finite = np.isfinite(lp)
    mean = float(lp.mean())
    mf = float(lp[finite].mean()) if finite.any() else float("-inf")
    se = float(lp[finite].std(ddof=1) / np.sqrt(finite.sum())) if finite.sum() > 1 else 0.0
    return LogLikelihoodResult(mean=mean, per_dim=mean / n_dims, mean_finite=mf, stderr=se,
                               n_rows=n_rows, n_dims=n_dims, n_neginf=int((~finite).sum()))
