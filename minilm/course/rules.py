"""The "from scratch" rule, checked statically (provided: not an exercise).

Each task builds one piece itself, so it may not call the PyTorch built-in that does the job
(Task 6.1 may not call torch.softmax), nor, in later tasks, the built-ins of pieces the
student has already built (Task 6.3 uses the student's Linear, not nn.Linear). The rules
live in the task registry, minilm/course/tasks.py: `Task.forbidden` per task, and WAYS_AROUND,
IMPORTABLE and `Task.allowed` for the tricks that would get around any such list (exec,
importlib, computed getattr, os/sys, files, torch.ops and torch._C, patching torch, …).

This module reads an exercise module's source and never imports or runs it, so a grader can
call it from a trusted process:

    scan(source, "minilm/attention.py")   # {"6.1": [Violation, …], "6.2": [], "6.3": []}
    violations_for("6.1")                  # the current implementation's file, for one task
    violations_for("6.1")[0].message       # 'Task 6.1: your softmax calls torch.softmax
                                           #  (minilm/attention.py:31); build it from exp and sum'

What it sees through: import aliases (import torch.nn.functional as G; from torch import
softmax as s; from torch.nn import functional), aliases by assignment (s = torch.softmax),
modules re-exported by libraries (torch.sys is sys, minilm.course.validate.torch is torch: a
library's names are followed to the objects they denote, in this trusted process), torch's
variants of a built-in by its words (native_layer_norm, InstanceNorm1d, linear_cross_entropy),
getattr with a constant name (getattr(torch, "softmax") is torch.softmax; with a computed
name it is refused), tensor methods (x.softmax(-1), on any object but self), and every path
to a built-in (a family matches any name under torch with one of its names as a component:
torch.special.softmax, nn.modules.activation.Softmax, …).

Which task a finding costs:
- code inside the function or class of a task (the registry's `function`, plus `also`, the
  whole class body for classes, and any top-level statement that binds one of those names,
  such as `softmax = torch.softmax`) costs that task;
- a top-level helper function or class costs every task whose code uses it (directly or
  through other helpers): helpers are judged by the rules of the tasks that call them. A
  helper that no task's code uses costs every task of the module, as module-level code does;
- other module-level code costs every task of the module. Imports and simple aliases at
  module level (`import torch.nn.functional as F`, `s = torch.softmax`) cost nothing by
  themselves: only their uses count, where they occur. An import of something refused
  (importlib, os.environ, torch._C, …) is refused at the import and costs the whole module;
- a module that does not parse gives every task of the module one violation at the error's
  line.
Tasks are judged separately: Task 6.2 calling the student's softmax is judged by 6.2's rules,
and softmax's own code by 6.1's.

A static check cannot see everything a determined student could do at run time; it closes
the direct routes and the usual tricks, and the checks and hidden tests do the rest.
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import importlib
import re
import types
from dataclasses import dataclass
from pathlib import Path

from minilm.course import tasks

_BUILTIN_NAMES = frozenset(dir(builtins))
_DYNAMIC = ("getattr", "setattr", "delattr", "hasattr")
_MODULE = "module"  # the scope of module-level code: every task of the module
# A jaxtyping shape that jaxtyping does not evaluate: names (*batch, #n, _), numbers and ..., by spaces.
_SHAPE_NAME = r"(?:\.\.\.|[*#?]{0,2}\w+)"
_SHAPE = re.compile(rf"\s*(?:{_SHAPE_NAME}(?:\s+{_SHAPE_NAME})*)?\s*")  # one way to match: no backtracking blow-up
# The libraries exercise modules may import, whose names the scan follows to the objects they denote.
_LIBRARIES = frozenset(m.split(".")[0] for m in tasks.IMPORTABLE) - {"minilm", "__future__"}


@dataclass(frozen=True)
class Violation:
    """One use of something a task may not use."""

    task: str
    file: str  # as given to scan, e.g. "minilm/attention.py"
    line: int
    what: str  # e.g. "torch.softmax", "Tensor.softmax", "importlib"
    advice: str  # e.g. "build it from exp and sum"
    verb: str = "calls"  # calls | uses | imports | assigns to | has
    where: str = ""  # "your softmax", "your helper _f", "your module"

    @property
    def message(self) -> str:
        return f"Task {self.task}: {self.where} {self.verb} {self.what} ({self.file}:{self.line}); {self.advice}"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class _Finding:
    line: int
    verb: str
    what: str
    kind: str  # "way" (refused everywhere), "family" (a built-in, judged per task), "method"
    name: str  # the qualified name (way, family) or the attribute (method)
    advice: str = ""


def _under(name: str, pattern: str) -> bool:
    """`name` is `pattern` or lies under it (fnmatch patterns allowed)."""
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")


def _refused(name: str) -> str | None:
    """The advice of the WAYS_AROUND entry that refuses the qualified `name`, if any."""
    found = _refusal(name)
    return found[1] if found else None


@functools.lru_cache(maxsize=None)  # pure in the name; a scan asks again and again
def _refusal(name: str) -> tuple[str, str] | None:
    """(entry, advice) of the WAYS_AROUND entry that refuses the qualified `name`, if any: by its
    spelling, or (for a name under a library) by the object it denotes. Libraries re-export
    modules and functions under other names (torch.sys is sys, dataclasses.builtins is builtins,
    collections._sys is sys, torch.serialization.load is torch.load): any path that passes
    through a refused module, or ends at a refused function, is refused like that module or
    function. `?.attr` (an attribute of an object the scan cannot follow) is judged by its name."""
    if any(_under(name, a) for a in tasks.ALWAYS_ALLOWED):
        return None
    parts = name.split(".")
    for names, advice in tasks.WAYS_AROUND:
        for entry in names:
            if entry.startswith("."):
                if parts[-1] == entry[1:] and len(parts) > 1:
                    return entry, advice
            elif entry.startswith("__") and entry.endswith("__"):
                if entry in parts:
                    return entry, advice
            elif _under(name, entry):
                return entry, advice
    # A refused module's name as an attribute of anything (torch.sys, typing.io, x._os): a module
    # reached through another module is the same module.
    for part in parts[1:]:
        module = _REFUSED_MODULES.get(part.lstrip("_"))
        if module:
            return module
    return _refused_object(name)


def _refused_modules() -> dict[str, tuple[str, str]]:
    """Module names WAYS_AROUND refuses (sys, os, builtins, importlib, …) → (entry, advice): its
    bare names that are not Python's built-in functions (exec, open, getattr, …)."""
    out: dict[str, tuple[str, str]] = {}
    for names, advice in tasks.WAYS_AROUND:
        for entry in names:
            if entry.isidentifier() and not entry.startswith("__") and entry not in _BUILTIN_NAMES:
                out.setdefault(entry, (entry, advice))
    return out


