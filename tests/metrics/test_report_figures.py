"""The report's marginal figure for every column kind (issue 35): full category labels (they
were cut at 12 characters, ``Married-civ-``), point masses drawn apart from the continuous part
(capital-gain was one spike), dates on a time axis (they were bars of the first 12 dates),
times of day in hours, columns with few values as bars of their values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from forestgen.metrics import report  # noqa: E402
from forestgen.metrics.quality import MAX_LEVELS  # noqa: E402


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    long = ["Married-civ-spouse", "Never-married", "Married-spouse-absent", "Divorced"]
    return pd.DataFrame({
        "status": rng.choice(long, n),
        "many": rng.choice([f"level number {i}" for i in range(40)], n),
        "flag": rng.uniform(size=n) < 0.3,
        "rating": rng.integers(1, 6, n),
        "gain": np.where(rng.uniform(size=n) < 0.9, 0, np.round(np.exp(rng.normal(8, 1.5, n)))),
        "x": rng.normal(size=n),
        "day": pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D"),
        "clock": pd.to_timedelta(rng.integers(6 * 3600, 20 * 3600, n), unit="s"),
    })


@pytest.fixture(scope="module")
def figure():
    rep = report(_table(600, 0), _table(600, 1), metrics=["marginals"])
    fig = rep.figures()["marginals"]
    rep._png_cache = None
    assert len(rep._pngs()["marginals"]) > 10_000  # rendered
    return fig


def _axes(fig, title: str) -> list:
    """The axes of one column's panel (its first axis carries the column name)."""
    axes = fig.axes
    i = next(k for k, ax in enumerate(axes) if ax.get_title(loc="left") == title)
    out = [axes[i]]
    for ax in axes[i + 1:]:
        if ax.get_title(loc="left"):
            break
        out.append(ax)
    return out


def test_every_column_has_a_panel(figure):
    titles = [ax.get_title(loc="left") for ax in figure.axes if ax.get_title(loc="left")]
    assert titles == list(_table(5, 0).columns)


def test_category_labels_are_full_and_levels_pooled(figure):
    (ax,) = _axes(figure, "status")
    labels = [t.get_text().replace("\n", "") for t in ax.get_yticklabels()]
    assert "Married-civ-spouse" in labels and "Married-spouse-absent" in labels
    (ax,) = _axes(figure, "many")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == MAX_LEVELS + 1 and labels[-1] == "other (25 levels)"


def test_point_masses_drawn_apart_with_the_rest_on_a_log_scale(figure):
    atoms, rest = _axes(figure, "gain")
    assert [t.get_text() for t in atoms.get_xticklabels()] == ["0"]
    heights = [p.get_height() for p in atoms.patches]
    assert heights[0] == pytest.approx(0.9, abs=0.05)  # the real share of zeros
    assert rest.get_xscale() == "log" and "other values" in rest.get_title()


def test_dates_on_a_time_axis_and_times_of_day_in_hours(figure):
    import matplotlib.dates as mdates

    (ax,) = _axes(figure, "day")
    assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)
    lo, hi = ax.get_xlim()
    assert mdates.num2date(lo).year >= 2014 and mdates.num2date(hi).year <= 2018
    (ax,) = _axes(figure, "clock")
    assert ax.get_xlabel() == "hours" and 5 <= ax.get_xlim()[0] and ax.get_xlim()[1] <= 21


def test_few_values_and_booleans_as_bars(figure):
    (ax,) = _axes(figure, "rating")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3", "4", "5"]
    (ax,) = _axes(figure, "flag")
    assert {t.get_text() for t in ax.get_yticklabels()} == {"True", "False"}
