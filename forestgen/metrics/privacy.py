"""Privacy: distance to closest record (DCR) and nearest-neighbour distance ratio (NNDR)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forestgen.metrics._prep import Encoder, infer_schema, nearest, prepare, subsample

__all__ = ["DCRResult", "dcr"]


@dataclass(frozen=True)
class DCRResult:
    """DCR / NNDR of synthetic rows to the training data, against a real-holdout baseline.

    ``share_closer_to_train``: probability that a synthetic row is closer to train than a
    holdout row is, ``P(DCR_syn < DCR_holdout)`` with ties counted 1/2 (ideal 0.5; near 1
    signals copying). ``share_below_holdout_p5``: share of synthetic rows with DCR below the
    holdout DCR 5th percentile (ideal 0.05). ``dcr_synthetic_p5`` /
    ``dcr_holdout_p5``: 5th percentiles of the distance to the closest train row for synthetic
    and holdout rows. ``nndr_*``: median ratio of nearest to second-nearest train distance.
    ``exact_match_*``: share of rows at (numerically) zero distance from a train row.
    ``copying``: flag raised when synthetic rows sit much closer to train than holdout rows do.
    Baseline fields are NaN without a holdout.
    """

    share_closer_to_train: float
    share_below_holdout_p5: float
    dcr_synthetic_p5: float
    dcr_holdout_p5: float
    dcr_synthetic_median: float
    dcr_holdout_median: float
    nndr_synthetic_median: float
    nndr_holdout_median: float
    exact_match_synthetic: float
    exact_match_holdout: float
    copying: bool


def _dcr_nndr(points: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = nearest(points, train, k=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d[:, 1] > 0, d[:, 0] / d[:, 1], 1.0)
    return d[:, 0], ratio


def dcr(train: object, synthetic: object, holdout: object | None = None, *,
        max_rows: int | None = 5000, max_train_rows: int | None = 20000,
        tolerance: float = 1e-6, random_state: int | None = 0) -> DCRResult:
    """Distance to closest record and NNDR in the standardised one-hot space.

    Synthetic rows (and holdout rows, the baseline of what an independent sample from the
    same distribution looks like) are compared with the training rows the generator saw.
    ``copying`` is raised when ``share_closer_to_train > 0.6``, or more than 15% of synthetic
    rows are closer to train than the holdout DCR 5th percentile, or exact matches exceed the
    holdout rate by more than 5 percentage points. Without a holdout, baseline fields are NaN
    and ``copying`` is False.
    """
    train, synthetic, holdout = prepare(train, synthetic, holdout,
                                        names=["synthetic", "holdout"])
    rng = np.random.default_rng(random_state)
    synthetic = subsample(synthetic, max_rows, rng)
    train = subsample(train, max_train_rows, rng)
    if holdout is not None:
        holdout = subsample(holdout, max_rows, rng)
    enc = Encoder(infer_schema(train), train, [synthetic, holdout])
    xt, xs = enc.onehot(train), enc.onehot(synthetic)
    ds, rs = _dcr_nndr(xs, xt)
    nan = float("nan")
    share = below_p5 = dh_p5 = dh_med = rh_med = ex_h = nan
    if holdout is not None:
        xh = enc.onehot(holdout)
        dh, rh = _dcr_nndr(xh, xt)
        dh_p5, dh_med = float(np.percentile(dh, 5)), float(np.median(dh))
        rh_med, ex_h = float(np.median(rh)), float(np.mean(dh <= tolerance))
        # P(DCR_synthetic < DCR_holdout) over all pairs (ties count 1/2): 0.5 when synthetic
        # rows are as far from train as unseen real rows are, -> 1 under copying
        hs = np.sort(dh)
        below = np.searchsorted(hs, ds, side="left")
        above = len(hs) - np.searchsorted(hs, ds, side="right")
        share = float(np.mean(above + 0.5 * (len(hs) - below - above)) / len(hs))
        below_p5 = float(np.mean(ds < dh_p5))
    ds_p5 = float(np.percentile(ds, 5))
    ex_s = float(np.mean(ds <= tolerance))
    copying = False
    if holdout is not None:
        copying = bool(share > 0.6 or below_p5 > 0.15 or ex_s > ex_h + 0.05)
    return DCRResult(share_closer_to_train=share, share_below_holdout_p5=below_p5,
                     dcr_synthetic_p5=ds_p5,
                     dcr_holdout_p5=dh_p5, dcr_synthetic_median=float(np.median(ds)),
                     dcr_holdout_median=dh_med, nndr_synthetic_median=float(np.median(rs)),
                     nndr_holdout_median=rh_med, exact_match_synthetic=ex_s,
                     exact_match_holdout=ex_h, copying=copying)
