"""The lists the "from scratch" rule (minilm/course/rules/__init__.py) checks a task's code
against: what it may use, and the families of built-ins each task may not (provided: not an
exercise; the task registry, minilm/course/tasks.py, names each task's families in
`Task.forbidden` and its exceptions in `Task.allowed`).

A task may use a library name only when it is on ALLOWED and in none of its families, an
attribute of an object the scan cannot follow only when it is in METHODS (the public methods of
tensors, modules, optimizers and plain Python values), COURSE_NAMES (what the course's modules
define) or the student's own code defines it, and in none of its families. Anything missing
here is refused: add a public tensor operation here when an honest solution needs it."""

from __future__ import annotations

import builtins
import re
import types
from dataclasses import dataclass


def _under(module: str, names: str) -> set[str]:
    return {f"{module}.{name}" for name in names.split()}


@dataclass(frozen=True)
class Family:
    """Built-ins that do one job. A library name matches when one of its components holds one
    of `names`' words in a row (torch.softmax, torch.special.softmax, nn.Softmax, F.log_softmax,
    torch.native_layer_norm), or when it lies under one of `prefixes` and not under `except_`.
    An attribute of an object the scan cannot follow matches by `methods` (x.softmax(-1)), by
    `names`, or by holding a multi-word name's words (.native_layer_norm)."""

    names: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    except_: tuple[str, ...] = ()


_ATTENTION = ("scaled_dot_product_attention", "multi_head_attention_forward", "flex_attention", "MultiheadAttention",
              "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
              "TransformerDecoderLayer")
# Everything that computes a softmax: its forms, the losses built on it (exp(-F.cross_entropy(…)) is a
# softmax), the running and pairwise log-sum-exps, attention, and the distributions that normalize logits.
_SOFTMAX = Family(names=("softmax", "log_softmax", "logsumexp", "softmin", "gumbel_softmax", "Softmax", "LogSoftmax",
                         "Softmin", "Softmax2d", "cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss",
                         "logcumsumexp", "logaddexp", "logaddexp2", "Categorical", "OneHotCategorical",
                         "distributions", *_ATTENTION),
                  methods=("softmax", "log_softmax", "logsumexp", "logcumsumexp", "logaddexp", "logaddexp2"),
                  prefixes=("torch.distributions", "torch.nn.attention"))
