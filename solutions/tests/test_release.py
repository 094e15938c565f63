"""The student edition (solutions/release.py): no solution text, no hidden tests, a GitHub
Actions workflow that runs the registry's visible checks (and runs here, step by step), and a
test suite that runs in stub mode as students see it."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from minilm.course import tasks
from solutions import release as rel


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("release") / "minilm-course"
    rel.write_release(out, probe=False)  # the probe runs every check with every provided function: see its own tests
    return out


def student_env(release: Path) -> dict[str, str]:
    """A student's shell: the release's minilm first on the path, their own code selected."""
    from minilm.course.nbenv import kernel_env

    # kernel_env: on offline course machines, the local tiktoken and data copies (a student downloads them).
    env = {**os.environ, **kernel_env(), "PYTHONPATH": str(release), "PYTHONWARNINGS": "ignore", "COLUMNS": "300"}
    env.pop("MINILM_IMPL", None)
    return env


def test_release_has_the_student_files_and_nothing_secret(release):
    for name in ("minilm/__init__.py", "minilm/course/tasks.py", "minilm/course/sandboxed/worker.py",
                 "notebooks/sanitize.cfg", "tests",
                 "conftest.py", "README.md", "docs/students.md", "environment.yml", "pyproject.toml", ".gitignore",
                 rel.WORKFLOW):
        assert (release / name).exists(), name
    for module in tasks.EXERCISE_MODULES:
        assert 'raise NotImplementedError("Task ' in (release / "minilm" / f"{module}.py").read_text(encoding="utf-8")
    assert not (release / "solutions").exists()
    assert not [p for p in release.rglob("*") if "hidden" in p.name or p.name == "__pycache__"]
    assert rel.leaks(release, probe=False) == []
    # The hidden tests and every solution line really are absent (not just filtered out as public).
    everything = "\n".join("\n".join(rel.text_lines(p)) for p in release.rglob("*") if p.is_file())
    for name in re.findall(r"^def (_\w+_cases)", rel.HIDDEN.read_text(encoding="utf-8"), flags=re.M):
        assert f"def {name}(" not in everything, f"the hidden inputs' {name} is in the release"
    assert "/grades/" in (release / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_the_edition_asks_ai_assistants_to_tutor_and_ships_the_hint_ladder(release):
    # One text wherever an assistant looks (AGENTS.md, CLAUDE.md, …): it cannot drift.
    policy = rel.TUTOR_POLICY.read_text(encoding="utf-8")
    assert {(release / name).read_text(encoding="utf-8") for name in rel.TUTOR_FILES} == {policy}
    for words in ("never write", "minilm hint", "docstring", "check"):
        assert words in policy.lower(), words
    r = subprocess.run([sys.executable, "-m", "minilm", "hint", "3.1", "--rung", "3"], cwd=release,
                       env=student_env(release), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Rung 1 of 3" in r.stdout and "still a stub" in r.stdout, r.stdout + r.stderr


def test_ls_minilm_shows_the_students_files_and_one_provided_package(release):
    listing = sorted(p.name for p in (release / "minilm").iterdir() if p.name != "__pycache__")
    assert listing == sorted(["__init__.py", "course", *(f"{m}.py" for m in tasks.EXERCISE_MODULES)])
    assert (release / "minilm" / "course" / "__init__.py").read_text(encoding="utf-8").startswith(
        '"""The course\'s provided code: nothing here is yours to edit.')


def test_leak_check_names_the_file_and_the_line(release, tmp_path):
    secret, where = next(iter(rel.solution_lines().items()))
    victim = release / "notebooks" / "leak.py"
    hidden = rel.HIDDEN
    try:
        victim.write_text(f"# notes\n    {secret}\n" + hidden.read_text(encoding="utf-8"), encoding="utf-8")
        problems = rel.leaks(release, probe=False)
    finally:
        victim.unlink()
    assert any(p.startswith("notebooks/leak.py:2: leaks ") and secret[:40] in p for p in problems), problems
    assert any("leaks solutions/hidden_cases.py" in p for p in problems), problems
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


