"""Write the student edition of the course.

    minilm release OUT_DIR                    # OUT_DIR must not exist or be empty
    minilm release OUT_DIR --regenerate-stubs # rewrite minilm/ stubs first

The release holds minilm/ (the stubs and the provided modules, the grader included),
notebooks/ with the reference's stored outputs, the visible tests/, the root conftest.py,
a README.md of its own (what the course is, the setup, the task loop, the whole suite for the end) with docs/students.md
(the loop in full, the rules and the tasks), the tutor policy for AI assistants (AGENTS.md, and the same
text as CLAUDE.md, GEMINI.md and .github/copilot-instructions.md), environment.yml, a pyproject.toml that
no longer mentions `solutions`, a .gitignore, and a GitHub Actions workflow (.github/workflows/grade.yml)
generated from the task registry that runs the visible checks on every push.
It never holds solutions/ or the grader's hidden inputs: before it returns, every file written is
searched for the reference's solution lines and the hidden inputs' lines, and any found fails
the release (non-zero exit, naming the file and the leaked line). Nor does it hold provided code
that computes a task's result: a call of a task's built-in, a copy of an oracle, or (run against
every task's own check, solutions/leak_probe.py) a function or class that passes a task's check.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

from minilm.course import tasks
from minilm.course.cli import Parser, summary
from minilm.course.rules.families import FAMILIES
from solutions import make_stubs

ROOT = tasks.ROOT
SOLUTIONS = ROOT / "solutions"
HIDDEN = SOLUTIONS / "hidden_cases.py"  # the grader's hidden inputs
ORACLES = SOLUTIONS / "oracles.py"  # a second implementation of the model: instructors only
# A provided line that calls a built-in of a task's family (minilm/course/rules/families.py) for some
# other job says why on the same line, after this marker; anything else is a leak.
NOT_A_TASK = "# release: not a task"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis",
                                "*.egg-info")
GITIGNORE_EXTRA = ["/grades/", "/feedback/"]  # what `minilm grade` and the visible checks write
WORKFLOW = Path(".github/workflows/grade.yml")
# The tutor policy for AI assistants (explain, ask, point at the check and the docstring, never write a task's
# body): one text, written into every file where an assistant looks for a repository's instructions.
TUTOR_POLICY = ROOT / "minilm" / "course" / "tutor_policy.md"
TUTOR_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", ".github/copilot-instructions.md")
CPU_TORCH = "https://download.pytorch.org/whl/cpu"
TORCH = "torch==2.13.0"  # pinned, from the CPU index: the same build everywhere, no multi-GB CUDA wheels
FEEDBACK = "feedback"  # the folder the workflow uploads
MIN_LEAK_CHARS = 12  # shorter lines ("return x", "else:") say nothing about a solution
# Hidden tests share single lines with any test (`@pytest.fixture(autouse=True)`), so their
# text counts as leaked when this many significant lines in a row appear in a release file.
HIDDEN_RUN = 3


class ReleaseError(Exception):
    pass


# ---------------------------------------------------------------- what must not leak


def _significant(line: str) -> str | None:
    text = line.strip()
    return text if len(text) >= MIN_LEAK_CHARS else None


def solution_lines() -> dict[str, str]:
    """Non-trivial lines inside the reference's BEGIN/END SOLUTION regions → where they are."""
    found = {}
    for module in tasks.EXERCISE_MODULES:
        path = SOLUTIONS / f"{module}.py"
        inside = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if make_stubs.BEGIN.match(line):
                inside = True
            elif make_stubs.END.match(line):
                inside = False
            elif inside and (text := _significant(line)):
                found.setdefault(text, f"solutions/{module}.py:{n}")
    return found


def _runs(lines: list[str]) -> list[tuple[int, tuple[str, ...]]]:
    """(line number, HIDDEN_RUN consecutive significant lines starting there), leaving out the
    imports, decorators and comments every test file shares."""
    sig = [(n, t) for n, line in enumerate(lines, 1)
           if (t := _significant(line)) and not t.startswith(("import ", "from ", "@", "#"))]
    return [(sig[i][0], tuple(t for _, t in sig[i:i + HIDDEN_RUN])) for i in range(len(sig) - HIDDEN_RUN + 1)]


