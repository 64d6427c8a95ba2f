"""The support of a fitted model: the one set every query's law lives on (issue 32).

Decided once here, and applied by the density itself, so that ``log_prob``, ``sample``,
conditional sampling, ``expect`` / ``impute`` / ``predict``, ``as_dataset`` and the torch
layer describe one distribution:

* **numeric column** — the closed observed range ``[lower, upper]`` of its training values
  (a range declared in metadata always contains it). Leaf cells are intersected with it when
  the leaves are fitted (:func:`restrict_cells`) and every leaf model normalises over its
  cell, so the density integrates to one over exactly this range: there is no mass past it
  to clip.
* **decimals / step** — a numeric column whose training values lie on a grid (at most
  8 decimals, a coarser step such as halves or thousands, or whole days / hours / minutes)
  is a *continuous latent* ``X`` observed
  rounded: the value is ``round(X)``, the grid point nearest ``X`` (:func:`round_to_grid`).
  ``log_prob`` is the density of ``X``; every draw (numpy or torch, conditional or not)
  is ``round(X)``; ``expect`` is ``E[round(X)]`` (:func:`rounded_mean`); an interval
  condition ``low <= value <= high`` is the latent interval ``round(X) in [low, high]``
  (:func:`latent_interval`), so its probability is the probability of the values drawn.
  The range's ends are grid points, so rounding never leaves the range.
* **point masses** (``ColumnSpec.atoms``) — observed values, inside the range and on the grid.
* **discrete column** — its support levels (:attr:`ColumnSpec.support`: declared levels
  without training rows have probability zero).

Evidence of zero probability under this support raises
:class:`~forestgen.inference.ZeroProbabilityError` (or follows ``on_empty``). Per-row
predictive queries move an observed value outside the range to its nearest end
(:func:`clamp_rows`) and leave a discrete entry that is no level of its column free
(:func:`free_unseen_levels`), as the generic per-row queries do.
"""

from __future__ import annotations

import math

import numpy as np

from forestgen.data.schema import ColumnSpec, Schema

__all__ = ["grid_step", "latent_range", "restrict_cells", "restrict_levels", "round_to_grid",
           "to_support",
           "latent_interval", "rows_to_support", "interval_ends", "clamp_rows",
           "clamp_query_rows", "free_unseen_levels", "off_levels", "rounded_mean",
           "column_log_volumes", "support_log_volume", "over_log_volumes",
           "floor_zero_rows",
           "torch_to_support"]

#: leaves whose cell holds at most this many grid points get their rounded mean exactly (a
#: sum over the grid); wider ones get the latent mean, off by at most ``step / (2 * this)``
#: of the cell's width share at its ends (see :func:`rounded_mean`)
EXACT_GRID_POINTS = 256
#: ... and at most this many (grid point, component) pairs, for leaf models that are mixtures
#: (``n_components``: a kernel leaf's kernels, one per training row of the leaf), whose
#: components sit on the grid's values, so that rounding moves their mean by little
EXACT_GRID_PAIRS = 4096


def grid_step(spec: ColumnSpec) -> float | None:
    """Spacing of the column's grid in encoded units (``None``: no grid, or discrete)."""
    if not spec.has_grid:
        return None
    if spec.step is not None:
        return float(spec.step)
    return 10.0 ** -int(spec.decimals)


def latent_range(spec: ColumnSpec) -> tuple[float, float]:
    """The half-open interval ``(lo, hi]`` of the latent of numeric column ``spec`` that the
    density lives on: the observed range ``[lower, upper]``, widened on a grid by half a step
    at each end (the rounding cells of the end values, as RFDE's root box gives an integer
    column ``[min - 1/2, max + 1/2]``)."""
    s = grid_step(spec)
    below = float(np.nextafter(spec.lower, -np.inf))  # the interval is open on the left
    if s is None:
        return below, float(spec.upper)
    # half a step can vanish next to huge values (1e300 holds no fraction): keep the ends in
    return min(spec.lower - 0.5 * s, below), spec.upper + 0.5 * s


