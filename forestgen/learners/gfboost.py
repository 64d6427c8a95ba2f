"""Generative Forests trained by GF.Boost (Nock & Guillame-Bert, "Generative Forests", 2023).
Spec: ``shared/papers/generative_forests.md``.

A generative forest's density lives on the partition induced by *all* its trees: cell ``C``
(one leaf per tree, intersected) carries the training mass ``R(C)`` spread uniformly,
``q(x) = R(C(x)) / μ(C(x))`` (spec §1.4). GF.Boost grows ``n_trees`` trees jointly: at each of
``n_iter`` iterations it splits the heaviest leaf over all trees with the predicate that most
lowers the Bayes risk of telling the data from the uniform measure, summed over every cell inside
that leaf (spec §2.3-2.5; :class:`~forestgen.splitters.bayes_risk.BayesRiskSplitter`).

The fitted partition is compiled into one tree whose leaves are the cells
(:class:`~forestgen.ensemble.intersection.IntersectionEnsembler`), with leaf weight ``R(C)`` and
uniform leaves on the cell (``cell_uniform`` / ``uniform_levels``), so ``forest_``,
``leaf_log_weight_`` and ``leaf_models_`` describe the model *exactly* and every shared query is
exact: ``log_prob`` (NaN entries marginalised), ``sample`` (cell ∝ ``R(C)``, then uniform: the
fast form of the paper's star-node sampler, spec §3.2), conditional sampling, ``predict_proba``,
``impute``, ``to_torch``, ``save``/``load``. The individual trees are kept in ``trees_``.

Measure convention of ``log_prob``: Lebesgue on continuous columns, counting on discrete ones
(categorical, bool, ordinal integers); wide integer columns are numeric with each integer owning
a unit interval, so their density equals the pmf under the counting measure. The support is the
training bounding box: points outside it or in a row-less cell get ``-inf`` (spec §4.1).
"""

from __future__ import annotations

import heapq
import sys
import time
from typing import Any

import numpy as np

from forestgen.base import GenerativeForest
from forestgen.data.encoder import TableEncoder
from forestgen.ensemble.intersection import IntersectionEnsembler
from forestgen.families import INTERSECTION
from forestgen.learners.rfde import column_layout, fit_cell_leaves, root_box
from forestgen.registry import register
from forestgen.splitters.bayes_risk import CANDIDATES, LOSSES, BayesRiskSplitter
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.cells import CellTable
from forestgen.tree.grow_midpoint import KIND_NOMINAL, KIND_ORDERED
from forestgen.tree.record import TreeRecord
from forestgen.validation import (
    check_bool,
    check_choice,
    check_int,
    check_random_state,
    check_real,
    seed_sequence,
)