_REFUSED_MODULES = _refused_modules()


def _library_object(name: str):
    """The object a dotted name under an importable library denotes (modules and classes are
    followed; anything else ends the walk), with every object on the way; () if unknown. Only
    the libraries of tasks.IMPORTABLE are imported, in the grader's own process: never the
    submission."""
    parts = name.split(".")
    start = 1
    if parts[:3] == ["minilm", "course", "validate"]:  # provided, importable: the grader's own copy
        start = 3
    elif parts[0] not in _LIBRARIES:
        return ()
    try:
        obj = importlib.import_module(".".join(parts[:start]))
    except Exception:  # noqa: BLE001 - a library that is not installed denotes nothing known
        return ()
    chain = [obj] * start
    for part in parts[start:]:
        if not (isinstance(obj, types.ModuleType) or isinstance(obj, type)):
            break
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - an unknown attribute: judged by its spelling alone
            break
        chain.append(obj)
    return tuple(chain)


@functools.lru_cache(maxsize=4096)
def _canonical(name: str) -> str:
    """`name` from the last module it passes through, by that module's own name:
    minilm.course.validate.torch.nn.functional.gelu → torch.nn.functional.gelu, torch.sys.modules →
    sys.modules. Unchanged when nothing in it is known."""
    parts = name.split(".")
    chain = _library_object(name)
    for i in range(len(chain) - 1, -1, -1):
        if isinstance(chain[i], types.ModuleType):
            own = getattr(chain[i], "__name__", None)
            if isinstance(own, str) and own:
                return ".".join([own, *parts[i + 1:]])
            break
    return name


@functools.lru_cache(maxsize=4096)
def _denotes_module(name: str) -> bool:
    """`name` is a module: an exercise module (minilm.linear), or one of a library (torch.nn)."""
    parts = name.split(".")
    if parts[0] == "minilm":
        return len(parts) <= 2
    chain = _library_object(name)
    return len(chain) == len(parts) and isinstance(chain[-1], types.ModuleType)


@functools.lru_cache(maxsize=4096)
def _is_torch_load(name: str | None) -> bool:
    """`name` denotes torch.load (torch.load, or an alias of it)."""
    if name is None or name.split(".")[0] != "torch":
        return False
    chain = _library_object(name)
    import torch

    return len(chain) == len(name.split(".")) and chain[-1] is torch.load


