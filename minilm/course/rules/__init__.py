"""The "from scratch" rule, checked statically: it never imports or runs the source (provided: not an
exercise). It fails closed: a task may use a library name only if allowed.py lists it and none of the task's
families holds it; an attribute of an object the scan cannot follow, only a listed method or a name the course
or the student's code defines. What would put code out of the scan's sight is refused everywhere: private and
computed names, patching, modules or picklers as values, names bound to different things, and so on.

Code in a task's function or class costs that task; a helper, the tasks whose code uses it (all when none
does); other module-level code, every task of the module. scan_package also judges a task by the other tasks'
code it names or whose attributes it uses:

    scan(source, "minilm/attention.py")   # {"6.1": [Violation, …], "6.2": [], "6.3": []}
"""

from __future__ import annotations

import ast
import collections
import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from minilm.course import tasks
from minilm.course.rules import allowed
from minilm.course.rules.allowed import FAMILIES, Family

LIST_FILE = "minilm/course/rules/allowed.py"
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_ANY_TASK_MAY_USE = allowed.ALLOWED | {n for t in tasks.TASKS for n in t.allowed}  # what an import may name


@dataclass(frozen=True)
class Violation:
    """One use of something a task may not use."""

    task: str
    file: str  # as given to scan, e.g. "minilm/attention.py"
    line: int
    what: str  # "torch.softmax", "Tensor.softmax", "exec, which is not on Task 6.1's list …"
    advice: str  # "build it from exp and sum"
    verb: str = "calls"  # calls | uses | imports | assigns to | binds | has | reaches
    where: str = ""  # "your softmax", "your helper _f", "your module"

    def __str__(self) -> str:
        return f"Task {self.task}: {self.where} {self.verb} {self.what} ({self.file}:{self.line}); {self.advice}"

    message = property(__str__)


@dataclass(frozen=True)
class _Finding:
    line: int
    verb: str
    what: str
    kind: str  # "way" (refused everywhere), "name" (a library name), "method" (an attribute of an unknown object)
    name: str  # the qualified name, or the attribute
    advice: str = ""  # a way's
    known: bool = True  # a method: one the lists or the student's code define; a way: False if on no list
    value: bool = False  # a name or attribute used as a value, not called: it may be filed and used anywhere


@functools.lru_cache(maxsize=None)  # pure in the name; a scan asks again and again
def _words(name: str) -> str:
    """A name's words, lower-cased, whatever its style: native_layer_norm, LayerNorm → " native layer norm ". One
    name holds another's words in a row as torch's variants do (native_layer_norm, BatchNorm1d, NLLLoss2d) when
    its words contain the other's."""
    return " " + " ".join(w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)) + " "


@functools.lru_cache(maxsize=None)
def _family_matches(family: Family, name: str) -> bool:
    parts, dotted = name.split("."), name + "."
    return parts[0] in ("torch", "einops") and not any(dotted.startswith(e + ".") for e in family.except_) and (
        any(dotted.startswith(p + ".") for p in family.prefixes)
        or any(_words(n) in _words(p) for p in parts[1:] for n in family.names))


@functools.lru_cache(maxsize=1024)
def _importable_minilm(q: str) -> bool:
    """minilm.course.validate and its checks (check_…), or an exercise module's task name: never the module
    itself, which `minilm` hands out as the function of the same name (minilm.rope is rope)."""
    parts = q.split(".")
    return q == "minilm.course.validate" or len(parts) == 3 and tasks.EXPORTS.get(parts[2]) == parts[1] or len(
        parts) == 4 and parts[:3] == ["minilm", "course", "validate"] and parts[3].startswith("check_")


