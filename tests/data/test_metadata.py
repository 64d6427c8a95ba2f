"""SDV-style metadata: declarations are checked on the training data, enforced on every
learner's samples, and the inferred schema exports in the same form."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.base import GenerativeForest
from forestgen.data import TableEncoder
from forestgen.data.metadata import to_metadata

N_SAMPLES = 100_000

#: small, fast settings per learner; a learner missing here is built with its defaults
FAST = {
    "arf": {"n_trees": 5},
    "def": {"n_trees": 5, "max_leaves": 32},
    "rfde": {"n_trees": 5, "depth": 4},
    "gef": {"n_trees": 5},
    "gfboost": {"n_trees": 4, "n_iter": 40},
    "eogt": {"n_trees": 2, "n_iter": 12},  # its star-node sampler dominates the cost
    "nrgboost": {"n_trees": 10, "max_leaves": 16, "pool_size": 4000, "gibbs_chains": 8,
                 "gibbs_burn_in": 20, "n_normaliser_samples": 20_000, "sample_chains": 500,
                 "sample_burn_in": 20, "sample_thin": 1},
}

META = {
    "columns": {
        # non-negative and bounded, with mass at both bounds: unbounded leaves spill over them
        "amount": {"sdtype": "numerical", "range_min": 0.0, "range_max": 50.0,
                   "decimal_places": 2, "nullable": False},
        "score": {"sdtype": "numerical", "range_min": -3.5, "range_max": 3.5,
                  "decimal_places": 1},
        "count": {"sdtype": "numerical", "range_min": 0, "range_max": 400},
        "colour": {"sdtype": "categorical", "values": ["red", "green", "blue", "violet"]},
        "grade": {"sdtype": "ordinal", "values": ["low", "mid", "high"]},
        "member": {"sdtype": "boolean"},
        "label": {"sdtype": "categorical"},
    },
    "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1",
}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 800
    z = rng.normal(size=n)
    df = pd.DataFrame({
        "amount": np.clip(np.round(np.exp(1 + z), 2), 0.0, 50.0),
        "score": np.round(np.clip(z + 0.3 * rng.normal(size=n), -3.5, 3.5), 1),
        "count": rng.integers(0, 400, n),
        "colour": rng.choice(["red", "green", "blue"], n),
        "grade": rng.choice(["low", "mid", "high"], n),
        "member": rng.random(n) < 0.4,
        "label": np.where(z > 0, "pos", "neg"),
    })
    df.loc[rng.random(n) < 0.05, "score"] = np.nan
    df.loc[:30, "amount"] = 0.0
    return df


def _fit(name: str, table: pd.DataFrame, kinds) -> GenerativeForest:
    cls = registry.get("learner", name)
    model = cls(**FAST.get(name, {}), random_state=0)
    if name == "gef":
        return model.fit(table, target="label", kinds=kinds)
    return model.fit(table, kinds=kinds)


@pytest.mark.parametrize("name", registry.available("learner"))
def test_declared_ranges_levels_and_decimals_hold_for_100k_samples(name, table):
    model = _fit(name, table, META)
    s = model.sample(N_SAMPLES, random_state=1)
    assert len(s) == N_SAMPLES
    for col, entry in META["columns"].items():
        v = s[col]
        if entry["sdtype"] == "numerical":
            x = v.to_numpy(dtype=float, na_value=np.nan)
            x = x[~np.isnan(x)]
            assert x.min() >= entry["range_min"] and x.max() <= entry["range_max"], col
            if "decimal_places" in entry:
                assert (np.round(x, entry["decimal_places"]) == x).all(), col
        elif "values" in entry:
            assert set(v.dropna()) <= set(entry["values"]), col
    assert not s["amount"].isna().any()  # nullable=False
    assert set(s["member"].dropna()) <= {False, True}


def test_without_metadata_arf_samples_leave_the_range(table):
    """Unconstrained leaves spill over in the exact model draws; since issue 11 sample() keeps
    even undeclared columns inside their observed range."""
    model = _fit("arf", table, None)
    assert model.sample_encoded(N_SAMPLES, random_state=1).min(axis=0).min() < 0.0
    x = model.sample(N_SAMPLES, random_state=1)["amount"].to_numpy(float)
    assert x.min() >= table["amount"].min()


def test_ordinal_order_and_unseen_declared_level(table):
    enc = TableEncoder(kinds=META).fit(table)
    grade, colour = enc.schema["grade"], enc.schema["colour"]
    assert grade.categories == ["low", "mid", "high"] and grade.ordinal
    assert not grade.is_nominal and colour.is_nominal
    assert colour.categories == ["red", "green", "blue", "violet"]
    np.testing.assert_array_equal(enc.transform(table)[:5, 4],
                                  table["grade"].map({"low": 0, "mid": 1, "high": 2})[:5])


def test_conditional_samples_and_imputations_respect_the_range(table):
    model = _fit("arf", table, META)
    cond = model.sample(5000, conditions={"label": "pos"}, random_state=2)
    assert cond["amount"].min() >= 0.0 and cond["amount"].max() <= 50.0
    holes = table.copy()
    holes.loc[:200, "score"] = np.nan
    out = model.impute(holes, method="sample", random_state=3)
    assert out["score"].between(-3.5, 3.5).all()


def test_export_roundtrip_reproduces_the_schema(table):
    enc = TableEncoder().fit(table)
    meta = to_metadata(enc.schema)
    json.dumps(meta)  # plain JSON
    assert meta["columns"]["member"] == {"sdtype": "boolean", "nullable": False}
    assert meta["columns"]["score"]["nullable"] is True
    assert meta["columns"]["amount"]["range_min"] == 0.0
    assert meta["columns"]["amount"]["decimal_places"] == 2
    again = TableEncoder(kinds=meta).fit(table).schema
    for a, b in zip(enc.schema.columns, again.columns):
        assert (a.kind, a.categories, a.decimals, a.lower, a.upper, a.is_discrete) == \
            (b.kind, b.categories, b.decimals, b.lower, b.upper, b.is_discrete), a.name


def test_model_exports_metadata_and_persists_constraints(table, tmp_path):
    model = _fit("arf", table, META)
    meta = to_metadata(model)
    assert meta["columns"]["grade"] == {"sdtype": "ordinal", "values": ["low", "mid", "high"],
                                        "nullable": False}
    assert meta["columns"]["count"]["range_max"] == 400
    loaded = GenerativeForest.load(model.save(tmp_path / "m.forestgen"))
    x = loaded.sample(20_000, random_state=0)["amount"].to_numpy(float)
    assert x.min() >= 0.0 and (np.round(x, 2) == x).all()


@pytest.mark.parametrize("entry, message", [
    ({"sdtype": "numerical", "range_min": 1.0}, "value 0.0 is below range_min 1.0"),
    ({"sdtype": "numerical", "range_max": 10.0}, "above range_max 10.0"),
    ({"sdtype": "numerical", "decimal_places": 1}, "more than 1 decimal places"),
    ({"sdtype": "numerical", "nullable": False, "range_min": 0}, None),
    ({"sdtype": "categorical", "values": [1.0]}, "not among the declared values"),
    ({"sdtype": "ordinal"}, "needs its ordered 'values'"),
    ({"sdtype": "text"}, "sdtype must be one of"),
    ({"sdtype": "numerical", "values": [1]}, "'values' applies to"),
    ({"sdtype": "categorical", "range_min": 0}, "applies to numerical columns"),
    ({"sdtype": "numerical", "range_min": 5, "range_max": 1}, "range_min 5 > range_max 1"),
    ({"sdtype": "numerical", "colour": 1}, "unknown metadata key"),
])
def test_bad_declarations_name_the_column(table, entry, message):
    meta = {"columns": {"amount": entry}}
    if message is None:
        TableEncoder(kinds=meta).fit(table)
        return
    with pytest.raises(ValueError, match="column 'amount'") as err:
        TableEncoder(kinds=meta).fit(table)
    assert message in str(err.value)


def test_nullable_false_rejects_missing_training_values(table):
    with pytest.raises(ValueError, match="'score' is declared nullable=False but has"):
        TableEncoder(kinds={"columns": {"score": {"sdtype": "numerical",
                                                  "nullable": False}}}).fit(table)
    with pytest.raises(ValueError, match="metadata for unknown column 'nope'"):
        TableEncoder(kinds={"columns": {"nope": {"sdtype": "numerical"}}}).fit(table)


def test_interval_condition_on_declared_ordinal_names_the_column(table):
    model = _fit("arf", table, META)
    # issue 11: an interval of ordered levels selects the levels between them (closed)
    r = model.sample(200, conditions={"grade": ("low", "mid")}, random_state=0)
    assert set(r["grade"]) <= {"low", "mid"}
    with pytest.raises(ValueError, match="'grade'.*not seen"):
        model.sample(10, conditions={"grade": ("low", "top")})
    s = model.sample(200, conditions={"grade": {"mid", "high"}}, random_state=0)
    assert set(s["grade"]) <= {"mid", "high"}


@pytest.mark.parametrize("name", ["arf", "rfde"])
def test_sdtype_datetime_is_modelled_and_restored(name):
    """Issue 17: sdtype 'datetime' raised NotImplementedError. It is modelled as seconds, keeps
    its dtype and time zone, stays in the observed range and is exported again as datetime."""
    rng = np.random.default_rng(0)
    n = 300
    when = (pd.Timestamp("2024-01-01", tz="UTC")
            + pd.to_timedelta(rng.integers(0, 90 * 86400, n), unit="s")).tz_convert(
        "Europe/Berlin")
    df = pd.DataFrame({"when": when, "amount": rng.gamma(2.0, 10.0, n).round(2)})
    meta = {"columns": {"when": {"sdtype": "datetime", "nullable": False},
                        "amount": {"sdtype": "numerical", "range_min": 0.0}}}
    model = _fit(name, df, meta)
    s = model.sample(2000, random_state=1)
    assert s["when"].dtype == df["when"].dtype and s["when"].notna().all()
    assert s["when"].between(df["when"].min(), df["when"].max()).all()
    exported = to_metadata(model)
    assert exported["columns"]["when"] == {"sdtype": "datetime", "nullable": False}
    again = TableEncoder(kinds=exported).fit(df).schema
    assert again["when"].to_dict() == model.schema_["when"].to_dict()
    with pytest.raises(ValueError, match="column 'when'.*parse it first"):
        TableEncoder(kinds=meta).fit(df.assign(when=df["when"].astype(str)))


def test_encoded_and_torch_draws_respect_declared_ranges_and_levels(table):
    """Issue 17: encoded outputs (sample_encoded, as_dataset, to_torch().sample(), the device
    sampler) spilled over declared ranges; they are clipped like decoded samples."""
    import torch
    from torch.utils.data import DataLoader

    model = _fit("arf", table, META)
    schema = model.schema_
    draws = {
        "sample_encoded": model.sample_encoded(20_000, random_state=1),
        "as_dataset": torch.cat(list(DataLoader(model.as_dataset(batch_size=5000, n_batches=4),
                                                batch_size=5000))).double().numpy(),
        "to_torch": model.to_torch().sample((20_000,)).double().numpy(),
        "as_dataset(device)": torch.cat(list(model.as_dataset(
            batch_size=5000, n_batches=4, device="cpu").batches())).double().numpy(),
    }
    for how, Z in draws.items():
        for col, entry in META["columns"].items():
            j, spec = schema.index(col), schema[col]
            z = Z[:, j]
            if "range_min" in entry:
                assert z.min() >= entry["range_min"] and z.max() <= entry["range_max"], (how, col)
            if spec.is_discrete:
                assert set(np.unique(z)) <= set(range(spec.n_levels)), (how, col)


@pytest.mark.parametrize("name", registry.available("learner"))
def test_declared_unseen_level(table, name):
    """A declared level with no training rows ("violet") lies outside the support: no learner
    draws it. RFDE, DEF, GF.Boost, EOGT and NRGBoost give it zero density, as a value outside
    their box or training range (``-inf`` without their density floor); ARF and GeF, whose
    leaves have unbounded support, a small positive one (docs/metadata.md)."""
    model = _fit(name, table, META)
    s = model.sample(N_SAMPLES, random_state=5)
    assert not (s["colour"] == "violet").any()
    row = table.head(1).assign(colour="violet")
    row["colour"] = pd.Categorical(row["colour"], categories=["red", "green", "blue", "violet"])
    if name in ("arf", "gef"):
        assert np.isfinite(model.log_prob(row)[0])
    elif name == "nrgboost":
        strict = registry.get("learner", name)(**FAST[name], density_floor=None, random_state=0)
        assert strict.fit(table, kinds=META).log_prob(row)[0] == -np.inf
    else:
        assert model.log_prob(row, floor=None)[0] == -np.inf
