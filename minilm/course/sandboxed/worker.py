"""The untrusted side of grading (provided): run the student's code on the grader's inputs.

    python -m minilm.course.sandboxed.worker CASES OUT

Runs inside the sandbox with the student's exercise modules importable as `minilm`. CASES
(written by the grader) holds each task's probe inputs, the notebook's first and then the hidden
ones; for every task this writes OUT/<task>.pt with the outputs of the task's `collect`
(minilm/course/exercises/) on each of the notebook's cases, or the name of the exception it raised, and
OUT/<task>.hidden.pt with those on the hidden cases. Each task runs in a forked child with a time
limit, so a crash or a hang costs that task only, and hands its outputs back through a pipe, the
notebook's cases' first: a child that crashes, hangs or says too much only on a hidden case still
hands back those, and the grader can tell that its first failure was on a hidden case. Each child runs
under the from-scratch rule's recorder (minilm/course/rules/recorder.py) from before it imports the
student's code until it exits: at the first refused call, before that call runs, it hands back the
refusal (OUT/<task>.refused.json) and exits. Only this process writes OUT, after every child is gone.

Nothing here decides a point: the student's code runs in this process and can rewrite any of
it. The grader only reads the files as data (torch.load(weights_only=True)) and compares them,
in a process that never imports the student's code, with the reference's outputs.
"""

from __future__ import annotations

import os
import signal
import sys
import time

STUB = "todo"  # a stub's NotImplementedError("Task … is not implemented yet …")


def _plain(value, depth: int = 0):
    """Outputs as plain data only: a tensor subclass, an always-equal object or anything else
    that is not a tensor, number, string or list of those becomes the string "<type Name>"."""
    import torch

    if depth > 4:
        return "<too deep>"
    if type(value) is torch.Tensor:
        return value.detach().clone().contiguous()
    if type(value) in (int, float, bool, str) or value is None:
        return value
    if type(value) in (list, tuple):
        return [_plain(v, depth + 1) for v in value[:1000]]
    return f"<type {type(value).__name__[:40]}>"


MAX_RESULT_BYTES = 64 * 2**20  # what one task's child may hand back; the grader loads no more either


def _run_cases(probe, cases: list[dict]) -> bytes:
    import io

    import torch

    import minilm

    results = []
    for case in cases:
        try:
            got = probe.collect(minilm, case)
            results.append({"ok": True, "out": {str(k): _plain(v) for k, v in got.items()}})
        except BaseException as e:  # noqa: BLE001 - whatever the student's code raises is a result
            stub = isinstance(e, NotImplementedError) and str(e).startswith("Task ")
            results.append({"ok": False, "error": STUB if stub else type(e).__name__[:40]})
    buffer = io.BytesIO()
    torch.save(results, buffer)
    return buffer.getvalue()


FRAME_HEADER = 8  # each part's outputs go through the pipe as its length (8 bytes, little-endian), then its bytes
ROWS, REFUSED = b"R", b"X"  # a frame's first byte: a part's outputs (torch.save), or the rule's refusal (JSON)
MAX_REFUSAL_BYTES = 4096


def frames(data: bytes) -> list[bytes]:
    """The whole frames at the start of `data`; a part cut short (its child died, ran over its time or said
    too much) and anything after it are not a frame."""
    found, at = [], 0
    while at + FRAME_HEADER <= len(data):
        size = int.from_bytes(data[at:at + FRAME_HEADER], "little")
        if at + FRAME_HEADER + size > len(data):
            break
        found.append(data[at + FRAME_HEADER:at + FRAME_HEADER + size])
        at += FRAME_HEADER + size
    return found


