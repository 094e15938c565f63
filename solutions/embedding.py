"""Task 2: the token embedding (notebooks/02_embedding.ipynb)."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import check_positive_int, check_token_ids


def embedding(token_ids: Int[Tensor, "..."], weight: Float[Tensor, "vocab d_model"]) -> Float[Tensor, "... d_model"]:
    """Task 2.1: look up row token_ids[...] of weight, for any shape of token_ids.

    Do not use torch.nn.functional.embedding: the tests compare against it.
    """
    check_token_ids(token_ids, weight.shape[0], "embedding")
    # BEGIN SOLUTION 2.1
    return weight[token_ids]
    # END SOLUTION


class Embedding(nn.Module):
    """Task 2.2: holds `weight` of shape (num_embeddings, embedding_dim).

    Initialize weight from a truncated normal with mean 0 and std 1, cut at ±3.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        super().__init__()
        check_positive_int(num_embeddings, "num_embeddings", "Embedding")
        check_positive_int(embedding_dim, "embedding_dim", "Embedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        # BEGIN SOLUTION 2.2
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "..."]) -> Float[Tensor, "... embedding_dim"]:
        check_token_ids(token_ids, self.num_embeddings, "Embedding")
        # BEGIN SOLUTION 2.2
        return embedding(token_ids, self.weight)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}"
