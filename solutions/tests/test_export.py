"""Where grades go (solutions/export.py, solutions/grading/gradescope.py, solutions/grading/lms.py):
Gradescope's autograder bundle run as Gradescope runs it, Classroom 50's autograder run in a
student edition, and the LMS gradebook, each with its bad inputs.

Gradescope is simulated: the bundle is unpacked into a temporary root laid out like
/autograder (source/, submission/, results/) and its run_autograder runs there without root,
on tasks 1.1 and 1.2 only (notebook 01_linear) to stay quick. setup.sh, which installs
packages, is not run: its content is checked instead. results.json and result.json are
checked against schemas written here from the platforms' documentation.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minilm.course import tasks
from solutions import export
from solutions import release as rel
from solutions.grading import gradescope, lms
from solutions.grading.results import StudentGrade, TaskGrade
from solutions.tests.grading_helpers import needs_bwrap, reference, replace_region, stub

ROOT = tasks.ROOT
TASK_IDS = ["1.1", "1.2"]
P11, P12 = (tasks.get(t).points for t in TASK_IDS)

# ---------------------------------------------------------------- the platforms' schemas, written from their docs

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format", "visibility",
          "stdout_visibility", "extra_data", "tests", "leaderboard"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
           "visibility", "extra_data"}


def _number(x) -> bool:
    return type(x) in (int, float)


def gradescope_problems(doc) -> list[str]:
    """What is wrong with a Gradescope results.json (autograder specification: top level
    score/execution_time/output/visibility/stdout_visibility/extra_data/tests/leaderboard;
    per test score/max_score/status/name/number/output/tags/visibility/extra_data)."""
    if type(doc) is not dict:
        return ["not an object"]
    p = [f"unknown top-level key {k}" for k in doc if k not in GS_TOP]
    tests = doc.get("tests", [])
    if "score" not in doc and (not tests or any("score" not in t for t in tests if type(t) is dict)):
        p.append("no top-level score and not every test has one")
    if "score" in doc and (not _number(doc["score"]) or doc["score"] < 0):
        p.append("score is not a number ≥ 0")
    if "execution_time" in doc and not _number(doc["execution_time"]):
        p.append("execution_time is not a number")
    for key in ("visibility", "stdout_visibility"):
        if key in doc and doc[key] not in VISIBILITY:
            p.append(f"{key} {doc[key]!r} is not one of {sorted(VISIBILITY)}")
    if "output" in doc and type(doc["output"]) is not str:
        p.append("output is not a string")
    if type(tests) is not list:
        return p + ["tests is not a list"]
    for i, t in enumerate(tests):
        if type(t) is not dict:
            p.append(f"test {i} is not an object")
            continue
        p += [f"test {i}: unknown key {k}" for k in t if k not in GS_TEST]
        if type(t.get("name")) is not str or not t["name"]:
            p.append(f"test {i}: no name")
        for key in ("score", "max_score"):
            if key in t and (not _number(t[key]) or t[key] < 0):
                p.append(f"test {i}: {key} is not a number ≥ 0")
        if _number(t.get("score")) and _number(t.get("max_score")) and t["score"] > t["max_score"]:
            p.append(f"test {i}: score over max_score")
        if "status" in t and t["status"] not in ("passed", "failed"):
            p.append(f"test {i}: status {t['status']!r}")
        if "visibility" in t and t["visibility"] not in VISIBILITY:
            p.append(f"test {i}: visibility {t['visibility']!r}")
        if "output" in t and type(t["output"]) is not str:
            p.append(f"test {i}: output is not a string")
    return p


C50_REQUIRED = {"schema", "classroom", "assignment", "assignment_type", "owner", "submission", "commit", "release",
                "review", "datetime", "score", "max-score", "tests"}
C50_OPTIONAL = {"graded_at", "submitted_by"}
UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ$")


def classroom50_problems(doc) -> list[str]:
    """What is wrong with a Classroom 50 result.json (classroom50/result/v1: a closed object;
    tests need test-name, passed, score and max-score)."""
    if type(doc) is not dict:
        return ["not an object"]
    p = [f"missing {k}" for k in sorted(C50_REQUIRED - set(doc))]
    p += [f"unknown key {k}" for k in doc if k not in C50_REQUIRED | C50_OPTIONAL]
    if doc.get("schema") != "classroom50/result/v1":
        p.append("schema is not classroom50/result/v1")
    for key in ("classroom", "assignment", "owner", "commit", "release", "review"):
        if type(doc.get(key)) is not str or not doc.get(key):
            p.append(f"{key} is not a non-empty string")
    if doc.get("assignment_type") not in ("individual", "group", "team"):
        p.append("assignment_type")
    if not str(doc.get("submission", "")).startswith("submit/"):
        p.append("submission is not a submit/ tag")
    if not UTC.match(str(doc.get("datetime", ""))):
        p.append("datetime is not YYYY-MM-DDTHH:MM:SSZ")
    for key in ("score", "max-score"):
        if type(doc.get(key)) is not int or doc[key] < 0:
            p.append(f"{key} is not an integer ≥ 0")
    if not p and doc["score"] > doc["max-score"]:
        p.append("score over max-score")
    for i, t in enumerate(doc.get("tests") if type(doc.get("tests")) is list else []):
        if (type(t) is not dict or type(t.get("test-name")) is not str or not t["test-name"]
                or type(t.get("passed")) is not bool):
            p.append(f"test {i}: test-name or passed")
            continue
        if any(type(t.get(k)) is not int or t[k] < 0 for k in ("score", "max-score")) or t["score"] > t["max-score"]:
            p.append(f"test {i}: score and max-score")
    return p


def test_the_schema_checks_catch_what_they_should():
    good = {"score": 1, "tests": [{"name": "a", "score": 1, "max_score": 1, "visibility": "visible"}]}
    assert gradescope_problems(good) == []
    for bad in ({**good, "visibility": "soon"}, {**good, "extra": 1}, {"tests": [{"name": "a"}]},
                {"score": 1, "tests": [{"name": "a", "score": 2, "max_score": 1}]}, {"score": "1"}):
        assert gradescope_problems(bad), bad
    c50 = {"schema": "classroom50/result/v1", "classroom": "c", "assignment": "a", "assignment_type": "individual",
           "owner": "o", "submission": "submit/x", "commit": "c", "release": "r", "review": "v",
           "datetime": "2026-01-01T00:00:00Z", "score": 1, "max-score": 2,
           "tests": [{"test-name": "t", "passed": False, "score": 1, "max-score": 2}]}
    assert classroom50_problems(c50) == []
    for bad in ({**c50, "extra": 1}, {**c50, "score": 3}, {**c50, "datetime": "2026-01-01 00:00"},
                {**c50, "tests": [{"test-name": "t", "passed": "yes", "score": 1, "max-score": 1}]}):
        assert classroom50_problems(bad), bad


# ---------------------------------------------------------------- Gradescope: the bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "minilm-autograder.zip"
    assert export.main(["gradescope", str(out)]) == 0
    return out


def unpack(bundle: Path, root: Path) -> Path:
    """Unpack as Gradescope does (to ROOT/source, modes kept), with empty submission/ and results/."""
    source = root / "source"
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (source / info.filename).chmod(mode)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


def run_autograder(root: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    from minilm.course.nbenv import kernel_env

    env = {**os.environ, **kernel_env(), "MINILM_AUTOGRADER_ROOT": str(root), "MINILM_PYTHON": sys.executable,
           "MINILM_GRADE_ARGS": "--tasks " + " ".join(TASK_IDS), "PYTHONWARNINGS": "ignore"}
    for var in ("PYTHONPATH", "MINILM_IMPL"):
        env.pop(var, None)
    return subprocess.run([str(root / "source" / "run_autograder"), *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_setup_sh_installs_cpu_torch_bubblewrap_and_the_course(bundle):
    with zipfile.ZipFile(bundle) as z:
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
    lines = setup.splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    assert any(line.startswith("apt-get install") and " bubblewrap" in line for line in lines), setup
    torch = [line for line in lines if "pip install" in line and "torch" in line]
    assert torch and all('"torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in line for line in torch)
    assert any('pip install -e "$SOURCE/course[dev]"' in line for line in lines), setup
    # CPU torch first
    assert lines.index(torch[0]) < next(i for i, line in enumerate(lines) if "pip install -e" in line)
    assert "corpus.tokenizer()" in setup and "download_tinyshakespeare" in setup  # the sandbox has no network
    for name, text in (("setup.sh", setup), ("run_autograder", run)):
        r = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr)
    for var in ("MINILM_AUTOGRADER_ROOT", "MINILM_AUTOGRADER_SOURCE", "MINILM_PYTHON"):
        assert var in run


def test_bundle_holds_the_course_and_its_hidden_inputs_and_checks_out(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) for i in z.infolist()}
    for name in export.ROOT_FILES:
        assert name in names
    for name in export.EXECUTABLE:
        assert modes[name] & 0o111 and stat.S_ISREG(modes[name]), name
    for path in ("course/solutions/hidden_cases.py", "course/solutions/mistakes/__init__.py",
                 "course/solutions/mistakes/training.py", "course/solutions/linear.py",
                 "course/solutions/grading/gradescope.py", "course/minilm/course/tasks.py",
                 "course/notebooks/01_linear.ipynb",
                 "course/notebooks/sanitize.cfg", "course/pyproject.toml", "course/conftest.py"):
        assert path in names, path
    assert not [n for n in names if "/tests/" in n or "__pycache__" in n or n.endswith(".pyc")]
    manifest = export.verify(bundle)
    assert manifest["tasks"] == {t.id: t.points for t in tasks.TASKS}
    assert set(manifest["files"]) == names - {export.MANIFEST}


def rewrite_zip(src: Path, dest: Path, change) -> Path:
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dest, "w") as out:
        for info in z.infolist():
            data = change(info.filename, z.read(info))
            if data is not None:
                out.writestr(info, data)
    return dest


def test_a_corrupt_bundle_is_one_line(bundle, tmp_path, capsys):
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(bundle.read_bytes()[: len(bundle.read_bytes()) // 2])
    tampered = rewrite_zip(bundle, tmp_path / "tampered.zip",
                           lambda n, d: d + b"\n# changed\n" if n == "course/solutions/hidden_cases.py" else d)
    no_runner = rewrite_zip(bundle, tmp_path / "no_runner.zip", lambda n, d: None if n == "run_autograder" else d)
    not_zip = tmp_path / "notes.zip"
    not_zip.write_text("not a zip")
    expected = {truncated: "is not a readable autograder bundle", not_zip: "is not a readable autograder bundle",
                tampered: "course/solutions/hidden_cases.py differs from MANIFEST.json",
                no_runner: "no run_autograder at its root"}
    for path, why in expected.items():
        assert export.main(["verify", str(path)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err and err.startswith("export: "), (path.name, err)


def test_a_damaged_unpacked_bundle_stops_with_one_line_and_no_results(bundle, tmp_path):
    root = unpack(bundle, tmp_path)
    shutil.copytree(ROOT / "solutions", root / "submission" / "minilm",
                    ignore=shutil.ignore_patterns("tests", "__pycache__"))
    victim = root / "source" / "course" / "solutions" / "hidden_cases.py"
    victim.write_text(victim.read_text(encoding="utf-8").replace("hidden", "hiddn", 1), encoding="utf-8")
    r = run_autograder(root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == ("autograder: the autograder bundle is corrupt: course/solutions/hidden_cases.py "
                                "differs "
                                "from MANIFEST.json; rebuild it with `minilm export gradescope`")
    assert list((root / "results").iterdir()) == []


def test_an_empty_submission_stops_with_one_line_and_no_results(bundle, tmp_path):
    root = unpack(bundle, tmp_path)
    (root / "submission" / "minilm").mkdir()  # folders, no file
    r = run_autograder(root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [f"autograder: the submission folder {root / 'submission'} is empty: "
                                             "nothing to grade"]
    assert list((root / "results").iterdir()) == []


def test_results_that_cannot_be_written_stop_with_one_line(bundle, tmp_path):
    root = unpack(bundle, tmp_path)
    (root / "submission" / "linear.py").write_text(reference("linear"), encoding="utf-8")
    (root / "results").rmdir()
    (root / "results").write_text("a file where the results folder should be")
    r = run_autograder(root)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"autograder: cannot write results to {root / 'results'}"), lines
    assert (root / "results").read_text() == "a file where the results folder should be"


# ---------------------------------------------------------------- Gradescope: results.json from the grader's result


def _task(points, max_points, message, *, mistake=None, hidden=False, rules=(), cells=("passed",), matched=None):
    return {"points": points, "max": max_points, "message": message, "mistake": mistake, "hidden_failed": hidden,
            "matched": points == max_points if matched is None else matched, "rules": list(rules),
            "cells": [{"notebook": "01_linear", "number": 3, "status": s} for s in cells]}


def test_results_json_keeps_hidden_verdicts_until_grades_are_published():
    hidden_msg = ("linear on an input the notebook does not show (float64 inputs): out: expected a tensor of shape "
                  "(5, 3), dtype float64, got a tensor of shape (5, 3), dtype float32")
    grades = {"students": [{"student": "s", "total": 3, "max": 10, "unsandboxed": False,
                            "notes": ["minilm/rope.py is missing: graded as the stub"],
                            "problems": [], "tasks": {
        "1.1": _task(0, 2, hidden_msg, hidden=True),
        "1.2": _task(3, 3, "Linear matches the reference on 1 notebook input(s) and 1 hidden one(s)"),
        "3.1": _task(0, 2, "rms_norm on x (2, 3, 8): your output matches the known mistake `rmsnorm_mean`",
                     mistake="rmsnorm_mean"),
        "6.1": _task(0, 2, "softmax on an input the notebook does not show (rows of -inf): NaN where the expected "
                           "output has none", hidden=True, rules=["Task 6.1: your softmax calls torch.softmax"]),
        "3.2": _task(0, 1, "RMSNorm matches the reference on 2 notebook input(s) and 1 hidden one(s)",
                     cells=("failed",), matched=True)}}]}
    doc = gradescope.results_json(grades, 12.3)
    assert gradescope_problems(doc) == []
    assert doc["score"] == 3 == sum(t["score"] for t in doc["tests"])
    assert doc["stdout_visibility"] == "hidden" and "minilm/rope.py is missing" in doc["output"]
    tests = {t["name"]: t for t in doc["tests"]}
    assert len(tests) == 2 * 5
    for task_id, r in grades["students"][0]["tasks"].items():
        title = f"Task {task_id}: {tasks.get(task_id).title}"
        seen, graded = tests[f"{title}: notebook inputs, rules, check cells"], tests[f"{title}: graded"]
        assert seen["visibility"] == "visible" and seen["max_score"] == 0 == seen["score"]
        assert graded["visibility"] == "after_published" and graded["max_score"] == r["max"]
        assert graded["score"] == r["points"] and graded["status"] == ("passed" if r["points"] == r["max"]
                                                                       else "failed")
        # nothing hidden before publishing
        assert "does not show" not in seen["output"] and "hidden" not in seen["output"], seen
    assert tests["Task 1.1: linear: y = x Wᵀ: notebook inputs, rules, check cells"]["status"] == "passed"
    assert tests["Task 1.1: linear: y = x Wᵀ: graded"]["output"] == f"0/2 points\n{hidden_msg}"
    mistake = tests["Task 3.1: rms_norm: notebook inputs, rules, check cells"]
    assert mistake["status"] == "failed" and "recognized mistake: `rmsnorm_mean`" in mistake["output"]
    rule = tests["Task 6.1: stable softmax: notebook inputs, rules, check cells"]
    assert rule["status"] == "failed" and rule["output"].splitlines() == [
        "from scratch: Task 6.1: your softmax calls torch.softmax", "the notebook's inputs: passed"]
    cell = tests["Task 3.2: RMSNorm module: notebook inputs, rules, check cells"]
    assert cell["status"] == "failed"
    assert "`notebooks/01_linear.ipynb`, check cell (code cell 3): failed" in cell["output"]


def three_dims_linear() -> str:
    """Right on every input the check shows (at most 3 dims), wrong on the hidden 4-D one, whose extra
    leading dims it flattens: written for (batch, seq, d_in) only."""
    return replace_region(reference("linear"), "1.1", "return (x.flatten(1, -2) if x.ndim > 3 else x) @ weight.T")


@pytest.fixture(scope="module")
def gradescope_runs(bundle, tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Three submissions through run_autograder, one at a time, each in a root of its own."""
    subs = {
        "reference": {f"minilm/{m}.py": reference(m) for m in tasks.EXERCISE_MODULES},
        "stubs": {f"minilm/{m}.py": stub(m) for m in tasks.EXERCISE_MODULES},
        "partial": {"linear.py": three_dims_linear()},  # uploaded loose, the other modules missing
    }
    runs = {}
    for name, files in subs.items():
        root = unpack(bundle, tmp_path_factory.mktemp(f"gs-{name}"))
        for rel_path, text in files.items():
            (root / "submission" / rel_path).parent.mkdir(parents=True, exist_ok=True)
            (root / "submission" / rel_path).write_text(text, encoding="utf-8")
        runs[name] = (run_autograder(root), root)
    return runs


