"""The course's plumbing, on the instructor's side: the task registry, the stubs, the
MINILM_IMPL switch, the status command and the install files agree with each other. These
read the instructor's checkout (minilm/ holds the stubs, solutions/ the reference), so they
live here and not in tests/, which ships to students and runs on their finished code."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from minilm.course import checks, tasks

ROOT = tasks.ROOT


def run_python(*args, impl=None, **kw):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("MINILM_IMPL", None)
    if impl is not None:
        env["MINILM_IMPL"] = impl
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, **kw)


def test_task_ids_are_unique_and_ordered():
    ids = [t.id for t in tasks.TASKS]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids, key=lambda i: tuple(int(p) for p in i.split(".")))


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_every_task_has_a_stub_a_notebook_and_a_check(task):
    source = (ROOT / task.file).read_text(encoding="utf-8")
    defined = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert task.function in defined, f"{task.file} does not define {task.function}"
    assert f'NotImplementedError("Task {task.id} ' in source, f"{task.file} has no stub for task {task.id}"
    assert task.id in checks.registered(), f"task {task.id} has no check"
    assert (ROOT / task.notebook).exists(), f"{task.notebook} is missing"
    assert task.points > 0


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_every_task_is_checked_by_a_notebook_cell(task):
    text = (ROOT / task.notebook).read_text(encoding="utf-8")
    assert re.search(rf'check\((?:[^)]*)\\"{re.escape(task.id)}\\"',
                     text), f"{task.notebook} has no check({task.id!r}) cell"


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_every_task_has_tests(task):
    marked = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py"))
    assert f'mark.task("{task.id}")' in marked, f"no test is marked with task {task.id}"


def test_switch_selects_the_implementation():
    probe = "import minilm, inspect; print(minilm.implementation(), inspect.getsourcefile(minilm.rms_norm))"
    stub = run_python("-c", probe, impl="minilm")
    ref = run_python("-c", probe, impl="solutions")
    assert stub.stdout.split()[0] == "minilm" and stub.stdout.strip().endswith(str(Path("minilm", "rmsnorm.py")))
    assert ref.stdout.split()[0] == "solutions" and ref.stdout.strip().endswith(str(Path("solutions", "rmsnorm.py")))


@pytest.mark.parametrize("impl", ["minilm", "solutions"])
def test_import_minilm_loads_torch_only_on_first_use(impl):
    """Importing the package is cheap (what the benchmarks' import figures show, by timing)."""
    probe = ("import sys, minilm; before = 'torch' in sys.modules; minilm.TransformerLM; "
             "print(before, 'torch' in sys.modules)")
    r = run_python("-c", probe, impl=impl)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True"], "import minilm must not import torch until a name is used"


# The grader's trusted side, which alone reaches for the reference, lives in solutions/grading/:
# nothing under minilm/ imports solutions.
def test_minilm_never_imports_solutions_outside_the_switch():
    for path in (ROOT / "minilm").rglob("*.py"):
        if path.name == "__init__.py" and path.parent.name == "minilm":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "solutions" or n.startswith("solutions.") for n in names), f"{path} imports solutions"


def test_status_in_both_modes():
    stub = run_python("-m", "minilm", "status", impl="minilm")
    assert stub.returncode == 0, stub.stderr
    first = tasks.TASKS[0]
    assert f"Next: Task {first.id}" in stub.stdout and f"{first.file}:" in stub.stdout
    assert f"0/{len(tasks.TASKS)} tasks done" in stub.stdout
    ref = run_python("-m", "minilm", "status", impl="solutions")
    assert ref.returncode == 0, ref.stderr
    assert f"{len(tasks.TASKS)}/{len(tasks.TASKS)} tasks done" in ref.stdout and "Next:" not in ref.stdout


def _requirement_names(reqs):
    return {re.split(r"[<>=!~\[; ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = _requirement_names(project["dependencies"] + project["optional-dependencies"]["dev"])
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    listed = _requirement_names(re.findall(r"^\s*-\s+([A-Za-z][\w.\-\[\]]*[^\n#]*)$", text, flags=re.M))
    conda_names = {"pytorch": "torch"}
    listed = {conda_names.get(n, n) for n in listed} - {"python", "pip", "-e"}
    assert wanted <= listed, f"environment.yml lacks {sorted(wanted - listed)}"
    assert "python>=3.10" in text.replace(" ", "")


def test_environment_ymls_pip_section_is_what_pip_reads(tmp_path):
    # conda and Binder hand the pip section to pip as a requirements file: a line pip rejects ("--no-deps" was one)
    # fails every `conda env create` and every Binder build.
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    section = re.search(r"^  - pip:\n((?:      - .*\n)+)", text, flags=re.M)
    assert section, "environment.yml has no pip section"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("".join(line.strip()[2:] + "\n" for line in section[1].splitlines()), encoding="utf-8")
    parsed = list(parse_requirements(str(requirements), session=PipSession()))
    assert any(r.is_editable and r.requirement == "." for r in parsed), [r.requirement for r in parsed]


def test_the_torch_floor_is_the_oldest_torch_the_course_runs_on():
    import torch

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    [floor] = [r.split(">=", 1)[1].split(",")[0].strip() for r in project["dependencies"] if r.startswith("torch>=")]
    conda = re.search(r"^\s*-\s*pytorch>=([\d.]+)", (ROOT / "environment.yml").read_text(encoding="utf-8"), re.M)
    assert conda and conda[1] == floor
    # Notebook 14 and Task 14.2's tests compare with torch.optim.Muon, which entered PyTorch in 2.9.
    assert tuple(map(int, floor.split("."))) >= (2, 9) and hasattr(torch.optim, "Muon")


def test_no_provided_function_is_over_80_lines():
    # Provided code reads like nanoGPT: a long function is split along its seams (issue: "the house
    # for readers"). The exercise modules hold stubs; the reference's BPE trainer is in solutions/.
    long = []
    provided = [*sorted((ROOT / "minilm").rglob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.py")),
                ROOT / "conftest.py"]
    for path in provided:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}: "
                            f"{node.end_lineno - node.lineno + 1} lines")
    assert not long, long


def test_ruff_finds_nothing():
    # The lint rules pyproject.toml selects, over the whole course (code and notebooks).
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True)
    if ruff.returncode != 0 and "No module named ruff" in ruff.stderr:
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    assert ruff.returncode == 0, ruff.stdout[-3000:] + ruff.stderr[-2000:]


