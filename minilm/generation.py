"""Task 11: generation and the KV cache (notebooks/11_generation.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_integer, check_nonnegative, check_nonnegative_int, check_positive_int


class KVCache:
    """Task 11.2: one attention layer's keys and values for the tokens seen so far.

    update(k, v) appends this step's keys and values (shape (..., heads, new, d_k)) along the
    sequence dim and returns all of them; len(cache) is how many positions are cached.
    MultiHeadSelfAttention.forward (minilm/attention.py) calls update with its keys after RoPE.
    """

    def __init__(self):
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def update(
        self, k: Float[Tensor, "... heads new d_k"], v: Float[Tensor, "... heads new d_k"]
    ) -> tuple[Float[Tensor, "... heads seq d_k"], Float[Tensor, "... heads seq d_k"]]:
        raise NotImplementedError("Task 11.2 is not implemented yet: write KVCache.update in minilm/generation.py")

    def __len__(self) -> int:
        raise NotImplementedError("Task 11.2 is not implemented yet: write KVCache.__len__ in minilm/generation.py")


def generate(
    model: nn.Module,
    prompt_ids: Int[Tensor, "prompt"] | Sequence[int],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> Int[Tensor, "total"]:
    """Task 11.1: continue `prompt_ids` by up to max_new_tokens tokens, one at a time.

    Returns a 1-D LongTensor: the prompt followed by the new token ids (prompt_ids may be a
    1-D tensor or a Python list of ints). Each step turns the last position's logits into a
    choice of the next token:
      - temperature == 0: greedy, the argmax (top_k and top_p are then ignored);
      - otherwise divide the logits by temperature, keep only the top_k largest (if top_k is
        given; ties with the k-th largest are kept), then only the smallest set of most
        likely tokens whose probabilities sum to at least top_p (if top_p is given; the most
        likely token is always kept), and sample from the renormalized softmax with
        torch.multinomial(probs, 1, generator=generator).
    Stop early right after emitting eos_token_id (it is included in the output).

    The model never sees more than model.context_length tokens. Without the cache, every step
    feeds the last context_length tokens. With use_cache=True (Task 11.2) the first step feeds
    the (cropped) prompt into model.make_kv_cache(), and each later step feeds only the newest
    token. When the cache is full, the next step starts a fresh cache from the last
    context_length tokens (a full forward, i.e. the no-cache sliding window) so that both
    modes always give the same tokens. Runs under model.eval() and torch.no_grad().
    """
    check_nonnegative_int(max_new_tokens, "max_new_tokens", "generate")
    check_nonnegative(temperature, "temperature", "generate")
    if top_k is not None:
        check_positive_int(top_k, "top_k", "generate")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"generate: top_p must be a number in (0, 1], got {top_p!r}")
    if not isinstance(prompt_ids, Tensor):
        prompt_ids = torch.tensor(list(prompt_ids), dtype=torch.long)
    check_integer(prompt_ids, "generate", "prompt_ids")
    if prompt_ids.ndim != 1 or prompt_ids.numel() == 0:
        raise ValueError(f"generate: prompt_ids must be a non-empty 1-D sequence of token ids, "
                         f"got shape {tuple(prompt_ids.shape)}")
    raise NotImplementedError("Task 11.1 is not implemented yet: write generate in minilm/generation.py")

