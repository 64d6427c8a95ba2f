"""ARF presets: they construct with the documented parameters and differ as documented."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 400
    x = rng.exponential(1.0, n)  # skewed, bounded below by 0
    c = np.where(x > 1.0, "high", "low")  # c is a function of x
    return pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.3, n), "c": c})


def test_presets_construct_with_documented_parameters():
    assert ARF.preset("best samples").get_params() == ARF(
        n_trees=30, min_node_size=5, finite_bounds="local").get_params()
    assert ARF.preset("best density").get_params() == ARF(
        n_trees=100, min_node_size=5, alpha=0.1).get_params()
    assert ARF.preset("fastest").get_params() == ARF(
        n_trees=10, min_node_size=10, max_iters=0).get_params()
    assert ARF.preset("fastest", n_trees=3, random_state=1).n_trees == 3
    with pytest.raises(ValueError, match=r"unknown ARF preset 'best'; choose from"):
        ARF.preset("best")


def test_best_samples_stays_in_the_training_range(table):
    lo, hi = table[["x", "y"]].min(), table[["x", "y"]].max()

    def out_of_range(model: ARF) -> int:
        s = model.fit(table).sample(4000, random_state=1)
        return int(((s[["x", "y"]] < lo) | (s[["x", "y"]] > hi)).to_numpy().sum())

    # since issue 11 every learner samples inside the observed range by default
    assert out_of_range(ARF(random_state=0)) == 0
    assert out_of_range(ARF.preset("best samples", random_state=0)) == 0


def test_best_density_smooths_unseen_levels(table):
    row = pd.DataFrame({"x": [3.0], "y": [3.0], "c": ["low"]})  # "low" never occurs at x = 3
    # c = (x > 1) is a threshold rule of the table: kept, the row has density zero
    assert ARF(random_state=0).fit(table).log_prob(row)[0] == -np.inf
    off = {"detect_mappings": False}  # the leaf pmfs alone
    plain = ARF(random_state=0, prior_strength=0.0).fit(table, kinds=off).log_prob(row)[0]
    smooth = ARF.preset("best density", random_state=0).fit(table, kinds=off).log_prob(row)[0]
    assert plain < -40.0  # the 1e-20 floor of an unseen level (R arf's plain leaf pmfs)
    assert smooth > plain + 20.0 and np.isfinite(smooth)
    # since issue 11 the defaults shrink leaf pmfs toward the marginal: no floor either
    default = ARF(random_state=0).fit(table, kinds=off).log_prob(row)[0]
    assert default > plain + 20.0 and np.isfinite(default)


def test_fastest_skips_adversarial_rounds(table):
    fast = ARF.preset("fastest", random_state=0).fit(table)
    assert fast.n_rounds_ == 1 and fast.n_trees == 10
    assert ARF.preset("fastest", random_state=0).fit(table).sample(
        50, random_state=0).equals(fast.sample(50, random_state=0))


def test_yaml_configs_name_the_presets(tmp_path):
    from pathlib import Path

    from forestgen.config import build_learner, load_config

    configs = Path(__file__).resolve().parents[2] / "configs"
    for preset in ARF.PRESETS:
        cfg = load_config(configs / f"arf_{preset.replace(' ', '_')}.yaml")
        assert build_learner(cfg).get_params() == ARF.preset(preset, random_state=0).get_params()
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner: arf\npreset: best\n")
    with pytest.raises(ValueError, match=r"unknown ARF preset 'best'"):
        build_learner(load_config(bad))
    bad.write_text("learner: gef\npreset: fastest\n")
    with pytest.raises(ValueError, match=r"learner 'gef' has no presets"):
        build_learner(load_config(bad))
