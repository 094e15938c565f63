"""Grade submissions: run the course notebooks against each student's code (provided).

    python -m minilm.grade alice/ bob.zip https://github.com/org/carol.git --out grades/
    python -m minilm.grade .                     # your own checkout: the notebook points you will get
    python -m minilm.grade subs/* --notebooks 01_linear 03_rmsnorm --tasks 1.1 3.1 --jobs 8

A submission is a directory, a .zip or a git URL holding a `minilm` package (at the top or one
folder down, e.g. alice/minilm/). Only its exercise modules (minilm/linear.py, rmsnorm.py, …)
are used: each submission is graded in a fresh workspace holding the course's own notebooks,
tests, provided modules and registry, so nothing a student changed elsewhere counts.

In the workspace, nbval runs every notebook against the student's code and compares each cell
with the output stored from the reference. A task earns its points when every check cell for
it (a cell calling check("<id>")) reproduces its stored output and, when the instructor gives
--hidden-tests DIR, when its hidden tests (marked @pytest.mark.task("<id>")) pass as well.
Failing tasks get the check's message and the named mistake in feedback/<student>.md.

Each submission runs in its own processes with a per-cell, per-test and per-submission time
limit and a memory limit, `solutions` cannot be imported, and the notebooks, registry and
checks are restored from pristine copies before each notebook runs. So a submission that
hangs, crashes, eats memory, prints the expected lines, imports solutions or edits or deletes
the course's files gets what its real work earns, and the batch goes on.

This module is also the pytest plugin (`-p minilm.grade`) those runs load: see the end of the file.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import csv
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from minilm import tasks

PROG = "python -m minilm.grade"
COURSE = tasks.ROOT
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
MAX_MODULE_BYTES = 2_000_000  # an exercise module is a few kB; anything bigger is not code we run
BLOCKED = "solutions is not available while grading"
VERDICT_PREFIX = "MINILM-GRADE-VERDICT "
KERNEL_DIED = "The kernel died while running this cell"

# Environment variables through which the grader configures its plugin in the child processes.
ENV_TEMPLATE, ENV_LOG, ENV_MEMORY, ENV_TEST_TIMEOUT, ENV_TOKEN = (
    "MINILM_GRADE_TEMPLATE", "MINILM_GRADE_LOG", "MINILM_GRADE_MEMORY_MB", "MINILM_GRADE_TEST_TIMEOUT",
    "MINILM_GRADE_TOKEN")

# Put first on PYTHONPATH in every grading process: `solutions` (the reference) is shadowed by a
# package that refuses to import, and sitecustomize also blocks it on sys.meta_path, so
# neither `import solutions` nor a sys.path trick finds the instructor's copy.
SHADOW_INIT = f'raise ImportError("{BLOCKED}")\n'
SHADOW_SITECUSTOMIZE = f'''"""Written by minilm.grade: block the reference solutions in grading processes."""
import sys


class _BlockSolutions:
    def find_spec(self, name, path=None, target=None):
        if name == "solutions" or name.startswith("solutions."):
            raise ImportError("{BLOCKED}")
        return None


sys.meta_path.insert(0, _BlockSolutions())
'''


class GradeError(Exception):
    """A problem with the grader's inputs (not with a student's code)."""


# ---------------------------------------------------------------- the course: notebooks and check cells


def code_cells(nb: dict) -> list[str]:
    """Sources of the code cells, numbered as nbval numbers them ("Cell 0" is the first code cell)."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def checked_tasks(source: str) -> list[str]:
    """Task ids a cell checks: the string arguments of its check(...) calls."""
    try:
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()))
    except SyntaxError:  # not Python (e.g. a cell magic): fall back to the plain pattern
        return re.findall(r'"(\d+\.\d+)"', " ".join(re.findall(r"(?<![\w\"])check\(([^)]*)\)", source)))
    ids = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "check":
                ids += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return ids


def check_cells(nb: dict) -> dict[int, list[str]]:
    """nbval cell number → the task ids it checks, for every check cell of a notebook."""
    found = {i: checked_tasks(src) for i, src in enumerate(code_cells(nb))}
    return {i: ids for i, ids in found.items() if ids}


