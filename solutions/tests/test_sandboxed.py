"""What runs inside the grader's sandbox (minilm/course/sandboxed/): it only ever ends a
submission's runs sooner, and each shortcut keeps what the submission's code produced."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from minilm.course.sandboxed import worker

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the grader's sandbox runs on Linux and macOS")


def test_a_daemon_holding_the_pipe_does_not_hold_up_the_worker():
    """The child wrote its outputs and exited; a daemon it left keeps the pipe's write end open
    (the old worker waited out the whole time limit and lost the outputs)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task's child
        os.close(read_end)
        if os.fork() == 0:  # its daemon: sleeps with the write end open
            os.setsid()
            time.sleep(30)
            os._exit(0)
        os.write(write_end, b"outputs")
        os._exit(0)
    os.close(write_end)
    try:
        assert worker._collect(pid, read_end, time.monotonic() + 20) == b"outputs"
    finally:
        os.close(read_end)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the grader's worker forbids threads on Linux")
def test_a_tasks_process_cannot_start_a_thread_and_torch_still_runs():
    """The worker's child, as it runs a task: no thread can start, from Python or from C (a new thread has neither
    of the recorder's hooks: the eleventh red team ran torch.softmax in one), and torch on its one thread runs."""
    import _thread

    import torch

    torch.set_num_threads(1)  # as the worker does before it forks
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            said = [worker._no_new_threads()]
            try:
                _thread.start_new_thread(os.getpid, ())
                said.append("started")
            except RuntimeError as e:
                said.append(str(e))
            x = torch.randn(64, 64, requires_grad=True)
            (torch.softmax(x @ x, -1).sum()).backward()
            said.append(bool(torch.isfinite(x.grad).all()))
            os.write(write_end, repr(said).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    got = os.read(read_end, 4096).decode()
    os.close(read_end)
    if got.startswith("[False"):
        pytest.skip("no seccomp here (pyseccomp and libseccomp): the recorder's own guard is all")
    assert got == "[True, \"can't start new thread\", True]", got


def test_a_child_that_outlives_its_time_limit_gives_only_the_parts_it_finished():
    # Each part (the notebook's cases, then the hidden ones) is a frame: a part cut short is not one.
    done = b"visible rows"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.write(write_end, len(done).to_bytes(worker.FRAME_HEADER, "little") + done)
        os.write(write_end, (1000).to_bytes(worker.FRAME_HEADER, "little") + b"partial")
        time.sleep(30)
        os._exit(0)
    os.close(write_end)
    try:
        assert worker.frames(worker._collect(pid, read_end, time.monotonic() + 1)) == [done]
    finally:
        os.close(read_end)


def _notebook(cells: list[str]) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                       "source": src} for i, src in enumerate(cells)],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.slow  # a kernel, and one cell that runs into its time limit
def test_cells_tied_only_to_a_task_that_ran_over_fail_without_running(tmp_path):
    """A hanging task costs its time limit once, not once per cell that checks it; a cell also
    tied to another task still runs; a demo (tied by needs() alone) is not run at all."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    shutil.copy2(ROOT / "notebooks" / "sanitize.cfg", tmp_path / "notebooks" / "sanitize.cfg")
    nb = _notebook([
        "import time\ncalls = []\ndef check(task):  # hangs on its first call only\n"
        "    calls.append(task)\n    time.sleep(600 if calls == ['3.1'] else 0)\nneeds = check",
        'check("3.1")',  # runs over its limit
        'check("3.1")',  # tied only to 3.1: fails at once
        'needs("3.1"); check("3.2")',  # also tied to 3.2: runs (and passes)
        'needs("3.2")',  # a demo: grading reads no demo, so it is deselected
        'check("3.2")',
    ])
    (tmp_path / "notebooks" / "t.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    env = {**os.environ, "MINILM_RESULTS": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "minilm.course.sandboxed.nbval_plugin", "-p",
                           "no:xdist",
                           "--nbval-cell-timeout=5", "--junitxml=junit.xml", "notebooks/t.ipynb"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    cases = {tc.get("name"): tc for tc in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    # nbval marks every cell after a timeout xfail: a failure then reports as skipped (the grader's
    # parse_junit counts it as an error), a pass as passed.
    outcome = {name: "passed" if not [c for c in tc if c.tag in ("failure", "error", "skipped")] else "failed"
               for name, tc in cases.items()}
    assert outcome == {"cell 1": "passed", "cell 2 (check of Task 3.1)": "failed",
                       "cell 3 (check of Task 3.1)": "failed", "cell 4 (check of Task 3.2)": "passed",
                       "cell 6 (check of Task 3.2)": "passed"}, proc.stdout[-3000:]
    assert "Timeout of 5 seconds" in cases["cell 2 (check of Task 3.1)"].find("failure").get("message")
    assert float(cases["cell 3 (check of Task 3.1)"].get("time")) < 5  # not run: it would have hung for the whole 5 s
    assert "1 deselected" in proc.stdout, proc.stdout[-3000:]


def test_every_check_cell_is_a_lone_check_call():
    """The grader's sandbox runs a notebook's check cells and untied cells only, not its demos
    (nbval_plugin): a check cell must need nothing a demo makes, so it is one check() call."""
    from minilm.course import tasks
    from minilm.course.cells import check_cells, code_cells

    for path in tasks.course_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, ids in check_cells(nb).items():
            source = code_cells(nb)[i].strip()
            assert source == f'check("{ids[0]}")' and len(ids) == 1, (path.name, i, source)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the seccomp filter is Linux's")
@pytest.mark.parametrize("plugin", [True, False])
def test_notebooks_run_where_only_unix_sockets_may_be_made(tmp_path, plugin):
    """Under the setpriv sandbox's seccomp filter (unix sockets only), the plugin's kernels, stock
    ipykernel over ZeroMQ's ipc transport, run a notebook; plain nbval's kernel (TCP) cannot start."""
    from solutions.grading import seccomp

    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "notebooks").mkdir()
    shutil.copy2(ROOT / "notebooks" / "sanitize.cfg", tmp_path / "notebooks" / "sanitize.cfg")
    nb = _notebook(["import errno, socket\ntry:\n    socket.socket()\nexcept OSError as e:\n"
                    "    assert e.errno == errno.EOPNOTSUPP, e\nelse:\n    raise SystemExit('a TCP socket was made')",
                    "print(6 * 7)"])
    nb["cells"][1].update(execution_count=2, outputs=[{"name": "stdout", "output_type": "stream", "text": "42\n"}])
    (tmp_path / "notebooks" / "t.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    env = {**os.environ, "MINILM_RESULTS": str(tmp_path / "out"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
                           *(["-p", "minilm.course.sandboxed.nbval_plugin"] if plugin else []),
                           "--nbval-cell-timeout=60", "notebooks/t.ipynb"], cwd=tmp_path, env=env,
                          preexec_fn=seccomp.NoNetwork().install, capture_output=True, text=True, timeout=300)
    if plugin:
        assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:]
    else:
        assert proc.returncode != 0 and "2 passed" not in proc.stdout, proc.stdout[-3000:]
