"""`minilm test ID…` (a task's tests, with --notebook its notebook too) and `minilm test all` (the
whole suite), through pytest in this checkout."""

from __future__ import annotations

import argparse
import subprocess
import sys

from minilm.course import tasks
from minilm.course.cli import Parser
from minilm.course.commands import task_ids


def parser(prog: str) -> argparse.ArgumentParser:
    p = Parser(prog=prog, description="Run the tests in tests/ marked with the given tasks, with pytest; `all` "
                                      "runs the whole suite (every test and every notebook under nbval) in "
                                      "parallel. Extra arguments after `--` go to pytest (e.g. -- -x -k shapes).")
    p.add_argument("task_ids", nargs="+", metavar="ID", help="task ids, e.g. 3.1, or 'all'")
    p.add_argument("--notebook", action="store_true",
                   help="also run the task's notebook under nbval (slower: it runs every cell up to the check)")
    p.add_argument("--slow", action="store_true",
                   help="also run the task's slow tests (a short training run: tens of seconds); --notebook implies it")
    p.add_argument("--impl", choices=("minilm", "solutions"),
                   help="whose code to test: yours in minilm/ (the default) or the reference (instructors)")
    return p


# `minilm test all`: the whole suite, in parallel (pytest-xdist; one notebook per worker).
SUITE = ("-n", "auto", "--dist", "loadgroup", "--durations=15")


def test(ids: list[str] | None, notebook: bool, impl: str | None, pytest_args: list[str], slow: bool = False) -> int:
    """Run pytest in this checkout: the tests of `ids` (their notebooks too with `notebook`, their
    slow tests, such as a training run, with `slow`), or, with ids None, everything: the unit
    tests, the mistake catalogue and every notebook."""
    if ids is None:
        selection = list(SUITE)
    else:
        paths = ["tests"] + (sorted({tasks.get(i).notebook for i in ids}) if notebook else [])
        if not (slow or notebook):
            paths += ["-m", "not slow"]
        # Without notebooks, nbval is not loaded at all (its import alone takes seconds); nor is the
        # plugin whose five full garbage collections at exit cost seconds with torch loaded.
        selection = ["-q", "-p", "no:unraisableexception", *([] if notebook else ["-p", "no:nbval"]), *paths,
                     *(a for i in ids for a in ("--task", i))]
    cmd = [sys.executable, "-m", "pytest", *(["--impl", impl] if impl else []), *selection, *pytest_args]
    print("$ " + " ".join(["python", *cmd[1:]]), flush=True)
    return subprocess.run(cmd, cwd=tasks.ROOT).returncode


def main(argv: list[str] | None = None, prog: str = "minilm test") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        argv, pytest_args = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = parser(prog).parse_args(argv)
    if args.task_ids == ["all"]:
        return test(None, args.notebook, args.impl, pytest_args)
    ids = task_ids(args.task_ids, allow_all=False)
    if isinstance(ids, str):
        print(f"{prog}: {ids}", file=sys.stderr)
        return 2
    return test(ids, args.notebook, args.impl, pytest_args, args.slow)
