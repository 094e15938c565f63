"""Check cells and diagnoses (provided: not an exercise).

Every task's check is its spec (minilm/course/exercises/: one definition per task, shared with the
grader). A check runs the student's code (through `minilm`, so MINILM_IMPL=solutions checks the
reference) on the spec's visible cases, the notebook's inputs, tests the spec's invariants (what
needs no reference: shapes, state_dict names, initialization statistics, consecutive windows),
then compares every tensor output within the spec's tolerance with the reference's output on the
same case, stored in minilm/course/expected.pt, and either returns the spec's one-line success
message or raises CheckFailed naming what differs and, when the output matches a known
mistake's stored output, which mistake.

Nothing here implements a task: the expected outputs are data, written by the instructors'
`minilm expected`, which runs every check in *recording* mode (`record`) on the reference and
on each known mistake, so the spec decides what is stored.

    from minilm.course.checks import check
    check("3.1")   # prints one deterministic line: ✓ …, ✗ …, or the task's not-implemented line

The same verdicts feed the test suite, the status command and the grader.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from minilm.course import rules, tasks
from minilm.course.difference import how_it_differs, named_cause

PASS, FAIL, TODO, ERROR = "pass", "fail", "todo", "error"
SYMBOL = {PASS: "✓", FAIL: "✗", TODO: "…", ERROR: "✗"}

_CHECKS: dict[str, Callable[[], str]] = {}


class CheckFailed(AssertionError):
    """A check's verdict: what differs, and the known mistake it matches (if any)."""

    def __init__(self, message: str, mistake: str | None = None, where: str | None = None):
        super().__init__(message)
        self.message, self.mistake = message, mistake
        self.where = where  # the student's file:line to open, when the check knows it
        self.output: str | None = None  # the spec's output key that differs, set by run_spec
        # Where and how the output differs, in words and naming no mistake ("rms_norm(x, w) on …: every
        # value is 2 times the expected one"): the second rung of `minilm hint`; None when the message is all.
        self.difference: str | None = None
        self.broken: str | None = None  # the spec's property that broke (its `says`), when one did
        self.generic = False  # True when the message says how values differ: a property, if one breaks, says more
        self.cause: str | None = None  # the cause the values suggest (a factor, the squares), kept beside a property


@dataclass(frozen=True)
class Verdict:
    task: str
    status: str  # pass | fail | todo | error
    message: str
    mistake: str | None = None
    # Where to look first, "minilm/rope.py:31" (for `minilm status`'s Next): the line your code
    # raised at, or the definition of the function whose output differs; None: the task's own.
    where: str | None = None
    # Where and how the output differs, naming no mistake (the second rung of `minilm hint`, which keeps the
    # mistake for its third); None when the message says it all (an error, an invariant, a rule).
    difference: str | None = None
    broken: str | None = None  # the property of the task's spec that your code breaks (hint rungs 2 and 3)

    @property
    def ok(self) -> bool:
        return self.status == PASS

    @property
    def line(self) -> str:
        # a stub, or a rule (minilm/course/rules/)
        if self.status == TODO or self.message.startswith(f"Task {self.task}: "):
            return f"{SYMBOL[self.status]} {self.message}"
        title = tasks.get(self.task).function
        return f"{SYMBOL[self.status]} Task {self.task} {title}: {self.message}"

    def __str__(self) -> str:
        return self.line


def _load() -> None:
    """Every task's check: its spec (minilm/course/exercises/), run on the visible cases by run_spec."""
    from minilm.course import exercises

    for task_id, s in exercises.load().items():
        _CHECKS[task_id] = lambda s=s: run_spec(s)


def todo_message(exc: BaseException) -> str | None:
    """The stub's message if `exc` is (or wraps) a stub's NotImplementedError, else None."""
    while exc is not None:
        if isinstance(exc, NotImplementedError) and str(exc).startswith("Task "):
            return str(exc)
        exc = exc.__cause__ or exc.__context__
    return None


# ---------------------------------------------------------------- stored expectations

EXPECTED_PATH = Path(__file__).resolve().with_name("expected.pt")
_EXPECTED: dict | None = None


class MissingExpectation(LookupError):
    """The stored expectations lack an output a check asks for (a course bug, not the student's)."""