def _safe_load(call: ast.Call) -> bool:
    """torch.load(f[, map_location][, weights_only=True][, map_location=…, mmap=…]): the restricted
    unpickler, which only rebuilds tensors and plain containers."""
    if len(call.args) > 2 or any(isinstance(a, ast.Starred) for a in call.args):
        return False  # the third positional argument is pickle_module
    for kw in call.keywords:
        if kw.arg is None or kw.arg == "pickle_module" or kw.arg.startswith("pickle_"):
            return False  # **kwargs, or the pickle module itself or its arguments
        if kw.arg == "weights_only" and not (isinstance(kw.value, ast.Constant) and kw.value.value is True):
            return False
    return True


@functools.lru_cache(maxsize=1)
def _refused_objects() -> dict[int, tuple[str, str, object]]:
    """id(object) → (entry, advice, object) for every WAYS_AROUND entry that names one object:
    builtins.exec, the sys module, torch.load, …"""
    out: dict[int, tuple[str, str, object]] = {}
    for names, advice in tasks.WAYS_AROUND:
        for entry in names:
            if entry.startswith((".", "__")) or any(c in entry for c in "*?["):
                continue
            objs: list[object] = []
            if "." not in entry and entry in _BUILTIN_NAMES:
                objs.append(getattr(builtins, entry))
            elif "." not in entry:
                try:
                    objs.append(importlib.import_module(entry))
                except Exception:  # noqa: BLE001 - not installed: nothing can reach it
                    pass
            else:
                root = entry.split(".")[0]
                if root in _LIBRARIES:
                    chain = _library_object(entry)
                    if len(chain) == len(entry.split(".")):
                        objs.append(chain[-1])
            for obj in objs:
                if not isinstance(obj, (int, float, str, bool, type(None))):
                    out.setdefault(id(obj), (entry, advice, obj))
    return out


@functools.lru_cache(maxsize=4096)
def _refused_object(name: str) -> tuple[str, str] | None:
    refused = _refused_objects()
    for obj in _library_object(name)[1:]:
        hit = refused.get(id(obj))
        if hit is not None and hit[2] is obj:
            return hit[0], hit[1]
    return None


@functools.lru_cache(maxsize=None)  # pure in the name; a scan asks again and again
def _tokens(name: str) -> tuple[str, ...]:
    """The words of a name, lower-cased, whatever its style: native_layer_norm → (native, layer,
    norm), LayerNorm → (layer, norm), BatchNorm1d → (batch, norm, 1, d), NLLLoss2d → (nll, loss,
    2, d)."""
    return tuple(w.lower() for piece in name.split("_")
                 for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", piece))


@functools.lru_cache(maxsize=None)  # pure in the name; a scan asks again and again
def _contains_name(name: str, builtin: str) -> bool:
    """`name` is the built-in `builtin`, or holds its words in a row: torch's variants of a
    built-in carry its name (native_layer_norm, BatchNorm1d, linear_cross_entropy, NLLLoss2d)."""
    if name == builtin:
        return True
    have, want = _tokens(name), _tokens(builtin)
    return bool(want) and any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1))


def _family_matches(family: tasks.Builtins, name: str) -> bool:
    parts = name.split(".")
    if parts[0] not in ("torch", "einops") or any(_under(name, e) for e in family.except_):  # einops: EinMix
        return False
    return (any(_under(name, p) for p in family.prefixes)
            or any(_contains_name(p, n) for p in parts[1:] for n in family.names))


def _attr_matches(family: tasks.Builtins, attr: str) -> bool:
    """An attribute of an object the scan cannot follow: a method form, a built-in's own name,
    or a name holding a built-in's words when that name has more than one (.native_layer_norm,
    .linear_cross_entropy; not .linear_q, which may be the student's own attribute)."""
    return (attr in family.methods or attr in family.names
            or any(len(_tokens(n)) > 1 and _contains_name(attr, n) for n in family.names))


def _module_names(module: str) -> set[str]:
    """The names other exercise modules may import from exercise module `module`."""
    return {n for t in tasks.TASKS if t.module == module for n in t.names} | {
        name for name, mod in tasks.EXPORTS.items() if mod == module}


