"""The exercises (provided): for each task, what it is run on, how it is judged and what its mistakes mean.

A task's `Spec`, in the module of its notebook group (basics.py for notebooks 1–4, …), says

    collect(m, case)      call the task's code `m.<name>` on one case; return plain data
                          (a flat dict of str → tensor | int | float | bool | str | list of those)
    cases()               the visible cases: the notebook's inputs, deterministic
    outputs               how a check's message names each output ("the logits")
    mistakes              label → advice: when an output matches a catalogued mistake's, say this
    invariant(got, case)  optional: what needs no reference (initialization statistics, windows,
                          state_dict names against the contract); a `Problem` or None
    free                  outputs judged by the invariant only (they may differ from the reference's)
    atol, rtol            the tolerance (widened for bfloat16 and float16 outputs, see `tolerance`)
    on_error, explain     optional: the mistake an error names, and how an output differs (check cells only)
    properties            what correct code does on any input, tested on the student's code alone (no
                          reference): a check names the first one broken, before saying values differ,
                          and tests/test_properties.py runs the same ones (check cells and tests only)
    passed                the check's one-line success message

Two harnesses run the same spec. A check cell (minilm/course/checks.py) collects the student's
outputs on the visible cases and compares them with the reference's, recorded from the same
`collect` in minilm/course/expected.pt (`minilm expected`). The grader's sandboxed worker
(minilm/course/sandboxed/worker.py) collects on the visible cases and the instructor's other ones,
and the trusted judge compares with the reference's `collect` on the same cases. Nothing here
decides a point: the worker can read and patch this package, and only the judge's own copy compares.
"""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

# The notebook groups' modules: importing one registers its tasks' specs.
GROUPS = ("basics", "rope_attention", "model", "training", "generation", "quantization", "classic", "modern", "inside",
          "datalimit")


class Problem(str):
    """An invariant's finding: the message (the str itself), the catalogued mistake it names, and a
    detail only the check cell shows. The grader's feedback repeats the message alone, so the
    message holds nothing a submission chose but numbers (see `shown`): names a submission made
    up (state_dict keys, a type's name) could carry out what it saw of the grader's inputs."""

    mistake: str | None
    detail: str

    def __new__(cls, message: str, mistake: str | None = None, detail: str = ""):
        self = super().__new__(cls, message)
        self.mistake, self.detail = mistake, detail
        return self


def shown(value, depth: int = 0) -> str:
    """A submitted value for a message: numbers, bools and short lists of them; anything else is "…"."""
    if type(value) in (int, float, bool):
        return repr(value)
    if type(value) in (list, tuple) and len(value) <= 16 and depth < 3:
        return "[" + ", ".join(shown(v, depth + 1) for v in value) + "]"
    return "…"


_DTYPES = {str(d): str(d).replace("torch.", "") for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def dtype_shown(value) -> str:
    """A submitted dtype's name ("float32") when it is one of torch's, else "…" (see `shown`)."""
    return _DTYPES.get(value, "…") if type(value) is str else "…"


def count(value) -> str:
    """A submitted count, with thousands separators."""
    return f"{value:,}" if type(value) is int else shown(value)


@dataclass(frozen=True)
class Property:
    """What correct code does on any input, in the student's words, seen on the student's code alone.

    says     the property, a sentence: "each row of softmax sums to 1"
    probe    probe(m) runs the task's code `m.<name>` on inputs of its own and returns None when the
             property holds, else what it saw, a sentence naming the input and the numbers ("on x (3, 5),
             row 0 sums to 1.37"); an error the code raises counts as the property broken
    example  a few lines the student can run to see it (hint rung 2)
    idea     the idea of the fix in words, no code (hint rung 3)

    A probe never computes the task's result: it compares the student's outputs with each other
    (a transposed input against its copy, a shifted input against the unshifted one) or with a
    number the contract fixes (a sum of 1, position 0 unrotated)."""

    says: str
    probe: Callable[[object], str | None]
    example: str = ""
    idea: str = ""
    first: bool = False  # asked before the others: an input changed in place makes every later probe's input wrong


def differs(got, want, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """How two of the student's outputs differ that should be equal, in a few words; None when equal."""
    if type(got) is not torch.Tensor or type(want) is not torch.Tensor:
        return f"got {type(got).__name__} and {type(want).__name__}, expected two tensors"
    if got.shape != want.shape:
        return f"shapes {tuple(got.shape)} and {tuple(want.shape)}"
    g, w = got.detach().double(), want.detach().double()
    if torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
        return None
    gap = (g - w).abs().nan_to_num(float("inf"))
    where = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape)) if gap.ndim else ()
    return f"they differ by up to {gap.max().item():.3g} (at index {where})"


def few_values(got, names: str) -> str:
    """ "your silu(1), silu(−1) are 0.268941, −0.731059" ("" for a non-tensor or many values): a message
    about known values then says what the student's code gave, not only that it differs."""
    if type(got) is not torch.Tensor or not 0 < got.numel() <= 6:
        return ""
    values = (f"{v:.6g}".replace("-", "−") for v in got.detach().double().flatten().tolist())
    return f"your {names} are " + ", ".join(values)