def _binding(n: ast.AST) -> str | None:
    """The name one node binds, if any: a store, an import, a parameter, a def, an except or match capture."""
    if isinstance(n, ast.Name):
        return None if isinstance(n.ctx, ast.Load) else n.id
    if isinstance(n, ast.alias):
        return None if n.name == "*" else n.asname or n.name.split(".")[0]
    named = (*_FUNCTIONS, ast.ClassDef, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
    return n.arg if isinstance(n, ast.arg) else n.rest if isinstance(n, ast.MatchMapping) else (
        n.name if isinstance(n, named) else None)


def _in_scope(nodes: list[ast.AST], stop: tuple = (*_SCOPES, *_COMPREHENSIONS)):
    """`nodes` and what they hold in their own scope: a def's or a class's node, not its body."""
    for n in nodes:
        yield n
        yield from () if isinstance(n, stop) else _in_scope(ast.iter_child_nodes(n), stop)


def _binds(nodes: list[ast.AST]) -> frozenset[str]:
    """The names `nodes` bind in their own scope (not a comprehension's), but `global` ones."""
    scope = list(_in_scope(nodes))
    outside = {name for n in scope if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    return frozenset({_binding(n) for n in scope} - outside - {None})


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    """The names a function binds in its own scope, where Python never looks them up in its built-ins (a module's
    or a class body's names may be unbound when read, and then are): fewer names, so more refusals."""
    return _binds([fn.args, *(fn.body if isinstance(fn.body, list) else [fn.body])])


def _defined_attrs(roots: list[ast.AST], stored_only: bool = False) -> frozenset[str]:
    """Attributes set on an object, x.name = … or setattr(x, "name", …); unless stored_only, also the names
    class bodies bind and those a setter registers, register_buffer("cos", …)."""
    return frozenset(b for root in roots for n in ast.walk(root) for b in (
        [n.attr] if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) else
        [n.args[1].value] if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
        and len(n.args) > 1 and _const(n.args[1]) else [] if stored_only else
        _binds(n.body) if isinstance(n, ast.ClassDef) else
        [n.args[0].value] if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args
        and n.func.attr in allowed.SETTERS and _const(n.args[0]) else []))


def _on_import(stmt: ast.stmt, mod: _Module) -> list[ast.AST]:
    """What a def or a class runs when its module is imported, for every task to use: all but a def's body
    (decorators, defaults, annotations; a class's bases), a class's body but its methods' bodies; and whole,
    a function the import hands out (to a decorator not a library's, by name in a class body, OPS.update(f=f),
    or as a global of one) and a class whose making may call its methods (an Enum's __init__ and
    _generate_next_value_, a metaclass's)."""
    runs = stmt.body if isinstance(stmt, ast.ClassDef) else []
    code = [c for c in ast.iter_child_nodes(stmt) if c not in stmt.body] + [
        n for s in runs for n in (_on_import(s, mod) if isinstance(s, _SCOPES) else [s])]
    out = {*_named(code, {getattr(s, "name", "") for s in runs}), *(x for n in code if isinstance(n, ast.Global)
                                                                     for x in n.names)}
    whole = not all(map(mod.library_decorator, stmt.decorator_list)) or id(stmt) in mod.made_by_library
    return code + [s for s in runs if getattr(s, "name", None) in out] + [stmt] * whole


def _alias_pairs(stmt: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value) for `name = value`, `F = G = value` or `a, b = x, y`."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else (
        [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
    pairs = [(t, stmt.value) for t in targets]
    if len(pairs) == 1 and all(isinstance(x, (ast.Tuple, ast.List)) for x in pairs[0]) and len(
            targets[0].elts) == len(stmt.value.elts):
        pairs = list(zip(targets[0].elts, stmt.value.elts))
    return [(t.id, v) for t, v in pairs] if all(isinstance(t, ast.Name) for t, _ in pairs) else []


def _from_module(node: ast.Import | ast.ImportFrom) -> str | None:
    """"" for `import x`; `from .linear import Linear` is a sibling exercise module's; beyond the package, None."""
    return "" if isinstance(node, ast.Import) else node.module if node.level == 0 else (
        "minilm" + (f".{node.module}" if node.module else "") if node.level == 1 else None)


def _imports(nodes: list[ast.AST]) -> list[list[str]]:
    """Each name an import in `nodes` binds, wherever it is (a class body's too), as its dotted parts."""
    return [f"{_from_module(n)}.{a.name}".split(".") for root in nodes for n in ast.walk(root)
            if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names]


def _plain_call(call: ast.Call, q: str) -> bool:
    """No pickle module or protocol (a third positional argument), no **kwargs, weights_only=True if given."""
    return len(call.args) <= 2 and not any(isinstance(a, ast.Starred) for a in call.args) and not any(
        kw.arg is None or kw.arg.startswith("pickle_") or (q == "torch.load" and kw.arg == "weights_only" and not (
            isinstance(kw.value, ast.Constant) and kw.value.value is True)) for kw in call.keywords)


def _const(node: ast.AST, name: bool = False) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (not name or node.value.isidentifier())


def _dunder(name: str | None) -> bool:
    return bool(name) and len(name) > 4 and name[:2] == name[-2:] == "__"


def _short(node: ast.AST, limit: int = 40) -> str:
    return text if len(text := ast.unparse(node)) <= limit else text[: limit - 1] + "…"


class _Module:
    """One parsed exercise module: its aliases, and what each part of it uses."""

    def __init__(self, tree: ast.Module, task_names: set[str], defined: set[str] = frozenset()):
        # The `self` of the method being walked, the names its function and the enclosing ones bind (none while
        # aliases are resolved: getattr is Python's), the findings.
        self.exempt, self.local, self.out, nodes = frozenset(), frozenset(), [], list(ast.walk(tree))
        # How many times the module binds each name, anywhere: super and int may not be Python's where it does.
        self.own = collections.Counter(b for n in nodes if (b := _binding(n)))
        self.defined = defined  # attribute names the student's code defines, in this module or others
        # A class body's bindings are the class's attributes (Box.T, self.T), which no alias follows: there
        # `T = torch` or `import torch as T` stores a value like any other.
        classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
        self.in_class = {id(n) for c in classes for n in _in_scope(c.body, _SCOPES)}
        nodes = [n for n in nodes if id(n) not in self.in_class]
        imports = [(b, f"{base}.{a.name}" if base else a.name if a.asname else b) for n in nodes
                   if isinstance(n, (ast.Import, ast.ImportFrom)) and (base := _from_module(n)) is not None
                   for a in n.names if (b := _binding(a))]
        # `name = <a resolved name>` or an import anywhere: one namespace, so F = torch.nn.functional; F.linear(…)
        # is seen wherever it is written. A name bound to different things, or also by a parameter, a def, a loop …,
        # is ambiguous: no alias (nor is an alias of it), and refused where it is used. Rounds until nothing changes
        # (an alias of an alias defined later; each round's aliases hold the last one's).
        pairs = [p for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) for p in _alias_pairs(n)]
        alias_sites, self.aliases, last = collections.Counter(t for t, _ in imports + pairs), {}, None
        while self.aliases != last:
            meanings, last = collections.defaultdict(set), self.aliases
            for t, q in imports + [(t, self.resolve(v)) for t, v in pairs]:
                meanings[t].add(q)
            self.ambiguous = {t for t, qs in meanings.items()
                              if qs != {None} and (len(qs) > 1 or self.own[t] > alias_sites[t])}
            self.aliases = {t: q for t, (q, *_) in meanings.items() if q and t not in self.ambiguous}
        # A task's name is never an alias (6.2 calling softmax calls the student's softmax), and is bound by its
        # own top-level def or class and nothing else.
        self.aliases = {t: q for t, q in self.aliases.items() if t not in task_names}
        self.task_names, self.task_defs = task_names, {id(s) for s in tree.body if getattr(s, "name", 0) in task_names}
        # Classes whose self is the student's alone: built on nn.Module, Optimizer or such classes (a
        # subclass of torch.Tensor has the built-ins as methods: self.softmax). Each method's self: its first
        # parameter in such a class, never rebound, where no decorator but a plain one makes it something else.
        plain, self.bases = set(), {id(b) for c in classes for b in c.bases}  # a base class is the class's business
        for _ in classes:
            plain |= {c.name for c in classes if not c.keywords and self.own[c.name] == 1 and all(self.resolve(b) in
                      allowed.SELF_BASES or isinstance(b, ast.Name) and b.id in plain for b in c.bases)}
        # Making any other class (a metaclass, an Enum, a base of neither kind) may call its methods.
        self.made_by_library = {id(c) for c in classes if c.name not in plain}
        self.selves = {id(fn): frozenset(a.arg for a in [*fn.args.posonlyargs, *fn.args.args][:1] if c.name in plain
                                         and all(map(self._plain_decorator, fn.decorator_list))
                                         and [_binding(n) for n in ast.walk(fn)].count(a.arg) == 1)
                       for c in classes for fn in c.body if isinstance(fn, _FUNCTIONS)}

    def _plain_decorator(self, d: ast.expr) -> bool:
        """property, or torch.no_grad and its kin: the method still gets its instance first."""
        d = d.func if isinstance(d, ast.Call) and not d.args and not d.keywords else d
        return self.resolve(d) in allowed.SELF_DECORATORS or ast.unparse(d) == "property" not in self.own

    def library_decorator(self, d: ast.expr) -> bool:
        """One that cannot hand the function to the student's code: a library's, with constant arguments only,
        or property, staticmethod or classmethod."""
        f, args = (d.func, [*d.args, *(k.value for k in d.keywords)]) if isinstance(d, ast.Call) else (d, [])
        q = self.resolve(f) or ast.unparse(f) in allowed.DECORATORS - set(self.own) and "builtins"
        return bool(q) and q.split(".")[0] != "minilm" and all(isinstance(a, ast.Constant) for a in args)

    def is_alias_binding(self, stmt: ast.stmt) -> bool:
        """An import, or names bound to a library's: what the student's code binds (warm = Tokenizer.warm, whose
        getter runs here and now) is module-level code."""
        return id(stmt) not in self.in_class and (isinstance(stmt, (ast.Import, ast.ImportFrom)) or bool(pairs :=
            _alias_pairs(stmt)) and all((self.resolve(v) or "minilm").split(".")[0] != "minilm" for _, v in pairs))

    def _dynamic(self, node: ast.AST) -> str | None:
        """Python's getattr, hasattr, setattr or delattr with a constant name: a use of that attribute."""
        f, args = node.func if isinstance(node, ast.Call) else None, getattr(node, "args", [])
        return f.id if isinstance(f, ast.Name) and f.id in allowed.DYNAMIC and f.id not in self.local and len(
            args) >= 2 and _const(args[1], name=True) else None

    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):  # a method's own self is never another scope's alias of that name
            return None if node.id in self.exempt else self.aliases.get(node.id)
        base, attr = (node.value, node.attr) if isinstance(node, ast.Attribute) else (
            (node.args[0], node.args[1].value) if self._dynamic(node) == "getattr" else (None, None))
        return f"{q}.{attr}" if (q := base is not None and self.resolve(base)) else None

    def findings(self, node: ast.AST) -> list[_Finding]:
        self.exempt, self.local, self.out = frozenset(), frozenset(), []
        self._walk(node)
        return self.out

    def _way(self, node, verb, what, advice, unlisted=False):
        self.out.append(_Finding(getattr(node, "lineno", 1), verb, what, "way", what, advice, not unlisted))

    def _name(self, node, q: str, call: bool, store: bool = False, alias: bool = False, verb: str = "") -> None:
        verb, parts = verb or ("calls" if call else "uses"), q.split(".")
        if store:
            return self._way(node, "assigns to", q, allowed.PATCHING_ADVICE)
        if parts[0] == "minilm":  # the student's own code, and the provided validate module's checks
            head = 4 if parts[1:3] == ["course", "validate"] else 3
            if not _importable_minilm(".".join(parts[:head])):
                return self._way(node, verb, q, allowed.IMPORT_ADVICE)
            for i in range(head, len(parts)):  # the student's own objects: judged by each name
                self._attr(node, parts[i], call and i == len(parts) - 1, ".".join(parts[:i]))
        elif any(p.startswith("_") for p in parts):
            return self._way(node, verb, q, allowed.PRIVATE_ADVICE)
        elif q not in allowed.MODULES:
            value = not (call or alias or id(node) in self.bases)
            self.out.append(_Finding(getattr(node, "lineno", 1), verb, q, "name", q, value=value))
        # As a value (in a tuple, a dict, a default …), what a module reaches, a pickler's call or a
        # jaxtyping shape made later would be out of the scan's sight.
        if call or alias:
            return
        if q in allowed.MODULES or parts[0] == "minilm" and (len(parts) < 3 or parts[1:] == ["course", "validate"]):
            self._way(node, "uses", f"the module {q} as a value", allowed.MODULE_VALUE_ADVICE)
        elif q in allowed.PICKLERS or parts[0] == "jaxtyping":
            advice = allowed.SHAPE_ADVICE if parts[0] == "jaxtyping" else allowed.LOAD_ADVICE
            self._way(node, "uses", f"{q} as a value", advice)

    def _attr(self, node: ast.AST, attr: str, call: bool, base: str) -> None:
        verb, text = "calls" if call else "uses", f"{base}.{attr}"
        if attr.startswith("_") and attr not in allowed.DUNDERS or attr in allowed.NEVER_ATTRIBUTES:
            return self._way(node, verb, text, allowed.PRIVATE_ADVICE, unlisted=True)
        known = attr in allowed.KNOWN_ATTRIBUTES or attr in self.defined
        if any(attr in fam.methods for fam in FAMILIES.values()):
            text = f"Tensor.{attr}"  # a tensor method that is a built-in (x.softmax(-1))
        self.out.append(_Finding(getattr(node, "lineno", 1), verb, text, "method", attr, known=known, value=not call))

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if (base := _from_module(node)) is None:
            return self._way(node, "imports", "." * node.level + (node.module or ""), allowed.IMPORT_ADVICE)
        for q, a in ((f"{base}.{a.name}" if base else a.name, a) for a in node.names):
            if _dunder(_binding(a)):
                self._way(node, "imports", f"{q} as {_binding(a)}", allowed.PRIVATE_ADVICE)
            elif q.endswith("*"):
                self._way(node, "imports", f"* from {base}", allowed.STAR_ADVICE)
            elif q.split(".")[0] not in allowed.IMPORTABLE | {"minilm"}:
                self._way(node, "imports", q, allowed.IMPORT_ADVICE)
            elif q != "__future__.annotations":  # what it binds: judged where it is (a top-level one, where used)
                self._name(node, q, call=False, alias=id(node) not in self.in_class, verb="imports")

    def _walk(self, node: ast.AST, call: bool = False, alias: bool = False) -> None:
        """`alias`: node is the value of an alias binding (F = torch.nn.functional)."""
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self._import(node)
        # Python reads or calls these: __builtins__ = F makes softmax(x) F's, a dataclass execs __annotations__'
        # keys, a class's __setattr__ gets names from library code. A class may define only the plain ones.
        if _dunder(b := _binding(node)) and not (b in allowed.DEF_DUNDERS and id(node) in self.in_class):
            self._way(node, "binds", b, allowed.PRIVATE_ADVICE)
        elif b in self.task_names and id(node) not in self.task_defs:  # gelu := F.gelu in another task's default
            self._way(node, "binds", f"{b}, a task's name, elsewhere than its def", allowed.AMBIGUOUS_ADVICE)
        if isinstance(node, (*_FUNCTIONS, ast.Lambda)):
            outer, body = (self.exempt, self.local), node.body if isinstance(node.body, list) else [node.body]
            self._walk_all(c for c in ast.iter_child_nodes(node) if c not in body)  # the signature and decorators
            self.exempt, self.local = self.selves.get(id(node), outer[0]), outer[1] | _locals(node)
            self._walk_all(body)
            self.exempt, self.local = outer
            return
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and self.is_alias_binding(node):
            self._walk_all(c for c in ast.iter_child_nodes(node) if c is not node.value)  # targets, annotation
            for value in {id(v): v for _, v in _alias_pairs(node)}.values():  # F = G = value: one value
                self._walk(value, alias=True)
            return
        if dynamic := self._dynamic(node):  # getattr(x, "name") is x.name
            ctx = ast.Load() if dynamic in ("getattr", "hasattr") else ast.Store()
            attr = ast.copy_location(ast.Attribute(node.args[0], node.args[1].value, ctx), node)
            self._walk(attr, call and dynamic == "getattr", alias)
            return self._walk_all([*node.args[2:], *node.keywords])
        if isinstance(node, ast.MatchClass):  # case C(a, name=p) reads C's __match_args__ and attribute `name`
            for attr in node.kwd_attrs:
                self._attr(node, attr, False, _short(node.cls, 30))
            if node.patterns and not (isinstance(node.cls, ast.Name) and node.cls.id in allowed.MATCH_SELF_TYPES
                                      and node.cls.id not in self.own):
                self._way(node, "has", f"the class pattern {_short(node)}", allowed.MATCH_ADVICE)
        if isinstance(node, ast.Subscript) and (self.resolve(node.value) or "").startswith("jaxtyping."):
            for part in [node.value, *(node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])]:
                if not (_const(part) and allowed.SHAPE.fullmatch(part.value) or self.resolve(part)):
                    self._way(part, "has", f"the jaxtyping shape {_short(part)}", allowed.SHAPE_ADVICE)
                self._walk(part, alias=part is node.value)  # Float; Tensor, torch.Tensor: types, never modules
            return
        if isinstance(node, ast.Call):
            if (q := self.resolve(node.func)) in allowed.PICKLERS and not _plain_call(node, q):
                self._way(node, "calls", f"{q} with a pickler or options", allowed.LOAD_ADVICE)
            if ast.unparse(node.func) == "type" not in self.own and len(node.args) != 1:  # a class made from a dict
                self._way(node, "calls", "type with three arguments", allowed.DYNAMIC_ADVICE)
            self._walk(node.func, call=True)
            return self._walk_all([*node.args, *node.keywords])
        if isinstance(node, ast.Attribute):
            if (q := self.resolve(node)) is not None:
                return self._name(node, q, call, store=isinstance(node.ctx, (ast.Store, ast.Del)), alias=alias)
            v = node.value  # self: the method's first parameter, never rebound, or super() in such a method
            if not (isinstance(v, ast.Name) and v.id in self.exempt or isinstance(v, ast.Call) and self.exempt
                    and "super" not in self.own and ast.unparse(v) == "super()"):
                if isinstance(node.ctx, ast.Store) and node.attr in allowed.METHODS - allowed.WRITABLE:
                    self._way(node, "assigns to", _short(node), allowed.PATCHING_ADVICE)  # k.transpose = …
                self._attr(node, node.attr, call, _short(node.value, 30))
                return self._walk(node.value)
            if node.attr.startswith("__") and node.attr not in allowed.SELF_ATTRIBUTES or (
                    node.attr in allowed.NEVER_ATTRIBUTES):  # C.method(a generator) makes it self
                self._way(node, "uses", _short(node), allowed.PRIVATE_ADVICE, unlisted=True)
            # self's own attribute: judged where it is set, and by scan_package where other code sets it. Known
            # when the student's code sets it or a module or optimizer has it: self may be a tensor (C.forward(x)).
            known = node.attr in self.defined or node.attr in allowed.SELF_ATTRIBUTES | allowed.COURSE_NAMES
            self.out.append(_Finding(node.lineno, "calls" if call else "uses", _short(node), "self", node.attr,
                                     known=known, value=not call and isinstance(node.ctx, ast.Load)))
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in self.aliases:
                self._name(node, self.aliases[node.id], call, alias=alias)
            elif node.id in self.ambiguous:
                self._way(node, "uses", f"{node.id}, bound to different things", allowed.AMBIGUOUS_ADVICE)
            elif node.id in allowed.REFUSED_BUILTINS and node.id not in self.local:  # exec, getattr(x, name) …
                advice = allowed.SETATTR_ADVICE if node.id == "setattr" else allowed.DYNAMIC_ADVICE
                if call and node.id in allowed.DYNAMIC:  # with a constant name, it was read as x.name above
                    return self._way(node, "calls", f"{node.id} with a computed name", advice)
                self._way(node, "calls" if call else "uses", node.id, advice, unlisted=True)
            return
        self._walk_all(ast.iter_child_nodes(node))

    def _walk_all(self, nodes) -> None:
        for node in nodes:
            self._walk(node)


