"""The course's notebooks as the grader sees them: pristine copies and nbval's report (trusted).

The plugin that nbval runs load inside the sandbox is minilm/course/sandboxed/nbval_plugin.py."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from minilm.course import tasks
from minilm.course.cells import KERNEL_DIED, NBVAL_CELL, check_cells

COURSE = tasks.ROOT
MAX_JUNIT_BYTES = 20 * 2**20


class NotebookError(Exception):
    pass


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
    paths = tasks.course_notebooks(COURSE / "notebooks")
    if not selectors:
        return paths
    unknown = [s for s in selectors if not any(p.stem == s or p.stem.startswith(s) for p in paths)]
    if unknown:
        raise NotebookError(f"no notebook matches {', '.join(unknown)}; the notebooks are: "
                            f"{', '.join(p.stem for p in paths)}")
    return [p for p in paths if any(p.stem == s or p.stem.startswith(s) for s in selectors)]


# ---------------------------------------------------------------- nbval's report (untrusted: it can only cost points)


@dataclasses.dataclass
class Cell:
    notebook: str
    number: int
    status: str  # passed | differs | error | timeout | crashed | not run | skipped


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
        # Every field is cut short before a pattern reads it: a report written in the sandbox can hold a 20 MB
        # classname, over which a search that backtracks took minutes of the grader's own time.
        m = re.search(r"([^./\\]{1,100})\.ipynb$", case.get("classname", "")[-200:])
        # The root conftest names cells as students find them ("cell 15 (check of Task 3.1)") and
        # keeps nbval's own number, the one check_cells uses, as a property; nbval alone: "Cell 5".
        prop = next((p.get("value", "") for p in case.iter("property") if p.get("name") == NBVAL_CELL), None)
        n = re.fullmatch(r"(\d{1,6})", prop[:10]) if prop is not None else re.fullmatch(r"Cell (\d{1,6})",
                                                                                       case.get("name", "")[:20])
        if not (m and n):
            continue
        key = (m.group(1), int(n.group(1)))
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        skipped = next((c for c in case if c.tag == "skipped"), None)
        if problem is not None:
            status = _classify(((problem.get("message") or "")[:10_000] + "\n" + (problem.text or "")[:10_000]))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":  # nbval: after a timeout
            status = "error"
        elif skipped is not None:
            status = "not run"
        else:
            status = "passed"
        cells[key] = Cell(*key, status)
    return cells
