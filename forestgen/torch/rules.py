"""The table's logical rules (:mod:`forestgen.data.rules`) in the torch layer, kept exactly as
the numpy queries keep them (:mod:`forestgen.inference.rules`), so that ``to_torch()`` and
``as_dataset()`` describe the same law as ``log_prob`` and ``sample``:

* a column ``B`` that a mapping determines from ``A`` is marginalised out of the learner's
  density and set to ``f(A)`` in every draw: ``p'(x) = p(x_{-B}) 1[x_B = f(x_A)]``, so a row
  breaking the mapping has log density ``-inf``, and a row giving ``B`` but not ``A`` sums over
  the levels of ``A`` whose image is ``x_B``;
* an affine rule ``B = alpha + beta A`` (numeric columns) is such a mapping: ``B`` set to
  ``alpha + beta A`` in every draw, a row whose ``B`` is further than the rule's tolerance
  from it ``-inf``, and a row giving ``B`` but not ``A`` scored at ``A = (B - alpha) / beta``
  plus ``-log |beta|`` (no term where that value is a point mass of ``A``);
* declared constraints (``FixedCombinations``, ``Inequality``, ``Range``) restrict the law to
  the rows ``C`` they allow: ``log p'(x) - log P'(C)`` inside ``C`` (``P'(C)`` is the model's
  own, :func:`forestgen.inference.rules.constraint_log_normaliser`), ``-inf`` outside; draws
  are kept by rejection.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from forestgen.data.rules import Rules
from forestgen.inference.rules import open_constraint_log_factor

__all__ = ["RuleKeeper"]

#: rejection rounds before draws that keep the declared constraints are given up on
MAX_REJECTION_ROUNDS = 50


class RuleKeeper:
    """Rules of ``model`` over the encoded columns ``free`` (all columns, or the free columns of
    a conditional whose point evidence is ``fill``, a ``[d]`` array, NaN where none, and whose
    evidence is the dict ``conditions``)."""

    def __init__(self, model, rules: Rules, free: np.ndarray, fill: np.ndarray | None = None,
                 conditions: dict | None = None):
        self.model = model
        self.rules = rules
        self.d = model.schema_.d
        self.free = np.asarray(free, dtype=np.int64)
        self.fill = np.full(self.d, np.nan) if fill is None else np.asarray(fill, float)
        self.pos = {int(j): i for i, j in enumerate(self.free)}
        self.conditions = conditions

    def left_out(self, active: np.ndarray, point: np.ndarray, given: set[int]) -> np.ndarray:
        """The columns a conditional leaves out (``[d]`` bool): those with evidence
        (``active``, after :func:`~forestgen.inference.conditions.parse_conditions` moved the
        evidence on a determined column to its determinant), every determined column that
        was ``given`` (its value is now its determinant's evidence), and every determined
        column whose determinant is given a range or set (``point`` NaN): it is a function
        of a column the conditional does not return, and is left out with it."""
        out = np.asarray(active, bool).copy()
        for m in self.rules.mappings:
            a, b = m.determinant, m.determined
            if b in given or (out[a] and np.isnan(point[a])):
                out[b] = True
        return out

    # ------------------------------------------------------------------ rows
    def full(self, x: np.ndarray) -> np.ndarray:
        """Free-column rows ``[n, f]`` -> full encoded rows ``[n, d]`` with the evidence."""
        out = np.tile(self.fill, (len(x), 1))
        out[:, self.free] = x
        return out

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Draws ``x [n, f]`` with every free determined column set to its determinant's image
        (the determinant taken from the row or from the point evidence)."""
        if not self.rules.mappings:
            return x
        out = x.clone()
        for m in self.rules.mappings:
            b = self.pos.get(m.determined)
            if b is None:
                continue
            a = self.pos.get(m.determinant)
            codes = out[:, a] if a is not None else torch.full(
                (len(out),), float(self.fill[m.determinant]), dtype=out.dtype, device=out.device)
            if m.affine:  # (the determinant on its grid first, as it decodes)
                if m.grid > 0:
                    codes = torch.round(codes / m.grid) * m.grid
                    if a is not None:
                        out[:, a] = codes
                keep = torch.isnan(codes) | torch.isnan(out[:, b])  # (missing stays missing)
                out[:, b] = torch.where(keep, out[:, b], m.alpha + m.beta * codes)
                continue
            vals = torch.as_tensor(m.values, dtype=out.dtype, device=out.device)
            if m.threshold:  # the interval of the determinant's value
                cuts = torch.as_tensor(m.cuts, dtype=out.dtype, device=out.device)
                ok = ~torch.isnan(codes)
                idx = torch.bucketize(torch.where(ok, codes, torch.zeros_like(codes)), cuts,
                                      right=True)
                out[:, b] = torch.where(ok, vals[idx], out[:, b])
                continue
            ok = torch.isfinite(codes) & (codes >= 0) & (codes < len(vals))
            img = vals[torch.where(ok, codes, torch.zeros_like(codes)).long()]
            ok &= ~torch.isnan(img)
            out[:, b] = torch.where(ok, img, out[:, b])
        return out

    def holds(self, x: torch.Tensor) -> torch.Tensor:
        """bool ``[n]``: rows (free columns) that keep every rule, with the evidence."""
        Z = self.full(x.detach().to("cpu", torch.float64).numpy())
        return torch.as_tensor(self.rules.holds(Z, self.model.encoder_.schema), device=x.device)

    # ------------------------------------------------------------------ sampling
    def draw(self, draw: Callable[[int], torch.Tensor], n: int) -> torch.Tensor:
        """``n`` rows from ``draw`` (the learner's draws of the free columns) with the mappings
        applied and, by rejection, the declared constraints kept."""
        out = self.apply(draw(n))
        if not self.rules.constraints or n == 0:
            return out
        for _ in range(MAX_REJECTION_ROUNDS):
            bad = torch.nonzero(~self.holds(out)).squeeze(-1)
            if bad.numel() == 0:
                return out
            out = out.index_copy(0, bad, self.apply(draw(int(bad.numel()))))
        raise RuntimeError(
            f"{type(self.model).__name__}: {MAX_REJECTION_ROUNDS} rounds of torch draws did "
            f"not keep the declared constraints; the model gives them too little mass")

    # ------------------------------------------------------------------ density
    def log_prob(self, score: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                 log_z: float = 0.0) -> torch.Tensor:
        """``log p'`` of rows ``x [n, f]``, given ``score``, the learner's log density of such
        rows (NaN entries marginalised) and ``log_z = log P'(C)`` of the declared
        constraints."""
        Z = self.full(x.detach().to("cpu", torch.float64).numpy())
        bad = self.rules.broken_mappings(Z)
        xm = x.clone()
        expand: list[tuple[int, int, int]] = []  # (row, free position of A, level of A)
        log_jac = np.zeros(len(Z))
        for m in self.rules.mappings:
            b = self.pos.get(m.determined)
            if b is None:
                continue
            a = self.pos.get(m.determinant)
            if a is not None:
                rows = np.flatnonzero(np.isnan(Z[:, m.determinant]) &
                                      ~np.isnan(Z[:, m.determined]) & ~bad)
                if rows.size and m.affine:  # A = (B - alpha) / beta, density / |beta|
                    astar = m.inverse(Z[rows, m.determined])
                    xm[torch.as_tensor(rows, device=x.device), a] = torch.as_tensor(
                        astar, dtype=xm.dtype, device=x.device)
                    Z[rows, m.determinant] = astar  # (a second rule from A: checked below)
                    jac = np.full(len(rows), -math.log(abs(m.beta)))
                    atoms = np.asarray(self.model.encoder_.schema.columns[m.determinant].atoms
                                       or [], float)
                    if atoms.size:
                        jac[np.isclose(astar[:, None], atoms[None, :], rtol=1e-9,
                                       atol=1e-12).any(axis=1)] = 0.0
                    log_jac[rows] += jac
                elif rows.size and m.threshold:
                    names = self.model.schema_.names
                    raise NotImplementedError(
                        f"{type(self.model).__name__}: torch log_prob of rows that give "
                        f"{names[m.determined]!r} without {names[m.determinant]!r}, of which a "
                        f"rule makes it a threshold, is not implemented (use model.log_prob)")
                elif rows.size:
                    hit = np.isclose(m.values[None, :], Z[rows, m.determined][:, None],
                                     rtol=1e-9, atol=0.0)
                    bad[rows[~hit.any(axis=1)]] = True
                    for r, h in zip(rows, hit):
                        expand += [(int(r), a, int(c)) for c in np.flatnonzero(h)]
            xm[:, b] = math.nan
        bad |= self.rules.broken_mappings(Z)  # A set from one rule must keep the others
        res = score(xm)
        if expand:
            rows = torch.as_tensor([e[0] for e in expand], device=x.device)
            xe = xm[rows].clone()
            for i, (_, a, c) in enumerate(expand):
                xe[i, a] = float(c)
            se = score(xe)
            uniq = torch.unique(rows)
            combined = torch.stack([torch.logsumexp(se[rows == r], 0) for r in uniq])
            res = res.index_put((uniq,), combined)
        if log_jac.any():
            res = res + torch.as_tensor(log_jac, dtype=res.dtype, device=res.device)
        ok = ~bad
        if self.rules.constraints:
            ok &= self.rules.holds(Z, self.model.encoder_.schema)
            res = res - log_z
            # a row leaving a constraint open: + log P(C | its entries), numpy's estimate
            # (no gradient through it; forestgen.inference.rules.open_constraint_log_factor)
            factor = open_constraint_log_factor(self.model, np.where(ok[:, None], Z, 0.0),
                                                self.conditions)
            if factor.any():
                res = res + torch.as_tensor(factor, dtype=res.dtype, device=res.device)
        keep = torch.as_tensor(ok, device=x.device)
        return torch.where(keep, res, torch.full_like(res, -math.inf))
