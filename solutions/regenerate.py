"""Regenerate what is derived from the reference: the stubs, expected.pt and the notebooks' outputs.

    minilm regenerate --task 4.1     # after adding or changing Task 4.1: its check's entries, its notebook
    minilm regenerate                # everything (every check, every notebook: about ten minutes)

One command for the three a new task needs (docs/contributing.md): `minilm stubs`, then
`minilm expected` (for the given tasks' checks), then `minilm notebooks` (the given tasks' notebooks).
"""

from __future__ import annotations

from pathlib import Path

from minilm.course import tasks
from minilm.course.cli import Parser, summary


def main(argv: list[str] | None = None, prog: str = "minilm regenerate") -> int:
    parser = Parser(prog=prog, description=summary(__doc__))
    parser.add_argument("--task", action="append", metavar="ID", default=[],
                        help="only this task's check and notebook (repeatable); the stubs are always all rewritten")
    args = parser.parse_args(argv)
    unknown = [t for t in args.task if t not in tasks.BY_ID]
    if unknown:
        parser.error(f"no task {', '.join(unknown)}; the tasks are {', '.join(tasks.BY_ID)}")
    from solutions import expected, make_stubs, notebooks

    if make_stubs.main([]) != 0:
        return 1
    if expected.main([arg for t in args.task for arg in ("--task", t)]) != 0:
        return 1
    names = sorted({Path(tasks.BY_ID[t].notebook).stem for t in args.task})
    return notebooks.main(names)
