"""The documentation site: every ``python`` code block of each page runs (with its asserts), and
the MkDocs build passes in strict mode (broken references fail) when MkDocs is installed."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text())
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_code_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(BLOCK.findall(page.read_text())):
        exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)  # noqa: S102


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*"):
        if page.suffix in (".md", ".ipynb"):
            assert str(page.relative_to(DOCS)) in nav, page


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="MkDocs not installed (pip install -r docs/requirements.txt)")
def test_strict_build(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                         env={"NO_MKDOCS_2_WARNING": "1", "PATH": "", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "learners" / "index.html").exists()