def _bound_names(stmt: ast.stmt) -> list[str]:
    """The names a top-level statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    out: list[str] = []
    while targets:
        t = targets.pop()
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            targets.extend(t.elts)
        elif isinstance(t, ast.Starred):
            targets.append(t.value)
    return out


class _Module:
    """One parsed exercise module: its aliases, and what each part of it uses."""

    def __init__(self, tree: ast.Module, task_names: set[str]):
        # Task names are never aliases: `softmax = torch.softmax` costs Task 6.1 where it is
        # written, and Task 6.2 calling that softmax is calling the student's softmax.
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.top_defs: set[str] = {n for s in tree.body for n in _bound_names(s)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom):
                base = self._from_module(node)
                for a in node.names:
                    if a.name != "*" and base is not None:
                        self.aliases[a.asname or a.name] = f"{base}.{a.name}"
        # `name = <a resolved name>` anywhere (module level or inside a function: one namespace,
        # so F = torch.nn.functional; F.linear(…) is seen wherever it is written).
        assignments = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))]
        for _ in range(2):  # twice: an alias of an alias defined later
            for stmt in assignments:
                for target, value in self._alias_pairs(stmt):
                    q = self.resolve(value)
                    if q is not None:
                        self.aliases[target] = q
        self.imported = dict(self.aliases)  # before dropping task names: what an import binds them to
        for name in task_names:
            self.aliases.pop(name, None)

    @staticmethod
    def _from_module(node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        if node.level == 1:  # from .linear import Linear: a sibling exercise module
            return "minilm" + (f".{node.module}" if node.module else "")
        return None  # beyond the package

    @staticmethod
    def _alias_pairs(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
        """(name, value) for a top-level `name = value` (or a, b = x, y)."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:  # F = G = torch.nn.functional
            if all(isinstance(t, ast.Name) for t in stmt.targets):
                return [(t.id, stmt.value) for t in stmt.targets]
            return []
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            return []
        if isinstance(target, ast.Name):
            return [(target.id, value)]
        if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                and len(target.elts) == len(value.elts) and all(isinstance(t, ast.Name) for t in target.elts)):
            return [(t.id, v) for t, v in zip(target.elts, value.elts)]
        return []

    def is_alias_binding(self, stmt: ast.stmt) -> bool:
        """An import, or `name = <a resolved name>`: costs nothing by itself."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return True
        pairs = self._alias_pairs(stmt)
        return bool(pairs) and all(self.resolve(v) is not None for _, v in pairs)

    def _dynamic(self, node: ast.AST) -> str | None:
        """getattr/setattr/delattr/hasattr when it is Python's own (not shadowed)."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC
                and node.func.id not in self.aliases and node.func.id not in self.top_defs):
            return node.func.id
        return None

    def resolve(self, node: ast.AST) -> str | None:
        """The qualified name an expression denotes (torch.nn.functional.softmax), if known."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if self._dynamic(node) == "getattr" and len(node.args) >= 2 and _const_name(node.args[1]):
            base = self.resolve(node.args[0])
            return f"{base}.{node.args[1].value}" if base else None
        return None

    # ------------------------------------------------------------------ findings

    def findings(self, node: ast.AST, ways_only: bool = False) -> list[_Finding]:
        out: list[_Finding] = []
        self._walk(node, out, call=False)
        return [f for f in out if f.kind == "way"] if ways_only else out

    def _way(self, out, node, verb, what, name, advice):
        out.append(_Finding(getattr(node, "lineno", 1), verb, what, "way", name, advice))

    def _name(self, out, node, q: str, call: bool, store: bool = False, alias: bool = False) -> None:
        """Judge a use of the resolved name q (`alias`: as the value of an alias binding)."""
        verb = "calls" if call else "uses"
        if store:
            self._way(out, node, "assigns to", q, q, tasks.PATCHING_ADVICE)
            return
        # The task's own advice first: it wins when a name is both (torch.ops.aten.softmax in 6.1).
        # Judged as written and as the module it passes through is named (validate.torch.nn.functional.gelu
        # is torch.nn.functional.gelu; os.path.join stays refused as os.path though it is posixpath.join).
        real = _canonical(q)
        for name in dict.fromkeys((q, real)):
            out.append(_Finding(getattr(node, "lineno", 1), verb, q, "family", name))
        refusal = _refusal(q) or _refusal(real)
        if refusal:
            self._way(out, node, verb, q, refusal[0], refusal[1])
        parts = q.split(".")
        if parts[0] == "minilm" and len(parts) > 3 and parts[:3] != ["minilm", "course", "validate"]:
            # An attribute of another exercise module's task (Linear.F.gelu): that module's code is
            # the student's, never imported here, so each attribute is judged by its name alone.
            for attr in parts[3:]:
                self._attr(out, node, attr, call and attr == parts[-1], None)
        if parts[0] == "minilm" and not self._importable_minilm(parts):
            self._way(out, node, verb, q, q, tasks.IMPORT_ADVICE)
        elif not (call or alias) and _is_torch_load(q):
            self._way(out, node, verb, f"{q} as a value", "unsafe torch.load", tasks.LOAD_ADVICE)
        elif not (call or alias) and parts[0] == "jaxtyping":
            # a jaxtyping type held as a value can be given any shape later, out of the scan's sight
            self._way(out, node, "uses", f"{q} as a value", q, tasks.SHAPE_ADVICE)
        elif not (call or alias) and _denotes_module(q):
            # A module held in a tuple, a dict, a default argument, a walrus …: what is reached
            # through it (.fx.proxy.enum.bltns.exec) is out of the scan's sight.
            self._way(out, node, "uses", f"the module {q} as a value", q, tasks.MODULE_VALUE_ADVICE)

    @staticmethod
    def _importable_minilm(parts: list[str]) -> bool:
        if parts[:3] == ["minilm", "course", "validate"]:
            return True
        return (len(parts) >= 2 and parts[1] in tasks.EXERCISE_MODULES
                and (len(parts) == 2 or parts[2] in _module_names(parts[1])))

    def _attr(self, out, node: ast.AST, attr: str, call: bool, base: ast.AST | None) -> None:
        """Judge `<unknown object>.attr`."""
        text = _short(node)
        advice = _refused(f"?.{attr}")
        if advice:
            self._way(out, node, "calls" if call else "uses", text, attr, advice)
        if not (isinstance(base, ast.Name) and base.id in ("self", "cls")):
            # A built-in's own name on an object the scan cannot follow (a default argument, a
            # walrus, a loop variable, a dict entry holding torch.nn.functional …) counts as that
            # built-in: `.linear` or `.rms_norm` of anything is refused where the task builds it.
            named = (any(_attr_matches(fam, attr) for fam in tasks.BUILTINS.values())
                     and not any(attr in fam.methods for fam in tasks.BUILTINS.values()))
            out.append(_Finding(getattr(node, "lineno", 1), "calls" if call else "uses",
                                text if named else f"Tensor.{attr}", "method", attr))

    def _import(self, out, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = self._from_module(node)
            if base is None:
                self._way(out, node, "imports", "." * node.level + (node.module or ""), "..", tasks.IMPORT_ADVICE)
                return
            if any(a.name == "*" for a in node.names):
                self._way(out, node, "imports", f"* from {base}", base, "import the names you use one by one")
            names = [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        for q in names:
            parts = q.split(".")
            if parts[0] == "minilm":
                if not self._importable_minilm(parts):
                    self._way(out, node, "imports", q, q, tasks.IMPORT_ADVICE)
                continue
            if q in tasks.IMPORTABLE:
                continue
            refusal = _refusal(q)
            if refusal:
                self._way(out, node, "imports", q, refusal[0], refusal[1])
            elif not any(_under(q, m) for m in tasks.IMPORTABLE):
                self._way(out, node, "imports", q, q, tasks.IMPORT_ADVICE)

    def _walk(self, node: ast.AST, out: list[_Finding], call: bool, alias: bool = False) -> None:
        """Judge node; `alias`: node is the value of an alias binding (F = torch.nn.functional)."""
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(out, node)
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and self.is_alias_binding(node):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for child in targets:
                self._walk(child, out, False)
            if isinstance(node.value, (ast.Tuple, ast.List)) and not isinstance(node.value.ctx, ast.Store) and any(
                    isinstance(t, (ast.Tuple, ast.List)) for t in targets):
                for child in node.value.elts:
                    self._walk(child, out, False, alias=True)
            else:
                self._walk(node.value, out, False, alias=True)
            return
        dynamic = self._dynamic(node)
        if dynamic:
            args = node.args
            if len(args) >= 2 and _const_name(args[1]):
                attr = args[1].value
                q = self.resolve(args[0])
                if q is not None:
                    self._name(out, node, f"{q}.{attr}", call=call and dynamic == "getattr",
                               store=dynamic in ("setattr", "delattr"), alias=alias)
                else:
                    self._attr(out, node, attr, call, args[0])
                    self._walk(args[0], out, False)
                for child in [*args[2:], *node.keywords]:
                    self._walk(child, out, False)
                return
            if dynamic != "hasattr":
                self._way(out, node, "calls", f"{dynamic} with a computed name", dynamic, _refused(dynamic) or "")
                for child in [*args, *node.keywords]:
                    self._walk(child, out, False)
                return
        if isinstance(node, ast.Subscript):
            q = self.resolve(node.value)
            if q is not None and q.split(".")[0] == "jaxtyping":
                self._name(out, node.value, q, call=False, alias=True)  # Float[…]: the type, not a value
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                for part in parts:
                    if _const_str(part) and _SHAPE.fullmatch(part.value):
                        continue
                    if not _const_str(part) and self.resolve(part) is not None:
                        self._walk(part, out, False, alias=True)  # Tensor, torch.Tensor: a type
                        continue
                    self._way(out, part, "has", f"the jaxtyping shape {_short(part)}", "jaxtyping",
                              tasks.SHAPE_ADVICE)
                    self._walk(part, out, False)
                return
        if isinstance(node, ast.Call):
            if _is_torch_load(self.resolve(node.func)) and not _safe_load(node):
                self._way(out, node, "calls", "torch.load with a full unpickler", "unsafe torch.load", tasks.LOAD_ADVICE)
            self._walk(node.func, out, True)
            for child in [*node.args, *node.keywords]:
                self._walk(child, out, False)
            return
        if isinstance(node, ast.Attribute):
            q = self.resolve(node)
            if q is not None:
                self._name(out, node, q, call, store=isinstance(node.ctx, (ast.Store, ast.Del)), alias=alias)
                return
            self._attr(out, node, node.attr, call, node.value)
            self._walk(node.value, out, False)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                q = self.aliases.get(node.id)
                if q is not None:
                    self._name(out, node, q, call, alias=alias)
                elif node.id not in self.top_defs and (node.id in _BUILTIN_NAMES or node.id.startswith("__")):
                    advice = _refused(node.id)
                    if advice:
                        self._way(out, node, "calls" if call else "uses", node.id, node.id, advice)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            advice = _refused(f"?.{node.name}") if node.name.startswith("__") else None
            if advice:
                self._way(out, node, "defines", node.name, node.name, advice)
        for child in ast.iter_child_nodes(node):
            self._walk(child, out, False)


def _const_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _const_name(node: ast.AST) -> bool:
    """A constant attribute name: a string that is an identifier. Any other string (with
    spaces, newlines, Markdown …) is no name at all, and is refused like a computed one."""
    return _const_str(node) and node.value.isidentifier()


def _short(node: ast.AST, limit: int = 40) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for the message
        return "…"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _referenced(nodes: list[ast.AST]) -> set[str]:
    return {n.id for root in nodes for n in ast.walk(root) if isinstance(n, ast.Name)}


def _judge(task: tasks.Task, f: _Finding) -> tuple[str, str] | None:
    """(what, advice) when finding f breaks task's rules, else None."""
    if f.kind == "way":
        if any(_under(f.name, a) for a in task.allowed):
            return None
        return f.what, f.advice
    for family, advice in task.forbidden:
        fam = tasks.BUILTINS[family]
        if f.kind == "family" and _family_matches(fam, f.name):
            return f.what, advice
        if f.kind == "method" and _attr_matches(fam, f.name):
            return f.what, advice
    return None


