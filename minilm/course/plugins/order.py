"""The suite across pytest-xdist's workers: torch threads shared among them, and the scopes with
long-running tests handed out first."""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config):
    _share_the_cores(config)
    # pytest-xdist's scheduling hands out work units largest first, which leaves the few-test,
    # long-running modules (grading, benchmarks, training runs) for the end, one worker busy and the
    # other idle. The order of pytest_collection_modifyitems below (slow work first) is used instead.
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


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Under --dist loadgroup (`minilm test all`), the tests that must share a worker are grouped: a
    notebook's cells (one kernel, in order), a module whose fixtures outlive a test (a graded batch, a
    built release: set up once) and a module marked `xdist_group` (its tests share a path or a uid of the
    machine's). Every other test is a work unit of its own, so the many quick ones fill
    in beside the long ones to the end, where a whole module of them kept one worker busy while the other
    idled. Marked before xdist's own hook reads the marks into the node ids; ordered after --task has
    chosen the items."""
    if getattr(config.option, "loadgroup", False):
        for item in items:
            mark = item.get_closest_marker("xdist_group")  # a module's own: it shares something of the machine's
            if mark is not None:
                _group(item, str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")))
            elif _shares_its_module(item):
                _group(item, item.nodeid.split("::", 1)[0])
    result = yield
    if hasattr(config, "workerinput"):  # an xdist worker: the order its controller hands out scopes in
        items[:] = slow_scopes_first(items)
    return result


def _group(item, name: str) -> None:
    """Put `item` in xdist's group `name`: the mark, and the "@name" that xdist's scheduler reads from the node
    id. xdist 3.8 writes that suffix to `_nodeid`, which pytest >= 9.1 no longer reads (it builds the node id
    from `_id`): there the suffix is written here, or every test of a notebook would be a unit of its own."""
    if item.get_closest_marker("xdist_group") is None:
        item.add_marker(pytest.mark.xdist_group(name))
    if hasattr(item, "_id"):
        item._id = item.parent.id.child(f"{item.name}@{name}")


def _shares_its_module(item) -> bool:
    if item.nodeid.split("::", 1)[0].endswith(".ipynb"):
        return True
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d[-1].scope in ("module", "class", "package") for d in defs if d)


def _is_slow(item) -> bool:
    return item.get_closest_marker("slow") is not None or item.get_closest_marker("browser") is not None


def slow_scopes_first(items: list) -> list:
    """Items grouped by xdist's scope (under loadgroup a group after the node id's "@", else the node id
    itself; under loadscope the node id up to its last "::"), scopes with the most slow (or browser)
    tests first, the rest in collection order. Starting the long runs first keeps both workers busy to
    the end."""
    group = getattr(items[0].config.option, "loadgroup", False) if items else False
    scopes: dict[str, list] = {}
    for item in items:
        scope = (item.nodeid.rsplit("@", 1)[-1] if "@" in item.nodeid else item.nodeid) if group else \
            item.nodeid.rsplit("::", 1)[0]
        scopes.setdefault(scope, []).append(item)
    order = sorted(scopes.values(), key=lambda group: -sum(map(_is_slow, group)))  # stable
    return [item for group in order for item in group]