def _stored_text(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def has_reference_outputs(nb: dict) -> bool:
    """Whether every check cell still holds the reference's verdicts (✓ Task <id> …): a notebook
    a student ran and saved holds their own outputs instead, which must not be graded against."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for i, ids in check_cells(nb).items():
        text = _stored_text(cells[i])
        if not all(f"✓ Task {task_id} " in text for task_id in ids):
            return False
    return True


def pristine_notebook(path: Path) -> bytes:
    """The notebook with the reference's stored outputs: the file itself, or else its last
    committed version (a student's checkout holds notebooks they ran and saved)."""
    data = path.read_bytes()
    if has_reference_outputs(json.loads(data)):
        return data
    rel = path.relative_to(COURSE).as_posix()
    try:
        committed = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=COURSE, capture_output=True, timeout=60).stdout
        if committed and has_reference_outputs(json.loads(committed)):
            return committed
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    raise GradeError(f"{rel} holds outputs that are not the course's (did you run it and save it?): grading compares "
                     f"with the stored reference outputs. Restore it with `git checkout -- {rel}` (your code is "
                     f"not in the notebooks) or grade from a fresh clone of the course.")


def select_notebooks(selectors: list[str] | None) -> list[Path]:
    paths = sorted((COURSE / "notebooks").glob(NOTEBOOK_GLOB))
    if not selectors:
        return paths
    unknown = [s for s in selectors if not any(p.stem == s or p.stem.startswith(s) for p in paths)]
    if unknown:
        raise GradeError(f"no notebook matches {', '.join(unknown)}; the notebooks are: {', '.join(p.stem for p in paths)}")
    return [p for p in paths if any(p.stem == s or p.stem.startswith(s) for s in selectors)]


@dataclasses.dataclass
class Plan:
    """What every submission in the batch is graded on, and with which limits."""

    notebooks: dict[str, bytes]  # stem → pristine notebook
    cells: dict[str, dict[int, list[str]]]  # stem → check cell → task ids (graded tasks only)
    all_cells: dict[str, dict[int, list[str]]]  # every check cell, graded or not
    task_ids: list[str]
    hidden: Path | None
    cell_timeout: float
    timeout: float
    memory_mb: int
    workers: int
    scratch: Path  # outside every workspace: pristine template, student files, reports
    keep: bool = False

    @property
    def template(self) -> Path:
        return self.scratch / "template"

    @property
    def shadow(self) -> Path:
        return self.scratch / "shadow"

    @property
    def max_points(self) -> int:
        return sum(tasks.get(t).points for t in self.task_ids)


def make_plan(args, scratch: Path) -> tuple[Plan, list[str]]:
    """The notebooks and tasks to grade, and notes on what is left out."""
    notes = []
    wanted = [tasks.get(t).id for t in args.tasks] if args.tasks else None
    if args.notebooks is None and wanted:
        paths = [COURSE / tasks.get(t).notebook for t in wanted]
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise GradeError(f"{missing[0].relative_to(COURSE)} does not exist (needed for the tasks asked for)")
        paths = sorted(set(paths))
    else:
        paths = select_notebooks(args.notebooks)
    if not paths:
        raise GradeError(f"no notebooks to grade in {COURSE / 'notebooks'}")
    stems = {p.stem for p in paths}
    if wanted is None:
        wanted = [t.id for t in tasks.TASKS if Path(t.notebook).stem in stems]
        absent = [t.id for t in tasks.TASKS if Path(t.notebook).stem not in stems]
        if absent and not args.notebooks:
            notes.append(f"not graded (their notebooks do not exist yet): tasks {', '.join(absent)}")
    notebooks = {p.stem: pristine_notebook(p) for p in paths}
    all_cells = {stem: check_cells(json.loads(data)) for stem, data in notebooks.items()}
    cells = {stem: {i: [t for t in ids if t in wanted] for i, ids in by_cell.items() if set(ids) & set(wanted)}
             for stem, by_cell in all_cells.items()}
    covered = {t for by_cell in cells.values() for ids in by_cell.values() for t in ids}
    unchecked = [t for t in wanted if t not in covered]
    if unchecked:
        raise GradeError(f"no check cell for task(s) {', '.join(unchecked)} in the notebooks graded "
                         f"({', '.join(sorted(stems))}): add the task's notebook with --notebooks")
    hidden = None if args.no_hidden_tests else args.hidden_tests
    if hidden is not None:
        hidden = Path(hidden).resolve()
        if not hidden.is_dir():
            raise GradeError(f"--hidden-tests {hidden}: no such directory")
        text = "".join(p.read_text(encoding="utf-8") for p in hidden.rglob("*.py"))
        untested = [t for t in wanted if f'task("{t}")' not in text]
        if untested:
            raise GradeError(f"the hidden tests in {hidden} have no test marked task(...) for task(s) {', '.join(untested)}")
    plan = Plan(notebooks, cells, all_cells, wanted, hidden, args.cell_timeout, args.timeout, args.memory_mb, 1,
                scratch, args.keep)
    return plan, notes


# ---------------------------------------------------------------- the workspace


def _copytree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints",
                                                            ".pytest_cache", ".hypothesis"))


def build_template(plan: Plan) -> None:
    """The pristine workspace every submission starts from (and is restored from), kept outside
    the workspaces and read-only, plus the directory that shadows `solutions`."""
    t = plan.template
    # The provided modules; the exercise modules come from each submission's folder instead.
    _copytree(COURSE / "minilm", t / "minilm")
    for module in tasks.EXERCISE_MODULES:
        (t / "minilm" / f"{module}.py").unlink(missing_ok=True)
    if (COURSE / "tests").is_dir():
        _copytree(COURSE / "tests", t / "tests")
    (t / "notebooks").mkdir()
    for f in (COURSE / "notebooks").iterdir():  # sanitize.cfg and anything else the notebooks read
        if f.is_file() and f.suffix != ".ipynb":
            shutil.copy2(f, t / "notebooks" / f.name)
    for stem, data in plan.notebooks.items():
        (t / "notebooks" / f"{stem}.ipynb").write_bytes(data)
    for name in ("conftest.py", "pyproject.toml"):
        if (COURSE / name).exists():
            shutil.copy2(COURSE / name, t / name)
    if plan.hidden:
        _copytree(plan.hidden, t / "hidden_tests")
    (plan.shadow / "solutions").mkdir(parents=True)
    (plan.shadow / "solutions" / "__init__.py").write_text(SHADOW_INIT, encoding="utf-8")
    (plan.shadow / "sitecustomize.py").write_text(SHADOW_SITECUSTOMIZE, encoding="utf-8")
    _read_only(plan.template)
    _read_only(plan.shadow)