@register("learner", "gfboost")
class GFBoost(GenerativeForest):
    """Generative forest grown by GF.Boost.

    Parameters
    ----------
    n_trees : ``T`` (default 50; the paper's lifelike runs use 500 and 200).
    n_iter : ``J``, total number of splits over all trees (default 200; paper 2000 and 500).
        The first ``T`` splits turn every root into a stump (heaviest leaf first).
    loss : ``"matusita"`` (default, as the reference code), ``"log"`` or ``"square"``.
    prior : ``π``, the weight of the data against the uniform measure (default 0.5).
    candidates : ``"observed"`` (default: leaf values and cell bounds, spec §2.6 [rec]) or
        ``"grid100"`` (100 evenly spaced thresholds, the reference code).
    max_candidates : cap on observed thresholds per column and leaf (default 255).
    min_rows : training weight each child of a split must receive (default 1).
    missing : how a training row missing a split column is routed (spec §2.7):
        ``"fractional"`` (default) splits it into two fragments weighted by the children's volume
        shares, down to fragments of 1/8 of a row, which then go to one side at random with
        that probability; ``"random_hard"`` (the reference code) always sends the whole row to
        one side at random. See :class:`~forestgen.tree.cells.CellTable`.
    progress : print a progress line on stderr.
    random_state : seeds the random side of missing-value fragments; without missing values
        training is deterministic (ties go to the lowest tree, node and column).

    Notes
    -----
    Training is single-threaded, so results do not depend on the thread count.
    """

    model_family = INTERSECTION

    method_name = "GF"
    _approx = False

    def __init__(self, *, n_trees: int = 50, n_iter: int = 200, loss: str = "matusita",
                 prior: float = 0.5, candidates: str = "observed", max_candidates: int = 255,
                 min_rows: float = 1.0, missing: str = "fractional", progress: bool = False,
                 random_state: Any = None):
        self.n_trees = n_trees
        self.n_iter = n_iter
        self.loss = loss
        self.prior = prior
        self.candidates = candidates
        self.max_candidates = max_candidates
        self.min_rows = min_rows
        self.missing = missing
        self.progress = progress
        self.random_state = random_state

    def _validate(self) -> None:
        check_int("n_trees", self.n_trees, 1)
        check_int("n_iter", self.n_iter, 0)
        check_choice("loss", self.loss, LOSSES)
        check_real("prior", self.prior, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("candidates", self.candidates, CANDIDATES)
        check_int("max_candidates", self.max_candidates, 2)
        check_real("min_rows", self.min_rows, 0.0, low_open=True)
        check_choice("missing", self.missing, ("fractional", "random_hard"))
        check_bool("progress", self.progress)
        check_random_state(self.random_state)

    def _splitter(self) -> BayesRiskSplitter:
        return BayesRiskSplitter(loss=self.loss, prior=self.prior, candidates=self.candidates,
                                 max_candidates=self.max_candidates, min_rows=self.min_rows,
                                 approx=self._approx)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None):
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds."""
        self._validate()
        splitter = self._splitter()
        self.encoder_ = TableEncoder(kinds=kinds).fit(X)
        Z = self.encoder_.transform(X)
        schema = self.encoder_.schema
        for j, spec in enumerate(schema.columns):
            if np.isnan(Z[:, j]).all():
                raise ValueError(f"column {spec.name!r} has no observed value")
        kind, nlev, nom_off, n_nom = column_layout(schema)
        integer = (kind == KIND_ORDERED) | np.array(
            [s.kind == "integer" and not s.is_discrete for s in schema.columns], bool)
        lo, hi = root_box(Z, schema)
        self.box_lo_, self.box_hi_ = lo, hi
        seed = int(seed_sequence(self.random_state).generate_state(1, np.uint64)[0] >> 1)
        table = CellTable(Z, kind, nlev, nom_off, n_nom, integer, lo, hi, int(self.n_trees),
                          int(self.n_iter), approx=self._approx,
                          min_fragment=1.0 / 8 if self.missing == "fractional" else np.inf,
                          seed=seed)
        self.risk_path_ = self._boost(table, splitter)
        self.n_splits_ = len(self.risk_path_) - 1
        self._finish(table, schema, kind, nlev, nom_off)
        return self

    def _boost(self, table: CellTable, splitter: BayesRiskSplitter) -> list[float]:
        """Alg. 4: ``n_iter`` times split the heaviest splittable leaf over all trees."""
        heap = [(-table.nR[t], t, t) for t in range(table.n_trees)]
        heapq.heapify(heap)
        risk = splitter.risk(table.R, table.U)
        path = [risk]
        J = int(self.n_iter)
        t0 = time.perf_counter()
        while len(path) <= J and heap:
            w, t, node = heapq.heappop(heap)
            gain, j, thr, mask = splitter.best_split(table, node)
            if j < 0:
                continue  # no admissible split: the leaf stays a leaf
            cells = table.cells_of(node).copy()
            before = splitter.risk(table.cR[cells], table.cU[cells])
            left, right = table.split(node, j, thr, mask)
            for child in (left, right):
                heapq.heappush(heap, (-table.nR[child], t, child))
            cells = np.r_[table.cells_of(left), table.cells_of(right)]
            risk += splitter.risk(table.cR[cells], table.cU[cells]) - before
            path.append(risk)
            if self.progress and (len(path) % 50 == 0 or len(path) > J):
                print(f"\r{type(self).__name__} {len(path) - 1}/{J} splits, "
                      f"{table.n_cells} cells, {time.perf_counter() - t0:.1f}s", end="",
                      file=sys.stderr, flush=True)
        if self.progress:
            print(file=sys.stderr)
        return path

    def _finish(self, table: CellTable, schema, kind, nlev, nom_off) -> None:
        n_levels = np.where(kind == KIND_NOMINAL, nlev, 0)
        self.forest_, self.leaf_log_weight_, leaf_cell = IntersectionEnsembler().compile(
            table, n_levels)
        R = np.exp(self.leaf_log_weight_)
        self.leaf_models_ = fit_cell_leaves(schema, table.clo[leaf_cell], table.chi[leaf_cell],
                                            table.cmask[leaf_cell], nom_off, R * table.m_total)
        self.trees_ = ForestArrays.from_trees(_tree_dicts(table, kind, nom_off, nlev), n_levels)
        self.cell_lo_ = table.clo[leaf_cell].copy()
        self.cell_hi_ = table.chi[leaf_cell].copy()
        self.cell_mask_ = table.cmask[leaf_cell].astype(bool)
        self.n_train_ = int(table.m_total)

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Boxes and masses of the partition's cells, in leaf order of ``forest_``:
        ``(lo, hi)`` intervals ``(lo, hi]`` per ordered column (encoded units), allowed-level
        mask per nominal column (offsets of :func:`~forestgen.learners.rfde.column_layout`),
        and ``R(C)``."""
        self._check_fitted()
        return self.cell_lo_, self.cell_hi_, self.cell_mask_, np.exp(self.leaf_log_weight_)

    @property
    def n_cells_(self) -> int:
        """Number of cells of the joint partition holding training mass."""
        self._check_fitted()
        return self.forest_.n_leaves

    def cell_risk(self) -> float:
        """Bayes risk ``Σ_C J_π(R(C), U(C))`` of the fitted partition (spec §2.2)."""
        self._check_fitted()
        R = np.exp(self.leaf_log_weight_)
        return self._splitter().risk(R, self._cell_volume_share())

    def _cell_volume_share(self) -> np.ndarray:
        """``U(C)``: each cell's share of the root box volume."""
        logu = np.zeros(self.n_cells_)
        for j, lm in enumerate(self.leaf_models_):
            if lm.discrete:
                logu += np.log((lm.pmf_ > 0).sum(1) / lm.pmf_.shape[1])
            else:
                logu += np.log((lm.hi_ - lm.lo_) / (self.box_hi_[j] - self.box_lo_[j]))
        return np.exp(logu)

    # ------------------------------------------------------------------ imputation
    def impute(self, X, method: str = "max_density", n_imputations: int = 1,
               random_state=None):
        """Fill missing entries (paper §7.2): ``"max_density"`` (default) draws them uniformly
        in the compatible cell of highest conditional density (ties at random); ``"sample"``
        draws from the exact conditional; ``"expectation"``: conditional mean / mode."""
        from forestgen.inference.api import impute

        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state)

    # ------------------------------------------------------------------ persistence
    def _extra_arrays(self):
        out = {"box_lo": self.box_lo_, "box_hi": self.box_hi_,
               "risk_path": np.asarray(self.risk_path_)}
        for k in ("cell_lo_", "cell_hi_", "cell_mask_"):
            if hasattr(self, k):
                out[k[:-1]] = getattr(self, k)
        out.update(self.trees_.to_arrays("trees."))
        return out

    def _extra_meta(self):
        return {"n_train": int(self.n_train_)}

    def _restore_extra(self, arrays, meta):
        self.box_lo_ = arrays["box_lo"]
        self.box_hi_ = arrays["box_hi"]
        self.risk_path_ = list(arrays["risk_path"])
        self.n_splits_ = len(self.risk_path_) - 1
        self.trees_ = ForestArrays.from_arrays(arrays, "trees.")
        self.n_train_ = int(meta["n_train"])
        for k in ("cell_lo", "cell_hi", "cell_mask"):
            if k in arrays:
                setattr(self, k + "_", arrays[k])


