"""Declared levels that no training row takes lie outside the support (the discrete analogue of a
numeric column's observed range): every learner never draws them, gives them zero density
(scored like a value outside the root box), and stays exactly normalised over the levels that
remain (docs/metadata.md); the per-row queries leave such an entry free, as an unseen level."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.data import TableEncoder
from forestgen.data.schema import ColumnSpec
from forestgen.families.boxes import box_log_volume, root_box, root_mask

COLOURS = ["red", "green", "blue", "violet"]  # violet: no training row (nominal)
GRADES = ["none", "low", "mid", "high"]  # none: no training row (ordinal, an end level)
META = {"columns": {"x": {"sdtype": "numerical"},
                    "colour": {"sdtype": "categorical", "values": COLOURS},
                    "grade": {"sdtype": "ordinal", "values": GRADES}},
        "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}
NRG = {"n_trees": 10, "max_leaves": 16, "pool_size": 4000, "gibbs_chains": 8, "gibbs_burn_in": 20,
       "n_normaliser_samples": 20_000, "sample_chains": 500, "sample_burn_in": 20,
       "sample_thin": 1}
FAST = {"rfde": {"n_trees": 5, "depth": 5}, "def": {"n_trees": 5, "max_leaves": 32},
        "gfboost": {"n_trees": 4, "n_iter": 40}, "eogt": {"n_trees": 3, "n_iter": 20},
        "nrgboost": NRG,
        # ARF with Laplace smoothing (the best-density preset's alpha): its leaves spread
        # pseudo-counts over the levels their cells allow, which held the declared levels
        "arf": {"n_trees": 10, "alpha": 0.1}, "gef": {"n_trees": 10},
        "chain": {}, "anchored": {}}
EXACT = ["rfde", "def", "gfboost", "eogt", "arf", "gef", "chain", "anchored"]
FIT = {"gef": {"target": "colour"}}  # GeF is a classifier: a class column with a declared level


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 600
    colour = rng.choice(COLOURS[:3], n, p=[0.5, 0.3, 0.2])
    grade = rng.choice(GRADES[1:], n)
    x = rng.normal(size=n) + (colour == "red") + 0.5 * (grade == "high")
    return pd.DataFrame({"x": x, "colour": colour, "grade": grade})


@pytest.fixture(scope="module")
def models(table):
    out = {}
    for name, kw in FAST.items():
        out[name] = registry.get("learner", name)(**kw, random_state=0).fit(
            table, kinds=META, **FIT.get(name, {}))
    return out


def _rows(levels: list[tuple], x=np.nan) -> pd.DataFrame:
    df = pd.DataFrame(levels, columns=["colour", "grade"])
    df.insert(0, "x", x)
    df["colour"] = pd.Categorical(df["colour"], categories=COLOURS)
    df["grade"] = pd.Categorical(df["grade"], categories=GRADES, ordered=True)
    return df


def _exact_log_prob(model, X) -> np.ndarray:
    return model.log_prob(X, floor=None)


def test_support_is_the_set_of_seen_levels_and_survives_json(table):
    schema = TableEncoder(kinds=META).fit(table).schema
    assert schema["colour"].unobserved == [3] and schema["grade"].unobserved == [0]
    np.testing.assert_array_equal(schema["colour"].support, [True, True, True, False])
    np.testing.assert_array_equal(schema["grade"].support, [False, True, True, True])
    assert schema["x"].support is None
    back = ColumnSpec.from_dict(schema["colour"].to_dict())
    assert back == schema["colour"]
    # root box: ordered columns span their seen levels, nominal ones keep them in a mask
    lo, hi = root_box(TableEncoder(kinds=META).fit(table).transform(table), schema)
    assert (lo[2], hi[2]) == (0.5, 3.5)
    np.testing.assert_array_equal(root_mask(schema), [1, 1, 1, 0])
    assert box_log_volume(schema, lo, hi) == pytest.approx(
        math.log(hi[0] - lo[0]) + math.log(3) + math.log(3), abs=1e-15)
    # every level seen (or no declaration): nothing recorded, the saved schema is unchanged
    plain = TableEncoder().fit(table).schema
    assert all(c.unobserved is None for c in plain.columns)
    assert "unobserved" not in plain["colour"].to_dict()


def test_an_interior_ordinal_level_stays_in_the_support():
    """An ordered column's support is its seen range, as a numeric column's: an interior
    level without rows stays (as an unseen value inside a numeric range), the ends do not."""
    spec = ColumnSpec("g", "categorical", "object", categories=list("abcde"), ordinal=True,
                      unobserved=[0, 2, 4])
    np.testing.assert_array_equal(spec.support, [False, True, True, True, False])
    nominal = ColumnSpec("c", "categorical", "object", categories=list("abcde"),
                         unobserved=[0, 2, 4])
    np.testing.assert_array_equal(nominal.support, [False, True, False, True, False])


@pytest.mark.parametrize("name", EXACT)
def test_density_sums_to_one_over_the_support(models, name):
    """Summing the density over every declared level (the numeric column marginalised) gives
    1 to 1e-10: the unobserved levels hold no mass and the others hold all of it."""
    m = models[name]
    grid = _rows(list(itertools.product(COLOURS, GRADES)))
    p = np.exp(_exact_log_prob(m, grid))
    assert p.sum() == pytest.approx(1.0, abs=1e-10)
    off = (grid["colour"] == "violet") | (grid["grade"] == "none")
    assert np.all(p[off.to_numpy()] == 0.0) and np.all(p[~off.to_numpy()] > 0)


@pytest.mark.parametrize("name", EXACT + ["nrgboost"])
def test_unobserved_levels_are_never_drawn(models, name):
    n = 20_000 if name in ("eogt", "nrgboost") else 100_000
    s = models[name].sample(n, random_state=3)
    assert not (s["colour"] == "violet").any() and not (s["grade"] == "none").any()
    # every seen level is drawn
    assert set(s["colour"]) == set(COLOURS[:3]) and set(s["grade"]) == set(GRADES[1:])
    Z = models[name].sample_encoded(5000, random_state=4)
    j = {c: i for i, c in enumerate(models[name].schema_.names)}
    assert not np.isin(Z[:, j["colour"]], [3]).any() and not np.isin(Z[:, j["grade"]], [0]).any()


@pytest.mark.parametrize("name", EXACT)
def test_unobserved_level_scores_like_a_value_outside_the_box(models, table, name):
    """Zero density (``-inf`` with ``floor=None``); with the default floor it gets the same
    score as a numeric value outside the root box."""
    m = models[name]
    row = _rows([("violet", "low"), ("red", "none"), ("red", "low")], x=float(table.x[0]))
    lp = _exact_log_prob(m, row)
    assert lp[0] == -np.inf and lp[1] == -np.inf and np.isfinite(lp[2])
    far = _rows([("red", "low")], x=1e6)
    assert m.log_prob(row)[0] == m.log_prob(far)[0] == m.log_prob(row)[1]
    # the NaN marginal of the colour column excludes violet's (zero) mass
    half = _rows([("violet", np.nan), (np.nan, "none")])
    assert np.all(_exact_log_prob(m, half) == -np.inf)


def test_nrgboost_base_measure_is_uniform_over_the_seen_levels(models, table):
    """``q0``'s uniform part (``uniform_mix``) spreads over the seen levels only: each column's
    ``m_j`` sums to 1 and is 0 at the unobserved levels; log_prob treats such a level as a value
    outside the training range (the density floor, ``-inf`` with ``density_floor=None``)."""
    m = models["nrgboost"]
    g, e = m.grid_, m.energy_
    off = g.code_offsets
    for j, bad in ((1, [3]), (2, [0])):
        q = np.exp(e.log_q0[off[j]:off[j + 1]])
        assert q.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_array_equal(q[bad], 0.0)
        u = m.uniform_mix / 3  # three seen levels
        assert np.all(q[np.setdiff1d(np.arange(len(q)), bad)] >= u - 1e-15)
    row = _rows([("violet", "low"), ("red", "none")], x=float(table.x[0]))
    far = _rows([("red", "low"), ("red", "low")], x=1e6)
    lp, lp_far = m.log_prob(row), m.log_prob(far)
    assert np.all(np.isfinite(lp))
    strict = registry.get("learner", "nrgboost")(**NRG, density_floor=None, random_state=0)
    strict.fit(table, kinds=META)
    assert np.all(strict.log_prob(row) == -np.inf) and np.all(strict.log_prob(far) == -np.inf)
    # the floor is relative to the seen levels: colour's floor is 1e-5 / 3, not 1e-5 / 4
    assert m._log_floor()[1] == pytest.approx(math.log(1e-5) - math.log(3), abs=1e-12)
    assert np.isfinite(lp_far).all()


def test_nrgboost_sums_to_one_over_the_seen_levels():
    """On a discrete table the exact ``Z`` (the energy summed over every declared level) matches
    the importance-sampling estimate, and the unobserved levels add nothing to it."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"colour": rng.choice(COLOURS[:3], 500),
                       "grade": rng.choice(GRADES[1:], 500)})
    meta = {"columns": {k: v for k, v in META["columns"].items() if k != "x"}}
    m = registry.get("learner", "nrgboost")(**NRG, random_state=0).fit(df, kinds=meta)
    cells = _rows(list(itertools.product(COLOURS, GRADES))).drop(columns="x")
    f = m.energy_.energy(m.encoder_.transform(cells).astype(np.int32))  # the level codes
    seen = ~((cells["colour"] == "violet") | (cells["grade"] == "none")).to_numpy()
    assert np.all(f[~seen] == -np.inf) and np.all(np.isfinite(f[seen]))
    log_z = np.logaddexp.reduce(f[seen])
    assert abs(m.log_z_ - log_z) < max(4 * m.log_z_se_, 0.02)
    assert np.exp(m.log_prob(cells[seen])).sum() == pytest.approx(1.0, abs=5 * m.log_z_se_ + 0.02)


