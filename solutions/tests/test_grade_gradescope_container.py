"""Gradescope's container, simulated for real: the autograder bundle built into a Docker image in
Gradescope's layout, then run per submission as Gradescope runs it.

The image: a bare Debian (MINILM_DOCKER_BASE, default local/debian:bookworm; Gradescope's own
are Ubuntu), the bundle unpacked to /autograder/source and its setup.sh run at build time.
Each submission: a fresh container, as root, under Docker's default seccomp profile (which
forbids the namespaces bubblewrap needs), the upload in /autograder/submission, then
/autograder/run_autograder, which writes /autograder/results/results.json. There the grader
falls back to its `setpriv` sandbox (an unprivileged uid, no namespaces, no network): the
adversaries whose attacks a sandbox must stop (reading, poisoning, forging, daemons, crashes,
the network, memory) score exactly their real work, an honest submission keeps its points, and
the report names the isolation it had. The rest of test_grade.py's batch is refused by the
from-scratch rule or the judge, which the trusted side applies whatever the sandbox; setpriv's
time limit (a hang) is test_grade_sandbox.py's.

The image is cached by Docker's layer cache: the layers that take minutes (what setup.sh
installs with apt, the virtual environment with PyTorch and the course's dependencies) come
before the bundle, so a change to the course rebuilds only the bundle's layer (setup.sh again,
its installs already satisfied). PyTorch comes from the CPU wheel in PIP_FIND_LINKS
(/opt/wheels here), copied into the build context: PyTorch's own index is not reachable here.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minilm.course import tasks
from solutions import export
from solutions.tests.grading_helpers import TASK_TIMEOUT

ROOT = tasks.ROOT
BASE = os.environ.get("MINILM_DOCKER_BASE", "local/debian:bookworm")
IMAGE = "minilm-gradescope-sim"

# What setup.sh installs with apt, and the venv it makes: installed first, in layers of their own
# that no course change invalidates. setup.sh then runs in full on top (its installs satisfied).
DOCKERFILE = """\
ARG BASE
FROM $BASE
# This machine's CA bundle: where a proxy re-signs TLS, pip in the image must trust it too.
COPY ca-bundle.crt /etc/ssl/certs/build-ca-bundle.crt
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 \
    PIP_CERT=/etc/ssl/certs/build-ca-bundle.crt
RUN apt-get update && apt-get install -y --no-install-recommends \\
        bubblewrap python3 python3-venv python3-pip ca-certificates util-linux libseccomp2
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /autograder/venv && /autograder/venv/bin/python -m pip install --upgrade pip \\
    && /autograder/venv/bin/python -m pip install /tmp/wheels/torch-*.whl && rm -rf /tmp/wheels /root/.cache/pip
COPY requirements.txt /tmp/requirements.txt
RUN /autograder/venv/bin/python -m pip install -r /tmp/requirements.txt && rm -rf /root/.cache/pip
COPY data/ /autograder/source/data/
COPY autograder.zip /tmp/autograder.zip
RUN python3 -c 'import zipfile, os; z = zipfile.ZipFile("/tmp/autograder.zip"); \\
[(z.extract(i, "/autograder/source"), os.chmod(os.path.join("/autograder/source", i.filename), \\
  (i.external_attr >> 16) & 0o777 or 0o644)) for i in z.infolist()]' \\
    && rm /tmp/autograder.zip && cp /autograder/source/run_autograder /autograder/run_autograder \\
    && cd /autograder/source && bash ./setup.sh
"""


def docker_ready() -> str | None:
    """Why this test cannot run here, or None."""
    if not shutil.which("docker"):
        return "no docker command"
    try:
        if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
            return "no Docker daemon answers (`docker info` failed)"
        if subprocess.run(["docker", "image", "inspect", BASE], capture_output=True, timeout=30).returncode != 0:
            return f"no base image {BASE} (MINILM_DOCKER_BASE): build one with debootstrap, see docs"
    except (OSError, subprocess.SubprocessError) as e:
        return f"docker does not answer ({type(e).__name__})"
    return None


def torch_wheel() -> Path | None:
    import torch

    version = torch.__version__.split("+")[0]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folders = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split() if p and "://" not in p]
    for folder in folders:
        for wheel in sorted(folder.glob(f"torch-{version}*-{tag}-*linux*x86_64.whl")):
            return wheel
    return None


def requirements() -> str:
    """The course's dependencies and its dev extra (the venv layer below the bundle's)."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return "\n".join([*project["dependencies"], *project["optional-dependencies"]["dev"]]) + "\n"


