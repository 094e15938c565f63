"""Hidden tests: run by the grader (python -m minilm.grade --hidden-tests …) next to the
notebooks, never shipped to students. Each test is marked with its task and reaches the code
under test only as `minilm.<name>`, so `--impl solutions` tests the reference.

Their inputs are ones the notebooks and visible tests do not show (other shapes, seeds,
dtypes and positions), and the expected values come from PyTorch and minilm.oracles, never
from `solutions` (which cannot be imported while grading)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


def pytest_configure(config):
    config.addinivalue_line("markers", "task(id): the task (from minilm/tasks.py) a test checks")
