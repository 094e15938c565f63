"""The "from scratch" rule, checked statically (provided: not an exercise).

Each task builds one piece itself from public tensor operations. The rule fails closed: every
library name a task's code uses (torch.exp, math.cos, einops.rearrange, a check of
minilm.course.validate, another exercise module's task name) must be on that task's list of
allowed operations: the list in allowed.py, minus the families of built-ins the task builds or
must reuse the student's own version of (Task 6.1 may not use anything softmax-like). An
attribute of an object the scan cannot follow (x.amax, p.grad.mul_) must be a public method of
a tensor, a module or a plain Python value, or a name the course or the student's code defines,
and not in the task's families. Anything else is refused:

    scan(source, "minilm/attention.py")   # {"6.1": [Violation, …], "6.2": [], "6.3": []}
    violations_for("6.1")[0].message       # 'Task 6.1: your softmax calls torch.softmax
                                           #  (minilm/attention.py:31); build it from exp and sum'

It reads an exercise module's source and never imports or runs it. What it sees through:
import aliases, aliases by assignment (s = torch.softmax; F = torch.nn.functional), getattr
with a constant name. What it refuses wherever it is: private names (a leading underscore) and
dunders of anything but a method's own `self`, modules used as values, Python built-ins off
the list (exec, open, vars, …), computed getattr, assigning to a library's names, jaxtyping
shapes that are code, classes handed to a library, torch.load and torch.save beyond Task 10.5's
plain calls.

Which task a finding costs: code inside a task's function or class (and a top-level statement
binding one of its names) costs that task; a top-level helper costs every task whose code uses
it, or the whole module when none does; other module-level code costs every task of the module
(imports and aliases only where they are used). scan_package also judges a task by the other
tasks' code it calls, and by the code that defines the attributes it uses, with its own rules.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from minilm.course import tasks
from minilm.course.rules import allowed
from minilm.course.rules.allowed import FAMILIES, Family

LIST_FILE = "minilm/course/rules/allowed.py"
_PYTHON_BUILTINS = frozenset(dir(builtins)) | {"__builtins__", "__file__", "__name__", "__class__"}
_DYNAMIC = ("getattr", "setattr", "delattr", "hasattr")
_MODULE = "module"  # the scope of module-level code: every task of the module
# A jaxtyping shape that jaxtyping does not evaluate: names (*batch, #n, _), numbers and ..., by spaces.
_SHAPE_NAME = r"(?:\.\.\.|[*#?]{0,2}\w+)"
_SHAPE = re.compile(rf"\s*(?:{_SHAPE_NAME}(?:\s+{_SHAPE_NAME})*)?\s*")  # one way to match: no backtracking blow-up
_EVERY_TASK_ALLOWS = allowed.ALLOWED | {n for t in tasks.TASKS for n in t.allowed}  # what an import may name


@dataclass(frozen=True)
class Violation:
    """One use of something a task may not use."""

    task: str
    file: str  # as given to scan, e.g. "minilm/attention.py"
    line: int
    what: str  # e.g. "torch.softmax", "Tensor.softmax", "exec, which is not on Task 6.1's list …"
    advice: str  # e.g. "build it from exp and sum"
    verb: str = "calls"  # calls | uses | imports | assigns to | has | reaches
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
    kind: str  # "way" (refused everywhere), "name" (a library name), "method" (an attribute of an unknown object)
    name: str  # the qualified name (way, name) or the attribute (method)
    advice: str = ""  # a way's
    known: bool = True  # a method: one the course or the student's code defines, or a way: on no list


def _unlisted(what: str, task_id: str) -> str:
    return f"{what}, which is not on Task {task_id}'s list of allowed operations ({LIST_FILE})"


@functools.lru_cache(maxsize=None)  # pure in the name; a scan asks again and again
def _tokens(name: str) -> tuple[str, ...]:
    """The words of a name, lower-cased, whatever its style: native_layer_norm → (native, layer,
    norm), LayerNorm → (layer, norm), BatchNorm1d → (batch, norm, 1, d)."""
    return tuple(w.lower() for piece in name.split("_")
                 for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", piece))


@functools.lru_cache(maxsize=None)
def _contains_name(name: str, builtin: str) -> bool:
    """`name` is the built-in `builtin`, or holds its words in a row: torch's variants of a
    built-in carry its name (native_layer_norm, BatchNorm1d, linear_cross_entropy, NLLLoss2d)."""
    if name == builtin:
        return True
    have, want = _tokens(name), _tokens(builtin)
    return bool(want) and any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1))


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _family_matches(family: Family, name: str) -> bool:
    """The library name `name` is one of the family's built-ins, by any path or variant."""
    parts = name.split(".")
    if parts[0] not in ("torch", "einops") or any(_under(name, e) for e in family.except_):
        return False
    return (any(_under(name, p) for p in family.prefixes)
            or any(_contains_name(p, n) for p in parts[1:] for n in family.names))