_OPTIMIZERS = ("optim", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "Adafactor", "ASGD", "LBFGS", "NAdam",
               "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "Muon", "lr_scheduler", "swa_utils", "LambdaLR",
               "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "LinearLR", "OneCycleLR", "SequentialLR")

FAMILIES: dict[str, Family] = {
    # einops' EinMix is a linear layer written as an einsum pattern.
    "linear": Family(names=("linear", "bilinear", "Linear", "LazyLinear", "Bilinear", "EinMix")),
    "embedding": Family(names=("embedding", "embedding_bag", "Embedding", "EmbeddingBag")),
    "norm": Family(names=("rms_norm", "layer_norm", "group_norm", "batch_norm", "instance_norm", "normalize",
                          "local_response_norm", "RMSNorm", "LayerNorm", "GroupNorm", "LocalResponseNorm")),
    # torch.sigmoid stays allowed: SiLU is built as x · sigmoid(x).
    "activation": Family(names=("silu", "SiLU", "gelu", "GELU", "glu", "GLU", "mish", "Mish")),
    "softmax": _SOFTMAX,
    "attention": Family(names=_ATTENTION, prefixes=("torch.nn.attention",)),
    "cross_entropy": _SOFTMAX,
    "clip": Family(names=("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
                          "get_total_norm"), prefixes=("torch.nn.utils",)),
    # The base class torch.optim.Optimizer is provided; every optimizer and scheduler is not.
    "optim": Family(names=_OPTIMIZERS, prefixes=("torch.optim",), except_=("torch.optim.Optimizer",)),
    # PyTorch's own quantization: quantized tensors and their methods, and the torch.ao toolkit.
    "quantize": Family(names=("quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
                              "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine", "dequantize",
                              "int_repr", "quantize_dynamic", "ao", "quantization", "quantized"),
                       methods=("dequantize", "int_repr", "q_scale", "q_per_channel_scales"),
                       prefixes=("torch.ao", "torch.quantization", "torch.nn.quantized", "torch.nn.quantizable",
                                 "torch.nn.intrinsic", "torch.nn.qat")),
}

# The advice printed with a refusal.
LIST_ADVICE = "build it from the operations on that list"
PATCHING_ADVICE = "do not change other modules' names: define your own"
PRIVATE_ADVICE = "use public operations by their names (no private names, dunders or interpreter internals)"
DYNAMIC_ADVICE = "write the code itself: nothing that runs code, or looks names up, by a computed name"
# setattr with a computed name can set anything on anything (setattr(type(x), "ex" + "p", …)); a module's
# child has its own method.
SETATTR_ADVICE = ("replace a module's child with parent.add_module(name, new): setattr with a computed name can set "
                  "anything")
MODULE_VALUE_ADVICE = "use a module by its dotted names (torch.nn.functional.x) or an alias (F = torch.nn.functional)"
# torch.load with weights_only=False (or a pickle_module) unpickles anything, and torch.save's
# pickle_module runs any code: only Task 10.5 saves and loads, with plain calls.
LOAD_ADVICE = ("call torch.save(obj, f) and torch.load(src) or torch.load(src, weights_only=True), by name: "
               "a pickler of your own runs any code")
# jaxtyping evaluates a shape that is not names and numbers ("n+1", 'exec("…")') as Python code.
SHAPE_ADVICE = 'write jaxtyping shapes as names, numbers and ... ("batch seq d_model"), in Float[Tensor, "…"] itself'
STAR_ADVICE = "import the names you use one by one"
AMBIGUOUS_ADVICE = "give each thing its own name: the check cannot tell which one this is"
MATCH_ADVICE = "name the attributes a class pattern reads, case C(name=pattern): positional parts read __match_args__"
SYNTAX_ADVICE = "fix it: nothing in this file runs until it parses"
NESTING = "code nested too deeply to check"
NESTING_ADVICE = "write it with fewer nested expressions"
IMPORT_ADVICE = ("exercise modules import only torch, numpy, einops, jaxtyping, Python's math and typing helpers, "
                 "regex, re, operator, heapq, bisect, minilm.course.validate and the task names of the other exercise "
                 "modules")

# What an exercise module may import from (besides minilm: the other exercise modules' task names
# and minilm.course.validate), and the modules it may import whole or alias. `os` is there for
# os.PathLike only, operator for itemgetter and arithmetic (not attrgetter or methodcaller: names looked up).
IMPORTABLE = frozenset({"torch", "numpy", "einops", "jaxtyping", "math", "cmath", "random", "numbers", "typing",
                        "typing_extensions", "collections", "dataclasses", "functools", "itertools", "enum", "abc",
                        "warnings", "copy", "contextlib", "__future__", "os", "regex", "re", "operator", "heapq",
                        "bisect"})
MODULES = IMPORTABLE | {"torch.nn", "torch.nn.functional", "torch.nn.init", "torch.optim", "torch.linalg",
                        "torch.special", "numpy.typing", "einops.layers", "einops.layers.torch", "collections.abc"}

# Python's built-in functions and types a task may use (not exec, eval, open, vars, globals,
# getattr with a computed name, __import__, breakpoint …).
PYTHON_BUILTINS = frozenset("""
    abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict dir divmod enumerate filter
    float format frozenset hasattr hash hex id int isinstance issubclass iter len list map max min next object oct
    ord pow print property range repr reversed round set slice sorted staticmethod str sum super tuple type zip
    Ellipsis False None NotImplemented True __name__
    ArithmeticError AssertionError AttributeError BaseException Exception FloatingPointError IndexError KeyError
    LookupError NotImplementedError OverflowError RuntimeError RuntimeWarning StopIteration TypeError UserWarning
    ValueError Warning ZeroDivisionError DeprecationWarning FutureWarning
""".split())

# Python's other built-ins: refused where the student's code does not bind the name itself.
REFUSED_BUILTINS = (frozenset(dir(builtins)) | {"__builtins__", "__file__", "__name__", "__class__"}) - PYTHON_BUILTINS
# Python's own name lookups: with a constant name they are attribute uses, with any other a refusal.
DYNAMIC = ("getattr", "setattr", "delattr", "hasattr")
# torch.save and torch.load: only as plain calls, never as values (a pickler's call would be out of sight).
PICKLERS = ("torch.load", "torch.save")
# A class built on one of these (or on such a class) owns its `self`: the student's alone, not a tensor,
# in a method that has no decorator but property or these (a staticmethod's first parameter is anything).
SELF_BASES = ("torch.nn.Module", "torch.optim.Optimizer")
SELF_DECORATORS = ("torch.no_grad", "torch.inference_mode", "torch.enable_grad")
# The dunder methods a class may define: Python calls any other with names or objects of its choosing
# (__setattr__, __getattr__, __set_name__, __reduce_ex__, __torch_function__ …), which nothing here follows.
DEF_DUNDERS = frozenset("""
    __init__ __post_init__ __call__ __len__ __repr__ __str__ __iter__ __next__ __getitem__ __contains__ __eq__
    __hash__ __lt__ __bool__ __enter__ __exit__
""".split())
# What such a self may use besides what the student's code defines: nn.Module's and Optimizer's public
# methods and attributes, not a tensor's (a method called through its class, C.forward(x), gets a tensor
# as self; so does super() in a class mixed into a tensor subclass).
SELF_ATTRIBUTES = frozenset("""
    add_module add_param_group apply bfloat16 buffers call_super_init children cpu cuda defaults double
    dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half ipu
    load_state_dict modules mtia named_buffers named_children named_modules named_parameters param_groups
    parameters register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook
    register_state_dict_pre_hook register_step_post_hook register_step_pre_hook requires_grad_ set_extra_state
    set_submodule share_memory state state_dict step to to_empty train training type xpu zero_grad
    __init__ __name__ __class__
""".split())
# Methods whose first argument names an attribute they set on the object (register_buffer("cos", …)).
SETTERS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})
# A class pattern's positional parts read the class's __match_args__, except for these built-in types,
# whose one positional part is the subject itself: case int(n).
MATCH_SELF_TYPES = frozenset("bool bytearray bytes dict float frozenset int list set str tuple".split())
# A jaxtyping shape that jaxtyping does not evaluate: names (*batch, #n, _), numbers and ..., by spaces;
# one way to match each, so no backtracking blow-up.
_SHAPE_NAME = r"(?:\.\.\.|[*#?]{0,2}\w+)"
SHAPE = re.compile(rf"\s*(?:{_SHAPE_NAME}(?:\s+{_SHAPE_NAME})*)?\s*")

