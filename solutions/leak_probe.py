"""Does provided code compute a task's result? Ask the task's own check (instructors only).

    python -m solutions.leak_probe RELEASE_DIR [FILE ...]   # FILE: relative to RELEASE_DIR, default every one

Run by `solutions/release.py` in a child process whose path puts RELEASE_DIR's `minilm` first and
this course's `solutions` after it, with MINILM_IMPL=solutions. For every task and every name the
task writes (Task.names), each top-level function (for a function) or class (for a class) defined
in the release's provided modules (`minilm/**/*.py` but the exercise modules and `__main__`s)
takes the reference's place under that name, and the task's check (minilm/course/checks.py, the
release's own, with its stored expectations) runs on it. A candidate the check passes computes the
task's result on every visible case: that is a leak, whatever the code looks like and whether or
not the task forbids a built-in (the release's static checks catch the built-ins and the oracles'
copies; this one catches a provided `sinusoidal_encoding` written from the paper's formula).

It fails closed: each task's check must pass on the reference and fail on a function that returns
None (an object that does nothing, for a class), before and after the candidates run, or the task
cannot be judged and that is a problem; so is a module that cannot be imported, and a candidate
left unjudged. Candidates run in forked children, so one that ends its process (the sandbox
worker's os._exit) or breaks global state takes only itself out; one that ends its process, or
has not finished after CALL_SECONDS (the reference takes milliseconds on these cases) has not
passed. A candidate whose signature cannot bind the check's first call of the name is not run:
its check would stop there with a TypeError. It prints one JSON list of problems (file:line: …)
on its last line.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import signal
import sys
import warnings
from pathlib import Path

CALL_SECONDS = 4  # one check run with one candidate in place; the checks' visible cases take well under 1 s
SKIP = ("__main__.py",)  # importing one runs its program; its code is a call of a module listed anyway


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _deadline(seconds: float):
    def stop(signum, frame):
        raise _Timeout

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def provided_modules(release: Path, files: list[str] | None = None) -> list[tuple[str, str]]:
    """(module name, file relative to the release) of every provided module, or of `files`."""
    from minilm.course import tasks

    exercise = {f"minilm/{m}.py" for m in tasks.EXERCISE_MODULES}
    paths = [release / f for f in files] if files else sorted((release / "minilm").rglob("*.py"))
    out = []
    for path in paths:
        rel = path.relative_to(release).as_posix()
        if rel in exercise or path.name in SKIP:
            continue
        parts = list(path.relative_to(release).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), rel))
    return out


def candidates(modules: list[tuple[str, str]], problems: list[str]) -> list[tuple[str, object]]:
    """(file:line name, object) of each top-level function and class a provided module defines."""
    found = []
    for name, rel in modules:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - a module that cannot be imported cannot be judged
            problems.append(f"{rel}: cannot import {name} to run its code against the tasks' checks: "
                            f"{type(e).__name__}: {e}")
            continue
        for attr, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == name:
                try:
                    line = inspect.getsourcelines(obj)[1]
                except (OSError, TypeError):
                    line = 0
                found.append((f"{rel}:{line} {attr}", obj))
    return found


def _garbage(*args, **kwargs):
    """The negative control: returns something of no task's result."""
    return None


class _Garbage:
    def __init__(self, *args, **kwargs):
        pass


def _first_call(task_id: str, module, name: str) -> tuple[int, tuple[str, ...]] | None:
    """How the task's check first calls module.name with the reference in place: (number of
    positional arguments, keyword names), or None when it never does. Until that call a candidate's
    check runs exactly as the reference's, so a candidate whose signature cannot bind it fails the
    check there with a TypeError: it need not run."""
    original = module.__dict__[name]
    calls = []

    def recorder(*args, **kwargs):  # a function's call or a class's construction, then the reference's own
        calls.append((len(args), tuple(kwargs)))
        return original(*args, **kwargs)

    _verdict(task_id, module, name, recorder)  # a check that first reads an attribute of it records no call
    return calls[0] if calls else None


