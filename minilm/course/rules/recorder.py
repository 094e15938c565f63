"""The from-scratch rule, judged by what runs (provided: not an exercise).

While a task's check or the grader's probe runs the student's code, two hooks see every call into the
libraries: `sys.setprofile` (each Python function that starts, each C function called from Python code,
with the caller's frame) and a torch function mode (each torch function, however it was reached: through
an alias, map() or an operator). A call is refused when it belongs to one of the task's families
(families.py), whoever made it: the student's function, a helper in another module, an object's method, or
library code the student's code entered (torch.optim's AdamW.step). A call that did not run costs nothing.

The student's code, or code made from a string, may also not call what would switch the recording off or
get around it (families.ESCAPE_MODULES); the lint (lint.py) keeps the ways to reach those out of the source.

    with watching("6.1", student_files) as record:
        minilm.softmax(x, -1)          # raises Refused if it ran torch.softmax
    record.refusal                     # the first Refusal, or None
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from collections import OrderedDict, deque
from dataclasses import dataclass
from types import ModuleType

import torch
from torch.overrides import TorchFunctionMode

from minilm.course import tasks
from minilm.course.rules.families import ESCAPE_EXCEPT, ESCAPE_FUNCTIONS, ESCAPE_MODULES, FAMILIES

# Captured before any student code is imported: code that replaces them later does not reach the recorder.
_setprofile, _getprofile, _getframe = sys.setprofile, sys.getprofile, sys._getframe
_stack_len, _stack_at = torch._C._len_torch_function_stack, torch._C._get_function_stack_at


CALLED_BACK = "code torch called back"
HANDED_OVER = "code handed to a torch function"


_SCALAR_TYPES = (bool, int, float, complex)  # dtype=bool: torch reads the type, it calls nothing
# What torch may be handed: data it reads, never code it could run. Torch runs a function it is given (or an
# object's method: an iterator's next, a number's __index__) with the torch function mode paused, and C code
# it calls from there makes no profile event either: map(torch.softmax, …) handed to Tensor.backward as its
# `inputs` ran torch.softmax unseen (red team 6). So a torch function's arguments are checked by exact type,
# which reads no attribute of the student's objects and runs none of their code.
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, type(Ellipsis), range,
                    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.qscheme, torch.Size,
                    torch.Generator, type(torch.Generator()), torch.Tensor, torch.nn.Parameter, torch.nn.Buffer,
                    torch._C.ScriptObject})  # torch's own profiler marks, around an optimizer's step


def _data_arguments(func, args, kwargs):
    """The arguments of a torch function that torch reads as data. Tensor.__deepcopy__ is handed
    copy.deepcopy's memo, which holds every object copied so far: torch stores into it and asks `id in memo`,
    which runs nothing of a dict's, but a subclass's __contains__ (red team 11). So the memo must be a dict,
    whatever it holds."""
    if func is _tensor_deepcopy:
        memo = args[1] if len(args) > 1 else (kwargs or {}).get("memo")
        return list(args[:1]) + ([] if type(memo) is dict else [memo])
    return [*args, *(kwargs or {}).values()]


_tensor_deepcopy = torch.Tensor.__deepcopy__
# sequences torch iterates in C, of their items only: torch's own named results (x.max(-1)) among them
_SEQUENCES = (list, tuple, deque, *(t for t in vars(torch.return_types).values()
                                    if isinstance(t, type) and issubclass(t, tuple)))
_PLAIN_IDS = frozenset(map(id, _PLAIN))  # the types live as long as the process: their ids stay theirs
# A tensor's own attributes (t.payload = …): Tensor.__deepcopy__ copies them and Tensor.__reversed__ calls
# self.flip, an instance's attribute first, while the mode is paused (red team 11). Read by torch's own
# descriptor, which a class of the student's cannot replace.
_tensor_dict = torch.Tensor.__dict__["__dict__"].__get__
_type_flags = type.__dict__["__flags__"].__get__
_HEAP_TYPE = 1 << 9  # a class made by a class statement or type(): numpy's own scalar types are C's, not heap types
_TENSOR_METAS = (type(torch.Tensor), type(torch.nn.Parameter), type(torch.nn.Buffer))  # torch's, not a student's


def _hands_over_code(func, args, kwargs) -> bool:
    """Whether a torch function's arguments hold anything but plain data (_PLAIN; Python's scalar types, as
    dtype=bool; numpy's numbers and arrays of numbers; slices, lists, tuples and dicts of those; tensors whose
    own attributes are those): a callable, a map or another iterator, an object of the student's own class, a
    subclass of list, or of Tensor with a method of C code."""
    todo, numpy, seen = _data_arguments(func, args, kwargs), sys.modules.get("numpy"), set()
    while todo:
        v = todo.pop()
        if id(v) in seen:  # a list or a tensor that holds itself
            continue
        seen.add(id(v))
        kind = type(v)
        if any(v is t for t in _SCALAR_TYPES):  # by identity: hashing a type could run its code
            continue
        if issubclass(kind, torch.Tensor):  # any tensor: its own attributes are read as data too
            if id(kind) not in _PLAIN_IDS and not _own_tensor_class_runs_no_c(kind):
                return True
            own = _tensor_dict(v)
            if type(own) is not dict:
                return True
            todo += [*own.keys(), *own.values()]
            continue
        if id(kind) in _PLAIN_IDS:
            continue
        if any(kind is t for t in _SEQUENCES):
            todo += v
        elif kind is dict or kind is OrderedDict:  # an OrderedDict: a tensor's hooks, set by torch
            todo += [*v.keys(), *v.values()]
        elif kind is slice:
            todo += (v.start, v.stop, v.step)
        elif not (numpy is not None and ((kind is numpy.ndarray or kind is numpy.memmap) and v.dtype.kind in "biufc" or
                                         issubclass(kind, numpy.generic) and not _type_flags(kind) & _HEAP_TYPE)):
            return True  # a class of the student's that says it is numpy's int64 is still a heap type
    return False


_FUNCTION = type(_data_arguments)
_type_dict = type.__dict__["__dict__"].__get__
_TENSOR_BASES = (object, torch.Tensor, torch._C.TensorBase, torch.nn.Parameter, torch.nn.Buffer)
# A class's __dict__ descriptor; not a __slots__ member, whose value lives outside the instance's __dict__, where
# the argument check does not read it: a slot named `reciprocal` holding functools.partial(torch.softmax, …) was
# what Tensor.__rdiv__ called with the mode paused (red team 12)
_SLOTS = (type(type.__dict__["__dict__"]),)


def _own_tensor_class_runs_no_c(kind: type) -> bool:
    """Whether a subclass of Tensor (the student's `class Scores(Tensor)`) can run only Python code of its own,
    which the profile hook sees: torch's own metaclass, and in each class of its own nothing callable but
    Python functions (plain, or as a classmethod, staticmethod or property of them). A C function as a method
    or a dunder (`__index__ = …`, a property of torch.softmax) would run from C, unseen."""
    if not any(type(kind) is m for m in _TENSOR_METAS):
        return False
    for k in _type_mro(kind):
        if any(k is t for t in _TENSOR_BASES):  # by identity: a class of the student's may say its __module__ is torch
            continue
        for value in _type_dict(k).values():
            kind_of = type(value)
            if kind_of is classmethod or kind_of is staticmethod:
                value, kind_of = value.__func__, type(value.__func__)
            if kind_of is property:
                if any(type(f) not in (_FUNCTION, type(None)) for f in (value.fget, value.fset, value.fdel)):
                    return False
            elif kind_of is not _FUNCTION and not (kind_of is tuple and all(type(x) is str for x in value) or any(
                    kind_of is t for t in (*_PLAIN, *_SLOTS))):
                return False
    return True


_SETTER, _GETSET = type(torch.Tensor.grad.__set__), type(torch.Tensor.grad)


def _sets_a_private_attribute(func) -> bool:
    """Whether a torch function is the setter of one of Tensor's private attributes (its hook tables)."""
    return type(func) is _SETTER and type(func.__self__) is _GETSET and func.__self__.__name__.startswith("_")


# Setting or clearing a profile or trace function; and making a code object or a function at run time, which
# re-homed torch's own optimizer code under a file name of the student's choosing, or ran it with globals whose
# __name__ is not torch's (red team 11). No task's reference makes either while a check runs.
_HOOK_EVENTS = ("sys.setprofile", "sys.settrace", "code.__new__", "function.__new__")


def _audited() -> dict:
    """An audit hook, for the life of the process (Python offers no way to remove one): while a recorder
    watches, a call that sets or clears a profile or trace function is refused before it runs, however it
    was made (map(sys.setprofile, …) from C makes no profile event). Python clearing a hook that raised at
    the recursion limit is let through: that run ends in its RecursionError."""
    state = {"watch": None, "own": 0}

    def hook(event, args):
        watch = state["watch"]
        if watch is None or state["own"] or event not in _HOOK_EVENTS:
            return
        if sys.getrecursionlimit() - _depth() < 64:
            return
        watch(event, _getframe(1))

    sys.addaudithook(hook)
    _no_threads(state)
    return state


def _no_threads(state: dict) -> None:
    """While a recorder watches, starting a thread is refused: a new thread has neither the profile hook nor the
    torch function mode, both per thread, and Python 3.11 audits no thread start (red team 11 started one from
    C, inside copy.copy). _thread's functions, and threading's copy, are replaced by ones that ask first; the
    grader's worker also forbids the system call to each task's process (sandboxed/worker.py)."""
    import _thread
    import threading

    def asking(start):
        def start_new_thread(function, args, kwargs=None):
            watch = state["watch"]
            if watch is not None and not state["own"]:
                watch("_thread.start_new_thread", _getframe(1))
            return start(function, args, *([] if kwargs is None else [kwargs]))
        return start_new_thread

    _thread.start_new_thread = threading._start_new_thread = asking(_thread.start_new_thread)
    _thread.start_new = asking(_thread.start_new)


def _depth() -> int:
    frame, n = _getframe(1), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


_AUDIT: dict | None = None


class Refused(BaseException):
    """Stops a task's run at its first refused call (a BaseException: the student's `except Exception`
    does not swallow it; whatever swallows it, the recorder keeps the refusal)."""

    def __init__(self, refusal: Refusal):
        super().__init__(str(refusal))
        self.refusal = refusal


@dataclass(frozen=True)
class Refusal:
    task: str
    what: str  # the library function, as students know it: "torch.softmax", "torch.optim.adamw.AdamW.step"
    where: str  # the student's innermost line that led there, "minilm/attention.py:42", or ""
    function: str  # the student's function on that line, "softmax", or ""
    advice: str  # the task's: "build it from exp and sum"
    escape: bool = False  # a way out of the recording, refused in every task

    def __str__(self) -> str:
        who = f"your {self.function}" if self.function else "your code"
        at = f" ({self.where})" if self.where else ""
        if self.what == HANDED_OVER:
            return (f"Task {self.task}: {who} handed a torch function{at} something that can run code (a function, "
                    "a map or other iterator, an object with methods of C code): torch runs it where the "
                    "from-scratch check is paused; hand torch tensors, numbers and lists of them, and call "
                    "functions from your own code")
        if self.what == CALLED_BACK:
            return (f"Task {self.task}: {who} ran{at} inside a torch function that called it back, where torch "
                    "pauses the from-scratch check; call torch's functions from your own code instead")
        if self.escape:
            return (f"Task {self.task}: {who} called {self.what}{at}, which no task may call: it can switch off or "
                    "get around the from-scratch check; write the code itself")
        return f"Task {self.task}: {who} ran {self.what}{at}" + (f"; {self.advice}" if self.advice else "")


def _escape(module: str, qualname: str, allowed: tuple[str, ...], escapes: tuple[str, ...] = ESCAPE_MODULES,
            names: frozenset = ESCAPE_FUNCTIONS, exceptions: tuple[str, ...] = ESCAPE_EXCEPT) -> bool:
    """Whether a library function is a way out of the recording. The lists are bound when this module is imported:
    code that rebinds a module global afterwards changes nothing (red team 12 emptied families' list so)."""
    full = f"{module}.{qualname}"
    hit = any(full == e or full.startswith(e + ".") or module == e or module.startswith(e + ".")
              for e in escapes) or qualname.rsplit(".", 1)[-1] in names
    return hit and not any(full == a or full.startswith(a + ".") or module == a for a in (*allowed, *exceptions))


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    dirs |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    dirs |= {os.path.dirname(os.path.dirname(m.__file__)) for m in (torch, os) if getattr(m, "__file__", None)}
    return tuple(sorted(os.path.join(os.path.abspath(d), "") for d in dirs))


_LIBRARY_DIRS = _library_dirs()


def _module_of(file: str) -> str:
    """The module a library file is, from its path under the library folders: ".../torch/optim/adamw.py" is
    torch.optim.adamw, "<frozen importlib._bootstrap>" importlib._bootstrap."""
    if file.startswith("<frozen "):
        return file[len("<frozen "):].rstrip(">")
    path = os.path.abspath(file)
    under = max((d for d in _LIBRARY_DIRS if path.startswith(d)), key=len, default=None)
    if under is None:
        return ""
    parts = path[len(under):].removesuffix(".py").split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


STUDENT, COURSE, LIBRARY, UNKNOWN = "student", "course", "library", "unknown"


def exercise_files(folder: os.PathLike | str) -> dict[str, str]:
    """The exercise modules' files in a package folder (the student's minilm/, or solutions/), each with the
    path a message shows: "minilm/attention.py"."""
    folder = os.path.abspath(folder)
    shown = os.path.basename(folder)
    return {os.path.join(folder, f"{m}.py"): f"{shown}/{m}.py" for m in tasks.EXERCISE_MODULES}


_SPELLED = {"posix": "os", "nt": "os", "_io": "io", "_thread": "threading", "_signal": "signal", "_socket": "socket"}


def _display(module: str, qualname: str) -> str:
    """A library function's name as students write it."""
    module = _SPELLED.get(module, module)
    if module in ("torch._C._nn", "torch._C._VariableFunctions") or qualname.startswith("_VariableFunctionsClass."):
        name = qualname.rsplit(".", 1)[-1]
        return f"torch.nn.functional.{name}" if module == "torch._C._nn" else f"torch.{name}"
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + qualname.split(".", 1)[1]
    if module.startswith("torch._ops"):
        return f"torch.ops.aten.{qualname.rsplit('.', 1)[-1]}"
    return f"{module}.{qualname}" if module else qualname


# A class's own name, module and MRO, read by type's own descriptors: a student's metaclass could make
# `cls.__module__` a property, which would run their code inside the hook, where nothing is watched.
_type_module = type.__dict__["__module__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_type_mro = type.__dict__["__mro__"].__get__


def _c_name(fn) -> tuple[str, str]:
    """(module, qualname) of a C function or method as a c_call event or the torch function mode hands it over.
    A method is named by the library class that defines it, not by the subclass it was called on: a student's
    `class Scores(Tensor)` does not make Tensor.softmax theirs, and a method of a class defined inside their
    `softmax` is not torch's softmax. Nothing here runs code of the student's."""
    owner = getattr(fn, "__self__", None)
    name = str(getattr(fn, "__name__", None) or type(fn).__name__)
    if type(owner) is ModuleType:
        return owner.__name__, str(getattr(fn, "__qualname__", None) or name)
    cls = getattr(fn, "__objclass__", None) or (type(owner) if owner is not None else None)
    if isinstance(cls, type):
        cls = next((k for k in _type_mro(cls) if str(_type_module(k)).split(".")[0] in _LIBRARIES), cls)
        return str(_type_module(cls) or ""), f"{_type_qualname(cls)}.{name}"
    return str(getattr(fn, "__module__", None) or ""), str(getattr(fn, "__qualname__", None) or name)


_LIBRARIES = ("torch", "einops", "numpy", "builtins")


class Recorder:
    """One task's watch. `on_refusal(refusal)` is called at the first refused call, before it runs; by default it
    raises Refused. The worker's aborts the process instead, so nothing the student's code does after can hide it.
    The hooks are closures over what they judge by: the student's code can reach no attribute that holds the
    task's families or the verdicts."""

    def __init__(self, task_id: str, student_files: dict[str, str], on_refusal=None):
        task = tasks.get(task_id)
        if task.module in ("training", "modern"):
            import torch._dynamo  # noqa: F401 - torch.optim.Optimizer imports it on first use: a second, not ten, outside
        self.task_id, self.on_refusal = task.id, on_refusal
        self.refusal: Refusal | None = None
        self._profile, self._mode, self._refuse_at = _hooks(self, task, student_files)
        self._saved = None

    def __enter__(self) -> Recorder:
        global _AUDIT
        if _AUDIT is None:
            _AUDIT = _audited()
        self._saved = _getprofile()
        self._mode.__enter__()
        _AUDIT["own"] += 1
        try:
            _setprofile(self._profile)
        finally:
            _AUDIT["own"] -= 1
        _AUDIT["watch"] = lambda event, frame: self._refuse_at(event, None, frame, True)
        return self

    def intact(self) -> bool:
        """Whether both hooks are still the ones this recorder set."""
        n = _stack_len()
        return _getprofile() is self._profile and n > 0 and _stack_at(n - 1) is self._mode

    def __exit__(self, kind, value, tb) -> bool:
        intact = self.intact()
        _AUDIT["watch"] = None
        _setprofile(self._saved)
        try:
            self._mode.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - the student's code popped it already: not intact
            intact = False
        # Python turns a profile hook off when it raises, as it does once code recurses past the limit: that
        # run ends in the RecursionError, a bug the student is shown, not a way around the rule.
        recursed = kind is not None and issubclass(kind, RecursionError)
        if self.refusal is None and not intact and not recursed:
            self.refuse(Refusal(self.task_id, "something that switched the recording off", "", "", "", True))
        return kind is Refused  # a refusal ends the run; the recorder keeps it

    def refuse(self, refusal: Refusal) -> None:
        if self.refusal is None:
            self.refusal = refusal
        if self.on_refusal is not None:
            self.on_refusal(self.refusal)


def _classifier(student: dict[str, str]):
    """kind_of(code) → STUDENT, COURSE, LIBRARY or UNKNOWN (code made from a string, a notebook cell, a test), and
    studentish(frame)."""
    course = tuple(str(p) for p in (tasks.COURSE_DIR, tasks.PACKAGE_DIR / "__init__.py",
                                    tasks.ROOT / "solutions" / "__init__.py")) + tuple(
        os.path.join(os.path.dirname(p), "course", "") for p in student)
    kinds: dict[object, str] = {}

    def kind_of(code) -> str:
        kind = kinds.get(code)
        if kind is None:
            file = code.co_filename
            path = os.path.abspath(file) if not file.startswith("<") else file
            kind = kinds[code] = (STUDENT if path in student else COURSE if path.startswith(course) else
                                  LIBRARY if path.startswith(("<frozen ", *_LIBRARY_DIRS)) else UNKNOWN)
        return kind

    def studentish(frame) -> bool:
        """Whether the student's code made this call: its own frame, or code made from a string (a dataclass's
        __init__, exec's) that the student's code called, not the library's."""
        while frame is not None:
            kind = kind_of(frame.f_code)
            if kind != UNKNOWN:
                return kind == STUDENT
            frame = frame.f_back
        return True

    return kind_of, studentish


def _judge(task):
    """judge(module, qualname) → (advice or None, escape?, display) for a library function, or None when the task
    may run it."""
    families = tuple((FAMILIES[f], advice) for f, advice in task.forbidden)
    allowed = tuple(task.allowed)

    def judge(module: str, qualname: str) -> tuple | None:
        for family, advice in families:
            if family.holds(module, qualname):
                return advice, False, _display(module, qualname)
        if _escape(module, qualname, allowed):
            return None, True, _display(module, qualname)
        return None

    return judge


_UPDATE_WRAPPER = functools.update_wrapper.__code__
_DEFAULT_NAMES = (functools.WRAPPER_ASSIGNMENTS, functools.WRAPPER_UPDATES)


def _wraps_a_function(frame) -> bool:
    """Whether this is functools.update_wrapper as `@functools.wraps(fn)` calls it in an honest decorator: a function
    wrapping a function, with the default attribute names. Named otherwise, or handed a module, it is a getattr by
    any name (red team 11 reached the recorder's closures so); only identities are compared, nothing of theirs runs."""
    if frame.f_code is not _UPDATE_WRAPPER:
        return False
    seen = frame.f_locals
    return (type(seen.get("wrapper")) is _FUNCTION and type(seen.get("wrapped")) is _FUNCTION
            and seen.get("assigned") is _DEFAULT_NAMES[0] and seen.get("updated") is _DEFAULT_NAMES[1])


def _hooks(record: Recorder, task, student_files: dict[str, str]):
    """The profile function and the torch function mode of one watch, closed over what they judge by. Neither
    hashes, compares or reads an attribute of the student's objects: that would run their code while the hook
    runs, which nothing watches."""
    student = {os.path.abspath(p): shown for p, shown in student_files.items()}
    (kind_of, studentish), judge = _classifier(student), _judge(task)
    codes: dict[object, tuple | None] = {}  # a Python function's code → its verdict, None when free to run
    functions: dict[tuple, tuple] = {}  # (id of a C function, or of a method's class, and its name) → (it, verdict)

    def refuse(what: str, advice: str | None, frame, escape: bool) -> None:
        where, function = "", ""
        while frame is not None:
            shown = student.get(os.path.abspath(frame.f_code.co_filename))
            if shown is not None:
                where, function = f"{shown}:{frame.f_lineno}", frame.f_code.co_name
                break
            frame = frame.f_back
        record.refuse(Refusal(task.id, what, where, function, advice or "", escape))
        raise Refused(record.refusal)

    def function_verdict(fn) -> tuple | None:
        # Known by identity, never by hash: a bound method (new at each call) by its class and name.
        owner = getattr(fn, "__self__", None)
        held = fn if owner is None or type(owner) is ModuleType else type(owner)
        key = (id(held), getattr(fn, "__name__", None))
        found = functions.get(key)
        if found is None or found[0] is not held:
            found = functions[key] = (held, judge(*_c_name(fn)))
        return found[1]

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in codes:
                # by where the code lives, not the frame's globals: torch's code run with globals whose __name__
                # was the student's once had its verdict cached as free (red team 11)
                name = getattr(code, "co_qualname", code.co_name)
                codes[code] = judge(_module_of(code.co_filename), name) if kind_of(code) == LIBRARY else None
            verdict, caller = codes[code], frame.f_back
            if kind_of(code) != LIBRARY and kind_of(code) != COURSE and not mode_on() and studentish(frame):
                # torch pauses the mode while it runs a function: code of the student's it calls back (an index
                # object's __getitem__, a hook) would run unwatched by it
                refuse(CALLED_BACK, None, frame, True)
        elif event == "c_call":
            verdict, caller = function_verdict(arg), frame
        else:
            return
        if verdict is not None:
            advice, escape, what = verdict
            if not escape:
                refuse(what, advice, frame, False)
            elif studentish(caller) and not (event == "call" and _wraps_a_function(frame)):
                refuse(what, advice, caller, True)

    class Mode(TorchFunctionMode):
        """Sees every torch function, however the student's code reached it (map(F.linear, …) makes no c_call)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            verdict = function_verdict(func)
            if verdict is not None and not verdict[1]:
                refuse(verdict[2], verdict[0], _getframe(1), False)
            if _sets_a_private_attribute(func) and studentish(_getframe(1)):
                # leaf._backward_hooks = {…}: a hook table the engine calls from C inside a backward pass
                refuse(f"Tensor.{func.__self__.__name__}.__set__", None, _getframe(1), True)
            if _hands_over_code(func, args, kwargs):
                # torch runs what it is handed with this mode paused: map(torch.softmax, …) as Tensor.backward's
                # inputs, or a functools.partial of a built-in, makes no event at all
                refuse(HANDED_OVER, None, _getframe(1), True)
            return func(*args, **(kwargs or {}))

    mode = Mode()

    def mode_on() -> bool:
        n = _stack_len()
        return n > 0 and _stack_at(n - 1) is mode

    return profile, mode, refuse


def watching(task_id: str, student_files: dict[str, str], on_refusal=None) -> Recorder:
    return Recorder(task_id, student_files, on_refusal)