def _read_only(root: Path) -> None:
    """Files and folders a student's code cannot delete or change without chmod-ing them first."""
    for p in sorted(root.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    root.chmod(0o555)


def _writable(root: Path) -> None:
    if root.exists():
        for p in [root, *root.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)


def _rmtree(root: Path) -> None:
    _writable(root)
    shutil.rmtree(root, ignore_errors=True)


def restore(template: Path, student: Path, ws: Path) -> None:
    """Put back every file in the workspace that is missing or differs from the template (the
    course's files) or from the submission's folder (its exercise modules)."""
    pairs = [(src, ws / src.relative_to(template)) for src in template.rglob("*")]
    pairs += [(src, ws / "minilm" / src.name) for src in student.glob("*.py")]
    for src, dst in pairs:
        if src.is_dir():
            continue
        try:
            if dst.is_file() and not dst.is_symlink() and dst.read_bytes() == src.read_bytes():
                continue
        except OSError:
            pass
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex}")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)


def fresh_workspace(plan: Plan, sub: Submission, ws: Path) -> None:
    """A new workspace: the template, with the student's exercise modules in minilm/."""
    if ws.exists():
        _rmtree(ws)
    _copytree(plan.template, ws)
    _writable(ws)
    for src in sub.folder.glob("*.py"):
        shutil.copyfile(src, ws / "minilm" / src.name)


# ---------------------------------------------------------------- submissions


@dataclasses.dataclass
class Submission:
    name: str
    source: str
    folder: Path  # every exercise module: the student's, or the stub where one is missing (read-only)
    missing: list[str]


def _is_git_url(arg: str) -> bool:
    return "://" in arg or arg.startswith("git@") or (arg.endswith(".git") and not Path(arg).is_file())


def _package_root(files: list[tuple[str, ...]], where: str) -> tuple[str, ...]:
    """The folder holding minilm/ among `files` (path parts): the top, or one folder down."""
    expected = ", ".join(f"minilm/{m}.py" for m in tasks.EXERCISE_MODULES[:2])
    found = {parts[:-2] for parts in files
             if len(parts) in (2, 3) and parts[-2] == "minilm" and parts[-1] in {f"{m}.py" for m in tasks.EXERCISE_MODULES}}
    if not found:
        raise GradeError(f"no minilm package found in {where} (expected {expected} … at the top or one folder down)")
    top = min(len(p) for p in found)
    roots = sorted(p for p in found if len(p) == top)
    if len(roots) > 1:
        raise GradeError(f"{where} holds several minilm packages ({', '.join('/'.join(r + ('minilm',)) for r in roots)}): "
                         f"submit one")
    return roots[0]


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "submission"