def workflow_steps(release: Path) -> list[dict]:
    wf = load_workflow(release / rel.WORKFLOW)
    assert set(wf["on"]) >= {"push"}
    return wf["jobs"]["checks"]["steps"]


def test_workflow_runs_every_tasks_visible_check_with_cpu_torch_and_pip_cache(release):
    assert rel.WORKFLOW.as_posix() == ".github/workflows/grade.yml"
    assert not (release / ".github" / "workflows" / "classroom.yml").exists()
    text = (release / rel.WORKFLOW).read_text(encoding="utf-8")
    assert "education/" not in text and "autograding" not in text  # GitHub Classroom's actions are gone
    steps = workflow_steps(release)
    uses = [s.get("uses", "") for s in steps]
    assert uses[0].startswith("actions/checkout@")
    setup = steps[1]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["python-version"] == "3.11" and setup["with"]["cache"] == "pip"
    assert (release / setup["with"]["cache-dependency-path"]).is_file()
    install = steps[2]["run"]
    assert f"{rel.TORCH} --index-url {rel.CPU_TORCH}" in install and '-e ".[dev]"' in install
    check = next(s for s in steps if s.get("id") == "checks")
    argv = check["run"].split()
    assert argv[:2] == ["minilm", "check"]  # the console script pip's install put on PATH
    ids = argv[2:argv.index("--markdown")]
    assert ids == [t.id for t in tasks.TASKS]  # every task of the registry, in order, nothing else
    summary = next(s for s in steps if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert summary["if"] == "always()" and upload["if"] == "always()"
    assert upload["with"]["path"] == f"{rel.FEEDBACK}/"
    assert steps.index(check) < steps.index(summary) < steps.index(upload)


def test_workflow_steps_run_in_the_release_as_on_github(release, tmp_path):
    """Every step after the install, run here as GitHub runs it (bash -e), in a copy of the
    release with the student's environment: stubs everywhere, so every task is not yet done."""
    repo = tmp_path / "repo"
    shutil.copytree(release, repo)
    summary = tmp_path / "step-summary.md"
    env = {**student_env(repo), "GITHUB_STEP_SUMMARY": str(summary)}
    results = {}
    for step in workflow_steps(repo)[3:]:
        if "run" in step:
            r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo,
                               env=env, capture_output=True, text=True, timeout=600)
            results[step["name"]] = r
    status, check, table = results.values()
    assert status.returncode == 0 and f"0/{len(tasks.TASKS)} tasks done" in status.stdout, status.stdout
    assert check.returncode == 1, check.stdout + check.stderr  # tasks not done: the check step fails, as it should
    assert table.returncode == 0, table.stderr
    text = summary.read_text(encoding="utf-8")
    for task in tasks.TASKS:
        assert f"| {task.id} | {task.title} | 0/{task.points} | … not yet |" in text, task.id
    total = sum(t.points for t in tasks.TASKS)
    assert f"**0 / {total} points**" in text
    verdicts = json.loads((repo / rel.FEEDBACK / "visible-checks.json").read_text(encoding="utf-8"))
    assert [v["task"] for v in verdicts] == [t.id for t in tasks.TASKS]
    assert all(v["status"] == "todo" for v in verdicts)
    assert (repo / rel.FEEDBACK / "visible-checks.md").read_text(encoding="utf-8") == text
    assert f"/{rel.FEEDBACK}/" in (release / ".gitignore").read_text(encoding="utf-8").splitlines()