def _attr_matches(family: Family, attr: str) -> bool:
    """An attribute of an object the scan cannot follow: a method form, a built-in's own name,
    or a name holding a multi-word built-in's words (.native_layer_norm; not .linear_q, which may
    be the student's own attribute)."""
    return (attr in family.methods or attr in family.names
            or any(len(_tokens(n)) > 1 and _contains_name(attr, n) for n in family.names))


@functools.lru_cache(maxsize=None)
def _validate_names() -> frozenset[str]:
    """The public functions of the provided minilm/course/validate.py (read, not imported)."""
    tree = ast.parse((tasks.COURSE_DIR / "validate.py").read_text(encoding="utf-8"))
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_"))


def _module_names(module: str) -> set[str]:
    """The names other exercise modules may import from exercise module `module`."""
    return {n for t in tasks.TASKS if t.module == module for n in t.names} | {
        name for name, mod in tasks.EXPORTS.items() if mod == module}


def _is_module(q: str) -> bool:
    parts = q.split(".")
    return q in allowed.MODULES or (parts[0] == "minilm" and len(parts) <= 2) or q == "minilm.course.validate"


def _bound_names(stmt: ast.stmt) -> list[str]:
    """The names a top-level statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names if a.name != "*"]
    targets = list(stmt.targets) if isinstance(stmt, ast.Assign) else (
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _rebinds(fn: ast.AST, name: str, own: ast.arg) -> bool:
    """Anything inside fn binds `name` again, besides its parameter `own`."""
    for n in ast.walk(fn):
        if ((isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
                or (isinstance(n, ast.arg) and n.arg == name and n is not own)
                or (isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names)
                or (isinstance(n, ast.alias) and (n.asname or n.name) == name)
                or (isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name == name)
                or (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name)):
            return True
    return False


def _defined_attrs(nodes: list[ast.AST]) -> set[str]:
    """The attribute names code defines: stores to attributes, and the names of class bodies."""
    out = set()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                out.add(n.attr)
            elif isinstance(n, ast.ClassDef):
                out |= {b for s in n.body for b in _bound_names(s)}
    return out


class _Module:
    """One parsed exercise module: its aliases, and what each part of it uses."""

    def __init__(self, tree: ast.Module, task_names: set[str], defined: set[str] = frozenset()):
        # Task names are never aliases: `softmax = torch.softmax` costs Task 6.1 where it is
        # written, and Task 6.2 calling that softmax is calling the student's softmax.
        self.aliases: dict[str, str] = {}
        # Names the module binds by def, class, parameter or import: never Python's built-ins.
        self.own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                      ast.ClassDef))}
        self.own |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.defined = _defined_attrs([tree]) | set(defined)  # attribute names the student's code defines
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = self._from_module(node)
                for a in node.names:
                    if a.name != "*" and base is not None:
                        self.aliases[a.asname or a.name] = f"{base}.{a.name}"
        self.own |= set(self.aliases)
        # `name = <a resolved name>` anywhere: one namespace, so F = torch.nn.functional; F.linear(…)
        # is seen wherever it is written.
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
        self.exempt: frozenset[str] = frozenset()  # the `self` of the method being walked
        # Classes whose self is the student's alone: built on nn.Module, Optimizer or such classes
        # (a subclass of torch.Tensor has the built-ins as methods: self.softmax).
        classes, self.plain = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)], set()
        for _ in range(len(classes)):
            self.plain |= {c.name for c in classes if not c.keywords and all(
                self.resolve(b) in ("torch.nn.Module", "torch.optim.Optimizer")
                or (isinstance(b, ast.Name) and b.id in self.plain and b.id not in self.aliases) for b in c.bases)}

    @staticmethod
    def _from_module(node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        if node.level == 1:  # from .linear import Linear: a sibling exercise module
            return "minilm" + (f".{node.module}" if node.module else "")
        return None  # beyond the package

    @staticmethod
    def _alias_pairs(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
        """(name, value) for `name = value`, `F = G = value` or `a, b = x, y`."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:
            ok = all(isinstance(t, ast.Name) for t in stmt.targets)
            return [(t.id, stmt.value) for t in stmt.targets] if ok else []
        if isinstance(stmt, ast.Assign):
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
                and node.func.id not in self.aliases and node.func.id not in self.own):
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

    def _is_self(self, node: ast.AST) -> bool:
        """The method's own first parameter, never rebound, or super() inside such a method."""
        if isinstance(node, ast.Name):
            return node.id in self.exempt
        return (bool(self.exempt) and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "super" and "super" not in self.own and not node.args)

    # ------------------------------------------------------------------ findings

    def findings(self, node: ast.AST, ways_only: bool = False) -> list[_Finding]:
        out: list[_Finding] = []
        self.exempt = frozenset()
        self._walk(node, out, call=False)
        return [f for f in out if f.kind == "way"] if ways_only else out

    def _way(self, out, node, verb, what, advice, unlisted=False):
        out.append(_Finding(getattr(node, "lineno", 1), verb, what, "way", what, advice, not unlisted))

    def _name(self, out, node, q: str, call: bool, store: bool = False, alias: bool = False) -> None:
        """Judge a use of the resolved name q (`alias`: as the value of an alias binding)."""
        verb, parts = "calls" if call else "uses", q.split(".")
        if store:
            return self._way(out, node, "assigns to", q, allowed.PATCHING_ADVICE)
        if parts[0] == "minilm":  # the student's own code, and the provided validate module's checks
            head = 4 if parts[1:3] == ["course", "validate"] else 3
            if not self._importable_minilm(parts[:head]):
                return self._way(out, node, verb, q, allowed.IMPORT_ADVICE)
            if len(parts) < head and not alias:
                self._way(out, node, "uses", f"the module {q} as a value", allowed.MODULE_VALUE_ADVICE)
            for i, attr in enumerate(parts[head:], head):  # the student's own objects: judged by each name
                self._attr(out, node, attr, call and i == len(parts) - 1, ".".join(parts[:i]))
            return
        private = next((p for p in parts if p.startswith("_")), None)
        if private:
            return self._way(out, node, verb, q, allowed.PRIVATE_ADVICE)
        if _is_module(q):
            if not alias:  # in a tuple, a dict, a default …: what is reached through it is out of sight
                self._way(out, node, "uses", f"the module {q} as a value", allowed.MODULE_VALUE_ADVICE)
            return
        out.append(_Finding(getattr(node, "lineno", 1), verb, q, "name", q))
        if q in ("torch.load", "torch.save") and not (call or alias):
            self._way(out, node, verb, f"{q} as a value", allowed.LOAD_ADVICE)
        elif parts[0] == "jaxtyping" and not (call or alias):
            # a jaxtyping type held as a value can be given any shape later, out of the scan's sight
            self._way(out, node, "uses", f"{q} as a value", allowed.SHAPE_ADVICE)

    @staticmethod
    def _importable_minilm(parts: list[str]) -> bool:
        if parts[:3] == ["minilm", "course", "validate"]:
            return len(parts) == 3 or (len(parts) == 4 and parts[3] in _validate_names())
        return (len(parts) >= 2 and parts[1] in tasks.EXERCISE_MODULES
                and (len(parts) == 2 or (len(parts) == 3 and parts[2] in _module_names(parts[1]))))

    def _attr(self, out, node: ast.AST, attr: str, call: bool, base: str) -> None:
        """Judge `<an object the scan cannot follow>.attr` (`base`: how to show that object)."""
        verb, text = "calls" if call else "uses", f"{base}.{attr}"
        if attr.startswith("_") and attr not in allowed.DUNDERS or attr in allowed.NEVER_ATTRIBUTES:
            return self._way(out, node, verb, text, allowed.PRIVATE_ADVICE, unlisted=True)
        known = attr in allowed.METHODS or attr in allowed.COURSE_NAMES or attr in allowed.DUNDERS or attr in self.defined
        if any(attr in fam.methods for fam in FAMILIES.values()):
            text = f"Tensor.{attr}"  # a tensor method that is a built-in (x.softmax(-1))
        out.append(_Finding(getattr(node, "lineno", 1), verb, text, "method", attr, known=known))

    def _import(self, out, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            names = [(a.name, True) for a in node.names]
        else:
            base = self._from_module(node)
            if base is None:
                return self._way(out, node, "imports", "." * node.level + (node.module or ""), allowed.IMPORT_ADVICE)
            if any(a.name == "*" for a in node.names):
                self._way(out, node, "imports", f"* from {base}", "import the names you use one by one")
            names = [(f"{base}.{a.name}", False) for a in node.names if a.name != "*"]
        for q, module_only in names:
            parts = q.split(".")
            if parts[0] == "minilm":
                if not self._importable_minilm(parts):
                    self._way(out, node, "imports", q, allowed.IMPORT_ADVICE)
            elif parts[0] not in allowed.IMPORTABLE:
                self._way(out, node, "imports", q, allowed.IMPORT_ADVICE)
            elif any(p.startswith("_") for p in parts) and q != "__future__.annotations":
                self._way(out, node, "imports", q, allowed.PRIVATE_ADVICE)
            elif not (q in allowed.MODULES or (not module_only and q in _EVERY_TASK_ALLOWS)
                      or q == "__future__.annotations"):
                self._way(out, node, "imports", q, allowed.LIST_ADVICE, unlisted=True)

    def _function(self, node, out) -> None:
        """A function: its signature and decorators as the enclosing code, its body with its own
        first parameter exempt when it is a method's `self` or `cls` that nothing rebinds."""
        outer = self.exempt
        for field, value in ast.iter_fields(node):
            if field != "body":
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, ast.AST):
                        self._walk(child, out, False)
        self.exempt = getattr(node, "_minilm_exempt", outer)
        for child in node.body if isinstance(node.body, list) else [node.body]:
            self._walk(child, out, False)
        self.exempt = outer

    def _walk(self, node: ast.AST, out: list[_Finding], call: bool, alias: bool = False) -> None:
        """Judge node; `alias`: node is the value of an alias binding (F = torch.nn.functional)."""
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self._import(out, node)
        if isinstance(node, ast.ClassDef):
            for fn in node.body:  # its methods' first parameters: the real self and cls
                args = [*fn.args.posonlyargs, *fn.args.args] if isinstance(fn, (ast.FunctionDef,
                                                                                ast.AsyncFunctionDef)) else []
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", ()))
                if args and not static and node.name in self.plain and not _rebinds(fn, args[0].arg, args[0]):
                    fn._minilm_exempt = frozenset({args[0].arg})
                elif args:
                    fn._minilm_exempt = frozenset()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return self._function(node, out)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and self.is_alias_binding(node):
            for child in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self._walk(child, out, False)
            values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) and any(
                isinstance(t, (ast.Tuple, ast.List)) for t in getattr(node, "targets", ())) else [node.value]
            for child in values:
                self._walk(child, out, False, alias=True)
            return
        dynamic = self._dynamic(node)
        if dynamic:
            args = node.args
            if len(args) >= 2 and _const_name(args[1]):
                q = self.resolve(args[0])
                if q is not None:
                    self._name(out, node, f"{q}.{args[1].value}", call=call and dynamic == "getattr",
                               store=dynamic in ("setattr", "delattr"), alias=alias)
                elif not self._is_self(args[0]):
                    self._attr(out, node, args[1].value, call, _short(args[0]))
                    self._walk(args[0], out, False)
                for child in [*args[2:], *node.keywords]:
                    self._walk(child, out, False)
                return
            if dynamic != "hasattr":
                self._way(out, node, "calls", f"{dynamic} with a computed name", allowed.DYNAMIC_ADVICE)
                for child in [*args, *node.keywords]:
                    self._walk(child, out, False)
                return
        if isinstance(node, ast.Subscript):
            q = self.resolve(node.value)
            if q is not None and q.split(".")[0] == "jaxtyping":
                self._name(out, node.value, q, call=False, alias=True)  # Float[…]: the type, not a value
                for part in node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]:
                    if _const_str(part) and _SHAPE.fullmatch(part.value):
                        continue
                    if not _const_str(part) and self.resolve(part) is not None:
                        self._walk(part, out, False, alias=True)  # Tensor, torch.Tensor: a type
                        continue
                    self._way(out, part, "has", f"the jaxtyping shape {_short(part)}", allowed.SHAPE_ADVICE)
                    self._walk(part, out, False)
                return
        if isinstance(node, ast.Call):
            q = self.resolve(node.func)
            if q in ("torch.load", "torch.save") and not _plain_call(node, q):
                self._way(out, node, "calls", f"{q} with a pickler or options", allowed.LOAD_ADVICE)
            if q is not None and q.split(".")[0] != "minilm":  # a class handed to a library (pickle_module=…)
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if self._is_class(arg):
                        self._way(out, arg, "hands", f"the class {_short(arg)} to {q}", allowed.CLASS_ADVICE)
            self._walk(node.func, out, True)
            for child in [*node.args, *node.keywords]:
                self._walk(child, out, False)
            return
        if isinstance(node, ast.Attribute):
            q = self.resolve(node)
            if q is not None:
                return self._name(out, node, q, call, store=isinstance(node.ctx, (ast.Store, ast.Del)), alias=alias)
            if self._is_self(node.value):  # the method's own attributes: the student's, judged where set
                if node.attr.startswith("__") and node.attr not in allowed.DUNDERS:
                    self._way(out, node, "uses", _short(node), allowed.PRIVATE_ADVICE, unlisted=True)
                return
            self._attr(out, node, node.attr, call, _short(node.value, 30))
            return self._walk(node.value, out, False)
        if isinstance(node, ast.Name):
            q = self.aliases.get(node.id)
            if q is not None and isinstance(node.ctx, ast.Load):
                self._name(out, node, q, call, alias=alias)
            elif (isinstance(node.ctx, ast.Load) and node.id in _PYTHON_BUILTINS and node.id not in self.own
                  and node.id not in allowed.PYTHON_BUILTINS):
                self._way(out, node, "calls" if call else "uses", node.id, allowed.DYNAMIC_ADVICE, unlisted=True)
            return
        for child in ast.iter_child_nodes(node):
            self._walk(child, out, False)

    def _is_class(self, node: ast.AST) -> bool:
        """A class of the student's code: one this module defines, or another exercise module's."""
        if isinstance(node, ast.Name) and node.id in self.classes and node.id not in self.aliases:
            return True
        q = self.resolve(node) or ""
        return q.startswith("minilm.") and len(q.split(".")) == 3 and q.split(".")[2][:1].isupper()


