"""The trusted side of grading: expected outputs and every comparison (instructors only).

This runs in the grader's own process, which never imports a student's code. It computes the
reference's outputs on the same probe cases with `solutions`, reads the worker's outputs as
data, checks exact types, dtypes and shapes before values, and names a catalogued mistake when
the student's outputs match it. Every message is built here from fixed templates and the
grader's own case descriptions, so nothing a submission prints can reach its feedback.
"""

from __future__ import annotations

import atexit
import builtins
import concurrent.futures
import contextlib
import dataclasses
import importlib
import json
import math
import multiprocessing
import os
import re
import threading
from pathlib import Path

import torch

from minilm.course import exercises, tasks
from minilm.course.difference import how_it_differs

MAX_RESULT_BYTES = 64 * 2**20  # a task's outputs are a few hundred kB; more is not ours to load

# How the worker reports a stub's NotImplementedError (minilm/course/sandboxed/worker.py spells it too).
STUB = "todo"


class Reference:
    """`minilm`'s exported names, resolved in `solutions` on every access (so a mistake's patch
    applies while it is in place)."""

    def __getattr__(self, name: str):
        module = tasks.EXPORTS.get(name)
        if module is None:
            raise AttributeError(name)
        return getattr(importlib.import_module(f"solutions.{module}"), name)


def reference_available() -> bool:
    """Whether this checkout is the instructor's: its own solutions/ is there and importable."""
    if not (tasks.ROOT / "solutions" / "hidden_cases.py").is_file():
        return False
    try:
        importlib.import_module("solutions.linear")
        return True
    except ImportError:
        return False


def _seeded(fn, *args):
    torch.manual_seed(0)
    return fn(*args)


# The reference runs in processes of its own, one job at a time each: a mistake is patched into
# the reference inside such a process and nowhere else, and each job seeds its own global RNG, so
# the threads that judge submissions side by side share no state and need no lock.
_POOL: concurrent.futures.ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()  # guards only the pool's creation
# How many threads judge side by side (cli.py sets it before grading): more processes than that
# would only be started, each importing torch and the reference (seconds of CPU), to sit idle.
judging_threads: int | None = None


def _pool() -> concurrent.futures.ProcessPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ProcessPoolExecutor(max(1, min(4, os.cpu_count() or 1, judging_threads or 4)),
                                                           mp_context=multiprocessing.get_context("spawn"),
                                                           initializer=torch.set_num_threads, initargs=(1,))
            atexit.register(_POOL.shutdown)  # before the interpreter tears down what the pool's cleanup needs
        return _POOL


def _reference_rows(task: str, cases: list[dict], mutant: str | None) -> list[dict | None]:
    """In a pool process: the reference's outputs on `cases`, with the catalogued `mutant` applied."""
    from solutions import mistakes

    collect = exercises.get(task).collect
    applied = mistakes.applied(next(m for m in mistakes.all_mutants() if m["name"] == mutant)) if mutant else (
        contextlib.nullcontext())
    rows = []
    with applied:
        for c in cases:
            try:
                rows.append(_detached(_seeded(collect, Reference(), c)))
            except Exception:  # noqa: BLE001 - a mistake may raise; the reference may not
                if mutant is None:
                    raise
                rows.append(None)
    return rows