def markdown_links(path) -> list[str]:
    """Every link target of a Markdown file (inline `[text](target)` links and images), code spans
    and fenced blocks left out."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)


def markdown_anchors(path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def test_every_relative_link_in_the_readme_and_docs_resolves():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(docs) > 1, "docs/ is missing"
    broken = []
    for doc in docs:
        links = markdown_links(doc)
        if doc.name == "README.md":
            assert "docs/students.md" in links, "the README does not link docs/students.md"
        for link in links:
            if re.match(r"[a-z][a-z0-9+.-]*:", link, flags=re.I):  # https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            path = (doc.parent / target).resolve() if target else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in markdown_anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
    # Every doc is linked from the README.
    readme_links = {(ROOT / link.partition("#")[0]).resolve() for link in markdown_links(ROOT / "README.md")}
    assert {d.resolve() for d in docs[1:]} <= readme_links, "a doc the README does not link"


def test_readme_tree_names_only_real_paths_and_every_exercise_module():
    # The README's annotated tree: each line's name(s), under the folders above it by indentation
    # (two spaces a level), exist; `a … b` names a range by its ends, `*` a glob, a notebook its stem.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Layout"):].split("```")[1]
    folders: list[str] = []
    named = set()
    for line in block.strip("\n").splitlines():
        level = (len(line) - len(line.lstrip(" "))) // 2
        field = re.split(r"\s{2,}", line.strip())[0]
        folders = folders[:level]
        for name in (n.strip() for part in field.split(",") for n in part.split(" … ")):
            path = "".join(folders) + name
            assert list(ROOT.glob(path)) or list(ROOT.glob(path + ".ipynb")), f"README's tree: {path} does not exist"
            named.add(path)
        if field.endswith("/") and "," not in field:
            folders.append(field)
    assert {"README.md", "pyproject.toml", "environment.yml", "conftest.py", ".ci/run", "docs/", "tests/",
            "solutions/tests/", "benchmarks/", "minilm/course/rules/", "minilm/course/sandboxed/",
            "minilm/course/exercises/",
            "solutions/grading/"} <= named
    assert {f"minilm/{m}.py" for m in tasks.EXERCISE_MODULES} <= named, "README's tree misses an exercise module"


def test_readme_is_short_and_says_what_each_sandbox_guarantees():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.split()) <= 1000, f"README.md: {len(readme.split())} words; detail belongs in docs/"
    table = readme[readme.index("## What grading guarantees"):].split("\n## ")[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split(" (")[0] for r in rows[1:]] == ["bubblewrap", "Docker", "Gradescope's container", "none"], rows
    from solutions.grading import cli

    flags = {a for action in cli.parser()._actions for a in action.option_strings}
    assert {"--sandbox", "--no-sandbox"} <= flags and "--sandbox docker" in table and "--no-sandbox" in table


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = "minilm test all --impl solutions"
    # The very command: the README's block line, and a line of the script (through python -m, which
    # needs no console script on PATH), not a longer variant.
    assert f"\n{command}\n" in readme and f"\npython -m {command}\n" in ci


def test_ci_installs_the_way_the_readme_says():
    # In a fresh venv made from an interpreter of its own, with the README's install command
    # (the setup command's first part, before it opens JupyterLab), not a variant of it.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    setup = next(line for line in re.findall(r"```bash\n(.*?)```", readme, flags=re.S)[0].splitlines()
                 if "pip install" in line)
    install = setup.split(" && ")[0].strip()
    assert install == 'python -m pip install -e ".[dev]"', setup
    assert f"\n{install}\n" in ci
    # Made afresh (removed first), then activated.
    assert re.search(r'\nrm -rf "\$venv"\n"\$base" -m venv "\$venv"\n', ci) and '. "$venv/bin/activate"' in ci


def test_pytest_starts_without_the_slow_iri_parsers():
    # This process is a pytest run (an xdist worker under `minilm test all`): pyproject's addopts
    # loaded minilm.course.plugins.imports before nbval, so rfc3987_syntax's parsers were never
    # built, and nbformat's validation (jsonschema) works all the same.
    import nbformat

    assert sys.modules.get("rfc3987_syntax") is None
    nb = nbformat.read(ROOT / "notebooks" / "00_welcome.ipynb", as_version=4)
    nbformat.validate(nb)
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate({**nb, "cells": [{"cell_type": "code", "id": "x"}]})


def test_needs_closes_the_figures_a_stub_left_half_drawn(capsys):
    """A plot that stops at a stub shows no empty axes under needs()'s one line; figures opened
    before the block stay open."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    earlier = plt.figure()
    try:
        with checks.needs("14.4"):
            plt.subplots(1, 2)
            raise NotImplementedError("Task 14.4 is not implemented yet: write lr_wsd_schedule in minilm/modern.py")
        assert capsys.readouterr().out.startswith("… Task 14.4 is not implemented yet")
        assert plt.get_fignums() == [earlier.number]
    finally:
        plt.close("all")
