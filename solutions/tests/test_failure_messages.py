"""What a student sees when a check fails (issue 26): an error names the student's own file:line,
a task whose earlier task's code fails says to fix that one first, and `minilm status`'s Next
opens the function to fix. Wrong submissions are copies of the reference with one function broken,
run as a student runs them (their minilm/ on the path, no MINILM_IMPL)."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from minilm.course import spec, tasks

ROOT = tasks.ROOT


# ---------------------------------------------------------------- the registry's `uses` edges


def _calls(task: tasks.Task) -> set[str]:
    """The tasks whose names the reference's code of `task` and its spec's collect refer to."""
    owner = {name: t.id for t in tasks.TASKS for name in t.names}
    tree = ast.parse((ROOT / "solutions" / f"{task.module}.py").read_text(encoding="utf-8"))
    names = {n.id if isinstance(n, ast.Name) else n.attr
             for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in task.names
             for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}
    names |= set(re.findall(r"\bm\.(\w+)", inspect.getsource(spec.get(task.id).collect)))
    return {owner[n] for n in names if n in owner} - {task.id}


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_uses_names_every_earlier_task_the_reference_calls(task):
    order = [t.id for t in tasks.TASKS]
    earlier = {t for t in _calls(task) if order.index(t) < order.index(task.id)}  # 6.3's KVCache path is 11.3's
    assert earlier <= set(task.uses), f"Task {task.id} calls {sorted(earlier - set(task.uses))}: add them to its uses"
    assert all(order.index(t) < order.index(task.id) for t in task.uses), task.uses


def test_prerequisites_follow_uses_through():
    assert [t.id for t in tasks.prerequisites("8.1")] == ["1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "4.1", "4.3", "5.1",
                                                          "5.2", "6.1", "6.2", "6.3", "7.1"]
    assert tasks.prerequisites("1.1") == ()