def off_points(f: Callable[[float], float], want: dict, setting: str, at: str) -> str | None:
    """Where f misses the contract's values (a schedule at its boundaries): "with <setting>, <at> 5: 0.9,
    expected 1; …", or None when it hits every one."""
    got = {}
    for x in want:
        try:
            value = f(x)
        except Exception as e:  # noqa: BLE001 - raising at a boundary (warmup 0: 0 / 0) is missing its value
            return f"with {setting}, {at} {x:g}: your code raised {one_line(e)}"
        if not isinstance(value, (int, float)):  # a 0-dim tensor would become group["lr"] and Step.lr
            return (f"with {setting}, {at} {x:g}: it returned a {type(value).__name__}, expected a Python float "
                    "(math.cos, not torch.cos)")
        got[x] = float(value)
    wrong = [f"{at} {x:g}: {got[x]:.6g}, expected {v:g}" for x, v in want.items() if abs(got[x] - v) > 1e-9]
    return f"with {setting}, " + "; ".join(wrong[:3]) if wrong else None


def rises_then_falls(f: Callable[[float], float], points: list, peak: float, setting: str, at: str) -> str | None:
    """Where a schedule f breaks the shape its contract gives it over `points` (in increasing order): it never
    falls up to `peak` (the end of the warmup) and never rises after it. "with <setting>, the rate falls from
    0.9 at <at> 3 to 0.8 at <at> 4, inside the warmup", or None when it keeps that shape."""
    values = []
    for x in points:
        try:
            values.append(float(f(x)))
        except Exception as e:  # noqa: BLE001 - raising on an input the contract allows is breaking the shape
            return f"with {setting}, {at} {x:g}: your code raised {one_line(e)}"
    for (x0, v0), (x1, v1) in zip(zip(points, values), zip(points[1:], values[1:])):
        if x1 <= peak and v1 < v0 - 1e-12:
            return f"with {setting}, the rate falls from {v0:.6g} at {at} {x0:g} to {v1:.6g} at {at} {x1:g}, " \
                   "inside the warmup"
        if x0 >= peak and v1 > v0 + 1e-12:
            return f"with {setting}, the rate rises from {v0:.6g} at {at} {x0:g} to {v1:.6g} at {at} {x1:g}, " \
                   "after the warmup"
    return None


