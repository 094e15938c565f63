"""Your code, task by task, as the course's commands see it: each task's check passes, the
status command points at the right line of your file, and the MINILM_IMPL switch refuses a
typo. (The course's own plumbing, checked on the instructor's side, is in
solutions/tests/test_course_plumbing.py.)"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from minilm.course import checks, tasks

ROOT = tasks.ROOT


@pytest.mark.parametrize("task", [pytest.param(t, marks=pytest.mark.task(t.id)) for t in tasks.TASKS],
                         ids=lambda t: t.id)
def test_each_task_check_passes(task):
    verdict = checks.run(task.id)
    assert verdict.ok, verdict.line


def test_switch_rejects_unknown_values():
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "MINILM_IMPL": "solution"}
    r = subprocess.run([sys.executable, "-c", "import minilm"], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)
    assert r.returncode != 0
    assert "MINILM_IMPL must be unset, 'minilm' (your code) or 'solutions'" in r.stderr
    assert "got 'solution'" in r.stderr


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_status_points_at_the_stub_line_or_the_definition(task):
    """`minilm status` sends you to a task's stub line while it is a stub, and to
    its definition once you replaced the stub."""
    from minilm.course.commands.status import source_location

    path, line = source_location(task)
    text = path.read_text(encoding="utf-8")
    at = text.splitlines()[line - 1]
    if f'NotImplementedError("Task {task.id} ' in text:
        assert f"Task {task.id} " in at, f"{path.name}:{line} is not task {task.id}'s stub line: {at.strip()!r}"
    else:
        defined = [n.lineno for n in ast.walk(ast.parse(text))
                   if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == task.function]
        assert line in defined, f"{path.name}:{line} is not where {task.function} is defined: {at.strip()!r}"