# Attribute names that reach the interpreter (frames, code, modules): refused on any object, self
# included, even when the student's code defines them. Python's own: every public attribute of its
# frames, generators, coroutines, tracebacks, code, cells, functions and modules that plain values
# lack (gi_frame, f_builtins, tb_next …). (`modules` is not one: model.modules() is nn.Module's;
# sys.modules needs `sys`, which is.) A storage's .type("a.b") imports module a, and the
# AttributeError it raises holds that module in .obj.
_INTERPRETER = (types.FrameType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
                types.TracebackType, types.CodeType, types.CellType, types.FunctionType, types.MethodType,
                types.BuiltinFunctionType, types.ModuleType)
NEVER_ATTRIBUTES = frozenset({a for t in _INTERPRETER for a in dir(t) if not a.startswith("_")} - {
    a for t in (str, bytes, list, dict, set, tuple, int, float) for a in dir(t)}) | frozenset("""
    builtins sys os importlib subprocess storage untyped_storage storage_type obj
""".split())

# Library names a task may use, minus its families. torch: its tensor operations (the functions
# that are also tensor methods), creation, dtypes and autograd switches.
ALLOWED = frozenset(set().union(_under("torch", """
    BoolTensor FloatTensor Generator LongTensor Size Tensor abs abs_ absolute acos acos_ acosh acosh_ add addbmm
    addcdiv addcmul addmm addmv addmv_ addr adjoint all allclose amax amin aminmax angle any arange arccos
    arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2 arctan_ arctanh arctanh_ argmax
    argmin argsort argwhere as_strided as_strided_ as_strided_scatter as_tensor asin asin_ asinh asinh_ atan
    atan2 atan_ atanh atanh_ atleast_1d atleast_2d atleast_3d baddbmm bernoulli bfloat16 bincount bitwise_and
    bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor block_diag bmm bool
    broadcast_shapes broadcast_tensors broadcast_to bucketize can_cast cartesian_prod cat cdist cdouble ceil
    ceil_ cfloat cholesky cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_ clamp_min
    clamp_min_ clip clip_ clone column_stack combinations complex complex128 complex64 concat concatenate conj
    conj_physical conj_physical_ copysign corrcoef cos cos_ cosh cosh_ count_nonzero cov cross cummax cummin
    cumprod cumsum deg2rad deg2rad_ det detach detach_ device diag diag_embed diagflat diagonal diagonal_scatter
    diff digamma dist div divide dot double dsplit dstack dtype e einsum empty empty_like enable_grad eq equal
    erf erf_ erfc erfc_ erfinv exp exp2 exp2_ exp_ expm1 expm1_ eye fill_ finfo fix fix_ flatten flip fliplr
    flipud float float16 float32 float64 float_power floor floor_ floor_divide fmax fmin fmod frac frac_ frexp
    from_numpy full full_like gather gcd gcd_ ge geqrf ger get_default_dtype greater greater_equal gt half
    hardshrink heaviside histc histogram hsplit hstack hypot i0 i0_ igamma igammac iinfo imag index_add
    index_copy index_fill index_put index_put_ index_reduce index_select inf inference_mode inner int int16
    int32 int64 int8 inverse is_complex is_conj is_floating_point is_grad_enabled is_inference is_neg is_nonzero
    is_same_size is_signed is_tensor isclose isfinite isinf isnan isneginf isposinf isreal istft kron kthvalue
    layout lcm lcm_ ldexp ldexp_ le lerp less less_equal lgamma linspace log log10 log10_ log1p log1p_ log2
    log2_ log_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not logical_or
    logical_xor logit logit_ logspace logsumexp long lt lu lu_solve manual_seed masked_fill masked_scatter
    masked_select matmul matrix_exp matrix_power max maximum mean median meshgrid min minimum mm mode moveaxis
    movedim msort mul multinomial multiply mv mvlgamma nan nan_to_num nan_to_num_ nanmean nanmedian nanquantile
    nansum narrow narrow_copy ne neg neg_ negative negative_ nextafter no_grad nonzero nonzero_static norm
    not_equal numel ones ones_like orgqr ormqr outer permute pi pinverse polar polygamma positive pow prelu prod
    promote_types put qr quantile rad2deg rad2deg_ rand rand_like randint randint_like randn randn_like randperm
    ravel real reciprocal reciprocal_ relu relu_ remainder renorm repeat_interleave reshape resize_as_
    resolve_conj resolve_neg result_type roll rot90 round round_ rsqrt rsqrt_ scatter scatter_add scatter_reduce
    searchsorted select select_scatter set_grad_enabled sgn short sigmoid sigmoid_ sign signbit sin sin_ sinc
    sinc_ sinh sinh_ slice_scatter slogdet softmax solve sort split split_with_sizes sqrt sqrt_ square square_
    squeeze stack std stft sub subtract sum svd swapaxes swapdims t take take_along_dim tan tan_ tanh tanh_
    tensor tensor_split tile topk trace transpose triangular_solve tril tril_indices triu triu_indices
    true_divide trunc trunc_ uint8 unbind unflatten unique unique_consecutive unsafe_chunk unsafe_split
    unsafe_split_with_sizes unsqueeze var vdot view_as_complex view_as_real vsplit vstack where xlogy xlogy_
    zero_ zeros zeros_like
"""), _under("torch.nn", """
    Module Parameter Buffer ModuleList ModuleDict ParameterList ParameterDict Sequential Identity Dropout Linear
    Embedding RMSNorm LayerNorm SiLU GELU ReLU Tanh Sigmoid
"""), _under("torch.nn.init", """
    trunc_normal_ normal_ uniform_ zeros_ ones_ constant_ xavier_uniform_ xavier_normal_ kaiming_uniform_
    kaiming_normal_ orthogonal_
"""), _under("torch.nn.functional", """
    linear embedding rms_norm layer_norm silu gelu relu sigmoid tanh softplus glu softmax log_softmax cross_entropy
    nll_loss mse_loss dropout pad one_hot normalize scaled_dot_product_attention
"""), _under("torch.linalg", "vector_norm norm matrix_norm"), _under("torch.special", """
    erf erfc erfinv expit logit exp2 expm1 log1p i0 sinc round gammaln
"""), _under("torch.optim", "Optimizer"), _under("numpy", """
    array asarray ascontiguousarray stack concatenate arange zeros ones empty frombuffer int8 int16 int32 int64 uint8
    uint16 uint32 float16 float32 float64 integer floating ndarray dtype iinfo issubdtype
"""), _under("numpy.typing", "NDArray ArrayLike"), _under("einops", """
    rearrange reduce repeat einsum pack unpack parse_shape
"""), _under("einops.layers.torch", "Rearrange Reduce EinMix"), _under("jaxtyping", """
    Float Int Bool Int8 Int16 Int32 Int64 UInt8 Float16 Float32 Float64 BFloat16 Integer Num Real Shaped Inexact
"""), _under("math", """
    acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf erfc exp exp2
    expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf isclose isfinite isinf isnan isqrt lcm ldexp
    lgamma log log10 log1p log2 modf nan nextafter perm pi pow prod radians remainder sin sinh sqrt tan tanh tau
    trunc ulp
"""), _under("cmath", """
    acos acosh asin asinh atan atanh cos cosh e exp inf infj isclose isfinite isinf isnan log log10 nan nanj
    phase pi polar rect sin sinh sqrt tan tanh tau
"""), _under("itertools", """
    accumulate chain combinations combinations_with_replacement compress count cycle dropwhile filterfalse
    groupby islice pairwise permutations product repeat starmap takewhile tee zip_longest
"""), _under("random", "random randint randrange uniform gauss choice choices sample shuffle seed Random"),
    _under("numbers", "Number Real Integral"), _under("typing", """
    TYPE_CHECKING Any Optional Union Callable Iterable Iterator Sequence Mapping Tuple List Dict Set IO BinaryIO
    TextIO Literal NamedTuple Protocol TypeVar Generic overload Final ClassVar
"""), _under("typing_extensions", "Self override Literal Protocol TypeAlias"), _under("collections", """
    Counter defaultdict deque OrderedDict namedtuple
"""), _under("collections.abc", "Iterable Iterator Sequence Mapping MutableMapping Callable Generator"),
    _under("dataclasses", "dataclass field replace fields asdict astuple"), _under("functools", """
    partial reduce lru_cache cache cached_property total_ordering cmp_to_key
"""), _under("enum", "Enum IntEnum auto"), _under("abc", "ABC abstractmethod"), _under("warnings", "warn"),
    _under("copy", "copy deepcopy"), _under("contextlib", "nullcontext contextmanager suppress"),
    _under("os", "PathLike"), _under("regex", """
    compile finditer findall match fullmatch search split sub escape
"""), _under("re", "compile finditer findall match fullmatch search split sub escape"), _under("operator", """
    itemgetter add sub mul truediv floordiv neg eq ne lt le gt ge
"""), _under("heapq", "heappush heappop heapify heappushpop heapreplace nlargest nsmallest merge"),
    _under("bisect", "bisect bisect_left bisect_right insort insort_left insort_right"),
    _under("__future__", "annotations")))

