"""Known mistakes: deliberately wrong variants of the reference, a module per notebook group
(basics.py, rope_attention.py, … the groups of minilm.course.exercises.GROUPS).

Each group module lists its mistakes in MISTAKES, one entry per mistake (per task, for a
mistake two tasks' checks name), made by one of two constructors:

    mutant   a catalogued mistake ("mutant"): the test suite must fail on it, and its task's
             check must name it, so a student whose code makes the same mistake is told which
             one. solutions/tests/test_mistakes.py proves both, on all_mutants().
    variant  a mistake a check names that the suite is not run on: `minilm expected`
             (solutions/expected.py, its VARIANTS) records its outputs for the check to
             recognise, looked up by task and name. No diagnosis, nothing run under pytest.

An entry is a dict:

    name       the mistake's name, as the check reports it (Verdict.mistake)
    task       the task whose tests and check must catch it
    patches    (module, attribute path, replacement): what to swap in the reference
    diagnosis  words the check's message must contain ("" for a variant)
    broken     for a mistake no stored output names, the start of the spec's property the check
               names instead (minilm/course/exercises/: Property.says); None for the others
    raises     True for a mistake that raises on some inputs (batched token positions)
               instead of returning a wrong output: checks name it from the error, the grader
               reports the error
    kind       "mutant" or "variant"

A group module imports the reference, torch and this package's constructors, and never another
group module: what two groups share is in _shared.py.

Also a pytest plugin: `python -m pytest -p solutions.mistakes` with MINILM_MUTANT=<name>
runs the suite with that mutant in place.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os

from minilm.course.exercises import GROUPS


def mutant(name: str, task: str, patches: list[tuple], diagnosis: str, raises: bool = False,
           broken: str | None = None) -> dict:
    """A catalogued mistake: the suite must fail on it and its task's check must name it (by its name, or
    with `broken` by the property it breaks)."""
    return {"name": name, "task": task, "patches": patches, "diagnosis": diagnosis, "raises": raises,
            "kind": "mutant", "broken": broken}


def variant(name: str, task: str, patches: list[tuple]) -> dict:
    """A mistake a check of `task` names whose outputs only `minilm expected` records."""
    return {"name": name, "task": task, "patches": patches, "diagnosis": "", "raises": False, "kind": "variant",
            "broken": None}


def _entries() -> list[dict]:
    """Every group module's MISTAKES, in the course's order (a group without a module has none)."""
    found = []
    for group in GROUPS:
        if importlib.util.find_spec(f"{__name__}.{group}") is not None:
            found += importlib.import_module(f"{__name__}.{group}").MISTAKES
    return found


def all_mutants() -> list[dict]:
    """Every group's mutants: what the suite must fail on and the checks must name."""
    return [m for m in _entries() if m["kind"] == "mutant"]


def variants() -> list[dict]:
    """Every group's variants: what the checks' stored outputs name besides the mutants."""
    return [m for m in _entries() if m["kind"] == "variant"]


def get(name: str) -> dict:
    for m in all_mutants():
        if m["name"] == name:
            return m
    raise ValueError(f"unknown mutant {name!r}; known: {', '.join(m['name'] for m in all_mutants())}")


@contextlib.contextmanager
def applied(mistake: dict):
    """Swap the mistake's replacements into the reference for the duration of the block."""
    undo = []
    try:
        for module_name, path, replacement in mistake["patches"]:
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for p in parents:
                owner = getattr(owner, p)
            undo.append((owner, attr, owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)))
            setattr(owner, attr, replacement)
        yield mistake
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def pytest_configure(config):
    name = os.environ.get("MINILM_MUTANT")
    if name:
        config._minilm_mutant = applied(get(name))
        config._minilm_mutant.__enter__()