def expected_outputs() -> dict:
    """minilm/course/expected.pt, loaded once: {"tasks": {task: {"want": {key: tensor},
    "mistakes": {label: {key: tensor}}}}}, plain data read with weights_only=True."""
    global _EXPECTED
    if _EXPECTED is None:
        if not EXPECTED_PATH.is_file():
            raise MissingExpectation(f"{EXPECTED_PATH.name} is missing from the course: the checks compare with the "
                                     "reference's outputs stored there (instructors: minilm expected)")
        _EXPECTED = torch.load(EXPECTED_PATH, weights_only=True, map_location="cpu")
    return _EXPECTED


@dataclass
class Recording:
    """What a check produced in recording mode: its outputs at every compared key, the mistake
    labels each key names, and why it stopped early (None when it ran to the end)."""

    outputs: dict[str, object] = field(default_factory=dict)
    labels: dict[str, list[str]] = field(default_factory=dict)
    stopped: str | None = None


class _Running:
    task: str | None = None
    seen: dict[str, int] = {}
    recording: Recording | None = None


_RUN = _Running()


@contextlib.contextmanager
def _running(task_id: str, recording: Recording | None = None) -> Iterator[None]:
    saved = (_RUN.task, _RUN.seen, _RUN.recording)
    _RUN.task, _RUN.seen, _RUN.recording = task_id, {}, recording
    try:
        yield
    finally:
        _RUN.task, _RUN.seen, _RUN.recording = saved


def _key(what: str) -> str:
    """A key unique within one run of a check: `what`, then `what #2`, `what #3` when repeated."""
    n = _RUN.seen[what] = _RUN.seen.get(what, 0) + 1
    return what if n == 1 else f"{what} #{n}"


def _stored(task_id: str) -> dict:
    return expected_outputs()["tasks"].get(task_id, {})


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_detached(v) for v in value]
    return value


def _reference_at(key: str, got, labels: tuple[str, ...] = ()):
    if _RUN.recording is not None:
        _RUN.recording.outputs[key] = _detached(got)
        if labels:
            _RUN.recording.labels[key] = list(labels)
        return got
    want = _stored(_RUN.task).get("want", {}).get(key)
    if want is None:
        raise MissingExpectation(f"no stored output for Task {_RUN.task}'s {key!r} in {EXPECTED_PATH.name} "
                                 "(instructors: minilm expected)")
    return want


def mistake_output(label: str, key: str):
    """A known mistake's stored output at `key`, or None."""
    return _stored(_RUN.task).get("mistakes", {}).get(label, {}).get(key)


def record(task_id: str) -> Recording:
    """Run a task's check in recording mode with whatever `minilm` resolves to (instructors run it
    on the reference and on each known mistake, see solutions/expected.py)."""
    _load()
    fn = _CHECKS[task_id]
    recording = Recording()
    with _running(task_id, recording):
        try:
            torch.manual_seed(0)
            fn()
        except Exception as e:  # noqa: BLE001 - a mistake may stop its check early: keep what it reached
            recording.stopped = f"{type(e).__name__}: {e}"
    return recording


def run(task_id: str, known: dict[str, Verdict] | None = None) -> Verdict:
    """Run one task's check and return its verdict (never raises for student errors).

    Code that breaks the task's "from scratch" rule (minilm/course/rules/: a refused built-in ran, or
    the source holds a way around the recording) fails with the rule's one line.
    A failing check whose task runs an earlier task's code (Task.uses) that fails its own check
    says so first: that task's bug may be this one's. `known` holds verdicts already run (status
    runs every check in course order) and receives the earlier checks run here."""
    verdict = _verdict(task_id)
    if verdict.status in (PASS, TODO) or verdict.message.startswith(f"Task {task_id}: "):
        return verdict  # passing, a stub, or the task's own rule broken: nothing earlier to blame
    known = {} if known is None else known
    for earlier in tasks.prerequisites(task_id):
        if earlier.id not in known:
            known[earlier.id] = run(earlier.id, known)
        first = known[earlier.id]
        if first.status in (FAIL, ERROR):
            return dataclasses.replace(
                verdict, where=first.where,
                message=f"Task {earlier.id} fails; fix it first: {task_id} uses your {earlier.function}. "
                        f"Meanwhile {task_id}'s check says: {verdict.message}")
    return verdict