def _detached(value):
    """Outputs as data that crosses a process boundary: tensors without their autograd graph."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value)
    return value


def expected(task: str, cases: list[dict]) -> list[dict]:
    return _pool().submit(_reference_rows, task, cases, None).result()


def mistake_outputs(task: str, cases: list[dict]) -> dict[str, list[dict | None]]:
    """The catalogued mistakes of `task` run on the same cases (None where one raises)."""
    try:
        from solutions import mistakes
    except ImportError:
        return {}
    # A mistake a property names gives no outputs of its own to recognise (they match the reference's on most cases).
    names = [m["name"] for m in mistakes.all_mutants() if m["task"] == task and not m["broken"]]
    jobs = {name: _pool().submit(_reference_rows, task, cases, name) for name in names}
    return {name: job.result() for name, job in jobs.items()}


# ---------------------------------------------------------------- comparing plain data


tolerance = exercises.tolerance


def describe(value) -> str:
    if type(value) is torch.Tensor:
        return f"a tensor of shape {tuple(value.shape)}, dtype {str(value.dtype).replace('torch.', '')}"
    if type(value) is str and value.startswith("<type "):
        return f"an object of {value[1:-1]}"
    if type(value) is list:
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def differs(got, want, atol: float, rtol: float) -> str | None:
    """Why `got` is not `want`, or None. Exact types first: a tensor must be a plain
    torch.Tensor of the same dtype and shape, with non-finite values in the same places."""
    if type(want) is torch.Tensor:
        if type(got) is not torch.Tensor:
            return f"expected {describe(want)}, got {describe(got)}"
        if got.layout != torch.strided or got.device.type != "cpu":  # sparse or meta tensors: no values to compare
            return f"expected a dense CPU tensor, got layout {got.layout}, device {got.device.type}"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"expected {describe(want)}, got {describe(got)}"
        if got.is_complex() or want.is_complex() or not got.is_floating_point():
            return None if torch.equal(got, want) else _entries(got != want, "differ from the expected ones")
        g, w = got.double(), want.double()
        if not torch.equal(torch.isnan(g), torch.isnan(w)):
            return (_entries(torch.isnan(g) & ~torch.isnan(w), "are NaN where the expected ones are numbers")
                    if bool((torch.isnan(g) & ~torch.isnan(w)).any())
                    else _entries(torch.isnan(w) & ~torch.isnan(g), "are numbers where the expected ones are NaN"))
        if not torch.equal(torch.isinf(g), torch.isinf(w)) or not torch.equal(g[torch.isinf(g)], w[torch.isinf(w)]):
            return _entries((torch.isinf(g) != torch.isinf(w)) | (torch.isinf(g) & (g != w)),
                            "are infinite where the expected ones are not, or the other way round")
        fin = torch.isfinite(w)
        a, r = tolerance(want.dtype, atol, rtol)
        if not torch.allclose(g[fin], w[fin], atol=a, rtol=r):
            if bool(fin.all()):  # how, in the student's words: a factor, an offset, a sign, the wrong places …
                return how_it_differs(g, w, a, r)
            diff = (g[fin] - w[fin]).abs().max().item()
            return _entries(fin & ~torch.isclose(g, w, atol=a, rtol=r), f"differ (largest difference {diff:.3g})")
        return None
    if type(want) is list:
        if type(got) is not list or len(got) != len(want):
            return f"expected {describe(want)}, got {describe(got)}"
        for i, (a, b) in enumerate(zip(got, want)):
            why = differs(a, b, atol, rtol)
            if why:
                return f"item {i}: {why}"
        return None
    if type(want) is float:
        if type(got) is not float or not math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
            return "differs from the expected value"
        return None
    if type(got) is not type(want) or got != want:
        return "differs from the expected value" + (f" ({_short(want)} expected)" if type(want) in (int, bool) else "")
    return None


def _entries(wrong: torch.Tensor, what: str) -> str:
    """"3 of 64 entries differ …, the first at index (0, 5)": where to look."""
    first = tuple(int(i) for i in wrong.nonzero()[0]) if bool(wrong.any()) else ()
    return f"{int(wrong.sum())} of {wrong.numel()} entries {what}, the first at index {first}"


def _short(v) -> str:
    return repr(v)[:40]


# ---------------------------------------------------------------- one task's verdict


@dataclasses.dataclass
class TaskResult:
    task: str
    ok: bool
    message: str  # trusted text only
    mistake: str | None = None
    hidden: bool = False  # the first failure was on a hidden case


# The exception names feedback may repeat: Python's own. A class the submission defined could
# carry text out through its name.
_EXCEPTIONS = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))


# Bounds on what one task's results may hold, checked before any arithmetic: the largest output
# any task's contract has is 131,072 elements (1.2's initialization sample), 263,074 in all.
MAX_ELEMENTS = 2**21
MAX_TOTAL_ELEMENTS = 2**23
UNUSABLE = "<type tensor the grader refuses>"  # what stands for a tensor outside the bounds


MAX_ITEMS = 200_000  # list and dict items in one task's results: the largest honest output has a few thousand


class _Budget:
    """What one task's results may still hold: tensor elements and container items, and the containers met so
    far. A pickle can refer to one list from many places, at no cost on disk: walking it would cost each time."""

    def __init__(self):
        self.elements, self.items, self.seen = MAX_TOTAL_ELEMENTS, MAX_ITEMS, set()

    def container(self, value) -> bool:
        if id(value) in self.seen or len(value) > self.items:
            return False
        self.seen.add(id(value))
        self.items -= len(value)
        return True


def _bounded(value, budget: _Budget, depth: int = 0):
    """`value` with every tensor checked against the bounds before anything reads its values: a
    plain dense CPU tensor of a number dtype, contiguous, whose storage really holds all its
    elements (a stride-0 view of a huge shape would cost memory only when materialized); and no
    container met twice or past the item budget."""
    if type(value) is torch.Tensor:
        n = value.numel()
        ok = (value.layout == torch.strided and value.device.type == "cpu" and n <= MAX_ELEMENTS
              and n <= budget.elements and not value.is_quantized and value.dtype in _DTYPES and value.is_contiguous()
              and value.untyped_storage().nbytes() >= (value.storage_offset() + n) * value.element_size())
        if not ok:
            return UNUSABLE
        budget.elements -= n
        return value
    if type(value) is list and depth < 5 and budget.container(value):
        return [_bounded(v, budget, depth + 1) for v in value[:1000]]
    if type(value) is dict and depth < 5 and budget.container(value):
        return {k: _bounded(v, budget, depth + 1) for k, v in list(value.items())[:1000] if type(k) is str}
    if type(value) in (int, float, bool, str) or value is None:
        return value[:10_000] if type(value) is str else value
    return UNUSABLE


_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
                     torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128})


def load_results(path: Path, n_cases: int) -> list[dict] | None:
    """The worker's outputs for one task, as plain data within the bounds, or None when unusable."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULT_BYTES:
            return None
        rows = torch.load(path, weights_only=True, map_location="cpu")
    except Exception:  # noqa: BLE001 - anything the worker wrote that is not plain data
        return None
    if type(rows) is not list or len(rows) != n_cases or any(type(r) is not dict for r in rows):
        return None
    budget = _Budget()
    if not budget.container(rows):
        return None
    return [_bounded(r, budget) for r in rows]


