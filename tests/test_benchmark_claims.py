"""Figures quoted in the docs and tutorials are the ones in the benchmark result files.

* every ``x +- y`` figure in the prose of ``docs/augmentation.md`` and tutorial 02 appears in
  ``benchmarks/results/augmentation.md`` (the benchmark's report);
* every tutorial's first cell states its fast-mode and full-mode CPU seconds, as measured by
  ``benchmarks/bench_tutorials.py`` (``benchmarks/results/tutorials_{fast,full}.jsonl``); a
  full-mode run stopped at its CPU limit (or failed) is stated as a lower bound ("at least").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TUTORIALS = sorted((ROOT / "tutorials").glob("*.ipynb"))
FIGURE = re.compile(r"[+-]?\d+\.\d+ \+- \d+\.\d+")


def _markdown(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def _rows(name: str) -> dict:
    lines = (RESULTS / f"{name}.jsonl").read_text().splitlines()
    return {r["notebook"]: r for r in map(json.loads, lines)}


def test_augmentation_figures_are_the_reports():
    report = (RESULTS / "augmentation.md").read_text()
    page = (ROOT / "docs" / "augmentation.md").read_text().split("--8<--")[0]
    tutorial = "\n".join(_markdown(ROOT / "tutorials" / "02_augmentation_lightning.ipynb"))
    quoted = FIGURE.findall(page) + FIGURE.findall(tutorial)
    assert len(quoted) >= 5
    missing = [q for q in quoted if q not in report]
    assert not missing, f"figures not in benchmarks/results/augmentation.md: {missing}"


@pytest.mark.parametrize("nb", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_states_its_measured_cost(nb):
    intro = " ".join(_markdown(nb)[0].split())
    fast = re.search(r"fast mode \(`FORESTGEN_FAST=1`[^)]*\): (\d+(?:\.\d+)?) CPU s", intro)
    full = re.search(r"full mode: (at least )?(\d+(?:\.\d+)?) CPU s", intro)
    assert fast and full, f"{nb.name}: the first cell states no fast- and full-mode CPU cost"
    assert float(fast[1]) == _rows("tutorials_fast")[nb.name]["cpu_s"]
    row = _rows("tutorials_full")[nb.name]
    assert float(full[2]) == row["cpu_s"]
    partial = bool(row.get("stopped") or row.get("error"))
    assert bool(full[1]) == partial, \
        f"{nb.name}: a stopped or failed run is a lower bound ('at least'), a finished one is not"
