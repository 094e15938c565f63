"""The stored notebooks are fit for nbval and for people: outputs from the reference, no
errors or churn, a picture in every topic notebook, and with the stubs a clear one-line
message at each task's first check instead of a traceback."""

from __future__ import annotations

import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from minilm.course import tasks
from minilm.course.nbenv import kernel_env
from solutions.notebooks import notebook_paths

NOTEBOOKS = notebook_paths()
CHECK_CALL = re.compile(r'^check\(([^)]*)\)\s*$', re.M)


def _read(path):
    return nbformat.read(path, as_version=4)


def _text(outputs) -> str:
    parts = []
    for o in outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o and "text/plain" in o.data:
            parts.append(o.data["text/plain"])
    return "".join(parts)


def _check_cells(nb):
    """(cell index, task ids) for each check cell."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            m = CHECK_CALL.search(cell.source)
            if m:
                yield i, re.findall(r'"([\d.]+)"', m.group(1))


def test_every_notebook_is_there():
    stems = {p.stem for p in NOTEBOOKS}
    assert {tasks.get(t.id).notebook.split("/")[1][:-6] for t in tasks.TASKS} <= stems
    assert "00_welcome" in stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_are_clean(path):
    nb = _read(path)
    assert "widgets" not in nb.metadata, "widget state is stored: regenerate with minilm notebooks"
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), "execution counts are not 1, 2, …: regenerate the notebook"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for o in cell.outputs:
            assert o.output_type != "error", f"cell {i} stores an error: {o.ename}: {o.evalue}"
            assert not (o.output_type == "stream" and o.name == "stderr"), f"cell {i} stores stderr: {o.text[:200]}"
        if "NBVAL_IGNORE_OUTPUT" not in cell.source:
            assert not re.search(r" at 0x[0-9a-f]+>", _text(cell.outputs)), f"cell {i} stores a memory address"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_check_cells_print_one_pass_line_per_task(path):
    nb = _read(path)
    for i, ids in _check_cells(nb):
        lines = _text(nb.cells[i].outputs).strip().splitlines()
        assert len(lines) == len(ids), f"cell {i}: {len(ids)} task(s) checked but {len(lines)} line(s) stored"
        for task_id, line in zip(ids, lines):
            assert line.startswith(f"✓ Task {task_id} "), f"cell {i}: stored {line!r}"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if tasks.for_notebook(p.name)], ids=lambda p: p.stem)
def test_topic_notebooks_hold_a_picture(path):
    nb = _read(path)
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert images >= 1


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if tasks.for_notebook(p.name)], ids=lambda p: p.stem)
def test_topic_notebooks_ask_a_student_to_predict_before_running(path):
    # Issue 26: at least one "predict, then run" question per notebook, in prose before the code it is about.
    nb = _read(path)
    asks = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "**Predict, then run.**" in c.source]
    assert asks, f"{path.name} asks no \"Predict, then run.\" question"
    assert any(any(c.cell_type == "code" for c in nb.cells[i + 1:i + 3]) for i in asks), "no code cell follows it"


@pytest.mark.parametrize("stem", ["05_rope", "06_attention"])
def test_explorer_notebooks_display_widgets(stem):
    nb = _read(next(p for p in NOTEBOOKS if p.stem == stem))
    widget_cells = [c for c in nb.cells if c.cell_type == "code"
                    and any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.outputs)]
    assert widget_cells, f"{stem} shows no widget"
    assert all("NBVAL_IGNORE_OUTPUT" in c.source for c in widget_cells)


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if tasks.for_notebook(p.name)], ids=lambda p: p.stem)
def test_stub_mode_shows_one_clear_line_per_task_and_no_traceback(path, monkeypatch):
    """What a student sees before writing anything: every cell runs, and each task's first
    check cell prints the task's not-implemented line."""
    monkeypatch.setenv("MINILM_IMPL", "minilm")
    for key, value in kernel_env().items():
        monkeypatch.setenv(key, os.environ.get(key, value))
    nb = _read(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
            assert not errors, f"cell {i} raised with the stubs: {errors[0][:300]}"
    seen = set()
    for i, ids in _check_cells(nb):
        for task_id, line in zip(ids, _text(nb.cells[i].outputs).strip().splitlines()):
            if task_id in seen:
                continue
            seen.add(task_id)
            assert re.fullmatch(r"… Task [\d.]+ is not implemented yet: write \S+ in minilm/\w+\.py", line), \
                f"cell {i}, first check of task {task_id}: {line!r}"
    assert seen == {t.id for t in tasks.for_notebook(path.name)}