# The public methods and attributes of tensors, modules (and their containers), optimizers,
# sizes, dtypes, devices, generators, and plain Python values (str, list, dict, Counter, regex
# matches, exceptions …), with numpy's astype and copy: what an object the scan cannot follow
# may offer. None of them reaches a module, a frame or a file.
METHODS = frozenset("""
    H OptimizerPostHook OptimizerPreHook T T_destination abbr abs abs_ absolute absolute_ acos acos_ acosh
    acosh_ add add_ add_module add_note add_param_group addbmm addbmm_ addcdiv addcdiv_ addcmul addcmul_ addmm
    addmm_ addmv addmv_ addr addr_ adjoint all allcaptures allclose allspans amax amin aminmax angle any append
    appendleft apply apply_ arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2
    arctan2_ arctan_ arctanh arctanh_ argmax argmin args argsort argwhere as_integer_ratio as_strided
    as_strided_ as_strided_scatter as_subclass asin asin_ asinh asinh_ astype atan atan2 atan2_ atan_ atanh
    atanh_ backward baddbmm baddbmm_ bernoulli bernoulli_ bfloat16 bincount bit_count bit_length bits
    bitwise_and bitwise_and_ bitwise_left_shift bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or
    bitwise_or_ bitwise_right_shift bitwise_right_shift_ bitwise_xor bitwise_xor_ bmm bool broadcast_to buffers
    byte call_super_init capitalize captures capturesdict casefold cauchy_ ccol_indices cdouble ceil ceil_
    center cfloat chalf char children cholesky cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max
    clamp_max_ clamp_min clamp_min_ clear clip clip_ clone clone_state coalesce col_indices compile conj
    conj_physical conj_physical_ conjugate const_data_ptr contiguous copy copy_ copysign copysign_ corrcoef cos
    cos_ cosh cosh_ count count_nonzero cov cpu cross crow_indices cuda cummax cummin cumprod cumprod_ cumsum
    cumsum_ data data_ptr decode default_factory deg2rad deg2rad_ denominator dense_dim dequantize det detach
    detach_ detach_string device diag diag_embed diagflat diagonal diagonal_scatter diff difference
    difference_update digamma digamma_ dim dim_order discard dist div div_ divide divide_ dot double dsplit
    dtype dump_patches eig element_size elements encode end endpos ends endswith eps eq eq_ equal erf erf_ erfc
    erfc_ erfinv erfinv_ eval exp exp2 exp2_ exp_ expand expand_as expandf expandtabs expm1 expm1_ exponential_
    extend extendleft extra_repr fill_ fill_diagonal_ find findall finditer fix fix_ flags flatten flip fliplr
    flipud float float_power float_power_ floor floor_ floor_divide floor_divide_ fmax fmin fmod fmod_ format
    format_map forward frac frac_ frexp from_bytes fromhex fromkeys fullmatch fuzzy_changes fuzzy_counts gather
    gcd gcd_ ge ge_ geometric_ geqrf ger get get_buffer get_device get_extra_state get_offset get_parameter
    get_state get_submodule grad grad_dtype grad_fn graphsafe_get_state graphsafe_set_state greater greater_
    greater_equal greater_equal_ group groupdict groupindex groups gt gt_ half hardshrink hash_tensor heaviside
    heaviside_ hex histc histogram hsplit hypot hypot_ i0 i0_ igamma igamma_ igammac igammac_ imag index
    index_add index_add_ index_copy index_copy_ index_fill index_fill_ index_put index_put_ index_reduce
    index_reduce_ index_select indices initial_seed inner insert int int_repr intersection intersection_update
    inverse ipu is_coalesced is_complex is_conj is_contiguous is_cpu is_cuda is_distributed is_floating_point
    is_inference is_integer is_ipu is_leaf is_maia is_meta is_mkldnn is_mps is_mtia is_neg is_nested is_nonzero
    is_pinned is_quantized is_same_size is_set_to is_shared is_signed is_sparse is_sparse_csr is_vulkan is_xla
    is_xpu isalnum isalpha isascii isclose isdecimal isdigit isdisjoint isfinite isidentifier isinf islower
    isnan isneginf isnumeric isposinf isprintable isreal isspace issubset issuperset istft istitle isupper item
    items itemsize join keys kron kthvalue lastgroup lastindex layout lcm lcm_ ldexp ldexp_ le le_ lerp lerp_
    less less_ less_equal less_equal_ lgamma lgamma_ ljust load_state_dict log log10 log10_ log1p log1p_ log2
    log2_ log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and logical_and_
    logical_not logical_not_ logical_or logical_or_ logical_xor logical_xor_ logit logit_ logsumexp long lower
    lstrip lstsq lt lt_ lu lu_solve mH mT maketrans manual_seed map2_ map_ masked_fill masked_fill_
    masked_scatter masked_scatter_ masked_select match matmul matrix_exp matrix_power max maximum maxlen mean
    median min minimum mm mode module_load modules most_common move_to_end moveaxis movedim msort mtia mul mul_
    multinomial multiply multiply_ mv mvlgamma mvlgamma_ name named_buffers named_children named_lists
    named_modules named_parameters nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum narrow
    narrow_copy nbytes ndim ndimension ne ne_ neg neg_ negative negative_ nelement new new_empty
    new_empty_strided new_full new_ones new_tensor new_zeros nextafter nextafter_ nonzero nonzero_static norm
    normal_ not_equal not_equal_ numel numerator numpy orgqr ormqr outer output_nr parameters partial partition
    pattern permute pin_memory pinverse polygamma polygamma_ pop popitem popleft pos positive pow pow_
    prefixmatch prelu prod profile_hook_step put put_ q_per_channel_axis q_per_channel_scales
    q_per_channel_zero_points q_scale q_zero_point qr qscheme quantile rad2deg rad2deg_ random_ ravel re real
    reciprocal reciprocal_ record_stream register_backward_hook register_buffer register_forward_hook
    register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook register_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module register_parameter
    register_post_accumulate_grad_hook register_state_dict_post_hook register_state_dict_pre_hook
    register_step_post_hook register_step_pre_hook regs reinforce relu relu_ remainder remainder_ remove
    removeprefix removesuffix renorm renorm_ repeat repeat_interleave replace requires_grad requires_grad_
    reshape reshape_as resize resize_ resize_as resize_as_ resize_as_sparse_ resolution resolve_conj resolve_neg
    retain_grad retains_grad reverse rfind rindex rjust roll rot90 rotate round round_ row_indices rpartition
    rsplit rsqrt rsqrt_ rstrip scanner scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_
    search seed select select_scatter set_ set_extra_state set_offset set_state set_submodule setdefault sgn
    sgn_ shape share_memory share_memory_ short sigmoid sigmoid_ sign sign_ signbit sin sin_ sinc sinc_ sinh
    sinh_ size slice_inverse slice_scatter slogdet smallest_normal smm softmax solve sort span spans sparse_dim
    sparse_mask sparse_resize_ sparse_resize_and_clear_ split split_with_sizes splititer splitlines sqrt sqrt_
    square square_ squeeze squeeze_ sspaddmm start starts startswith state_dict std step stft stop storage
    storage_offset storage_type stride string strip sub sub_ subf subfn subn subtract subtract_ sum sum_to_size
    svd swapaxes swapaxes_ swapcase swapdims swapdims_ symeig symmetric_difference symmetric_difference_update t
    t_ take take_along_dim tan tan_ tanh tanh_ tensor_split tile tiny title to to_bytes to_complex to_dense
    to_empty to_mkldnn to_padded_tensor to_real to_sparse to_sparse_bsc to_sparse_bsr to_sparse_coo
    to_sparse_csc to_sparse_csr tolist topk total trace train translate transpose transpose_ triangular_solve
    tril tril_ triu triu_ true_divide true_divide_ trunc trunc_ type type_as unbind unflatten unfold uniform_
    union unique unique_consecutive unsafe_chunk unsafe_split unsafe_split_with_sizes unsqueeze unsqueeze_
    untyped_storage update upper values var vdot view view_as volatile vsplit where with_traceback xlogy xlogy_
    xpu zero_ zero_grad zfill
""".split()) - NEVER_ATTRIBUTES

