"""Task 11: generation and the KV cache (notebooks/11_generation.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_floating, check_integer, check_nonnegative_int, check_sampling


def next_token_probs(
    logits: Float[Tensor, "... vocab"],
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Float[Tensor, "... vocab"]:
    """Task 11.1: the distribution the next token is drawn from, for each row of logits.

    Along the last dim (every leading dim is a separate row), in float32 whatever the logits'
    dtype, without changing `logits`:
      - temperature == 0: greedy, probability 1 on the argmax (the first one on ties) and 0
        elsewhere; top_k and top_p are then ignored;
      - otherwise softmax(logits / temperature), restricted
          1. if top_k is given, to the top_k largest logits (ties with the k-th largest are kept),
          2. then, if top_p is given, to the smallest set of most likely tokens whose
             probabilities (after step 1, renormalized) sum to at least top_p: a token is
             dropped only when the tokens more likely than it already reach top_p, so the one
             whose cumulative probability crosses top_p is kept, and so is the most likely,
        and renormalized: the dropped tokens get probability 0 and each row sums to 1.
    """
    check_floating(logits, "logits", "next_token_probs")
    check_sampling(temperature, top_k, top_p, "next_token_probs")
    raise NotImplementedError("Task 11.1 is not implemented yet: write next_token_probs in minilm/generation.py")


def generate(
    model: nn.Module,
    prompt_ids: Int[Tensor, " prompt"] | Sequence[int],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> Int[Tensor, " total"]:
    """Task 11.2: continue `prompt_ids` by up to max_new_tokens tokens, one at a time.

    Returns a 1-D LongTensor: the prompt followed by the new token ids (prompt_ids may be a
    1-D tensor or a Python list of ints). Each step takes the logits at the last position,
    probs = next_token_probs(those logits, temperature, top_k, top_p) (Task 11.1), and picks
    the next token: probs.argmax() when temperature == 0 (greedy needs no draw), otherwise
    torch.multinomial(probs, 1, generator=generator). Stop early right after emitting
    eos_token_id (it is included in the output). Runs under model.eval() and torch.no_grad().

    The model never sees more than model.context_length tokens. With use_cache=False every
    step feeds the last context_length tokens (at most). With use_cache=True (checked in Task
    11.3, once the cache works) the first step feeds the (cropped) prompt into a fresh
    model.make_kv_cache(), and each later step feeds only the newest token with that cache.
    When the cache is full, the next step starts a fresh cache from the last context_length
    tokens (a full forward, as without the cache), so both modes give the same tokens.
    """
    check_nonnegative_int(max_new_tokens, "max_new_tokens", "generate")
    check_sampling(temperature, top_k, top_p, "generate")
    if not isinstance(prompt_ids, Tensor):
        prompt_ids = torch.tensor(list(prompt_ids), dtype=torch.long)
    check_integer(prompt_ids, "generate", "prompt_ids")
    if prompt_ids.ndim != 1 or prompt_ids.numel() == 0:
        raise ValueError(f"generate: prompt_ids must be a non-empty 1-D sequence of token ids, "
                         f"got shape {tuple(prompt_ids.shape)}")
    raise NotImplementedError("Task 11.2 is not implemented yet: write generate in minilm/generation.py")


class KVCache:
    """Task 11.3: one attention layer's keys and values for the tokens seen so far.

    update(k, v) appends this step's keys and values (shape (..., heads, new, d_k)) along the
    sequence dim and returns all of them, (..., heads, cached + new, d_k); len(cache) is how many
    positions are cached (0 when new). Task 11.3 also writes the cache's path through the model:
    MultiHeadSelfAttention.forward (minilm/attention.py) calls update with its k after RoPE, and
    positions continue from len(cache) (see its docstring and TransformerLM.forward's).
    """

    def __init__(self):
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def update(
        self, k: Float[Tensor, "... heads new d_k"], v: Float[Tensor, "... heads new d_k"]
    ) -> tuple[Float[Tensor, "... heads seq d_k"], Float[Tensor, "... heads seq d_k"]]:
        raise NotImplementedError("Task 11.3 is not implemented yet: write KVCache.update in minilm/generation.py")

    def __len__(self) -> int:
        raise NotImplementedError("Task 11.3 is not implemented yet: write KVCache.__len__ in minilm/generation.py")