def run_many(task_ids) -> list[Verdict]:
    """The verdicts of several tasks, each check run once though a failing one asks about the tasks it uses."""
    known: dict[str, Verdict] = {}
    for task_id in task_ids:
        if task_id not in known:
            known[task_id] = run(task_id, known)
    return [known[t] for t in task_ids]


def _verdict(task_id: str, rule: bool = True) -> Verdict:
    """One task's own check, blind to the tasks it uses, run under the from-scratch rule's recorder (without it,
    rule=False: the release's leak probe asks whether provided code computes a task's result at all)."""
    from minilm.course.rules.recorder import exercise_files, watching

    _load()
    tasks.get(task_id)
    fn = _CHECKS.get(task_id)
    if fn is None:
        raise KeyError(f"task {task_id} has no registered check")
    broken = rules.lint_for(task_id) if rule else []
    if broken:
        return Verdict(task_id, FAIL, broken[0])
    record = watching(task_id, exercise_files(rules.implementation_folder())) if rule else contextlib.nullcontext()
    try:
        with _running(task_id), record:
            torch.manual_seed(0)
            message = fn()
        if _refusal(record) is None:
            return Verdict(task_id, PASS, message)
    except CheckFailed as e:
        if _refusal(record) is None:
            where = e.where or (_definition_of(_spec_label(task_id, e.output)) if e.output else None)
            return Verdict(task_id, FAIL, e.message, e.mistake, where, e.difference, e.broken)
    except NotImplementedError as e:
        todo = todo_message(e)
        if _refusal(record) is None and todo is not None:
            return Verdict(task_id, TODO, todo)
        if _refusal(record) is None:
            return Verdict(task_id, ERROR, *_raised(e, task_id))
    except Exception as e:  # a student's bug: report it in one line, not a traceback
        if _refusal(record) is None:
            return Verdict(task_id, ERROR, *_raised(e, task_id))
    return Verdict(task_id, FAIL, str(record.refusal), where=record.refusal.where or None)


def _refusal(record):
    return getattr(record, "refusal", None)


# ---------------------------------------------------------------- where in the student's files


def _exercise_files() -> dict[Path, str]:
    """The exercise modules `minilm` has run (the student's, or the reference's with MINILM_IMPL=solutions),
    each with the path a message shows, "minilm/rope.py". Read from the imported modules, not guessed
    from the project root: the reference may sit elsewhere (a student edition checked with it)."""
    import minilm

    pkg = minilm.implementation()
    found = {}
    for m in tasks.EXERCISE_MODULES:
        file = getattr(sys.modules.get(f"{pkg}.{m}"), "__file__", None)  # a module not imported raised nothing
        if file:
            found[Path(file).resolve()] = f"{pkg}/{m}.py"
    return found


def raised_at(exc: BaseException, task_id: str | None = None) -> str | None:
    """file:line of the deepest frame of `exc`'s traceback in an exercise module: the student's own
    line that raised or called into torch (or into the course's argument checks), not torch's. While a
    task's check runs, the deepest frame in that task's own file comes first: an error raised inside an
    earlier module (rope.py's argument checks) was most likely passed a bad argument by this one (an
    earlier module with a bug of its own fails its own check, which `run` names first)."""
    files, frames = _exercise_files(), []
    tb = exc.__traceback__
    while tb is not None:
        shown = files.get(Path(tb.tb_frame.f_code.co_filename).resolve())
        if shown is not None:
            frames.append(f"{shown}:{tb.tb_lineno}")
        tb = tb.tb_next
    task_id = task_id or _RUN.task  # the check's verdict is made after its run has ended: it passes the task
    own = f"/{tasks.get(task_id).module}.py:" if task_id in tasks.BY_ID else None
    mine = [f for f in frames if own and own in f]
    return (mine or frames or [None])[-1]


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line(exc: BaseException, limit: int = 200) -> str:
    """An error in one line, without terminal colour codes, and without torch.load's advice to pass
    weights_only=False (the bug is in what was saved: only its reason is kept)."""
    text = " ".join(_ANSI.sub("", f"{type(exc).__name__}: {exc}").split())
    refused = re.search(r"WeightsUnpickler error: (.*?)(?: Please use| Check the documentation|$)", text)
    if "Weights only load failed" in text and refused:
        text = (f"{type(exc).__name__}: torch.load(weights_only=True) refused the file: {refused.group(1)} (save "
                f"only tensors, numbers and dicts of them)")
    return text if len(text) <= limit else text[:limit - 2].rstrip() + " …"