def hidden_runs() -> dict[tuple[str, ...], str]:
    """Runs of significant lines of the grader's hidden inputs → where they are."""
    found = {}
    if HIDDEN.is_file():
        for path in [HIDDEN]:
            for n, run in _runs(path.read_text(encoding="utf-8").splitlines()):
                found.setdefault(run, f"{path.relative_to(ROOT).as_posix()}:{n}")
    return found


def text_lines(path: Path) -> list[str]:
    """A file's lines as a reader sees them: a notebook's cell sources and text outputs."""
    raw = path.read_bytes()
    if b"\0" in raw[:8192]:
        return []  # binary
    text = raw.decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        parts = []
        for cell in nb.get("cells", []):
            parts.append("".join(cell.get("source", "")))
            for out in cell.get("outputs", []):
                parts.append("".join(out.get("text", "")))
                parts += ["".join(v) if isinstance(v, list) else str(v) for v in out.get("data", {}).values()]
        text = "\n".join(parts)
    return text.splitlines()


def _canonical(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's body with every identifier and docstring erased: a renamed copy reads the same."""
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(
        getattr(fn.body[0], "value", None), ast.Constant) and isinstance(fn.body[0].value.value, str) else fn.body
    module = ast.Module(body=[ast.parse(ast.unparse(stmt)).body[0] for stmt in body], type_ignores=[])
    for node in ast.walk(module):
        for attr in ("id", "arg", "name"):
            if isinstance(getattr(node, attr, None), str):
                setattr(node, attr, "_")
    return ast.dump(module, annotate_fields=False)


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def oracle_functions() -> dict[str, str]:
    """solutions/oracles.py's functions, canonicalized (see _canonical) → their names."""
    if not ORACLES.is_file():
        return {}
    tree = ast.parse(ORACLES.read_text(encoding="utf-8"))
    return {_canonical(fn): f"solutions/oracles.py:{fn.lineno} {fn.name}" for fn in _functions(tree)
            if len(fn.body) > 1}


def _python_sources(release: Path) -> list[tuple[str, str, int]]:
    """(file:line prefix, source, line offset) of the release's Python code outside tests/: every
    .py file, and every notebook code cell (shell and magic lines blanked)."""
    out = []
    for path in sorted(release.rglob("*.py")):
        rel = path.relative_to(release).as_posix()
        if not rel.startswith("tests/"):
            out.append((rel, path.read_text(encoding="utf-8", errors="replace"), 0))
    for path in sorted(release.rglob("*.ipynb")):
        rel = path.relative_to(release).as_posix()
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8")).get("cells", [])):
            if cell.get("cell_type") == "code":
                src = "".join(cell.get("source", ""))
                src = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines())
                out.append((f"{rel} cell {i}", src, 0))
    return out


# Tensor methods that do a family's job, on whatever object: x.softmax(-1).
FAMILY_METHODS = frozenset("softmax log_softmax logsumexp logcumsumexp logaddexp logaddexp2 renorm dequantize "
                           "int_repr".split())


def _library_uses(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """(node, name) for each name taken from torch or einops (torch.softmax, F.linear, nn.Linear, a from-import),
    and each family's tensor method called on anything."""
    libraries = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names if a.name.split(".")[0] in ("torch", "einops")}
    libraries |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  and (n.module or "").split(".")[0] in ("torch", "einops") for a in n.names}
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("torch", "einops"):
            uses += [(node, a.name) for a in node.names]
        elif isinstance(node, ast.Attribute):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if (isinstance(root, ast.Name) and root.id in libraries) or node.attr in FAMILY_METHODS:
                uses.append((node, node.attr))
    return uses


def computes_a_task(release: Path) -> list[str]:
    """Code in the release, outside tests/ (where PyTorch's built-ins are the tests' own oracles,
    which the rules forbid students), that computes a task's result: a call of a built-in in a
    task's family (F.softmax, F.scaled_dot_product_attention, torch.optim.AdamW, …, see
    minilm/course/rules/families.py) on a line without NOT_A_TASK, or a function whose code is one of
    solutions/oracles.py's, renamed or not. Each problem names file:line."""
    problems = []
    oracles = oracle_functions()
    for where, source, _ in _python_sources(release):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        lines = source.splitlines()
        for node, name in _library_uses(tree):
            families = [f for f, family in FAMILIES.items() if family.holds("torch", name)]
            line = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""
            if families and NOT_A_TASK not in line:
                problems.append(f"{where}:{node.lineno}: uses {name}, a built-in of the {families[0]!r} family that a "
                                f"task builds (mark a different job with {NOT_A_TASK!r} and why): {line.strip()[:100]}")
        for fn in _functions(tree):
            copy = oracles.get(_canonical(fn)) if len(fn.body) > 1 else None
            if copy:
                problems.append(f"{where}:{fn.lineno}: {fn.name} is a copy of {copy}")
    return problems