@pytest.mark.parametrize("name", sorted(set(EXACT) - {"gef"}) + ["nrgboost"])
def test_evidence_on_an_unobserved_level_is_left_free(models, table, name):
    """A per-row query given a declared level without training rows (probability zero) leaves
    that entry free with one warning naming the column, as a level never declared: the answer
    is the one for the row without it (it was NaN: zero-probability evidence)."""
    m = models[name]
    rows = table.head(4).copy()
    rows["colour"] = pd.Categorical(["violet", "red", "violet", "blue"], categories=COLOURS)
    with pytest.warns(RuntimeWarning, match=r"'colour'.*(not seen at fit|without training rows)"):
        pp = m.predict_proba(rows.drop(columns="grade"), target="grade")
    free = rows.drop(columns=["grade", "colour"])
    with pytest.warns(RuntimeWarning, match="absent"):
        want = m.predict_proba(free, target="grade")
    if name == "nrgboost":  # (its multi-column marginal is an estimate: its own draws)
        assert np.isfinite(pp.to_numpy()).all()
        np.testing.assert_allclose(pp.sum(1), 1.0, atol=1e-12)
    else:
        np.testing.assert_allclose(pp.iloc[[0, 2]].to_numpy(), want.iloc[[0, 2]].to_numpy(),
                                   atol=1e-12)
    assert np.isfinite(pp.iloc[[1, 3]].to_numpy()).all()


