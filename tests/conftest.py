"""Shared test setup. Tests reach the code under test only as `minilm.<name>`, so
`--impl solutions` tests the reference and the default tests the student's code."""

from __future__ import annotations

import os

import matplotlib
import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

matplotlib.use("Agg")

# Deterministic, deadline-free property tests: torch's first call of an op can be slow.
_common = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])
settings.register_profile("course", max_examples=25, derandomize=True, **_common)
settings.register_profile("thorough", max_examples=300, **_common)
# Used when proving that known mistakes fail the suite: stop at the first counterexample.
settings.register_profile("fail-fast", max_examples=25, derandomize=True,
                          phases=[Phase.explicit, Phase.generate], **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))

_todo: dict[str, str | None] = {}


def _todo_message(item) -> str | None:
    for marker in item.iter_markers("task"):
        task_id = marker.args[0]
        if task_id not in _todo:
            from minilm import checks

            verdict = checks.run(task_id)
            _todo[task_id] = verdict.message if verdict.status == checks.TODO else None
        if _todo[task_id]:
            return _todo[task_id]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """A test of a task that is still a stub fails at once with the task's one line, instead
    of running (and hypothesis shrinking) every example against a NotImplementedError."""
    message = _todo_message(item)
    if message:
        pytest.fail(message, pytrace=False)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
