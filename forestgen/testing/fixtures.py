"""Small real-shaped tables and the failure helpers every conformance check uses."""

from __future__ import annotations

import numpy as np
import pandas as pd

# ----------------------------------------------------------------------------- data


def small_tables(random_state: int = 0, n: int = 240) -> dict[str, tuple[pd.DataFrame,
                                                                          pd.DataFrame]]:
    """``{name: (train, query)}`` small tables shaped like real ones.

    ``mixed``: a skewed continuous column with 10% NaN, a wide integer count, a point-mass
    column (60% exact zeros, else continuous), a 3-level categorical with NaN and a binary
    target ``c``. ``numeric``: two correlated continuous columns. Query rows include values
    far outside the training range and a level never seen in training.
    """
    rng = np.random.default_rng(random_state)
    z = rng.normal(size=n)
    mixed = pd.DataFrame({
        "amount": np.exp(z + 0.3 * rng.normal(size=n)),
        "count": rng.poisson(40 + 10 * z).astype(np.int64),
        "spike": np.where(rng.random(n) < 0.6, 0.0, np.abs(rng.normal(5, 2, n))),
        "colour": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]).astype(object),
        "c": np.where(z + rng.normal(size=n) > 0, "yes", "no"),
    })
    mixed.loc[rng.random(n) < 0.1, "amount"] = np.nan
    mixed.loc[rng.random(n) < 0.05, "colour"] = None
    q = mixed.sample(12, random_state=random_state).reset_index(drop=True)
    q.loc[0, "amount"] = 1e6          # far above the training range
    q.loc[1, "count"] = -500           # far below
    q.loc[2, "colour"] = "purple"      # a level never seen in training
    q.loc[3, "spike"] = np.nan
    x = rng.normal(size=n)
    numeric = pd.DataFrame({"u": x, "v": 0.8 * x + 0.6 * rng.normal(size=n)})
    qn = numeric.sample(6, random_state=random_state).reset_index(drop=True)
    qn.loc[0, "u"] = -1e3
    return {"mixed": (mixed, q), "numeric": (numeric, qn)}


def fail(what: str, detail: str) -> None:
    """Raise the ``AssertionError`` of a failed check: ``what`` failed, ``detail`` says how."""
    raise AssertionError(f"{what}: {detail}")


def check_that(cond: bool, what: str, detail: str) -> None:
    """:func:`fail` unless ``cond``."""
    if not cond:
        fail(what, detail)


def histogram_faces(leaf_model) -> np.ndarray:
    """Bin faces of the histograms a leaf model spreads leaf mass by (a
    :class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`'s ``edges``, also inside a
    point-mass or stacked leaf, or blended in as a root cell); empty for any other leaf
    model."""
    from forestgen.families.mixture.stacked import StackedLeaf
    from forestgen.leaves.marginal_cell import MarginalCellLeaf

    out = [np.zeros(0)]
    parts = leaf_model.parts if isinstance(leaf_model, StackedLeaf) else [leaf_model]
    for part in parts:  # the part, its base and the root cell it blends in (MarginalMixLeaf)
        for cell in (part, getattr(part, "base_", None), getattr(part, "root_", None)):
            if isinstance(cell, MarginalCellLeaf) and cell.edges is not None:
                out.append(np.asarray(cell.edges, float))
    return np.unique(np.concatenate(out))


def leaf_faces(m, j: int, a: float, b: float) -> np.ndarray:
    """``a``, ``b`` and the faces of model ``m``'s leaf cells on column ``j`` inside ``[a,
    b]``, sorted: where a tree mixture's density can jump (smooth between them); with those of
    ``m.density_faces(j)`` where the model has it (EOGT's marginal histograms), and the bin
    faces of column ``j``'s leaf model where it spreads a leaf's mass by a histogram
    (:func:`histogram_faces`: GF.Boost's marginal-shaped cells)."""
    faces = [a, b]
    extra = getattr(m, "density_faces", None)
    if extra is not None:
        faces += list(extra(j))
    leaf_models = getattr(m, "leaf_models_", None)
    if leaf_models is not None and j < len(leaf_models):
        faces += list(histogram_faces(leaf_models[j]))
    forest = getattr(m, "forest_", None)
    if forest is not None:
        schema = m.schema_
        nominal = np.array([c.is_discrete and c.is_nominal for c in schema.columns])
        boxes = forest.boxes(schema.d, np.where(nominal, schema.n_levels, 0))
        faces += list(boxes.lower[:, j]) + list(boxes.upper[:, j])
    faces = np.asarray(faces, float)
    return np.unique(np.clip(faces[np.isfinite(faces)], a, b))
