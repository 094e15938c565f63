"""nbval's items named as students find them: "cell 6 (check of Task 3.1)", counted from the top
of the notebook with text cells, in the node id, the failure's header and its first line."""

from __future__ import annotations

import dataclasses
import sys


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
    plugin = sys.modules.get("nbval.plugin")  # not imported here: with -p no:nbval it would be imported for nothing
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