def _plain_call(call: ast.Call, q: str) -> bool:
    """torch.save(obj, f) or torch.load(f[, map_location][, weights_only=True][, mmap=…]): no
    pickle module or protocol (the third positional argument), no **kwargs, and torch.load's
    restricted unpickler, which only rebuilds tensors and plain containers."""
    if len(call.args) > 2 or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    for kw in call.keywords:
        if kw.arg is None or kw.arg.startswith("pickle_"):
            return False
        if q == "torch.load" and kw.arg == "weights_only" and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is True):
            return False
    return True


def _const_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _const_name(node: ast.AST) -> bool:
    """A constant attribute name: a string that is an identifier (any other string is refused
    like a computed name)."""
    return _const_str(node) and node.value.isidentifier()


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _referenced(nodes: list[ast.AST]) -> set[str]:
    return {n.id for root in nodes for n in ast.walk(root) if isinstance(n, ast.Name)}


def _judge(task: tasks.Task, f: _Finding) -> tuple[str, str] | None:
    """(what, advice) when finding f breaks task's rules, else None."""
    if f.kind == "way":
        return (f.what if f.known else _unlisted(f.what, task.id)), f.advice
    listed = (f.name in allowed.ALLOWED or f.name in task.allowed) if f.kind == "name" else f.known
    for family, advice in task.forbidden:
        fam = FAMILIES[family]
        if _family_matches(fam, f.name) if f.kind == "name" else _attr_matches(fam, f.name):
            return (f.what if listed else _unlisted(f.what, task.id)), advice
    return None if listed else (_unlisted(f.what, task.id), allowed.LIST_ADVICE)


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


