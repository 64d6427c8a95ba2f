"""The adapters against the real peer packages (optional job; issue 35). Each test runs where
its package imports and is skipped, saying so, where it does not. The peers live in their own
venvs (docs: Adapters):

    PYTHONPATH=. ~/.cache/forestgen-peers/sdv/bin/python -m pytest tests/adapters -m peers
    PYTHONPATH=. ~/.cache/forestgen-peers/synthyverse/bin/python -m pytest tests/adapters -m peers
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.peers


def _table(n=300, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({
        "visit": (pd.Timestamp("2021-01-01")
                  + pd.to_timedelta(rng.integers(0, 400, n), unit="D")).strftime("%Y-%m-%d"),
        "age": np.clip(np.round(40 + 12 * x), 18, 90).astype(np.int64),
        "income": np.round(np.exp(10 + 0.5 * x + rng.normal(0, 0.3, n)), 2),
        "smoker": rng.uniform(size=n) < 0.25,
        "group": np.where(x + rng.normal(0, 0.5, n) > 0, "treated", "control"),
    })


def test_sdv_metadata_synthesizer_and_sdmetrics(tmp_path):
    """SDV Metadata detected from a DataFrame -> ForestSynthesizer -> sdmetrics quality report;
    the same Metadata object as kinds=."""
    sdv_metadata = pytest.importorskip("sdv.metadata")
    reports = pytest.importorskip("sdmetrics.reports.single_table")
    import forestgen as fg
    from forestgen.adapters.sdv import ForestSynthesizer

    real = _table()
    meta = sdv_metadata.Metadata.detect_from_dataframes({"patients": real})
    syn = ForestSynthesizer(meta, "arf", random_state=0).fit(real)
    s = syn.sample(num_rows=len(real))
    assert dict(s.dtypes.astype(str)) == dict(real.dtypes.astype(str))
    got = syn.get_metadata()
    assert isinstance(got, sdv_metadata.Metadata)
    got.validate()
    got.validate_data({"patients": s})  # SDV accepts the samples against its own metadata
    q = reports.QualityReport()
    q.generate(real, s, got.to_dict()["tables"]["patients"], verbose=False)
    assert q.get_score() > 0.8, q.get_properties()
    syn.save(tmp_path / "p.synth")
    again = ForestSynthesizer.load(tmp_path / "p.synth")
    syn.reset_sampling()
    pd.testing.assert_frame_equal(again.sample(40), syn.sample(40))
    # the Metadata object wherever kinds= is taken (dates parsed first, as SDV needs too)
    parsed = real.assign(visit=pd.to_datetime(real["visit"]))
    m = fg.RFDE(n_trees=5, random_state=0).fit(parsed, kinds=meta)
    assert m.schema_.columns[0].dtype.startswith("datetime64")
    from forestgen.metrics import report

    assert report(parsed, m.sample(200, random_state=0), metrics=["marginals"],
                  kinds=meta).value("ks_mean") < 0.2


def test_synthyverse_generator_in_its_harness(tmp_path):
    pytest.importorskip("synthyverse")
    from synthyverse.benchmark.synthesis import TabularSynthesisBenchmark
    from synthyverse.generators import SynthyverseGenerator, get_generator

    from forestgen.adapters.synthyverse import ForestgenGenerator, register

    register()
    assert get_generator("forestgen") is ForestgenGenerator
    X = _table().drop(columns=["visit"])
    cats = ["smoker", "group"]
    g = SynthyverseGenerator("forestgen", learner_params={"n_trees": 5}).fit(X, cats)
    s = g.sample(100, random_state=1)
    assert list(s.columns) == list(X.columns) and set(s["group"]) <= {"treated", "control"}
    g.save(tmp_path / "g")
    again = SynthyverseGenerator.load(tmp_path / "g")
    pd.testing.assert_frame_equal(again.sample(20, random_state=2), g.sample(20, random_state=2))
    bench = TabularSynthesisBenchmark(X=X, generator="forestgen",
                                      generator_params={"learner_params": {"n_trees": 5}},
                                      categorical_features=cats, target_column="group",
                                      random_state=42)
    res = bench.run(metrics=["marginals"], results_save_path=tmp_path / "r.csv")
    values = dict(zip(res["metric name"], res["metric value"]))
    assert values["marginals.train.cat.tvd"] < 0.1, values
