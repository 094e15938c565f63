"""Shared by the grader's tests: submissions built from the reference, the stubs and edited regions,
and the grader run as an instructor runs it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minilm.course import tasks
from solutions import make_stubs
from solutions.grading import sandbox

ROOT = tasks.ROOT
NOTEBOOKS = ["01_linear", "03_rmsnorm"]
POINTS = {t: tasks.get(t).points for t in ("1.1", "1.2", "3.1", "3.2")}
P11, P12, P31, P32 = POINTS.values()
ALL = sum(POINTS.values())
CELL_TIMEOUT = 15  # seconds per check cell: the reference passed at 8 with three CPU hogs on two cores
TASK_TIMEOUT = 5  # seconds per task on the grader's inputs, what a hang costs: the reference's take milliseconds

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_path() is None,
                                 reason="bubblewrap (bwrap) is missing or cannot create namespaces here")


def reference(module: str) -> str:
    return (ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8")


def stub(module: str) -> str:
    return make_stubs.stub_source(reference(module), module)


def keep_only(module: str, keep: set[str], source: str | None = None) -> str:
    """The module (the reference, or `source` with its solution markers) with the bodies of the tasks in
    `keep`, stubs for the others."""
    out, drop_end = [], False
    for line in (reference(module) if source is None else source).splitlines(keepends=True):
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


FUTURE = "from __future__ import annotations\n"


def prepend(source: str, code: str) -> str:
    """`code` at the top of a module, after its `from __future__` import."""
    return source.replace(FUTURE, FUTURE + code, 1)


def append(source: str, code: str) -> str:
    """`code` at the end of a module: what it defines replaces the module's own definitions."""
    return source + "\n" + code


def submission(root: Path, name: str, **modules: str | bytes) -> Path:
    """root/name/minilm/: every exercise module a stub unless given."""
    pkg = root / name / "minilm"
    pkg.mkdir(parents=True)
    for module in tasks.EXERCISE_MODULES:
        data = modules.get(module, stub(module))
        (pkg / f"{module}.py").write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return root / name


def expected_line(task_id: str) -> str:
    """The check line the reference's notebook stores for a task."""
    nb = json.loads((ROOT / tasks.get(task_id).notebook).read_text(encoding="utf-8"))
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    return re.search(rf"^✓ Task {re.escape(task_id)} .*$", text, flags=re.M).group(0)


def run_grade(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("MINILM_IMPL", None)
    return subprocess.run([sys.executable, "-m", "solutions.grading", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def course_digest() -> str:
    """A hash of every file of the course a submission could try to poison."""
    h = hashlib.sha256()
    for path in sorted([*(ROOT / "minilm").rglob("*.py"), *(ROOT / "solutions").rglob("*.py"), ROOT / "conftest.py",
                        *(ROOT / "notebooks").glob("*")]):
        if "__pycache__" not in path.parts and path.is_file():
            h.update(path.as_posix().encode() + path.read_bytes())
    return h.hexdigest()


def build_grader_image(scratch: Path) -> None:
    """`minilm grade --sandbox docker`'s image, built as the Dockerfile's header says, in a scratch
    copy of its folder: FROM $MINILM_DOCKER_BASE where set (CI: a Debian 12 image made with
    debootstrap, as no image registry answers there), with the torch wheel found in
    $MINILM_DOCKER_WHEELS (or pip's own --find-links folder) and the CA bundle pip trusts here.
    Docker's layer cache makes a rebuild on the same machine a matter of seconds."""
    context = scratch / "grader-image"
    local = context / "local"
    local.mkdir(parents=True)
    shutil.copy2(sandbox.DOCKERFILE, context / "Dockerfile")
    for folder in (os.environ.get("MINILM_DOCKER_WHEELS") or os.environ.get("PIP_FIND_LINKS", "")).split():
        for wheel in sorted(Path(folder).glob("torch-2.13.0*-cp311-cp311-*linux*_x86_64.whl"))[:1]:
            try:
                os.link(wheel, local / wheel.name)
            except OSError:
                shutil.copy2(wheel, local / wheel.name)
    ca = next((f for f in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE")) if f and os.path.isfile(f)),
              None)
    if ca:
        shutil.copy2(ca, local / "host.crt")
    base = os.environ.get("MINILM_DOCKER_BASE")
    r = subprocess.run(["docker", "build", "--force-rm", "--network", "host",
                        *(["--build-arg", f"BASE={base}"] if base else []),
                        "-t", sandbox.IMAGE, str(context)], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"docker build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
