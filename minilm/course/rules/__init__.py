"""The from-scratch rule (provided: not an exercise): a task may not run the built-ins it builds.

It is judged by what runs. While a task's check cell or the grader's probe runs the student's code, the
recorder (recorder.py) sees every call into the libraries and refuses one of the task's families
(families.py, named per task in minilm/course/tasks.py), whoever made it. A small lint (lint.py) keeps out
of the source what could switch that recording off or get around it. docs/students.md states the rule.

    lint_for("6.1")                               # ["Task 6.1: minilm/attention.py:3 imports sys, …"] or []
    with recorder.watching("6.1", files) as r:    # r.refusal: the first refused call, or None
        minilm.softmax(x, -1)
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from minilm.course import tasks
from minilm.course.rules.lint import lint_package


@functools.lru_cache(maxsize=8)
def _lint_files(stamps: tuple[tuple[str, str, int, int], ...], folder: str) -> dict[str, list[str]]:
    sources = {}
    for module, path, _, _ in stamps:
        with open(path, "rb") as f:
            sources[module] = f.read()
    return lint_package(sources, folder)


def implementation_folder() -> Path:
    """The folder of the exercise modules `minilm` runs: the student's minilm/, or the reference's solutions/."""
    import minilm  # cheap: never imports torch or an exercise module

    spec = importlib.util.find_spec(minilm.implementation())
    return Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else tasks.PACKAGE_DIR


def lint_for(task_id: str) -> list[str]:
    """Task `task_id`'s lint messages on the current implementation, minilm/ or (MINILM_IMPL=solutions)
    solutions/: what in its module, or a module it imports, could get around the recording."""
    task, folder = tasks.get(task_id), implementation_folder()
    paths = {m: folder / f"{m}.py" for m in tasks.EXERCISE_MODULES}
    stamps = tuple((m, str(p), p.stat().st_mtime_ns, p.stat().st_size) for m, p in paths.items() if p.is_file())
    return list(_lint_files(stamps, folder.name).get(task.id, []))
