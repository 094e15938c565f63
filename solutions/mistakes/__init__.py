"""Known mistakes: deliberately wrong variants of the reference ("mutants"), a module per notebook
group (basics.py, rope_attention.py, … the groups of minilm.course.exercises.GROUPS).

The test suite must fail on every one, and each task's check must name it, so a student
whose code makes the same mistake is told which one. solutions/tests/test_mistakes.py proves
both. Each group module lists its mistakes in MISTAKES, each entry a dict made by `mutant`:

    name       the mistake's name, as the check reports it (Verdict.mistake)
    task       the task whose tests and check must catch it
    patches    (module, attribute path, replacement): what to swap in the reference
    diagnosis  words the check's message must contain
    raises     True for a mistake that raises on some inputs (batched token positions)
               instead of returning a wrong output: checks name it from the error, the grader
               reports the error

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


def mutant(name: str, task: str, patches: list[tuple], diagnosis: str, raises: bool = False) -> dict:
    """A catalogued mistake: the suite must fail on it and its task's check must name it."""
    return {"name": name, "task": task, "patches": patches, "diagnosis": diagnosis, "raises": raises,
            "kind": "mutant"}


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


def get(name: str) -> dict:
    for m in all_mutants():
        if m["name"] == name:
            return m
    raise ValueError(f"unknown mutant {name!r}; known: {', '.join(m['name'] for m in all_mutants())}")


@contextlib.contextmanager
def applied(mutant: dict):
    """Swap the mutant's replacements into the reference for the duration of the block."""
    undo = []
    try:
        for module_name, path, replacement in mutant["patches"]:
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for p in parents:
                owner = getattr(owner, p)
            undo.append((owner, attr, owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)))
            setattr(owner, attr, replacement)
        yield mutant
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def pytest_configure(config):
    name = os.environ.get("MINILM_MUTANT")
    if name:
        config._minilm_mutant = applied(get(name))
        config._minilm_mutant.__enter__()
