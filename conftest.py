"""pytest setup shared by tests/, solutions/tests/ and the nbval run over notebooks/.

    python -m pytest --impl solutions      # everything, against the reference
    python -m pytest --task 3.1            # one task: its tests and its notebook
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from minilm.course import tasks

ROOT = Path(__file__).resolve().parent

# pytester runs the suite in-process against known-mistake variants (solutions/tests/test_mistakes.py).
pytest_plugins = ["pytester"]


def pytest_addoption(parser):
    group = parser.getgroup("minilm")
    group.addoption(
        "--impl",
        choices=("minilm", "solutions"),
        default=None,
        help="whose code `import minilm` runs: minilm (yours, the default) or solutions (the reference)",
    )
    group.addoption(
        "--task",
        action="append",
        default=[],
        metavar="ID",
        help="run only this task's tests and notebook (repeatable, e.g. --task 3.1 --task 3.2)",
    )


def pytest_configure(config):
    impl = config.getoption("--impl")
    if impl:
        os.environ["MINILM_IMPL"] = impl  # read lazily by minilm, and inherited by nbval's kernels
    _share_the_cores(config)
    # Stored notebook outputs never hold progress bars or warnings' temp paths.
    # The same kernel environment the stored outputs were made in (solutions/notebooks.py):
    # progress bars off and, on offline course machines, the local tiktoken and data copies.
    from minilm.course.nbenv import kernel_env

    for key, value in kernel_env().items():
        if key != "MINILM_IMPL":
            os.environ.setdefault(key, value)
    # nbval's kernels start in notebooks/, where `import minilm` would go through pip's editable
    # install: that is whichever checkout ran `pip install -e .` last, not necessarily this one.
    # This checkout first on the path, for them and every command a test starts. (The grader
    # builds its sandboxes' environments from scratch, so a submission still imports its own.)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in paths if p]])
    # nbval, when installed: notebooks given to pytest are run in this Python and their outputs
    # compared with the stored ones (what graders do), through the committed sanitize rules.
    opt = config.option
    if hasattr(opt, "nbval") and not opt.nbval_lax:
        opt.nbval = True
        opt.nbval_current_env = True
        if opt.nbval_sanitize_with is None:
            opt.nbval_sanitize_with = str(ROOT / "notebooks" / "sanitize.cfg")
        if opt.nbval_cell_timeout == 2000:  # nbval's default: far too long for a course cell
            opt.nbval_cell_timeout = 300
    # pytest-xdist's --dist loadscope hands out modules (and notebooks) largest test count first,
    # which leaves the few-test, long-running modules (grading, benchmarks, training runs) for
    # the end, one worker busy and the other idle. The order of pytest_collection_modifyitems
    # below (modules with slow tests first) is used instead.
    if hasattr(opt, "loadscopereorder"):
        opt.loadscopereorder = False


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


def _item_tasks(item) -> set[str]:
    marked = {m.args[0] for m in item.iter_markers("task")}
    if item.path.suffix == ".ipynb":
        marked |= {t.id for t in tasks.for_notebook(item.path.name)}
    return marked


# A test module takes part in --task only if it names the task in a marker, literally
# (task("3.1")) or computed (mark.task(t.id), over the registry): the others are not even
# imported, which keeps `minilm test 3.1` to a few seconds.
_DYNAMIC_MARK = re.compile(r"mark\.task\((?![\"'])")


def pytest_ignore_collect(collection_path, config):
    wanted = config.getoption("--task")
    if not wanted or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    try:
        text = collection_path.read_text(encoding="utf-8")
    except OSError:
        return None
    if _DYNAMIC_MARK.search(text) or any(f'task("{i}")' in text or f"task('{i}')" in text for i in wanted):
        return None
    return True


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--task"))
    if wanted:
        for task_id in wanted:
            tasks.get(task_id)  # a typo gets the list of real ids
        keep = [i for i in items if _item_tasks(i) & wanted]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that hit a stub fails with the stub's one line, not a traceback into torch."""
    if call.when == "teardown":
        # No "git apply .hypothesis/patches/…" suggestions: the course's tests are not the student's to patch.
        item.__dict__.pop("_hypothesis_failing_examples", None)
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.passed:
        return
    from minilm.course.checks import todo_message

    exc = call.excinfo.value
    todo = todo_message(exc)
    if todo is None and isinstance(exc, pytest.fail.Exception) and (
            " is not implemented yet: " in str(exc) or re.match(r"Task [\d.]+: your ", str(exc))):
        todo = str(exc)  # tests/conftest.py fails a stub's (or a rule breaker's) tests up front with this line
    if todo is not None:
        report.longrepr = todo
