"""`minilm status`: every task's check once, a table of where you stand, and the file:line to open next."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import minilm
from minilm.course import tasks
from minilm.course.cli import Parser
from minilm.course.commands import for_small_checks

DESCRIPTION = ("Run every task's check once and print a table: done, not yet or failing, then the file and "
               "line of the next task to write.")


def source_location(task: tasks.Task) -> tuple[Path, int]:
    """The file and line to open for `task`: its first stub line, else its definition."""
    pkg = "solutions" if minilm.implementation() == "solutions" else "minilm"
    path = tasks.ROOT / pkg / f"{task.module}.py"
    if not path.exists():
        return path, 1
    text = path.read_text(encoding="utf-8")
    needle = f'NotImplementedError("Task {task.id} '
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return path, i
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == task.function:
            return path, node.lineno
    return path, 1


def status(out=None) -> int:
    out = out or sys.stdout
    from minilm.course import checks

    impl = minilm.implementation()
    who = "the reference (MINILM_IMPL=solutions)" if impl == "solutions" else "your code in minilm/"
    print(f"minilm status: {who}", file=out)
    verdicts = checks.run_many([t.id for t in tasks.TASKS])
    width = max(len(t.title) for t in tasks.TASKS)
    for task, v in zip(tasks.TASKS, verdicts):
        state = "done" if v.ok else ("not yet" if v.status == checks.TODO else "failing")
        print(f"  {checks.SYMBOL[v.status]} {task.id:<5} {task.title:<{width}}  {state}", file=out)
    done = sum(v.ok for v in verdicts)
    points = sum(t.points for t, v in zip(tasks.TASKS, verdicts) if v.ok)
    total = sum(t.points for t in tasks.TASKS)
    print(f"{done}/{len(tasks.TASKS)} tasks done, {points}/{total} points", file=out)
    for task, v in zip(tasks.TASKS, verdicts):
        if not v.ok:
            # A stub: its stub line. Failing: where the check traced it (the line your code raised at, the
            # function whose output differs), else the task's definition.
            where = v.where if v.status != checks.TODO else None
            if where is None:
                path, line = source_location(task)
                where = f"{path.relative_to(tasks.ROOT).as_posix()}:{line}"
            print(f"Next: Task {task.id} ({task.title}): open {where}, taught in {task.notebook}", file=out)
            if v.status != checks.TODO:
                print(f"  {v.message}", file=out)
            break
    return 0


def main(argv: list[str] | None = None, prog: str = "minilm status") -> int:
    Parser(prog=prog, description=DESCRIPTION).parse_args(argv)
    for_small_checks()
    return status()
