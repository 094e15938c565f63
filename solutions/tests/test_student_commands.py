"""The README's student commands on a student's finished work: the student edition
(solutions/release.py) with the reference's bodies in place of the stubs. A module of its own,
apart from test_release.py, so that pytest-xdist can run the two side by side."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minilm.course import tasks
from minilm.course.cells import check_cells, checked_tasks
from solutions import make_stubs
from solutions import release as rel
from solutions.grading import notebooks
from solutions.tests.test_release import student_env


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """The student edition as a student has it after the last task: every stub replaced by the
    reference's body (make_stubs.solved_modules), nothing else changed."""
    out = tmp_path_factory.mktemp("finished") / "minilm-course"
    rel.write_release(out, probe=False)  # the probe has its own test (test_release.py)
    for module, text in make_stubs.solved_modules().items():
        (out / "minilm" / f"{module}.py").write_text(text, encoding="utf-8")
    return out


def run_in(repo: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=repo, env=student_env(repo), capture_output=True, text=True,
                          timeout=timeout)


def _pytest(*args: str) -> tuple[str, ...]:
    return ("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--color=no", "-o",
            "console_output_style=classic", *args)


@pytest.mark.slow  # the student's commands, each in a subprocess
def test_student_commands_pass_on_finished_code(finished):
    """The README's student commands in the student edition with every task done (`pytest
    --task 3.1` is the next test's, with 3.2 still to do, which it must pass all the same). Of
    the student's test command (`python -m pytest`: tests/ and every notebook, minutes on two
    cores) the files that read the student's files rather than only run their functions:
    tests/test_course.py (each task's check, the from-scratch rule included; status's file:line). The
    rest runs these very bodies in the outer suite already (--impl solutions); it failed here only where
    a test read the stubs, as test_course did."""
    status = run_in(finished, "-m", "minilm", "status")
    n, points = len(tasks.TASKS), sum(t.points for t in tasks.TASKS)
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"{n}/{n} tasks done, {points}/{points} points" in status.stdout and "Next:" not in status.stdout
    check = run_in(finished, "-m", "minilm", "check", "3.1", "3.2")
    assert check.returncode == 0, check.stdout + check.stderr
    assert [line[:10] for line in check.stdout.splitlines()] == ["✓ Task 3.1", "✓ Task 3.2"], check.stdout
    r = run_in(finished, *_pytest("-q", "-rfEs", "tests/test_course.py", "-m",
                                  "not browser and not slow"), timeout=900)
    assert r.returncode == 0, r.stdout[-4000:]
    last = r.stdout.splitlines()[-1]
    assert " passed" in last and "skipped" not in last and "failed" not in last, r.stdout[-2000:]
    # `minilm test 3.1`: the task's tests (not its notebook), as the README's student commands show.
    r = run_in(finished, "-m", "minilm", "test", "3.1", timeout=900)
    assert r.returncode == 0, r.stdout[-4000:]
    last = r.stdout.splitlines()[-1]
    assert " passed" in last and "failed" not in last and ".ipynb" not in r.stdout, r.stdout[-2000:]


@pytest.mark.slow  # notebook 03 twice, in subprocesses
def test_task_run_judges_its_own_cells_and_names_them(finished, tmp_path):
    """Every task done but 3.2: the README's `pytest --task 3.1` passes (3.2's tests are not
    selected, nor its cells, which come after 3.1's last one); `--task 3.2` fails on 3.2's
    cells, named by their place in the notebook and their task, runs 3.1's cells without
    judging them, and the grader's JUnit reading maps the failure to 3.2's check cell."""
    repo = tmp_path / "repo"
    shutil.copytree(finished, repo)
    solved = make_stubs.solved_modules([t.id for t in tasks.TASKS if t.id != "3.2"])
    (repo / "minilm" / "rmsnorm.py").write_text(solved["rmsnorm"], encoding="utf-8")
    nb_path = repo / "notebooks" / "03_rmsnorm.ipynb"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    position = {t: 1 + next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                            and checked_tasks("".join(c["source"])) == [t]) for t in ("3.1", "3.2")}

    ok = run_in(repo, *_pytest("-v", "--task", "3.1"), timeout=900)
    assert ok.returncode == 0, ok.stdout[-4000:]
    assert f"notebooks/03_rmsnorm.ipynb::cell {position['3.1']} (check of Task 3.1) PASSED" in ok.stdout, ok.stdout
    assert "tests/test_rmsnorm.py::test_rms_norm_" in ok.stdout and "Task 3.2" not in ok.stdout, ok.stdout

    junit = tmp_path / "nbval.xml"
    bad = run_in(repo, *_pytest("-q", "-rfEs", "--task", "3.2", "notebooks/03_rmsnorm.ipynb", f"--junitxml={junit}"),
                 timeout=900)
    out = bad.stdout
    assert bad.returncode == 1, out[-4000:]
    where = f"notebooks/03_rmsnorm.ipynb, cell {position['3.2']} (check of Task 3.2)"
    assert f"FAILED notebooks/03_rmsnorm.ipynb::cell {position['3.2']} (check of Task 3.2) - " in out, out[-4000:]
    assert f"\n{where}: Cell outputs differ\n(cell {position['3.2']} of the notebook's {len(nb['cells'])}," in out
    assert f"cell {position['3.1']} (check of Task 3.1): another task's cell, not judged under --task 3.2" in out
    assert not re.search(r"\bCell \d+\b", out), "nbval's own cell numbers (code cells from 0) are still shown"
    cells = notebooks.parse_junit(junit)
    (check_32,) = [i for i, ids in check_cells(nb).items() if ids == ["3.2"]]
    assert cells[("03_rmsnorm", check_32)].status == "differs", cells