# What stands for the hidden cases' rows when the worker handed back the notebook's cases' but not
# theirs (a crash, a hang or too much output there): made here, so no file can spell it.
DID_NOT_FINISH = object()


def load_task_results(out: Path, task: str, n_cases: int, n_visible: int) -> list[dict] | None:
    """One task's rows from the worker's two files (worker.py): the notebook's cases' (None when it did
    not hand those back), then the hidden cases', or DID_NOT_FINISH rows where it did not hand those back.
    A task that fails only on hidden cases is then judged as failing there, whatever the failure:
    reported as not finishing at all, it would tell the student before grades are published."""
    visible = load_results(out / f"{task}.pt", n_visible)
    if visible is None or n_cases == n_visible:
        return visible
    hidden = load_results(out / f"{task}.hidden.pt", n_cases - n_visible)
    if hidden is None:
        hidden = [{"ok": False, "error": DID_NOT_FINISH}] * (n_cases - n_visible)
    return visible + hidden


_REFUSED_WHAT = re.compile(r"[A-Za-z0-9_.<>]{1,120}|something that switched the recording off|code torch called back"
                           r"|code handed to a torch function")
_REFUSED_WHERE = re.compile(r"minilm/[a-z_]{1,30}\.py:\d{1,7}")
_REFUSED_FUNCTION = re.compile(r"[A-Za-z_<>][A-Za-z0-9_<>]{0,60}")


