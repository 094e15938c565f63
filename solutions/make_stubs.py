"""Generate the student stubs in minilm/ from the reference in solutions/.

    minilm stubs           # rewrite minilm/<module>.py for every exercise module
    minilm stubs --check   # exit 1 if any stub differs from what would be generated

Signatures, shape annotations, docstrings and the provided validation calls are shared.
Each region between `# BEGIN SOLUTION <task id>` and `# END SOLUTION` becomes one line,
`raise NotImplementedError("Task <id> is not implemented yet: write <name> in <file>")`,
where <name> is the function (or Class.method) the region sits in.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Collection
from pathlib import Path

from minilm.course import tasks

SOLUTIONS_DIR = Path(__file__).resolve().parent
BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION (?P<task>\S+)\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?(?:def|class)\s+(?P<name>\w+)")

HEADER = (
    "# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).\n"
    "# Generated from the reference by `minilm stubs`: the signatures,\n"
    "# shape annotations and docstrings are the spec, and the validation calls are provided.\n"
)


def _raise_todo(indent: str, message: str) -> str:
    """The stub's body, within the line length ruff checks: the message split after "yet: " when too long."""
    line = f'{indent}raise NotImplementedError("{message}")\n'
    if len(line) <= 121:
        return line
    head, tail = message.split(": ", 1)
    return f'{indent}raise NotImplementedError("{head}: "\n{indent}{" " * 26}"{tail}")\n'


def _enclosing(lines: list[str], at: int, indent: int) -> str:
    """Qualified name (Class.method) of the def/class enclosing line `at`."""
    names, limit = [], indent
    for line in reversed(lines[:at]):
        m = DEF.match(line)
        if m and len(m["indent"]) < limit:
            names.append(m["name"])
            limit = len(m["indent"])
            if limit == 0:
                break
    return ".".join(reversed(names))


def stub_source(solution: str, module: str, solved: Collection[str] = ()) -> str:
    """The stub text for one solution file's text. The regions of the tasks in `solved` keep
    their bodies (without the BEGIN/END lines): a student's file once they did those tasks, for
    testing the student's commands on finished code (solutions/tests/test_release.py)."""
    lines, out, i = solution.splitlines(keepends=True), [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            if END.match(lines[i]):
                raise ValueError(f"solutions/{module}.py:{i + 1}: END SOLUTION without BEGIN")
            out.append(lines[i])
            i += 1
            continue
        task = tasks.get(m["task"])
        if task.module != module:
            raise ValueError(f"solutions/{module}.py:{i + 1}: task {task.id} belongs in {task.file}")
        j = i + 1
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise ValueError(f"solutions/{module}.py:{j + 1}: nested BEGIN SOLUTION")
            j += 1
        if j == len(lines):
            raise ValueError(f"solutions/{module}.py:{i + 1}: BEGIN SOLUTION {task.id} is never closed")
        if task.id in solved:
            out.extend(lines[i + 1:j])
        else:
            where = _enclosing(lines, i, len(m["indent"]))
            out.append(_raise_todo(m["indent"], task.todo_message(where)))
        i = j + 1
    text = "".join(out)
    # The header goes after the module docstring so the docstring stays the module's __doc__.
    doc = re.match(r'(\s*"""[\s\S]*?"""\n)', text)
    cut = doc.end() if doc else 0
    return text[:cut] + "\n" + HEADER + text[cut:]


def expected_stubs() -> dict[Path, str]:
    """minilm/<module>.py → generated text, for every exercise module in the registry."""
    result = {}
    for module in tasks.EXERCISE_MODULES:
        src = SOLUTIONS_DIR / f"{module}.py"
        if not src.exists():
            raise FileNotFoundError(f"the registry names module {module!r}, but {src} does not exist")
        result[tasks.PACKAGE_DIR / f"{module}.py"] = stub_source(src.read_text(encoding="utf-8"), module)
    return result


def solved_modules(task_ids: Collection[str] | None = None) -> dict[str, str]:
    """minilm/<module>.py's text for every exercise module as a student who did `task_ids`
    (default: every task) would have it: the stubs with those tasks' bodies filled in."""
    solved = {t.id for t in tasks.TASKS} if task_ids is None else {tasks.get(t).id for t in task_ids}
    return {module: stub_source((SOLUTIONS_DIR / f"{module}.py").read_text(encoding="utf-8"), module, solved)
            for module in tasks.EXERCISE_MODULES}


def drifted() -> list[Path]:
    return [p for p, text in expected_stubs().items() if not p.exists() or p.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None, prog: str = "minilm stubs") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stubs that differ; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        bad = drifted()
        for p in bad:
            print(f"out of date: {p.relative_to(tasks.ROOT)} (run minilm stubs)")
        return 1 if bad else 0
    for path, text in expected_stubs().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {path.relative_to(tasks.ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