def build_context(folder: Path, wheel: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(DOCKERFILE, encoding="utf-8")
    (folder / "requirements.txt").write_text(requirements(), encoding="utf-8")
    cas = [os.environ.get(v)
           for v in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")] + ["/etc/ssl/certs/ca-certificates.crt"]
    ca = next((Path(c) for c in cas if c and Path(c).is_file()), None)
    (folder / "ca-bundle.crt").write_bytes(ca.read_bytes() if ca else b"")
    (folder / "wheels").mkdir()
    try:
        os.link(wheel, folder / "wheels" / wheel.name)
    except OSError:
        shutil.copy2(wheel, folder / "wheels" / wheel.name)
    data = folder / "data"
    (data / "tiktoken").mkdir(parents=True)
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if cache and Path(cache).is_dir():
        for f in Path(cache).iterdir():
            shutil.copyfile(f, data / "tiktoken" / f.name)
    shakespeare = os.environ.get("MINILM_TINYSHAKESPEARE")
    if shakespeare and Path(shakespeare).is_file():
        shutil.copyfile(shakespeare, data / "tinyshakespeare.txt")
    assert export.main(["gradescope", str(folder / "autograder.zip")]) == 0
    return folder


def build_image(folder: Path) -> float:
    """Build (or, from Docker's layer cache, mostly reuse) the image; the seconds it took."""
    wheel = torch_wheel()
    if wheel is None:
        pytest.skip("no CPU torch wheel for this Python in PIP_FIND_LINKS (/opt/wheels) to build the image from")
    context = build_context(folder, wheel)
    t0 = time.monotonic()
    r = subprocess.run(["docker", "build", "--network", "host", "--build-arg", f"BASE={BASE}", "-t", IMAGE,
                        str(context)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return time.monotonic() - t0


# ---------------------------------------------------------------- the submissions, as Gradescope runs them


COURSE_INSIDE = "/autograder/source/course"

# What a submission in Gradescope's container reaches for beyond the bubblewrap batch's attacks:
# the reference and the hidden inputs where the bundle keeps them, run if found; the bundle,
# the venv (a .pth or sitecustomize.py would run in the grader itself) and run_autograder
# poisoned; results.json forged.
REACH_IN_THE_CONTAINER = f"""import glob as _g
_found = None
for _p in ["{COURSE_INSIDE}/solutions/linear.py", *_g.glob("/*/*/*/solutions/linear.py"), *_g.glob("/tmp/*/solutions/linear.py"),
           "{COURSE_INSIDE}/solutions/hidden_cases.py"]:
    try:
        _found = _found or open(_p).read()
    except OSError:
        pass
if _found:
    exec(_found.replace("from __future__ import annotations", ""), globals())
_poison = "\\nimport os as _os\\n_os.environ['MINILM_POISONED'] = '1'\\n"
for _p in [*_g.glob("{COURSE_INSIDE}/**/*.py", recursive=True), *_g.glob("/autograder/venv/lib/python3*/site-packages/*.pth"),
           "/autograder/run_autograder", "/autograder/source/autograder.py", "/autograder/source/setup.sh"]:
    try:
        with open(_p, "a") as _f:
            _f.write(_poison)
    except OSError:
        pass
for _p in [*[d + "/sitecustomize.py" for d in _g.glob("/autograder/venv/lib/python3*/site-packages")],
           "/autograder/results/results.json", "/autograder/results/forged.json"]:
    try:
        with open(_p, "w") as _f:
            _f.write('{{"score": 999, "tests": []}}')
    except OSError:
        pass
"""

# A daemon (its own session, a scrubbed environment) that outlives the worker if it can: it
# rewrites results.json and the grader's files, and kills every process of another user (the
# grader, run_autograder) that it may signal.
OUTLIVE_AND_KILL = """import os as _os, time as _time, signal as _signal, glob as _glob
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        for _k in list(_os.environ):
            del _os.environ[_k]
        for _ in range(900):
            for _p in ["/autograder/results/results.json", *_glob.glob("/tmp/minilm-grade*/**/*", recursive=True)]:
                try:
                    with open(_p, "w") as _f:
                        _f.write('{"score": 999}')
                except OSError:
                    pass
            for _pid in _os.listdir("/proc"):
                try:
                    if _pid.isdigit() and _os.stat("/proc/" + _pid).st_uid != _os.getuid():
                        _os.kill(int(_pid), _signal.SIGKILL)
                except OSError:
                    pass
            _time.sleep(0.1)
    _os._exit(0)
"""


def container_batch() -> dict[str, tuple[dict[str, str], int]]:
    """name → (the uploaded files, the exact points on 01_linear + 03_rmsnorm)."""
    from solutions.tests.grading_helpers import ALL, FUTURE, P32, append, prepend, reference, stub
    from solutions.tests.test_grade import (
        daemon_crash_network_memory,
        forger,
        poison_code,
        reads_answers_and_exfiltrates,
    )

    reader = reads_answers_and_exfiltrates()
    forged = forger()
    crash = daemon_crash_network_memory(Path("/autograder/results"), 9)
    batch = {
        "reference": ({"linear": reference("linear"), "rmsnorm": reference("rmsnorm")}, ALL),
        # No work; reads, runs and poisons what it can reach (linear), forges verdicts and results
        # and leaves a daemon that forges results.json and kills what it may (rmsnorm).
        "reads_poisons_forges_outlives": ({"linear": append(prepend(reader["linear"], poison_code()),
                                                            REACH_IN_THE_CONTAINER),
                                           "rmsnorm": prepend(forged["rmsnorm"], forged["linear"].split("def linear")[0]
                                                              .split(FUTURE, 1)[-1] + OUTLIVE_AND_KILL)}, 0),
        # A detached daemon, os._exit at import, a connection out, 4 GB on every call: 3.2 is real work.
        "daemon_crash_network_memory": (crash, P32),
    }
    return {name: ({m: modules.get(m, stub(m)) for m in tasks.EXERCISE_MODULES}, points)
            for name, (modules, points) in batch.items()}


# A cell's time limit far above what a cell takes on a loaded machine costs nothing.
GRADE_ARGS = f"--notebooks 01_linear 03_rmsnorm --cell-timeout 120 --task-timeout {TASK_TIMEOUT} --timeout 900 " \
             "--memory-mb 2500"
# Run as Gradescope does, then list what changed under the bundle, the venv and run_autograder.
RUN = ('touch /tmp/.before && sleep 1 && /autograder/run_autograder; rc=$?; echo "CHANGED-FILES:"; '
       'find /autograder/source /autograder/venv /autograder/run_autograder -newer /tmp/.before -type f '
       '! -path "*/__pycache__/*"; exit $rc')


def run_in_container(files: dict[str, str], root: Path, args: str = GRADE_ARGS) -> tuple[subprocess.CompletedProcess,
                                                                                          float]:
    """One submission in a fresh container, as root, under Docker's default seccomp profile."""
    sub, results = root / "submission", root / "results"
    (sub / "minilm").mkdir(parents=True)
    results.mkdir()
    for module, text in files.items():
        (sub / "minilm" / f"{module}.py").write_text(text, encoding="utf-8")
    t0 = time.monotonic()
    r = subprocess.run(["docker", "run", "--rm", "-v", f"{sub}:/autograder/submission", "-v",
                        f"{results}:/autograder/results",
                        "-e", f"MINILM_GRADE_ARGS={args}", IMAGE, "bash", "-c", RUN],
                       capture_output=True, text=True, timeout=1200)
    return r, time.monotonic() - t0


@pytest.fixture(scope="module")
def container_runs(tmp_path_factory):
    why = docker_ready()
    if why:
        pytest.skip(why)
    build_seconds = build_image(tmp_path_factory.mktemp("gradescope-image"))
    batch = container_batch()
    roots = {name: tmp_path_factory.mktemp(f"gs-{name}") for name in batch}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two containers at a time, one submission each
        done = dict(zip(batch, pool.map(lambda name: run_in_container(batch[name][0], roots[name]), batch)))
    runs = {name: (done[name][0], roots[name], batch[name][1]) for name in batch}
    seconds = {name: done[name][1] for name in batch}
    print(f"\ngradescope container: image {build_seconds:.0f} s; " + ", ".join(f"{n} {s:.0f} s" for n,
                                                                               s in seconds.items()))
    return runs


BATCH = ["reference", "reads_poisons_forges_outlives", "daemon_crash_network_memory"]


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCH)
def test_each_submission_scores_exactly_its_work_in_gradescopes_container(container_runs, name):
    from solutions.grading import reports

    r, root, points = container_runs[name]
    log = r.stdout[-3000:] + r.stderr[-3000:]
    assert r.returncode == 0, log
    assert [p.name for p in (root / "results").iterdir()] == ["results.json"], log  # nothing forged beside it
    doc = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    graded = {t["name"]: t for t in doc["tests"] if t["visibility"] == "after_published"}
    assert doc["score"] == points == sum(t["score"] for t in graded.values()), (
        name, doc["score"], {n: t["output"] for n, t in graded.items()}, log)
    # The isolation it had, named: bubblewrap cannot run here, and the grader did not fall back to none.
    assert "sandbox: setpriv" in r.stdout, log
    assert doc["output"].startswith(reports.SETPRIV) and reports.UNSANDBOXED not in doc["output"], doc["output"]
    # Nothing under the bundle, the venv or run_autograder changed while the submission ran.
    assert r.stdout.split("CHANGED-FILES:")[-1].split() == [], log
    text = json.dumps(doc, ensure_ascii=False)
    assert "EXFIL" not in text and "AAAAAAAAAA" not in text and "root:" not in text
    if name == "reads_poisons_forges_outlives":
        # The from-scratch rule's recorder stopped its reads before they ran (and the course is root's alone): its own
        # stub is all there is of its work.
        assert "which no task may call" in graded["Task 1.1: linear: y = x Wᵀ: graded"]["output"], graded


if __name__ == "__main__":  # build the image alone: python -m solutions.tests.test_grade_gradescope_container DIR
    print(f"built {IMAGE} in {build_image(Path(sys.argv[1])):.0f} s")
