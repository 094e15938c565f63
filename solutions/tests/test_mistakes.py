"""Every known mistake is caught by the test suite and named by its task's check."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from minilm import checks, tasks
from solutions import mistakes

MUTANTS = mistakes.all_mutants()


@pytest.fixture(autouse=True)
def _reference(monkeypatch):
    monkeypatch.setenv("MINILM_IMPL", "solutions")


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m["name"])
def test_check_names_the_mistake(mutant):
    with mistakes.applied(mutant):
        verdict = checks.run(mutant["task"])
    assert verdict.status == checks.FAIL, verdict.line
    assert verdict.mistake == mutant["name"], verdict.line
    assert mutant["diagnosis"] in verdict.message, verdict.line
    assert checks.run(mutant["task"]).ok, "the mutant was not undone"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m["name"])
def test_suite_fails_on_the_mistake(mutant):
    env = {**os.environ, "MINILM_IMPL": "solutions", "MINILM_MUTANT": mutant["name"], "PYTHONWARNINGS": "ignore",
           "HYPOTHESIS_PROFILE": "fail-fast"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-p", "solutions.mistakes", "--task", mutant["task"],
         "-x", "-q", "-p", "no:xdist", "-p", "no:nbval"],
        cwd=tasks.ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 1, f"the suite did not fail on {mutant['name']}:\n{result.stdout[-2000:]}"
    assert "failed" in result.stdout
