"""Task 9: language-model batches from a long array of token ids (notebooks/09_data.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Int
from torch import Tensor

from minilm.course.validate import check_positive_int, check_token_array


def get_batch(
    dataset: npt.NDArray[np.integer], batch_size: int, context_length: int, device: str | torch.device = "cpu"
) -> tuple[Int[Tensor, "batch_size context_length"], Int[Tensor, "batch_size context_length"]]:
    """Task 9.1: sample `batch_size` random windows of the token array `dataset`.

    dataset is a 1-D integer numpy array or np.memmap (the whole corpus, possibly larger than
    memory: read only the windows you need). Draw each start offset i uniformly from every
    valid start, 0 … len(dataset) − context_length − 1 inclusive, with torch.randint (so
    torch.manual_seed makes batches reproducible). Return (x, y), both int64 (torch.long)
    tensors of shape (batch_size, context_length) on `device`:
        x[b] = dataset[i : i + context_length]
        y[b] = dataset[i + 1 : i + context_length + 1]   (the next token at every position)
    """
    check_positive_int(batch_size, "batch_size", "get_batch")
    check_positive_int(context_length, "context_length", "get_batch")
    check_token_array(dataset, context_length, "get_batch")
    raise NotImplementedError("Task 9.1 is not implemented yet: write get_batch in minilm/data.py")
