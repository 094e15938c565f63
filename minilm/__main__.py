"""The course's command line.

    python -m minilm status          # each task: done or not yet, and where to go next
    python -m minilm check 3.1 3.2   # run tasks' checks and print their verdicts
    python -m minilm check --json all
    python -m minilm check all --markdown checks.md --json-out checks.json   # for CI: a table and the verdicts
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from pathlib import Path

import minilm
from minilm import tasks


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


def status(out=sys.stdout) -> int:
    from minilm import checks

    impl = minilm.implementation()
    who = "the reference (MINILM_IMPL=solutions)" if impl == "solutions" else "your code in minilm/"
    print(f"minilm status: {who}", file=out)
    verdicts = [checks.run(t.id) for t in tasks.TASKS]
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
            path, line = source_location(task)
            rel = path.relative_to(tasks.ROOT).as_posix()
            print(f"Next: Task {task.id} ({task.title}): open {rel}:{line}, taught in {task.notebook}", file=out)
            if v.status != checks.TODO:
                print(f"  {v.message}", file=out)
            break
    return 0


def markdown(verdicts) -> str:
    """The verdicts as a Markdown report: points per task, then what to do next."""
    from minilm import checks

    total = sum(tasks.get(v.task).points for v in verdicts)
    points = sum(tasks.get(v.task).points for v in verdicts if v.ok)
    lines = ["# minilm: visible checks", "",
             f"**{points} / {total} points** on the checks in this repository "
             f"({sum(v.ok for v in verdicts)}/{len(verdicts)} tasks pass). Your grade is decided by your "
             "instructor's grader, on hidden inputs as well as the notebooks'.", "",
             "| task | title | points | check |", "|---|---|---|---|"]
    for v in verdicts:
        task = tasks.get(v.task)
        state = "done" if v.ok else ("not yet" if v.status == checks.TODO else "failing")
        lines.append(f"| {task.id} | {task.title} | {task.points if v.ok else 0}/{task.points} | "
                     f"{checks.SYMBOL[v.status]} {state} |")
    todo = [v for v in verdicts if not v.ok]
    if todo:
        lines += ["", "## Not passing yet", ""]
        for v in todo:
            line = v.line.replace("|", "\\|")
            lines.append(f"- {line}" + (f" (known mistake: `{v.mistake}`)" if v.mistake else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minilm", description="The minilm course's command line.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="each task: done or not yet, and the file and line of the next one")
    p = sub.add_parser("check", help="run tasks' checks and print their verdicts")
    p.add_argument("task_ids", nargs="+", metavar="ID", help="task ids, e.g. 3.1, or 'all'")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON (for graders)")
    p.add_argument("--json-out", type=Path, metavar="FILE", help="also write the verdicts as JSON to FILE")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write a Markdown report (points per task, what to fix) to FILE")
    args = parser.parse_args(argv)
    if args.command == "status":
        return status()
    from minilm import checks

    ids = [t.id for t in tasks.TASKS] if args.task_ids == ["all"] else args.task_ids
    for task_id in ids:
        try:
            tasks.get(task_id)
        except ValueError as e:
            parser.error(str(e))
    verdicts = [checks.run(t) for t in ids]
    as_json = json.dumps([dataclasses.asdict(v) | {"line": v.line} for v in verdicts], ensure_ascii=False, indent=1)
    for path, text in ((args.json_out, as_json + "\n"), (args.markdown, markdown(verdicts) if args.markdown else "")):
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            except OSError as e:
                print(f"check: cannot write {path} ({e.strerror or e})", file=sys.stderr)
                return 2
    if args.json:
        print(as_json)
    else:
        for v in verdicts:
            print(v.line)
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
