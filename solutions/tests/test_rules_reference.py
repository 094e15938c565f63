"""The reference and the stubs generated from it follow every task's "from scratch" rule
(minilm/course/rules), and the registry's task regions match the reference's solution markers."""

from __future__ import annotations

import ast

import pytest

from minilm.course import rules, tasks
from solutions import make_stubs


@pytest.mark.parametrize("module", tasks.EXERCISE_MODULES)
def test_reference_and_stub_are_flagged_for_nothing(module):
    reference = (make_stubs.SOLUTIONS_DIR / f"{module}.py").read_text(encoding="utf-8")
    for text, file in ((reference, f"solutions/{module}.py"),
                       (make_stubs.stub_source(reference, module), f"minilm/{module}.py")):
        found = rules.scan(text, file)
        assert set(found) == {t.id for t in tasks.TASKS if t.module == module}
        assert not any(found.values()), [v.message for vs in found.values() for v in vs]


@pytest.mark.parametrize("module", tasks.EXERCISE_MODULES)
def test_task_names_cover_every_solution_region(module):
    """Each top-level function or class holding a task's solution is one of that task's names
    (`function` or `also`), so the rule judges that code by that task's rules."""
    lines = (make_stubs.SOLUTIONS_DIR / f"{module}.py").read_text(encoding="utf-8").splitlines()
    tops = [(n.lineno, n.end_lineno, n.name) for n in ast.parse("\n".join(lines)).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for i, line in enumerate(lines, 1):
        m = make_stubs.BEGIN.match(line)
        if m:
            [name] = [name for start, end, name in tops if start <= i <= end]
            assert name in tasks.get(m["task"]).names, f"{module}.py:{i}: {name} is not a name of Task {m['task']}"
