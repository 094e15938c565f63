"""Every known mistake is caught by the test suite and named by its task's check."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from minilm.course import checks, exercises, hints, tasks
from solutions import mistakes
from solutions.tests.test_hints import assert_no_leak

MUTANTS = mistakes.all_mutants()


def test_each_mistake_is_in_its_groups_module_and_no_group_imports_another():
    # One place per mistake, mutant or variant: the module of its task's notebook group (the group of
    # minilm/course/exercises/ that holds the task's spec). What two groups share is in _shared.py.
    groups = [g for g in exercises.GROUPS if importlib.util.find_spec(f"solutions.mistakes.{g}") is not None]
    for group in groups:
        module = importlib.import_module(f"solutions.mistakes.{group}")
        for m in module.MISTAKES:
            assert exercises.get(m["task"]).collect.__module__ == f"minilm.course.exercises.{group}", (group, m)
        imported = set()
        for node in ast.walk(ast.parse(Path(module.__file__).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "solutions.mistakes":
                imported |= {f"solutions.mistakes.{a.name}" for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        assert not imported & {f"solutions.mistakes.{g}" for g in groups}, f"{group} imports another group's module"
    assert len({m["name"] for m in MUTANTS}) == len(MUTANTS), "two mutants share a name"
    variants = mistakes.variants()
    assert len({(v["task"], v["name"]) for v in variants}) == len(variants), "two variants of a task share a name"


@pytest.fixture(autouse=True)
def _reference(monkeypatch):
    monkeypatch.setenv("MINILM_IMPL", "solutions")


def _namespaces() -> dict:
    """What every reference module and its classes bind, by identity: a mutant's patches must all come undone."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("solutions.") and name.count(".") == 1 and not name.startswith("solutions.mistakes"):
            for attr, value in vars(module).items():
                found[(name, attr)] = id(value)
                if isinstance(value, type) and value.__module__ == name:
                    found |= {(name, f"{attr}.{a}"): id(v) for a, v in vars(value).items()}
    return found


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m["name"])
def test_check_names_the_mistake(mutant, tmp_path):
    before = _namespaces()
    with mistakes.applied(mutant):
        verdict = checks.run(mutant["task"])
    assert verdict.status == checks.FAIL, verdict.line
    if mutant["broken"]:  # no stored output names it: the property it breaks does
        assert verdict.broken and verdict.broken.startswith(mutant["broken"]), verdict.line
    else:
        assert verdict.mistake == mutant["name"], verdict.line
    assert mutant["diagnosis"] in verdict.message, verdict.line
    after = _namespaces()  # (checking the task again took 45 s of CI); a module the check imported is new, not changed
    assert not [k for k in before if after.get(k) != before[k]], "the mutant was not undone"
    # `minilm hint`'s ladder on this verdict: three rungs, the third gives the idea of the fix in words, never the
    # catalogue's internal name; no rung leaks.
    ladder = hints.ladder(mutant["task"], verdict)
    ideas = [a for label, a in exercises.get(mutant["task"]).mistakes.items() if label.split(" ")[0] == mutant["name"]]
    ideas += [p.idea for p in exercises.get(mutant["task"]).properties if p.says == verdict.broken]
    assert len(ladder.rungs) == hints.RUNGS and any(idea in str(ladder.rungs[2]) for idea in ideas or [verdict.message])
    assert f"`{mutant['name']}`" not in ladder.show(3), ladder.show(3)
    assert_no_leak(tmp_path, {f"{mutant['name']}-{n}": ladder.show(n) for n in range(1, hints.RUNGS + 1)})


# The suite fails on every mutant by construction: test_check_names_the_mistake proves each one fails its task's
# check, and every task's tests (`minilm test ID`) include that check (tests/test_course.py). Running the suite
# once per mutant re-proved that at 4-20 s each (a third of CI's time); two run end to end, a catalogued mistake
# and a broken property, to prove that the selection `minilm test ID` makes holds the check.
SAMPLE = [m for m in MUTANTS if m["task"] == "3.1" and not m["broken"]][:1] + [m for m in MUTANTS if m["broken"]][:1]


@pytest.mark.parametrize("mutant", SAMPLE, ids=lambda m: m["name"])
def test_suite_fails_on_the_mistake(mutant, pytester, monkeypatch):
    # In-process, so torch is imported once; the mutant is patched into the reference that
    # the inner run's `minilm.<name>` lookups reach.
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "fail-fast")
    with mistakes.applied(mutant):
        result = pytester.runpytest_inprocess(
            str(tasks.ROOT / "tests"), "--rootdir", str(tasks.ROOT), "-c", str(tasks.ROOT / "pyproject.toml"),
            "--task", mutant["task"], "--impl", "solutions", "-q", "-p", "no:xdist", "-p", "no:randomly",
            "-p", "no:nbval", "-m", "not slow",
        )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"the suite did not fail on {mutant['name']}:\n{result.stdout.str()[-2000:]}"
    assert f"test_each_task_check_passes[{mutant['task']}]" in result.stdout.str(), result.stdout.str()[-2000:]