def _judge(task: tasks.Task, f: _Finding) -> tuple[str, str] | None:
    listed = (f.name in allowed.ALLOWED or f.name in task.allowed) if f.kind == "name" else f.known
    what = f.what if listed else f"{f.what}, which is not on Task {task.id}'s list of allowed operations ({LIST_FILE})"
    if f.kind == "way":
        return what, f.advice
    advice = next((a for family, a in task.forbidden if _forbidden(FAMILIES[family], f)), None)  # listed or not
    return (what, advice) if advice is not None else None if listed else (what, allowed.LIST_ADVICE)


def _forbidden(family: Family, f: _Finding) -> bool:
    """A library name or an attribute of the family; on self, a tensor's built-in method (self.logsumexp)."""
    if f.kind != "method":
        return f.name in family.methods if f.kind == "self" else _family_matches(family, f.name)
    # a multi-word built-in's words (.native_layer_norm), not a one-word one's (.linear_q may be the student's)
    return (f.name in family.methods or f.name in family.names
            or any(" " in _words(n).strip() and _words(n) in _words(f.name) for n in family.names))


def scan(source: str | bytes, filename: str) -> dict[str, list[Violation]]:
    """Each task of the exercise module `filename` → its violations in `source`, in line order. A
    syntax error is a violation, never an exception."""
    return _scan({Path(filename).stem: source}, lambda module: filename, reach=False)