def at_edge(what: str, edge: Callable[[], object], want, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """The student's output on a boundary input the contract allows (top_k beyond the vocabulary, an all-zero
    matrix, no gradient at all) against what the contract fixes there: a number or tensor, or a callable giving
    the student's own output on the input the edge must equal (the same logits without top_k). None when they
    agree, else "<what>: …" naming the error the edge raised, its NaN or inf, or how the two differ."""
    try:
        got = edge()
    except Exception as e:  # noqa: BLE001 - raising on an input the contract allows is missing its value
        return f"{what}: your code raised {one_line(e)}"
    expected = want() if callable(want) else want
    got, expected = (torch.tensor(float(v), dtype=torch.float64) if type(v) in (int, float) else v
                     for v in (got, expected))
    if type(got) is torch.Tensor and got.is_floating_point() and type(expected) is torch.Tensor:
        bad = int((~torch.isfinite(got.detach())).sum())
        if bad and bool(torch.isfinite(expected).all()):
            return f"{what}: {bad} of {got.numel()} values are NaN or inf"
    d = differs(got, expected, atol, rtol)
    return d and f"{what}: {d}"


def _same(a, b) -> bool:
    """Whether two arguments hold the same values: tensors by torch.equal, dicts, lists and tuples item by item."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if type(a) in (dict, list, tuple) or type(b) in (dict, list, tuple):
        if type(a) is not type(b) or len(a) != len(b):
            return False
        if type(a) is dict:
            return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
        return all(_same(x, y) for x, y in zip(a, b))
    return a == b


def keeps_inputs(name: str, make_args: Callable[[], tuple], what: str) -> Property:
    """The property that `name` (a function or class of the task) leaves its arguments as they were: code that
    scales or masks its input in place, or adds to a dict or list it was given, changes the caller's objects,
    and every later use of them."""
    def probe(m):
        args = make_args()
        before = copy.deepcopy(args)
        getattr(m, name)(*args)
        changed = [i for i, (a, b) in enumerate(zip(args, before)) if not _same(a, b)]
        return changed and f"{what}: argument {changed[0] + 1} changed during the call" or None
    return Property(f"{name} leaves its arguments as they were", probe, first=True,
                    idea="compute into new tensors (x = x / c, torch.where, masked_fill without the underscore) and "
                         "copy a dict or list before adding to it (dict(vocab)); an in-place operation on an argument "
                         "(x /= c, masked_fill_, mul_, vocab[k] = …) changes the caller's object")


def one_line(e: Exception) -> str:
    """An exception as the one line a property's message quotes: 'TypeError: …', at most 200 characters, and
    the student's line it came from, as a check's own error messages give it."""
    from minilm.course.checks import _one_line, raised_at  # at call time: checks imports this module

    where = raised_at(e)
    return _one_line(e) + (f" ({where})" if where else "")


def optimizer_edges(make: Callable[[object, list], torch.optim.Optimizer], what: str) -> tuple[Property, Property]:
    """The properties every optimizer task shares at the contract's edges; make(m, params) builds the task's
    optimizer over `params` ((3, 2) matrices):
    - a parameter whose .grad is None (frozen, or out of the loss's reach) is skipped and left as it is;
    - step(closure) calls the closure with gradients on, so the closure may run backward, and returns its loss."""
    def skips(m):
        a, b, c = nn.Parameter(torch.ones(3, 2)), nn.Parameter(torch.ones(3, 2)), nn.Parameter(torch.ones(3, 2))
        opt = make(m, [a, b, c])
        a.grad = torch.tensor([[1.0, -2.0], [0.5, 3.0], [-1.0, 2.0]])
        c.grad = a.grad.clone()
        found = at_edge(f"{what} over three (3, 2) weights of ones, the second's .grad None: the second after a step "
                        "and ones", lambda: (opt.step(), b.detach().clone())[1], torch.ones(3, 2))
        if found:
            return found
        return None if not torch.equal(c.detach(), torch.ones(3, 2)) else (
            f"{what} over three (3, 2) weights of ones, the second's .grad None: the third, which has a gradient, "
            "did not move (the loop stopped at the parameter without one)")

    def closure(m):
        w = nn.Parameter(torch.ones(3, 2))
        opt = make(m, [w])
        c = torch.tensor([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.0]])

        def loss_of():
            opt.zero_grad()
            loss = (w * c).sum()  # 1.5 at w = ones
            loss.backward()
            return loss

        try:
            got = opt.step(loss_of)
        except Exception as e:  # noqa: BLE001 - raising on a closure is breaking the property
            return f"{what}.step(closure), with a closure that runs backward: your code raised {one_line(e)}"
        if type(got) is not torch.Tensor:
            return f"{what}.step(closure) returned {shown(got) if got is None else type(got).__name__}, expected " \
                   "the closure's loss 1.5"
        d = differs(got.detach().double().reshape(()), torch.tensor(1.5, dtype=torch.float64))
        return d and f"{what}.step(closure): the value returned and the closure's loss 1.5: {d}"

    return (Property(f"{what}.step() leaves a parameter whose .grad is None as it is", skips,
                     example="a, b = torch.nn.Parameter(torch.ones(3, 2)), torch.nn.Parameter(torch.ones(3, 2))\n"
                             f"opt = minilm.{what}([a, b])\na.grad = torch.randn(3, 2)\nopt.step()\n"
                             "print(b)  # still ones",
                     idea="skip every parameter whose .grad is None (continue, not break: the ones after it still "
                          "step) before touching its state or its weight: a frozen weight has no gradient"),
            Property(f"{what}.step(closure) runs the closure with gradients on and returns its loss", closure,
                     example=f"w = torch.nn.Parameter(torch.ones(3, 2))\nopt = minilm.{what}([w])\n"
                             "def closure():\n    opt.zero_grad()\n    loss = w.sum()\n    loss.backward()\n"
                             "    return loss\nprint(opt.step(closure))  # the loss",
                     idea="step runs under torch.no_grad(): call closure() inside torch.enable_grad(), keep its "
                          "value, and return it at the end (None without a closure)"))


def each_row_alone(name: str, make_args: Callable[[], tuple], what: str, batched: tuple[int, ...] = (0,)) -> Property:
    """The property that `name` (a function of the task) treats its leading dim as a batch: row i of the
    output on the whole batch is the output on row i alone (the arguments in `batched` sliced together),
    so nothing mixes rows (a max or mean over the whole tensor) and one row less does not change the shapes
    it reads (x.shape[1] taken as the sequence)."""
    def probe(m):
        args = make_args()
        fn = getattr(m, name)
        whole = fn(*args)
        if type(whole) is not torch.Tensor:
            return f"{what}: {name} returned {type(whole).__name__}, expected a tensor"
        size = args[batched[0]].shape[0]
        for i in (0, size - 1):
            alone = [a[i] if j in batched else a for j, a in enumerate(args)]
            try:
                row = fn(*alone)
            except Exception as e:  # noqa: BLE001 - raising without the batch dim is breaking the property
                return f"{what}, row {i} alone (without the batch dim): your code raised {one_line(e)}"
            d = differs(whole[i], row)
            if d:
                return f"{what}, row {i} of the batch's output and the output on row {i} alone: {d}"
        empty = [a[:0] if j in batched else a for j, a in enumerate(args)]
        try:
            none = fn(*empty)
        except Exception as e:  # noqa: BLE001 - a batch of 0 rows is a batch
            return f"{what}, with 0 rows (an empty batch): your code raised {one_line(e)}"
        want = (0, *whole.shape[1:])
        if type(none) is not torch.Tensor or tuple(none.shape) != want:
            got = tuple(none.shape) if type(none) is torch.Tensor else type(none).__name__
            return f"{what}, with 0 rows (an empty batch): got {got}, expected shape {want}"
        return None
    return Property(f"{name} treats the leading dims as a batch: row i's output is what row i alone gives, and 0 rows "
                    "give 0 rows", probe,
                    example=f"# compare minilm.{name} on a batch, row 0 of its output, with {name} on row 0 alone",
                    idea="work along the dims the contract names (dim=-1, the last two for attention) and read "
                         "sizes from the end (x.shape[-2], x.shape[-1]): a reduction over the whole tensor, or "
                         "x.shape[1] as the sequence, ties the rows together")


def keeps_dtype(name: str, make_args: Callable[[], tuple], what: str,
                dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.bfloat16, torch.float16),
                mixed: bool = False, half_atol: float = 5e-2, idea: str | None = None) -> Property:
    """The property that `name` (a function of the task) works in every float dtype its signature allows
    (Float[Tensor, …]): its float arguments cast to float64, bfloat16 or float16 give an output of that dtype with
    the float32 output's values, to the dtype's precision. Code that builds a float32 tensor of its own (a
    one-hot .float(), torch.tensor(…) without a dtype) breaks it, or returns float32."""
    def cast(args, dtype):
        return [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]

    def probe(m):
        args = make_args()
        fn = getattr(m, name)
        base = fn(*args)
        # mixed: x alone in the low precision, the weights float32, as a norm meets them under autocast
        runs = [(dtype, cast(args, dtype), "") for dtype in dtypes] + [
            (dtype, [*cast(args[:1], dtype), *args[1:]], " with float32 weights") for dtype in dtypes
            if mixed and dtype != torch.float64]
        for dtype, given, weights in runs:
            dname = str(dtype).replace("torch.", "") + weights
            try:
                out = fn(*given)
            except Exception as e:  # noqa: BLE001 - raising on another dtype is breaking the property
                overflow = (f" ({dname}'s largest value is {torch.finfo(dtype).max:,.0f}: a number beyond it cannot be "
                            "stored in it, -inf can)") if "overflow" in str(e) else ""
                return f"{what}, in {dname}: your code raised {one_line(e)}{overflow}"
            if type(out) is not torch.Tensor or out.dtype != dtype:
                got = str(out.dtype).replace("torch.", "") if type(out) is torch.Tensor else type(out).__name__
                return f"{what}, in {dname}: expected a {str(dtype)[6:]} tensor (x's dtype), got {got}"
            atol = half_atol if dtype in (torch.bfloat16, torch.float16) else 1e-4
            d = differs(out.float(), base.float(), atol=atol, rtol=atol)
            if d:
                return f"{what}, the {dname} output and the float32 one: {d}"
        return None
    return Property(f"{name} works in float64, bfloat16 and float16 and returns that dtype", probe,
                    example=f"# give minilm.{name} float64 inputs: the output should be float64 with the same values",
                    idea=idea or "build every new tensor from the inputs' dtype (torch.zeros_like, x.new_tensor, "
                                 "dtype=x.dtype) and compute with the inputs themselves; a .float() or a float32 "
                                 "constant tensor changes the dtype or mixes two")


def gradient_follows(name: str, make_args: Callable[[], tuple], what: str, wrt: tuple[int, ...] = (0,),
                     call: str = "x") -> Property:
    """The property that autograd's gradient of `name` (a function of the task) is the derivative of what it
    computes: along a random direction v, ⟨∇(r · f), v⟩ equals (f(x + εv) − f(x − εv)) · r / 2ε. A piece
    that leaves autograd (.detach(), .item(), .data, torch.no_grad, a NumPy round trip) gives the right values
    and the wrong gradient, which no comparison of values sees. Arguments in `wrt` are float64 tensors."""
    def probe(m):
        args = list(make_args())
        fn = getattr(m, name)
        g = torch.Generator().manual_seed(7)
        out = fn(*args)
        if type(out) is not torch.Tensor:
            return f"{what}: {name} returned {type(out).__name__}, expected a tensor"
        weights = torch.randn(out.shape, generator=g, dtype=torch.float64)

        def total(xs) -> torch.Tensor:
            call = list(args)
            for i, x in zip(wrt, xs):
                call[i] = x
            return (fn(*call).double() * weights).sum()

        leaves = [args[i].detach().clone().requires_grad_(True) for i in wrt]
        value = total(leaves)
        if not value.requires_grad:
            return f"{what}: the output does not depend on the inputs for autograd (no grad_fn): the gradient is cut"
        grads = torch.autograd.grad(value, leaves, allow_unused=True)
        eps = 1e-3
        for i, leaf, grad in zip(wrt, leaves, grads):
            v = torch.randn(leaf.shape, generator=g, dtype=torch.float64)
            with torch.no_grad():
                slope = (total([x + eps * v if x is leaf else x.detach() for x in leaves])
                         - total([x - eps * v if x is leaf else x.detach() for x in leaves])).item() / (2 * eps)
            autograd = 0.0 if grad is None else (grad.double() * v).sum().item()
            if abs(autograd - slope) > 2e-3 * max(1.0, abs(slope)):
                return (f"{what}: along a random direction, autograd's derivative with respect to argument {i + 1} "
                        f"is {autograd:.6g}, but the output changes at the rate {slope:.6g}")
        return None
    return Property(f"autograd's gradient of {name} is the derivative of what it computes", probe,
                    example=f"from torch.autograd import gradcheck\nx = torch.randn(3, 4, dtype=torch.float64, "
                            f"requires_grad=True)\nprint(gradcheck(lambda x: minilm.{name}({call}), (x,)))  # True",
                    idea="keep every step inside autograd: .detach(), .item(), .data, .numpy() or torch.no_grad() "
                         "give the right values but cut or change the gradient, which training then follows")


@dataclass(frozen=True)
class Spec:
    task: str
    collect: Callable[[object, dict], dict]
    cases: Callable[[], list[dict]]
    passed: str
    outputs: dict[str, str] = field(default_factory=dict)  # key → label in a check's message ("the output")
    mistakes: dict[str, str] = field(default_factory=dict)
    invariant: Callable[[dict, dict], Problem | None] | None = None
    free: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    # A case where an error names a mistake (code that assumes 1-D positions): (mistake, advice).
    on_error: Callable[[dict], tuple[str, str] | None] | None = None
    # For a check's message: how output `key` differs from the reference's, (key, got, want) → str or None.
    # (The grader's feedback never uses it: it would repeat the submission's values.)
    explain: Callable[[str, torch.Tensor, torch.Tensor], str | None] | None = None
    properties: tuple[Property, ...] = ()

    def label(self, key: str) -> str:
        return self.outputs.get(key, key)


SPECS: dict[str, Spec] = {}


def spec(task: str, rows: Property | None = None, dtypes: Property | None = None, gradient: Property | None = None,
         **kw) -> Spec:
    """Register task's spec; the shared properties, `rows` (each_row_alone), `dtypes` (keeps_dtype) and
    `gradient` (gradient_follows), come after its own, since a value that is wrong also breaks them."""
    kw["properties"] = (*kw.get("properties", ()), *(p for p in (rows, dtypes, gradient) if p is not None))
    SPECS[task] = s = Spec(task, **kw)
    return s


def load() -> dict[str, Spec]:
    for group in GROUPS:
        importlib.import_module(f"minilm.course.exercises.{group}")
    return SPECS


def get(task: str) -> Spec:
    load()
    return SPECS[task]


def tolerance(dtype: torch.dtype, atol: float, rtol: float) -> tuple[float, float]:
    """Half-precision outputs differ from the reference's by rounding: widen the tolerance to their precision."""
    if dtype == torch.bfloat16:
        return max(atol, 2e-2), max(rtol, 2e-2)
    if dtype == torch.float16:
        return max(atol, 1e-2), max(rtol, 1e-2)
    return atol, rtol


# ---------------------------------------------------------------- helpers the specs share


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator | int, *shape, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Fixed random inputs: g is a generator (the grader's other cases draw in sequence) or a seed (visible cases)."""
    g = gen(g) if isinstance(g, int) else g
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def randint(g: torch.Generator, lo: int, hi: int) -> int:
    """An int in lo … hi, both included."""
    return int(torch.randint(lo, hi + 1, (), generator=g))


def state_keys(module: nn.Module) -> list[str]:
    return sorted(module.state_dict())


BUILD_FROM_SIZES = "build each part from the sizes and options the constructor is given"


def _wrong_shapes(own: dict, state: dict) -> list[str]:
    """The keys both have whose tensors' shapes differ."""
    return [k for k in state if k in own and tuple(own[k].shape) != tuple(state[k].shape)]


def _wrong_shape(k: str, own: dict, state: dict, name: str | None = None) -> str:
    return f"{name or k} has shape {shown(list(own[k].shape))}, expected {list(state[k].shape)}"


def load_state(module: nn.Module, state: dict) -> None:
    """The case's weights into `module`; where its parameters' names or shapes differ from the contract's, the
    check fails saying which, in the contract's words (not load_state_dict's, and not as an error your code
    raised)."""
    from minilm.course.checks import CheckFailed

    own = module.state_dict()
    missing, extra = sorted(set(state) - set(own)), sorted(set(own) - set(state), key=str)
    wrong = _wrong_shapes(own, state)
    if missing or extra or wrong:
        parts = [_wrong_shape(k, own, state) for k in wrong[:2]]
        if wrong:
            parts[-1] += f" ({BUILD_FROM_SIZES})"
        if missing:  # a tensor that is not a Parameter, or modules kept in a plain list: not registered
            parts.append(f"{len(missing)} missing, such as {', '.join(missing[:2])}: only an nn.Parameter, or a "
                         "module held as an attribute or in an nn.ModuleList (not a plain list or dict), is in it")
        if extra:
            parts.append(f"{len(extra)} the contract does not have, such as {', '.join(map(str, extra[:2]))}")
        raise CheckFailed("your module's state_dict differs from the contract's: " + "; ".join(parts))
    module.load_state_dict({k: v.clone() for k, v in state.items()})


def load_matching(module: nn.Module, state: dict, what: str) -> None:
    """Load the entries of `state` that `module` has: a module with a missing or extra part (a LayerNorm without
    bias, a post-norm LM with ln_final) still runs, so its outputs can name that mistake; its state_dict keys,
    collected first, already differ. An entry of another shape fails the check in the contract's words, where
    load_state_dict would raise its own error from inside the check."""
    from minilm.course.checks import CheckFailed

    own = module.state_dict()
    wrong = _wrong_shapes(own, state)
    if wrong:
        k = wrong[0]
        name = k if _CONTRACT_NAME.fullmatch(k) else "a parameter"  # the contract's names only (see learns)
        raise CheckFailed(f"{what}: {_wrong_shape(k, own, state, name)}: {BUILD_FROM_SIZES}")
    module.load_state_dict({k: v.clone() for k, v in state.items() if k in own}, strict=False)


def layers_of_their_own(make: Callable[[object], nn.Module], what: str) -> Property:
    """The property that each layer of a language model is a block of its own: make(m) builds the model."""
    def probe(m):
        layers = list(make(m).layers)
        owners = {}  # a parameter's storage → the first layer holding it
        for i, layer in enumerate(layers):
            for p in layer.parameters():
                j = owners.setdefault(p.data_ptr(), i)
                if j != i:
                    shared = "are one and the same block" if layer is layers[j] else "share a parameter"
                    return f"in {what}, layers[{j}] and layers[{i}] {shared}"
        return None
    return Property(f"each of the {what}'s layers is a block of its own, with parameters of its own", probe,
                    example="lm = minilm.TransformerLM(50, 16, 16, 3, 2, 32, 10000.0)\n"
                            "print(lm.layers[0] is lm.layers[1])  # False",
                    idea="build a new block for each layer (a list comprehension over range(num_layers) inside "
                         "nn.ModuleList): [block] * num_layers repeats one block, whose weights every layer shares")


def learns(make: Callable[[object], tuple], what: str) -> Property:
    """The property that every parameter of a module gets a gradient: make(m) → (module, inputs)."""
    def probe(m):
        module, inputs = make(m)
        module(*inputs).float().pow(2).sum().backward()
        dead = [name for name, p in module.named_parameters() if p.grad is None or not p.grad.abs().sum()]
        # the contract's names only: a name the submission made up could carry out what it saw
        named = f" ({', '.join(dead[:3])})" if dead and all(_CONTRACT_NAME.fullmatch(n) for n in dead) else ""
        return dead and f"after a backward pass through {what}, {len(dead)} parameter(s) have no gradient{named}" \
            or None
    return Property(f"a backward pass through {what} reaches every parameter", probe,
                    idea="every parameter takes part in forward: a projection left unused (k computed with q_proj) "
                         "or used through .data, .detach() or a copy made in __init__ gets no gradient")


_CONTRACT_NAME = re.compile(r"((layers\.\d{1,3}|attn|ffn|ln1|ln2|ln_final|q_proj|k_proj|v_proj|output_proj|w1|w2|w3|"
                            r"q_norm|k_norm|token_embeddings|position_embeddings|lm_head)\.)*(weight|bias|weight_int8|scale)")


def _contract_init(m, module: nn.Module) -> list[tuple[str, str, float | None, torch.Tensor]]:
    """Each parameter of `module` with what the contract starts it at: (name, "normal", std, p) for an
    Embedding's N(0, 1) or a Linear's N(0, 2 / (d_in + d_out)), both cut at ±3 std; "ones" for a norm's
    gain, "zeros" for a bias, "" when the contract says nothing. A parameter counts as the kind of the
    module it is registered in first (a tied matrix as the embedding); one made by hand in a composite
    module is judged by its name and shape."""
    out, seen = [], set()
    for prefix, owner in module.named_modules():
        for leaf, p in owner._parameters.items():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            name, kind, std = f"{prefix}.{leaf}".lstrip("."), "", None
            if isinstance(owner, m.Embedding) or name.endswith("embeddings.weight"):
                kind, std = "normal", 1.0
            elif leaf == "bias":
                kind = "zeros"
            elif p.ndim == 1 and leaf == "weight":
                kind = "ones"
            elif p.ndim == 2 and (isinstance(owner, m.Linear) or leaf == "weight"):
                kind, std = "normal", (2 / (p.shape[0] + p.shape[1])) ** 0.5
            out.append((name, kind, std, p))
    return out


def _init_gap(name: str, kind: str, std: float | None, p: torch.Tensor) -> str | None:
    """How parameter `name` of a fresh module misses its contract init (see `_contract_init`), or None."""
    w = p.detach().double()
    if kind in ("ones", "zeros"):
        want = 1.0 if kind == "ones" else 0.0
        return None if torch.all(w == want) else f"{name} starts at values from {w.min().item():.3g} to " \
                                                   f"{w.max().item():.3g}, expected all {want:g}"
    if kind != "normal" or w.numel() < 64:
        return None
    source = "an Embedding's N(0, 1)" if std == 1.0 else f"a Linear({p.shape[1]}, {p.shape[0]})'s N(0, 2/(in+out))"
    problem = init_problem(w, std, f"{name} (the contract: {source})")
    return problem and str(problem)


class _Sealed(nn.Module):
    """A submodule that computes what the Linear it wraps computes, but shows no weight, as an Int8Linear
    (Task 12.3) shows none: code that reads self.w1.weight instead of calling self.w1(x) stops here."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        object.__setattr__(self, "inner", inner)  # not a registered child: its weight stays out of sight

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)

    def __getattr__(self, name: str):
        raise AttributeError(f"a Linear swapped by quantize_model has no attribute {name!r}")


def unregistered_tensors(module: nn.Module) -> list[str]:
    """The tensors `module` or its submodules keep as plain attributes: .to(), .cuda() and .half() skip
    them, so they stay behind on the old device and in the old dtype."""
    return [f"{prefix}.{name}".lstrip(".") for prefix, owner in module.named_modules()
            for name, value in vars(owner).items() if isinstance(value, torch.Tensor)]


def registered_property(what: str, probe: Callable[[object], str | None]) -> Property:
    return Property(f"every tensor {what} keeps is a parameter or a buffer, so .to(device) moves it", probe,
                    example=f"# build {what} as `module`, then\n"
                            "print([n for n, v in vars(module).items() if isinstance(v, torch.Tensor)])  # []",
                    idea="register what the module keeps: nn.Parameter for what it learns, self.register_buffer(name, "
                         "tensor, persistent=False) for a table it computes; a tensor set as a plain attribute "
                         "stays on the CPU when the model moves to a GPU")


def _builds_in(m, make, inputs, what: str, meta: bool, variants, x_dtype: bool) -> str | None:
    """module_contract's dtype and device property: see there."""
    module = make(m, dtype=torch.float64)
    wrong = [(n, p.dtype) for n, p in module.named_parameters() if p.dtype != torch.float64]
    if wrong:
        return (f"{what} built with dtype=torch.float64: {wrong[0][0]} is {str(wrong[0][1])[6:]}"
                + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))
    # float64 hides a float32 tensor made in forward (float32 + float64 is float64); bfloat16 shows it.
    for label, build in {what: make, **(variants or {})}.items():
        for dtype in (torch.float64, torch.bfloat16):
            module = build(m, dtype=dtype)
            args = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in inputs(module)]
            dname = str(dtype)[6:]
            try:
                out = module(*args)
            except Exception as e:  # noqa: BLE001 - raising in the dtype it was built in breaks the property
                return f"{label} built with dtype=torch.{dname}, on {dname} inputs: your code raised {one_line(e)}"
            if type(out) is torch.Tensor and out.dtype != dtype:
                return f"{label} built with dtype=torch.{dname} returns {str(out.dtype)[6:]} on {dname} inputs"
    if x_dtype:  # a norm returns x's dtype, whatever its own (a float32 gain under bfloat16 activations)
        for built, given in ((torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)):
            module = make(m, dtype=built)
            args = [a.to(given) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in inputs(module)]
            out = module(*args)
            if type(out) is torch.Tensor and out.dtype != given:
                return (f"{what} built with dtype=torch.{str(built)[6:]} returns {str(out.dtype)[6:]} on a "
                        f"{str(given)[6:]} x, expected x's dtype")
    if meta:
        elsewhere = [(n, p.device.type) for n, p in make(m, device="meta").named_parameters()
                     if p.device.type != "meta"]
        if elsewhere:
            return f"{what} built with device='meta': {elsewhere[0][0]} is on {elsewhere[0][1]}"
    return None


def _norms_as_built(m, make, what: str) -> str | None:
    """module_contract's norms property: each norm inside behaves as a fresh one of its class with its weight."""
    module = make(m)
    # by the class's name: m.RMSNorm would import another task's module, which may not even parse (one-task rule)
    for name, norm in module.named_modules():
        if not name or type(norm).__name__ not in ("RMSNorm", "LayerNorm"):
            continue
        d = norm.weight.shape[0]
        fresh = type(norm)(d)
        with torch.no_grad():
            for p_fresh, p_norm in zip(fresh.parameters(), norm.parameters()):
                p_fresh.copy_(p_norm)
            x = randn(187, 2, d, scale=1e-3)  # mean square ≈ 1e-6: eps shows
            d_out = differs(norm(x), fresh(x), atol=1e-6)
        if d_out:
            return (f"{what}.{name} and a fresh {type(norm).__name__}({d}) with the same weight, on x of size "
                    f"~1e-3 (where eps shows): {d_out}")
    return None


def module_contract(make: Callable[..., nn.Module], inputs: Callable[[nn.Module], tuple], what: str,
                    calls_linears: bool = False, meta: bool = True,
                    variants: dict[str, Callable[..., nn.Module]] | None = None,
                    x_dtype: bool = False) -> tuple[Property, ...]:
    """The properties every module task shares, about how it is built: make(m, **kw) builds a fresh module of
    the task (kw: dtype, device, passed on as the constructor's own), inputs(module) gives forward's arguments.

    - a fresh module's parameters start as the contract's init for their kind (`_contract_init`): a
      composite module that draws its own torch.randn, or ties a weight the other way round, breaks it;
    - dtype= and device= reach every parameter, and a float64 or bfloat16 module returns that dtype, also
      built as each of `variants` (label → make: a config's other branches); the device is "meta", which
      holds no data, unless meta=False: RoPE's tables are computed and checked on build;
    - every tensor it keeps is a parameter or a buffer;
    - with calls_linears, forward calls its Linears rather than reading their weights (Task 12.3 swaps
      every Linear of the model for an Int8Linear, which has none)."""
    def starts(m):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = make(m)
        gaps = [gap for name, kind, std, p in _contract_init(m, module) if (gap := _init_gap(name, kind, std, p))]
        return gaps and "; ".join(gaps[:2]) or None

    def calls(m):
        module = make(m)
        args = inputs(module)
        with torch.no_grad():
            plain = module(*args)
            for parent in list(module.modules()):
                for name, child in list(parent._modules.items()):
                    if isinstance(child, m.Linear):
                        parent._modules[name] = _Sealed(child)
            try:
                sealed = module(*args)
            except AttributeError as e:
                return f"with its Linears swapped for modules that have no .weight, {what} raised {one_line(e)}"
        d = differs(sealed, plain)
        return d and f"with its Linears swapped for modules that compute the same but hide .weight, {what}'s " \
                     f"output changed: {d}"

    def registers(m):
        stray = unregistered_tensors(make(m))
        return (f"{what} holds {len(stray)} tensor(s) that are neither parameters nor buffers: "
                f"{', '.join(stray[:3])}") if stray else None

    props = (
        Property(f"a fresh {what} starts each parameter at the contract's init", starts,
                 example=f"# build a fresh {what} as `module`, then\n"
                         "for name, p in module.named_parameters():\n    print(name, p.std().item(), p.mean().item())",
                 idea="build every part from your own Linear, Embedding and norm modules, whose __init__ draws the "
                      "contract's init, and tie nothing the contract does not tie; a torch.randn or nn.Parameter "
                      "made by hand in a composite module skips it"),
        Property(f"{what} builds every parameter in the dtype and on the device it is given, and computes in that "
                 "dtype", lambda m: _builds_in(m, make, inputs, what, meta, variants, x_dtype),
                 example=f"# build {what} with dtype=torch.float64 as `module`, then\n"
                         "print({name: p.dtype for name, p in module.named_parameters()})",
                 idea="pass device=device, dtype=dtype on to every submodule and tensor you create in __init__, "
                      "and in forward make new tensors in the dtype of the tensors you are given"),
        registered_property(what, registers),
        Property(f"the norms inside {what} are built as the contract builds them, with the default eps",
                 lambda m: _norms_as_built(m, make, what),
                 example=f"# build {what} as `module`, then\n"
                         "print([(n, getattr(m, 'eps', None)) for n, m in module.named_modules()])",
                 idea="build each norm as RMSNorm(d_model, device=device, dtype=dtype), its eps the default 1e-5: "
                      "an eps of your own changes the output of every vector whose mean square is near it"),
    )
    if calls_linears:
        props += (Property(f"{what}'s forward calls its Linears (self.w1(x)) and never reads their weights", calls,
                           example="# in forward: self.w1(x), not x @ self.w1.weight.T or F.linear(x, self.w1.weight)",
                           idea="call each submodule on its input; Task 12.3 replaces every Linear by an Int8Linear, "
                                "which holds int8 codes and a scale, no weight"),)
    return props


def sublayer_adds_no_residual(make: Callable[[object], nn.Module], what: str, last: str = "w2") -> Property:
    """The property that a sublayer (make(m) → a fresh one; an FFN ending in w2, attention in output_proj) is
    last(…) alone: with that projection at zero its output is 0, since the residual x + sublayer(…) belongs to
    the block."""
    def probe(m):
        layer = make(m)
        with torch.no_grad():
            getattr(layer, last).weight.zero_()
            x = randn(186, 2, 3, getattr(layer, last).weight.shape[0])
            d = differs(layer(x), torch.zeros_like(x))
        return d and f"{what} with {last} at zero, on x (2, 3, {x.shape[-1]}), the output and 0: {d}"
    return Property(f"{what} ends in {last}: with {last} at zero the output is 0 (the block adds the residual, not "
                    "the sublayer)", probe,
                    example=f"# build {what} as `layer`, then\nlayer.{last}.weight.data.zero_()\n"
                            f"print(layer(torch.randn(2, 3, layer.{last}.weight.shape[0])))  # zeros",
                    idea=f"return {last} of what comes before it and nothing else: x + … is the block's residual, "
                         "added once there")


def weights(g: torch.Generator | int, shapes: dict[str, tuple[int, ...]],
            scale: float = 0.3) -> dict[str, torch.Tensor]:
    """Random weights for a state_dict, in the order of `shapes`: norm gains (ln…) near 1 and their
    biases near 0, so a swapped or missing norm shows; the rest scaled by `scale`."""
    g = gen(g) if isinstance(g, int) else g
    out = {}
    for name, shape in shapes.items():
        w = torch.randn(shape, generator=g)
        owner, leaf = name.split(".")[-2:] if "." in name else ("", name)
        if owner.startswith("ln"):  # distinct per norm, so a swapped or shared norm shows too
            out[name] = 1 + 0.3 * w if leaf == "weight" else 0.2 * w
        else:
            out[name] = w * scale
    return out


def keys_problem(got: list[str], expected: list[str], what: str) -> Problem | None:
    """state_dict names against the contract's."""
    if type(got) is not list or sorted(got) != sorted(expected):
        got = got if type(got) is list else []
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected), key=str)
        parts = [f"missing {', '.join(missing[:4])}"] if missing else []
        parts += [f"{len(extra)} unexpected"] if extra else []
        return Problem(f"{what}: state_dict keys differ from the contract ({'; '.join(parts)})", "state_dict_names",
                       f" (unexpected: {', '.join(map(str, extra[:4]))})" if extra else "")
    return None