def results_of(runs, name) -> dict:
    r, root = runs[name]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert gradescope_problems(doc) == [], doc
    assert [p.name for p in (root / "results").iterdir()] == ["results.json"]  # no temporary file left
    return doc


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("name, score", [("reference", P11 + P12), ("stubs", 0), ("partial", P12)])
def test_run_autograder_scores_each_submission_exactly(gradescope_runs, name, score):
    doc = results_of(gradescope_runs, name)
    assert doc["score"] == score
    graded = [t for t in doc["tests"] if t["visibility"] == "after_published"]
    assert [t["max_score"] for t in graded] == [P11, P12] and sum(t["score"] for t in graded) == score
    assert len(doc["tests"]) == 4 and all(t["visibility"] == "visible" for t in doc["tests"] if t not in graded)
    assert "sandbox: bwrap" in gradescope_runs[name][0].stdout


@needs_bwrap
@pytest.mark.slow
def test_run_autograder_feedback_students_can_act_on(gradescope_runs):
    stubs = {t["name"]: t for t in results_of(gradescope_runs, "stubs")["tests"]}
    seen = stubs["Task 1.1: linear: y = x Wᵀ: notebook inputs, rules, check cells"]
    assert seen["status"] == "failed" and tasks.get("1.1").todo_message() in seen["output"]
    partial = results_of(gradescope_runs, "partial")
    tests = {t["name"]: t for t in partial["tests"]}
    seen = tests["Task 1.1: linear: y = x Wᵀ: notebook inputs, rules, check cells"]
    assert seen["status"] == "passed" and seen["output"] == gradescope.VISIBLE_PASSED, seen["output"]
    graded = tests["Task 1.1: linear: y = x Wᵀ: graded"]
    assert graded["status"] == "failed" and graded["score"] == 0
    assert graded["output"].startswith("0/2 points\nlinear on an input the notebook does not show (x (2, 1, 3, ")
    shapes = r"expected a tensor of shape \(2, 1, 3, \d+\), dtype float32, got a tensor of shape \(2, 3, \d+\)"
    assert re.search(shapes, graded["output"])
    assert tests["Task 1.2: Linear module and its initialization: graded"]["status"] == "passed"
    assert "minilm/rmsnorm.py is missing: graded as the stub" in partial["output"]
    # the grader's words only: no test source, no values
    for doc in (partial, results_of(gradescope_runs, "reference")):
        text = json.dumps(doc, ensure_ascii=False)
        assert "def " not in text and "tensor([" not in text and "hidden_cases" not in text


