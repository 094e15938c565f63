"""The suite across pytest-xdist's workers: torch threads shared among them, and the scopes with
long-running tests handed out first."""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config):
    _share_the_cores(config)
    # pytest-xdist's --dist loadscope hands out modules (and notebooks) largest test count first,
    # which leaves the few-test, long-running modules (grading, benchmarks, training runs) for
    # the end, one worker busy and the other idle. The order of pytest_collection_modifyitems
    # below (modules with slow tests first) is used instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _share_the_cores(config) -> None:
    """In an xdist worker (-n N): torch threads = cores // N, for the worker and everything it
    starts (notebook kernels, training runs, inner pytest runs), unless OMP_NUM_THREADS is set.
    By default every process takes a thread per core, and N workers' OpenMP threads (and their
    kernels') then fight over the cores: a small model's forward pass, 13 ms alone, took 20× as
    long on a busy 2-core machine."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if not workers or os.environ.get("OMP_NUM_THREADS"):
        return
    threads = max(1, (os.cpu_count() or 1) // int(workers))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:  # already imported (by a conftest): its pool may already be sized
        sys.modules["torch"].set_num_threads(threads)


@pytest.hookimpl(trylast=True)  # after --task has chosen the items
def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # an xdist worker: the order its controller hands out scopes in
        items[:] = slow_scopes_first(items)


def _is_slow(item) -> bool:
    return item.get_closest_marker("slow") is not None or item.get_closest_marker("browser") is not None


def slow_scopes_first(items: list) -> list:
    """Items grouped by xdist's loadscope scope (the node id up to its last "::": a module, a
    class or a notebook), scopes with the most slow (or browser) tests first, the rest in
    collection order. Starting the long runs first keeps both workers busy to the end."""
    scopes: dict[str, list] = {}
    for item in items:
        scopes.setdefault(item.nodeid.rsplit("::", 1)[0], []).append(item)
    order = sorted(scopes.values(), key=lambda group: -sum(map(_is_slow, group)))  # stable
    return [item for group in order for item in group]