# Python's decorators that keep a function to its class (a library's are the library's business).
DECORATORS = frozenset({"property", "staticmethod", "classmethod"})

# The tensor and module attributes code may set on an object it did not make (p.grad = None); any
# other method's name is refused as a target, as patching: k.transpose = … would change what a caller runs.
WRITABLE = frozenset({"grad", "data", "requires_grad", "training"})

# What the course's own modules define (the reference's attributes, methods and registered buffers,
# and ClassicConfig's fields), so one exercise module may use another's objects: model.context_length.
COURSE_NAMES = frozenset("""
    attn bias classic config context_length d_ff d_k d_model embedding_dim ffn from_linear hidden in_features k
    k_proj layers lm_head ln1 ln2 ln_final make_kv_cache max_seq_len modern norm_position num_embeddings
    num_heads num_layers out_features output_proj per_channel position_embeddings positions q_proj rope
    rope_theta theta tied_head token_embeddings v v_proj vocab_size w1 w2 w3 weight weight_int8 scale cos sin eps
    update norm
""".split())
# The dunders that are plain values or the constructor: super().__init__(…), type(x).__name__.
DUNDERS = frozenset({"__init__", "__name__"})
# What an attribute of an object the scan cannot follow may be, besides the student's own names.
KNOWN_ATTRIBUTES = METHODS | COURSE_NAMES | DUNDERS
