"""Task 8: the Transformer language model (notebooks/08_model.ipynb)."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_fits_context, check_positive, check_positive_int, check_token_ids

from .block import TransformerBlock
from .embedding import Embedding
from .generation import KVCache
from .linear import Linear
from .rmsnorm import RMSNorm


class TransformerLM(nn.Module):
    """Task 8.1: token ids (batch, seq) → next-token logits (batch, seq, vocab_size).

    token_embeddings → num_layers TransformerBlocks (in a ModuleList named `layers`) →
    ln_final → lm_head, a separate (untied) Linear(d_model, vocab_size). Every layer gets the
    same positions, 0 … seq − 1 without a cache.

    kv_cache (notebook 11, Task 11.3): a list with one KVCache per layer (make_kv_cache()), holding
    the tokens before these. Then the positions continue after them, start … start + seq − 1 where
    start = len(kv_cache[0]) (read before the layers update it), and layer i gets kv_cache[i].

    forward calls the submodules, self.lm_head(x), and never reads their weights
    (self.lm_head.weight): notebook 12 (Task 12.3) swaps every Linear for an Int8Linear, which has
    no weight.
    """

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                 d_ff: int, rope_theta: float = 10000.0, device=None, dtype=None):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("context_length", context_length), ("d_model", d_model),
                            ("num_layers", num_layers), ("num_heads", num_heads), ("d_ff", d_ff)):
            check_positive_int(value, name, "TransformerLM")
        check_positive(rope_theta, "rope_theta", "TransformerLM")
        self.vocab_size, self.context_length = vocab_size, context_length
        # BEGIN SOLUTION 8.1
        self.token_embeddings = Embedding(vocab_size, d_model, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta, device=device, dtype=dtype)
            for _ in range(num_layers)
        )
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = Linear(d_model, vocab_size, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "batch seq"], kv_cache: list[KVCache] | None = None
                ) -> Float[Tensor, "batch seq vocab_size"]:
        check_token_ids(token_ids, self.vocab_size, "TransformerLM")
        check_fits_context(token_ids, kv_cache, self.context_length, "TransformerLM")
        # BEGIN SOLUTION 8.1
        start = len(kv_cache[0]) if kv_cache else 0  # tokens already cached come first
        positions = torch.arange(start, start + token_ids.shape[-1], device=token_ids.device)
        x = self.token_embeddings(token_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, kv_cache[i] if kv_cache is not None else None)
        return self.lm_head(self.ln_final(x))
        # END SOLUTION

    def make_kv_cache(self) -> list[KVCache]:
        """An empty KV cache, one KVCache per layer, for forward(..., kv_cache=...)."""
        return [KVCache() for _ in range(len(self.layers))]