def resolve(arg: str, dest: Path, timeout: float = 300) -> Submission:
    """Read a submission's exercise modules into `dest` (outside any workspace)."""
    dest.mkdir(parents=True)
    if _is_git_url(arg):
        clone = dest / "clone"
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            r = subprocess.run(["git", "clone", "--depth", "1", "--quiet", arg, str(clone)], capture_output=True,
                               text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise GradeError(f"git clone {arg} did not finish in {timeout:.0f} s") from None
        if r.returncode != 0:
            raise GradeError(f"git clone {arg} failed: {r.stderr.strip()[-300:]}")
        name = re.sub(r"\.git$", "", arg.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
        sub = _from_dir(clone, arg, name, dest)
        _rmtree(clone)
        return sub
    path = Path(arg)
    if path.is_dir():
        return _from_dir(path, arg, path.resolve().name, dest)
    if path.is_file() and zipfile.is_zipfile(path):
        return _from_zip(path, arg, dest)
    raise GradeError(f"{arg}: not a directory, a .zip or a git URL")


def _collect(sources: dict[str, bytes], source: str, name: str, dest: Path) -> Submission:
    folder = dest / "minilm"
    folder.mkdir()
    missing = [m for m in tasks.EXERCISE_MODULES if m not in sources]
    for module in tasks.EXERCISE_MODULES:
        data = sources[module] if module in sources else (COURSE / "minilm" / f"{module}.py").read_bytes()
        if len(data) > MAX_MODULE_BYTES:
            raise GradeError(f"{source}: minilm/{module}.py is {len(data):,} bytes, over the {MAX_MODULE_BYTES:,}-byte limit")
        (folder / f"{module}.py").write_bytes(data)
    _read_only(folder)
    return Submission(name, source, folder, missing)


def _from_dir(root: Path, source: str, name: str, dest: Path) -> Submission:
    files = [p.relative_to(root).parts for p in [*root.glob("minilm/*.py"), *root.glob("*/minilm/*.py")]]
    pkg = _package_root(files, source)
    if pkg:
        name = pkg[0]
    folder = root.joinpath(*pkg, "minilm")
    sources = {m: (folder / f"{m}.py").read_bytes() for m in tasks.EXERCISE_MODULES if (folder / f"{m}.py").is_file()}
    return _collect(sources, source, name, dest)


def _from_zip(path: Path, source: str, dest: Path) -> Submission:
    with zipfile.ZipFile(path) as z:
        members = {tuple(p for p in i.filename.split("/") if p): i for i in z.infolist() if not i.is_dir()}
        pkg = _package_root(list(members), path.name)
        sources = {}
        for m in tasks.EXERCISE_MODULES:
            info = members.get((*pkg, "minilm", f"{m}.py"))
            if info is not None:
                if info.file_size > MAX_MODULE_BYTES:
                    raise GradeError(f"{path.name}: minilm/{m}.py is {info.file_size:,} bytes, over the limit")
                sources[m] = z.read(info)
    return _collect(sources, source, pkg[0] if pkg else path.stem, dest)


# ---------------------------------------------------------------- running one submission's processes


def grading_env(plan: Plan, ws: Path, student: Path) -> dict[str, str]:
    from minilm.nbenv import kernel_env

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MINILM_", "PYTEST_", "COV_", "JPY_")) and k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env.update(kernel_env())  # the environment the stored outputs were made in (this course's copy)
    env.update({
        "MINILM_IMPL": "minilm",  # the student's code
        # The shadow first (no `solutions`), then the workspace, so its minilm wins over any installed one.
        "PYTHONPATH": os.pathsep.join([str(plan.shadow), str(ws)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "COLUMNS": "200",
        ENV_TEMPLATE: os.pathsep.join([str(plan.template), str(student)]),
        ENV_MEMORY: str(plan.memory_mb),
        ENV_TEST_TIMEOUT: str(plan.cell_timeout),
    })
    return env


@dataclasses.dataclass
class Run:
    returncode: int | None  # None: killed at its time limit
    stdout: str


def kill_tokened(prefix: str) -> None:
    """Kill every process whose environment holds a token starting with `prefix`: Jupyter
    kernels run in process groups of their own, and outlive their parent if it is killed."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return
    needle = f"{ENV_TOKEN}={prefix}".encode()
    for p in proc_dir.iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if any(v.startswith(needle) for v in (p / "environ").read_bytes().split(b"\0")):
                    os.kill(int(p.name), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def start(cmd: list[str], ws: Path, env: dict[str, str], out: Path, token: str) -> subprocess.Popen:
    """Start a grading process in a session of its own, marked with `token` (unique to it)."""
    kw = {"start_new_session": True} if os.name == "posix" else {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    handle = open(out, "wb")
    proc = subprocess.Popen(cmd, cwd=ws, env={**env, ENV_TOKEN: token}, stdin=subprocess.DEVNULL, stdout=handle,
                            stderr=subprocess.STDOUT, **kw)
    proc._grade = (out, handle, token)  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen, deadline: float) -> Run:
    """Wait for a process until `deadline`, then kill it, its process group and all it started."""
    out, handle, token = proc._grade  # type: ignore[attr-defined]
    try:
        rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        rc = None
    if os.name == "posix":
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        proc.kill()
    kill_tokened(token)
    proc.wait()
    handle.close()
    return Run(rc, Path(out).read_text(encoding="utf-8", errors="replace"))


def _pytest_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "minilm.grade", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-q", "--color=no", "-o", "console_output_style=classic", *args]


def _xdist(workers: int) -> list[str]:
    import importlib.util

    if workers > 1 and importlib.util.find_spec("xdist") is not None:
        return ["-n", str(workers), "--dist", "loadscope"]
    return ["-p", "no:xdist"] if importlib.util.find_spec("xdist") is not None else []


# ---------------------------------------------------------------- results of one submission


@dataclasses.dataclass
class Cell:
    notebook: str
    number: int
    status: str  # passed | differs | error | timeout | crashed | not run
    detail: str = ""


_ANSI = re.compile(r"\x1b\[[0-9;]*m|#x1B\[[0-9;]*m")


def parse_junit(path: Path) -> dict[tuple[str, int], Cell]:
    """nbval's JUnit report → one Cell per (notebook stem, cell number)."""
    cells = {}
    if not path.exists():
        return cells
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return cells
    for case in root.iter("testcase"):
        m = re.search(r"([^./\\]+)\.ipynb$", case.get("classname", ""))
        n = re.fullmatch(r"Cell (\d+)", case.get("name", ""))
        if not (m and n):
            continue
        key = (m.group(1), int(n.group(1)))
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if problem is not None:
            text = _ANSI.sub("", (problem.get("message") or "") + "\n" + (problem.text or ""))
            cells[key] = Cell(*key, *_classify(text))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":  # nbval: ran after a timeout, failed
            cells[key] = Cell(*key, "error", "failed after an earlier cell of this notebook timed out")
        elif skipped is not None:
            cells[key] = Cell(*key, "not run", skipped.get("message") or "skipped")
        else:
            cells[key] = Cell(*key, "passed")
    return cells


def _classify(text: str) -> tuple[str, str]:
    if KERNEL_DIED in text:
        return "crashed", "the kernel died (the process crashed or exited)"
    if "Kernel dead on test start" in text:
        return "not run", "the kernel had died in an earlier cell"
    if "Timeout of" in text:
        return "timeout", "timed out"
    if "Cell outputs differ" in text:
        got = re.findall(r"^\+\s*(.+)$", text, flags=re.M)
        return "differs", ("output differs from the reference" + (f": {got[0].strip()[:300]}" if got else ""))
    err = re.findall(r"^(\w+(?:Error|Exception|Exit|Interrupt)\b.*)$", text, flags=re.M)
    return "error", ("raised " + err[-1].strip()[:300]) if err else "failed"


def run_notebooks(plan: Plan, ws: Path, env: dict, stems: list[str], skip: dict[str, set[int]], label: str,
                  token: str) -> tuple[subprocess.Popen, Path]:
    """Start nbval over `stems` (cells in `skip` tagged to be skipped: they hung in a previous pass)."""
    for stem, numbers in skip.items():
        nb = json.loads(plan.notebooks[stem])
        code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
        for i in numbers:
            code[i].setdefault("metadata", {}).setdefault("tags", []).append("nbval-skip")
        (ws / "notebooks" / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    junit = ws.parent / f"{label}.xml"
    cmd = _pytest_args(*[f"notebooks/{s}.ipynb" for s in stems], f"--nbval-cell-timeout={plan.cell_timeout:g}",
                     f"--junitxml={junit}", *_xdist(plan.workers))
    return start(cmd, ws, env, ws.parent / f"{label}.log", f"{token}.{label}"), junit


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []  # the process died before logging anything
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


@dataclasses.dataclass
class HiddenTest:
    nodeid: str
    tasks: list[str]
    status: str = "not run"  # passed | failed | timeout | crashed | not run
    detail: str = ""


def run_hidden(plan: Plan, ws: Path, env: dict, deadline: float, token: str) -> dict[str, HiddenTest]:
    """The hidden tests, rerun past crashes: a test that kills its process (os._exit, a segfault,
    a hard timeout) fails, as do the not-yet-run tests of its task, and the rest run again."""
    tests: dict[str, HiddenTest] = {}
    for attempt in range(len(plan.task_ids) + 2):
        log = ws.parent / f"hidden-{attempt}.jsonl"
        deselect = [a for t in tests.values() if t.status != "not run" for a in ("--deselect", t.nodeid)]
        cmd = _pytest_args("hidden_tests", *[a for t in plan.task_ids for a in ("--task", t)], "-p", "no:nbval",
                         "-p", "no:xdist", f"--junitxml={ws.parent / f'hidden-{attempt}.xml'}", *deselect)
        proc = start(cmd, ws, {**env, ENV_LOG: str(log)}, ws.parent / f"hidden-{attempt}.log", f"{token}.hidden-{attempt}")
        run = finish(proc, deadline)
        started = None
        for row in read_log(log):
            if row["event"] == "collected":
                tests.setdefault(row["nodeid"], HiddenTest(row["nodeid"], row["tasks"]))
            elif row["event"] == "start":
                started = row["nodeid"]
            elif row["event"] == "report" and row["nodeid"] in tests:
                t, outcome = tests[row["nodeid"]], row["outcome"]
                if (outcome != "passed" or row["when"] == "call") and t.status in ("not run", "passed"):
                    if outcome == "passed":
                        t.status, t.detail = "passed", ""
                    elif outcome == "skipped":  # a hidden test must run to count
                        t.status, t.detail = "failed", "skipped: " + row["detail"]
                    else:
                        timed_out = "TimeoutError: hidden test" in row["detail"]
                        t.status = "timeout" if timed_out else "failed"
                        t.detail = f"over the {plan.cell_timeout:g} s limit" if timed_out else row["detail"]
                if row["when"] == "teardown":
                    started = None
        if run.returncode is None:  # the submission's time is up
            for t in tests.values():
                if t.status == "not run":
                    t.status, t.detail = "timeout", "the submission's time limit was reached"
            break
        pending = [t for t in tests.values() if t.status == "not run"]
        if not pending:
            break
        crashed = tests.get(started) if started else None
        if crashed is None:  # died outside any test (or collected nothing): nothing more to learn
            for t in pending:
                t.status, t.detail = "crashed", f"the test process exited ({_exit_text(run.returncode)})"
            break
        why = f"the test process died in {crashed.nodeid.rsplit('::', 1)[-1]} ({_exit_text(run.returncode)})"
        crashed.status, crashed.detail = "crashed", why
        for t in pending:
            if set(t.tasks) & set(crashed.tasks):
                t.status, t.detail = "crashed", why
    return tests


def _exit_text(rc: int | None) -> str:
    if rc is None:
        return "killed at the time limit"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def run_verdicts(ws: Path, env: dict, ids: list[str], per_task: float, deadline: float, token: str) -> dict[str, dict]:
    """The checks' verdicts (what `python -m minilm check --json` prints) for `ids`, one line per
    task as each finishes, so a check that hangs or crashes costs only its own verdict."""
    verdicts: dict[str, dict] = {}
    todo = list(ids)
    while todo and time.monotonic() < deadline:
        cmd = [sys.executable, "-m", "minilm.grade", "--verdicts", *todo]
        label = f"verdicts-{len(verdicts)}"
        proc = start(cmd, ws, env, ws.parent / f"{label}.log", f"{token}.{label}")
        run = finish(proc, min(deadline, time.monotonic() + per_task * len(todo) + 30))
        for line in run.stdout.splitlines():
            if line.startswith(VERDICT_PREFIX):
                try:
                    v = json.loads(line[len(VERDICT_PREFIX):])
                except ValueError:
                    continue
                if v.get("task") in todo and v["task"] not in verdicts:
                    verdicts[v["task"]] = v
        left = [t for t in todo if t not in verdicts]
        if not left:
            break
        stuck = left[0]  # the task being checked when the process died or hung
        verdicts[stuck] = {"task": stuck, "status": "error", "mistake": None,
                           "message": "the check did not finish: " + ("it timed out" if run.returncode is None
                                                                       else f"the process died ({_exit_text(run.returncode)})")}
        todo = left[1:]
    return verdicts


def verify_no_solutions(plan: Plan, env: dict, ws: Path) -> None:
    """Refuse to grade unless `import solutions` fails in the grading environment."""
    probe = "import solutions"
    r = subprocess.run([sys.executable, "-c", probe], cwd=ws, env={**env, "MINILM_IMPL": "minilm"},
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0 or BLOCKED not in r.stderr:
        raise GradeError(f"`solutions` is importable in the grading environment; refusing to grade\n{r.stderr[-500:]}")


# ---------------------------------------------------------------- grading one submission


def grade(plan: Plan, sub: Submission) -> dict:
    """Grade one submission; never raises for anything the submission does."""
    t0 = time.monotonic()
    deadline = t0 + plan.timeout
    home = plan.scratch / "runs" / sub.name  # reports and logs, outside the workspace
    home.mkdir(parents=True)
    ws = home / "ws"
    token = uuid.uuid4().hex  # every process of this submission carries a token starting with it
    env = grading_env(plan, ws, sub.folder)
    problems = [f"minilm/{m}.py is missing: graded as the stub" for m in sub.missing]
    timings: dict[str, float] = {}
    try:
        fresh_workspace(plan, sub, ws)
        stems = list(plan.notebooks)
        # The notebooks (with xdist) and the hidden tests run side by side, each in its own processes
        # and its own workspace, so files the code deletes in one cannot break the other.
        nb_proc, junit = run_notebooks(plan, ws, env, stems, {}, "nbval-0", token)
        hidden = {}
        if plan.hidden:
            hws = home / "ws-hidden"
            fresh_workspace(plan, sub, hws)
            hidden = run_hidden(plan, hws, grading_env(plan, hws, sub.folder), deadline, token)
        timings["hidden tests"] = time.monotonic() - t0
        nb_run = finish(nb_proc, deadline)
        timings["notebooks"] = time.monotonic() - t0
        cells = parse_junit(junit)
        if nb_run.returncode is None:
            problems.append(f"the notebooks did not finish within the submission's time limit ({plan.timeout:g} s)")
        elif not cells:
            problems.append(f"the notebook run produced no results ({_exit_text(nb_run.returncode)}): "
                            + nb_run.stdout.strip()[-300:])
        # After a cell times out, nbval still runs the rest of its notebook, but a kernel that died or
        # could not be interrupted is gone. If a later check cell did not pass, run the notebook
        # again with every cell that hung or crashed so far skipped, so later tasks still earn points
        # (only tasks that passed their hidden tests could).
        hidden_ok = {t for t in plan.task_ids
                     if not plan.hidden or all(h.status == "passed" for h in hidden.values() if t in h.tasks)}
        skip: dict[str, set[int]] = {}
        for attempt in range(1, 3):
            redo = {}
            for stem in stems:
                hung = {c.number for c in cells.values() if c.notebook == stem and c.status in ("timeout", "crashed")}
                hung |= skip.get(stem, set())
                later = [i for i, ids in plan.cells[stem].items() if hung and i > min(hung) and i not in hung
                         and set(ids) & hidden_ok and cells.get((stem, i), Cell(stem, i, "not run")).status != "passed"]
                if hung - skip.get(stem, set()) and later:
                    redo[stem] = hung
            if not redo or time.monotonic() > deadline - plan.cell_timeout:
                break
            skip.update(redo)
            restore(plan.template, sub.folder, ws)
            proc, junit = run_notebooks(plan, ws, env, list(redo), redo, f"nbval-{attempt}", token)
            finish(proc, deadline)
            for key, cell in parse_junit(junit).items():
                if key[1] not in redo[key[0]] and (cell.status == "passed" or cells.get(key, cell).status != "passed"):
                    cells[key] = cell
        result = score(plan, sub, cells, hidden)
        failing = []
        for task_id, r in result["tasks"].items():
            if r["points"] == r["max"]:
                continue
            statuses = {c["status"] for c in r["cells"]} | {t["status"] for t in (r["hidden"] or {}).get("failed", [])}
            # Its check would only hang or crash again: say so instead of asking it.
            if "timeout" in statuses:
                r["verdict"] = {"task": task_id, "status": "error", "mistake": None,
                                "message": f"timed out: your code ran longer than the {plan.cell_timeout:g} s limit"}
            elif "crashed" in statuses:
                r["verdict"] = {"task": task_id, "status": "error", "mistake": None,
                                "message": "crashed: your code ended the Python process (os._exit, a segfault, …)"}
            else:
                failing.append(task_id)
        if failing and time.monotonic() < deadline:
            restore(plan.template, sub.folder, ws)
            for task_id, v in run_verdicts(ws, env, failing, plan.cell_timeout, deadline, token).items():
                result["tasks"][task_id]["verdict"] = v
    except Exception as e:  # a bug or an OS problem: report it for this submission, go on with the batch
        result = score(plan, sub, {}, {})
        problems.append(f"grading failed: {type(e).__name__}: {e}")
    finally:
        kill_tokened(token)
        if not plan.keep:
            _rmtree(ws)
    result["problems"] = problems
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["timings"] = {k: round(v, 1) for k, v in timings.items()}
    return result


def score(plan: Plan, sub: Submission, cells: dict[tuple[str, int], Cell], hidden: dict[str, HiddenTest]) -> dict:
    by_task: dict[str, dict] = {}
    checked = {(stem, i) for stem, by_cell in plan.all_cells.items() for i in by_cell}
    for task_id in plan.task_ids:
        task = tasks.get(task_id)
        mine = [cells.get((stem, i), Cell(stem, i, "not run", "the notebook did not reach this cell"))
                for stem, by_cell in plan.cells.items() for i, ids in by_cell.items() if task_id in ids]
        tests = [t for t in hidden.values() if task_id in t.tasks]
        notebook_ok = all(c.status == "passed" for c in mine)
        hidden_ok = not plan.hidden or (bool(tests) and all(t.status == "passed" for t in tests))
        by_task[task_id] = {
            "points": task.points if notebook_ok and hidden_ok else 0,
            "max": task.points,
            "cells": [dataclasses.asdict(c) for c in mine],
            "hidden": None if not plan.hidden else {
                "passed": sum(t.status == "passed" for t in tests), "total": len(tests),
                "failed": [dataclasses.asdict(t) for t in tests if t.status != "passed"]},
        }
    other = sorted((c for key, c in cells.items() if key not in checked and c.status != "passed"),
                   key=lambda c: (c.notebook, c.number))
    return {
        "student": sub.name,
        "source": sub.source,
        "total": sum(r["points"] for r in by_task.values()),
        "max": plan.max_points,
        "hidden_tests": plan.hidden is not None,
        "tasks": by_task,
        "other_cells": [dataclasses.asdict(c) for c in other],
    }


# ---------------------------------------------------------------- reports


def feedback(result: dict) -> str:
    lines = [f"# minilm grade: {result['student']}", "",
             f"**{result['total']} / {result['max']} points** (source: `{result['source']}`)", ""]
    if not result["hidden_tests"]:
        lines += ["No hidden tests were run: these are the notebook points only. Your instructor's grade also "
                  "requires each task's hidden tests to pass.", ""]
    lines += ["| task | title | points |", "|---|---|---|"]
    for task_id, r in result["tasks"].items():
        mark = "✓" if r["points"] == r["max"] else "✗"
        lines.append(f"| {task_id} | {tasks.get(task_id).title} | {mark} {r['points']}/{r['max']} |")
    lines.append("")
    for task_id, r in result["tasks"].items():
        if r["points"] == r["max"]:
            continue
        task = tasks.get(task_id)
        lines += [f"## Task {task_id}: {task.title} (`{task.function}` in `{task.file}`)", ""]
        v = r.get("verdict")
        if v:
            lines.append(f"- check: {v['message']}")
            if v.get("mistake"):
                lines.append(f"- recognized mistake: `{v['mistake']}`")
        for c in r["cells"]:
            if c["status"] != "passed":
                lines.append(f"- check cell `notebooks/{c['notebook']}.ipynb::Cell {c['number']}`: {c['status']}"
                             + (f" ({c['detail']})" if c["detail"] and c["status"] != "differs" else ""))
        h = r["hidden"]
        if h and h["failed"]:
            lines.append(f"- hidden tests: {h['passed']}/{h['total']} passed")
            for t in h["failed"]:
                lines.append(f"  - `{t['nodeid'].rsplit('::', 1)[-1]}`: {t['status']}"
                             + (f" ({t['detail'].splitlines()[0][:200]})" if t["detail"] and t["status"] != "failed" else ""))
        elif h is not None and h["total"] == 0:
            lines.append("- hidden tests: none ran")
        lines.append("")
    if result["other_cells"]:
        lines += ["## Other cells that failed", ""]
        for c in result["other_cells"]:
            lines.append(f"- `notebooks/{c['notebook']}.ipynb::Cell {c['number']}`: {c['status']}"
                         + (f" ({c['detail']})" if c["detail"] else ""))
        lines.append("")
    if result["problems"]:
        lines += ["## Problems", "", *[f"- {p}" for p in result["problems"]], ""]
    return "\n".join(lines)


def write_reports(out: Path, plan: Plan, results: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "source", *plan.task_ids, "total", "max"])
        for r in results:
            w.writerow([r["student"], r["source"], *(r["tasks"][t]["points"] for t in plan.task_ids), r["total"], r["max"]])
    summary = {"max": plan.max_points, "tasks": {t: tasks.get(t).points for t in plan.task_ids},
               "notebooks": list(plan.notebooks), "hidden_tests": plan.hidden is not None, "students": results}
    (out / "grades.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    for r in results:
        (out / "feedback" / f"{r['student']}.md").write_text(feedback(r), encoding="utf-8")


# ---------------------------------------------------------------- command line


def default_hidden_tests() -> Path | None:
    path = COURSE / "solutions" / "hidden_tests"
    return path if path.is_dir() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:5]))
    parser.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="directories, .zip files or git URLs")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="where grades.csv, grades.json and feedback/ go")
    parser.add_argument("--hidden-tests", type=Path, default=default_hidden_tests(), metavar="DIR",
                        help="hidden tests each task must also pass (default: solutions/hidden_tests when it exists)")
    parser.add_argument("--no-hidden-tests", action="store_true", help="grade on the notebooks only")
    parser.add_argument("--notebooks", nargs="+", metavar="NAME", help="grade only these notebooks (names or number prefixes)")
    parser.add_argument("--tasks", nargs="+", metavar="ID", help="grade only these tasks")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="CPU cores to use (default: all)")
    parser.add_argument("--workers", type=int, help="pytest-xdist workers per submission (default: from --jobs)")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds per notebook cell or hidden test")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per submission, all in all")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per process (POSIX)")
    parser.add_argument("--require-all", action="store_true",
                        help="exit 1 unless every graded task earned its points (for CI, e.g. GitHub Classroom)")
    parser.add_argument("--keep", action="store_true", help="keep the workspaces and logs (printed at the end)")
    parser.add_argument("--verdicts", nargs="+", metavar="ID", help=argparse.SUPPRESS)  # internal: see run_verdicts
    args = parser.parse_args(argv)
    if args.verdicts:
        return _print_verdicts(args.verdicts)
    if not args.submissions:
        parser.error("give at least one submission (a directory, a .zip or a git URL), e.g. `.` for this checkout")
    for t in args.tasks or []:
        try:
            tasks.get(t)
        except ValueError as e:
            parser.error(str(e))
    scratch = Path(tempfile.mkdtemp(prefix="minilm-grade-"))
    try:
        return _grade_all(args, scratch)
    except GradeError as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"workspaces and logs kept in {scratch}")
        else:
            _rmtree(scratch)