def _raised(exc: BaseException, task_id: str | None = None) -> tuple[str, None, str | None]:
    """(message, mistake, where) for an error your code raised: its one line and your file:line."""
    where = raised_at(exc, task_id)
    if where is None:  # raised by the check itself on what your code returned
        return f"raised {_one_line(exc)}", None, None
    return f"your code raised {_one_line(exc)} ({where})", None, where


def _spec_label(task_id: str, key: str) -> str:
    from minilm.course import exercises

    return exercises.get(task_id).label(key)


def _definition_of(label: str) -> str | None:
    """file:line of the definition an output's label names ("rope_angles", "dequantize_int8(q, scale)",
    "minilm/attention.py, MultiHeadSelfAttention.forward …"): the function to fix first. None when
    the label names none (the task's main function is then the place, as for any failure)."""
    named = re.search(r"\b(" + "|".join(sorted(tasks.EXPORTS, key=len, reverse=True)) + r")\b(?:\.(\w+))?", label)
    if named is None:
        return None
    name, method = named.groups()
    for path, shown in _exercise_files().items():
        if shown.endswith(f"/{tasks.EXPORTS[name]}.py") and path.is_file():
            line = definition_line(path.read_text(encoding="utf-8"), name, method)
            return f"{shown}:{line}" if line else None
    return None


def definition_line(text: str, name: str, method: str | None = None) -> int | None:
    """The line of top-level `name`'s def or class (of its `method`, when given and found) in a module's text."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            for inner in node.body if method else ():
                if isinstance(inner, ast.FunctionDef) and inner.name == method:
                    return inner.lineno
            return node.lineno
    return None


def check(*task_ids: str) -> None:
    """Notebook check cell: print one line per task."""
    for task_id in task_ids:
        print(run(task_id).line)


def registered() -> tuple[str, ...]:
    _load()
    return tuple(t.id for t in tasks.TASKS if t.id in _CHECKS)


class CannotShow(Exception):
    """Provided code (a plot, an explorer) cannot show what the student's code does, because that
    code raised or lacks what the task's contract names. Its message is one line that starts
    "Task N.M: " and says what to fix; `needs` prints it instead of a traceback."""


@contextlib.contextmanager
def needs(*task_ids: str) -> Iterator[None]:
    """Wrap a demo cell that uses the student's code: while a task is still a stub, print its
    one-line not-implemented message instead of a traceback, and carry on; when a plot cannot
    show the student's code (CannotShow), print its one line instead of a traceback.

        with needs("3.1"):
            plot_rmsnorm_vs_layernorm(minilm.rms_norm)
    """
    before = _figures()
    try:
        yield
    except NotImplementedError as e:
        todo = todo_message(e)
        if todo is None:
            raise
        _close_figures_since(before)
        print(f"{SYMBOL[TODO]} {todo} (this cell runs once it is)")
    except CannotShow as e:
        _close_figures_since(before)
        print(f"{SYMBOL[FAIL]} {e} (this cell runs once it is fixed)")


def _figures() -> set[int]:
    """The numbers of the open matplotlib figures (none when pyplot was never imported)."""
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


def _close_figures_since(before: set[int]) -> None:
    """Close the figures opened since `before`: a plot that stopped at a stub would otherwise show
    its empty or half-drawn axes under the cell's one line."""
    plt = sys.modules.get("matplotlib.pyplot")
    for number in _figures() - before:
        plt.close(number)


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


