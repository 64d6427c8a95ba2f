"""Exact draws of EOGT's law given point values, without listing its regions (Nock & Guillame-Bert
2023, eq. (8); spec ``generative_forests.md`` §3.4, §4.3).

Given point values ``x_E`` the conditional law picks a region ``C`` with probability ``∝ Q̂(C) ·
Π_{j∈E} u_j(C)``, ``u_j(C)`` the uniform density of ``x_j`` in ``C`` (``1 / |C_j|`` on a numeric
column, one over the region's levels on a discrete one), then draws the free columns uniformly in
``C``. A numeric column may instead be given a short interval ``I_j`` (the cell of a decoded grid
value: ``u_j(C) = |C_j ∩ I_j| / |C_j|``, and ``x_j`` is drawn in ``C_j ∩ I_j``); a node whose
threshold cuts ``I_j`` branches freely. When one value falls in many narrow cells the regions
compatible with it can be too many to list (:mod:`~forestgen.families.intersection.regions`); this
module samples instead. The proposal is the star-node walk with the branch of every node on an
evidence column *forced* to the side holding ``x_j``: it reaches ``C`` with probability ``Q̂(C) /
F(C)``, ``F`` the product of the forced branches' ``q̂``. The importance ratio is then ``F(C) · Π
u_j(C) ≤ Π_j 1 / δ_j``, ``δ_j`` the narrowest cell any split of the forest can leave around ``x_j``
on a numeric column (``min(1, |I_j| / δ_j)`` for an interval, ``δ_j`` the narrowest cell it meets;
1 on a discrete column, whose ``u_j ≤ 1``), and a proposal is accepted with probability ratio /
bound: an exact rejection sampler whose acceptance rate is the law's probability of the finest cells
around ``x_E``. The ``smoothing`` component (uniform on the box, weight ``ε``) is proposed with
probability ``ε`` and weighed the same way, so the draws follow the smoothed law's conditional.
Proposals are independent and hashed from one seed and their index
(:func:`~forestgen.families.intersection.cells.unit_hash`): the result does not depend on the
thread count.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from forestgen.families.intersection.cells import unit_hash
from forestgen.families.intersection.star import (
    TreeGeometry,
    approx_q,
    cut_region,
    uniform_coordinate,
)
from forestgen.parallel import parallel_kernel


def log_bound(g: TreeGeometry, lo_e: np.ndarray, hi_e: np.ndarray, kind: np.ndarray,
              weigh: np.ndarray | None = None) -> float:
    """``log`` of the bound on the importance ratio for the evidence ``(lo_e, hi_e]`` per
    column (NaN = free; ``lo_e == hi_e``: a point value): over the numeric evidence columns,
    ``-log δ_j`` for a point, ``log min(1, |I_j| / δ_j)`` for an interval, ``δ_j`` the narrowest
    cell between consecutive split thresholds on column ``j`` (any tree) and the root box faces
    that holds the point or meets the interval; ``-inf`` when the evidence misses the box.
    Columns with ``weigh`` false only steer the walk: their factor is left to the caller."""
    f = g.forest
    r0 = f.roots[0]
    out = 0.0
    for j in map(int, np.flatnonzero(~np.isnan(lo_e))):
        if kind[j] != 0 or (weigh is not None and not weigh[j]):
            continue
        a, b = float(lo_e[j]), float(hi_e[j])
        lo, hi = float(g.lo[r0][j]), float(g.hi[r0][j])
        t = f.threshold[(f.feature == j) & (f.cat_off < 0)]
        faces = np.unique(np.r_[lo, hi, t[(t > lo) & (t < hi)]])
        if a == b:
            if not lo < a <= hi:
                return -math.inf
            k = int(np.searchsorted(faces, a, side="left"))  # the cell (faces[k-1], faces[k]]
            out -= math.log(faces[k] - faces[k - 1])
            continue
        a, b = max(a, lo), min(b, hi)
        if not a < b:
            return -math.inf
        k0 = max(int(np.searchsorted(faces, a, side="right")), 1)
        k1 = int(np.searchsorted(faces, b, side="left"))
        delta = float(np.diff(faces)[k0 - 1:k1].min())
        out += min(0.0, math.log(b - a) - math.log(delta))
    return out


def forced_draws(g: TreeGeometry, kind: np.ndarray, lo_e: np.ndarray, hi_e: np.ndarray, n: int,
                 eps: float, rng: np.random.Generator, weigh: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` proposals for the evidence ``(lo_e, hi_e]`` (NaN = free; equal bounds: a point
    value): the accepted draws ``[k, d]`` and whether each came from the smoothing component.
    A column with ``weigh`` false is forced but its factor ``u_j`` is left out (the caller
    accepts the draws by it, e.g. a region's atom share)."""
    weigh = np.ones(len(lo_e), bool) if weigh is None else np.asarray(weigh, bool)
    bound = log_bound(g, lo_e, hi_e, kind, weigh)
    if bound == -math.inf:
        return np.empty((0, len(lo_e))), np.zeros(0, bool)
    seed = int(rng.integers(0, 2**63 - 1))
    ev = ForcedEvidence(np.asarray(lo_e, np.float64), np.asarray(hi_e, np.float64), weigh)
    out, ok, uni = _forced_kernel(int(n), seed, ev, float(bound), float(eps), g.kernel_arrays(),
                                  np.asarray(kind, np.int64))
    return out[ok], uni[ok]