def _parse(source: str | bytes, filename: str) -> ast.Module | Exception:
    try:
        return ast.parse(source, filename)
    except (SyntaxError, ValueError) as e:
        return e


def scan_package(sources: dict[str, str | bytes], folder: str = "minilm") -> dict[str, list[Violation]]:
    """scan() of every exercise module in `sources` (module name → source), and what each task
    reaches through the other tasks' code, in any module, that those tasks' own rules allow but
    its rules refuse: the tasks it names (gelu calling sinusoidal_positions, Task 13.2, to fetch
    F.gelu) and the code that defines the attributes it uses (kv_cache.f set by KVCache). What
    the other task's rules refuse costs that task alone."""
    trees = {m: _parse(s, f"{folder}/{m}.py") for m, s in sources.items()}
    defined = _defined_attrs([t for t in trees.values() if isinstance(t, ast.Module)])
    result, findings, calls, files = {}, {}, {}, {}
    defines: dict[str, set[str]] = {}
    for module, tree in trees.items():
        filename = f"{folder}/{module}.py"
        res, found, called, defs = _scan_module(tree, filename, defined)
        result.update(res)
        findings.update(found)
        calls.update(called)
        defines.update(defs)
        files.update({tid: filename for tid in found})
    for tid, found in findings.items():  # an attribute of the student's own: the code that defines it
        used = {f.name for _, f in found if f.kind == "method" and f.name not in allowed.METHODS}
        calls.setdefault(tid, set()).update(o for o, attrs in defines.items() if o != tid and used & attrs)
    for tid in [t for t in result if ":" not in t]:
        task = tasks.get(tid)
        reached, todo = set(), list(calls.get(tid, ()))
        while todo:
            other = todo.pop()
            if other not in reached and other != tid:
                reached.add(other)
                todo += list(calls.get(other, ()))
        for other in sorted(reached, key=lambda o: (":" not in o, o)):  # provided code by its own name first
            via = f"your {other.split(':')[1]}" if ":" in other else f"your {tasks.get(other).function} (Task {other})"
            for _where, f in findings.get(other, ()):
                if ":" not in other and _judge(tasks.get(other), f) is not None:
                    continue  # that task's own rules refuse it already: it costs that task, not every caller
                judged = _judge(task, f)
                if judged is None:
                    continue
                what = judged[0].replace(f.what, f"{f.what} through {via}", 1)
                v = Violation(tid, files[other], f.line, what, judged[1], "reaches", f"your {task.function}")
                if all((w.file, w.line, w.what) != (v.file, v.line, v.what) for w in result[tid]):
                    result[tid].append(v)
    return {tid: vs for tid, vs in result.items() if ":" not in tid}


