"""The from-scratch rule (minilm/course/rules/): judged by what runs, it refuses every attack of the static
rule's corpus and of the classes after it, and leaves honest code every point. The check cells judge
variants of the reference here, as they judge a student's minilm/, each in a forked child of one process
(solutions/tests/rule_runner.py); test_grade*.py show the grader gives the same verdicts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from minilm.course import tasks
from minilm.course.rules import lint
from solutions.tests.attacks import CORPUS, HONEST, RUNTIME_ATTACKS
from solutions.tests.grading_helpers import FUTURE, reference, replace_region

pytestmark = pytest.mark.slow


def run_checks(jobs: dict[str, dict], tmp_path) -> dict[str, dict[str, list[str]]]:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(jobs), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "solutions.tests.rule_runner", str(path)], capture_output=True,
                       text=True, env={**os.environ, "MINILM_IMPL": "solutions", "PYTHONWARNINGS": "ignore"},
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def _order(task_id: str) -> tuple[int, ...]:
    return tuple(int(p) for p in task_id.split("."))


def attack_source(module: str, task: str, body: str, prelude: str, future: bool) -> str:
    source = replace_region(reference(module), task, body)
    return source.replace(FUTURE, FUTURE + prelude if future else prelude, 1)


def corpus_jobs() -> dict[str, dict]:
    jobs = {}
    for name, (file, source) in CORPUS.items():
        source = textwrap.dedent(source).lstrip("\n")
        flagged = {t for line in source.splitlines()
                   for t in (re.search(r"# flag: ([\d. ]+)$", line) or [None, ""])[1].split()}
        jobs[f"corpus:{name}"] = {"files": {file.removesuffix(".py"): source}, "tasks": sorted(flagged, key=_order)}
    return jobs


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, dict[str, list[str]]]:
    """Every variant below, judged by the check cells in one process: the corpus, the attacks, the honest package."""
    jobs = corpus_jobs()
    jobs |= {f"attack:{name}": {"files": {module: attack_source(module, task, body, prelude, future)},
                                "tasks": [task]} for name, module, task, body, prelude, future in RUNTIME_ATTACKS}
    jobs["honest"] = {"files": honest_package(), "tasks": [t.id for t in tasks.TASKS]}
    return run_checks(jobs, tmp_path_factory.mktemp("rule"))


def test_every_attack_of_the_static_rules_corpus_earns_nothing(verdicts):
    # Each module as a student's whole file: every task the old rule flagged fails, by the rule or otherwise.
    earned = [f"{name} {t}: {line}" for name, out in verdicts.items() if name.startswith("corpus:")
              for t, (status, line) in out.items() if status == "pass"]
    assert not earned, "\n".join(earned)


def test_every_attack_on_what_runs_is_refused(verdicts):
    results = {name.removeprefix("attack:"): out for name, out in verdicts.items() if name.startswith("attack:")}
    for name, module, task, *_ in RUNTIME_ATTACKS:
        status, line = results[name][task]
        # the rule's own line: a refused call that ran, or what the lint keeps out of the source
        assert status == "fail" and line.startswith(f"✗ Task {task}: "), f"{name}: {line}"
        assert f"minilm/{module}.py:" in line or f"solutions/{module}.py:" in line, f"{name}: {line}"


def honest_package() -> dict[str, str]:
    sources: dict[str, str] = {}
    for _, module, change in HONEST:
        source = sources.get(module) or reference(module)
        if isinstance(change, tuple):
            sources[module] = replace_region(source, change[0], textwrap.dedent(change[1]))
        else:
            sources[module] = source + textwrap.dedent(change)
    return sources


def test_honest_variants_keep_every_point(verdicts):
    failed = [line for status, line in verdicts["honest"].values() if status != "pass"]
    assert not failed, "\n".join(failed)


def test_the_lint_reads_what_stopped_the_old_scan_in_linear_time():
    # red team: a 12 kB line of 1+1+…+1 (the parser's recursion), and 6,000 chained aliases (the old scan's
    # quadratic pass): one finding, or none, and no exception
    [deep] = lint.lint("x = " + "+".join(["1"] * 6000) + "\n", "linear")
    assert "could not be read" in deep.what or "does not parse" in deep.what
    aliases = "import torch\nz0 = torch\n" + "".join(f"z{i + 1} = z{i}\n" for i in range(6000)) + "z6000.exp = 1\n"
    [patch] = lint.lint(aliases, "linear")
    assert patch.line == 6003 and "changes z6000.exp" in patch.what
    assert lint.parse_problem("def f(:\n", "linear").startswith("minilm/linear.py:1: syntax error")


def test_a_watched_name_bound_to_itself_stays_watched():
    # `getattr = getattr` made the name the file's own, and lookups by computed names passed (red team 5)
    found = [f.what for f in lint.lint("getattr = getattr\nx = getattr(torch, 'C'.lower())\n", "linear")]
    assert any("binds the name getattr" in w for w in found) and any("computed name" in w for w in found), found
    assert any("binds the name eval" in f.what for f in lint.lint("eval = eval\n", "linear"))
    assert lint.lint("def f(input, type):\n    input = input * 2\n    return input\n", "linear") == []


def test_a_lint_finding_costs_the_tasks_of_its_module_and_of_those_importing_it():
    found = lint.lint_package({"linear": "import sys\n", "attention": "from .linear import Linear\n",
                               "data": "import numpy\n"})
    assert set(found) == {t.id for t in tasks.TASKS if t.module in ("linear", "attention")}
    assert found["6.1"] == ["Task 6.1: minilm/linear.py:1 imports sys, which no exercise may: it could switch off "
                            "or get around the from-scratch check; write the code itself with the operations the "
                            "task allows"]


def _watched(task_id: str, fn):
    """Run `fn` under task_id's recorder, with this file as the student's."""
    from minilm.course.rules.recorder import watching

    with watching(task_id, {__file__: "minilm/attention.py"}) as record:
        fn()
    return record.refusal


def test_a_call_that_would_switch_the_recording_off_is_refused_before_it_runs():
    before = sys.getprofile()
    refusal = _watched("6.1", lambda: sys.setprofile(None))
    assert refusal.escape and refusal.what == "sys.setprofile"
    assert sys.getprofile() is before  # the recorder's hook ran the refusal and then put the old one back


def test_switching_it_off_from_c_is_refused_before_it_runs_even_when_put_back():
    # map() calls sys.setprofile from C, which makes no profile event: the audit hook sees it, and refuses it
    # before it runs, so code that switches the hook off, calls what it likes and puts the hook back is caught
    before = sys.getprofile()

    def off_and_back():
        list(map(sys.setprofile, [None]))
        list(map(sys.setprofile, [before]))

    refusal = _watched("6.1", off_and_back)
    assert refusal.escape and refusal.what == "sys.setprofile" and refusal.where.startswith("minilm/attention.py:")
    assert sys.getprofile() is before


def test_torch_reads_a_scalar_type_it_is_handed_without_calling_it():
    import torch

    assert _watched("6.1", lambda: torch.ones(3, 3, dtype=bool).tril()) is None


def test_code_that_recurses_without_end_raises_and_is_refused_nothing():
    def forever(n):
        return forever(n + 1)

    from minilm.course.rules.recorder import watching

    with pytest.raises(RecursionError), watching("6.1", {__file__: "minilm/attention.py"}) as record:
        forever(0)
    assert record.refusal is None


def test_threads_and_the_torch_function_stack_are_out_of_reach():
    import threading

    import torch

    assert _watched("1.1", lambda: threading.Thread(target=print).start()).escape
    assert _watched("1.1", lambda: torch._C._pop_torch_function_stack()).escape


def test_library_code_may_do_for_itself_what_the_students_code_may_not():
    import io

    import torch

    # torch.save opens files, pickles and locks on 10.5's behalf: its own calls, not the student's
    assert _watched("10.5", lambda: torch.save({"w": torch.ones(2)}, io.BytesIO())) is None
    assert _watched("6.1", lambda: torch.save({"w": torch.ones(2)}, io.BytesIO())).what == "torch.serialization.save"


def test_a_family_is_refused_whoever_calls_it_and_only_torchs_functions_belong_to_one():
    import unicodedata

    import torch

    x = torch.randn(3, 4)
    assert _watched("6.1", lambda: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)) is None
    assert _watched("3.1", lambda: unicodedata.normalize("NFC", "é")) is None  # not F.normalize
    assert _watched("6.1", lambda: sorted([x], key=lambda t: float(t.softmax(-1).sum()))).what == "Tensor.softmax"
    refusal = _watched("10.4", lambda: torch.optim.AdamW([torch.nn.Parameter(x)]).step())
    assert refusal.what.startswith("torch.optim.adamw.") and not refusal.escape


def test_code_made_or_run_out_of_sight_is_refused():
    # The eleventh red team: a thread started from C (a new thread has neither hook), torch's own optimizer code
    # re-homed under another file name (code.replace), or run once with globals named as the student's so that
    # the verdict cached for its code was "free"; each earned points. Data on a tensor and a model's deepcopy pass.
    import _thread
    import copy
    import functools
    import types

    import torch
    import torch.nn.utils.clip_grad as clip_grad

    found = []

    def thread_from_c():
        class Box:
            pass
        box = Box()
        box.__reduce_ex__ = functools.partial(next, map(_thread.start_new_thread, [found.append], [(1,)]))
        copy.copy(box)

    assert _watched("6.1", thread_from_c).what == "_thread.start_new_thread" and not found
    inner = clip_grad.clip_grad_norm_.__wrapped__
    assert _watched("10.2", lambda: inner.__code__.replace(co_filename="<mine>")).what == "code.__new__"
    assert _watched("10.2", lambda: types.FunctionType(inner.__code__, {"__name__": "mine"})).what == "function.__new__"
    # the verdict is the code's, by the file it lives in, whatever globals its first frame had
    twin = types.FunctionType(inner.__code__, {"__name__": "mine"})  # made before the watch: only run under it

    def run_the_twin():
        try:
            twin([torch.nn.Parameter(torch.ones(3))], 1.0, 2.0, False, None)
        except NameError:  # its globals hold nothing else: the first frame is what was judged
            pass

    refusal = _watched("10.2", run_the_twin)
    assert refusal is not None and refusal.what.startswith("torch.nn.utils.clip_grad."), refusal
    tagged = torch.ones(2)
    tagged.note = {"step": 1, "scale": torch.ones(1)}
    assert _watched("6.1", lambda: (copy.deepcopy(tagged), torch.softmax is not None, tagged + 1)) is None
    assert _watched("6.1", lambda: copy.deepcopy(torch.nn.Linear(4, 2))) is None


def test_the_twelfth_red_teams_ways_are_refused_and_an_honest_decorator_is_not():
    # A Tensor subclass's __slots__ member (outside the instance's __dict__) as the method torch's Python
    # Tensor.__rdiv__ calls with the mode paused; enum.bltns, the builtins module under another name, whose
    # getattr reached sys and the rule's lists; rebinding those lists. Up to 70 points of one submission.
    import functools

    import torch

    from minilm.course.rules import families

    class Holder(torch.Tensor):
        __slots__ = ("reciprocal",)

    def through_a_slot():
        h = Holder([1.0])
        h.reciprocal = functools.partial(torch.softmax, torch.randn(3), 0)
        return 1 / h

    assert _watched("6.1", through_a_slot).what == "code handed to a torch function"
    assert {f.what for f in lint.lint("import enum\nLOOK = enum.bltns.getattr\n", "attention")} == {
        "uses .bltns", "uses .getattr"}
    saved = families.BUILT_IN_LIBRARIES
    try:
        families.BUILT_IN_LIBRARIES = ("none",)  # what the red team's setattr did, from a module of its own
        assert _watched("6.1", lambda: torch.softmax(torch.randn(3), 0)).what == "torch.softmax"
    finally:
        families.BUILT_IN_LIBRARIES = saved

    def decorated():  # @functools.wraps as honest decorators use it: a function around a function, default names
        def logged(fn):
            @functools.wraps(fn)
            def inner(*args):
                return fn(*args)
            return inner
        return logged(lambda x: x + 1)(1)

    assert _watched("6.1", decorated) is None
    assert _watched("6.1", lambda: functools.update_wrapper(type("Box", (), {})(), torch)).what == (
        "functools.update_wrapper")  # a module's whole namespace copied onto an object: vars() by another name


def test_torch_is_handed_data_never_code():
    # Torch iterates what it is handed with the mode paused, and C code called from there makes no event:
    # map(torch.softmax, …) as Tensor.backward's inputs ran unseen (the eighth red team). Data passes.
    import collections
    import copy

    import numpy as np
    import torch

    x = torch.randn(3, 4)

    def from_c():
        try:
            torch.zeros((), requires_grad=True).backward(inputs=map(torch.softmax, [x], [-1]))
        except (TypeError, RuntimeError):
            pass

    handed = "code handed to a torch function"
    assert _watched("6.1", from_c).what == handed
    assert _watched("6.1", lambda: torch.zeros(3)[collections.defaultdict(int)]).what == handed
    assert _watched("6.1", lambda: copy.deepcopy(torch.nn.Linear(4, 2))) is None  # Tensor.__deepcopy__'s memo
    assert _watched("6.1", lambda: torch.tensor([np.int64(1), 2.5])[np.array([0, 1])][..., None, 0:1]) is None
    assert _watched("6.1", lambda: torch.from_file(os.devnull, size=0)).escape
    assert any("uses .from_file" in f.what for f in lint.lint("import torch\nt = torch.from_file('x')\n", "attention"))
    # os is importable for os.PathLike alone: an alias would take it past that (red team 9: `o = os; o.listdir`)
    assert [f.what for f in lint.lint("import os\no = os\n", "data")] == [
        "uses os itself, where only PathLike of it may be used"]
    assert lint.lint("import os\ndef f(p: os.PathLike):\n    return isinstance(p, os.PathLike)\n", "data") == []
    # a private attribute stored on another object is not the file's own (red team 10: leaf._backward_hooks = {});
    # at run time setting a tensor's private attribute is refused too, and reading a memmap the caller made is data
    assert [f.what for f in lint.lint("def f(leaf):\n    leaf._hooks = {}\n", "attention")] == [
        "uses the private name _hooks"]
    assert lint.lint("class K:\n    def __init__(self):\n        self._cache = []\n", "attention") == []
    leaf = torch.zeros(2, requires_grad=True)
    assert _watched("6.1", lambda: setattr(leaf, "_backward_hooks", {})).what == "Tensor._backward_hooks.__set__"
    memmap = np.arange(9).view(np.memmap)  # what slicing a memmap of the dataset gives
    assert _watched("9.1", lambda: torch.as_tensor(memmap[2:5], dtype=torch.long)) is None