# ---------------------------------------------------------------- the LMS gradebook


def write_roster(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


HEADER = ["submission", "lms_id", "name", "section", "sis_id"]


@pytest.mark.parametrize("rows, why", [
    ([HEADER, ["alice", "1", "A", "", ""], ["bob", "1", "B", "", ""]], "lms_id '1' is already on line 2"),
    ([HEADER, ["alice", "1", "A", "", ""], ["alice", "2", "A2", "", ""]], "submission 'alice' is already on line 2"),
    ([["submission", "name"], ["alice", "A"]], "no lms_id column in its header"),
    ([HEADER, ["alice", "", "A", "", ""]], ":2: lms_id is empty"),
    ([HEADER], "no students, only a header"),
])
def test_a_bad_roster_is_one_line(tmp_path, rows, why):
    with pytest.raises(lms.RosterError) as e:
        lms.read_roster(write_roster(tmp_path / "roster.csv", rows))
    assert why in str(e.value) and len(str(e.value).splitlines()) == 1 and str(e.value).startswith("--roster ")


def test_an_unreadable_roster_is_one_line(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("submission,lms_id\nzoë,1\n".encode("latin-1"))
    for path, why in ((tmp_path / "latin1.csv", "not UTF-8"), (tmp_path / "absent.csv", "cannot read it")):
        with pytest.raises(lms.RosterError, match=why):
            lms.read_roster(path)


def _result(name, points):
    return StudentGrade(name, "here", sum(points.values()), 5, {t: TaskGrade(p, 3, "") for t, p in points.items()})


def test_gradebook_columns_for_canvas_and_moodle(tmp_path):
    roster = lms.read_roster(write_roster(tmp_path / "r.csv", [
        HEADER, ["alice", "101", "Alice A", "Sec 1", "s101"], ["carol", "103", "Carol C", "Sec 2", ""]]))
    results = [_result("alice", {"1.1": 2, "1.2": 0})]
    canvas, absent = lms.rows("canvas", TASK_IDS, results, roster)
    assert canvas == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "minilm Task 1.1", "minilm Task 1.2",
                       "minilm total"],
                      ["Alice A", "101", "s101", "", "Sec 1", 2, 0, 2], ["Carol C", "103", "", "", "Sec 2", 0, 0, 0]]
    assert absent == ["carol"]
    moodle, _ = lms.rows("moodle", TASK_IDS, results, roster)
    assert moodle[0] == ["ID number", "minilm Task 1.1", "minilm Task 1.2", "minilm total"]
    assert moodle[1:] == [["101", 2, 0, 2], ["103", 0, 0, 0]]
    emails = lms.read_roster(write_roster(tmp_path / "e.csv", [["submission", "lms_id"], ["alice", "a@uni.edu"]]))
    assert lms.rows("moodle", TASK_IDS, results, emails)[0][0][0] == "Email address"
    with pytest.raises(lms.RosterError, match="no entry for submission.s. bob"):
        lms.check_submissions(roster, ["alice", "bob"], "r.csv")