def _scan_module(source, filename: str, defined: set[str] = frozenset()):
    """scan()'s violations, every task's findings (before its rules judge them), the other tasks
    (ids, any module) each task's code refers to, and the attribute names each task's code defines."""
    module = Path(filename).stem
    mod_tasks = [t for t in tasks.TASKS if t.module == module]
    result: dict[str, list[Violation]] = {t.id: [] for t in mod_tasks}
    by_task: dict[str, list[tuple[str, _Finding]]] = {t.id: [] for t in mod_tasks}
    calls: dict[str, set[str]] = {t.id: set() for t in mod_tasks}
    defines: dict[str, set[str]] = {}
    tree = source if isinstance(source, (ast.Module, Exception)) else _parse(source, filename)
    if not mod_tasks:
        return result, by_task, calls, defines
    if isinstance(tree, Exception):
        line, msg = getattr(tree, "lineno", None) or 1, getattr(tree, "msg", None) or str(tree)
        for t in mod_tasks:
            result[t.id].append(Violation(t.id, filename, line, f"a syntax error: {msg}",
                                          "fix it: nothing in this file runs until it parses", "has", "your module"))
        return result, by_task, calls, defines
    try:
        findings = _scan_tree(tree, mod_tasks, calls, defines, defined)
    except RecursionError:
        for t in mod_tasks:
            result[t.id].append(Violation(t.id, filename, 1, "code nested too deeply to check",
                                          "write it with fewer nested expressions", "has", "your module"))
        return result, by_task, calls, defines
    for task_id, where, f in findings:
        by_task.setdefault(task_id, []).append((where, f))
        judged = None if ":" in task_id else _judge(tasks.get(task_id), f)
        if judged is not None and all((w.line, w.what) != (f.line, judged[0]) for w in result[task_id]):
            result[task_id].append(Violation(task_id, filename, f.line, judged[0], judged[1], f.verb, where))
    for vs in result.values():
        vs.sort(key=lambda v: v.line)
    return result, by_task, calls, defines


