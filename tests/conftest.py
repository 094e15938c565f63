"""Shared test setup. Tests reach the code under test only as `minilm.<name>`, so
`--impl solutions` tests the reference and the default tests the student's code."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

matplotlib.use("Agg")

# Deterministic, deadline-free property tests: torch's first call of an op can be slow.
_common = dict(deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])
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
            from minilm.course import checks

            verdict = checks.run(task_id)  # a stub's line, or the from-scratch rule's (it starts "Task N.M: ")
            stopped = verdict.status == checks.TODO or verdict.message.startswith(f"Task {task_id}: ")
            _todo[task_id] = verdict.message if stopped else None
        if _todo[task_id]:
            return _todo[task_id]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """A test of a task that is still a stub, or whose code breaks the task's "from scratch"
    rule (minilm/course/rules/), fails at once with the task's one line, instead of running (and
    hypothesis shrinking) every example against a NotImplementedError or a forbidden built-in."""
    message = _todo_message(item)
    if message:
        pytest.fail(message, pytrace=False)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


SHARED_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinystories_sample.txt"


def _stand_in_stories(n: int = 24) -> str:
    """Short, deterministic stories in TinyStories' style, separated like TinyStories."""
    names, pets, places = ["Lily", "Tom", "Mia", "Ben"], ["cat", "dog", "bird", "fish"], ["park", "garden", "lake"]
    stories = []
    for i in range(n):
        name, pet, place = names[i % 4], pets[(i // 4) % 4], places[i % 3]
        stories.append(
            f"Once upon a time, there was a little girl named {name}. She had a {pet} who loved the {place}. "
            f"One day, {name} and her {pet} went to the {place} to play. They ran and laughed all day. "
            f"When the sun went down, {name} said, \"Thank you for a happy day!\" The {pet} was happy too.")
    return "<|endoftext|>\n".join(stories) + "\n"


@pytest.fixture(scope="session")
def story_file(tmp_path_factory) -> Path:
    """A short text for tokenizer, data and training tests: the TinyStories sample kept beside
    the project on course machines, else a generated stand-in of about the same size."""
    if SHARED_SAMPLE.is_file():
        return SHARED_SAMPLE
    path = tmp_path_factory.mktemp("stories") / "stories.txt"
    path.write_text(_stand_in_stories(), encoding="utf-8")
    return path
