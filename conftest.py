"""pytest setup shared by tests/, solutions/tests/ and the nbval run over notebooks/.

    python -m pytest --impl solutions      # everything, against the reference
    python -m pytest --task 3.1            # one task: its tests, and its notebook up to its last cell
"""

from __future__ import annotations

import dataclasses
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


# ---------------------------------------------------------------- notebook cells, as students find them


@dataclasses.dataclass(frozen=True)
class NotebookCell:
    """Where an nbval item sits in its notebook, and the tasks it is tied to."""
    position: int  # 1-based, among all the notebook's cells, text cells included
    total: int
    checks: tuple[str, ...]  # the tasks its check(...) calls check
    uses: tuple[str, ...]  # the tasks its needs(...) calls name: a demo of the student's code

    @property
    def label(self) -> str:
        def ids(found):
            return f"Task{'s' if len(found) > 1 else ''} {', '.join(found)}"
        if self.checks:
            return f"cell {self.position} (check of {ids(self.checks)})"
        if self.uses:
            return f"cell {self.position} (uses {ids(self.uses)})"
        return f"cell {self.position}"


def pytest_collectstart(collector):
    """nbval names a notebook's items "Cell N", N counting code cells only, from 0: a number a
    student cannot find in JupyterLab. Name them "cell P (check of Task 3.1)" instead, P counting
    every cell from 1 down the page, in the node id, the failure's header and its first line.
    nbval's own number stays in the JUnit report as the property "nbval_cell", which the
    grader's parse_junit reads."""
    plugin = sys.modules.get("nbval.plugin")  # not imported here: with -p no:nbval it costs ~1 s for nothing
    if plugin is not None and isinstance(collector, plugin.IPyNbFile):
        collect = collector.collect
        collector.collect = lambda: [_rename_cell(item) for item in collect()]


def _rename_cell(item):
    from minilm.course.cells import NBVAL_CELL, checked_tasks

    cells = item.parent.nb.cells
    positions = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    source = item.cell.source
    cell = NotebookCell(positions[item.cell_num] + 1, len(cells), tuple(dict.fromkeys(checked_tasks(source))),
                        tuple(dict.fromkeys(checked_tasks(source, calls=("needs",)))))
    item.minilm_cell = cell
    item.name = cell.label
    if hasattr(item, "_id"):  # pytest >= 9.1 builds the node id once, from the parent's and the name
        item._id = item.parent.id.child(cell.label)
    else:
        item._nodeid = f"{item.parent.nodeid}::{cell.label}"
    item.user_properties.append((NBVAL_CELL, item.cell_num))
    where = f"{item.path.relative_to(item.config.rootpath).as_posix()}, {cell.label}"
    # pytest turns the dots of a domain that ends the node id into "::" ("03_rmsnorm::ipynb"):
    # this one does not end it, and heads the failure's section.
    item.reportinfo = lambda: (item.path, 0, where)
    nbval_repr = item.repr_failure

    def repr_failure(excinfo, *args, **kwargs):
        text = nbval_repr(excinfo, *args, **kwargs)
        if not isinstance(text, str):
            return text
        what = str(excinfo.value)
        head = (f"{where}: {what.strip() or 'failed'}\n(cell {cell.position} of the notebook's {cell.total}, "
                f"counted from the top, text cells included)")
        # nbval's own first lines name its "Cell N" (code cells only, from 0): left out.
        text = text.replace(f"Cell {item.cell_num}: {what}\n\n", "", 1)
        return head + "\n\n" + text.split("\n", 1)[-1]

    item.repr_failure = repr_failure
    return item


def _select_notebook_cells(items: list, wanted: set[str]) -> list:
    """Under --task: of a notebook that teaches a wanted task, its cells up to the last one
    that checks or uses a wanted task; none after it, so a later task's check (still "… not
    yet") cannot fail this task's run. Cells tied only to other tasks of the same notebook run
    before it (the notebook's state needs them) but are not judged: their outputs are not
    compared, an error does not stop the notebook, and they report as skipped. Tasks of earlier
    notebooks that a cell uses (8.1 in notebook 10) are prerequisites and are judged."""
    by_notebook: dict = {}
    for item in items:
        if hasattr(item, "minilm_cell"):
            by_notebook.setdefault(item.parent, []).append(item)
    keep = []
    for notebook, cells in by_notebook.items():
        taught = {t.id for t in tasks.for_notebook(notebook.path.name)}
        if not taught & wanted:
            continue
        tied = [set(i.minilm_cell.checks + i.minilm_cell.uses) & taught for i in cells]
        last = max((n for n, ids in enumerate(tied) if ids & wanted and ids <= wanted), default=len(cells) - 1)
        asked = ", ".join(f"--task {t}" for t in sorted(wanted & taught, key=lambda i: tuple(map(int, i.split(".")))))
        for item, ids in zip(cells[:last + 1], tied):
            if not ids <= wanted:
                item.minilm_unjudged = (f"{item.name}: another task's cell, not judged under {asked} (it runs "
                                        "all the same: later cells may need what it defines)")
                item.options["check"] = False
                item.options["check_exception"] = True
            keep.append(item)
    return keep


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--task"))
    if wanted:
        for task_id in wanted:
            tasks.get(task_id)  # a typo gets the list of real ids
        cells = set(_select_notebook_cells(items, wanted))
        keep = [i for i in items if i in cells or (not hasattr(i, "minilm_cell") and _item_tasks(i) & wanted)]
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
    """A test that hit a stub fails with the stub's one line, not a traceback into torch. A
    notebook cell that --task runs but does not judge (_select_notebook_cells) reports as skipped."""
    if call.when == "teardown":
        # No "git apply .hypothesis/patches/…" suggestions: the course's tests are not the student's to patch.
        item.__dict__.pop("_hypothesis_failing_examples", None)
    outcome = yield
    report = outcome.get_result()
    unjudged = getattr(item, "minilm_unjudged", None)  # a cell --task runs but does not judge
    if unjudged and call.when == "call" and report.passed:
        report.outcome, report.longrepr = "skipped", (str(item.path), None, f"Skipped: {unjudged}")
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