def _binds(obj, call: tuple[int, tuple[str, ...]] | None) -> bool:
    if call is None:
        return True  # never called: let the check say what it does with the candidate
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return True  # no signature to read: run it
    try:
        signature.bind(*([None] * call[0]), **dict.fromkeys(call[1]))
    except TypeError:
        return False
    return True


def _verdict(task_id: str, module, name: str, replacement) -> str:
    """The task's own check (blind to the tasks it uses) with `replacement` as module.name."""
    from minilm.course import checks

    original = module.__dict__[name]
    setattr(module, name, replacement)
    try:
        with _deadline(CALL_SECONDS), warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore")
            return checks._verdict(task_id, rule=False).status  # what it computes, not how
    except _Timeout:
        return "timeout"
    except BaseException as e:  # noqa: BLE001 - SystemExit from an argparse main, …: not a pass
        return f"raised {type(e).__name__}"
    finally:
        setattr(module, name, original)


def _send(fd: int, **message) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _child(write_end: int, task_id: str, name: str, found: list[tuple[str, object]], first: int) -> None:
    """In a forked child: the controls, then found[first:] one by one, each reported on the pipe
    before ("start") and after ("done") its check, with what it loaded ("loaded"); never returns."""
    code = 0
    try:
        import minilm
        from minilm.course import checks, tasks

        before = _loaded()

        def report_loaded():
            nonlocal before
            now = _loaded()
            if now != before:  # lists: their lengths compared first, and most candidates load nothing
                old = {what: set(names) for what, names in before.items()}
                _send(write_end, loaded={what: [n for n in names if n not in old[what]] for what, names in now.items()})
                before = now

        module = minilm.exercise_module(tasks.get(task_id).module)
        reference = module.__dict__[name]
        control = _Garbage if inspect.isclass(reference) else _garbage
        _send(write_end, control=_verdict(task_id, module, name, reference) == checks.PASS
              and _verdict(task_id, module, name, control) != checks.PASS)
        for i in range(first, len(found)):
            _send(write_end, start=i)
            status = _verdict(task_id, module, name, found[i][1])
            report_loaded()
            _send(write_end, done=i, status=status)
        _send(write_end, after=_verdict(task_id, module, name, reference) == checks.PASS)
    except BaseException:  # noqa: BLE001
        code = 1
    os._exit(code)


