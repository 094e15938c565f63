"""Task 15: look inside your trained model: what each attention receives, head scores and head ablation
(notebooks/15_inside.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_tensor

from .attention import MultiHeadSelfAttention


def attention_inputs(model: nn.Module, ids: Int[Tensor, "... seq"]) -> list[Float[Tensor, "... seq d_model"]]:
    """Task 15.1: what each layer's attention receives when `model` (your TransformerLM) reads ids:
    one tensor (..., seq, d_model) per layer, in the layers' order, each the argument x that
    model.layers[i].attn's forward got (the block's input after its ln1).

    Catch them with forward pre-hooks: register one on every model.layers[i].attn
    (register_forward_pre_hook; the hook gets (module, args), x is args[0]), run the model once
    under torch.no_grad(), and remove every hook with its handle's .remove() afterwards, also when
    the model raises (try/finally). The hooks only look: they return None, so the model computes
    what it computes without them. The tensors you return do not require grad.
    """
    raise NotImplementedError("Task 15.1 is not implemented yet: write attention_inputs in minilm/inside.py")


def _check_pattern(pattern: Tensor, what: str) -> None:
    check_tensor(pattern, "pattern", what)
    if pattern.ndim < 2 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"{what}: pattern must be (..., seq, seq), one row of weights per query, "
                         f"got shape {tuple(pattern.shape)}")


def previous_token_score(pattern: Float[Tensor, "... seq seq"]) -> Float[Tensor, "..."]:
    """Task 15.2: how much a head attends to the token just before each query: the mean, over the
    queries t = 1 … seq − 1 (query 0 has no previous token), of pattern[..., t, t − 1].

    pattern is (..., seq, seq) attention probabilities (rows summing to 1), with
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
