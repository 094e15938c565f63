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
    try:
        torch.broadcast_shapes(tuple(a.shape), tuple(leading))
    except RuntimeError:
        raise ValueError(f"{where}: {name} of shape {_shape(a)} does not broadcast against {against} "
                         f"{tuple(leading)}") from None


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


# ---------------------------------------------------------------- the classic Transformer (notebook 13)


def check_choice(value, choices: tuple[str, ...], name: str, where: str) -> None:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{where}: {name} must be one of {options}, got {value!r}")


def check_pairs(d: int, name: str, where: str, why: str) -> None:
    """`d` must be even, because `why` (e.g. "a sine and a cosine share each frequency")."""
    if d % 2:
        raise ValueError(f"{where}: {name} must be even ({why}), got {name}={d}")