def scan_package(sources: dict[str, str | bytes], folder: str = "minilm") -> dict[str, list[Violation]]:
    """scan() of every module in `sources` (name → source), and what each task reaches through other
    tasks' code it names or whose attributes it uses (gelu calling sinusoidal_positions for its F.gelu,
    kv_cache.f set by KVCache). The code a task names is judged by its rules in full, what the other task's
    own rules refuse included: one task's refused built-in never does another's work for free."""
    return _scan(sources, lambda module: f"{folder}/{module}.py")


# Provided names other modules may import (ClassicConfig) live in the student's file too: a task that
# uses one is judged by that code as well, under a pseudo id "module:name".
_TASK_OF = {(t.module, n): t.id for t in tasks.TASKS for n in t.names}
_TASK_OF |= {(m, n): f"{m}:{n}" for n, m in tasks.EXPORTS.items() if (m, n) not in _TASK_OF}
_top = "{0}:{0}.py's top-level code".format  # a module's code that runs on import, a unit of its own too


@dataclass
class _Unit:
    """A task's code, or provided code other modules import: its ("your …", finding)s before any rule judges
    them, the other tasks (ids, any module) it names and the attribute names it defines."""

    module: str
    found: list = field(default_factory=list)
    names: set = field(default_factory=set)
    attrs: set = field(default_factory=set)


