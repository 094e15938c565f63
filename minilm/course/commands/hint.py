"""`minilm hint ID`: a graduated hint for one task, from its check's verdict on your code
(minilm/course/hints.py): rung 1 the contract, rung 2 where your output differs, rung 3 the catalogued
mistake it matches and the idea that fixes it. Never code."""

from __future__ import annotations

import argparse
import sys

from minilm.course import hints, tasks
from minilm.course.cli import Parser
from minilm.course.commands import for_small_checks, task_ids


def parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(
        prog=prog, description="A graduated hint for one task, from its check's verdict on your code: rung 1 what "
                               "the contract says, rung 2 where your output differs, rung 3 the catalogued mistake "
                               "it matches and the idea that fixes it. It never prints code.")
    p.add_argument("task_id", metavar="ID", help="a task id, e.g. 3.1")
    p.add_argument("--rung", type=int, default=1, choices=range(1, hints.RUNGS + 1), metavar="N",
                   help=f"how far up the ladder, 1 to {hints.RUNGS} (default 1); take them in order")
    return p


def main(argv: list[str] | None = None, prog: str = "minilm hint") -> int:
    args = parser(prog).parse_args(argv)
    ids = task_ids([args.task_id], allow_all=False)
    if isinstance(ids, str):
        print(f"{prog}: {ids}", file=sys.stderr)
        return 2
    for_small_checks()
    print(hints.ladder(tasks.get(ids[0]).id).show(args.rung), end="")
    return 0
