"""Optimal-transport cost between real and synthetic rows (the "lifelike" metric of Nock &
Guillame-Bert, *Generative Forests*, §7.3; spec ``generative_forests.md`` §5.4, pitfall 10).

Ground cost between two rows: the L1 distance of their numeric columns standardised with the
reference statistics (mean / standard deviation; missing values take the median) plus 0/1 per
categorical column that differs (missing is its own level). Rows carry uniform weights.

* ``method="emd"``: the exact optimal transport cost (network simplex, ``ot.emd2``).
* ``method="sinkhorn"``: the transport cost ``<P, M>`` of the entropic plan with regularisation
  ``epsilon`` in cost units (default 0.05, i.e. 5 % of one standard deviation of one column),
  log-domain iterations (``ot.sinkhorn2(method="sinkhorn_log")``). It is ``>=`` the exact cost
  and tends to it as ``epsilon -> 0``.

Lower is better; both need the POT package (``pip install POT``).
"""

from __future__ import annotations

import numpy as np

from forestgen.metrics._prep import Encoder, infer_schema, prepare, subsample

__all__ = ["ot_cost", "ground_cost"]


def ground_cost(real: object, synthetic: object, *, reference: object = None) -> np.ndarray:
    """The ``[n_real, n_synthetic]`` matrix of standardised-L1 + 0/1 categorical costs.

    ``reference``: the frame whose column statistics standardise the numeric columns and decide
    the column types (default: ``real``).
    """
    real, synthetic, reference = prepare(real, synthetic, reference,
                                         names=["synthetic", "reference"])
    ref = real if reference is None else reference
    enc = Encoder(infer_schema(ref), ref, [real, synthetic])
    M = np.zeros((len(real), len(synthetic)))
    for col in enc.schema.numeric:
        a = (enc.numeric(real, col) - enc.mean[col]) / enc.std[col]
        b = (enc.numeric(synthetic, col) - enc.mean[col]) / enc.std[col]
        M += np.abs(a[:, None] - b[None, :])
    for col in enc.schema.categorical:
        M += enc.codes(real, col)[:, None] != enc.codes(synthetic, col)[None, :]
    return M


def ot_cost(real: object, synthetic: object, *, method: str = "emd", epsilon: float = 0.05,
            reference: object = None, max_rows: int | None = 5000, seed: int = 0) -> float:
    """Optimal-transport cost between the empirical distributions of two tables.

    ``max_rows`` subsamples each side (``None``: all rows; exact EMD is cubic in the rows).
    """
    if method not in ("emd", "sinkhorn"):
        raise ValueError(f"method must be 'emd' or 'sinkhorn', got {method!r}")
    if not (isinstance(epsilon, (int, float)) and epsilon > 0):
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}")
    try:
        import ot
    except ImportError as e:  # pragma: no cover - dependency declared in pyproject
        raise ImportError("ot_cost needs the POT package: pip install POT") from e
    real, synthetic = prepare(real, synthetic, names=["synthetic"])
    if len(real) == 0 or len(synthetic) == 0:
        raise ValueError("ot_cost needs at least one real and one synthetic row")
    rng = np.random.default_rng(seed)
    real = subsample(real, max_rows, rng)
    synthetic = subsample(synthetic, max_rows, rng)
    M = ground_cost(real, synthetic, reference=reference)
    a = np.full(M.shape[0], 1.0 / M.shape[0])
    b = np.full(M.shape[1], 1.0 / M.shape[1])
    if method == "emd":
        return float(ot.emd2(a, b, M, numItermax=10_000_000))
    return float(ot.sinkhorn2(a, b, M, reg=float(epsilon), method="sinkhorn_log",
                              numItermax=5000, stopThr=1e-9))
