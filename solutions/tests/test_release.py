"""The student edition (solutions/release.py): no solution text, no hidden tests, a Classroom
workflow that matches the registry, and a test suite that runs in stub mode as students see it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from minilm import tasks
from solutions import release as rel

COMMAND_GRADER = "education/autograding-command-grader@v1"
REPORTER = "education/autograding-grader-action@v1"


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "minilm-course"
    rel.write_release(out)
    return out


def student_env(release: Path) -> dict[str, str]:
    """A student's shell: the release's minilm first on the path, their own code selected."""
    from minilm.nbenv import kernel_env

    # kernel_env: on offline course machines, the local tiktoken and data copies (a student downloads them).
    env = {**os.environ, **kernel_env(), "PYTHONPATH": str(release), "PYTHONWARNINGS": "ignore", "COLUMNS": "300"}
    env.pop("MINILM_IMPL", None)
    return env


def test_release_has_the_student_files_and_nothing_secret(release):
    for name in ("minilm/__init__.py", "minilm/tasks.py", "minilm/grade.py", "notebooks/sanitize.cfg", "tests",
                 "conftest.py", "README.md", "environment.yml", "pyproject.toml", ".gitignore", rel.WORKFLOW):
        assert (release / name).exists(), name
    for module in tasks.EXERCISE_MODULES:
        assert 'raise NotImplementedError("Task ' in (release / "minilm" / f"{module}.py").read_text(encoding="utf-8")
    assert not (release / "solutions").exists()
    assert not [p for p in release.rglob("*") if "hidden" in p.name or p.name == "__pycache__"]
    assert rel.leaks(release) == []
    # The hidden tests and every solution line really are absent (not just filtered out as public).
    everything = "\n".join("\n".join(rel.text_lines(p)) for p in release.rglob("*") if p.is_file())
    for name in re.findall(r"^def (_\w+_cases)", rel.HIDDEN.read_text(encoding="utf-8"), flags=re.M):
        assert f"def {name}(" not in everything, f"the hidden inputs' {name} is in the release"
    assert "/grades/" in (release / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_leak_check_names_the_file_and_the_line(release, tmp_path):
    secret, where = next(iter(rel.solution_lines().items()))
    victim = release / "notebooks" / "leak.py"
    hidden = rel.HIDDEN
    try:
        victim.write_text(f"# notes\n    {secret}\n" + hidden.read_text(encoding="utf-8"), encoding="utf-8")
        problems = rel.leaks(release)
    finally:
        victim.unlink()
    assert any(p.startswith("notebooks/leak.py:2: leaks ") and secret[:40] in p for p in problems), problems
    assert any("leaks solutions/probe_cases.py" in p for p in problems), problems
    assert rel.main([str(release)]) == 1  # not empty: refuses to write over it


def test_pyproject_no_longer_lists_solutions(release):
    text = (release / "pyproject.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert "solutions" not in text
    assert data["tool"]["setuptools"]["packages"]["find"]["include"] == ["minilm*"]
    assert data["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests", "notebooks"]


def load_workflow(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    data = json.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    try:
        import yaml
    except ImportError:  # JSON is YAML: what json read is what GitHub reads
        return data
    assert yaml.safe_load(text) == data
    return data


def test_classroom_workflow_grades_every_task_with_its_points(release):
    wf = load_workflow(release / rel.WORKFLOW)
    steps = wf["jobs"]["run-autograding-tests"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert uses[0].startswith("actions/checkout@") and uses[1].startswith("actions/setup-python@")
    assert steps[1]["with"]["python-version"] == "3.11"
    assert "download.pytorch.org/whl/cpu" in steps[2]["run"] and '-e ".[dev]"' in steps[2]["run"]
    graded = [s for s in steps if s.get("uses") == COMMAND_GRADER]
    assert [s["with"]["max-score"] for s in graded] == [t.points for t in tasks.TASKS]
    for step, task in zip(graded, tasks.TASKS):
        w = step["with"]
        assert w["test-name"].startswith(f"Task {task.id}:") and w["timeout"] > 0
        assert w["command"] == f"python -m pytest --task {task.id} tests notebooks -q -p no:cacheprovider"
    reporter = steps[-1]
    assert reporter["uses"] == REPORTER
    ids = [s["id"] for s in graded]
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}


@pytest.mark.slow  # the student edition's suite, in a subprocess
def test_release_tests_fail_in_stub_mode_with_the_todo_lines(release):
    # Not the browser test or the slow ones: the outer suite runs them (the browser test in stub
    # mode too) on the same files, and here the browser test would start Chromium and JupyterLab
    # (and on CI install them) a second time.
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "-rfE", "--tb=line", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-m", "not browser and not slow", "-o", "console_output_style=classic"],
        cwd=release, env=student_env(release), capture_output=True, text=True, timeout=900)
    out = r.stdout
    assert r.returncode == 1, out[-3000:]  # tests failed; 2-4 would be an interrupted or broken run
    assert "error" not in out.splitlines()[-1], "setup or collection errors:\n" + "\n".join(
        line for line in out.splitlines() if line.startswith("ERROR"))
    failures = re.findall(r"^FAILED (\S+) - (.*)$", out, flags=re.M)
    assert failures, out[-3000:]
    wrong = [(test, msg) for test, msg in failures if not re.match(r"Task \S+ is not implemented yet: write ", msg)]
    assert not wrong, "failures that are not a stub's message:\n" + "\n".join(f"{t}: {m}" for t, m in wrong)


def test_the_grader_needs_the_reference_and_says_so(release, tmp_path):
    # Grades are decided against the reference, which the student edition does not have.
    r = subprocess.run([sys.executable, "-m", "minilm.grade", ".", "--tasks", "3.1", "--out", str(tmp_path / "grades")],
                       cwd=release, env=student_env(release), capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "needs the reference implementation" in r.stderr and "python -m minilm status" in r.stderr
    assert not (tmp_path / "grades").exists()