def init_problem(w, std: float, what: str) -> Problem | None:
    """A weight drawn from a normal of std `std` truncated at ±3 std, as the contract's init. The std's and
    the mean's tolerances are 4 standard errors of a sample of w's size (at least 5% of std), so a right init
    passes whatever order it drew its numbers in, on a small weight too."""
    if type(w) is not torch.Tensor or not w.is_floating_point() or w.numel() < 2:
        return Problem(f"{what}: expected the initial weight as a floating-point tensor")
    w = w.detach().double()
    # The std first: a wrong std also puts weights beyond ±3 of the right one, and the cut-offs are not its cause.
    got, n = w.std().item(), w.numel()  # a normal truncated at ±3σ has standard deviation 0.9866σ
    if abs(got / (0.9866 * std) - 1) >= max(0.05, 4 / (2 * n) ** 0.5):
        return Problem(f"{what}: the weights' std is {got:.3g}, expected about {0.9866 * std:.3g} (std {std:.3g} "
                       "truncated at ±3 std)", "init_wrong_std")
    if w.abs().max() > 3 * std * 1.0001:
        return Problem(f"{what}: some weights lie beyond ±3 std ({w.abs().max().item() / std:.2f} std): use a "
                       "truncated normal cut at a=-3·std, b=3·std (trunc_normal_'s a and b are absolute, not in "
                       "units of std)", "init_not_truncated")
    at_cut = ((w.abs() / std - 3).abs() < 3e-4).double().mean().item()  # a truncated normal leaves ~0 there
    if at_cut > 5e-4:
        return Problem(f"{what}: {at_cut:.2%} of the weights sit exactly at ±3 std: clamping a normal piles its "
                       "tails onto the cut-offs, where a truncated normal (trunc_normal_) draws them inside")
    if abs(w.mean().item()) >= max(0.05, 4 / n ** 0.5) * std:
        return Problem(f"{what}: the weights' mean is {w.mean().item():.2g}, expected about 0", "init_not_centered")
    return None