def scan(source: str | bytes, filename: str) -> dict[str, list[Violation]]:
    """Every task of the exercise module `filename` (its stem names the module, e.g.
    "minilm/attention.py") → the violations of its rules in `source`, in line order.
    Never raises for the source's content: a syntax error is reported as a violation.
    One module alone: scan_package also judges what a task reaches through other tasks' code."""
    return _scan_module(source, filename)[0]


_TASK_OF = {(t.module, n): t.id for t in tasks.TASKS for n in t.names}
# Provided names other modules may import (ClassicConfig): the student's file holds their code too,
# so a task that uses one is judged by that code as well, under a pseudo id "module:name".
_TASK_OF |= {(module, name): f"{module}:{name}" for name, module in tasks.EXPORTS.items()
             if (module, name) not in _TASK_OF}


def scan_package(sources: dict[str, str | bytes], folder: str = "minilm") -> dict[str, list[Violation]]:
    """scan() of every exercise module in `sources` (module name → source), and what each task
    reaches through the other tasks' code it calls, in any module, that those tasks' own rules
    allow but its rules refuse: gelu calling sinusoidal_positions (Task 13.2, which may call
    anything) to fetch torch.nn.functional.gelu breaks Task 13.3's rules, as a helper's code
    would. What the other task's rules refuse costs that task alone (Linear calling a linear
    that calls F.linear costs Task 1.1, not 1.2)."""
    result: dict[str, list[Violation]] = {}
    findings: dict[str, list[tuple[str, _Finding]]] = {}
    calls: dict[str, set[str]] = {}
    files: dict[str, str] = {}
    for module, source in sources.items():
        filename = f"{folder}/{module}.py"
        res, found, called = _scan_module(source, filename)
        result.update(res)
        findings.update(found)
        calls.update(called)
        files.update({tid: filename for tid in found})
    for tid in list(result):
        if ":" in tid:
            continue
        task = tasks.get(tid)
        reached, todo = set(), list(calls.get(tid, ()))
        while todo:
            other = todo.pop()
            if other in reached or other == tid:
                continue
            reached.add(other)
            todo += list(calls.get(other, ()))
        for other in sorted(reached):
            via = f"your {other.split(':')[1]}" if ":" in other else f"your {tasks.get(other).function} (Task {other})"
            for _where, f in findings.get(other, ()):
                if ":" not in other and _judge(tasks.get(other), f) is not None:
                    continue  # that task's own rules refuse it already: it costs that task, not every caller
                judged = _judge(task, f)
                if judged is None:
                    continue
                v = Violation(tid, files[other], f.line, f"{judged[0]} through {via}",
                              judged[1], "reaches", f"your {task.function}")
                if all((w.file, w.line, w.what) != (v.file, v.line, v.what) for w in result[tid]):
                    result[tid].append(v)
    return {tid: vs for tid, vs in result.items() if ":" not in tid}


