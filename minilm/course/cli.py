"""The `minilm` command: one command, with subcommands (also `python -m minilm …`).

    minilm status                  # each task: done or not yet, and where to go next
    minilm check 3.1 3.2           # run tasks' checks and print their verdicts
    minilm test 3.1                # run a task's tests (add --notebook to run its notebook too)
    minilm test all                # the whole suite (--impl solutions: against the reference)
    minilm train --budget 3m       # train a model (minilm/course/train.py)
    minilm check all --markdown checks.md --json-out checks.json   # for CI: a table and the verdicts

Where the `solutions` package is installed (instructors), also: minilm grade, minilm release,
minilm notebooks, minilm stubs, minilm export and minilm expected.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import minilm
from minilm.course import tasks


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


def _for_small_checks() -> None:
    """Set torch up for the checks' small tensors: one thread (a pool's hand-offs cost more than
    such ops, most of all on a busy machine: status takes half the time), and no torch._dynamo
    import. torch.optim.Optimizer's add_param_group, state_dict, load_state_dict and zero_grad
    import it on their first call (over a second) only to mark themselves as never compiled; the
    check commands compile nothing, so mark them so here (a torch without this private hook is
    left alone and is merely slower)."""
    import torch

    torch.set_num_threads(1)

    for name in ("add_param_group", "state_dict", "load_state_dict", "zero_grad"):
        fn = getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
        if fn is not None and not hasattr(fn, "__dynamo_disable"):
            setattr(fn, "__dynamo_disable", fn)


def status(out=sys.stdout) -> int:
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


# Subcommands whose own module parses the rest of the command line: name -> (module, help).
DELEGATED = {
    "train": ("minilm.course.train", "train a model on Tiny Shakespeare or your own text"),
}
# Only where the reference is installed (the student edition does not ship `solutions`).
INSTRUCTOR = {
    "grade": ("solutions.grading.cli", "grade submissions, each in a sandbox"),
    "release": ("solutions.release", "write the student edition"),
    "notebooks": ("solutions.notebooks", "regenerate the notebooks' stored outputs from the reference"),
    "stubs": ("solutions.make_stubs", "regenerate minilm/'s stubs from solutions/"),
    "export": ("solutions.export", "export the grader for Gradescope or GitHub Classroom"),
    "expected": ("solutions.expected", "regenerate minilm/course/expected.pt, what the checks compare with"),
}


def instructor_commands() -> dict[str, tuple[str, str]]:
    """The instructor's commands, where the reference sits beside this course (an instructor's
    checkout or install); a student edition run beside an instructor's install has none."""
    return INSTRUCTOR if (tasks.ROOT / "solutions" / "__init__.py").is_file() else {}


def _task_ids(ids: list[str], allow_all: bool = True) -> list[str] | str:
    """The ids, or a one-line error naming the valid ones."""
    if allow_all and ids == ["all"]:
        return [t.id for t in tasks.TASKS]
    for task_id in ids:
        try:
            tasks.get(task_id)
        except ValueError as e:
            return str(e)
    return ids


# `minilm test all`: the whole suite, in parallel (pytest-xdist; one notebook per worker).
SUITE = ("-n", "auto", "--dist", "loadscope", "--durations=15")


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
        selection = ["-q", "-p", "no:unraisableexception", *([] if notebook else ["-p", "no:nbval"]), *paths, *(a for i in ids for a in ("--task", i))]
    cmd = [sys.executable, "-m", "pytest", *(["--impl", impl] if impl else []), *selection, *pytest_args]
    print("$ " + " ".join(["python", *cmd[1:]]), flush=True)
    return subprocess.run(cmd, cwd=tasks.ROOT).returncode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minilm", description="The minilm course's command line.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Run `minilm COMMAND --help` for a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("status", help="each task: done or not yet, and the file and line of the next one",
                   description="Run every task's check once and print a table: done, not yet or failing, "
                               "then the file and line of the next task to write.")
    p = sub.add_parser("check", help="run tasks' checks and print their verdicts",
                       description="Run the check cells of the given tasks and print one verdict line each. "
                                   "Exits 0 when every check passes, 1 otherwise.")
    p.add_argument("task_ids", nargs="+", metavar="ID", help="task ids, e.g. 3.1, or 'all'")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON (for graders)")
    p.add_argument("--json-out", type=Path, metavar="FILE", help="also write the verdicts as JSON to FILE")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write a Markdown report (points per task, what to fix) to FILE")
    p = sub.add_parser("test", help="run a task's tests (with --notebook, its notebook too), or 'all' of them",
                       description="Run the tests in tests/ marked with the given tasks, with pytest; `all` runs "
                                   "the whole suite (every test and every notebook under nbval) in parallel. "
                                   "Extra arguments after `--` go to pytest (e.g. -- -x -k shapes).")
    p.add_argument("task_ids", nargs="+", metavar="ID", help="task ids, e.g. 3.1, or 'all'")
    p.add_argument("--notebook", action="store_true",
                   help="also run the task's notebook under nbval (slower: it runs every cell up to the check)")
    p.add_argument("--slow", action="store_true",
                   help="also run the task's slow tests (a short training run: tens of seconds); --notebook implies it")
    p.add_argument("--impl", choices=("minilm", "solutions"),
                   help="whose code to test: yours in minilm/ (the default) or the reference (instructors)")
    for name, (_, help_) in {**DELEGATED, **instructor_commands()}.items():
        sub.add_parser(name, help=help_, add_help=False)  # listed here, parsed by its own module
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    delegated = {**DELEGATED, **instructor_commands()}
    if argv and not argv[0].startswith("-"):
        known = ["status", "check", "test", *delegated]
        if argv[0] in INSTRUCTOR and argv[0] not in delegated:
            print(f"minilm {argv[0]}: an instructor's command; it needs the reference and the grader, which the "
                  "student edition does not have. To see where you stand, run `minilm status`.", file=sys.stderr)
            return 2
        if argv[0] not in known:
            print(f"minilm: unknown command {argv[0]!r}; the commands are: {', '.join(known)}", file=sys.stderr)
            return 2
        if argv[0] in delegated:
            module, _ = delegated[argv[0]]
            return importlib.import_module(module).main(argv[1:], prog=f"minilm {argv[0]}") or 0
    pytest_args: list[str] = []
    if "--" in argv:
        argv, pytest_args = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "status":
        _for_small_checks()
        return status()
    if args.command == "test" and args.task_ids == ["all"]:
        return test(None, args.notebook, args.impl, pytest_args)
    ids = _task_ids(args.task_ids, allow_all=args.command == "check")
    if isinstance(ids, str):
        print(f"minilm {args.command}: {ids}", file=sys.stderr)
        return 2
    if args.command == "test":
        return test(ids, args.notebook, args.impl, pytest_args, args.slow)
    if pytest_args:
        parser.error("arguments after -- are only for `minilm test`")
    from minilm.course import checks

    _for_small_checks()
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
    if args.json:
        print(as_json)
    else:
        for v in verdicts:
            print(v.line)
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
