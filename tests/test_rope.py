import pytest
import torch
from helpers import assert_close, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm

even_dims = st.integers(1, 8).map(lambda h: 2 * h)


@pytest.mark.task("5.1")
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_rope_returns_the_dtype_it_is_given(dtype):
    x = randn((2, 5, 8), 3).to(dtype)
    assert minilm.rope(x, torch.arange(5), 10000.0).dtype == dtype


@pytest.mark.task("5.1")
def test_rope_rotates_adjacent_pairs_by_position_times_frequency():
    """Hand-computed: at position 1 with d_k = 4, pair 0 turns by 1 rad and pair 1 by θ^(-1/2)."""
    theta = 100.0
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    y = minilm.rope(x, torch.tensor([1]), theta)
    a0, a1 = torch.tensor(1.0), torch.tensor(theta ** -0.5)
    assert_close(y, torch.stack([a0.cos(), a0.sin(), a1.cos(), a1.sin()])[None])


@pytest.mark.task("5.1")
def test_rope_angles_by_hand():
    """d_k = 4, θ = 100: pair 0 turns by 1 rad per position, pair 1 by 100^(−2/4) = 0.1 rad."""
    angles = minilm.rope_angles(torch.tensor([0, 1, 3]), 4, 100.0)
    assert isinstance(angles, torch.Tensor) and angles.dtype == torch.float32, "rope_angles must return float32 angles"
    assert_close(angles, torch.tensor([[0.0, 0.0], [1.0, 0.1], [3.0, 0.3]]),
                 what="rope_angles([0, 1, 3], d_k=4, θ=100)")


@pytest.mark.task("5.1")
@given(d=even_dims, seed=seeds)
def test_rope_angles_take_batched_positions(d, seed):
    """Positions of any shape, here (batch, seq) with other positions in each row: row b's angles are
    the angles of row b's positions alone."""
    pos = torch.randint(0, 500, (3, 5), generator=torch.Generator().manual_seed(seed))
    angles = minilm.rope_angles(pos, d, 500.0)
    assert isinstance(angles, torch.Tensor) and angles.shape == (3, 5, d // 2), \
        f"rope_angles of positions (3, 5) must have shape (3, 5, {d // 2}), got {getattr(angles, 'shape', angles)}"
    for b in range(3):
        assert_close(angles[b], minilm.rope_angles(pos[b], d, 500.0), what=f"batch row {b}'s angles")


@pytest.mark.task("5.1")
def test_rope_leaves_position_zero_unchanged():
    x = randn((3, 1, 8), 0)
    assert_close(minilm.rope(x, torch.tensor([0])), x)


@pytest.mark.task("5.1")
@given(d=even_dims, seed=seeds)
def test_rope_preserves_norms(d, seed):
    x = randn((4, 6, d), seed)
    y = minilm.rope(x, torch.arange(6) * 7)
    assert_close(y.norm(dim=-1), x.norm(dim=-1))


@pytest.mark.task("5.1")
@given(d=even_dims, m=st.integers(0, 200), n=st.integers(0, 200), shift=st.integers(0, 200), seed=seeds)
def test_rope_dot_product_depends_only_on_relative_position(d, m, n, shift, seed):
    q, k = randn((d,), seed), randn((d,), seed + 1)

    def score(i, j):
        return minilm.rope(q[None], torch.tensor([i])) @ minilm.rope(k[None], torch.tensor([j])).T

    assert_close(score(m, n), score(m + shift, n + shift), atol=1e-4)


@pytest.mark.task("5.1")
def test_rope_broadcasts_positions_over_heads():
    x = randn((2, 3, 5, 8), 1)  # (batch, heads, seq, d_k)
    pos = torch.tensor([[0, 1, 2, 3, 4], [9, 8, 7, 6, 5]]).unsqueeze(1)  # (batch, 1, seq)
    y = minilm.rope(x, pos)
    for b in range(2):  # each batch row rotated by its own positions, the same for every head
        assert_close(y[b], minilm.rope(x[b], pos[b, 0]))


@pytest.mark.task("5.1")
@given(seed=seeds)
def test_rope_takes_batched_positions(seed):
    """token_positions (batch, seq), other positions in each row: row b is rotated by its own positions."""
    x = randn((3, 5, 8), seed)
    pos = torch.randint(0, 1000, (3, 5), generator=torch.Generator().manual_seed(seed))
    y = minilm.rope(x, pos)
    for b in range(3):
        assert_close(y[b], minilm.rope(x[b], pos[b]), what=f"batch row {b} with its own positions")


@pytest.mark.task("5.2")
def test_RotaryPositionalEmbedding_takes_batched_positions():
    module = minilm.RotaryPositionalEmbedding(500.0, 16, 40)
    x = randn((3, 7, 16), 3)
    pos = torch.tensor([[39, 0, 3, 3, 12, 1, 20], [0, 1, 2, 3, 4, 5, 6], [7, 7, 7, 30, 31, 32, 33]])  # (batch, seq)
    y = module(x, pos)
    for b in range(3):
        assert_close(y[b], module(x[b], pos[b]), what=f"batch row {b} with its own positions")
    x = randn((3, 2, 7, 16), 4)  # (batch, heads, seq, d_k) with positions (batch, 1, seq), as attention calls it
    assert_close(module(x, pos[:, None]), minilm.rope(x, pos[:, None], 500.0), what="positions (3, 1, 7) over 2 heads")


@pytest.mark.task("5.2")
def test_RotaryPositionalEmbedding_matches_rope_and_has_no_state():
    module = minilm.RotaryPositionalEmbedding(500.0, 16, 40)
    assert len(module.state_dict()) == 0, "cos/sin buffers must be non-persistent"
    x = randn((2, 7, 16), 2)
    pos = torch.tensor([39, 0, 3, 3, 12, 1, 20])
    assert_close(module(x, pos), minilm.rope(x, pos, 500.0))


@pytest.mark.task("5.2")
def test_RotaryPositionalEmbedding_precomputes_its_tables():
    module = minilm.RotaryPositionalEmbedding(10000.0, 8, 32)
    buffers = dict(module.named_buffers())
    assert buffers, "precompute cos and sin as buffers in __init__"
    assert all(b.shape[0] == 32 for b in buffers.values())