def _grade_all(args, scratch: Path) -> int:
    plan, notes = make_plan(args, scratch)
    build_template(plan)
    subs, names = [], set()
    for i, arg in enumerate(args.submissions):
        sub = resolve(arg, scratch / "submissions" / str(i))
        base, n = _safe_name(sub.name), 1
        sub.name = base
        while sub.name in names:
            n += 1
            sub.name = f"{base}-{n}"
        names.add(sub.name)
        subs.append(sub)
    # Cores: one submission at a time gets them all as xdist workers; a batch shares them out.
    jobs = max(1, args.jobs)
    concurrent_subs = min(len(subs), jobs)
    plan.workers = args.workers or max(1, jobs // concurrent_subs)
    probe_ws = scratch / "probe"
    probe_ws.mkdir()
    verify_no_solutions(plan, grading_env(plan, probe_ws, probe_ws), probe_ws)
    for note in notes:
        print(f"grade: {note}")
    where = f"hidden tests from {plan.hidden}" if plan.hidden else \
        "no hidden tests available: notebook points only (the instructor's grade also runs hidden tests)"
    print(f"grade: {len(subs)} submission(s) on {', '.join(plan.notebooks)}; {where}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(concurrent_subs) as pool:
        futures = {pool.submit(grade, plan, s): s for s in subs}
        results = {}
        for f in concurrent.futures.as_completed(futures):
            r = f.result()
            results[r["student"]] = r
            print(f"  {r['student']}: {r['total']}/{r['max']} points ({r['seconds']:.0f} s)", flush=True)
    ordered = [results[s.name] for s in subs]
    write_reports(args.out, plan, ordered)
    print(f"grade: wrote {args.out / 'grades.csv'}, {args.out / 'grades.json'} and {args.out / 'feedback'}/")
    if args.require_all and any(r["total"] < r["max"] for r in ordered):
        for r in ordered:
            if r["total"] < r["max"]:
                print((args.out / "feedback" / f"{r['student']}.md").read_text(encoding="utf-8"))
        return 1
    return 0


def _print_verdicts(ids: list[str]) -> int:
    """Internal (run in the workspace): each task's check verdict as one JSON line, flushed."""
    _limit_memory()
    from minilm import checks

    for task_id in ids:
        v = checks.run(task_id)
        print(VERDICT_PREFIX + json.dumps(dataclasses.asdict(v), ensure_ascii=False), flush=True)
    return 0


# ---------------------------------------------------------------- the pytest plugin (-p minilm.grade)
# Loaded only by the grader's own pytest runs; configured through the environment variables above.


def _limit_memory() -> None:
    """Cap this process's address space (inherited by the kernels and workers it starts)."""
    mb = os.environ.get(ENV_MEMORY)
    if not mb:
        return
    try:
        import resource
    except ImportError:  # not POSIX: no limit
        return
    limit = int(mb) * 2**20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


def _log(row: dict) -> None:
    path = os.environ.get(ENV_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def pytest_configure(config):
    if os.environ.get(ENV_TOKEN):
        _limit_memory()


def pytest_collection_finish(session):
    for item in session.items:
        _log({"event": "collected", "nodeid": item.nodeid, "tasks": [m.args[0] for m in item.iter_markers("task")]})


def pytest_runtest_logstart(nodeid, location):
    _log({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome == "failed" or report.when == "teardown":
        detail = "" if report.passed else str(report.longrepr)[-2000:]
        _log({"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "detail": detail})


_restored: set[str] = set()
_timed_out: set[str] = set()  # tasks one of whose hidden tests timed out in this process


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a notebook's kernel starts (nbval starts it when its first cell is set up), put
    back any course file an earlier notebook's code deleted or changed. A hidden test whose
    task already timed out fails at once rather than spend the time limit again."""
    late = {m.args[0] for m in item.iter_markers("task")} & _timed_out
    if late:
        pytest.fail(f"not run: an earlier hidden test of task {', '.join(sorted(late))} timed out", pytrace=False)
    sources = os.environ.get(ENV_TEMPLATE)
    if sources and item.path.suffix == ".ipynb" and str(item.path) not in _restored:
        _restored.add(str(item.path))
        template, student = sources.split(os.pathsep)
        restore(Path(template), Path(student), Path(item.config.rootpath))


def _watch_kernel(kernel) -> None:
    """nbval waits the whole cell timeout for a reply from a kernel that has died (os._exit, a
    segfault): wait in slices instead and fail the cell as soon as the kernel is gone."""
    if kernel is None or getattr(kernel, "_grade_watched", False):
        return
    from queue import Empty

    original = kernel.get_message

    def get_message(stream, timeout=None):
        if stream != "shell" or timeout is None:
            return original(stream, timeout=timeout)
        end = time.monotonic() + timeout
        while True:
            try:
                return original(stream, timeout=max(0.0, min(1.0, end - time.monotonic())))
            except Empty:
                if not kernel.is_alive():
                    raise RuntimeError(KERNEL_DIED) from None
                if time.monotonic() >= end:
                    raise

    kernel.get_message, kernel._grade_watched = get_message, True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A per-test time limit for the hidden tests: SIGALRM raises in the test; if the test does
    not give up (stuck in C code, or catching it), faulthandler ends the process, which the
    grader reads as a crash of that test. Notebook cells get _watch_kernel."""
    if item.path.suffix == ".ipynb" and os.environ.get(ENV_TEMPLATE):
        _watch_kernel(getattr(item.parent, "kernel", None))
    seconds = float(os.environ.get(ENV_TEST_TIMEOUT) or 0)
    if not seconds or item.path.suffix != ".py" or not hasattr(signal, "SIGALRM"):
        yield
        return
    import faulthandler

    def alarm(signum, frame):
        _timed_out.update(m.args[0] for m in item.iter_markers("task"))
        raise TimeoutError(f"hidden test exceeded its time limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + 10, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    sys.exit(main())
