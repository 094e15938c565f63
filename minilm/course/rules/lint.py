"""The lint that keeps the recorder honest (provided: not an exercise).

The from-scratch rule is judged by what runs (recorder.py). This reads the source only for what could
switch that recording off, replace what it watches, or run code it cannot see: imports beyond the
course's list, Python's hooks and frames, code from strings, private and dunder names, names looked up
by a computed string, and changes to other modules' functions. It refuses what it does not know, reads
each file once (linear in its size), and never runs it.

    python -m minilm.course.rules.lint < sources.json    # {"attention": "…source…"} → {"6.1": ["…"], …}
"""

from __future__ import annotations

import ast
import builtins
import json
import sys
from dataclasses import dataclass

from minilm.course import tasks
from minilm.course.rules.families import (
    ALLOWED_DUNDERS,
    ESCAPE_ATTRIBUTES,
    IMPORTABLE,
    NARROW,
    PYTHON_BUILTINS,
)

_REFUSED_BUILTINS = frozenset(dir(builtins)) - PYTHON_BUILTINS
_LOOKUPS = ("getattr", "setattr", "delattr", "hasattr")
# The dunder methods a class may define: Python calls them for the class's own operations. The others are
# hooks into how Python finds attributes, makes classes or pickles objects.
DEF_DUNDERS = frozenset("""
    __init__ __post_init__ __call__ __len__ __repr__ __str__ __format__ __iter__ __next__ __getitem__ __setitem__
    __contains__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __enter__ __exit__ __add__ __sub__
    __mul__ __truediv__ __matmul__ __neg__ __radd__ __rmul__
""".split())
# Dunder names a module or class body may bind.
STORE_DUNDERS = frozenset({"__all__", "__slots__"})
WHY = "it could switch off or get around the from-scratch check"
# A private name is the student's own where the module defines it (self._cache = …, def _helper), except
# these: torch's and Python's private modules and hooks, which a module may not claim by defining the name.
LIBRARY_PRIVATE = frozenset("""
    _C _VF _ops _dynamo _inductor _utils _jit_internal _sys _os _thread _getframe _subclasses _prims _refs _decomp
    _functorch _higher_order_ops _library _tensor _python_dispatch _mode_utils _guards _lazy _export _logging
    _compile _classes _namedtensor_internals _vmap_internals _linalg_utils _lowrank _weights_only_unpickler
    _backward_hooks _post_accumulate_grad_hooks _forward_hooks _forward_pre_hooks _backward_pre_hooks
""".split())


@dataclass(frozen=True)
class Finding:
    module: str  # "attention"
    line: int
    what: str  # "uses sys", "calls exec"

    def message(self, task_id: str, folder: str = "minilm") -> str:
        return (f"Task {task_id}: {folder}/{self.module}.py:{self.line} {self.what}, which no exercise may: {WHY}; "
                "write the code itself with the operations the task allows")


def _private(name: str, own: frozenset = frozenset()) -> bool:
    """A private or dunder name that is not the module's own (nor the constructor's)."""
    return name.startswith("_") and name not in ALLOWED_DUNDERS and (
        name not in own or name in LIBRARY_PRIVATE or _dunder(name))


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _root(node: ast.AST) -> str | None:
    """The name an attribute chain starts from: torch for torch.nn.functional.softmax; None past a call."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imported(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str, str]]:
    """(bound name, module, imported name or "") for each name an import binds; module "minilm.…" for relative."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0], "")
                for a in node.names]
    base = ("minilm" + (f".{node.module}" if node.module else "")) if node.level == 1 else (
        node.module or "" if node.level == 0 else "..")
    return [(a.asname or a.name, base, a.name) for a in node.names]


