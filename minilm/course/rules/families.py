"""What the from-scratch rule refuses (provided: not an exercise). One list, read by the recorder that
watches a task's run (recorder.py), the lint that keeps the recorder honest (lint.py), and the table in
docs/students.md. The task registry (minilm/course/tasks.py) names each task's families in `Task.forbidden`.

A family is the built-ins that do one job. A torch function belongs to it when its name holds one of the
family's `keys`, whatever its spelling (torch.softmax, Tensor.log_softmax, nn.LayerNorm, aten._softmax,
torch._fused_adamw_), or when its code lives in one of the family's `modules` (torch.optim's optimizers).
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from functools import lru_cache

BUILT_IN_LIBRARIES = ("torch", "einops")


@dataclass(frozen=True)
class Family:
    keys: tuple[str, ...]  # lower-case letters and digits: a name holding one of them, whatever its style
    modules: tuple[str, ...] = ()  # library modules (and their submodules) whose code does the job
    except_: tuple[str, ...] = ()  # modules under those that are provided, not the job
    summary: str = ""  # for docs/students.md

    def holds(self, module: str, qualname: str, libraries: tuple[str, ...] = BUILT_IN_LIBRARIES) -> bool:
        """Whether the library function `qualname` of `module` does this family's job: torch's and einops' do
        (another library's `normalize` is not F.normalize) when their class or function name holds a key, in
        any spelling (Tensor.log_softmax, nn.LayerNorm, aten._softmax, torch._fused_adamw_)."""
        # `libraries` is bound when the class is made: code that rebinds the module's global later changes nothing
        if module.split(".", 1)[0] not in libraries:
            return False
        if any(_under(module, m) for m in self.modules) and not any(_under(module, m) for m in self.except_):
            return True
        name = _letters(qualname)
        return any(k in name for k in self.keys)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@lru_cache(maxsize=4096)
def _letters(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ATTENTION = ("attention", "transformer")
# Everything that computes a softmax: its forms, the losses built on it (exp(-F.cross_entropy(…)) is a softmax),
# the log-sum-exps, F.normalize (a softmax's division), attention, and distributions that normalize logits.
_SOFTMAX = Family(keys=("softmax", "softmin", "logsumexp", "logcumsumexp", "logaddexp", "crossentropy", "nllloss",
                        "normalize", "categorical", *_ATTENTION),
                  modules=("torch.distributions", "torch.nn.attention"),
                  summary="softmax, log_softmax, logsumexp, cross-entropy and NLL losses, F.normalize, attention, "
                          "torch.distributions")

FAMILIES: dict[str, Family] = {
    "linear": Family(keys=("linear", "einmix"), modules=("einops.layers._einmix",),
                     summary="F.linear, nn.Linear, nn.Bilinear, einops' EinMix"),
    "embedding": Family(keys=("embedding",), summary="F.embedding, nn.Embedding, nn.EmbeddingBag"),
    "norm": Family(keys=("rmsnorm", "layernorm", "groupnorm", "batchnorm", "instancenorm", "normalize",
                         "localresponsenorm"),
                   summary="F.rms_norm, F.layer_norm, F.normalize, nn.RMSNorm, nn.LayerNorm and the other norms"),
    # torch.sigmoid stays allowed: SiLU is built as x · sigmoid(x).
    "activation": Family(keys=("silu", "gelu", "glu", "mish"), summary="F.silu, F.gelu, F.glu, nn.SiLU, nn.GELU"),
    "softmax": _SOFTMAX,
    "attention": Family(keys=_ATTENTION, modules=("torch.nn.attention",),
                        summary="F.scaled_dot_product_attention, nn.MultiheadAttention, nn.Transformer*"),
    "cross_entropy": _SOFTMAX,
    # Tensor.renorm clips a tensor's norm: it does 10.2's defining step.
    "clip": Family(keys=("clipgrad", "gettotalnorm", "renorm"), modules=("torch.nn.utils.clip_grad",),
                   summary="torch.nn.utils.clip_grad_norm_ and its kin, Tensor.renorm"),
    # The base class torch.optim.Optimizer is provided; every optimizer and scheduler is not.
    "optim": Family(keys=("adam", "sgd", "muon", "lrscheduler", "rmsprop", "adagrad", "adadelta", "lbfgs", "rprop",
                          "asgd"), modules=("torch.optim",),
                    except_=("torch.optim.optimizer",),
                    summary="every optimizer and scheduler in torch.optim (the base class torch.optim.Optimizer "
                            "is yours to use)"),
    # Every dropout: F.dropout, nn.Dropout, torch.dropout and their alpha and feature kin.
    "dropout": Family(keys=("dropout",), summary="F.dropout, nn.Dropout, torch.dropout and their kin"),
    "kl_div": Family(keys=("kldiv",), summary="F.kl_div, nn.KLDivLoss"),
    # PyTorch's own quantization: quantized tensors and their methods, and the torch.ao toolkit.
    # fake-quantization, observers' qparams and packed int8 kernels too (the eighth red team's leads)
    "quantize": Family(keys=("quantize", "intrepr", "qscale", "qperchannel", "qparams", "fakequant", "obsfq",
                             "int8pack", "int8weight", "dynquant", "fbgemm"),
                       modules=("torch.ao", "torch.quantization", "torch.nn.quantized", "torch.nn.quantizable",
                                "torch.nn.intrinsic", "torch.nn.qat"),
                       summary="torch.quantize_per_channel and its kin, Tensor.dequantize, torch.ao"),
}

# ---------------------------------------------------------------- what no task's run may call
# The ways out of the recording, or out of the process: refused for every task when the student's code
# (or code it made from a string) calls them. Library code may use them for its own work (torch.save opens
# its file). A C function is named by its module; a Python function by the module its code lives in.
ESCAPE_MODULES = (
    # the interpreter: hooks, frames, code from strings, imports, the collector, memory
    "sys", "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "builtins.globals",
    "builtins.locals", "builtins.vars", "builtins.breakpoint", "builtins.input", "builtins.open", "builtins.exit",
    "builtins.quit", "builtins.help", "gc", "inspect", "importlib", "_imp", "ctypes", "_ctypes", "marshal", "pickle",
    "_pickle", "copyreg", "code", "codeop", "runpy", "pdb", "bdb", "types", "weakref", "_weakref", "atexit",
    "faulthandler", "tracemalloc", "_tracemalloc",
    # threads and processes, files, signals and sockets
    "threading", "_thread", "multiprocessing", "concurrent", "subprocess", "_posixsubprocess", "os", "posix", "nt",
    "io", "_io", "shutil", "tempfile", "pathlib", "signal", "_signal", "socket", "_socket", "select", "mmap", "fcntl",
    "resource", "asyncio",
    # torch's own ways to run code the recording does not see, or to switch it off
    "torch.jit", "torch._dynamo", "torch.compiler", "torch.compile", "torch._inductor", "torch.fx", "torch.export",
    "torch.library", "torch._ops.OpOverloadPacket.__getattr__", "torch._ops._OpNamespace", "torch.utils.cpp_extension",
    "torch.overrides", "torch.utils._python_dispatch", "torch._C._disabled_torch_function_impl", "torch.profiler",
    "torch.autograd.profiler", "torch.hub", "torch.multiprocessing", "torch.distributed", "torch.package",
    "torch.serialization", "torch.load", "torch.save", "torch._C._set_torch_function_mode",
    "torch._C._push_on_torch_function_stack", "torch._C._pop_torch_function_stack", "torch._C.DisableTorchFunction",
    "torch._C.DisableTorchFunctionSubclass", "torch._C._get_function_stack_at", "torch._C._len_torch_function_stack",
    # a getattr by any name, done by the library (update_wrapper's `updated`): reached the recorder's closures
    "functools.update_wrapper",
    # numpy's files and raw memory
    "numpy.lib._npyio_impl", "numpy.lib.npyio", "numpy._core.memmap", "numpy.core.memmap", "numpy.ctypeslib",
    "numpy.save", "numpy.load", "numpy.fromfile", "numpy.ndarray.tofile", "numpy.ndarray.dump",
    # torch's storages on files and shared memory, and its extension loader
    "torch.storage", "torch._ops._Ops.load_library",
    # autograd's own callbacks: what they run, the engine calls from C inside a backward pass, where the torch
    # function mode is paused (a functools.partial over map(torch.softmax, …) as a node's pre-hook, red team 9)
    "torch.autograd.graph", "torch.autograd.function",
)
# The same by a function's own name, whatever class or module holds it (torch.from_file is
# _VariableFunctionsClass.from_file, UntypedStorage's is StorageBase.from_file, of no module): torch.from_file(…,
# shared=True) wrote any file the process could reach, and a pickle there ran code (red team 6).
ESCAPE_FUNCTIONS = frozenset({"from_file", "PyTorchFileReader", "PyTorchFileWriter", "load_library",
                              # hooks that run inside a backward pass: an autograd node's, a tensor's, a module's
                              "register_hook", "register_prehook", "_register_hook_dict",
                              "register_post_accumulate_grad_hook", "register_backward_hook",
                              "register_full_backward_hook", "register_full_backward_pre_hook",
                              "register_multi_grad_hook"})

# Under those, what runs for the student's code without a call of its own: an import statement's machinery.
# And locks, which numpy's and torch's compiled code make for the student's calls, and which start nothing.
ESCAPE_EXCEPT = ("importlib._bootstrap", "importlib._bootstrap_external", "threading.RLock", "threading._RLock",
                 "threading.Lock", "threading.Condition", "threading.Event", "_thread.allocate_lock", "_thread.RLock",
                 # reading a memmap the caller made (9.1's dataset may be one) opens nothing
                 *(f"numpy.{core}.memmap.memmap.{m}" for core in ("_core", "core")
                   for m in ("__getitem__", "__array_finalize__", "__array_wrap__", "__getattribute__")))

# ---------------------------------------------------------------- the lint's lists (lint.py)
# What an exercise module may import: these modules, and from the minilm package only the other exercise
# modules' task names and minilm.course.validate. `os` is there for os.PathLike alone (NARROW).
IMPORTABLE = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.optim", "torch.linalg", "torch.special",
    "numpy", "numpy.typing", "einops", "einops.layers", "einops.layers.torch", "jaxtyping", "math", "cmath",
    "random", "numbers", "typing", "typing_extensions", "collections", "collections.abc", "dataclasses",
    "functools", "itertools", "enum", "abc", "warnings", "copy", "contextlib", "__future__", "os", "regex", "re",
    "operator", "heapq", "bisect"})
# Modules of which only these names may be used: what looks names up from strings (operator.attrgetter,
# typing.get_type_hints, jaxtyping's import hook) is left out.
NARROW = {
    "os": frozenset({"PathLike"}),
    "operator": frozenset("itemgetter add sub mul truediv floordiv mod pow neg pos abs eq ne lt le gt ge and_ or_ xor "
                          "not_ matmul".split()),
    "typing": frozenset("TYPE_CHECKING Any Optional Union Callable Iterable Iterator Sequence Mapping MutableMapping "
                        "Tuple List Dict Set FrozenSet IO BinaryIO TextIO Literal NamedTuple Protocol TypeVar Generic "
                        "overload Final ClassVar TypedDict cast Self TypeAlias Generator Type Hashable Sized "
                        "Collection Container NoReturn Never Annotated DefaultDict OrderedDict Counter Deque "
                        "AbstractSet SupportsInt SupportsFloat SupportsIndex".split()),
    "jaxtyping": frozenset("Float Int Bool Int8 Int16 Int32 Int64 UInt8 UInt16 UInt32 UInt64 Float16 Float32 Float64 "
                           "BFloat16 Integer Num Real Shaped Inexact Complex Key".split()),
    "einops": frozenset("rearrange reduce repeat einsum pack unpack parse_shape asnumpy EinopsError layers".split()),
}

# Python's built-ins that code may use. The others (exec, eval, open, globals, vars, __import__, breakpoint …)
# are refused where the module does not bind the name itself.
PYTHON_BUILTINS = frozenset({n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(
    v, BaseException)}) | frozenset("""
    abs all any ascii bin bool bytearray bytes callable chr classmethod complex delattr dict dir divmod enumerate filter
    float format frozenset getattr hasattr hash hex id int isinstance issubclass iter len list map max min next
    object oct ord pow print property range repr reversed round set setattr slice sorted staticmethod str sum super
    tuple type zip Ellipsis False None NotImplemented True __name__
    ArithmeticError AssertionError AttributeError BaseException Exception FloatingPointError IndexError KeyError
    LookupError NotImplementedError OverflowError RuntimeError RuntimeWarning StopIteration TypeError UserWarning
    ValueError Warning ZeroDivisionError DeprecationWarning FutureWarning OSError EOFError UnicodeDecodeError
    UnicodeEncodeError UnicodeError
""".split())

# Attribute names that reach the interpreter, the process or code the recording does not see, on any object:
# modules that other modules carry as attributes (torch.sys, np.os), frames and code, and torch's compilers.
# A private name (_x) or a dunder (__x__) is refused too, but the constructor's: super().__init__(…).
ESCAPE_ATTRIBUTES = frozenset("""
    sys os builtins importlib inspect gc ctypes threading multiprocessing subprocess signal socket io pickle marshal
    shutil pathlib tempfile types atexit weakref code runpy pdb traceback faulthandler resource mmap posix nt
    asyncio concurrent
    jit compiler fx export library ops overrides profiler hub package distributed utils testing classes
    tofile fromfile memmap ctypeslib savez savez_compressed savetxt loadtxt genfromtxt
    from_file PyTorchFileReader PyTorchFileWriter load_library
    f_back f_globals f_locals f_builtins f_code gi_frame gi_code cr_frame cr_code ag_frame tb_frame tb_next
    cell_contents co_freevars co_cellvars co_consts co_code co_names co_filename
    bltns copyreg getattr setattr delattr hasattr
    setprofile settrace getprofile gettrace
""".split())
ALLOWED_DUNDERS = frozenset({"__init__", "__name__", "__class__"})
