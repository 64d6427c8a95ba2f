"""Coverage metrics: alpha-precision / beta-recall and k-NN precision / recall."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forestgen.metrics._prep import (
    embed,
    nearest,
    prepare,
    require_rows,
    sq_dists,
    subsample,
    to_matrix,
)

__all__ = [
    "AlphaPrecisionResult",
    "NNPrecisionRecall",
    "alpha_precision_beta_recall",
    "nn_precision_recall",
]


def _embedded(real: object, synthetic: object, preprocess: bool, max_rows: int | None,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if preprocess:
        r, s = prepare(real, synthetic, names=["synthetic"])
        r, s = subsample(r, max_rows, rng), subsample(s, max_rows, rng)
        return tuple(embed(r, s))  # type: ignore[return-value]
    x, y = to_matrix(real, "real"), to_matrix(synthetic, "synthetic")
    require_rows(len(x), "real", 1)
    require_rows(len(y), "synthetic", 1)
    if max_rows is not None:
        if len(x) > max_rows:
            x = x[np.sort(rng.choice(len(x), max_rows, replace=False))]
        if len(y) > max_rows:
            y = y[np.sort(rng.choice(len(y), max_rows, replace=False))]
    return x, y


@dataclass(frozen=True)
class AlphaPrecisionResult:
    """alpha-precision / beta-recall curves and summaries (Alaa et al., 2022).

    ``alpha_precision[i]``: share of synthetic rows inside the real ``alphas[i]``-support ball;
    ``beta_recall[i]``: share of real rows covered by the synthetic ``alphas[i]``-support.
    Ideal curves are the identity; ``delta_precision`` / ``delta_recall`` are
    ``1 - 2 * mean|curve - alpha|`` (1 = ideal). ``authenticity``: share of synthetic rows
    farther from their nearest real row than that row's nearest real neighbour.
    """

    alphas: np.ndarray
    alpha_precision: np.ndarray
    beta_recall: np.ndarray
    delta_precision: float
    delta_recall: float
    authenticity: float


def alpha_precision_beta_recall(real: object, synthetic: object, *, n_alphas: int = 21,
                                k: int = 5, max_rows: int | None = 5000,
                                preprocess: bool = True,
                                random_state: int | None = 0) -> AlphaPrecisionResult:
    """alpha-precision and beta-recall curves (Alaa et al., 2022, "How faithful is your
    synthetic data?").

    Embedding: the standardised one-hot data (no learned one-class network). The real centre is
    the mean of the real embedding and the alpha-support is the ball whose radius is the
    alpha-quantile of real distances to it; likewise for the synthetic beta-support. A real row
    counts as recalled at level beta when its nearest synthetic row lies inside the synthetic
    beta-support and within the real row's ``k``-NN radius among real rows.
    """
    rng = np.random.default_rng(random_state)
    x, y = _embedded(real, synthetic, preprocess, max_rows, rng)
    require_rows(len(x), "real", k + 1, f"k={k} nearest neighbours among the others")
    alphas = np.linspace(0.0, 1.0, n_alphas)
    c_real, c_syn = x.mean(0), y.mean(0)
    d_real = np.linalg.norm(x - c_real, axis=1)
    d_syn_to_real_c = np.linalg.norm(y - c_real, axis=1)
    d_syn = np.linalg.norm(y - c_syn, axis=1)
    r_real = np.quantile(d_real, alphas)
    r_syn = np.quantile(d_syn, alphas)
    precision = np.array([np.mean(d_syn_to_real_c <= r) for r in r_real])

    # k-NN radius of each real row among the other real rows
    knn = nearest(x, x, k=k, exclude_self=True)
    knn_real, nn1_real = knn[:, -1], knn[:, 0]
    nn_idx, nn_dist = _nearest_index(x, y)
    closest_syn_d = d_syn[nn_idx]
    close_enough = nn_dist <= knn_real
    recall = np.array([np.mean(close_enough & (closest_syn_d <= r)) for r in r_syn])

    # authenticity: for each synthetic row, is it closer to its nearest real row than that
    # real row's own nearest real neighbour? (then it is "not authentic")
    r_idx, r_dist = _nearest_index(y, x)
    authenticity = float(np.mean(r_dist > nn1_real[r_idx]))

    dp = float(1.0 - 2.0 * np.mean(np.abs(precision - alphas)))
    dr = float(1.0 - 2.0 * np.mean(np.abs(recall - alphas)))
    return AlphaPrecisionResult(alphas=alphas, alpha_precision=precision, beta_recall=recall,
                                delta_precision=dp, delta_recall=dr, authenticity=authenticity)


def _nearest_index(a: np.ndarray, b: np.ndarray,
                   chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Index and distance of the nearest row of ``b`` for each row of ``a``."""
    idx = np.empty(len(a), dtype=np.int64)
    dist = np.empty(len(a))
    for s in range(0, len(a), chunk):
        d = sq_dists(a[s:s + chunk], b)
        j = d.argmin(1)
        idx[s:s + chunk] = j
        dist[s:s + chunk] = np.sqrt(d[np.arange(len(j)), j])
    return idx, dist


def _inside_manifold(points: np.ndarray, centres: np.ndarray, radii: np.ndarray,
                     chunk: int = 1024) -> np.ndarray:
    """Whether each point lies in the union of balls ``B(centres_i, radii_i)``."""
    out = np.empty(len(points), dtype=bool)
    r2 = radii**2
    for s in range(0, len(points), chunk):
        out[s:s + chunk] = (sq_dists(points[s:s + chunk], centres) <= r2[None, :]).any(1)
    return out


@dataclass(frozen=True)
class NNPrecisionRecall:
    """k-NN manifold precision / recall (Kynkäänniemi et al., 2019)."""

    precision: float
    recall: float
    k: int


def nn_precision_recall(real: object, synthetic: object, *, k: int = 3,
                        max_rows: int | None = 5000, preprocess: bool = True,
                        random_state: int | None = 0) -> NNPrecisionRecall:
    """Improved precision and recall (Kynkäänniemi et al., 2019).

    The real manifold is the union of balls around each real row with radius its distance to
    the ``k``-th nearest real neighbour; precision is the share of synthetic rows inside it.
    Recall swaps the roles.
    """
    rng = np.random.default_rng(random_state)
    x, y = _embedded(real, synthetic, preprocess, max_rows, rng)
    for n, name in ((len(x), "real"), (len(y), "synthetic")):  # (a k-th neighbour each)
        require_rows(n, name, k + 1, f"k={k} nearest neighbours among the others")
    rx = nearest(x, x, k=k, exclude_self=True)[:, -1]
    ry = nearest(y, y, k=k, exclude_self=True)[:, -1]
    precision = float(np.mean(_inside_manifold(y, x, rx)))
    recall = float(np.mean(_inside_manifold(x, y, ry)))
    return NNPrecisionRecall(precision=precision, recall=recall, k=k)
