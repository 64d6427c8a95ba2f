"""Inputs the metrics read: a numeric column's text that is no number is refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm


def test_text_in_a_numeric_synthetic_column_is_refused_by_name():
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"height": rng.normal(170, 10, 200), "g": rng.choice(["a", "b"], 200)})
    syn = real.sample(frac=1.0, random_state=1).reset_index(drop=True)
    syn["height"] = syn["height"].astype(object)
    syn.loc[:40, "height"] = "tall"
    with pytest.raises(ValueError, match="'height' is numeric.*'tall'"):
        fm.c2st(real, syn, random_state=0)
    ok = syn.assign(height=real["height"].astype(str))  # numbers given as text are read
    assert 0.0 <= fm.c2st(real, ok, random_state=0).auc <= 1.0