def _tree_dicts(table: CellTable, kind, nom_off, nlev) -> list[TreeRecord]:
    """The table's trees as tree-local records for :meth:`ForestArrays.from_trees`."""
    out = []
    for t in range(table.n_trees):
        order = [t]
        q = 0
        while q < len(order):  # breadth-first: parents before children
            node = order[q]
            if table.nfeat[node] >= 0:
                order += [int(table.nleft[node]), int(table.nright[node])]
            q += 1
        order = np.asarray(order, np.int64)
        local = {int(g): i for i, g in enumerate(order)}
        feat = table.nfeat[order].copy()
        left = np.array([local.get(int(g), -1) for g in table.nleft[order]], np.int64)
        right = np.array([local.get(int(g), -1) for g in table.nright[order]], np.int64)
        cat_off = np.full(len(order), -1, np.int64)
        parts, acc = [], 0
        for i, g in enumerate(order):
            j = feat[i]
            if j >= 0 and kind[j] == KIND_NOMINAL:
                cat_off[i] = acc
                parts.append(table.nsplit[g, nom_off[j]: nom_off[j] + nlev[j]])
                acc += int(nlev[j])
        out.append(TreeRecord(
            feature=np.asarray(feat, np.int32), threshold=table.nthr[order].astype(np.float64),
            nan_left=np.ones(len(order), np.uint8), left=left.astype(np.int32),
            right=right.astype(np.int32), cat_off=cat_off,
            cat_left=np.concatenate(parts).astype(np.uint8) if parts else np.zeros(0, np.uint8),
            class_weight=table.nR[order][:, None].astype(np.float64)))
    return out


