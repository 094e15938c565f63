"""Where a notebook's cells stand, as students, nbval and the grader count them (provided).

Shared by the root conftest (which names nbval's items "cell 6 (check of Task 3.1)"), the
sandboxed nbval plugin and the instructor's grader, which reads nbval's JUnit report."""

from __future__ import annotations

import ast
import re

NBVAL_CELL = "nbval_cell"  # the JUnit property holding nbval's code-cell number (see conftest.py)
KERNEL_DIED = "The kernel died while running this cell"  # what the sandboxed plugin reports


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
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                   for line in source.splitlines()))
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