def run_grade(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    from minilm.course.nbenv import kernel_env

    env = {**os.environ, **kernel_env(), "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(ROOT)}
    env.pop("MINILM_IMPL", None)
    return subprocess.run([sys.executable, "-m", "solutions.grading", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def reference_submission(root: Path, name: str) -> Path:
    for m in tasks.EXERCISE_MODULES:
        (root / name / "minilm").mkdir(parents=True, exist_ok=True)
        (root / name / "minilm" / f"{m}.py").write_text(reference(m), encoding="utf-8")
    return root / name


def test_grade_refuses_a_bad_roster_before_grading_and_writes_nothing(tmp_path):
    sub = reference_submission(tmp_path, "alice")
    dup = write_roster(tmp_path / "dup.csv", [HEADER, ["alice", "7", "", "", ""], ["bob", "7", "", "", ""]])
    other = write_roster(tmp_path / "other.csv", [HEADER, ["bob", "8", "", "", ""]])
    for roster, why in ((dup, "lms_id '7' is already on line 2"), (other, "no entry for submission(s) alice")):
        out = tmp_path / f"grades-{roster.stem}"
        r = run_grade(str(sub), "--tasks", "1.1", "--out", str(out), "--lms", "canvas", "--roster", str(roster))
        assert r.returncode == 2, r.stdout + r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and why in r.stderr, r.stderr
        assert "points" not in r.stdout and not out.exists()


@needs_bwrap
@pytest.mark.slow
def test_grade_writes_the_gradebook_with_absent_students_at_zero(tmp_path):
    sub = reference_submission(tmp_path, "alice")
    roster = write_roster(tmp_path / "roster.csv", [HEADER, ["alice", "101", "Alice A", "1", "s101"],
                                                    ["carol", "103", "Carol C", "2", "s103"]])
    out = tmp_path / "grades"
    r = run_grade(str(sub), "--tasks", "1.1", "--out", str(out), "--lms", "canvas", "--roster", str(roster), "--jobs",
                  "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "grade: no submission, 0 points: carol" in r.stdout.splitlines()
    rows = list(csv.reader((out / "gradebook-canvas.csv").read_text(encoding="utf-8").splitlines()))
    assert rows == [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "minilm Task 1.1", "minilm total"],
                    ["Alice A", "101", "s101", "", "1", str(P11), str(P11)],
                    ["Carol C", "103", "s103", "", "2", "0", "0"]]
    assert sorted(p.name for p in out.iterdir()) == ["feedback", "gradebook-canvas.csv", "grades.csv", "grades.json"]


# ---------------------------------------------------------------- Classroom 50


@pytest.fixture(scope="module")
def classroom50(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("c50") / "autograders" / "minilm"
    assert export.main(["classroom50", str(out)]) == 0
    return out


def test_classroom50_bundle_is_readable_by_students_so_holds_nothing_secret(classroom50, tmp_path):
    assert [p.name for p in classroom50.iterdir()] == ["autograder.py"]
    assert rel.leaks(classroom50, probe=False) == []  # one script: no provided modules to probe
    text = (classroom50 / "autograder.py").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+solutions", text, flags=re.M) and "hidden_cases" not in text
    for task in tasks.TASKS:
        assert json.dumps([task.title, task.points], ensure_ascii=False) in text
    assert export.main(["classroom50", str(classroom50)]) == 1  # not empty: refuses to write over it


def run_classroom50(classroom50: Path, repo: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict, str]:
    from minilm.course.nbenv import kernel_env

    output = tmp_path / "github-output"
    output.write_text("")
    env = {**os.environ, **kernel_env(), "MINILM_TASKS": " ".join(TASK_IDS), "MINILM_SKIP_INSTALL": "1",
           "GITHUB_OUTPUT": str(output), "CLASSROOM": "ml-101", "ASSIGNMENT": "minilm", "OWNER": "alice",
           "SUBMISSION_TAG": "submit/2026-01-01T00-00-00Z-abc1234", "COMMIT_URL": "https://example.org/c/abc1234"}
    for var in ("PYTHONPATH", "MINILM_IMPL"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, str(classroom50 / "autograder.py")], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=600)
    doc = json.loads((repo / "result.json").read_text(encoding="utf-8")) if (repo / "result.json").exists() else {}
    return r, doc, output.read_text()


def test_classroom50_scores_the_visible_checks_in_a_student_edition(classroom50, tmp_path):
    repo = tmp_path / "student-repo"
    rel.write_release(repo, probe=False)  # the probe has its own test (test_release.py)
    r, doc, output = run_classroom50(classroom50, repo, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert classroom50_problems(doc) == [] and (doc["score"], doc["max-score"]) == (0, P11 + P12)
    assert [t["test-name"] for t in doc["tests"]] == [f"Task {t}: {tasks.get(t).title}" for t in TASK_IDS]
    assert doc["tests"][0]["output"] == f"… {tasks.get('1.1').todo_message()}"
    assert output.splitlines() == ["status=failure", f"summary=minilm visible checks: 0/{P11 + P12} points"]
    (repo / "minilm" / "linear.py").write_text(three_dims_linear(), encoding="utf-8")  # the visible checks cannot tell
    r, doc, output = run_classroom50(classroom50, repo, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert classroom50_problems(doc) == [] and doc["score"] == P11 + P12 and all(t["passed"] for t in doc["tests"])
    assert (doc["owner"], doc["classroom"], doc["submission"]) == ("alice", "ml-101",
                                                                   "submit/2026-01-01T00-00-00Z-abc1234")
    assert "status=success" in output.splitlines()
    body = (repo / "release-body.md").read_text(encoding="utf-8")
    assert f"### minilm visible checks: {P11 + P12}/{P11 + P12}" in body
    assert "| Task 1.1: linear: y = x Wᵀ | 2/2 | PASS |" in body