class ForcedEvidence(NamedTuple):
    """Evidence ``(elo, ehi]`` per column (NaN ``elo``: free; equal bounds: a point value) and
    whether each forced column's factor is weighed here (``weigh``)."""

    elo: np.ndarray
    ehi: np.ndarray
    weigh: np.ndarray


@parallel_kernel
def _forced_kernel(n, seed, ev, bound, eps, geo, kind):
    elo, ehi, weigh = ev.elo, ev.ehi, ev.weigh
    feature, threshold, left, right, cat_off, cat_left, roots = geo.feature, geo.threshold, \
        geo.left, geo.right, geo.cat_off, geo.cat_left, geo.roots
    nlo, nhi, nmask, nom_off, nlev = geo.lo, geo.hi, geo.mask, geo.nom_off, geo.nlev
    d = nlo.shape[1]
    out = np.empty((n, d))
    ok = np.zeros(n, np.bool_)
    uni = np.zeros(n, np.bool_)
    r0 = roots[0]
    for i in prange(n):
        lo = nlo[r0].copy()
        hi = nhi[r0].copy()
        mask = nmask[r0].copy()
        k = 0
        smooth = unit_hash(seed, i, k) < eps
        k += 1
        logw = 0.0
        if not smooth:
            for t in range(roots.shape[0]):
                node = roots[t]
                while feature[node] >= 0 and logw > -math.inf:
                    q = approx_q(node, geo, lo, hi, mask)
                    j = feature[node]
                    free = math.isnan(elo[j])
                    if not free:
                        if cat_off[node] >= 0:
                            go_left = cat_left[cat_off[node] + int(elo[j])] == 1
                        elif ehi[j] <= threshold[node]:
                            go_left = True
                        elif elo[j] >= threshold[node]:
                            go_left = False
                        else:  # the threshold cuts the evidence interval
                            free = True
                    if free:
                        go_left = unit_hash(seed, i, k) < q
                        k += 1
                    else:
                        p = q if go_left else 1.0 - q
                        logw = logw + math.log(p) if p > 0 else -math.inf
                    cut_region(node, go_left, geo, lo, hi, mask)
                    node = left[node] if go_left else right[node]
        for j in range(d):  # the evidence's uniform density (or share) in the region
            if math.isnan(elo[j]) or logw == -math.inf:
                continue
            if not weigh[j]:  # the caller weighs it; the region must still meet the evidence
                if elo[j] < ehi[j]:
                    meets = hi[j] > elo[j] and lo[j] < ehi[j]
                else:
                    meets = lo[j] < elo[j] <= hi[j]
                if not meets:
                    logw = -math.inf
                continue
            if kind[j] == 2:
                o = nom_off[j]
                cnt = 0
                for v in range(nlev[j]):
                    cnt += mask[o + v]
                if mask[o + int(elo[j])] == 0:
                    logw = -math.inf
                else:
                    logw -= math.log(cnt)
            elif elo[j] < ehi[j]:
                a = max(lo[j], elo[j])
                b = min(hi[j], ehi[j])
                logw = logw + math.log(b - a) - math.log(hi[j] - lo[j]) if b > a else -math.inf
            elif not lo[j] < elo[j] <= hi[j]:
                logw = -math.inf
            elif kind[j] == 1:
                logw -= math.log(math.floor(hi[j]) - math.floor(lo[j]))
            else:
                logw -= math.log(hi[j] - lo[j])
        u = unit_hash(seed, i, k)
        k += 1
        if logw == -math.inf or not u < math.exp(logw - bound):
            continue
        ok[i] = True
        uni[i] = smooth
        for j in range(d):  # the rest uniformly in the region (as the sampler)
            if not math.isnan(elo[j]) and elo[j] == ehi[j]:
                out[i, j] = elo[j]
                continue
            u = unit_hash(seed, i, k)
            k += 1
            if not math.isnan(elo[j]):  # uniform in the region cut to the interval
                a = max(lo[j], elo[j])
                out[i, j] = a + (min(hi[j], ehi[j]) - a) * u
            else:
                out[i, j] = uniform_coordinate(j, u, kind, lo, hi, mask, geo)
    return out, ok, uni