@pytest.mark.slow  # the student edition's suite, in a subprocess
def test_students_test_command_fails_on_the_stubs_with_the_todo_lines(release):
    """The README's test command, as given (xdist's -n auto and all), fails on the stubs, and every failure
    is a stub's own line. Not the notebooks, the browser test or the slow ones: the outer suite runs them
    (the browser test in stub mode too) on the same files. One worker: a second would only collect the
    suite again."""
    argv = [*rel.STUDENT_TEST.split()[1:], "--", "tests", "-m", "not browser and not slow", "-rfE", "--tb=line",
            "-p", "no:cacheprovider"]
    env = {**student_env(release), "PYTEST_XDIST_AUTO_NUM_WORKERS": "1"}
    r = subprocess.run([sys.executable, "-m", "minilm", *argv], cwd=release, env=env, capture_output=True,
                       text=True, timeout=900)
    out = r.stdout
    assert r.returncode == 1, out[-3000:]  # tests failed; 2-4 would be an interrupted or broken run
    assert "error" not in out.splitlines()[-1], "setup or collection errors:\n" + "\n".join(
        line for line in out.splitlines() if line.startswith("ERROR"))
    failures = re.findall(r"^FAILED (\S+) - (.*)$", out, flags=re.M)
    assert failures, out[-3000:]
    wrong = [(test, msg) for test, msg in failures if not re.match(r"Task \S+ is not implemented yet: write ", msg)]
    assert not wrong, "failures that are not a stub's message:\n" + "\n".join(f"{t}: {m}" for t, m in wrong)


