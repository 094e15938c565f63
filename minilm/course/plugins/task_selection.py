"""`--task ID` (repeatable; what `minilm test ID` runs): a task's tests, and its notebook up to the
task's last cell."""

from __future__ import annotations

import re

import pytest

from minilm.course import tasks


def pytest_addoption(parser):
    parser.getgroup("minilm").addoption(
        "--task",
        action="append",
        default=[],
        metavar="ID",
        help="run only this task's tests and notebook (repeatable, e.g. --task 3.1 --task 3.2)",
    )


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A notebook cell that --task runs but does not judge (_select_notebook_cells) reports as skipped."""
    outcome = yield
    report = outcome.get_result()
    unjudged = getattr(item, "minilm_unjudged", None)
    if unjudged and call.when == "call" and report.passed:
        report.outcome, report.longrepr = "skipped", (str(item.path), None, f"Skipped: {unjudged}")
