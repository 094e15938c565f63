"""The pytest plugins the root conftest.py loads, one concern each:

- cells.py: nbval's items named as students find them ("cell 6 (check of Task 3.1)");
- task_selection.py: `--task ID` (what `minilm test ID` runs): a task's tests and notebook cells;
- order.py: the cores shared among xdist workers, and the long-running scopes started first;
- imports.py: a slow import refused before nbval loads (pyproject's addopts loads it first).
"""