def _run_children(task_id: str, name: str, found: list[tuple[str, object]]) -> dict:
    """Each candidate's status for one task's name, from forked children: a candidate that ends
    its process (os._exit, a crash) cannot have passed the check ("exited"), and the next child
    goes on after it; one that outlives CALL_SECONDS is "timeout". Also what the candidates loaded
    ("loaded", see _loaded), in order."""
    import select
    import time

    statuses: dict[int, str] = {}
    controls: list[bool] = []
    loaded: dict[str, list[str]] = {}
    first = 0
    while first <= len(found):
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _child(write_end, task_id, name, found, first)
        os.close(write_end)
        running, buffer, deadline = None, b"", time.monotonic() + 2 * CALL_SECONDS + 30
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while True:
                ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    if running is not None:
                        statuses[running] = "timeout"
                    break
                chunk = pipe.read(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    deadline = time.monotonic() + 2 * CALL_SECONDS + 30
                    if "control" in message:
                        controls.append(message["control"])
                    elif "start" in message:
                        running = message["start"]
                    elif "done" in message:
                        statuses[message["done"]], running = message["status"], None
                    elif "after" in message:
                        controls.append(message["after"])
                    elif "loaded" in message:
                        for what, names in message["loaded"].items():
                            loaded.setdefault(what, []).extend(names)
        os.waitpid(pid, 0)
        if running is not None:
            statuses.setdefault(running, "exited")
            first = running + 1
        elif len(statuses) >= len(found) or not controls or not controls[-1]:
            break
        else:  # the child stopped between candidates: go on after the last one done, or give up
            after = max(statuses, default=first - 1) + 1
            if after <= first:
                break
            first = after
    return {"statuses": statuses, "controls": controls, "loaded": loaded}


# Packages whose modules _load_in_parent leaves alone: the release's are candidates()'s to import (it
# skips those that run a program), and the reference's are imported task by task, as they always were
# (one imported while a candidate stands in for a name it imports would bind the candidate).
_OWN = ("minilm", Path(__file__).parent.name, "__main__")


def _loaded() -> dict[str, list[str]]:
    """What this process has loaded that provided code loads lazily and that takes long to load:
    modules, and tiktoken's encodings (GPT-2's: its 50,000 merges parsed, some 0.7 s)."""
    registry = sys.modules.get("tiktoken.registry")
    return {"modules": list(sys.modules), "encodings": list(getattr(registry, "ENCODINGS", ()))}


def _load_in_parent(loaded: dict[str, list[str]]) -> None:
    """Load here what a child's candidates loaded, so that the next children are forked with it:
    a candidate's lazy loads are lost with its child, and torch.compile's imports alone (torch._dynamo,
    torch._inductor: some 600 modules, 2 to 5 s) were paid again in every child whose candidates
    include a function that calls it. Only libraries (see _OWN). What does not load here is left to
    the children, as before: this only saves time, the verdicts are still the children's."""
    for what, names in loaded.items():
        for name in names:
            if what == "modules" and (name in sys.modules or name.partition(".")[0] in _OWN):
                continue
            try:
                with _deadline(CALL_SECONDS), warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                    warnings.simplefilter("ignore")
                    if what == "modules":
                        importlib.import_module(name)
                    else:
                        importlib.import_module("tiktoken").get_encoding(name)
            except (Exception, SystemExit, _Timeout):  # noqa: BLE001 - one that needs what only its candidate set up, …
                pass


def probe(release: Path, files: list[str] | None = None) -> list[str]:
    import torch

    import minilm
    from minilm.course import checks, tasks

    torch.set_num_threads(1)  # the children are forked: no thread pool in this process, and little CPU
    if minilm.implementation() != "solutions" or not Path(minilm.__file__).resolve().is_relative_to(release.resolve()):
        return [f"leak probe: must run the release's minilm ({release}) with MINILM_IMPL=solutions, "
                f"got {minilm.__file__} with {minilm.implementation()}"]
    problems: list[str] = []
    found = candidates(provided_modules(release, files), problems)
    for task in tasks.TASKS:
        if task.id not in checks.registered():
            problems.append(f"Task {task.id} has no check to run provided code against")
            continue
        module = minilm.exercise_module(task.module)
        for name in task.names:
            is_class = inspect.isclass(module.__dict__.get(name))
            call = _first_call(task.id, module, name)
            mine = [(where, obj) for where, obj in found if inspect.isclass(obj) == is_class and _binds(obj, call)]
            if os.environ.get("MINILM_PROBE_VERBOSE"):
                print(f"probe: Task {task.id} {name}: {len(mine)} candidates", file=sys.stderr, flush=True)
            result = _run_children(task.id, name, mine)
            _load_in_parent(result["loaded"])
            if not result["controls"] or not all(result["controls"]):
                problems.append(f"Task {task.id}: its check cannot tell the reference's {name} from garbage here "
                                "(or a candidate changed what it sees), so provided code cannot be judged against it")
            for i, status in sorted(result["statuses"].items()):
                where = mine[i][0]
                if status == checks.PASS:
                    problems.append(f"{where} computes Task {task.id}'s result: its check passes with it in place "
                                    f"of {name} (provided code must not)")
                elif status == "timeout":  # not a pass: a check cell stuck this long fails the student too
                    print(f"probe: {where} did not finish Task {task.id}'s check within {CALL_SECONDS} s in place "
                          f"of {name} (the reference's takes well under 1 s): not a pass", file=sys.stderr)
            missing = len(mine) - len(result["statuses"])
            if missing > 0:
                problems.append(f"Task {task.id}: {missing} provided candidates for {name} were never judged")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")
    problems = probe(Path(argv[0]), argv[1:] or None)
    print(json.dumps(problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
