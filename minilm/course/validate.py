"""Input validation shared by the stubs and the reference (provided: not an exercise).

Every check raises a TypeError or ValueError that says what was expected and what was
given, so a shape mistake surfaces at the call that made it, not deep inside torch.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _shape(x: Tensor) -> str:
    return str(tuple(x.shape))  # "(4,)", "(2, 3)": Python's own tuple notation


def check_tensor(x, name: str, where: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: {name} must be a torch.Tensor, got {type(x).__name__}")


def check_positive_int(value, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where}: {name} must be a positive integer, got {value!r}")


def check_positive(value, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{where}: {name} must be a positive number, got {value!r}")


def check_last_dim(x: Tensor, expected: int, where: str, what: str = "in_features", name: str = "x") -> None:
    check_tensor(x, name, where)
    if x.ndim == 0 or x.shape[-1] != expected:
        raise ValueError(
            f"{where}: the last dim of {name} must be {what}={expected}, got {name} of shape {_shape(x)}"
        )


def check_shape(x: Tensor, expected: tuple[int, ...], where: str, name: str) -> None:
    check_tensor(x, name, where)
    if tuple(x.shape) != tuple(expected):
        raise ValueError(f"{where}: {name} must have shape {tuple(expected)}, got {_shape(x)}")


def check_integer(x: Tensor, where: str, name: str) -> None:
    check_tensor(x, name, where)
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{where}: {name} must be an integer tensor (torch.long), got dtype {x.dtype}")


def _tracing() -> bool:
    """Under torch.compile a check on tensor values (min, max) would split the compiled graph at
    every layer; the value checks then stay out, while dtype and shape checks still run."""
    return torch.compiler.is_compiling()


def check_token_ids(token_ids: Tensor, vocab_size: int, where: str, name: str = "token_ids") -> None:
    check_integer(token_ids, where, name)
    if token_ids.numel() and not _tracing() and (token_ids.min() < 0 or token_ids.max() >= vocab_size):
        raise ValueError(
            f"{where}: {name} must lie in [0, {vocab_size}) (vocab_size={vocab_size}), "
            f"got values from {int(token_ids.min())} to {int(token_ids.max())}"
        )


def check_divisible(d_model: int, num_heads: int, where: str) -> None:
    check_positive_int(d_model, "d_model", where)
    check_positive_int(num_heads, "num_heads", where)
    if d_model % num_heads:
        raise ValueError(
            f"{where}: d_model must be divisible by num_heads, got d_model={d_model} and num_heads={num_heads}"
        )


def check_even(d_k: int, where: str, name: str = "d_k") -> None:
    if d_k % 2:
        raise ValueError(f"{where}: RoPE rotates pairs of dimensions, so {name} must be even, got {name}={d_k}")


def check_positions(token_positions: Tensor, max_seq_len: int | None, where: str) -> None:
    check_integer(token_positions, where, "token_positions")
    if token_positions.numel() == 0 or _tracing():
        return
    if token_positions.min() < 0:
        raise ValueError(f"{where}: token_positions must be >= 0, got {int(token_positions.min())}")
    if max_seq_len is not None and token_positions.max() >= max_seq_len:
        raise ValueError(
            f"{where}: token_positions must be < max_seq_len={max_seq_len}, got {int(token_positions.max())}"
        )


def check_broadcast(a: Tensor, leading: tuple[int, ...], where: str, name: str, against: str) -> None:
    """`a` must broadcast against the shape `leading`."""
    # NumPy's rule, written out: torch.broadcast_shapes would import torch._refs (half a second
    # of every check command's start-up).
    shape, other = tuple(a.shape), tuple(leading)
    if any(x != y and 1 not in (x, y) for x, y in zip(reversed(shape), reversed(other))):
        raise ValueError(f"{where}: {name} of shape {_shape(a)} does not broadcast against {against} "
                         f"{tuple(leading)}")


def check_mask(mask: Tensor | None, scores_shape: tuple[int, ...], where: str) -> None:
    if mask is None:
        return
    check_tensor(mask, "mask", where)
    if mask.dtype != torch.bool:
        raise TypeError(f"{where}: mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
    check_broadcast(mask, scores_shape, where, "mask", "the scores' shape (..., queries, keys)")


def check_seq_len(seq_len: int, context_length: int, where: str) -> None:
    if seq_len > context_length:
        raise ValueError(
            f"{where}: the sequence has {seq_len} tokens, more than context_length={context_length}"
        )


# ---------------------------------------------------------------- data and training (notebooks 09–11)


def check_token_array(dataset, context_length: int, where: str) -> None:
    """`dataset` must be a 1-D integer numpy array (or memmap) longer than context_length."""
    import numpy as np

    if not isinstance(dataset, np.ndarray):
        raise TypeError(f"{where}: dataset must be a 1-D numpy array or np.memmap of token ids, "
                        f"got {type(dataset).__name__}")
    if dataset.ndim != 1:
        raise ValueError(f"{where}: dataset must be 1-D, got shape {tuple(dataset.shape)}")
    if not np.issubdtype(dataset.dtype, np.integer):
        raise TypeError(f"{where}: dataset must hold integer token ids, got dtype {dataset.dtype}")
    if len(dataset) <= context_length:
        raise ValueError(f"{where}: dataset must have more than context_length={context_length} tokens "
                         f"(an input and its shifted target), got {len(dataset)}")


def check_nonnegative(value, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{where}: {name} must be a number >= 0, got {value!r}")


def check_nonnegative_int(value, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name} must be an integer >= 0, got {value!r}")


def check_logits_targets(logits: Tensor, targets: Tensor, where: str) -> None:
    """logits (..., vocab) floating point; targets (...) integer ids in [0, vocab)."""
    check_tensor(logits, "logits", where)
    check_tensor(targets, "targets", where)
    if not logits.dtype.is_floating_point:
        raise TypeError(f"{where}: logits must be a floating-point tensor, got dtype {logits.dtype}")
    if logits.ndim < 1 or tuple(logits.shape[:-1]) != tuple(targets.shape):
        raise ValueError(f"{where}: logits must have shape targets.shape + (vocab_size,), "
                         f"got logits {_shape(logits)} and targets {_shape(targets)}")
    check_token_ids(targets, logits.shape[-1], where, "targets")


def check_bpe_args(text, num_merges, where: str) -> None:
    """BPE training: `text` a non-empty str, `num_merges` an int >= 0."""
    if not isinstance(text, str):
        raise TypeError(f"{where}: text must be a str (decoded text, not bytes or a path), got {type(text).__name__}")
    if not text:
        raise ValueError(f"{where}: text is empty: there is nothing to learn merges from")
    if isinstance(num_merges, bool) or not isinstance(num_merges, int):
        raise TypeError(f"{where}: num_merges must be an int, got {type(num_merges).__name__} {num_merges!r}")
    if num_merges < 0:
        raise ValueError(f"{where}: num_merges must be >= 0, got {num_merges}")


def check_tokenizer_args(vocab, merges, special_tokens, where: str) -> None:
    """A BPE tokenizer's vocab {int: bytes}, its merges [(bytes, bytes), …], each of whose parts and
    joined bytes is a token of vocab, and special_tokens None or a list of non-empty str."""
    if type(vocab) is not dict or not all(type(k) is int and type(v) is bytes for k, v in vocab.items()):
        raise TypeError(f"{where}: vocab must be a dict of int ids to bytes, as train_bpe returns it")
    if not isinstance(merges, (list, tuple)):
        raise TypeError(f"{where}: merges must be a list of (bytes, bytes) pairs, got {type(merges).__name__}")
    tokens = set(vocab.values())
    for k, pair in enumerate(merges):
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(type(p) is bytes for p in pair)):
            raise TypeError(f"{where}: merges[{k}] must be a pair (bytes, bytes), got {type(pair).__name__}")
        missing = [t for t in (pair[0], pair[1], pair[0] + pair[1]) if t not in tokens]
        if missing:
            raise ValueError(f"{where}: merges[{k}] = {pair!r}: {missing[0]!r} is not a token of vocab")
    if special_tokens is not None and (not isinstance(special_tokens, (list, tuple))
                                       or not all(type(t) is str and t for t in special_tokens)):
        raise TypeError(f"{where}: special_tokens must be None or a list of non-empty str, such as [\"<|endoftext|>\"]")


def check_text(text, where: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{where}: text must be a str, got {type(text).__name__}")


def check_id_list(ids, where: str) -> None:
    """Token ids: a list of ints (a tensor's or an array's .tolist())."""
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TypeError(f"{where}: ids must be a list of ints (.tolist() a tensor or an array), got "
                        f"{type(ids).__name__}")


# ---------------------------------------------------------------- generation and the KV cache (notebook 11)


def check_fits_context(token_ids: Tensor, kv_cache, context_length: int, where: str) -> None:
    """The tokens already in kv_cache (a list of per-layer caches; len of the first) plus the
    new ones must fit in context_length. Without a cache: the sequence itself must fit."""
    if not kv_cache:
        check_seq_len(token_ids.shape[-1], context_length, where)
        return
    cached = len(kv_cache[0])
    if cached + token_ids.shape[-1] > context_length:
        raise ValueError(f"{where}: {cached} cached tokens plus {token_ids.shape[-1]} new ones are "
                         f"{cached + token_ids.shape[-1]}, more than context_length={context_length}")


def check_floating(x, name: str, where: str) -> None:
    """A floating-point tensor with at least one dim (e.g. logits, vocab last)."""
    check_tensor(x, name, where)
    if not x.dtype.is_floating_point or x.ndim < 1:
        raise TypeError(f"{where}: {name} must be a floating-point tensor with at least one dim, "
                        f"got {_shape(x)}, dtype {x.dtype}")


def check_sampling(temperature, top_k, top_p, where: str) -> None:
    """temperature >= 0; top_k None or an int >= 1; top_p None or a number in (0, 1]."""
    check_nonnegative(temperature, "temperature", where)
    if top_k is not None:
        check_positive_int(top_k, "top_k", where)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"{where}: top_p must be a number in (0, 1], got {top_p!r}")
# ---------------------------------------------------------------- quantization (notebook 12)


def check_weight_matrix(w, where: str, name: str = "w") -> None:
    """`w` must be a finite, non-empty, floating-point 2-D weight (d_out, d_in)."""
    check_tensor(w, name, where)
    if not w.dtype.is_floating_point:
        raise TypeError(f"{where}: {name} must be a floating-point weight to quantize, got dtype {w.dtype}")
    if w.ndim != 2 or w.numel() == 0:
        raise ValueError(f"{where}: {name} must be a non-empty 2-D weight matrix (d_out, d_in), got shape {_shape(w)}")
    if not _tracing() and not bool(torch.isfinite(w).all()):
        raise ValueError(f"{where}: {name} holds NaN or inf, which no int8 value and scale can represent")


def check_int8_and_scale(q, scale, where: str) -> None:
    """q: int8 (d_out, d_in); scale: floating point, (d_out, 1) per channel or (1, 1) per tensor."""
    check_tensor(q, "q", where)
    if q.dtype != torch.int8 or q.ndim != 2:
        raise TypeError(f"{where}: q must be a 2-D torch.int8 tensor (d_out, d_in), got dtype {q.dtype} and shape "
                        f"{_shape(q)}")
    check_tensor(scale, "scale", where)
    if not scale.dtype.is_floating_point:
        raise TypeError(f"{where}: scale must be a floating-point tensor, got dtype {scale.dtype}")
    if tuple(scale.shape) not in ((q.shape[0], 1), (1, 1)):
        raise ValueError(f"{where}: scale must have shape (d_out, 1) = ({q.shape[0]}, 1), one per output row, or "
                         f"(1, 1) for the whole matrix, got {_shape(scale)}")


def check_has_weight_matrix(layer, where: str) -> None:
    """`layer` must be a module holding a 2-D floating-point `weight` (out_features, in_features)."""
    weight = getattr(layer, "weight", None)
    if not isinstance(layer, torch.nn.Module) or not isinstance(weight, Tensor):
        raise TypeError(f"{where}: expected a linear layer (your Linear, or any module with a 2-D weight of shape "
                        f"(out_features, in_features)), got {type(layer).__name__}")
    check_weight_matrix(weight, where, "layer.weight")


def check_module(model, where: str) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module (e.g. your TransformerLM), got "
                        f"{type(model).__name__}")


# ---------------------------------------------------------------- the classic Transformer (notebook 13)


def check_choice(value, choices: tuple[str, ...], name: str, where: str) -> None:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{where}: {name} must be one of {options}, got {value!r}")


def check_pairs(d: int, name: str, where: str, why: str) -> None:
    """`d` must be even, because `why` (e.g. "a sine and a cosine share each frequency")."""
    if d % 2:
        raise ValueError(f"{where}: {name} must be even ({why}), got {name}={d}")


def check_train_args(optimizer, clip, start, evaluate, eval_every) -> None:
    """train's arguments (Task 10.6): what each must be, and what was given."""
    if not all(hasattr(optimizer, name) for name in ("param_groups", "zero_grad", "step")):
        raise TypeError("train: optimizer must be an optimizer (param_groups, zero_grad() and step(), as a "
                        f"torch.optim.Optimizer has), got {type(optimizer).__name__}")
    if clip is not None:
        check_positive(clip, "clip", "train")
    check_nonnegative_int(start, "start", "train")
    if evaluate is not None:
        if not callable(evaluate):
            raise TypeError(f"train: evaluate must be a function of the step count, got {type(evaluate).__name__}")
        if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
            raise ValueError(f"train: with evaluate, eval_every must be an integer >= 1, got {eval_every!r}")


def check_probability(value, name: str, where: str, upper_open: bool = True) -> None:
    """A number in [0, 1) (upper_open) or [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {name} must be a number, got {type(value).__name__} {value!r}")
    if not (0 <= value < 1 if upper_open else 0 <= value <= 1):
        raise ValueError(f"{where}: {name} must lie in {'[0, 1)' if upper_open else '[0, 1]'}, got {value!r}")
