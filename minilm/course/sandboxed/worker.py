"""The untrusted side of grading (provided): run the student's code on the grader's inputs.

    python -m minilm.course.sandboxed.worker CASES OUT

Runs inside the sandbox with the student's exercise modules importable as `minilm`. CASES
(written by the grader) holds each task's probe inputs; for every task this writes OUT/<task>.pt
with the outputs of the task's `collect` (minilm/course/spec/) on each case, or the name of the exception it raised.
Each task runs in a forked child with a time limit, so a crash or a hang costs that task only.

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


def _run_task(task: str, cases: list[dict], out: str) -> None:
    import torch

    import minilm
    from minilm.course import spec

    probe = spec.get(task)
    results = []
    for case in cases:
        try:
            got = probe.collect(minilm, case)
            results.append({"ok": True, "out": {str(k): _plain(v) for k, v in got.items()}})
        except BaseException as e:  # noqa: BLE001 - whatever the student's code raises is a result
            stub = isinstance(e, NotImplementedError) and str(e).startswith("Task ")
            results.append({"ok": False, "error": STUB if stub else type(e).__name__[:40]})
    tmp = f"{out}.tmp"
    torch.save(results, tmp)
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cases_path, out_dir = argv[0], argv[1]
    # Every torch.load in this process is the restricted unpickler, whatever its weights_only says:
    # Task 10.5's load_checkpoint may call torch.load, and any task can call load_checkpoint on a
    # file object it built from a bytes literal, which a full unpickler would run as code.
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    per_task = float(argv[2]) if len(argv) > 2 else 60.0
    import torch

    plan = torch.load(cases_path, weights_only=True)
    torch.set_num_threads(1)
    for task in plan["tasks"]:
        out = os.path.join(out_dir, f"{task}.pt")
        pid = os.fork()
        if pid == 0:  # the child: run one task, then leave without running anyone's atexit hooks
            code = 0
            try:
                _run_task(task, plan["cases"][task], out)
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        deadline = time.monotonic() + per_task
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main())