def _scan(sources: dict[str, str | bytes], file_of, reach: bool = True) -> dict[str, list[Violation]]:
    trees, problems, units = {}, {}, {}
    for m, source in sources.items():
        try:
            trees[m] = ast.parse(source, file_of(m))
        except (SyntaxError, ValueError) as e:
            what = f"a syntax error: {getattr(e, 'msg', None) or e}"
            problems[m] = _Finding(getattr(e, "lineno", None) or 1, "has", what, "way", what, allowed.SYNTAX_ADVICE)
    defined = _defined_attrs(list(trees.values()))  # attribute names the student's code defines, in any module
    for m, tree in trees.items():
        try:
            units |= _scan_tree(tree, m, defined) if m in tasks.EXERCISE_MODULES else {}
        except RecursionError:
            problems[m] = _Finding(1, "has", allowed.NESTING, "way", allowed.NESTING, allowed.NESTING_ADVICE)
    units |= {t.id: _Unit(m, [("your module", f)]) for m, f in problems.items() for t in tasks.TASKS if t.module == m}
    # A tensor's method's name set on an object may be a plant on torch.Tensor (type(x).training = …, or
    # self.exp = … in a method called with torch.Tensor as self): its readers are followed to it like any other's.
    stored = _defined_attrs(list(trees.values()), stored_only=True)
    named = {u: set(unit.names) for u, unit in units.items()}  # the code each unit names, so runs
    for u, unit in units.items():  # an attribute of the student's own: the code that defines it
        used = {f.name for _, f in unit.found if f.kind in ("method", "self") and (f.name not in allowed.METHODS
                                                                                  or f.name in stored)}
        unit.names |= {o for o, other in units.items() if o != u and used & other.attrs}
    result, graph = {}, {u: unit.names for u, unit in units.items()}
    for task in (t for t in tasks.TASKS if t.module in sources):
        others = sorted(_reach(list(graph[task.id]), graph) - {task.id}, key=lambda o: (":" not in o, o))
        seen, runs = {}, _reach(list(named[task.id]), named)
        for other in [task.id, *others] if reach else [task.id]:
            unit = units.get(other, _Unit(""))
            via = f"your {other.split(':')[1]}" if ":" in other else f"your {tasks.get(other).function} (Task {other})"
            # What a task runs is judged by its rules, what the other's own rules refuse too (a sacrificed task
            # launders nothing); of code that only sets an attribute's name it uses, what the other's rules accept
            # (that code runs in the other task's process: the worker forks one for each), and of a module's top-level
            # code, nothing (it runs where the module is imported, which names it).
            found = unit.found if other == task.id else [(f"your {task.function}", replace(
                f, verb="reaches", what=f"{f.what} through {via}")) for _, f in unit.found
                if other in runs or other != _top(unit.module) and (":" in other or not _judge(tasks.get(other), f))]
            for where, f in found:
                if judged := _judge(task, f):
                    v = Violation(task.id, file_of(unit.module), f.line, *judged, f.verb, where)
                    seen.setdefault((v.file, v.line, v.what), v)
        result[task.id] = sorted(seen.values(), key=lambda v: (v.verb == "reaches", v.file, v.line))
    return result


