"""The pytest plugin that nbval runs load inside the grader's sandbox (`-p minilm.course.sandboxed.nbval_plugin`).

Its kernels talk to nbval over unix sockets in the run's own runtime folder, not TCP on localhost:
a sandbox may refuse every other kind of socket. It runs only what grading reads: the check
cells (each a lone `check("3.1")`, which needs nothing a cell before it made) and the cells tied to no
task (imports, setup); the demos (`with needs("3.1"): …`: plots, training runs) earn nothing and
would cost most of a submission's time, and neither do the check cells of the tasks that already lost
their points (MINILM_LOST_TASKS, from the grader). And it makes cells fail sooner: a cell
whose kernel died fails at once instead of after the cell's time limit, and once a cell ran over
its time limit, the later cells of that notebook tied only to the same tasks fail without running
(they would call the same hanging code: each would cost the whole limit again). What it reports
can cost points, never earn them."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from minilm.course.cells import KERNEL_DIED


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


def pytest_configure(config):
    if os.environ.get("MINILM_RESULTS"):  # in the grader's sandbox
        _kernels_over_unix_sockets()


def _kernels_over_unix_sockets() -> None:
    import nbval.kernel
    from jupyter_client.manager import KernelManager

    folder = os.environ.get("JUPYTER_RUNTIME_DIR") or os.path.join(os.environ.get("TMPDIR", "/tmp"), "jupyter")
    os.makedirs(folder, exist_ok=True)
    numbers = itertools.count()

    class UnixSocketKernelManager(KernelManager):
        def __init__(self, **kwargs):
            # ZeroMQ's ipc transport: socket files "<ip>-<port>", so a short path (sun_path holds 107 bytes)
            ip = os.path.join(folder, f"k{os.getpid()}-{next(numbers)}")
            super().__init__(transport="ipc", ip=ip, **kwargs)

    nbval.kernel.KernelManager = UnixSocketKernelManager


def pytest_collection_modifyitems(config, items):
    if os.environ.get("MINILM_RESULTS"):  # in the grader's sandbox
        lost = set(os.environ.get("MINILM_LOST_TASKS", "").split())
        unread = [i for i in items if (c := getattr(i, "minilm_cell", None)) is not None
                  and ((c.uses and not c.checks) or (_tied(i) and _tied(i) <= lost))]
        if unread:
            config.hook.pytest_deselected(items=unread)
            items[:] = [i for i in items if i not in unread]


_timed_out: dict[str, dict[str, str]] = {}  # notebook → {task whose cell ran over its limit: that cell}


def _tied(item) -> set[str]:
    cell = getattr(item, "minilm_cell", None)  # set by the root conftest
    return set(cell.checks + cell.uses) if cell is not None else set()


def pytest_runtest_call(item):
    if item.path.suffix == ".ipynb" and os.environ.get("MINILM_RESULTS"):
        over, tied = _timed_out.get(str(item.path), {}), _tied(item)
        if tied and tied <= over.keys():
            pytest.fail("not run: " + "; ".join(f"Task {t} already ran over the time limit in {over[t]}"
                                                for t in sorted(tied)), pytrace=False)
        _watch_kernel(getattr(item.parent, "kernel", None))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if (call.when == "call" and call.excinfo is not None and item.path.suffix == ".ipynb"
            and "Timeout of" in str(call.excinfo.value) and _tied(item)):
        over = _timed_out.setdefault(str(item.path), {})
        for task in _tied(item):
            over.setdefault(task, item.name)
