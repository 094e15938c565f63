"""Task 15: look inside your trained model: attention patterns, head scores and head ablation
(notebooks/15_inside.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from minilm.course.validate import check_last_dim, check_tensor

from .attention import MultiHeadSelfAttention, softmax


def attention_pattern(attn: MultiHeadSelfAttention, x: Float[Tensor, "... seq d_model"]
                      ) -> Float[Tensor, "... heads seq seq"]:
    """Task 15.1: the attention probabilities of every head of `attn` (your MultiHeadSelfAttention) on
    its input x, the tokens at positions 0 … seq − 1, as your forward computes them before it mixes
    the values:

        q = attn.q_proj(x), k = attn.k_proj(x), head h from rows h·d_k … (h+1)·d_k − 1 of each;
        q and k rotated by attn.rope at positions 0 … seq − 1 when attn.rope is not None;
        scores q·k / √d_k, the causal mask (query t sees keys 0 … t), your softmax (Task 6.1)
        over the keys.

    Row t of head h is how query t spreads its attention over the keys: it sums to 1 and is 0 on the
    keys after t. v_proj and output_proj play no part. Do not call torch.softmax or
    F.scaled_dot_product_attention.
    """
    check_last_dim(x, attn.d_model, "attention_pattern", "d_model")
    raise NotImplementedError("Task 15.1 is not implemented yet: write attention_pattern in minilm/inside.py")


def _check_pattern(pattern: Tensor, what: str) -> None:
    check_tensor(pattern, "pattern", what)
    if pattern.ndim < 2 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"{what}: pattern must be (..., seq, seq), one row of weights per query, "
                         f"got shape {tuple(pattern.shape)}")


def previous_token_score(pattern: Float[Tensor, "... seq seq"]) -> Float[Tensor, "..."]:
    """Task 15.2: how much a head attends to the token just before each query: the mean, over the
    queries t = 1 … seq − 1 (query 0 has no previous token), of pattern[..., t, t − 1].

    pattern is (..., seq, seq) attention probabilities (attention_pattern's, rows summing to 1), with
    any leading dims (layers, heads, a batch); the scores keep them: (...). 1 for a head that puts
    all its weight on the previous token, 0 for one that never looks there.
    """
    _check_pattern(pattern, "previous_token_score")
    if pattern.shape[-1] < 2:
        raise ValueError("previous_token_score: needs at least 2 tokens (query 0 has no previous token)")
    raise NotImplementedError("Task 15.2 is not implemented yet: write previous_token_score in minilm/inside.py")


def induction_score(pattern: Float[Tensor, "... seq seq"], period: int) -> Float[Tensor, "..."]:
    """Task 15.2: on a sequence that repeats itself after `period` tokens (token t = token t − period
    for t ≥ period), how much a head attends to the token just after the earlier copy of the
    query's token: the mean, over the queries t = period … seq − 1, of pattern[..., t, t − period + 1].

    An induction head does this: at the second "A" of "… A B … A" it looks at "B", the token that
    followed "A" last time, and so can predict it. Leading dims are kept as in previous_token_score;
    1 for a head that puts all its weight there, 0 for one that never does (a head that attends to
    the earlier copy itself, t − period, scores 0).
    """
    _check_pattern(pattern, "induction_score")
    if type(period) is not int or not 1 <= period < pattern.shape[-1]:
        raise ValueError(f"induction_score: period must be an int in 1 … seq − 1 = {pattern.shape[-1] - 1}, "
                         f"got {period!r}")
    raise NotImplementedError("Task 15.2 is not implemented yet: write induction_score in minilm/inside.py")


def ablate_heads(attn: MultiHeadSelfAttention, heads: Sequence[int]):
    """Task 15.3: switch off the heads listed in `heads` of `attn` until the returned handle's
    .remove(): register a forward pre-hook on attn.output_proj (register_forward_pre_hook) that
    zeroes head h's slice of output_proj's input, columns h·d_k … (h+1)·d_k − 1 (the heads'
    outputs merged as (heads d_k), as your forward merges them), for every h in heads, and passes
    the other columns on as they were. Return the handle register_forward_pre_hook returns.

    The module's weights stay as they are: after handle.remove() attn computes what it did before,
    and with heads empty its output is unchanged. Heads are 0 … attn.num_heads − 1.
    """
    heads = list(heads)
    bad = [h for h in heads if type(h) is not int or not 0 <= h < attn.num_heads]
    if bad:
        raise ValueError(f"ablate_heads: heads are ints in 0 … {attn.num_heads - 1}, got {bad[0]!r}")
    raise NotImplementedError("Task 15.3 is not implemented yet: write ablate_heads in minilm/inside.py")