@register("learner", "eogt")
class EOGT(GFBoost):
    """Ensemble of generative trees (paper §6; spec §1.6, §2.11, §3.4, §4.3).

    Trained like :class:`GFBoost` but scoring splits with approximate cell masses re-estimated
    from the split leaf's rows and volumes (spec §2.11), then *stripped of the data*: only the
    trees and their arc probabilities ``π_{ν→v} = R(v)/R(ν)`` are kept (``trees_.node_value``).

    Its law is defined by the star-node sampler with approximate branching (eq. (8)) in the
    iterative tree order: :meth:`sample` draws from it exactly and :meth:`log_prob` is its exact
    density at complete rows (same measure convention as :class:`GFBoost`). Queries that need
    the cells' masses — rows with missing entries, conditions, ``predict_proba``, ``impute``,
    ``expect``, ``to_torch`` — raise ``NotImplementedError``. ``forest_`` holds the same trees
    with each leaf's reach probability and a uniform leaf (so each tree alone is a generative
    tree, and ``save``/``load`` work); it is not the EOGT's law for ``T > 1``.
    """

    model_family = INTERSECTION

    @property
    def capabilities(self) -> frozenset:
        """EOGT answers complete-row ``log_prob`` and ``sample`` only (no cell masses)."""
        return frozenset({"log_prob", "sample"})

    method_name = "EOGT"
    _approx = True

    def _finish(self, table: CellTable, schema, kind, nlev, nom_off) -> None:
        n_levels = np.where(kind == KIND_NOMINAL, nlev, 0)
        self.trees_ = ForestArrays.from_trees(_tree_dicts(table, kind, nom_off, nlev), n_levels)
        self.forest_ = self.trees_
        self.n_train_ = int(table.m_total)
        self._layout = (kind, nlev, nom_off)
        geo = self._geometry()
        leaf_node = self.trees_.leaf_node
        m = table.m_total
        with np.errstate(divide="ignore"):
            self.leaf_log_weight_ = np.log(geo.weight[leaf_node] / m) - np.log(
                self.trees_.n_trees)
        self.leaf_models_ = fit_cell_leaves(schema, geo.lo[leaf_node], geo.hi[leaf_node],
                                            geo.mask[leaf_node].astype(np.uint8), nom_off,
                                            geo.weight[leaf_node])

    def _geometry(self):
        from forestgen.sampling.star import TreeGeometry

        if getattr(self, "_geo", None) is None:
            kind, nlev, nom_off = column_layout(self.encoder_.schema)[:3]
            self._layout = (kind, nlev, nom_off)
            self._geo = TreeGeometry(self.trees_, self.box_lo_, self.box_hi_, nom_off, nlev)
        return self._geo

    def _unsupported(self, query: str):
        raise NotImplementedError(f"EOGT does not support {query}: its cell masses are not "
                                  f"stored (use GFBoost)")

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        from forestgen.sampling.star import approx_log_prob

        if np.isnan(Z).any():
            self._unsupported("log_prob with missing entries")
        return approx_log_prob(self._geometry(), Z, self.box_lo_, self.box_hi_)

    def log_prob(self, X, conditions=None) -> np.ndarray:
        if conditions is not None:
            self._unsupported("conditional log_prob")
        return self.log_prob_encoded(self._encode(X))

    def sample_encoded(self, n: int, random_state=None, missing: bool = False) -> np.ndarray:
        from forestgen.sampling.star import StarNodeSampler
        from forestgen.validation import as_generator

        self._check_fitted()
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        kind = self._layout[0] if hasattr(self, "_layout") else None
        geo = self._geometry()
        kind = self._layout[0] if kind is None else kind
        sampler = StarNodeSampler(geo, kind, branch="approx", order="iterative")
        return sampler.draw(int(n), as_generator(random_state))

    def sample(self, n=None, random_state=None, conditions=None, on_empty="raise",
               missing=True):
        if conditions is not None:
            self._unsupported("conditional sampling")
        return super().sample(n, random_state)

    def predict_proba(self, X, target):
        self._unsupported("predict_proba")

    def predict(self, X, target):
        self._unsupported("predict")

    def impute(self, X, method="max_density", n_imputations=1, random_state=None):
        self._unsupported("impute")

    def expect(self, columns=None, conditions=None):
        self._unsupported("expect")

    def to_torch(self):
        self._unsupported("to_torch")

    def _restore_extra(self, arrays, meta):
        super()._restore_extra(arrays, meta)
        self._geo = None