def _undumpable() -> None:
    """Keep this process's memory and file descriptors out of its children's reach: a child runs
    the student's code as the same uid, and could otherwise open /proc/<this pid>/fd or ptrace it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _send(write_end: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(FRAME_HEADER, "little") + data)
    while view:
        view = view[os.write(write_end, view[:1 << 16]):]


def _no_new_threads() -> bool:
    """Forbid this process, and what it forks, to start a thread (clone with CLONE_THREAD fails with EAGAIN, so
    Python says "can't start new thread"): a thread has neither the recorder's profile hook nor its torch function
    mode, both per thread, and code can start one from C where the recorder's own guard sees nothing. Torch runs
    on one thread here (set before the fork), so a task needs none. Linux with libseccomp only; False elsewhere."""
    try:
        import errno
        import platform

        import pyseccomp as sc
    except (ImportError, OSError, RuntimeError):
        return False
    try:
        f = sc.SyscallFilter(sc.ALLOW)
        flags = 1 if platform.machine().startswith("s390") else 0  # clone(2): s390 swaps its first two arguments
        f.add_rule(sc.ERRNO(errno.EAGAIN), "clone", sc.Arg(flags, sc.MASKED_EQ, 0x00010000, 0x00010000))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags are out of a filter's reach: glibc falls back to clone
        f.load()
    except Exception:  # noqa: BLE001 - a kernel without seccomp: the recorder's guard remains
        return False
    return True


def _child(task: str, parts: list[list[dict]], write_end: int) -> None:
    """Run one task, part after part (the notebook's cases, then the hidden ones), under the recorder, and
    hand each part's outputs back through the pipe only, as a frame, as soon as it is done; never returns.
    The recorder stays on until the process exits: the student's code never runs unwatched here."""
    code = 0
    try:
        import dataclasses
        import json

        import minilm
        from minilm.course import exercises
        from minilm.course.rules.recorder import Refusal, exercise_files, watching

        def refused(refusal: Refusal) -> None:
            _send(write_end, REFUSED + json.dumps(dataclasses.asdict(refusal)).encode()[:MAX_REFUSAL_BYTES])
            os._exit(0)

        probe = exercises.get(task)
        _no_new_threads()
        record = watching(task, exercise_files(os.path.dirname(minilm.__file__)), on_refusal=refused)
        record.__enter__()
        for cases in parts:
            data = _run_cases(probe, cases)
            if not record.intact():
                record.__exit__(None, None, None)  # says so through `refused`, which exits
            _send(write_end, ROWS + data)
    except BaseException:  # noqa: BLE001
        code = 1
    os._exit(code)


def _collect(pid: int, read_end: int, deadline: float) -> bytes:
    """What the child wrote before it exited or its time ran out (then it is killed), up to
    MAX_RESULT_BYTES. A daemon the child left may hold the pipe open: the child's exit, with the
    pipe drained, ends the wait as surely as the pipe's end."""
    import select

    chunks, size, reaped = [], 0, False
    while True:
        ready, _, _ = select.select([read_end], [], [], max(0.0, min(0.5, deadline - time.monotonic())))
        if ready:
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk[:MAX_RESULT_BYTES - size])
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                break
        elif os.waitpid(pid, os.WNOHANG)[0] == pid:
            reaped = True  # it wrote everything before it exited, and the pipe is empty: done
            break
        elif time.monotonic() > deadline:
            break
    if not reaped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    return b"".join(chunks)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cases_path, out_dir = argv[0], argv[1]
    # Every torch.load in this process is the restricted unpickler, whatever its weights_only says:
    # Task 10.5's load_checkpoint may call torch.load, and any task can call load_checkpoint on a
    # file object it built from a bytes literal, which a full unpickler would run as code.
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    per_task = float(argv[2]) if len(argv) > 2 else 60.0
    sandboxed = "--sandboxed" in argv[3:]  # alone in a PID namespace with the children it starts
    # The libraries the exercise modules import, imported once here and not in each task's child, where the
    # recorder would watch every call of their imports.
    import einops  # noqa: F401
    import jaxtyping  # noqa: F401
    import numpy  # noqa: F401
    import torch

    plan = torch.load(cases_path, weights_only=True)
    from minilm.course import tasks

    if any(tasks.get(t).module in ("training", "modern") for t in plan["tasks"]):
        import torch._dynamo  # noqa: F401 - torch.optim.Optimizer's first use imports it: once here, not per child
    torch.set_num_threads(1)
    _undumpable()
    # Each task's child hands its outputs to this process through a pipe of its own; nothing is
    # written to OUT until every child (and whatever it left running) is gone, so no child can
    # write, or rewrite, another task's results.
    results: dict[str, list[bytes]] = {}
    for task in plan["tasks"]:
        cases = plan["cases"][task]
        n_visible = plan.get("visible", {}).get(task, len(cases))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: leave without running anyone's atexit hooks
            os.close(read_end)
            _child(task, [cases[:n_visible], cases[n_visible:]], write_end)
        os.close(write_end)
        results[task] = frames(_collect(pid, read_end, time.monotonic() + per_task))
        os.close(read_end)
    if sandboxed:
        try:  # daemons a child left: every process this uid may signal, in this sandbox alone
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for name in os.listdir(out_dir):  # whatever a child put there is not a result
        path = os.path.join(out_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    for task, found in results.items():
        rows = [f[1:] for f in found if f[:1] == ROWS]
        refusal = [f[1:] for f in found if f[:1] == REFUSED][:1]
        files = [*zip((f"{task}.pt", f"{task}.hidden.pt"), rows), *((f"{task}.refused.json", r) for r in refusal)]
        for name, data in files:
            tmp = os.path.join(out_dir, f"{name}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(out_dir, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