def _judge(got, want, what: str, key: str | None, mistakes: dict[str, str] | None, atol: float, rtol: float,
           explain: Callable | None = None) -> None:
    """Raise CheckFailed unless got ≈ want, naming a mistake whose stored output at `key` got matches,
    or saying how got differs (`explain(got, want)`, when given)."""
    if close(got, want, atol, rtol):
        return
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor of {describe(want)}, got {describe(got)}")
    for label, advice in (mistakes or {}).items():
        output = mistake_output(label, key) if key is not None else None
        if output is None:
            continue
        if close(got, output, atol, rtol) or _both_nonfinite_alike(got, output):
            failed = CheckFailed(f"{what}: {advice}", mistake=label.split(" ")[0])
            failed.label = label
            failed.difference = f"{what}: " + (how_it_differs(got, want, atol, rtol) if got.shape == want.shape
                                               else f"expected {describe(want)}, got {describe(got)}")
            raise failed
    why = explain(got, want) if explain is not None else None
    if why:  # a locator's restated rule is a guess too: a broken property comes first
        failed = CheckFailed(f"{what}: {why}")
        failed.generic, failed.cause = True, None
        raise failed
    if got.shape != want.shape:  # a broken property comes first, with the shapes beside it
        failed = CheckFailed(f"{what}: expected {describe(want)}, got {describe(got)}")
        failed.generic, failed.cause = True, f"{what} has {describe(got)}, expected {describe(want)}"
        raise failed
    failed = CheckFailed(f"{what}: {how_it_differs(got, want, atol, rtol)}")
    # What the values alone suggest (a factor, an offset, the wrong places) is a guess at a cause; a broken
    # property is a fact about the student's code, so run_spec asks the properties first.
    failed.generic = True
    failed.cause = named_cause(got, want, atol, rtol)
    raise failed


def _both_nonfinite_alike(got: torch.Tensor, other: torch.Tensor) -> bool:
    if got.shape != other.shape:
        return False
    bad_got, bad_other = ~torch.isfinite(got), ~torch.isfinite(other)
    return bool(bad_other.any()) and torch.equal(bad_got, bad_other) and close(got[~bad_got], other[~bad_other])


# ---------------------------------------------------------------- running a task's spec


def run_spec(s) -> str:
    """A check cell for a task's spec (minilm/course/exercises/): collect your outputs on each visible
    case, test the spec's invariants, then compare every tensor output with the reference's stored
    one under the key "<label> on <case>" (other outputs, such as state_dict names, are the
    invariants' to judge), then test the spec's properties on your code alone. What it says is, in
    order: a catalogued mistake your outputs match, else the first property your code breaks, else
    how an output differs. In recording mode the invariants and properties are skipped, so a
    mistake's outputs are kept wherever it reaches."""
    try:
        _compare_cases(s)
    except CheckFailed as failed:
        if getattr(failed, "label", None) and _RUN.recording is None and not _mistake_on_every_case(s, failed.label):
            failed.mistake, failed.generic, failed.cause = None, True, None
            failed.message = failed.difference or failed.message
            failed.args = (failed.message,)
        if failed.generic and _RUN.recording is None:  # a property names a cause where values merely differ
            _raise_broken_property(s, failed)
        raise
    if _RUN.recording is None:
        _raise_broken_property(s, None)
    return s.passed


def _mistake_on_every_case(s, label: str) -> bool:
    """Whether your outputs match a catalogued mistake's stored ones on every visible case, not only where the
    comparison stopped: two mistakes can agree on one input (at p = 0.5, a mask drawn as bernoulli(1 − p) is
    the catalogued `rand < p`) and part on the next, and naming the wrong one sends the student astray."""
    import minilm
    from minilm.course.exercises import tolerance

    seen, _RUN.seen = _RUN.seen, {}
    try:
        for case in s.cases():
            try:
                got = s.collect(minilm, case)
            except Exception:  # noqa: BLE001 - an error on another case is the comparison's to report
                return True
            for key, value in got.items():
                if key in s.free:
                    continue
                try:
                    items = _tensors(f"{s.label(key)} on {case['what']}", value)
                except CheckFailed:
                    return True
                for name, item in items:
                    output = mistake_output(label, _key(name))
                    if output is None:
                        continue
                    atol, rtol = tolerance(output.dtype, s.atol, s.rtol)
                    if not (close(item, output, atol, rtol) or _both_nonfinite_alike(item, output)):
                        return False
        return True
    finally:
        _RUN.seen = seen


def _raised_in_the_probe(e: BaseException) -> bool:
    """Whether an exception was raised by a property's own code (indexing an output of another shape), not by
    the student's code or anything it called."""
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(str(Path(__file__).resolve().parent))


