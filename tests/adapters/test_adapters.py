"""forestgen.adapters without the peer packages (issue 35): SDV-style metadata (SDV 2's dict
form, as Metadata.detect_from_dataframes writes it) wherever kinds= is taken, the SDV-style
synthesizer round trip (keys regenerated, text dates in their format, save / load without
pickle), and ImportErrors naming the missing package. The same adapters against the real
packages: tests/adapters/test_peers.py."""

from __future__ import annotations

import builtins
import importlib

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.adapters.sdv import ForestSynthesizer


def _table(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({
        "id": np.arange(n) + 1000,
        "day": (pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 300, n), "D")
                ).strftime("%d/%m/%Y"),
        "amount": np.round(np.exp(x), 2),
        "kind": np.where(x > 0, "high", "low"),
        "member": rng.uniform(size=n) < 0.4,
        "name": [f"person {i}" for i in range(n)],
    })


#: what SDV 2.0's Metadata.detect_from_dataframes gives for _table() (to_dict())
SDV2 = {"tables": {"shop": {"primary_key": "id", "columns": {
    "id": {"sdtype": "id"},
    "day": {"sdtype": "datetime", "datetime_format": "%d/%m/%Y", "range_is_nullable": False,
            "range_min": "01/01/2020", "range_max": "26/10/2020"},
    "amount": {"sdtype": "numerical", "range_is_nullable": False, "range_min": 0.05,
               "range_max": 20.0, "decimal_places": 2},
    "kind": {"sdtype": "categorical", "range_is_nullable": False,
             "range_values": ["high", "low"], "high_cardinality": False},
    "member": {"sdtype": "boolean", "range_is_nullable": False},
    "name": {"pii": True, "sdtype": "first_name"}}}},
    "relationships": [], "METADATA_SPEC_VERSION": "V2"}


def test_sdv2_metadata_as_kinds():
    df = _table().drop(columns=["id", "day", "name"])
    meta = {"tables": {"shop": {"columns": {k: v for k, v in SDV2["tables"]["shop"][
        "columns"].items() if k in df.columns}}}}
    m = fg.ARF(n_trees=3, random_state=0).fit(df, kinds=meta)
    spec = {s.name: s for s in m.schema_.columns}
    assert spec["amount"].decimals == 2 and spec["amount"].range_max == 20.0
    assert spec["kind"].categories == ["high", "low"] and spec["member"].kind == "bool"
    s = m.sample(500, random_state=0)
    assert s["amount"].between(0.05, 20.0).all()
    with pytest.raises(ValueError, match="'id' is a key"):
        fg.ARF(n_trees=3).fit(_table()[["id", "amount"]], kinds=SDV2)


class FakeMetadata:
    """Duck-typed like sdv.metadata.Metadata (to_dict only)."""

    def to_dict(self):
        return SDV2


def test_synthesizer_round_trip(tmp_path):
    df = _table()
    syn = ForestSynthesizer(FakeMetadata(), "arf", n_trees=5, random_state=0).fit(df)
    s = syn.sample(num_rows=300)
    assert list(s.columns) == list(df.columns) and len(s) == 300
    assert dict(s.dtypes.astype(str)) == dict(df.dtypes.astype(str))
    assert s["id"].is_unique  # keys regenerated, not modelled
    days = pd.to_datetime(s["day"], format="%d/%m/%Y")  # dates back in their text format
    assert days.between(pd.Timestamp("2020-01-01"), pd.Timestamp("2020-10-27")).all()
    assert s["amount"].between(0.05, 20.0).all()
    path = syn.save(tmp_path / "shop.synth")
    again = ForestSynthesizer.load(path)
    syn.reset_sampling()
    pd.testing.assert_frame_equal(again.sample(50), syn.sample(50))
    assert again.get_parameters()["learner"] == "arf"
    known = pd.DataFrame({"kind": ["high"] * 20})
    cond = syn.sample_remaining_columns(known)
    assert (cond["kind"] == "high").all() and len(cond) == 20
    with pytest.raises(ValueError, match="not a ForestSynthesizer"):
        (tmp_path / "bad").write_bytes(b"garbage")
        ForestSynthesizer.load(tmp_path / "bad")


def test_missing_peers_are_named(monkeypatch):
    real_import = builtins.__import__

    def no_peers(name, *a, **k):
        if name.split(".")[0] in ("sdv", "synthyverse"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_peers)
    import forestgen.adapters.synthyverse as sv

    importlib.reload(sv)
    with pytest.raises(ImportError, match="'synthyverse' package"):
        sv.register()
    with pytest.raises(ImportError, match="'synthyverse' package"):
        sv.ForestgenGenerator  # noqa: B018
    syn = ForestSynthesizer(SDV2, n_trees=3).fit(_table())
    with pytest.raises(ImportError, match="'sdv' package"):
        syn.get_metadata()
    assert syn.get_metadata_dict()["columns"]["id"]["sdtype"] == "id"