def _tasks_named(mod: _Module, nodes: list[ast.AST], owner: dict[str, str]) -> set[str]:
    """The ids of the tasks, of any module, whose function or class `nodes` name or import (in a class body,
    `from minilm.generation import next_token_probs as f` binds no alias: C.f is next_token_probs)."""
    names = [(mod.resolve(n) or "").split(".") for root in nodes for n in ast.walk(root)
             if isinstance(n, (ast.Name, ast.Attribute))] + _imports(nodes)
    return {owner[n] for n in _named(nodes, owner)} | {
        _TASK_OF[tuple(p[1:3])] for p in names if p[0] == "minilm" and tuple(p[1:3]) in _TASK_OF}


def _named(nodes: list[ast.AST], names) -> list[str]:
    return [n.id for root in nodes for n in ast.walk(root) if isinstance(n, ast.Name) and n.id in names]


def _reach(todo, graph: dict, seen: frozenset = frozenset()) -> frozenset[str]:
    """Every name `todo` leads to in `graph` (name → names)."""
    todo = set(todo) - seen
    return _reach({m for n in todo for m in graph.get(n, ())}, graph, seen | todo) if todo else seen


def _scan_tree(tree: ast.Module, module: str, defined: set[str]) -> dict[str, _Unit]:
    """The units of an exercise module: its tasks, and the provided names other modules import."""
    ids = [t.id for t in tasks.TASKS if t.module == module]
    owner = {name: t.id for t in tasks.TASKS if t.module == module for name in t.names}
    mod, parts, helpers, rest, ways = _Module(tree, set(owner), defined), [], {}, [], []
    for stmt in tree.body:  # parts: ("your …", its code, the units it costs)
        mine = [n for n in _binds([stmt]) if n in owner]
        # What a def or a class runs on import runs for every task (a default fills a shelf …)
        rest += _on_import(stmt, mod) if isinstance(stmt, _SCOPES) else []
        parts += [(f"your {name}", [stmt], [owner[name]]) for name in mine]
        if not mine and isinstance(stmt, _SCOPES):
            helpers.setdefault(stmt.name, []).append(stmt)
        elif not mine and mod.is_alias_binding(stmt):  # what an alias names is judged where it is used
            ways += [("your module", f) for f in mod.findings(stmt)
                     if f.kind == "way" or f.verb == "imports" and f.name not in _ANY_TASK_MAY_USE]
        elif not mine:
            rest.append(stmt)
    # A helper costs the tasks whose code uses it; one that module-level code or no task uses, every task. Provided
    # code other modules import (ClassicConfig) is a unit of its own, with its helpers.
    calls, used = {h: _named(helpers[h], helpers) for h in helpers}, collections.defaultdict(set)
    for _, code, [tid] in parts:
        used[tid] |= _reach(_named(code, helpers), calls) - _reach(_named(rest, helpers), calls)
    # A provided name (a def, a class or a value: NS_COEFFICIENTS) is judged by the module-level code too.
    provided = {pid: _reach([n, *_named(rest, helpers)], calls) for (m, n), pid in _TASK_OF.items()
                if m == module and ":" in pid} | {_top(module): _reach(_named(rest, helpers), calls)}
    parts += [(f"your helper {h}", helpers[h], ([t for t in ids if h in used[t]] or ids)
               + [pid for pid, code in provided.items() if h in code]) for h in helpers]
    units = {u: _Unit(module, list(ways)) for u in ids + list(provided)}
    for where, code, payers in parts + [("your module", rest, ids + list(provided))]:
        found = [(where, f) for s in code for f in mod.findings(s)]
        named, attrs = _tasks_named(mod, code, owner), _defined_attrs(code)
        for u in payers:
            units[u].found += found
            units[u].names |= named
            units[u].attrs |= attrs
    # Importing an exercise module runs its top-level code: in the process of every task of this module. And a
    # task's check may build the module's provided objects (ClassicBlock gets a ClassicConfig): the task runs them.
    imported = {p for parts in _imports([tree]) for p in parts[1:3] if p in tasks.EXERCISE_MODULES}
    for u, unit in units.items():
        unit.names |= {_top(m) for m in imported - {module}} | (set(provided) - {_top(module)} if u in ids else set())
    # A family's built-in as a value (a default, a dict entry, a decorator's argument) may be filed anywhere
    # and used by any task of the module: it costs every task whose families have it.
    values = [(u, where, f) for u, unit in units.items() for where, f in unit.found if f.value]
    for t in map(tasks.get, ids):
        units[t.id].found.extend((where, f) for u, where, f in values if u != t.id
                                 and any(_forbidden(FAMILIES[family], f) for family, _ in t.forbidden))
    return units


@functools.lru_cache(maxsize=8)
def _scan_files(stamps: tuple[tuple[str, str, int, int], ...], folder: str) -> dict[str, list[Violation]]:
    return scan_package({module: Path(path).read_bytes() for module, path, _mtime, _size in stamps}, folder)


def violations_for(task_id: str) -> list[Violation]:
    """Task `task_id`'s violations in the current implementation, minilm/ or (MINILM_IMPL=solutions) solutions/;
    none when its file is missing: importing it fails on its own."""
    import minilm  # cheap: never imports torch or any exercise module

    task, folder = tasks.get(task_id), minilm.implementation()
    paths = {m: tasks.ROOT / folder / f"{m}.py" for m in tasks.EXERCISE_MODULES}
    stamps = tuple((m, str(p), p.stat().st_mtime_ns, p.stat().st_size) for m, p in paths.items() if p.is_file())
    return list(_scan_files(stamps, folder).get(task.id, [])) if paths[task.module].is_file() else []
