"""The grader (minilm/grade.py) against adversarial submissions: each gets exactly the points
its real work earns.

The submissions are built from the reference and the stubs. To keep the suite fast they are
graded in one batch on two notebooks (01_linear and 03_rmsnorm: tasks 1.1 2 pts, 1.2 3 pts,
3.1 2 pts, 3.2 2 pts) with short time limits; one slow test grades the reference on everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minilm import grade, tasks
from solutions import make_stubs

ROOT = tasks.ROOT
NOTEBOOKS = ["01_linear", "03_rmsnorm"]
POINTS = {t: tasks.get(t).points for t in ("1.1", "1.2", "3.1", "3.2")}
CELL_TIMEOUT = 10  # seconds: far above any of these cells' real run time, short enough for a hang


def reference(module: str) -> str:
    return (ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8")


def stub(module: str) -> str:
    return make_stubs.stub_source(reference(module), module)


def keep_only(module: str, keep: set[str]) -> str:
    """The module with the reference's bodies for the tasks in `keep`, stubs for the others."""
    out, drop_end = [], False
    for line in reference(module).splitlines(keepends=True):
        m = make_stubs.BEGIN.match(line)
        if m and m["task"] in keep:
            drop_end = True
            continue
        if drop_end and make_stubs.END.match(line):
            drop_end = False
            continue
        out.append(line)
    return make_stubs.stub_source("".join(out), module)


def replace_region(source: str, task_id: str, body: str, occurrence: int = 0) -> str:
    """`source` with the body of the n-th `# BEGIN SOLUTION task_id` region replaced."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if (m := make_stubs.BEGIN.match(line)) and m["task"] == task_id]
    i = starts[occurrence]
    j = next(k for k in range(i, len(lines)) if make_stubs.END.match(lines[k]))
    indent = make_stubs.BEGIN.match(lines[i])["indent"]
    new = [indent + b + "\n" for b in body.strip("\n").splitlines()]
    return "".join(lines[: i + 1] + new + lines[j:])


def submission(root: Path, name: str, **modules: str) -> Path:
    """root/name/minilm/: every exercise module a stub unless given."""
    pkg = root / name / "minilm"
    pkg.mkdir(parents=True)
    for module in tasks.EXERCISE_MODULES:
        (pkg / f"{module}.py").write_text(modules.get(module, stub(module)), encoding="utf-8")
    return root / name


def expected_line(task_id: str) -> str:
    """The check line the reference's notebook stores for a task."""
    nb = json.loads((ROOT / tasks.get(task_id).notebook).read_text(encoding="utf-8"))
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    return re.search(rf"^✓ Task {re.escape(task_id)} .*$", text, flags=re.M).group(0)