@pytest.mark.parametrize("name", EXACT + ["nrgboost"])
def test_save_load_keeps_the_support(models, table, name, tmp_path):
    m = models[name]
    path = tmp_path / f"{name}.fgm"
    m.save(path)
    back = type(m).load(path)
    assert back.schema_["colour"].unobserved == [3]
    row = _rows([("violet", "low"), ("red", "low")], x=float(table.x[0]))
    np.testing.assert_array_equal(back.log_prob(row), m.log_prob(row))
    a = m.sample(2000, random_state=7)
    b = back.sample(2000, random_state=7)
    pd.testing.assert_frame_equal(a, b)
    assert not (b["colour"] == "violet").any()


@pytest.mark.parametrize("name", EXACT + ["nrgboost"])
def test_imputations_and_class_probabilities_stay_in_the_support(models, table, name):
    m = models[name]
    holes = table.head(200).copy()
    holes.loc[holes.index[::2], "colour"] = np.nan
    holes.loc[holes.index[1::4], "grade"] = np.nan
    if "impute" in m.capabilities:
        for method in ("sample", "expectation"):
            out = m.impute(holes, method=method, random_state=1)
            assert out.notna().all().all()
            assert not (out["colour"] == "violet").any() and not (out["grade"] == "none").any()
    pp = m.predict_proba(table.head(100), target="colour")
    assert np.all(pp["violet"] == 0.0)
    np.testing.assert_allclose(pp.sum(1), 1.0, atol=1e-12)
    if "torch" in m.capabilities:
        j = {c: i for i, c in enumerate(m.schema_.names)}
        z = m.to_torch().sample((5000,)).numpy()
        assert not (z[:, j["colour"]] == 3).any() and not (z[:, j["grade"]] == 0).any()


@pytest.mark.parametrize("name", ["gef", "arf"])
def test_backoff_tree_gives_unobserved_levels_no_mass(table, name):
    """The back-off toward the column marginals (``marginal_weight > 0``) smooths each discrete
    marginal over the column's support only: GeF's back-off tree, whose root cell allows every
    level, drew the declared levels no row takes (39 of 20,000 draws at weight 0.5 before);
    its leaf gives them probability zero, and neither learner draws them."""
    learner = registry.get("learner", name)
    kw = {"target": "grade"} if name == "gef" else {}
    m = learner(n_trees=5, marginal_weight=0.5, random_state=0).fit(table, kinds=META, **kw)
    assert m.marginal_weight_ == 0.5
    s = m.sample(40_000, random_state=3)
    assert not (s["colour"] == "violet").any() and not (s["grade"] == "none").any()
    back = np.array([m.forest_.n_leaves - 1])
    # violet; and none (GeF's class column keeps only the classes its rows hold)
    for j, code in ((1, 3),) if name == "gef" else ((1, 3), (2, 0)):
        lm = m.leaf_models_[j]
        assert lm.probs(back)[0, code] == 0.0 and lm.probs(back)[0].sum() == pytest.approx(1.0)
