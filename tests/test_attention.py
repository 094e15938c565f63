import math

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm


@pytest.mark.task("6.1")
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), seed=seeds, data=st.data())
def test_softmax_matches_F_softmax_on_any_dim(shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = randn(shape, seed, scale=5.0)
    y = minilm.softmax(x, dim=dim)
    assert_close(y, F.softmax(x, dim=dim))
    assert_close(y.sum(dim), torch.ones(()).expand_as(y.sum(dim)))


@pytest.mark.task("6.1")
@given(big=st.floats(80, 1e4), seed=seeds)
def test_softmax_is_stable_for_large_inputs(big, seed):
    x = randn((3, 6), seed) * big
    y = minilm.softmax(x, dim=-1)
    assert torch.isfinite(y).all(), "NaN or inf: subtract the max before exp"
    assert_close(y, F.softmax(x, dim=-1))


@pytest.mark.task("6.1")
def test_softmax_is_shift_invariant():
    x = randn((4, 5), 3)
    assert_close(minilm.softmax(x + 1000.0, dim=-1), minilm.softmax(x, dim=-1))


@pytest.mark.task("6.2")
@given(lead=leading_shapes, nq=st.integers(1, 6), nk=st.integers(1, 6), d_k=st.integers(1, 8),
       d_v=st.integers(1, 8), seed=seeds)
def test_sdpa_matches_torch_without_mask(lead, nq, nk, d_k, d_v, seed):
    q, k, v = randn((*lead, nq, d_k), seed), randn((*lead, nk, d_k), seed + 1), randn((*lead, nk, d_v), seed + 2)
    assert_close(minilm.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.task("6.2")
@given(nq=st.integers(1, 6), nk=st.integers(2, 6), seed=seeds)
def test_sdpa_matches_torch_with_a_boolean_mask(nq, nk, seed):
    q, k, v = randn((2, 3, nq, 4), seed), randn((2, 3, nk, 4), seed + 1), randn((2, 3, nk, 5), seed + 2)
    mask = torch.rand(nq, nk, generator=torch.Generator().manual_seed(seed)) > 0.5
    mask[:, 0] = True  # every query sees at least one key
    assert_close(minilm.scaled_dot_product_attention(q, k, v, mask),
                 F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                 what="attention with a boolean mask (True = may attend) vs F.scaled_dot_product_attention")


@pytest.mark.task("6.2")
def test_sdpa_masked_keys_get_no_weight():
    # v = identity: the output row is the query's attention weights over the 3 keys.
    q, k, v = randn((1, 4), 0), randn((3, 4), 1), torch.eye(3)
    out = minilm.scaled_dot_product_attention(q, k, v, torch.tensor([[True, False, True]]))
    assert out[0, 1] == 0, (f"key 1 has mask False but got attention weight {out[0, 1].item():.3g}: set its score to "
                            "-inf before the softmax (not 0, and do not skip the mask), so its weight is exactly 0")


@pytest.mark.task("6.2")
def test_sdpa_scales_by_sqrt_dk():
    q, k, v = randn((2, 16), 0), randn((3, 16), 1), randn((3, 2), 2)
    want = torch.softmax(q @ k.T / math.sqrt(16), dim=-1) @ v
    assert_close(minilm.scaled_dot_product_attention(q, k, v), want)


def _mhsa(theta=10000.0, d_model=16, heads=4, max_seq_len=32):
    return minilm.MultiHeadSelfAttention(d_model, heads, max_seq_len if theta else None, theta)


@pytest.mark.task("6.3")
def test_mhsa_state_dict_names():
    want = sorted(f"{n}.weight" for n in ("q_proj", "k_proj", "v_proj", "output_proj"))
    got = sorted(_mhsa().state_dict())
    assert got == want, f"MultiHeadSelfAttention's state_dict keys must be {want}, got {got}"


@pytest.mark.task("6.3")
def test_mhsa_head_h_output_fills_columns_h_dk_to_h_plus_1_dk():
    """Each head's output lands in its own columns, at its own position, whatever the attention weights.

    v_proj reads only x's feature 0, which is 1 at every position, so v is the same vector
    (1, 2, …, d_model) at every position and each head's attention output is its slice of that
    vector, however it weighs the keys (the weights sum to 1). With output_proj = I, column c
    must then hold c + 1 at every position: heads merged in another order, or a reshape that
    never moved the heads dim next to d_k, put other numbers there."""
    d_model, heads = 12, 3
    d_k = d_model // heads
    mhsa = _mhsa(None, d_model=d_model, heads=heads)
    with torch.no_grad():
        mhsa.v_proj.weight.zero_()
        mhsa.v_proj.weight[:, 0] = torch.arange(1.0, d_model + 1)
        mhsa.output_proj.weight.copy_(torch.eye(d_model))
    x = randn((2, 5, d_model), 7)
    x[..., 0] = 1.0
    out = mhsa(x)
    assert tuple(out.shape) == (2, 5, d_model), f"expected the output shape (2, 5, {d_model}), got {tuple(out.shape)}"
    want = torch.arange(1.0, d_model + 1).expand(2, 5, d_model)
    wrong = ~torch.isclose(out, want, atol=1e-4)
    if wrong.any():
        b, t, c = (int(i) for i in wrong.nonzero()[0])
        raise AssertionError(
            f"head layout: column {c} at position {t} should hold head {c // d_k}'s output (value {c + 1}), got "
            f"{out[b, t, c].item():.3g}. After attention, move the heads dim back next to d_k and merge as "
            "'… heads seq d_k -> … seq (heads d_k)', so head h fills columns h·d_k … (h+1)·d_k − 1 of its own row")


@pytest.mark.task("6.3")
def test_mhsa_head_h_reads_rows_h_dk_to_h_plus_1_dk():
    """Zero every q/k/v row but head 2's: only head 2's slice of the output may be non-zero."""
    mhsa = _mhsa(None, d_model=12, heads=3)
    with torch.no_grad():
        for proj in (mhsa.q_proj, mhsa.k_proj, mhsa.v_proj):
            proj.weight[:8] = 0
        mhsa.output_proj.weight.copy_(torch.eye(12))
    out = mhsa(randn((1, 5, 12), 5))
    assert torch.all(out[..., :8] == 0) and out[..., 8:].abs().sum() > 0, (
        "head layout: with only rows 8…11 of q_proj, k_proj and v_proj non-zero, only head 2 (of 3, d_k = 4) has "
        "input, so only output columns 8…11 may be non-zero. Split each projection as '… seq (heads d_k)' and "
        "merge the heads back the same way")


@pytest.mark.task("6.3")
def test_mhsa_without_rope_equals_attention_computed_head_by_head():
    """An independent oracle: each head's causal attention by F.scaled_dot_product_attention on
    its own rows of q_proj, k_proj and v_proj, the heads concatenated, then output_proj."""
    d_model, heads = 16, 4
    d_k = d_model // heads
    mhsa = _mhsa(None, d_model=d_model, heads=heads)
    x = randn((2, 6, d_model), 8)
    w = {n: getattr(mhsa, n).weight.detach() for n in ("q_proj", "k_proj", "v_proj", "output_proj")}
    per_head = []
    for h in range(heads):
        rows = slice(h * d_k, (h + 1) * d_k)
        q, k, v = (x @ w[n][rows].T for n in ("q_proj", "k_proj", "v_proj"))
        per_head.append(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    want = torch.cat(per_head, dim=-1) @ w["output_proj"].T
    assert_close(mhsa(x), want, what=(
        "MultiHeadSelfAttention without RoPE vs each head's causal attention (scores / sqrt(d_k), d_k = "
        "d_model / num_heads) concatenated and projected by output_proj"))


@pytest.mark.task("6.3")
@given(t=st.integers(0, 6), seed=seeds)
def test_mhsa_is_causal(t, seed):
    """The output at position t must not change when tokens after t change. One head, so the
    head layout (tested above) cannot move other positions' outputs into row t."""
    mhsa = _mhsa(heads=1)
    x = randn((2, 8, 16), seed)
    y = x.clone()
    y[:, t + 1:] = randn((2, 8 - t - 1, 16), seed + 1)
    assert_close(mhsa(y)[:, : t + 1], mhsa(x)[:, : t + 1], what=(
        f"causal mask: the outputs at positions 0…{t} changed when only the tokens after position {t} changed "
        "(query t may attend to keys 0…t, the diagonal included, and to no later key)"))


@pytest.mark.task("6.3")
def test_mhsa_uses_given_token_positions():
    """RoPE sees only relative positions: shifting every position changes nothing, spreading them does."""
    mhsa = _mhsa()
    x = randn((1, 4, 16), 6)
    default = mhsa(x)
    assert_close(mhsa(x, torch.tensor([5, 6, 7, 8])), default, atol=1e-4, what=(
        "RoPE: positions 5…8 instead of 0…3 changed the output, but attention with RoPE depends only on relative "
        "positions (rotate q and k, not v)"))
    assert not torch.allclose(mhsa(x, torch.tensor([0, 3, 9, 20])), default, atol=1e-3), \
        "the output ignores token_positions: rotate q and k by the given positions"


@pytest.mark.task("6.3")
def test_mhsa_takes_batched_token_positions():
    """token_positions (batch, seq), other positions in each batch row: each row attends with its own
    positions, as if run alone. A batch as large as the number of heads, so positions that reach RoPE
    without a heads axis broadcast against the heads instead of failing."""
    mhsa = _mhsa()  # 4 heads
    x = randn((4, 6, 16), 7)
    pos = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 2, 5, 9, 14, 20], [30, 1, 7, 7, 2, 0], [25, 26, 27, 28, 29, 31]])
    out = mhsa(x, pos)
    for b in range(4):
        assert_close(out[b:b + 1], mhsa(x[b:b + 1], pos[b]), atol=1e-4,
                     what=f"batch row {b} with its own positions {pos[b].tolist()}")
