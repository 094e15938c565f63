"""Hidden tests for the architecture tasks 1.1–8.1."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import minilm
from minilm import oracles

task = pytest.mark.task


def randn(*shape, seed, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def close(got, want, atol=1e-5, rtol=1e-4):
    assert isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}"
    assert got.shape == want.shape, f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    torch.testing.assert_close(got.detach().double(), want.detach().double(), atol=atol, rtol=rtol)


def truncated_normal_ok(w, std):
    w = w.detach().double()
    assert w.abs().max() <= 3 * std * 1.0001
    assert abs(w.std().item() / (0.9866 * std) - 1) < 0.06
    assert abs(w.mean().item()) < 0.05 * std


# ---------------------------------------------------------------- 1


@task("1.1")
@pytest.mark.parametrize("shape, d_out", [((5, 1, 3), 9), ((1,), 4), ((2, 2, 2, 6), 1)])
def test_linear_shapes(shape, d_out):
    x, w = randn(*shape, seed=101), randn(d_out, shape[-1], seed=102)
    close(minilm.linear(x, w), F.linear(x, w))


@task("1.1")
def test_linear_float64_and_noncontiguous():
    x = randn(6, 4, seed=103, dtype=torch.float64).T  # (4, 6), not contiguous
    w = randn(6, 3, seed=104, dtype=torch.float64).T  # (3, 6), not contiguous
    y = minilm.linear(x, w)
    assert y.dtype == torch.float64
    close(y, F.linear(x, w), atol=1e-12, rtol=1e-12)


@task("1.2")
def test_Linear_shapes_init_and_dtype():
    layer = minilm.Linear(300, 700)
    assert list(layer.state_dict()) == ["weight"] and tuple(layer.weight.shape) == (700, 300)
    truncated_normal_ok(layer.weight, math.sqrt(2 / 1000))
    x = randn(2, 1, 300, seed=105)
    close(layer(x), F.linear(x, layer.weight))
    assert minilm.Linear(3, 2, dtype=torch.float64).weight.dtype == torch.float64


# ---------------------------------------------------------------- 2


@task("2.1")
def test_embedding_shapes_and_repeats():
    w = randn(37, 5, seed=201)
    for ids in (torch.tensor([36, 0, 36, 36]), torch.randint(0, 37, (2, 3, 4), generator=torch.Generator().manual_seed(202))):
        close(minilm.embedding(ids, w), F.embedding(ids, w))


@task("2.2")
def test_Embedding_init_lookup_and_grad():
    emb = minilm.Embedding(4000, 16)
    assert list(emb.state_dict()) == ["weight"] and tuple(emb.weight.shape) == (4000, 16)
    truncated_normal_ok(emb.weight, 1.0)
    ids = torch.tensor([[3999, 7], [7, 0]])
    out = emb(ids)
    close(out, F.embedding(ids, emb.weight))
    out.sum().backward()
    assert emb.weight.grad[7].eq(2).all() and emb.weight.grad[1].eq(0).all()


# ---------------------------------------------------------------- 3


@task("3.1")
@pytest.mark.parametrize("shape, eps", [((7, 3), 1e-5), ((1, 2, 1, 33), 1e-2), ((5,), 1e-6)])
def test_rms_norm_eps_and_shapes(shape, eps):
    x, w = randn(*shape, seed=301) - 0.3, randn(shape[-1], seed=302)
    close(minilm.rms_norm(x, w, eps), oracles.rms_norm(x, w, eps))


@task("3.1")
def test_rms_norm_float16_keeps_dtype():
    x, w = randn(3, 64, seed=303, scale=4.0).half(), randn(64, seed=304).half()
    y = minilm.rms_norm(x, w)
    assert y.dtype == torch.float16
    close(y.float(), oracles.rms_norm(x.float(), w.float()), atol=1e-2, rtol=1e-2)


@task("3.2")
def test_RMSNorm_gain_is_learned():
    norm = minilm.RMSNorm(13, eps=3e-3)
    assert torch.equal(norm.weight.detach(), torch.ones(13))
    x = randn(4, 13, seed=305, scale=0.01)
    y = norm(x)
    close(y, oracles.rms_norm(x, norm.weight, 3e-3))
    y.pow(2).sum().backward()
    assert norm.weight.grad is not None and norm.weight.grad.abs().sum() > 0


# ---------------------------------------------------------------- 4


@task("4.1")
def test_silu_extremes_and_float64():
    x = torch.tensor([-1e3, -30.0, -1e-8, 0.0, 1e-8, 30.0, 1e3], dtype=torch.float64)
    y = minilm.silu(x)
    assert y.dtype == torch.float64 and torch.isfinite(y).all()
    close(y, F.silu(x), atol=1e-12, rtol=1e-12)


@task("4.2")
def test_swiglu_other_shapes():
    d_model, d_ff = 6, 11
    w1, w2, w3 = randn(d_ff, d_model, seed=401), randn(d_model, d_ff, seed=402), randn(d_ff, d_model, seed=403)
    x = randn(2, 1, 4, d_model, seed=404)
    close(minilm.swiglu(x, w1, w2, w3), oracles.swiglu(x, w1, w2, w3))


@task("4.3")
def test_SwiGLU_module():
    ffn = minilm.SwiGLU(12, 20)
    sd = ffn.state_dict()
    assert {k: tuple(v.shape) for k, v in sd.items()} == {"w1.weight": (20, 12), "w2.weight": (12, 20), "w3.weight": (20, 12)}
    x = randn(3, 12, seed=405)
    close(ffn(x), oracles.swiglu(x, sd["w1.weight"], sd["w2.weight"], sd["w3.weight"]))


# ---------------------------------------------------------------- 5


@task("5.1")
@pytest.mark.parametrize("theta", [10000.0, 37.5])
def test_rope_random_positions(theta):
    x = randn(3, 7, 12, seed=501)
    pos = torch.randint(0, 2048, (3, 7), generator=torch.Generator().manual_seed(502))
    close(minilm.rope(x, pos, theta=theta), oracles.rope_complex(x, pos, theta), atol=1e-4)


@task("5.1")
def test_rope_keeps_norms_and_position_zero():
    x = randn(5, 2, seed=503)
    y = minilm.rope(x, torch.zeros(5, dtype=torch.long))
    close(y, x)
    z = minilm.rope(x, torch.arange(5))
    close(z.norm(dim=-1), x.norm(dim=-1))


@task("5.2")
def test_RotaryPositionalEmbedding_long_context():
    module = minilm.RotaryPositionalEmbedding(500.0, 6, 4096)
    assert len(module.state_dict()) == 0
    x = randn(2, 4, 6, seed=504)
    pos = torch.tensor([[4095, 0, 1, 2048], [3, 3, 3, 3]])
    close(module(x, pos), oracles.rope_complex(x, pos, 500.0), atol=1e-4)


# ---------------------------------------------------------------- 6


@task("6.1")
def test_softmax_dims_and_infinities():
    x = randn(2, 3, 4, 5, seed=601)
    for dim in (2, -3):
        close(minilm.softmax(x, dim=dim), F.softmax(x, dim=dim))
    masked = torch.tensor([[0.0, float("-inf"), 1.0], [3e4, -3e4, 3e4]])
    close(minilm.softmax(masked, dim=-1), F.softmax(masked, dim=-1))


@task("6.2")
def test_sdpa_broadcast_mask_and_dv():
    q, k, v = randn(3, 5, 4, seed=602), randn(3, 2, 4, seed=603), randn(3, 2, 9, seed=604)
    close(minilm.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    mask = torch.tensor([[True, False]] * 5)
    close(minilm.scaled_dot_product_attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@task("6.3")
def test_mhsa_one_head_and_explicit_positions():
    for heads, theta in ((1, 100.0), (8, 10000.0)):
        mhsa = minilm.MultiHeadSelfAttention(16, heads, 64, theta)
        x = randn(1, 5, 16, seed=605)
        pos = torch.tensor([10, 11, 12, 40, 41])
        sd = {"attn." + k: v for k, v in mhsa.state_dict().items()}
        close(mhsa(x, pos), oracles.attention(x, sd, "attn.", heads, theta, pos), atol=1e-4)


@task("6.3")
def test_mhsa_output_ignores_later_tokens():
    mhsa = minilm.MultiHeadSelfAttention(8, 2, 16, 10000.0)
    x = randn(1, 6, 8, seed=606)
    y = mhsa(x)
    x2 = x.clone()
    x2[:, 4:] += 5.0
    close(mhsa(x2)[:, :4], y[:, :4])


# ---------------------------------------------------------------- 7–8


@task("7.1")
def test_block_with_positions_and_theta():
    blk = minilm.TransformerBlock(24, 3, 40, 128, 500.0)
    with torch.no_grad():
        blk.ln1.weight.copy_(randn(24, seed=701).abs() + 0.5)
        blk.ln2.weight.copy_(randn(24, seed=702).abs() + 0.5)
    x = randn(2, 6, 24, seed=703)
    pos = torch.tensor([100, 101, 102, 103, 104, 105])
    close(blk(x, pos), oracles.block(x, blk.state_dict(), "", 3, 500.0, pos), atol=1e-4)


@task("8.1")
def test_lm_one_layer_other_shapes():
    lm = minilm.TransformerLM(31, 16, 8, 1, 2, 12, 1000.0)
    assert list(lm.state_dict()) == oracles.lm_state_dict_keys(1)
    assert sum(p.numel() for p in lm.parameters()) == oracles.lm_parameter_count(31, 8, 1, 12)
    ids = torch.randint(0, 31, (3, 16), generator=torch.Generator().manual_seed(801))
    close(lm(ids), oracles.transformer_lm(ids, lm.state_dict(), 2, 1000.0), atol=1e-4)


@task("8.1")
def test_lm_prefix_logits_do_not_see_the_future():
    lm = minilm.TransformerLM(19, 10, 8, 2, 2, 8)
    ids = torch.randint(0, 19, (1, 10), generator=torch.Generator().manual_seed(802))
    close(lm(ids[:, :4]), lm(ids)[:, :4], atol=1e-5)
