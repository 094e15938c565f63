"""The `minilm` command: one command, with subcommands (also `python -m minilm …`).

    minilm status                  # each task: done or not yet, and where to go next
    minilm check 3.1 3.2           # run tasks' checks and print their verdicts
    minilm test 3.1                # run a task's tests (add --notebook to run its notebook too)
    minilm test all                # the whole suite (--impl solutions: against the reference)
    minilm hint 3.1 --rung 2       # a graduated hint: the contract, where you differ, the known mistake
    minilm train --budget 3m       # train a model (minilm/course/train/)
    minilm check all --markdown checks.md --json-out checks.json   # for CI: a table and the verdicts
    minilm help train              # a command's options (the same as `minilm train --help`)
    minilm --version               # the installed version

Where the `solutions` package is installed (instructors), also: minilm grade, minilm release,
minilm notebooks, minilm site, minilm stubs, minilm export and minilm expected.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from typing import NamedTuple

from minilm.course import tasks
from minilm.course.plugins import imports  # noqa: F401  (first: `minilm notebooks` and the rest start faster)


class Command(NamedTuple):
    module: str  # the module whose main(argv, prog) runs it
    help: str


# Every subcommand, in the order `minilm --help` lists them.
COMMANDS = {
    "status": Command("minilm.course.commands.status",
                      "each task: done or not yet, and the file and line of the next one"),
    "check": Command("minilm.course.commands.check", "run tasks' checks and print their verdicts"),
    "test": Command("minilm.course.commands.test",
                    "run a task's tests (with --notebook, its notebook too), or 'all' of them"),
    "hint": Command("minilm.course.commands.hint",
                    "a graduated hint for a task: the contract, where your output differs, the known mistake"),
    "train": Command("minilm.course.train.run", "train a model on Tiny Shakespeare or your own text"),
}
# Only where the reference is installed (the student edition does not ship `solutions`).
INSTRUCTOR = {
    "grade": Command("solutions.grading.cli", "grade submissions, each in a sandbox"),
    "release": Command("solutions.release", "write the student edition"),
    "notebooks": Command("solutions.notebooks", "regenerate the notebooks' stored outputs from the reference"),
    "site": Command("solutions.site", "build the course as a static website, readable offline"),
    "stubs": Command("solutions.make_stubs", "regenerate minilm/'s stubs from solutions/"),
    "export": Command("solutions.export", "export the grader for Gradescope or GitHub Classroom"),
    "expected": Command("solutions.expected", "regenerate minilm/course/expected.pt, what the checks compare with"),
    "regenerate": Command("solutions.regenerate", "stubs, expected.pt and notebooks' outputs, for given tasks"),
}


class Parser(argparse.ArgumentParser):
    """The ArgumentParser of `minilm` and of every subcommand: a usage error is one line and a
    pointer to --help (`minilm train: error: unrecognized arguments: --foo`), not argparse's
    usage block of up to twenty lines above it. Subparsers (`minilm export gradescope`) inherit it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\ntry '{self.prog} --help'\n")


def summary(doc: str) -> str:
    """A module docstring's first paragraph as one line: a command's --help description, whole
    (its first line alone can stop mid-sentence)."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def version() -> str:
    """The installed package's version (its metadata), or a note where it is not installed."""
    try:
        return importlib.metadata.version("minilm")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: run `pip install -e .` in the course)"


def instructor_commands() -> dict[str, Command]:
    """The instructor's commands, where the reference sits beside this course (an instructor's
    checkout or install); a student edition run beside an instructor's install has none."""
    return INSTRUCTOR if (tasks.ROOT / "solutions" / "__init__.py").is_file() else {}


def build_parser() -> argparse.ArgumentParser:
    """`minilm --help`: the list of subcommands; each parses its own arguments."""
    parser = Parser(prog="minilm", description="The minilm course's command line.",
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="Run `minilm help COMMAND` (or `minilm COMMAND --help`) for a command's options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in {**COMMANDS, **instructor_commands()}.items():
        sub.add_parser(name, help=command.help, add_help=False)
    sub.add_parser("help", help="this list, or a command's options: minilm help COMMAND", add_help=False)
    return parser


# A student's feedback loop: these exit without torch's teardown (docs/contributing.md, "Measured").
_EXIT_AT_ONCE = ("check", "status", "hint")


def main(argv: list[str] | None = None) -> int:
    from_shell = argv is None  # not a test calling main(): then leave the interpreter to its own exit
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        build_parser().parse_args(argv)  # --help prints the list and exits; anything else is an error
        build_parser().print_help()
        return 2
    name, commands = argv[0], {**COMMANDS, **instructor_commands()}
    if name == "help":  # `minilm help`: the list; `minilm help COMMAND …`: `minilm COMMAND … --help`
        if len(argv) == 1:
            build_parser().print_help()
            return 0
        return main([*argv[1:], "--help"])
    if name in INSTRUCTOR and name not in commands:
        print(f"minilm {name}: an instructor's command; it needs the reference and the grader, which the "
              "student edition does not have. To see where you stand, run `minilm status`.", file=sys.stderr)
        return 2
    if name not in commands:
        print(f"minilm: unknown command {name!r}; the commands are: {', '.join(commands)}", file=sys.stderr)
        return 2
    rc = importlib.import_module(commands[name].module).main(argv[1:], prog=f"minilm {name}") or 0
    if from_shell and name in _EXIT_AT_ONCE:  # every file they write is closed when they return
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
