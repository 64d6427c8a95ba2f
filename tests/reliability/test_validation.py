"""Parameter and seed validation, the same for every learner (old main: ``True`` accepted as a
tree count, numpy's messages for RandomState / SeedSequence / negative seeds, wrong types failing
deep inside with messages that do not name the parameter)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF, DEF, RFDE, GeF
from forestgen.base import GenerativeForest
from forestgen.cli import main
from forestgen.families.energy.nrgboost import NRGBoost
from forestgen.learners import EOGT, GFBoost
from forestgen.modelfile import ModelFileError
from forestgen.validation import ParameterError

FAST = {
    ARF: dict(n_trees=2, n_jobs=1),
    GeF: dict(n_trees=2, n_jobs=1),
    RFDE: dict(n_trees=2, depth=2, n_jobs=1),
    DEF: dict(n_trees=2, max_leaves=4, n_jobs=1),
    NRGBoost: dict(n_trees=2, max_leaves=4, pool_size=300, gibbs_chains=2, gibbs_burn_in=2,
                   n_normaliser_samples=500),
    GFBoost: dict(n_trees=2, n_iter=4),
    EOGT: dict(n_trees=2, n_iter=4),
}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 120
    return pd.DataFrame({"x": rng.normal(size=n), "z": rng.normal(size=n),
                         "c": rng.choice(["u", "v", "w"], size=n)})


def _fit(cls, table, **params):
    model = cls(**{**FAST[cls], **params})
    if cls is GeF:
        return model.fit(table, target="c")
    return model.fit(table)


BAD = {
    ARF: [("n_trees", True), ("n_trees", 2.5), ("n_trees", "10"), ("n_trees", 0),
          ("min_node_size", True), ("max_iters", 1.5), ("delta", "0.1"), ("delta", 0.7),
          ("early_stop", "yes"), ("family", "gauss"), ("alpha", -1.0), ("max_bins", True),
          ("max_features", True), ("max_features", 1.5), ("sample_fraction", 0.0),
          ("n_jobs", 1.5), ("progress", 1), ("max_depth", -1), ("epsilon", float("nan"))],
    GeF: [("n_trees", True), ("n_trees", 3.0), ("max_features", "half"), ("min_std", 0.0),
          ("mode", 1), ("max_bins", 1), ("max_depth", 2.0), ("n_jobs", "all")],
    RFDE: [("n_trees", True), ("depth", True), ("depth", "deep"), ("depth_grid", [1, True]),
           ("depth_grid", 3), ("cv_folds", 1), ("margin", -0.1), ("density_floor", 0.0),
           ("box", [0, 1])],
    DEF: [("n_trees", True), ("max_leaves", 2.0), ("criterion", "gini"),
          ("min_samples_leaf", -1), ("max_features", True), ("bootstrap", "no"),
          ("density_floor", -1.0)],
    NRGBoost: [("n_trees", True), ("pool_size", 300.0), ("learning_rate", 0.0),
               ("line_search", "yes"), ("p_refresh", 2.0), ("max_leaves", 1)],
    GFBoost: [("n_trees", True), ("n_iter", 2.5), ("loss", "gini"), ("prior", 1.0)],
}


@pytest.mark.parametrize("cls,name,value",
                         [(c, n, v) for c, cases in BAD.items() for n, v in cases],
                         ids=lambda v: repr(v) if not isinstance(v, type) else v.__name__)
def test_bad_parameter_is_named(table, cls, name, value):
    with pytest.raises(ParameterError, match=rf"^{name}"):
        _fit(cls, table, **{name: value})
    # catchable both ways
    assert issubclass(ParameterError, ValueError) and issubclass(ParameterError, TypeError)


SEEDS = {
    "int": lambda: 7,
    "numpy int": lambda: np.int64(7),
    "SeedSequence": lambda: np.random.SeedSequence(7),
    "Generator": lambda: np.random.default_rng(7),
    "RandomState": lambda: np.random.RandomState(7),
}


def _signature(model, table) -> np.ndarray:
    return model.log_prob(table.drop(columns="c") if isinstance(model, GeF) else table)


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_every_seed_kind_is_accepted_and_reproducible(table, cls):
    got = {}
    for kind, make in SEEDS.items():
        a = _signature(_fit(cls, table, random_state=make()), table)
        b = _signature(_fit(cls, table, random_state=make()), table)
        np.testing.assert_array_equal(a, b, err_msg=f"{cls.__name__} {kind}")
        got[kind] = a
    # one scheme: an int, a numpy int and SeedSequence(int) are the same seed
    np.testing.assert_array_equal(got["int"], got["numpy int"])
    np.testing.assert_array_equal(got["int"], got["SeedSequence"])
    _fit(cls, table, random_state=None)


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [-1, 1.5, True, "7"])
def test_bad_seed_is_named(table, cls, seed):
    with pytest.raises(ParameterError, match="random_state must be None, an integer >= 0"):
        _fit(cls, table, random_state=seed)


def test_sample_arguments(table):
    m = _fit(ARF, table, random_state=0)
    with pytest.raises(ParameterError, match="^n must be"):
        m.sample(True)
    with pytest.raises(ParameterError, match="^n must be"):
        m.sample(2.0)
    with pytest.raises(ParameterError, match="random_state"):
        m.sample(5, random_state=-3)
    a = m.sample(5, random_state=np.random.RandomState(4))
    b = m.sample(5, random_state=np.random.RandomState(4))
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(m.sample(5, random_state=np.random.SeedSequence(4)),
                                  m.sample(5, random_state=4))


def test_saved_parameters_are_validated_at_load(tmp_path, crafted):
    def edit(a, m):
        m["params"]["n_trees"] = True

    with pytest.raises(ModelFileError, match="n_trees must be an integer"):
        GenerativeForest.load(crafted(edit))


def test_cli_bad_parameter_type(tmp_path, table, capsys):
    data = tmp_path / "d.csv"
    table.to_csv(data, index=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learner: arf\nparams: {n_trees: true}\n")
    assert main(["fit", str(data), "--config", str(cfg), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n_trees must be an integer >= 1, got True (bool)" in err[0]
