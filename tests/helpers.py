"""Helpers shared by the tests: hypothesis strategies, seeded tensors, a course-worded assert_close."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

seeds = st.integers(0, 2**31 - 1)
small_dims = st.integers(1, 6)
leading_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


def randn(shape, seed: int, scale: float = 1.0, dtype=torch.float32) -> torch.Tensor:
    return (torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64) * scale).to(dtype)


def assert_close(got, want, atol=1e-5, rtol=1e-4, what="output"):
    """torch.testing.assert_close with a message in course terms."""
    assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
    assert got.shape == want.shape, f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    torch.testing.assert_close(got.double(), want.double(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")