def _import_problem(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.level > 1:
        return "imports from outside the minilm package"
    for _, module, name in _imported(node):
        if name == "*":
            return f"imports * from {module}"
        if module == "minilm" or module.startswith("minilm."):
            parts = module.split(".")
            if module == "minilm.course.validate" or (len(parts) == 2 and parts[1] in tasks.EXERCISE_MODULES):
                continue
            if module == "minilm" and name in tasks.EXERCISE_MODULES:
                continue
            return f"imports {module}{'.' + name if name else ''}"
        if module not in IMPORTABLE:
            return f"imports {module}"
        if name and (_private(name) or name in ESCAPE_ATTRIBUTES or (module in NARROW and name not in NARROW[module])):
            return f"imports {name} from {module}"
    return None


def _outside_functions(body: list[ast.stmt]):
    """The statements of a module or class body, those of the classes and compound statements in it, but none
    inside a function."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                yield from _outside_functions([s for s in inner if isinstance(s, (ast.stmt, ast.excepthandler))])


def _rebound(tree: ast.Module, nodes: list[ast.AST]) -> list[ast.AST]:
    """Where the file binds a name the rule watches to itself, which keeps it watched: getattr and kin bound at all
    (`getattr = getattr`; no honest code names a variable getattr), and, outside functions, a refused builtin
    bound to an expression that reads it (`eval = eval`). In a function the same name bound anywhere in it is a
    local: `input = input * 2` reads the argument."""
    found = [n for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id in _LOOKUPS]
    for n in _outside_functions(tree.body):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and n.value is not None:
            targets = [t for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                       for t in ast.walk(t) if isinstance(t, ast.Name)]
            uses = {v.id for v in ast.walk(n.value) if isinstance(v, ast.Name) and isinstance(v.ctx, ast.Load)}
            found += [t for t in targets if t.id in uses and t.id in _REFUSED_BUILTINS]
    return found


def lint(source: str | bytes, module: str) -> list[Finding]:
    """What in one exercise module could get around the recording, in line order."""
    try:
        tree = ast.parse(source, f"minilm/{module}.py")
    except SyntaxError as e:
        return [Finding(module, e.lineno or 1, f"does not parse ({e.msg})")]
    except (RecursionError, MemoryError, ValueError) as e:
        return [Finding(module, 1, f"could not be read ({type(e).__name__}: nested too deeply or too large)")]
    nodes = list(ast.walk(tree))
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    bound |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    # a private attribute is the file's own where it stores it on self or cls (self._cache = …), not on another
    # object: `leaf._backward_hooks = {}` set a tensor's hook table (red team 10)
    stored = [n for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]
    own = frozenset({n.attr for n in stored if not n.attr.startswith("_") or (
        isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))} | bound)
    rebound = _rebound(tree, nodes)
    bound -= set(_LOOKUPS) | {n.id if isinstance(n, ast.Name) else "" for n in rebound}
    libraries, narrow, aliases = set(), {}, {}
    for n in nodes:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for name, mod, what in _imported(n):
                bound.add(name)
                if not mod.startswith("minilm"):
                    libraries.add(name)
                if mod in NARROW and not what:
                    narrow[name] = mod
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            root = _root(n.value)
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if root and isinstance(t, ast.Name):
                    aliases.setdefault(root, set()).add(t.id)
    todo = list(libraries)  # names bound to a library module or one of its objects, through any alias
    while todo:
        for alias in aliases.pop(todo.pop(), ()):
            if alias not in libraries:
                libraries.add(alias)
                todo.append(alias)
    found = []

    def refuse(node: ast.AST, what: str) -> None:
        found.append(Finding(module, getattr(node, "lineno", 1), what))

    for n in rebound:
        refuse(n, f"binds the name {n.id}, which the rule watches: give your variable another name")
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    read_from = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # the x of each x.attr
    for n in [*nodes, *_string_annotations(nodes)]:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            problem = _import_problem(n)
            if problem:
                refuse(n, problem)
        elif isinstance(n, ast.Name):
            problem = _name_problem(n, bound, narrow, id(n) in called, id(n) in read_from)
            if problem:
                refuse(n, problem)
        elif isinstance(n, ast.Attribute):
            _attribute(n, n.attr, own, libraries, narrow, refuse)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _dunder(n.name) and n.name not in DEF_DUNDERS:
            refuse(n, f"defines {n.name}, a hook into how Python runs code")
        elif isinstance(n, ast.MatchClass):
            for attr in n.kwd_attrs:
                _attribute(n, attr, own, libraries, narrow, refuse, store=False)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _LOOKUPS and (
                n.func.id not in bound):
            name = n.args[1] if len(n.args) > 1 else None
            target = _root(n.args[0]) if n.args else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
                # setattr(model, name, child) replaces the student's own module's child; a lookup by a computed
                # name could reach anything
                if n.func.id in ("getattr", "hasattr") or target is None or target in libraries:
                    refuse(n, f"calls {n.func.id} with a computed name")
            else:
                fake = ast.Attribute(value=n.args[0], attr=name.value, lineno=n.lineno,
                                     ctx=ast.Load() if n.func.id in ("getattr", "hasattr") else ast.Store())
                _attribute(fake, name.value, own, libraries, narrow, refuse)
    return sorted(found, key=lambda f: f.line)


def _name_problem(n: ast.Name, bound: set, narrow: dict, called: bool, read_from: bool) -> str | None:
    """What the lint refuses in a bare name: Python's refused builtins, a narrow module used as a value (`o = os`
    would take os past the one attribute it may be used for), getattr and kin as values, dunders."""
    load = isinstance(n.ctx, ast.Load)
    if load and n.id in _REFUSED_BUILTINS and n.id not in bound:
        return f"uses Python's {n.id}"
    if load and n.id in narrow and not read_from:
        return f"uses {narrow[n.id]} itself, where only {', '.join(sorted(NARROW[narrow[n.id]]))} of it may be used"
    if load and n.id in _LOOKUPS and n.id not in bound and not called:
        return f"uses {n.id} as a value: call it by name, with the attribute's name written out"
    if _dunder(n.id) and n.id not in ALLOWED_DUNDERS and not (isinstance(n.ctx, ast.Store) and n.id in STORE_DUNDERS):
        return f"uses {n.id}"
    return None


def _string_annotations(nodes: list[ast.AST]) -> list[ast.AST]:
    """The code of annotations written as strings (x: "torch.Tensor"), which typing can evaluate: each a parsed
    expression, at its string's line."""
    found = []
    annotations = [a for n in nodes for a in (
        [n.annotation] if isinstance(n, (ast.arg, ast.AnnAssign)) else
        [n.returns] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else []) if a is not None]
    for c in annotations:  # a whole annotation written as a string; not Literal["eval"] nor a jaxtyping shape
        if isinstance(c, ast.Constant) and isinstance(c.value, str) and len(c.value) < 1000:
            try:
                expr = ast.parse(c.value.strip(), mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for e in ast.walk(expr):
                e.lineno = c.lineno
                found.append(e)
    return found


def _attribute(node, attr: str, own: frozenset, libraries: set, narrow: dict, refuse,
               store: bool | None = None) -> None:
    store = not isinstance(node.ctx, ast.Load) if store is None else store
    root = _root(node.value) if isinstance(node, ast.Attribute) else None
    if attr.startswith("_") and attr not in ALLOWED_DUNDERS and root in libraries:
        refuse(node, f"uses the private name {attr} of a library")
    elif _private(attr, own):
        refuse(node, f"uses the private name {attr}")
    elif attr in ESCAPE_ATTRIBUTES:
        refuse(node, f"uses .{attr}")
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in narrow and (
            attr not in NARROW[narrow[node.value.id]]):
        refuse(node, f"uses {narrow[node.value.id]}.{attr}")
    elif store and (root is None or root in libraries):
        refuse(node, f"changes {ast.unparse(node)[:60]}, which is not yours")


def _importers(sources: dict[str, str | bytes]) -> dict[str, set[str]]:
    """Each module → the modules that import it, directly or not (a finding costs their tasks too)."""
    imports: dict[str, set[str]] = {}
    for module, source in sources.items():
        try:
            tree = ast.parse(source)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            continue
        for n in ast.walk(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for _, mod, name in _imported(n):
                    target = mod.split(".")[1] if mod.startswith("minilm.") else name if mod == "minilm" else None
                    if target in sources and target != module:
                        imports.setdefault(target, set()).add(module)
    closure = {}
    for module in sources:
        seen, todo = set(), [module]
        while todo:
            for m in imports.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        closure[module] = seen
    return closure


def lint_package(sources: dict[str, str | bytes], folder: str = "minilm") -> dict[str, list[str]]:
    """Task id → its lint messages: a finding costs the tasks of its module and of every module importing it."""
    importers = _importers(sources)
    out: dict[str, list[str]] = {}
    for module, source in sources.items():
        for finding in lint(source, module)[:3]:
            for m in {module} | importers.get(module, set()):
                for t in tasks.TASKS:
                    if t.module == m and len(out.setdefault(t.id, [])) < 3:
                        out[t.id].append(finding.message(t.id, folder))
    return out


def parse_problem(source: str, module: str) -> str | None:
    """Why a module's source is not Python (a syntax error, or nesting the parser cannot hold), or None."""
    try:
        ast.parse(source, f"minilm/{module}.py")
    except SyntaxError as e:
        return f"minilm/{module}.py:{e.lineno}: syntax error: {str(e.msg)[:120]}"
    except (RecursionError, MemoryError, ValueError) as e:
        return f"minilm/{module}.py cannot be parsed ({type(e).__name__}: nested too deeply, too large or null bytes)"
    return None


def main() -> int:
    """The grader's lint, in a process of its own with limits on its time and memory: {"unparsable": {module: why},
    "tasks": {task id: [message]}} for the modules read as JSON from standard input."""
    sources = json.load(sys.stdin)
    if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items()):
        print(json.dumps({"error": "expected a JSON object of module name to source"}))
        return 2
    sources = {k: v for k, v in sources.items() if k in tasks.EXERCISE_MODULES}
    unparsable = {m: why for m, s in sources.items() if (why := parse_problem(s, m))}
    found = lint_package({m: s for m, s in sources.items() if m not in unparsable})
    print(json.dumps({"unparsable": unparsable, "tasks": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