def restrict_cells(spec: ColumnSpec, lower: np.ndarray, upper: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Leaf cells ``(lower, upper]`` of a numeric column intersected with its
    :func:`latent_range`. A cell outside it becomes empty (``lower == upper``). Discrete
    columns and columns without a finite range are returned unchanged."""
    lower = np.asarray(lower, np.float64)
    upper = np.asarray(upper, np.float64)
    if spec.is_discrete or not (math.isfinite(spec.lower) and math.isfinite(spec.upper)):
        return lower, upper
    a, b = latent_range(spec)
    lo = np.maximum(lower, a)
    hi = np.minimum(upper, b)
    return np.minimum(lo, hi), hi


def restrict_levels(spec: ColumnSpec, allowed: np.ndarray) -> np.ndarray:
    """Leaf cells' allowed-level masks ``[L, k]`` of a discrete column intersected with its
    support levels (:attr:`ColumnSpec.support`: a declared level without training rows is in
    no cell, so no leaf smoothing gives it mass); a cell left with none allows the support.
    Returned unchanged when every level is in the support."""
    allowed = np.asarray(allowed, bool)
    sup = spec.support
    if sup is None or sup.all() or allowed.shape[1] != sup.shape[0]:
        return allowed
    out = allowed & sup[None, :]
    empty = ~out.any(axis=1)
    if empty.any():
        out[empty] = sup
    return out


def round_to_grid(x: np.ndarray, spec: ColumnSpec) -> np.ndarray:
    """The grid point nearest each ``x`` (the column's rounding map; identity off a grid).
    Written as ``rint(x * 10**d) / 10**d`` (or ``rint(x / step) * step``), exactly what
    :func:`torch_to_support` computes on a device."""
    x = np.asarray(x, np.float64)
    if spec.step is not None and spec.has_grid:
        return spec.on_step(np.rint(spec.step_units(x)))
    if spec.has_grid:
        q = 10.0 ** int(spec.decimals)
        return np.rint(x * q) / q
    return x


def to_support(x: np.ndarray, spec: ColumnSpec) -> np.ndarray:
    """Latent draws ``x`` of a numeric column as values: rounded to the grid and kept in the
    observed range (a no-op on exact draws except for rounding of the last ulp). NaN stays."""
    z = round_to_grid(x, spec)
    if math.isfinite(spec.lower) and math.isfinite(spec.upper):
        z = np.clip(z, spec.lower, spec.upper)
    return z


def rows_to_support(Z: np.ndarray, schema: Schema) -> np.ndarray:
    """:func:`to_support` on every numeric column of encoded rows ``Z`` (in place; returns
    ``Z``): the map every sampler's draws go through, idempotent on values already in the
    support."""
    for j, spec in enumerate(schema.columns):
        if not spec.is_discrete:
            Z[:, j] = to_support(Z[:, j], spec)
    return Z


def _grid_ceil(v: float, spec: ColumnSpec) -> float:
    if spec.step is not None:
        return float(spec.on_step(math.ceil(round(spec.step_units(v), 6))))
    q = 10.0 ** int(spec.decimals)
    return math.ceil(round(v * q, 6)) / q


def _grid_floor(v: float, spec: ColumnSpec) -> float:
    if spec.step is not None:
        return float(spec.on_step(math.floor(round(spec.step_units(v), 6))))
    q = 10.0 ** int(spec.decimals)
    return math.floor(round(v * q, 6)) / q


def latent_interval(spec: ColumnSpec, low: float, high: float) -> tuple[float, float] | None:
    """The condition ``low <= value <= high`` on numeric column ``spec`` as the half-open
    interval ``(lo, hi]`` of its latent (how evidence stores intervals): the latent values
    whose value (:func:`to_support`) lies in ``[low, high]``. On a grid, the rounding cells
    of the grid points in ``[low, high]``, ``(g_low - step/2, g_high + step/2]``; off a grid
    ``(nextafter(low, -inf), high]``, which holds exactly the doubles of ``[low, high]`` (a
    point mass at ``low`` keeps its mass). An end at or past the range's end is open
    (``-inf`` / ``inf``): values are kept in the range. ``None`` if no grid point lies in
    ``[low, high]``; an interval that misses the range is empty (zero probability)."""
    s = grid_step(spec)
    if s is None:
        g_lo, g_hi = low, high
    else:
        g_lo = _grid_ceil(low, spec) if math.isfinite(low) else -math.inf
        g_hi = _grid_floor(high, spec) if math.isfinite(high) else math.inf
        if not g_lo <= g_hi:
            return None
    if math.isfinite(spec.lower) and math.isfinite(spec.upper):
        if g_lo > spec.upper or g_hi < spec.lower:
            end = g_lo if g_lo > spec.upper else g_hi
            return float(end), float(end)  # outside the support: empty, probability zero
        if g_lo <= spec.lower:
            g_lo = -math.inf
        if g_hi >= spec.upper:
            g_hi = math.inf
    if s is None:
        lo = float(np.nextafter(g_lo, -np.inf)) if math.isfinite(g_lo) else g_lo
        return lo, g_hi
    return g_lo - 0.5 * s, g_hi + 0.5 * s


def interval_ends(spec: ColumnSpec, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The least and greatest *value* a draw from the stored latent interval ``(lo, hi]``
    may take (grid points inside it on a grid column, else ``nextafter(lo, +inf)`` and
    ``hi``; kept in the range). Draws are clipped to these, so interval bounds hold to the
    ulp."""
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    s = grid_step(spec)
    with np.errstate(invalid="ignore"):
        if s is None:
            a, b = np.nextafter(lo, np.inf), hi
        elif spec.step is not None:
            a = spec.on_step(np.ceil(np.round(spec.step_units(lo), 6)))
            b = spec.on_step(np.floor(np.round(spec.step_units(hi), 6)))
        else:
            q = 10.0 ** int(spec.decimals)
            a = np.ceil(np.round(lo * q, 6)) / q
            b = np.floor(np.round(hi * q, 6)) / q
    a = np.where(np.isfinite(lo), a, lo)
    b = np.where(np.isfinite(hi), b, hi)
    if math.isfinite(spec.lower) and math.isfinite(spec.upper):
        a = np.clip(a, spec.lower, spec.upper)
        b = np.clip(b, spec.lower, spec.upper)
    return a, b


def clamp_rows(schema: Schema, Z: np.ndarray, skip=()) -> list:
    """Move observed numeric entries of encoded rows ``Z`` (in place) that lie outside their
    column's observed range to its nearest end — the nearest point of the support, on which
    per-row predictive queries condition. Returns the names of the columns moved."""
    moved = []
    for j, spec in enumerate(schema.columns):
        if j in skip or spec.is_discrete or not (math.isfinite(spec.lower)
                                                and math.isfinite(spec.upper)):
            continue
        z = Z[:, j]
        with np.errstate(invalid="ignore"):
            out = (z < spec.lower) | (z > spec.upper)
        if out.any():
            Z[:, j] = np.where(out, np.clip(z, spec.lower, spec.upper), z)
            moved.append(spec.name)
    return moved


def column_log_volumes(schema: Schema) -> np.ndarray:
    """Per column, the log measure of its support: the latent range's width of a numeric
    column (a constant column off a grid counts 1), the number of support levels of a
    discrete one."""
    out = np.zeros(schema.d)
    for j, spec in enumerate(schema.columns):
        if spec.is_discrete:
            out[j] = math.log(max(int(spec.support.sum()), 1))
            continue
        a, b = latent_range(spec)
        if math.isfinite(a) and math.isfinite(b) and b > a:
            out[j] = math.log(b - a)
    return out


def support_log_volume(schema: Schema) -> float:
    """Log measure of the support (``-log`` of the uniform density on it): the sum of
    :func:`column_log_volumes`."""
    return float(column_log_volumes(schema).sum())


def over_log_volumes(log_volumes: np.ndarray, over) -> np.ndarray | float:
    """The log measure, per row, of the columns its density is over (``log_volumes`` per
    column): ``over`` is ``bool [n, d]`` (see :func:`floor_zero_rows`), a callable returning
    it, or ``None`` (every column: the total, a float)."""
    if over is None:
        return float(np.sum(log_volumes))
    cols = over() if callable(over) else over
    return np.asarray(cols, bool) @ np.asarray(log_volumes, np.float64)


def floor_zero_rows(logp: np.ndarray, floor: float | None, log_volumes: np.ndarray,
                    over=None) -> np.ndarray:
    """Rows of density zero — outside the support — scored ``floor`` times the uniform
    density on the columns the row's density is over, of per-column log measure
    ``log_volumes`` (:func:`column_log_volumes`), instead of ``-inf``; every other row keeps
    its exact density. ``None``: exact. ``over``: ``bool [n, d]``, those columns per row — its
    observed entries, less the columns evidence is given on (:func:`forestgen.inference.
    density_columns`) — or a callable returning it, called only when a row has density
    zero; default every column (complete rows, no conditions)."""
    if floor is None:
        return logp
    zero = np.isneginf(logp)
    if not zero.any():
        return logp
    return np.where(zero, math.log(floor) - over_log_volumes(log_volumes, over), logp)


def clamp_query_rows(model, Z: np.ndarray, query: str, skip=()) -> np.ndarray:
    """:func:`clamp_rows` for a per-row predictive ``query`` of ``model`` (``predict_proba``,
    ``predict``, ``impute``), with one ``RuntimeWarning`` naming the columns moved. Returns
    ``Z`` (changed in place)."""
    moved = clamp_rows(model.encoder_.schema, Z, skip)
    if moved:
        import warnings

        warnings.warn(f"{type(model).__name__}.{query}: observed values of column(s) {moved} "
                      f"lie outside the training range, where the model has no mass; those "
                      f"rows are answered at the nearest end of the range (the nearest point "
                      f"of the model's support)", RuntimeWarning, stacklevel=3)
    return Z


def off_levels(columns, Z: np.ndarray) -> np.ndarray:
    """``bool [n, d]``: the entries of encoded rows ``Z`` in discrete columns (``columns``,
    the ``d`` :class:`ColumnSpec` of ``Z``'s columns) that are no level of their column (a code
    outside ``0..k-1`` or a fraction) or a level outside its support (a declared level without
    training rows, :attr:`ColumnSpec.support`): outside the support; NaN is not."""
    Z = np.asarray(Z, np.float64)
    out = np.zeros(Z.shape, bool)
    for j, spec in enumerate(columns):
        if not spec.is_discrete:
            continue
        z = Z[:, j]
        k = spec.n_levels
        with np.errstate(invalid="ignore"):
            bad = ~np.isnan(z) & ((z < 0) | (z >= k) | (z != np.floor(z)))
        sup = spec.support
        if not sup.all():
            inside = ~np.isnan(z) & ~bad
            bad[inside] = ~sup[z[inside].astype(np.int64)]
        out[:, j] = bad
    return out


def free_unseen_levels(model, Z: np.ndarray, query: str, skip=()) -> np.ndarray:
    """Discrete entries of encoded rows ``Z`` that are no level of their column (a level unseen
    at fit, the encoder's code ``k``; a fraction) or a level without training rows
    (:func:`off_levels`) set to NaN in place, so a per-row predictive
    ``query`` leaves them free instead of conditioning on an entry of probability zero (as
    :func:`~forestgen.inference.conditions.evidence_from_frame` does with ``unseen="free"``),
    with one ``RuntimeWarning`` naming the columns. Returns ``Z``."""
    schema = model.encoder_.schema
    off = off_levels(schema.columns, Z)
    off[:, list(skip)] = False
    Z[off] = np.nan
    freed = [schema.names[j] for j in np.flatnonzero(off.any(axis=0))]
    if freed:
        import warnings

        warnings.warn(f"{type(model).__name__}.{query}: column(s) {freed} hold levels not seen "
                      f"at fit time, which have probability zero; those entries are left free "
                      f"(marginalised)", RuntimeWarning, stacklevel=3)
    return Z


def rounded_mean(lm, spec: ColumnSpec, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 cont_mean: np.ndarray) -> np.ndarray:
    """``E[round(X) | leaf, lo < X <= hi]`` for a grid column, from the leaf model's interval
    probabilities: with ``g0 = round(lo+)``, ``g1 = round(hi)`` the least and greatest values,
    ``E = g0 + step * sum_k P(X > g0 + (k - 1/2) step | ...)`` over the rounding boundaries
    between them. Exact where a leaf's interval spans at most :data:`EXACT_GRID_POINTS` grid
    points, times the leaf model's ``n_components`` at most :data:`EXACT_GRID_PAIRS`; wider
    ones keep the latent mean ``cont_mean`` (rounding moves a smooth law's mean by far less
    than a step there). ``lo``/``hi`` are finite (the cell within the range)."""
    s = grid_step(spec)
    out = np.array(cont_mean, np.float64, copy=True)
    if s is None or len(leaf) == 0:
        return out
    g0 = to_support(np.nextafter(lo, np.inf), spec)
    g1 = to_support(hi, spec)
    k = np.rint((g1 - g0) / s)
    ok = np.isfinite(k) & (k >= 0) & (k <= EXACT_GRID_POINTS) & np.isfinite(out)
    if hasattr(lm, "n_components"):  # a mixture leaf: each grid point costs each component
        ok &= np.where(ok, k, 0) * lm.n_components(leaf) <= EXACT_GRID_PAIRS
    one = ok & (k == 0)
    out[one] = g0[one]
    idx = np.flatnonzero(ok & (k > 0))
    if len(idx) == 0:
        return out
    kk = k[idx].astype(np.int64)
    rep = np.repeat(np.arange(len(idx)), kk)
    step_no = np.arange(len(rep)) - np.repeat(np.cumsum(kk) - kk, kk)  # 0 .. k-1
    mid = g0[idx][rep] + (step_no + 0.5) * s
    li = leaf[idx]
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        tot = lm.log_prob_interval(li, lo[idx], hi[idx])
        above = lm.log_prob_interval(li[rep], np.maximum(mid, lo[idx][rep]), hi[idx][rep])
        surv = np.exp(above - tot[rep])
    surv = np.where(np.isfinite(surv), np.clip(surv, 0.0, 1.0), 0.0)
    val = g0[idx] + s * np.bincount(rep, weights=surv, minlength=len(idx))
    good = np.isfinite(tot)
    out[idx[good]] = val[good]
    return out


def torch_to_support(x, spec: ColumnSpec):
    """:func:`to_support` on a float64 tensor (any device), bit for bit."""
    import torch

    if spec.has_grid:
        if spec.step is not None:
            o = spec.step_origin
            x = torch.round((x - o) / spec.step if o else x / spec.step) * spec.step
            if o:
                x = x + o
            if spec.decimals is not None:
                q = 10.0 ** int(spec.decimals)
                x = torch.round(x * q) / q
        else:
            q = 10.0 ** int(spec.decimals)
            x = torch.round(x * q) / q
    if math.isfinite(spec.lower) and math.isfinite(spec.upper):
        x = x.clamp(spec.lower, spec.upper)
    return x
