"""`minilm check ID…`: the check cells' verdicts of the given tasks, one line each (and, for CI,
as JSON or a Markdown report)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from minilm.course import tasks
from minilm.course.cli import Parser
from minilm.course.commands import for_small_checks, task_ids


def parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description="Run the check cells of the given tasks and print one verdict "
                                      "line each. Exits 0 when every check passes, 1 otherwise.")
    p.add_argument("task_ids", nargs="+", metavar="ID", help="task ids, e.g. 3.1, or 'all'")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON (for graders)")
    p.add_argument("--json-out", type=Path, metavar="FILE", help="also write the verdicts as JSON to FILE")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write a Markdown report (points per task, what to fix) to FILE")
    return p


def markdown(verdicts) -> str:
    """The verdicts as a Markdown report: points per task, then what to do next."""
    from minilm.course import checks

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


def main(argv: list[str] | None = None, prog: str = "minilm check") -> int:
    args = parser(prog).parse_args(argv)
    ids = task_ids(args.task_ids)
    if isinstance(ids, str):
        print(f"{prog}: {ids}", file=sys.stderr)
        return 2
    from minilm.course import checks

    for_small_checks()
    verdicts = checks.run_many(ids)
    as_json = json.dumps([dataclasses.asdict(v) | {"line": v.line} for v in verdicts], ensure_ascii=False, indent=1)
    for path, text in ((args.json_out, as_json + "\n"), (args.markdown, markdown(verdicts) if args.markdown else "")):
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            except OSError as e:
                print(f"check: cannot write {path} ({e.strerror or e})", file=sys.stderr)
                return 2
    print(as_json if args.json else "\n".join(v.line for v in verdicts))
    return 0 if all(v.ok for v in verdicts) else 1
