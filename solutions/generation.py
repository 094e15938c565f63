"""Task 11: generation and the KV cache (notebooks/11_generation.ipynb)."""

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
    # BEGIN SOLUTION 11.1
    logits = logits.float()
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    logits = logits / temperature  # a new tensor: the caller's logits stay as they were
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if top_p is not None:
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        # Drop a token when the tokens more likely than it already sum to top_p.
        drop_sorted = probs.cumsum(dim=-1) - probs >= top_p
        drop = torch.empty_like(drop_sorted).scatter_(-1, order, drop_sorted)  # back to vocab order
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.softmax(logits, dim=-1)
    # END SOLUTION


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
    # BEGIN SOLUTION 11.2
    def choose(logits: Float[Tensor, " vocab"]) -> Int[Tensor, ""]:
        """One token id from the last position's logits."""
        probs = next_token_probs(logits, temperature, top_k, top_p)
        return probs.argmax() if temperature == 0 else torch.multinomial(probs, 1, generator=generator)[0]

    context_length = model.context_length
    device = next(model.parameters()).device
    ids = prompt_ids.to(device=device, dtype=torch.long)  # (total,): grows by one per step
    model.eval()
    cache = None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is not None and len(cache[0]) < context_length:
                logits = model(ids[-1:].unsqueeze(0), kv_cache=cache)  # (1, 1, vocab): only the new token
            else:
                # First step, no cache, or a full cache: one forward over the last context_length tokens.
                cache = model.make_kv_cache() if use_cache else None
                logits = model(ids[-context_length:].unsqueeze(0), kv_cache=cache)  # (1, seq, vocab)
            next_id = choose(logits[0, -1])
            ids = torch.cat((ids, next_id.view(1)))
            if eos_token_id is not None and next_id.item() == eos_token_id:
                break
    return ids
    # END SOLUTION


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
        # BEGIN SOLUTION 11.3
        # torch.cat would copy the whole cache at every step, O(n²) over a generation. Instead,
        # write into buffers with spare room, doubled when full, and return views of their
        # filled part: each position is copied O(1) times on average.
        n, new = len(self), k.shape[-2]
        if self.k is None or n + new > self._k_buf.shape[-2]:
            capacity = max(2 * (n + new), 64)
            k_buf = k.new_empty(*k.shape[:-2], capacity, k.shape[-1])
            v_buf = v.new_empty(*v.shape[:-2], capacity, v.shape[-1])
            if self.k is not None:
                k_buf[..., :n, :], v_buf[..., :n, :] = self.k, self.v
            self._k_buf, self._v_buf = k_buf, v_buf
        self._k_buf[..., n:n + new, :], self._v_buf[..., n:n + new, :] = k, v
        self.k, self.v = self._k_buf[..., :n + new, :], self._v_buf[..., :n + new, :]
        return self.k, self.v
        # END SOLUTION

    def __len__(self) -> int:
        # BEGIN SOLUTION 11.3
        return 0 if self.k is None else self.k.shape[-2]
        # END SOLUTION