def test_student_readme_leads_with_the_task_loop_and_keeps_the_suite_for_the_end(release):
    text = (release / "README.md").read_text(encoding="utf-8")
    doc = (release / "docs" / "students.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    # Set up first; then the loop of one task at a time (status, check ID, test ID); the whole suite last, for a
    # finished course, with how long it takes.
    assert blocks[0].strip() == rel.STUDENT_SETUP, blocks[0]
    loop = next(i for i, b in enumerate(blocks) if "minilm status" in b)
    assert "minilm check 3.1" in blocks[loop] and "minilm test 3.1" in blocks[loop], blocks[loop]
    assert [b.strip() for b in blocks].index(rel.STUDENT_TEST) > loop
    assert rel.SUITE_TIME in text.split("## When every task is written")[1]
    # Nothing only an instructor's repository can run, in the README or the docs it ships.
    for word in ("solutions", "--impl", "minilm grade", "minilm release", "minilm export", "minilm expected"):
        assert word not in text, word
        assert word not in doc, f"docs/students.md: {word}"
    # Every command the README shows is one of the edition's, and answers --help there; so does every
    # command of its docs.
    shown = {line.split()[1] for b in blocks for line in b.splitlines() if line.startswith("minilm ")}
    assert shown == {"test", "check", "status", "hint"}, shown
    doc_blocks = re.findall(r"```bash\n(.*?)```", doc, flags=re.S)
    in_doc = {line.split()[1] for b in doc_blocks for line in b.splitlines() if line.startswith("minilm ")}
    assert {"test", "check", "status", "train"} <= in_doc, in_doc
    for command in shown | in_doc:
        r = subprocess.run([sys.executable, "-m", "minilm", command, "--help"], cwd=release, env=student_env(release),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "usage:" in r.stdout, r.stderr
    for section in ("## Set up", "## How you work", "## When every task is written", "(docs/students.md)"):
        assert section in text, section
    for section in ("## How you work", "**Build it yourself.**", "## Tasks"):
        assert section in doc, f"docs/students.md: {section}"


def test_the_editions_docs_are_the_students_only_and_every_link_resolves(release):
    assert sorted(p.relative_to(release / "docs").as_posix() for p in (release / "docs").rglob("*")) == ["students.md"]
    assert (release / "docs" / "students.md").read_bytes() == (tasks.ROOT / "docs" / "students.md").read_bytes()
    for page in (release / "README.md", release / "docs" / "students.md"):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z][a-z0-9+.-]*:", link, flags=re.I):
                continue
            target = link.partition("#")[0]
            assert not target or (page.parent / target).exists(), f"{page.relative_to(release)}: {link} is broken"


def test_grading_is_the_instructors_and_says_so(release, tmp_path):
    # Grades are decided by the instructor's grader, against the reference: neither is in the edition.
    r = subprocess.run([sys.executable, "-m", "minilm", "grade", ".", "--tasks", "3.1", "--out",
                        str(tmp_path / "grades")],
                       cwd=release, env=student_env(release), capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "an instructor's command" in r.stderr and "minilm status" in r.stderr
    assert not (tmp_path / "grades").exists()


def test_the_edition_holds_no_trusted_grading_code(release):
    # `ls minilm/course` shows what the student's checks, plots and commands need, and the
    # sandbox's side (sandboxed/: the worker and the nbval plugin, which decide nothing).
    shipped = {p.name for p in (release / "minilm" / "course").iterdir()}
    assert "sandboxed" in shipped and not {"judge.py", "reports.py", "lms.py", "gradescope.py", "sandbox.py"} & shipped
    trusted = tasks.ROOT / "solutions" / "grading"
    # No function or class of the trusted grader is defined anywhere in the edition, under any file name.
    def defined_in(paths):
        return {node.name for path in paths for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}

    # (Names the course's provided code also uses for its own functions, `main` or `run`, say nothing.)
    names = defined_in(trusted.glob("*.py")) - defined_in((tasks.ROOT / "minilm").rglob("*.py"))
    defined = {}
    for path in release.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
                defined.setdefault(node.name, path.relative_to(release).as_posix())
    assert not defined, f"the trusted grader's code is in the student edition: {defined}"
    assert not [p for p in release.rglob("Dockerfile")]
    # Nothing in the edition imports it (the command table only names it, for instructors).
    for path in release.rglob("*.py"):
        if path != release / "minilm" / "course" / "cli.py":
            assert "solutions.grading" not in path.read_text(encoding="utf-8"), path


def test_leak_check_names_provided_code_that_computes_a_task(release):
    """A provided helper that calls a task's built-in, or carries a (renamed) copy of an oracle,
    is a leak with its file:line, wherever it sits outside tests/; a marked other job is not."""
    import ast

    rope = next(n for n in ast.parse(rel.ORACLES.read_text(encoding="utf-8")).body
                if isinstance(n, ast.FunctionDef) and n.name == "rope_complex")
    copy = ast.unparse(rope).replace("rope_complex", "pretty_rotation").replace("angle", "phi")
    victim = release / "minilm" / "course" / "viz" / "helper.py"
    victim.write_text("import torch\nimport torch.nn.functional as F\n\n\n"
                      "def attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n\n\n"
                      "def probs(x):\n    return x.softmax(-1)\n\n\n"
                      "def shown(x):\n    return torch.softmax(x, -1)  # release: not a task (a picture)\n\n\n"
                      + copy + "\n", encoding="utf-8")
    try:
        problems = rel.leaks(release, probe=False)
    finally:
        victim.unlink()
    assert any(p.startswith("minilm/course/viz/helper.py:6: uses scaled_dot_product_attention")
               for p in problems), problems
    assert any(p.startswith("minilm/course/viz/helper.py:10: uses softmax") for p in problems), problems
    assert not any(p.startswith("minilm/course/viz/helper.py:14") for p in problems), problems
    assert any(p.startswith("minilm/course/viz/helper.py:") and "pretty_rotation is a copy of solutions/oracles.py" in p
               for p in problems), problems
    assert rel.leaks(release, probe=False) == []


def _one_mutant_per_task() -> list[dict]:
    from solutions import mistakes

    first: dict[str, dict] = {}
    for m in mistakes.all_mutants():
        first.setdefault(m["task"], m)
    return list(first.values())


def test_the_release_checks_name_a_catalogued_mistake_of_every_task(release):
    """The release's own checks and stored expectations (minilm/ of the student edition) judge the
    reference with one catalogued mistake of each task patched in: each check fails and names it.
    (Every mistake is named in the repository's layout by test_mistakes.py; this proves the edition's.)"""
    names = [m["name"] for m in _one_mutant_per_task()]
    script = (
        "import json, minilm\n"
        "from minilm.course import checks\n"
        "from solutions import mistakes\n"
        "assert minilm.__file__.startswith(%r), minilm.__file__\n"
        "out = {}\n"
        "for m in [m for m in mistakes.all_mutants() if m['name'] in %r]:\n"
        "    with mistakes.applied(m):\n"
        "        v = checks.run(m['task'])\n"
        "    out[m['name']] = [v.status, v.mistake, v.message]\n"
        "out['clean'] = [checks.run(t).status for t in checks.registered()]\n"
        "print(json.dumps(out))\n" % (str(release), names))
    env = {**student_env(release), "PYTHONPATH": os.pathsep.join([str(release), str(tasks.ROOT)]),
           "MINILM_IMPL": "solutions"}
    r = subprocess.run([sys.executable, "-c", script], cwd=release, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert not (release / "minilm" / "oracles.py").exists()
    assert (release / "minilm" / "course" / "expected.pt").is_file()
    assert set(got.pop("clean")) == {"pass"}
    for m in _one_mutant_per_task():
        status, named, message = got[m["name"]]
        want = None if m["broken"] else m["name"]  # a property's mistake: the check names the property
        assert (status, named) == ("fail", want) and m["diagnosis"] in message, (m["name"], got[m["name"]])


# The sinusoidal_encoding that minilm/course/viz/rope.py shipped until issue 26: a complete answer to
# Task 13.2, written from the paper's formula (no built-in of a task, no copy of an oracle).
OLD_SINUSOIDAL_ENCODING = '''import torch


def sinusoidal_encoding(num_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The original Transformer's absolute positions (Vaswani et al. 2017), (num_positions, d_model):
    PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d))."""
    p = torch.arange(num_positions, dtype=torch.float64)[:, None]
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.empty(num_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(p * inv_freq), torch.cos(p * inv_freq)
    return pe.float()


def plot_sinusoidal(num_positions: int = 64, d_model: int = 64):
    return sinusoidal_encoding(num_positions, d_model)
'''


def test_leak_probe_names_provided_code_that_passes_a_tasks_check(release):
    """The old viz.rope.sinusoidal_encoding forbids no built-in and copies no oracle, so only running
    it catches it: in Task 13.2's place its check passes, and the release names it with file:line.
    Its plot, which returns the same table under other parameter names, too; the provided module
    beside it (the sandbox worker, which ends its process when called) takes only itself out."""
    victim = release / "minilm" / "course" / "viz" / "old_rope.py"
    victim.write_text(OLD_SINUSOIDAL_ENCODING, encoding="utf-8")
    try:
        problems = rel.runs_a_task(release, ["minilm/course/viz/old_rope.py", "minilm/course/sandboxed/worker.py"])
    finally:
        victim.unlink()
    assert sorted(problems) == [  # sorted as text: ":14" before ":4"
        "minilm/course/viz/old_rope.py:14 plot_sinusoidal computes Task 13.2's result: its check passes with it "
        "in place of sinusoidal_positions (provided code must not)",
        "minilm/course/viz/old_rope.py:4 sinusoidal_encoding computes Task 13.2's result: its check passes with it "
        "in place of sinusoidal_positions (provided code must not)"], problems


def test_leak_probe_fails_closed(release, tmp_path, monkeypatch):
    """A provided module the probe cannot import, or a probe that cannot run at all, is a problem,
    never a silent pass."""
    victim = release / "minilm" / "course" / "viz" / "broken.py"
    victim.write_text("import no_such_module_anywhere\n", encoding="utf-8")
    try:
        problems = rel.runs_a_task(release, ["minilm/course/viz/broken.py"])
    finally:
        victim.unlink()
    assert len(problems) == 1 and problems[0].startswith("minilm/course/viz/broken.py: cannot import"), problems
    problems = rel.runs_a_task(tmp_path, ["minilm/course/viz/rope.py"])  # no minilm there: not the release's
    assert len(problems) == 1 and problems[0].startswith("leak probe: must run the release's minilm"), problems
    monkeypatch.setattr(rel, "PROBE_SECONDS", 0.01)
    assert rel.runs_a_task(release, ["minilm/course/viz/rope.py"]) == [
        "the leak probe (solutions/leak_probe.py) did not finish within 0.01 s"]


@pytest.mark.slow  # every task's check with every provided function and class in place: minutes
def test_no_provided_code_passes_a_tasks_check(release):
    assert rel.runs_a_task(release) == []
