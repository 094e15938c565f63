"""Task 9: language-model batches from a long array of token ids (notebooks/09_data.ipynb)."""

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
    # BEGIN SOLUTION 9.1
    # The last valid start leaves room for the target of the window's last token.
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,)).tolist()
    # Slicing a memmap reads only these windows from disk; int64 because embeddings index with it.
    windows = np.stack([np.asarray(dataset[i : i + context_length + 1], dtype=np.int64) for i in starts])
    windows = torch.from_numpy(windows)  # (batch_size, context_length + 1)
    x, y = windows[:, :-1], windows[:, 1:]
    return x.contiguous().to(device), y.contiguous().to(device)
    # END SOLUTION