def load_refusal(out: Path, task: str) -> str | None:
    """The from-scratch rule's refusal the worker handed back for `task` (worker.py), as a message made here from
    the registry's words and the report's fields, each checked against its form; None when it ran no refused
    call. The report comes from the submission's own process: it can only cost the submission its points."""
    path = out / f"{task}.refused.json"
    if path.is_symlink() or not path.is_file():
        return None
    from minilm.course.rules.recorder import Refusal

    try:
        data = json.loads(path.read_bytes()[:8192])
    except (OSError, ValueError, RecursionError):
        data = None
    data = data if type(data) is dict else {}
    field = lambda key, form: data[key] if type(data.get(key)) is str and form.fullmatch(data[key]) else ""  # noqa: E731
    advice = {a for _, a in tasks.get(task).forbidden}
    said = data.get("advice") if type(data.get("advice")) is str else ""
    return str(Refusal(task, field("what", _REFUSED_WHAT) or "a call the rule refuses", field("where", _REFUSED_WHERE),
                       field("function", _REFUSED_FUNCTION), said if said in advice else "",
                       data.get("escape") is True))


def judge_task(task: str, cases: list[dict], n_visible: int, rows: list[dict] | None) -> TaskResult:
    probe = exercises.get(task)
    name = tasks.get(task).function
    if rows is None:
        return TaskResult(task, False, f"{name} did not finish: it crashed, exited or ran over its time limit")
    want = expected(task, cases)
    mistakes = None
    for i, (case, row, w) in enumerate(zip(cases, rows, want)):
        hidden = i >= n_visible
        where = f"on an input the notebook does not show ({case['what']})" if hidden else f"on {case['what']}"
        if row.get("ok") is not True:
            err = row.get("error")
            if err is DID_NOT_FINISH:
                return TaskResult(task, False, f"{name} did not finish the inputs the notebook does not show: it "
                                               "crashed, exited, ran over its time limit or returned too much there",
                                  hidden=True)
            if err == STUB:  # raised on a hidden input only, it is a failure there like any other
                return TaskResult(task, False, tasks.get(task).todo_message(), hidden=hidden)
            err = err if type(err) is str and err in _EXCEPTIONS else "an exception"
            return TaskResult(task, False, f"{name} raised {err} {where}", hidden=hidden)
        got = row.get("out")
        if type(got) is not dict:
            return TaskResult(task, False, f"{name} returned no outputs {where}", hidden=hidden)
        why = None
        for key in w:
            if key in probe.free:
                continue
            problem = differs(got.get(key), w[key], probe.atol, probe.rtol)
            if problem:
                why = f"{key}: {problem}"
                break
        if why is None and probe.invariant is not None:
            try:
                why = probe.invariant(got, case)
            except Exception:  # noqa: BLE001 - malformed outputs
                why = "its outputs have the wrong types or shapes"
        if why is None:
            continue
        if mistakes is None:
            mistakes = mistake_outputs(task, cases)
        compared = [k for k in w if k not in probe.free]
        for mistake, outs in mistakes.items():
            m_out = outs[i]
            if m_out is not None and compared and all(differs(got.get(k), m_out[k], probe.atol, probe.rtol) is None
                                         for k in m_out if k not in probe.free):
                return TaskResult(task, False, f"{name} {where}: your output matches the known mistake `{mistake}`",
                                  mistake, hidden)
        return TaskResult(task, False, f"{name} {where}: {why}", hidden=hidden)
    return TaskResult(task, True, f"{name} matches the reference on {n_visible} notebook input(s) and "
                                  f"{len(cases) - n_visible} hidden one(s)")


def make_cases(task: str, seed: int | None) -> tuple[list[dict], int]:
    """The notebook's cases (the task's spec) and the hidden ones (drawn from `seed`), and how many are the
    notebook's."""
    from solutions.hidden_cases import hidden_cases

    visible = exercises.get(task).cases()
    hidden = hidden_cases(task, torch.Generator().manual_seed(seed)) if seed is not None else []
    return visible + hidden, len(visible)
