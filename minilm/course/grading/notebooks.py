"""The course's notebooks as the grader sees them: check cells, pristine copies, nbval's report.

Also the pytest plugin (`-p minilm.course.grading.notebooks`) that nbval runs load inside the sandbox:
it only makes a cell whose kernel died fail at once instead of after the cell's time limit.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from minilm.course import tasks

COURSE = tasks.ROOT
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
KERNEL_DIED = "The kernel died while running this cell"
MAX_JUNIT_BYTES = 20 * 2**20
NBVAL_CELL = "nbval_cell"  # the JUnit property holding nbval's code-cell number (see conftest.py)


class NotebookError(Exception):
    pass


def code_cells(nb: dict) -> list[str]:
    """Sources of the code cells, numbered as nbval numbers them ("Cell 0" is the first code cell)."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def cell_position(nb: dict, code_index: int) -> int:
    """Where nbval's code cell `code_index` stands in the notebook as JupyterLab shows it: 1-based,
    counting every cell, text cells included (the root conftest names test items the same way)."""
    positions = [i for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]
    return positions[code_index] + 1 if 0 <= code_index < len(positions) else code_index + 1


def checked_tasks(source: str, calls: tuple[str, ...] = ("check",)) -> list[str]:
    """Task ids a cell checks: the string arguments of its check(...) calls (or of the calls
    named in `calls`: the root conftest also reads needs(...), a demo cell's tasks)."""
    try:
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()))
    except SyntaxError:  # not Python (e.g. a cell magic): fall back to the plain pattern
        pattern = rf"(?<![\w\"])(?:{'|'.join(calls)})\(([^)]*)\)"
        return re.findall(r'"(\d+\.\d+)"', " ".join(re.findall(pattern, source)))
    ids = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in calls:
                ids += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return ids


def check_cells(nb: dict) -> dict[int, list[str]]:
    """nbval cell number → the task ids it checks, for every check cell of a notebook."""
    found = {i: checked_tasks(src) for i, src in enumerate(code_cells(nb))}
    return {i: ids for i, ids in found.items() if ids}


def _stored_text(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def has_reference_outputs(nb: dict) -> bool:
    """Whether every check cell still holds the reference's verdicts (✓ Task <id> …): a notebook
    a student ran and saved holds their own outputs instead, which must not be graded against."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return all(all(f"✓ Task {t} " in _stored_text(cells[i]) for t in ids) for i, ids in check_cells(nb).items())


def pristine_notebook(path: Path) -> bytes:
    """The notebook with the reference's stored outputs: the file itself, or else its last
    committed version (an instructor's checkout may hold notebooks they ran and saved)."""
    data = path.read_bytes()
    if has_reference_outputs(json.loads(data)):
        return data
    rel = path.relative_to(COURSE).as_posix()
    try:
        committed = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=COURSE, capture_output=True, timeout=60).stdout
        if committed and has_reference_outputs(json.loads(committed)):
            return committed
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    raise NotebookError(f"{rel} holds outputs that are not the course's (was it run and saved?): grading compares "
                        f"with the stored reference outputs. Restore it with `git checkout -- {rel}`.")


def select(selectors: list[str] | None) -> list[Path]:
    paths = sorted((COURSE / "notebooks").glob(NOTEBOOK_GLOB))
    if not selectors:
        return paths
    unknown = [s for s in selectors if not any(p.stem == s or p.stem.startswith(s) for p in paths)]
    if unknown:
        raise NotebookError(f"no notebook matches {', '.join(unknown)}; the notebooks are: {', '.join(p.stem for p in paths)}")
    return [p for p in paths if any(p.stem == s or p.stem.startswith(s) for s in selectors)]


# ---------------------------------------------------------------- nbval's report (untrusted: it can only cost points)


@dataclasses.dataclass
class Cell:
    notebook: str
    number: int
    status: str  # passed | differs | error | timeout | crashed | not run


def _classify(text: str) -> str:
    if KERNEL_DIED in text:
        return "crashed"
    if "Kernel dead on test start" in text:
        return "not run"
    if "Timeout of" in text:
        return "timeout"
    if "Cell outputs differ" in text:
        return "differs"
    return "error"


def parse_junit(path: Path) -> dict[tuple[str, int], Cell]:
    """nbval's JUnit report → one Cell per (notebook stem, cell number). Written in the sandbox,
    so only a status is taken from it, never text; a cell it says passed earns nothing by itself."""
    cells: dict[tuple[str, int], Cell] = {}
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_JUNIT_BYTES:
            return cells
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError, ValueError):
        return cells
    for case in root.iter("testcase"):
        m = re.search(r"([^./\\]+)\.ipynb$", case.get("classname", ""))
        # The root conftest names cells as students find them ("cell 15 (check of Task 3.1)") and
        # keeps nbval's own number, the one check_cells uses, as a property; nbval alone: "Cell 5".
        prop = next((p.get("value", "") for p in case.iter("property") if p.get("name") == NBVAL_CELL), None)
        n = re.fullmatch(r"(\d+)", prop) if prop is not None else re.fullmatch(r"Cell (\d+)", case.get("name", ""))
        if not (m and n):
            continue
        key = (m.group(1), int(n.group(1)))
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if problem is not None:
            status = _classify((problem.get("message") or "") + "\n" + (problem.text or ""))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":  # nbval: after a timeout
            status = "error"
        elif skipped is not None:
            status = "not run"
        else:
            status = "passed"
        cells[key] = Cell(*key, status)
    return cells


# ---------------------------------------------------------------- the plugin, inside the sandbox


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