def _scan_module(source: str | bytes, filename: str
                 ) -> tuple[dict[str, list[Violation]], dict[str, list[tuple[str, _Finding]]], dict[str, set[str]]]:
    """scan()'s violations, every task's findings (before its rules judge them) and the other
    tasks (ids, any module) each task's code refers to."""
    module = Path(filename).stem
    mod_tasks = [t for t in tasks.TASKS if t.module == module]
    result: dict[str, list[Violation]] = {t.id: [] for t in mod_tasks}
    by_task: dict[str, list[tuple[str, _Finding]]] = {t.id: [] for t in mod_tasks}
    calls: dict[str, set[str]] = {t.id: set() for t in mod_tasks}
    if not mod_tasks:
        return result, by_task, calls
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None) or 1
        msg = getattr(e, "msg", None) or str(e)
        for t in mod_tasks:
            result[t.id].append(Violation(t.id, filename, line, f"a syntax error: {msg}",
                                          "fix it: nothing in this file runs until it parses", "has", "your module"))
        return result, by_task, calls
    try:
        findings = _scan_tree(tree, mod_tasks, calls)
    except RecursionError:
        for t in mod_tasks:
            result[t.id].append(Violation(t.id, filename, 1, "code nested too deeply to check",
                                          "write it with fewer nested expressions", "has", "your module"))
        return result, by_task, calls
    for task_id, where, f in findings:
        by_task.setdefault(task_id, []).append((where, f))
        if ":" in task_id:
            continue
        task = tasks.get(task_id)
        judged = _judge(task, f)
        if judged is None:
            continue
        v = Violation(task_id, filename, f.line, judged[0], judged[1], f.verb, where)
        if all((w.line, w.what) != (v.line, v.what) for w in result[task_id]):
            result[task_id].append(v)
    for vs in result.values():
        vs.sort(key=lambda v: v.line)
    return result, by_task, calls


