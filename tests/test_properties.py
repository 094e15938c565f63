"""Every task's properties (minilm/course/exercises/: what correct code does on any input, seen on
your code alone), the same ones the task's check names when your code breaks one."""

import pytest

import minilm
from minilm.course import exercises

PROPERTIES = [pytest.param(task, prop, id=f"{task}: {prop.says}", marks=pytest.mark.task(task))
              for task, spec in exercises.load().items() for prop in spec.properties]


@pytest.mark.parametrize("task, prop", PROPERTIES)
def test_property(task, prop):
    saw = prop.probe(minilm)
    assert saw is None, f"Task {task}: {prop.says}, but {saw}"
