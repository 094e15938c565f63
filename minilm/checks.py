"""Check cells and diagnoses (provided: not an exercise).

Every task has one check, registered here with @register("3.1"). A check runs the student's
code (through `minilm`, so MINILM_IMPL=solutions checks the reference) on fixed probe inputs,
compares with an independent oracle (PyTorch's own ops, see minilm/oracles.py) within a
tolerance, and either returns a one-line success message or raises CheckFailed naming what
differs and, when the output matches a known mistake, which mistake.

    from minilm.checks import check
    check("3.1")   # prints one deterministic line: ✓ …, ✗ …, or the task's not-implemented line

The same verdicts feed the test suite, the status command and the grader.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from minilm import rules, tasks

PASS, FAIL, TODO, ERROR = "pass", "fail", "todo", "error"
SYMBOL = {PASS: "✓", FAIL: "✗", TODO: "…", ERROR: "✗"}

_CHECKS: dict[str, Callable[[], str]] = {}
# Modules whose import registers more checks (kept separate so each topic owns its file).
_CHECK_MODULES = ("minilm.checks_model", "minilm.checks_training")


class CheckFailed(AssertionError):
    """A check's verdict: what differs, and the known mistake it matches (if any)."""

    def __init__(self, message: str, mistake: str | None = None):
        super().__init__(message)
        self.message, self.mistake = message, mistake


@dataclass(frozen=True)
class Verdict:
    task: str
    status: str  # pass | fail | todo | error
    message: str
    mistake: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == PASS

    @property
    def line(self) -> str:
        if self.status == TODO or self.message.startswith(f"Task {self.task}: "):  # a stub, or a rule (minilm/rules.py)
            return f"{SYMBOL[self.status]} {self.message}"
        title = tasks.get(self.task).function
        return f"{SYMBOL[self.status]} Task {self.task} {title}: {self.message}"

    def __str__(self) -> str:
        return self.line


def register(task_id: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    tasks.get(task_id)  # an unknown id is a bug in the course, caught at import

    def deco(fn: Callable[[], str]) -> Callable[[], str]:
        _CHECKS[task_id] = fn
        return fn

    return deco


def _load() -> None:
    for name in _CHECK_MODULES:
        importlib.import_module(name)


def todo_message(exc: BaseException) -> str | None:
    """The stub's message if `exc` is (or wraps) a stub's NotImplementedError, else None."""
    while exc is not None:
        if isinstance(exc, NotImplementedError) and str(exc).startswith("Task "):
            return str(exc)
        exc = exc.__cause__ or exc.__context__
    return None


def run(task_id: str) -> Verdict:
    """Run one task's check and return its verdict (never raises for student errors).

    Code that breaks the task's "from scratch" rule (minilm/rules.py: a forbidden built-in,
    or a way around the rules) fails at once with the rule's one line, before the check runs."""
    _load()
    tasks.get(task_id)
    fn = _CHECKS.get(task_id)
    if fn is None:
        raise KeyError(f"task {task_id} has no registered check")
    broken = rules.violations_for(task_id)
    if broken:
        return Verdict(task_id, FAIL, broken[0].message)
    try:
        torch.manual_seed(0)
        return Verdict(task_id, PASS, fn())
    except CheckFailed as e:
        return Verdict(task_id, FAIL, e.message, e.mistake)
    except NotImplementedError as e:
        todo = todo_message(e)
        if todo is not None:
            return Verdict(task_id, TODO, todo)
        return Verdict(task_id, ERROR, f"raised NotImplementedError: {e}")
    except Exception as e:  # a student's bug: report it in one line, not a traceback
        return Verdict(task_id, ERROR, f"raised {type(e).__name__}: {e}")


def check(*task_ids: str) -> None:
    """Notebook check cell: print one line per task."""
    for task_id in task_ids:
        print(run(task_id).line)


def registered() -> tuple[str, ...]:
    _load()
    return tuple(t.id for t in tasks.TASKS if t.id in _CHECKS)


@contextlib.contextmanager
def needs(*task_ids: str) -> Iterator[None]:
    """Wrap a demo cell that uses the student's code: while a task is still a stub, print its
    one-line not-implemented message instead of a traceback, and carry on.

        with needs("3.1"):
            plot_rmsnorm_vs_layernorm(minilm.rms_norm)
    """
    try:
        yield
    except NotImplementedError as e:
        todo = todo_message(e)
        if todo is None:
            raise
        print(f"{SYMBOL[TODO]} {todo} (this cell runs once it is)")


# ---------------------------------------------------------------- comparing outputs


def describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"shape {tuple(t.shape)}, dtype {str(t.dtype).replace('torch.', '')}"
    return type(t).__name__


def close(got, want, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and torch.allclose(got.detach().double(), want.detach().double(), atol=atol, rtol=rtol)
    )


def compare(
    got,
    want: torch.Tensor,
    what: str,
    mistakes: dict[str, tuple[torch.Tensor | Callable[[], torch.Tensor], str]] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Raise CheckFailed unless got ≈ want. `mistakes` maps a mistake's name to (its output,
    or a function computing it, advice): when got matches a mistake's output, the failure
    names that mistake and gives the advice."""
    if close(got, want, atol, rtol):
        return
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor of {describe(want)}, got {describe(got)}")
    if got.shape != want.shape:
        raise CheckFailed(f"{what}: expected {describe(want)}, got {describe(got)}")
    for name, (output, advice) in (mistakes or {}).items():
        try:
            output = output() if callable(output) else output
        except Exception:
            continue
        if close(got, output, atol, rtol) or _both_nonfinite_alike(got, output):
            raise CheckFailed(f"{what}: {advice}", mistake=name.split(" ")[0])
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{what}: your output has NaN or inf where the expected one is finite")
    diff = (got.detach().double() - want.detach().double()).abs().max().item()
    raise CheckFailed(f"{what}: values differ from the expected ones (largest difference {diff:.3g})")


def _both_nonfinite_alike(got: torch.Tensor, other: torch.Tensor) -> bool:
    if got.shape != other.shape:
        return False
    bad_got, bad_other = ~torch.isfinite(got), ~torch.isfinite(other)
    return bool(bad_other.any()) and torch.equal(bad_got, bad_other) and close(got[~bad_got], other[~bad_other])


def expect(condition: bool, message: str, mistake: str | None = None) -> None:
    if not condition:
        raise CheckFailed(message, mistake)
