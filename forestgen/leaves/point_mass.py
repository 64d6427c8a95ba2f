"""Point masses inside a numeric leaf: zero inflation and other spikes of a continuous column.

A numeric column whose training values put at least 10% of the rows on one value (the
``atoms`` the encoder records in :class:`~forestgen.data.schema.ColumnSpec`; fair's
``affairs == 0`` in 68% of rows) is a mixture in every leaf,

    p(x | leaf) = sum_a pi_a [x = a] + (1 - sum_a pi_a) f(x | leaf),

with ``pi_a`` the leaf's (weighted) share of rows at atom ``a`` and ``f`` any numeric leaf model
fitted on the leaf's other rows (or given already fitted, as RFDE/DEF cell-uniform leaves are).
The density is taken against counting measure on the atoms plus Lebesgue measure elsewhere:
``log_prob`` of an atom is its log mass, of any other value the log of ``(1 - sum pi) f``.
Samples hit the atoms exactly, so synthetic data keep the point masses that a continuous leaf
alone would smear.

``prior`` (pseudo-rows, default 0) shrinks each leaf's shares toward the column's overall
shares, ``pi_a = (n_a + prior g_a) / (N + prior)`` with ``g`` restricted to the atoms inside
the leaf's cell (and the rest to the continuous part): a leaf of one row then still gives an
atom, or the values off it, positive mass (issue 11: DEF leaves of one or two rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen import registry
from forestgen.leaves.base import ColumnCell, LeafModel
from forestgen.leaves.stats import AtomStats
from forestgen.registry import register


@register("leaf", "point_mass")
class PointMassLeaf(LeafModel):
    """``base`` numeric leaf plus per-leaf point masses at ``atoms``.

    Parameters
    ----------
    base : numeric leaf model (name, class or instance) for the values off the atoms.
    atoms : the point-mass values (encoded units); empty: ``base`` alone.
    prior : pseudo-count strength of the Dirichlet prior on the shares, centred on the
        column's overall shares (module docstring; default 0: each leaf's own shares).
    """

    discrete = False

    def __init__(self, *, base: Any = "truncnorm", atoms: Any = (), prior: float = 0.0):
        self.base = base
        self.atoms = tuple(float(a) for a in atoms)
        self.prior = prior

    def get_params(self) -> dict:
        return {"base": self.base, "atoms": list(self.atoms), "prior": self.prior}

    def _base_model(self) -> LeafModel:
        if not hasattr(self, "base_"):
            self.base_ = registry.resolve("leaf", self.base, LeafModel)
            if self.base_.discrete:
                raise ValueError(f"PointMassLeaf needs a numeric base, got {self.base!r}")
        return self.base_

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> PointMassLeaf:
        x = np.asarray(x, float)
        on_atom = self._atom_index(x) >= 0
        self._base_model().fit(np.where(on_atom, np.nan, x), leaf, cell, weight)
        return self.fit_masses(x, leaf, len(cell.lower), weight,
                               inside=self._atoms_in_cells(cell))

    def fit_masses(self, x, leaf, n_leaves: int, weight=None,
                   inside: np.ndarray | None = None) -> PointMassLeaf:
        """Only the per-leaf atom shares (``base`` is already fitted, e.g. on leaf cells).
        ``inside [n_leaves, A]``: which atoms each leaf's cell holds (where the prior may put
        mass; default all)."""
        return self._set_masses(AtomStats.from_pairs(x, leaf, n_leaves, self.atoms,
                                                     weight=weight), inside)

    def fit_stats(self, stats: AtomStats, cell: ColumnCell) -> PointMassLeaf:
        """Fit from merged :class:`~forestgen.leaves.stats.AtomStats` (see
        :meth:`LeafModel.fit_stats`): ``base`` from the moments of the values off the atoms,
        the shares from the atom counts."""
        if not isinstance(stats, AtomStats) or stats.counts.shape[1] != len(self.atoms):
            raise ValueError(f"PointMassLeaf needs AtomStats for its {len(self.atoms)} atoms")
        self._base_model().fit_stats(stats.rest, cell)
        return self._set_masses(stats, self._atoms_in_cells(cell))

    @property
    def fits_from_stats(self) -> bool:
        return self._base_model().fits_from_stats

    def atoms_inside(self, lower, upper) -> np.ndarray:
        """``[L, A]``: atom ``a`` lies in leaf cell ``(lower, upper]``."""
        return self._atoms_in(lower, upper, len(lower))

    def _atoms_in_cells(self, cell: ColumnCell) -> np.ndarray | None:
        if cell is None or cell.lower is None or cell.upper is None:
            return None
        return self.atoms_inside(cell.lower, cell.upper)

    def _set_masses(self, stats: AtomStats, inside: np.ndarray | None = None) -> PointMassLeaf:
        if not self.prior >= 0:
            raise ValueError(f"PointMassLeaf prior must be >= 0, got {self.prior!r}")
        tot = stats.total
        counts = stats.counts
        if self.prior > 0 and len(self.atoms):
            all_rows = float(tot.sum())
            g = counts.sum(0) / (all_rows if all_rows > 0 else 1.0)
            pa = g[None, :] * (np.ones(counts.shape, bool) if inside is None else inside)
            z = pa.sum(1) + max(1.0 - float(g.sum()), 0.0)
            pa = pa / np.where(z > 0, z, 1.0)[:, None]
            counts = counts + self.prior * pa
            tot = tot + self.prior
        with np.errstate(invalid="ignore", divide="ignore"):
            mass = np.where(tot[:, None] > 0,
                            counts / np.where(tot > 0, tot, 1.0)[:, None], 0.0)
        self.mass_ = np.minimum(mass, 1.0)
        return self

    def _atom_index(self, x: np.ndarray) -> np.ndarray:
        """Index of the atom equal to each ``x`` (-1 if none)."""
        out = np.full(x.shape, -1, np.int64)
        for a, v in enumerate(self.atoms):
            out[x == v] = a
        return out

    # ------------------------------------------------------------------ persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        out = {"mass_": self.mass_}
        out.update({f"base_{k}": v for k, v in self._base_model().param_arrays().items()})
        return out

    def set_param_arrays(self, arrays: dict[str, np.ndarray]) -> PointMassLeaf:
        self.mass_ = np.asarray(arrays["mass_"], float)
        self._base_model().set_param_arrays({k[len("base_"):]: v for k, v in arrays.items()
                                             if k.startswith("base_")})
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        mass = arrays.get("mass_")
        if (not isinstance(mass, np.ndarray) or mass.shape != (n_leaves, len(self.atoms))
                or not (np.isfinite(mass).all() and (mass >= 0).all()
                        and (mass.sum(1) <= 1 + 1e-9).all())):
            raise ValueError(f"PointMassLeaf.mass_ must be [{n_leaves}, {len(self.atoms)}] "
                             "shares in [0, 1] summing to at most 1")
        self._base_model().check_param_arrays(
            {k[len("base_"):]: v for k, v in arrays.items() if k.startswith("base_")},
            n_leaves, n_levels)

    # ------------------------------------------------------------------ queries
    def _rest(self, leaf) -> np.ndarray:
        """``1 - sum_a pi_a`` per entry: the weight of the continuous part."""
        return np.maximum(1.0 - self.mass_[leaf].sum(1), 0.0)

    def log_prob(self, leaf, x):
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        idx = self._atom_index(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            cont = np.log(self._rest(leaf)) + self._base_model().log_prob(leaf, x)
            atom = np.log(self.mass_[leaf, np.maximum(idx, 0)]) if len(self.atoms) else cont
        out = np.where(idx >= 0, atom, cont)
        out = np.where(np.isnan(out) & ~np.isnan(x), -np.inf, out)
        return np.where(np.isnan(x), 0.0, out)

    def _atoms_in(self, lo, hi, m: int) -> np.ndarray:
        """``[m, A]``: atom ``a`` lies in ``(lo, hi]``."""
        a = np.asarray(self.atoms, float)[None, :]
        lo = np.broadcast_to(np.asarray(lo, float), (m,))[:, None]
        hi = np.broadcast_to(np.asarray(hi, float), (m,))[:, None]
        return (a > lo) & (a <= hi)

    def _interval_parts(self, leaf, lo, hi):
        leaf = np.asarray(leaf, np.int64)
        inside = self._atoms_in(lo, hi, len(leaf))
        p_atoms = (self.mass_[leaf] * inside).sum(1)
        with np.errstate(under="ignore"):
            p_cont = self._rest(leaf) * np.exp(self._base_model().log_prob_interval(leaf, lo,
                                                                                    hi))
        return leaf, inside, p_atoms, np.nan_to_num(p_cont)

    def log_prob_interval(self, leaf, lo, hi):
        _, _, pa, pc = self._interval_parts(leaf, lo, hi)
        with np.errstate(divide="ignore"):
            return np.log(pa + pc)

    def mean(self, leaf):
        leaf = np.asarray(leaf, np.int64)
        base = np.nan_to_num(self._base_model().mean(leaf))
        return self.mass_[leaf] @ np.asarray(self.atoms, float) + self._rest(leaf) * base

    def mean_interval(self, leaf, lo, hi):
        leaf, inside, pa, pc = self._interval_parts(leaf, lo, hi)
        sa = (self.mass_[leaf] * inside) @ np.asarray(self.atoms, float)
        base = self._base_model().mean_interval(leaf, lo, hi)
        mc = np.nan_to_num(base)
        with np.errstate(invalid="ignore", divide="ignore"):
            # no mass in the interval (e.g. a zero-width cell): the base model decides, as in
            # sample()
            return np.where(pa + pc > 0, (sa + pc * mc) / (pa + pc), base)

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        A = len(self.atoms)
        if lo is None and hi is None:
            w_atoms, w_cont = self.mass_[leaf], self._rest(leaf)
        else:
            lo_ = np.full(m, -np.inf) if lo is None else lo
            hi_ = np.full(m, np.inf) if hi is None else hi
            _, inside, _, w_cont = self._interval_parts(leaf, lo_, hi_)
            w_atoms = self.mass_[leaf] * inside
        w = np.column_stack([w_atoms, w_cont]) if A else w_cont[:, None]
        tot = w.sum(1)
        u = rng.random(m) * np.where(tot > 0, tot, 1.0)
        pick = np.minimum((np.cumsum(w, axis=1) < u[:, None]).sum(1), A)
        # no mass anywhere (evidence outside the leaf): the base model decides
        pick = np.where(tot > 0, pick, A)
        out = np.empty(m)
        on = pick < A
        out[on] = np.asarray(self.atoms, float)[pick[on]] if A else 0.0
        rest = np.flatnonzero(~on)
        if len(rest):
            sub = {k: (None if v is None else np.broadcast_to(np.asarray(v, float), (m,))[rest])
                   for k, v in (("lo", lo), ("hi", hi))}
            out[rest] = self._base_model().sample(leaf[rest], rng, lo=sub["lo"], hi=sub["hi"])
        return out

    # ------------------------------------------------------------------ torch hooks
    @property
    def has_torch(self) -> bool:
        return self._base_model().has_torch

    @property
    def has_torch_sampler(self) -> bool:
        return self._base_model().has_torch_sampler

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        base = self._base_model()
        return {"base": base.torch_sample_params(n_leaves, device),
                "base_fn": type(base).torch_sample,
                "atoms": torch_tensor(np.asarray(self.atoms, float), "float64", device),
                "cum": torch_tensor(np.cumsum(self.mass_, axis=1), "float64", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        """An atom if ``u`` falls below the leaf's cumulative atom masses, else the base leaf's
        draw from ``u`` rescaled to ``[0, 1)`` over the continuous part."""
        import torch

        cum = params["cum"][leaf]  # [m, A]
        A = cum.shape[1]
        if A == 0:
            return params["base_fn"](params["base"], leaf, u)
        pick = (cum <= u[:, None]).sum(1)  # index of the first atom with u < cum, A if none
        rest = (1.0 - cum[:, -1]).clamp(min=1e-300)
        v = ((u - cum[:, -1]) / rest).clamp(0.0, 1.0 - 2.0**-53)
        cont = params["base_fn"](params["base"], leaf, v)
        atom = params["atoms"][pick.clamp(max=A - 1)]
        return torch.where(pick < A, atom, cont)

    def torch_params(self, dtype, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        base = self._base_model()
        with np.errstate(divide="ignore"):
            log_mass = np.log(self.mass_)
            log_rest = np.log(np.maximum(1.0 - self.mass_.sum(1), 0.0))
        return {"base": base.torch_params(dtype, device), "base_fn": type(base).torch_log_prob,
                "atoms": torch_tensor(np.asarray(self.atoms, float), dtype, device),
                "log_mass": torch_tensor(log_mass, dtype, device),
                "log_rest": torch_tensor(log_rest, dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        out = params["log_rest"][leaf] + params["base_fn"](params["base"], leaf, x)
        for a in range(params["atoms"].numel()):
            hit = x.detach() == params["atoms"][a]
            out = torch.where(hit, params["log_mass"][leaf, a], out)
        return out