def first(*problems: Problem | None) -> Problem | None:
    return next((p for p in problems if p is not None), None)


# ---------------------------------------------------------------- the contract's shapes (CS336 naming)


def attention_shapes(d: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    return {f"{prefix}{n}.weight": (d, d) for n in ("q_proj", "k_proj", "v_proj", "output_proj")}


def block_shapes(d: int, d_ff: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    return {f"{prefix}ln1.weight": (d,), **attention_shapes(d, f"{prefix}attn."), f"{prefix}ln2.weight": (d,),
            f"{prefix}ffn.w1.weight": (d_ff, d), f"{prefix}ffn.w2.weight": (d, d_ff),
            f"{prefix}ffn.w3.weight": (d_ff, d)}


def lm_shapes(vocab: int, d: int, layers: int, d_ff: int) -> dict[str, tuple[int, ...]]:
    """TransformerLM's state_dict, name → shape, in the module's order."""
    shapes = {"token_embeddings.weight": (vocab, d)}
    for i in range(layers):
        shapes |= block_shapes(d, d_ff, f"layers.{i}.")
    return shapes | {"ln_final.weight": (d,), "lm_head.weight": (vocab, d)}


def lm_state_dict_keys(num_layers: int) -> list[str]:
    """The exact state_dict keys of TransformerLM, in order."""
    return list(lm_shapes(1, 1, num_layers, 1))


def lm_parameter_count(vocab_size: int, d_model: int, num_layers: int, d_ff: int) -> int:
    """Closed form: embeddings + layers × (4 d² attention + 3 d d_ff SwiGLU + 2 d norms) + final norm + head."""
    per_layer = 4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model
    return vocab_size * d_model + num_layers * per_layer + d_model + d_model * vocab_size