def _tasks_referred(mod: _Module, nodes: list[ast.AST], module: str, owner: dict[str, str]) -> set[str]:
    """The tasks (ids) whose function or class `nodes` name: this module's (by name) or another
    exercise module's (imported, or as an attribute of an imported module)."""
    out: set[str] = set()
    for root in nodes:
        for n in ast.walk(root):
            q = None
            if isinstance(n, ast.Name):
                if n.id in owner:
                    out.add(owner[n.id])
                    continue
                q = mod.imported.get(n.id)
            elif isinstance(n, ast.Attribute):
                q = mod.resolve(n)
            parts = (q or "").split(".")
            if parts[0] == "minilm" and len(parts) >= 3 and (parts[1], parts[2]) in _TASK_OF:
                out.add(_TASK_OF[(parts[1], parts[2])])
    return out


def _scan_tree(tree: ast.Module, mod_tasks: list[tasks.Task], calls: dict[str, set[str]] | None = None
               ) -> list[tuple[str, str, _Finding]]:
    """(task id, "your …", finding) for every finding, attributed as the docstring says; and
    in `calls`, the other tasks each task's code (its own, its helpers', the module's) names."""
    owner = {name: t.id for t in mod_tasks for name in t.names}
    mod = _Module(tree, set(owner))
    all_ids = [t.id for t in mod_tasks]
    regions: dict[str, list[tuple[str, ast.stmt]]] = {t.id: [] for t in mod_tasks}  # task → (name, stmt)
    helpers: dict[str, list[ast.stmt]] = {}
    module_stmts: list[ast.stmt] = []
    out: list[tuple[str, str, _Finding]] = []
    for stmt in tree.body:
        bound = _bound_names(stmt)
        mine = [n for n in bound if n in owner]
        if mine:
            for name in mine:
                regions[owner[name]].append((name, stmt))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            helpers.setdefault(stmt.name, []).append(stmt)
        elif mod.is_alias_binding(stmt):
            for f in mod.findings(stmt, ways_only=True):
                out += [(tid, "your module", f) for tid in all_ids]
        else:
            module_stmts.append(stmt)

    # Which scopes (task ids, or _MODULE) use each helper, directly or through other helpers.
    users: dict[str, set[str]] = {h: set() for h in helpers}
    scopes = {tid: [s for _, s in stmts] for tid, stmts in regions.items()} | {_MODULE: module_stmts}
    for scope, stmts in scopes.items():
        todo, seen = list(_referenced(stmts) & helpers.keys()), set()
        while todo:
            h = todo.pop()
            if h in seen:
                continue
            seen.add(h)
            users[h].add(scope)
            todo += list(_referenced(helpers[h]) & helpers.keys())
    for h, scope_set in users.items():
        if not scope_set:
            scope_set.add(_MODULE)  # used by no task's code: judged as module-level code

    if calls is not None:
        module = mod_tasks[0].module
        shared = _tasks_referred(mod, module_stmts, module, owner)
        for tid, stmts in regions.items():
            code = [s for _, s in stmts] + [s for h, scope_set in users.items()
                                            if tid in scope_set or _MODULE in scope_set for s in helpers[h]]
            calls[tid] = (_tasks_referred(mod, code, module, owner) | shared) - {tid}
        for name in helpers:
            pid = _TASK_OF.get((module, name), "")
            if ":" not in pid:
                continue
            code, todo = [], [name]
            while todo:  # the provided name's code and the helpers it uses
                h = todo.pop()
                if h in helpers and all(s is not helpers[h][0] for s in code):
                    code += helpers[h]
                    todo += list(_referenced(helpers[h]) & helpers.keys())
            calls[pid] = _tasks_referred(mod, code, module, owner)
            for stmt in code:
                for f in mod.findings(stmt):
                    out.append((pid, f"your {name}", f))

    seen_stmts: set[int] = set()
    for tid, stmts in regions.items():
        for name, stmt in stmts:
            for f in mod.findings(stmt):
                out.append((tid, f"your {name}", f))
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and name in mod.imported:
                # `from torch import softmax`: the task's name is the built-in itself.
                q = mod.imported[name]
                out.append((tid, f"your {name}", _Finding(stmt.lineno, "is", q, "family", q)))
    for stmt in module_stmts:
        for f in mod.findings(stmt):
            out += [(tid, "your module", f) for tid in all_ids]
    for h, scope_set in users.items():
        ids = all_ids if _MODULE in scope_set else sorted(scope_set)
        for stmt in helpers[h]:
            if id(stmt) in seen_stmts:
                continue
            seen_stmts.add(id(stmt))
            for f in mod.findings(stmt):
                out += [(tid, f"your helper {h}", f) for tid in ids]
    return out


