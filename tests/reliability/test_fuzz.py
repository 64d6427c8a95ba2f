"""A small fuzzing budget for CI (``fuzz_model_files.py``; ``FORESTGEN_FUZZ_MUTANTS=5000`` for
the big run): every mutant of every learner's files, compressed and stored, is refused or
answers exactly as the original — no crash, no hang, no other error, no silent change."""

from __future__ import annotations

import os

import pytest

from tests.reliability import fuzz_model_files as fuzz
from tests.reliability.conftest import FAST_LEARNERS


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus")
    fuzz.build_corpus(path)
    return path


def test_mutants_are_refused_or_identical(corpus):
    n = int(os.environ.get("FORESTGEN_FUZZ_MUTANTS", 140))
    record = fuzz.run(corpus, n, seed=int(os.environ.get("FORESTGEN_FUZZ_SEED", 0)))
    assert record["mutants"] == n
    assert record["failures"] == [], record["failures"][:10]
    # every learner's files were mutated, and most mutants are caught at load (checksums)
    assert {k.split()[0] for k in record["counts"]["learner"]} == set(FAST_LEARNERS)
    assert record["counts"]["outcome"].get("refused at load", 0) > n // 2


def test_crafted_mutants_are_refused_or_answer(corpus):
    """Crafted mutants (valid checksums): the structure checks refuse what could crash a
    kernel; the rest load and answer (another valid model may answer differently)."""
    n = int(os.environ.get("FORESTGEN_FUZZ_CRAFTED", 70))
    record = fuzz.run(corpus, n, seed=int(os.environ.get("FORESTGEN_FUZZ_SEED", 0)),
                      crafted=True)
    assert record["mutants"] == n
    assert record["failures"] == [], record["failures"][:10]