PROBE_SECONDS = 1800  # the whole probe: a few minutes on a loaded 2-core machine


def runs_a_task(release: Path, files: list[str] | None = None) -> list[str]:
    """Provided functions and classes of the release (or of `files`, relative to it) that pass a
    task's own check in place of the reference's code: they compute the task's result, whatever
    they look like (solutions/leak_probe.py, run in a child process on the release's minilm).
    Fails closed: a probe that cannot run, or does not say, is a problem."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(release), str(ROOT)]), "MINILM_IMPL": "solutions",
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryDirectory() as scratch:
        try:
            r = subprocess.run([sys.executable, "-m", "solutions.leak_probe", str(release), *(files or [])],
                               cwd=scratch,
                               env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PROBE_SECONDS)
        except subprocess.TimeoutExpired:
            return [f"the leak probe (solutions/leak_probe.py) did not finish within {PROBE_SECONDS} s"]
    try:
        found = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
    except (IndexError, ValueError):
        found = None
    if not isinstance(found, list):
        return [f"the leak probe (solutions/leak_probe.py) failed (exit {r.returncode}): {r.stderr.strip()[-500:]}"]
    return found


def leaks(release: Path, probe: bool = True) -> list[str]:
    """Every line of the release that is a solution body line or a hidden-test line, and every
    piece of code that computes a task's result (computes_a_task; with `probe`, runs_a_task too).
    Lines that the public course shares verbatim (the stubs' shared code, say) are not secret."""
    secret, hidden = solution_lines(), hidden_runs()
    problems = computes_a_task(release) + (runs_a_task(release) if probe else [])
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        rel = path.relative_to(release).as_posix()
        if rel.startswith("solutions/") or "hidden_tests" in rel or path.name.startswith("test_hidden"):
            problems.append(f"{rel}: this file must not be in a release")
            continue
        lines = text_lines(path)
        for n, line in enumerate(lines, 1):
            where = secret.get(line.strip())
            if where and not _public(line.strip()):
                problems.append(f"{rel}:{n}: leaks {where}: {line.strip()[:120]}")
        for n, run in _runs(lines):
            if run in hidden:
                problems.append(f"{rel}:{n}: leaks {hidden[run]}: {run[0][:120]}")
    return problems


_PUBLIC: set[str] | None = None


def _public(text: str) -> bool:
    """Whether a line also appears in the course's own provided sources (outside any solution region)."""
    global _PUBLIC
    if _PUBLIC is None:
        _PUBLIC = set()
        exercise = {f"{m}.py" for m in tasks.EXERCISE_MODULES}
        for path in (ROOT / "minilm").rglob("*.py"):
            if path.parent != ROOT / "minilm" or path.name not in exercise:
                _PUBLIC |= {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}
        for module in tasks.EXERCISE_MODULES:  # the stubs keep everything outside the regions
            stub = make_stubs.stub_source((SOLUTIONS / f"{module}.py").read_text(encoding="utf-8"), module)
            _PUBLIC |= {line.strip() for line in stub.splitlines()}
    return text in _PUBLIC


# ---------------------------------------------------------------- the files


def rewrite_pyproject(text: str) -> str:
    """Drop `solutions` from the packages and test paths."""
    text = re.sub(r'include\s*=\s*\[[^\]]*\]', 'include = ["minilm*"]', text, count=1)
    text = re.sub(r'testpaths\s*=\s*\[[^\]]*\]', 'testpaths = ["tests", "notebooks"]', text, count=1)
    text = re.sub(r'^"solutions[^"]*"\s*=.*\n', "", text, flags=re.M)  # the instructor's package data and lint rules
    text = re.sub(r'^(known-first-party\s*=.*)"solutions",\s*', r"\1", text, flags=re.M)
    data = tomllib.loads(text)
    left = [line for line in text.splitlines() if "solutions" in line]
    if left or data["tool"]["setuptools"]["packages"]["find"]["include"] != ["minilm*"]:
        raise ReleaseError(f"pyproject.toml still mentions solutions after rewriting: {left}")
    return text


def check_command() -> str:
    """The workflow's grading command: every task's visible check, ids from the registry."""
    ids = " ".join(t.id for t in tasks.TASKS)
    return (f"minilm check {ids} --markdown {FEEDBACK}/visible-checks.md "
            f"--json-out {FEEDBACK}/visible-checks.json")


def grade_workflow() -> str:
    """GitHub Actions for a student's repository: on every push, the visible checks of every
    task (`minilm check`, what the notebooks' check cells run), with CPU PyTorch and
    pip's cache; the per-task table goes to the run's summary and the feedback Markdown is
    uploaded as an artifact. It has no reference and no hidden inputs: grades are decided on
    the instructor's side. The file is JSON, which is also valid YAML, so it can be checked
    without a YAML parser."""
    steps = [
        {"name": "Check out", "uses": "actions/checkout@v4"},
        {"name": "Set up Python", "uses": "actions/setup-python@v5",
         "with": {"python-version": "3.11", "cache": "pip", "cache-dependency-path": "pyproject.toml"}},
        {"name": "Install the course (CPU PyTorch)",
         "run": f"python -m pip install {TORCH} --index-url {CPU_TORCH}\npython -m pip install -e \".[dev]\""},
        {"name": "Where you stand", "run": "minilm status"},
        {"name": "Visible checks, every task", "id": "checks", "run": check_command()},
        {"name": "Per-task table", "if": "always()",
         "run": f'if [ -f {FEEDBACK}/visible-checks.md ]; then cat {FEEDBACK}/visible-checks.md >> '
                '"$GITHUB_STEP_SUMMARY"; fi'},
        {"name": "Upload the feedback", "if": "always()", "uses": "actions/upload-artifact@v4",
         "with": {"name": "minilm-feedback", "path": f"{FEEDBACK}/", "if-no-files-found": "warn"}},
    ]
    workflow = {
        "name": "minilm visible checks",
        "on": ["push", "workflow_dispatch"],
        "permissions": {"contents": "read"},
        "jobs": {"checks": {"runs-on": "ubuntu-latest", "timeout-minutes": 30, "steps": steps}},
    }
    header = ("# Generated by `minilm release` from minilm/course/tasks.py: the visible checks of every task.\n"
              "# Your grade is decided by your instructor's grader, on hidden inputs as well.\n"
              "# Written as JSON, which is valid YAML.\n")
    return header + json.dumps(workflow, indent=2, ensure_ascii=False) + "\n"


# The student's two commands: set up and open the course; test their own code (the whole suite, for a finished course).
STUDENT_SETUP = 'python -m pip install -e ".[dev]" && python -m jupyter lab notebooks/00_welcome.ipynb'
STUDENT_TEST = "minilm test all"
# How long STUDENT_TEST takes on a finished course (the reference in minilm/), measured on a 2-core
# machine: docs/contributing.md, "Measured".
SUITE_TIME = "about a minute on 2 cores"


def _section(readme: str, heading: str) -> str:
    """One `## heading` section of the course README, up to the next `## ` heading."""
    start = readme.index(f"\n## {heading}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start + 1:end if end >= 0 else len(readme)].rstrip() + "\n"


# The docs/ the edition ships: the students' only (the others describe what the edition cannot run).
STUDENT_DOCS = ("students.md",)
# Words of the instructor's repository that neither the edition's README nor its docs may use.
INSTRUCTOR_WORDS = ("solutions", "--impl", "minilm grade", "minilm release", "minilm export", "minilm expected")


def student_readme() -> str:
    """The student edition's README: what the course is, the student's two commands and their loop,
    taken from the course README's student parts, and a link to docs/students.md (the rules and the
    tasks); nothing an instructor runs (no `solutions`, no grader), which the edition cannot run."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = readme[:readme.index("\n## ")].rstrip() + "\n"
    loop = _section(readme, "How you work (students)").replace("## How you work (students)", "## How you work")
    setup = f"""## Set up

Set up and open the course (Python ≥ 3.10, in a fresh virtual environment or conda env; on Linux,
run `python -m pip install torch --index-url https://download.pytorch.org/whl/cpu` first for a
small CPU-only PyTorch):

```bash
{STUDENT_SETUP}
```
"""
    finished = f"""## When every task is written

The whole suite, every task's tests and every notebook run against your modules in `minilm/`
({SUITE_TIME}). On a course still being written it fails wherever a task is a stub, each failure
naming its task, so use `minilm status`, `minilm check ID` and `minilm test ID` until then:

```bash
{STUDENT_TEST}
```

`minilm help` lists the other commands.
"""
    docs = """## Docs

- [docs/students.md](docs/students.md): the loop in full, `minilm train`, how failing cells are named,
  where your grade is decided, the from-scratch rules and every task.
"""
    footer = """## For instructors

This is the student edition of the course, written from the instructor's repository, which holds
the reference, the grader, the hidden inputs and the instructor's documentation. Grades are
decided there, never in this repository.
"""
    return "\n".join([intro, setup, loop, finished, docs, footer])


def student_docs() -> dict[str, str]:
    """The edition's docs/: the students' docs of the course, as they are, refused if one mentions what
    only the instructor's repository has."""
    found = {}
    for name in STUDENT_DOCS:
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        words = [w for w in INSTRUCTOR_WORDS if w in text]
        if words:
            raise ReleaseError(f"docs/{name} mentions {', '.join(words)}, which the student edition does not have")
        found[name] = text
    return found


def write_release(out: Path, regenerate: bool = False, probe: bool = True) -> list[Path]:
    if regenerate:
        make_stubs.main([])
    stale = make_stubs.drifted()
    if stale:
        raise ReleaseError("the stubs in minilm/ differ from the reference: run `minilm stubs` "
                           f"(or pass --regenerate-stubs): {', '.join(p.relative_to(ROOT).as_posix() for p in stale)}")
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "minilm", out / "minilm", ignore=IGNORE)
    shutil.copytree(ROOT / "tests", out / "tests", ignore=IGNORE)
    (out / "notebooks").mkdir()
    for f in sorted((ROOT / "notebooks").iterdir()):
        if f.is_file() and (f.suffix != ".ipynb" or tasks.NOTEBOOK_NAME.match(f.name)):
            shutil.copy2(f, out / "notebooks" / f.name)
    for name in ("conftest.py", "environment.yml"):
        if not (ROOT / name).exists():
            raise ReleaseError(f"{name} is missing from the course root")
        shutil.copy2(ROOT / name, out / name)
    readme = student_readme()
    words = [w for w in INSTRUCTOR_WORDS if w in readme]
    if words:
        raise ReleaseError(f"the student README would mention {', '.join(words)}: see the README's student sections")
    (out / "README.md").write_text(readme, encoding="utf-8")
    (out / "docs").mkdir()
    for name, text in student_docs().items():
        (out / "docs" / name).write_text(text, encoding="utf-8")
    (out / "pyproject.toml").write_text(rewrite_pyproject((ROOT / "pyproject.toml").read_text(encoding="utf-8")),
                                        encoding="utf-8")
    ignore = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines() if (ROOT / ".gitignore").exists() else []
    (out / ".gitignore").write_text("\n".join([*ignore, *[e for e in GITIGNORE_EXTRA if e not in ignore]]) + "\n",
                                    encoding="utf-8")
    (out / WORKFLOW).parent.mkdir(parents=True)
    (out / WORKFLOW).write_text(grade_workflow(), encoding="utf-8")
    policy = TUTOR_POLICY.read_text(encoding="utf-8")
    for name in TUTOR_FILES:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(policy, encoding="utf-8")
    problems = leaks(out, probe)
    if problems:
        raise ReleaseError("the release leaks solution or hidden-test text, or code that computes a task's "
                           "result:\n  " + "\n  ".join(problems[:50]))
    return sorted(p for p in out.rglob("*") if p.is_file())


def main(argv: list[str] | None = None, prog: str = "minilm release") -> int:
    parser = Parser(prog=prog, description=summary(__doc__))
    parser.add_argument("out", type=Path, help="the directory to write (must not exist, or be empty)")
    parser.add_argument("--regenerate-stubs", action="store_true",
                        help="rewrite minilm/ stubs from the reference first")
    args = parser.parse_args(argv)
    try:
        files = write_release(args.out, args.regenerate_stubs)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    print(f"release: wrote {len(files)} files to {args.out} ({len(tasks.TASKS)} tasks, "
          f"{sum(t.points for t in tasks.TASKS)} points; no solutions, no hidden tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
