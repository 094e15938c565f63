"""A batch's grades as data (trusted): what the grader decides, what reports, the LMS gradebook and
Gradescope read. grades.json holds them as JSON (`to_json`), read back with `from_json`."""

from __future__ import annotations

import dataclasses

# A check cell of a notebook the grader did not run: every task it checks had already lost its points.
SKIPPED = "skipped"


@dataclasses.dataclass
class CellResult:
    """One check cell of a notebook, as nbval ran it in the sandbox (it can cost points, never earn them)."""

    notebook: str  # the notebook's stem, e.g. "03_rmsnorm"
    number: int  # nbval's code-cell number
    status: str  # passed | differs | error | timeout | crashed | not run | skipped
    position: int | None = None  # among all the notebook's cells, from 1, as JupyterLab shows it


@dataclasses.dataclass
class TaskGrade:
    points: int
    max: int
    message: str  # the comparison's verdict, in the grader's own words
    mistake: str | None = None  # the catalogued mistake the outputs match
    hidden_failed: bool = False  # the first failure was on a hidden input
    matched: bool = False  # the outputs matched the reference on every input
    rules: list[str] = dataclasses.field(default_factory=list)  # the from-scratch rules broken
    cells: list[CellResult] = dataclasses.field(default_factory=list)

    @property
    def full(self) -> bool:
        return self.points == self.max


@dataclasses.dataclass
class StudentGrade:
    student: str  # the name the instructor gave the submission
    source: str
    total: int
    max: int
    tasks: dict[str, TaskGrade]
    unsandboxed: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)  # about the submission's files
    problems: list[str] = dataclasses.field(default_factory=list)  # about its run (time limits, …)
    seconds: float = 0.0
    sandbox: str = ""
    limits_not_applied: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> StudentGrade:
        known = {f.name for f in dataclasses.fields(cls)}
        tasks = {t: TaskGrade(**{**r, "cells": [CellResult(**c) for c in r.get("cells", [])]})
                 for t, r in data["tasks"].items()}
        return cls(**{"source": "", **{k: v for k, v in data.items() if k in known and k != "tasks"}}, tasks=tasks)