def implementation_file(module: str) -> Path:
    """The current implementation's file for exercise module `module`: the student's
    minilm/<module>.py, or solutions/<module>.py under MINILM_IMPL=solutions."""
    import minilm  # cheap: never imports torch or any exercise module

    package = "solutions" if minilm.implementation() == "solutions" else "minilm"
    return tasks.ROOT / package / f"{module}.py"


@functools.lru_cache(maxsize=8)
def _scan_files(stamps: tuple[tuple[str, str, int, int], ...], folder: str) -> dict[str, list[Violation]]:
    sources = {}
    for module, path, _mtime, _size in stamps:
        try:
            sources[module] = Path(path).read_bytes()
        except OSError:
            continue
    return scan_package(sources, folder)


def violations_for(task_id: str) -> list[Violation]:
    """The violations of Task `task_id`'s rules in the current implementation's file (empty
    when the file is missing: importing it then fails on its own)."""
    task = tasks.get(task_id)
    if not implementation_file(task.module).is_file():
        return []
    stamps = []
    for module in tasks.EXERCISE_MODULES:
        path = implementation_file(module)
        try:
            st = path.stat()
        except OSError:
            continue
        stamps.append((module, str(path), st.st_mtime_ns, st.st_size))
    folder = implementation_file(task.module).parent
    try:
        display = folder.relative_to(tasks.ROOT).as_posix()
    except ValueError:
        display = str(folder)
    return list(_scan_files(tuple(stamps), display).get(task.id, []))