def _tasks_referred(mod: _Module, nodes: list[ast.AST], owner: dict[str, str]) -> set[str]:
    """The tasks (ids) whose function or class `nodes` name: this module's (by name) or another
    exercise module's (imported, or as an attribute of an imported module)."""
    out: set[str] = set()
    for n in (n for root in nodes for n in ast.walk(root)):
        if isinstance(n, ast.Name) and n.id in owner:
            out.add(owner[n.id])
            continue
        q = mod.imported.get(n.id) if isinstance(n, ast.Name) else mod.resolve(n) if isinstance(n, ast.Attribute) else None
        parts = (q or "").split(".")
        if parts[0] == "minilm" and len(parts) >= 3 and (parts[1], parts[2]) in _TASK_OF:
            out.add(_TASK_OF[(parts[1], parts[2])])
    return out


def _scan_tree(tree: ast.Module, mod_tasks: list[tasks.Task], calls: dict[str, set[str]],
               defines: dict[str, set[str]], defined: set[str] = frozenset()) -> list[tuple[str, str, _Finding]]:
    """(task id, "your …", finding) for every finding, attributed as the docstring says; in
    `calls`, the other tasks each task's code names; in `defines`, the attributes it defines."""
    owner = {name: t.id for t in mod_tasks for name in t.names}
    mod = _Module(tree, set(owner), defined)
    module, all_ids = mod_tasks[0].module, [t.id for t in mod_tasks]
    regions: dict[str, list[tuple[str, ast.stmt]]] = {t.id: [] for t in mod_tasks}  # task → (name, stmt)
    helpers: dict[str, list[ast.stmt]] = {}
    module_stmts: list[ast.stmt] = []
    out: list[tuple[str, str, _Finding]] = []
    for stmt in tree.body:
        mine = [n for n in _bound_names(stmt) if n in owner]
        if mine:
            for name in mine:
                regions[owner[name]].append((name, stmt))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            helpers.setdefault(stmt.name, []).append(stmt)
        elif mod.is_alias_binding(stmt):
            out += [(tid, "your module", f) for f in mod.findings(stmt, ways_only=True) for tid in all_ids]
        else:
            module_stmts.append(stmt)

    # Which scopes (task ids, or _MODULE) use each helper, directly or through other helpers.
    users: dict[str, set[str]] = {h: set() for h in helpers}
    scopes = {tid: [s for _, s in stmts] for tid, stmts in regions.items()} | {_MODULE: module_stmts}
    for scope, stmts in scopes.items():
        todo, seen = list(_referenced(stmts) & helpers.keys()), set()
        while todo:
            h = todo.pop()
            if h not in seen:
                seen.add(h)
                users[h].add(scope)
                todo += list(_referenced(helpers[h]) & helpers.keys())
    for scope_set in users.values():
        if not scope_set:
            scope_set.add(_MODULE)  # used by no task's code: judged as module-level code

    shared = _tasks_referred(mod, module_stmts, owner)
    for tid, stmts in regions.items():
        code = [s for _, s in stmts] + [s for h, scope_set in users.items()
                                        if tid in scope_set or _MODULE in scope_set for s in helpers[h]]
        calls[tid] = (_tasks_referred(mod, code, owner) | shared) - {tid}
        defines[tid] = _defined_attrs(code + module_stmts)
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
        calls[pid], defines[pid] = _tasks_referred(mod, code, owner), _defined_attrs(code)
        out += [(pid, f"your {name}", f) for stmt in code for f in mod.findings(stmt)]

    for tid, stmts in regions.items():
        for name, stmt in stmts:
            out += [(tid, f"your {name}", f) for f in mod.findings(stmt)]
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and name in mod.imported:
                # `from torch import softmax`: the task's name is the built-in itself.
                q = mod.imported[name]
                out.append((tid, f"your {name}", _Finding(stmt.lineno, "is", q, "name", q)))
    for stmt in module_stmts:
        out += [(tid, "your module", f) for f in mod.findings(stmt) for tid in all_ids]
    for h, scope_set in users.items():
        ids = all_ids if _MODULE in scope_set else sorted(scope_set)
        out += [(tid, f"your helper {h}", f) for stmt in helpers[h] for f in mod.findings(stmt) for tid in ids]
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
