"""The pytest plugin that nbval runs load inside the grader's sandbox (`-p minilm.course.sandboxed.nbval_plugin`).

It only makes a cell whose kernel died fail at once instead of after the cell's time limit; what
it reports can cost points, never earn them."""

from __future__ import annotations

import os
import time

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


def pytest_runtest_call(item):
    if item.path.suffix == ".ipynb" and os.environ.get("MINILM_RESULTS"):
        _watch_kernel(getattr(item.parent, "kernel", None))
