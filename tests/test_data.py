import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minilm


@pytest.mark.task("9.1")
def test_shapes_dtype_and_shift():
    data = np.arange(100, dtype=np.int64)
    x, y = minilm.get_batch(data, 5, 7, "cpu")
    assert x.shape == y.shape == (5, 7)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1), "y must be x shifted by one token"
    assert torch.equal(x[:, 1:], x[:, :-1] + 1), "each row must be a contiguous window"


@pytest.mark.task("9.1")
def test_every_valid_start_is_drawn_uniformly():
    data = np.arange(12, dtype=np.int64)  # context 8: valid starts 0, 1, 2, 3
    torch.manual_seed(0)
    starts = minilm.get_batch(data, 4000, 8, "cpu")[0][:, 0]
    counts = torch.bincount(starts, minlength=4)
    assert counts.shape[0] == 4, \
        f"starts beyond the last valid one (3 = len(dataset) − context_length − 1): {starts.max()}"
    assert counts[3] > 0, ("the last valid start, 3 = len(dataset) − context_length − 1, was never drawn in 4000 "
                           "batches "
                           f"(counts of starts 0…3: {counts.tolist()}): torch.randint's high is exclusive, so "
                           "torch.randint(0, len(dataset) − context_length, …) already includes it")
    assert (counts > 850).all() and (counts < 1150).all(), f"starts are not uniform over 0…3: {counts.tolist()}"


@pytest.mark.task("9.1")
@given(n=st.integers(2, 60), context_length=st.integers(1, 20), batch_size=st.integers(1, 8), seed=st.integers(0, 999))
def test_windows_come_from_the_dataset(n, context_length, batch_size, seed):
    if n <= context_length:
        n = context_length + 1
    data = np.random.default_rng(seed).integers(0, 50_000, size=n).astype(np.uint16)
    x, y = minilm.get_batch(data, batch_size, context_length, "cpu")
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        starts = [i for i in range(n - context_length) if data[i : i + context_length].tolist() == row_x]
        assert starts, f"x's row {row_x} is not a window dataset[i : i + context_length] of the dataset"
        assert any(data[i + 1 : i + context_length + 1].tolist() == row_y for i in starts), \
            f"y's row {row_y} is not the window after x's row {row_x} (y = dataset[i + 1 : i + 1 + context_length])"


@pytest.mark.task("9.1")
def test_reads_a_memmap_and_is_reproducible(tmp_path):
    path = tmp_path / "tokens.bin"
    np.arange(500, dtype=np.uint16).tofile(path)
    data = np.memmap(path, dtype=np.uint16, mode="r")
    torch.manual_seed(3)
    x1, y1 = minilm.get_batch(data, 3, 16, "cpu")
    torch.manual_seed(3)
    x2, y2 = minilm.get_batch(data, 3, 16, "cpu")
    assert torch.equal(x1, x2) and torch.equal(y1, y2), "torch.manual_seed must make batches reproducible"
    assert x1.dtype == torch.long and torch.equal(y1, x1 + 1)


@pytest.mark.task("9.1")
@pytest.mark.parametrize("bad, match", [
    (dict(batch_size=0), "batch_size must be a positive integer, got 0"),
    (dict(context_length=-1), "context_length must be a positive integer"),
    (dict(dataset=np.arange(8)), "more than context_length=8"),
    (dict(dataset=np.zeros((4, 20), dtype=np.int64)), "must be 1-D"),
])
def test_bad_input_is_reported(bad, match):
    args = dict(dataset=np.arange(50), batch_size=2, context_length=8, device="cpu") | bad
    with pytest.raises(ValueError, match=match):
        minilm.get_batch(**args)


@pytest.mark.task("9.1")
def test_float_dataset_is_a_type_error():
    with pytest.raises(TypeError, match="integer token ids"):
        minilm.get_batch(np.linspace(0, 1, 50), 2, 8, "cpu")