def _raise_broken_property(s, failed: CheckFailed | None) -> None:
    """Raise CheckFailed for the first of the spec's properties your code breaks (keeping what the
    comparison found, if it failed, as the difference); return when every one holds."""
    import minilm

    for prop in sorted(s.properties, key=lambda p: not p.first):
        where = None
        try:
            saw = prop.probe(minilm)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - raising is breaking the property
            where = raised_at(e)
            if where is None and _raised_in_the_probe(e):  # the probe tripped on an output of another form
                if failed is not None:
                    continue  # the comparison's finding says more
                saw = (f"the check could not read your output ({_one_line(e)} inside the check): is it of the "
                       "shape and type the contract gives?")
            else:
                saw = f"your code raised {_one_line(e)}" + (f" ({where})" if where else "")
        if saw is None:
            continue
        cause = failed.cause if failed is not None else None
        broken = CheckFailed(f"{prop.says}, but {saw}" + (f"; and on the check's inputs {cause}" if cause else ""),
                             where=where)
        broken.broken, broken.output = prop.says, failed.output if failed is not None else None
        broken.difference = (failed.difference or failed.message) if failed is not None else None
        raise broken from None


def _compare_cases(s) -> None:
    """Collect and judge every visible case: invariants first, then each tensor output."""
    import minilm
    from minilm.course.exercises import tolerance

    for case in s.cases():
        before = {k: v.detach().clone() for k, v in case.items() if isinstance(v, torch.Tensor)}
        try:
            got = s.collect(minilm, case)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - an error some mistake raises on this case: name it
            named = s.on_error(case) if s.on_error is not None else None
            if named is None:
                raise
            mistake, advice = named
            where = raised_at(e)
            error = " ".join(f"{type(e).__name__}: {e}".split()) + (f" ({where})" if where else "")
            raise CheckFailed(f"on {case['what']}: raised {error}. {advice}", mistake, where) from None
        if _RUN.recording is None:
            _raise_if_inputs_changed(case, before)
        if _RUN.recording is None and s.invariant is not None:
            problem = s.invariant(got, case)
            if problem is not None:
                failed = CheckFailed(str(problem) + getattr(problem, "detail", ""), getattr(problem, "mistake", None))
                # a count off is a symptom: a broken property, if one is, names its cause
                failed.generic, failed.cause = failed.mistake in (None, "parameter_count"), None
                raise failed
        for key, value in got.items():
            if key in s.free:
                continue
            try:
                items = _tensors(f"{s.label(key)} on {case['what']}", value)
                if _RUN.recording is None:
                    # the reference gave a tensor (or more of them) where yours gives something else
                    wanted = _stored(_RUN.task).get("want", {})
                    name = f"{s.label(key)} on {case['what']}"
                    listed = name.replace(" on ", f" [{len(items)}] on ", 1)
                    if not items and name in wanted:
                        raise CheckFailed(f"{name}: expected a tensor of {describe(wanted[name])}, "
                                          f"got {describe(value)}")
                    if listed in wanted:
                        raise CheckFailed(f"{s.label(key)} on {case['what']}: expected more than {len(items)} tensors")
                for name, item in items:
                    stored = _key(name)
                    want = _reference_at(stored, item, tuple(s.mistakes))
                    if _RUN.recording is not None:
                        continue
                    if item.dtype != want.dtype and item.shape == want.shape:
                        raise CheckFailed(f"{name}: expected {describe(want)}, got {describe(item)}")
                    atol, rtol = tolerance(want.dtype, s.atol, s.rtol)
                    explain = (lambda g, w, key=key: s.explain(key, g, w)) if s.explain is not None else None
                    _judge(item, want, name, stored, s.mistakes, atol, rtol, explain)
            except CheckFailed as e:  # which output differs tells status which function to open
                e.output = key
                raise


def _raise_if_inputs_changed(case: dict, before: dict[str, torch.Tensor]) -> None:
    """A case's tensors are the caller's: code that writes into its input (x += …, masked_fill_) changes
    them for every later use, and its output may even look right."""
    for key, old in before.items():
        now = case[key]
        if _same(now.detach(), old):
            continue
        raise CheckFailed(f"on {case['what']}: your code changed its input {key} in place (a +=, *=, or an "
                          f"operation ending in _ on an argument): compute into a new tensor, leave the caller's "
                          f"as it was")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)
    return torch.equal(a, b)


def _tensors(name: str, value) -> list[tuple[str, torch.Tensor]]:
    """The tensors of one output, each with the name it is stored under: a tensor, or each tensor of
    a list of them (the gradients of several parameters); anything else is for the invariants."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, list) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [(name.replace(" on ", f" [{i}] on ", 1), v) for i, v in enumerate(value)]
    return []