def run_grade(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("MINILM_IMPL", None)
    return subprocess.run([sys.executable, "-m", "minilm.grade", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


# ---------------------------------------------------------------- the adversaries


FUTURE = "from __future__ import annotations\n"


def prepend(source: str, code: str) -> str:
    """`code` at the top of a module, after its `from __future__` import."""
    return source.replace(FUTURE, FUTURE + code, 1)


def edit_course_files(sub: Path) -> None:
    """Edited notebooks (stored outputs = what the stubs print), checks, registry and tests."""
    for stem in NOTEBOOKS:
        nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                if "text" in out:
                    text = "".join(out["text"])
                    for t in tasks.TASKS:
                        text = re.sub(rf"^✓ Task {re.escape(t.id)} .*$", f"… {t.todo_message()}", text, flags=re.M)
                    out["text"] = text
        (sub / "notebooks").mkdir(exist_ok=True)
        (sub / "notebooks" / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    checks = (ROOT / "minilm" / "checks.py").read_text(encoding="utf-8")
    (sub / "minilm" / "checks.py").write_text(
        checks.replace("        return Verdict(task_id, PASS, fn())", "        return Verdict(task_id, PASS, 'ok')"),
        encoding="utf-8")
    registry = (ROOT / "minilm" / "tasks.py").read_text(encoding="utf-8")
    (sub / "minilm" / "tasks.py").write_text(registry.replace('"01_linear", 2)', '"01_linear", 200)'), encoding="utf-8")
    (sub / "tests").mkdir()
    (sub / "tests" / "conftest.py").write_text("def pytest_runtest_call(item):\n    pass\n", encoding="utf-8")
    (sub / "conftest.py").write_text("collect_ignore_glob = ['*']\n", encoding="utf-8")


def build_batch(tmp: Path) -> dict[str, tuple[Path, int]]:
    """name → (submission, the exact points it must get on 01_linear + 03_rmsnorm). Two
    misbehaviours share a submission where they sit in different tasks, to keep the batch short."""
    subs = tmp / "subs"
    linear, rmsnorm = reference("linear"), reference("rmsnorm")
    p11, p12, p31, p32 = POINTS.values()
    batch = {}

    def add(name, points, **modules):
        batch[name] = (submission(subs, name, **modules), points)

    add("stubs_and_edited_course_files", 0)
    edit_course_files(batch["stubs_and_edited_course_files"][0])
    add("reference", p11 + p12 + p31 + p32, linear=linear, rmsnorm=rmsnorm)
    add("partial", p11 + p12 + p31, linear=linear, rmsnorm=keep_only("rmsnorm", {"3.1"}))
    # linear() never returns and rms_norm() allocates 4 GB (over the 2500 MB limit) on every call.
    # Linear.forward and RMSNorm.forward do not use them, so 1.2 and 3.2 still count.
    hang = replace_region(linear, "1.1", "while True:\n    pass")
    hang = replace_region(hang, "1.2", "return torch.nn.functional.linear(x, self.weight)", occurrence=1)
    rms_body = re.search(r"# BEGIN SOLUTION 3\.1\n(.*?)\s*# END SOLUTION", rmsnorm, re.S).group(1)
    hog = replace_region(rmsnorm, "3.1", "_ = torch.ones(2**30)\n" + "\n".join(l[4:] for l in rms_body.splitlines()))
    hog = replace_region(hog, "3.2", "xf = x.float()\nreturn (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) "
                                     "+ self.eps) * self.weight.float()).to(x.dtype)", occurrence=1)
    add("hangs_and_exhausts_memory", p12 + p32, linear=hang, rmsnorm=hog)
    add("crashes", p31 + p32, linear=prepend(linear, "import os\nos._exit(7)\n"), rmsnorm=rmsnorm)
    # sys.exit at import; RMSNorm reaches for the reference (course root put first on sys.path).
    sneaky = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom solutions.rmsnorm import RMSNorm as _R\n" \
             "return _R.forward(self, x)"
    add("exits_and_imports_solutions", p31, linear=prepend(linear, "import sys\nsys.exit('bye')\n"),
        rmsnorm=replace_region(rmsnorm, "3.2", sneaky, occurrence=1))
    # Prints the reference's check lines at import and forges later verdicts; computes nothing.
    lines = "\n".join(expected_line(t) for t in ("1.1", "1.2"))
    forged = lines.splitlines()[1].split(": ", 1)[1]
    prints = prepend(stub("linear"), f"""print({lines!r})
import minilm.checks as _checks
_checks.run = lambda task_id: _checks.Verdict(task_id, "pass", {forged!r})
""")
    add("prints", p31 + p32, linear=prints, rmsnorm=rmsnorm)
    # Deletes the workspace's notebooks and course modules as soon as linear.py is imported; and
    # rms_norm is LayerNorm, a mistake the check names (RMSNorm uses it, so 3.2 fails too).
    deleter = """import pathlib as _p
_ws = _p.Path(__file__).resolve().parents[1]
for _f in [*_ws.glob("notebooks/*"), _ws / "minilm" / "checks.py", _ws / "minilm" / "tasks.py", _ws / "conftest.py"]:
    try:
        _f.unlink()
    except OSError:
        pass
"""
    layer_norm = "xf = x.float() - x.float().mean(-1, keepdim=True)\n" \
                 "return (xf / torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)"
    add("deletes_files_and_makes_a_mistake", p11 + p12, linear=prepend(linear, deleter),
        rmsnorm=replace_region(rmsnorm, "3.1", layer_norm))
    return batch


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grade")
    subs = build_batch(tmp)
    out = tmp / "out"
    r = run_grade(*(str(p) for p, _ in subs.values()), "--notebooks", *NOTEBOOKS, "--jobs", "2", "--out", str(out),
                  "--cell-timeout", str(CELL_TIMEOUT), "--timeout", "300", "--memory-mb", "2500")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return subs, {s["student"]: s for s in data["students"]}, out, r.stdout


@pytest.mark.parametrize("name", ["stubs_and_edited_course_files", "reference", "partial", "hangs_and_exhausts_memory",
                                  "crashes", "exits_and_imports_solutions", "prints", "deletes_files_and_makes_a_mistake"])
def test_each_submission_gets_exactly_what_its_work_earns(batch, name):
    subs, results, out, _ = batch
    got = results[name]
    per_task = {t: r["points"] for t, r in got["tasks"].items()}
    assert got["total"] == subs[name][1], f"{name}: {per_task}\n" + (out / "feedback" / f"{name}.md").read_text()
    assert got["max"] == sum(POINTS.values())


def test_reports(batch):
    subs, results, out, stdout = batch
    rows = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "student,source,1.1,1.2,3.1,3.2,total,max"
    assert len(rows) == 1 + len(subs)
    assert any(r.startswith("partial,") and r.endswith(",2,3,2,0,7,9") for r in rows), rows

    def feedback(name):
        return (out / "feedback" / f"{name}.md").read_text(encoding="utf-8")

    assert "**7 / 9 points**" in feedback("partial") and "Task 3.2 is not implemented yet" in feedback("partial")
    hog = results["hangs_and_exhausts_memory"]["tasks"]
    assert hog["1.1"]["cells"][0]["status"] == "timeout" and "timed out" in hog["1.1"]["verdict"]["message"]
    assert re.search(r"allocate|MemoryError", hog["3.1"]["verdict"]["message"]), hog["3.1"]["verdict"]
    assert results["crashes"]["tasks"]["1.1"]["cells"][0]["status"] == "crashed"
    assert "SystemExit" in feedback("exits_and_imports_solutions")
    assert grade.BLOCKED in results["exits_and_imports_solutions"]["tasks"]["3.2"]["verdict"]["message"]
    assert "recognized mistake: `subtracts_mean`" in feedback("deletes_files_and_makes_a_mistake")
    assert "hidden tests from" in stdout
    # Without hidden tests (a student grading their own checkout), the feedback says so.
    assert "No hidden tests were run" in grade.feedback({**results["partial"], "hidden_tests": False})


def test_submissions_are_found_in_zips_and_folders(tmp_path):
    src = submission(tmp_path, "carol", linear=reference("linear"))
    archive = tmp_path / "carol.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in src.rglob("*.py"):
            z.write(f, "carol-main/" + f.relative_to(src).as_posix())
    sub = grade.resolve(str(archive), tmp_path / "resolved")
    assert sub.name == "carol-main" and not sub.missing
    assert (sub.folder / "linear.py").read_text(encoding="utf-8") == reference("linear")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(grade.GradeError, match=r"no minilm package found in .*empty \(expected minilm/linear.py"):
        grade.resolve(str(tmp_path / "empty"), tmp_path / "resolved2")


def test_check_cells_are_read_from_the_notebooks():
    for path in sorted((ROOT / "notebooks").glob(grade.NOTEBOOK_GLOB)):
        cells = grade.check_cells(json.loads(path.read_text(encoding="utf-8")))
        checked = sorted({t for ids in cells.values() for t in ids})
        assert checked == sorted(t.id for t in tasks.for_notebook(path.name)), path.name
    assert grade.checked_tasks('x = 1\ncheck("6.1", "6.2")\nminilm.checks.check("3.1")') == ["6.1", "6.2", "3.1"]
    assert grade.checked_tasks('_ = minilm_cli(["check", "1.1"])') == []


def test_hidden_tests_pass_on_the_reference_and_cover_every_task():
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "solutions" / "hidden_tests").glob("*.py"))
    assert "import solutions" not in text and "from solutions" not in text
    for t in tasks.TASKS:
        assert f'task("{t.id}")' in text, f"no hidden test for task {t.id}"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "pytest", "solutions/hidden_tests", "--impl", "solutions", "-q",
                        "-p", "no:nbval", "-p", "no:xdist", "-p", "no:cacheprovider"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.mark.slow
def test_the_reference_gets_full_points_on_every_notebook(tmp_path):
    sub = submission(tmp_path, "reference", **{m: reference(m) for m in tasks.EXERCISE_MODULES})
    r = run_grade(str(sub), "--jobs", "2", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "grades.json").read_text(encoding="utf-8"))["students"][0]
    assert result["total"] == result["max"] > 0, (tmp_path / "out" / "feedback" / "reference.md").read_text()
    assert not result["other_cells"], result["other_cells"]
