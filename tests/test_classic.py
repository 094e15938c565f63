"""Notebook 13: the classic Transformer's pieces (13.1–13.4) and the configurable block and LM
(13.5–13.6), against PyTorch's own LayerNorm and GELU, the paper's formula written out with
Python's math, and the course's TransformerLM."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

import minilm
from minilm.course.exercises import lm_state_dict_keys
from minilm.course.exercises.classic import classic_lm_keys, classic_parameter_count

SMALL = dict(vocab_size=61, context_length=16, d_model=16, num_layers=2, num_heads=2)


def _cfg(**changes):
    return minilm.ClassicConfig(**(SMALL | changes))


# ---------------------------------------------------------------- 13.1 LayerNorm


@pytest.mark.task("13.1")
@given(shape=leading_shapes, d=st.integers(2, 33), seed=seeds, scale=st.sampled_from([1e-2, 1.0, 30.0]))
def test_layer_norm_matches_torch(shape, d, seed, scale):
    x = randn((*shape, d), seed, scale) + scale
    w, b = randn((d,), seed + 1), randn((d,), seed + 2)
    assert_close(minilm.layer_norm(x, w, b), F.layer_norm(x, (d,), w, b, 1e-5), atol=1e-4)


@pytest.mark.task("13.1")
@given(seed=seeds, shift=st.floats(-100, 100))
def test_layer_norm_output_has_zero_mean_and_unit_variance_and_ignores_a_shift(seed, shift):
    x = randn((3, 24), seed, 2.0)
    ones, zeros = torch.ones(24), torch.zeros(24)
    y = minilm.layer_norm(x, ones, zeros)
    assert_close(y.mean(-1), torch.zeros(3), atol=1e-5)
    assert_close(y.pow(2).mean(-1), torch.ones(3), atol=1e-3)  # biased variance: mean of squares is 1 (up to eps)
    assert_close(minilm.layer_norm(x + shift, ones, zeros), y, atol=5e-4)


@pytest.mark.task("13.1")
def test_LayerNorm_module():
    norm = minilm.LayerNorm(8, eps=1e-3)
    assert sorted(norm.state_dict()) == ["bias", "weight"]
    assert torch.equal(norm.weight.detach(), torch.ones(8)) and torch.equal(norm.bias.detach(), torch.zeros(8))
    with torch.no_grad():
        norm.weight.copy_(randn((8,), 1))
        norm.bias.copy_(randn((8,), 2))
    x = randn((2, 5, 8), 3)
    assert_close(norm(x), F.layer_norm(x, (8,), norm.weight, norm.bias, 1e-3), atol=1e-5)
    assert all(p.requires_grad for p in norm.parameters())
    with pytest.raises(ValueError, match=r"LayerNorm: the last dim of x must be d_model=8"):
        norm(torch.zeros(2, 7))


@pytest.mark.task("13.1")
def test_layer_norm_keeps_low_precision_dtypes():
    x = randn((4, 16), 5, 3.0).to(torch.bfloat16)
    y = minilm.layer_norm(x, torch.ones(16, dtype=torch.bfloat16), torch.zeros(16, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16
    assert_close(y.float(), F.layer_norm(x.float(), (16,)), atol=3e-2, rtol=3e-2)


# ---------------------------------------------------------------- 13.2 sinusoidal positions


def _paper(p: int, k: int, d: int) -> float:
    """Vaswani et al. §3.5, written out: dim k = 2i (sin) or 2i + 1 (cos) of position p."""
    i = k // 2
    angle = p / 10000 ** (2 * i / d)
    return math.sin(angle) if k % 2 == 0 else math.cos(angle)


@pytest.mark.task("13.2")
@given(seq=st.integers(1, 40), half=st.integers(1, 12))
def test_sinusoidal_positions_follow_the_paper(seq, half):
    d = 2 * half
    pe = minilm.sinusoidal_positions(seq, d)
    assert pe.shape == (seq, d) and pe.dtype == torch.float32
    want = torch.tensor([[_paper(p, k, d) for k in range(d)] for p in range(seq)])
    assert_close(pe, want, atol=1e-6)


@pytest.mark.task("13.2")
def test_sinusoidal_offsets_are_rotations():
    """The paper's reason for the form: PE[p + k] is a fixed linear map (a rotation per pair) of PE[p]."""
    d, k = 16, 5
    pe = minilm.sinusoidal_positions(40, d).double()
    freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(k * freqs), torch.sin(k * freqs)
    sin_p, cos_p = pe[:-k, 0::2], pe[:-k, 1::2]
    assert_close(pe[k:, 0::2], sin_p * c + cos_p * s, atol=1e-5)
    assert_close(pe[k:, 1::2], cos_p * c - sin_p * s, atol=1e-5)


@pytest.mark.task("13.2")
def test_sinusoidal_positions_refuse_bad_sizes():
    with pytest.raises(ValueError, match=r"sinusoidal_positions: d_model must be even .*got d_model=7"):
        minilm.sinusoidal_positions(4, 7)
    with pytest.raises(ValueError, match=r"sinusoidal_positions: seq_len must be a positive integer, got 0"):
        minilm.sinusoidal_positions(0, 8)


# ---------------------------------------------------------------- 13.3–13.4 GELU


@pytest.mark.task("13.3")
@given(shape=leading_shapes, seed=seeds, scale=st.sampled_from([0.1, 1.0, 10.0]))
def test_gelu_matches_torch_exact_form(shape, seed, scale):
    x = randn((*shape, 3), seed, scale)
    assert_close(minilm.gelu(x), F.gelu(x), atol=1e-6)
    x64 = x.double()
    got = minilm.gelu(x64)
    assert got.dtype == torch.float64
    assert_close(got, F.gelu(x64), atol=1e-12)


@pytest.mark.task("13.3")
def test_gelu_is_x_times_the_normal_cdf():
    x = torch.linspace(-5, 5, 41, dtype=torch.float64)
    phi = torch.distributions.Normal(0.0, 1.0).cdf(x)
    assert_close(minilm.gelu(x), x * phi, atol=1e-12)
    assert minilm.gelu(torch.tensor(-0.75)).item() < 0  # GELU dips below zero, unlike ReLU


@pytest.mark.task("13.4")
@given(d=st.integers(1, 12), f=st.integers(1, 30), seed=seeds)
def test_GeluFFN_matches_torch(d, f, seed):
    ffn = minilm.GeluFFN(d, f)
    assert sorted(ffn.state_dict()) == ["w1.weight", "w2.weight"]
    assert ffn.w1.weight.shape == (f, d) and ffn.w2.weight.shape == (d, f)
    x = randn((2, 3, d), seed)
    assert_close(ffn(x), F.linear(F.gelu(F.linear(x, ffn.w1.weight)), ffn.w2.weight), atol=1e-5)


@pytest.mark.task("13.4")
@pytest.mark.parametrize("d", [48, 64, 96, 128])
def test_gelu_and_swiglu_ffns_have_matched_parameters(d):
    """4d GELU: 2 · d · 4d = 8d². SwiGLU at round(8d/3): 3 · d · round(8d/3), within d of 8d²."""
    gelu_ffn = minilm.GeluFFN(d, _cfg(d_model=d, ffn="gelu").hidden)
    swiglu = minilm.SwiGLU(d, _cfg(d_model=d).hidden)
    n_gelu, n_swiglu = (sum(p.numel() for p in m.parameters()) for m in (gelu_ffn, swiglu))
    assert n_gelu == 8 * d * d
    assert abs(n_swiglu - n_gelu) <= d


# ---------------------------------------------------------------- 13.5 ClassicBlock


def _with_gains(module, seed):
    """Distinct norm gains and biases, so a shared or swapped norm shows."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if ".ln" in f".{name}" and p.ndim == 1:
                p.copy_((1 if name.endswith("weight") else 0) + 0.3 * randn(p.shape, seed + len(name)))
    return module  # now with distinct gains


@pytest.mark.task("13.5")
def test_modern_block_is_the_TransformerBlock():
    torch.manual_seed(0)
    blk = _with_gains(minilm.ClassicBlock(_cfg(d_ff=24)), 1)
    ref = minilm.TransformerBlock(16, 2, 24, 16, 10000.0)
    assert list(blk.state_dict()) == list(ref.state_dict())
    ref.load_state_dict(blk.state_dict())
    x = randn((2, 9, 16), 2)
    assert_close(blk(x), ref(x), atol=1e-5)


@pytest.mark.task("13.5")
@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_post_norm_block_output_is_normalized(norm):
    """Post-norm ends in ln2: with gain 1 and bias 0, every token's output has RMS 1 (and mean 0 with LayerNorm)."""
    blk = minilm.ClassicBlock(_cfg(norm_position="post", norm=norm))
    y = blk(randn((2, 7, 16), 3, 5.0))
    assert_close(y.pow(2).mean(-1), torch.ones(2, 7), atol=1e-3)
    if norm == "layernorm":
        assert_close(y.mean(-1), torch.zeros(2, 7), atol=1e-5)


@pytest.mark.task("13.5")
@pytest.mark.parametrize("position", ["pre", "post"])
def test_block_with_zero_sublayers(position):
    """Zero the output projections: pre-norm passes x through untouched, post-norm normalizes it twice."""
    blk = _with_gains(minilm.ClassicBlock(_cfg(norm_position=position, norm="layernorm", ffn="gelu")), 4)
    with torch.no_grad():
        blk.attn.output_proj.weight.zero_()
        blk.ffn.w2.weight.zero_()
    x = randn((1, 5, 16), 5)
    if position == "pre":
        assert_close(blk(x), x)
    else:
        assert_close(blk(x), F.layer_norm(F.layer_norm(x, (16,), blk.ln1.weight, blk.ln1.bias),
                                          (16,), blk.ln2.weight, blk.ln2.bias), atol=1e-5)


@pytest.mark.task("13.5")
def test_block_parts_follow_the_config():
    blk = minilm.ClassicBlock(_cfg(norm="layernorm", ffn="gelu", positions="sinusoidal"))
    assert sorted(blk.ln1.state_dict()) == ["bias", "weight"]
    assert sorted(blk.ffn.state_dict()) == ["w1.weight", "w2.weight"] and blk.ffn.w1.weight.shape == (64, 16)
    assert blk.attn.rope is None, "RoPE only when config.positions == 'rope'"
    assert minilm.ClassicBlock(_cfg()).attn.rope is not None
    with pytest.raises(TypeError, match="ClassicBlock: config must be a ClassicConfig, got dict"):
        minilm.ClassicBlock(dict(SMALL))


# ---------------------------------------------------------------- 13.6 ClassicLM

ONE_CHANGE = [{}, dict(norm_position="post"), dict(norm="layernorm"), dict(ffn="gelu"), dict(positions="sinusoidal"),
              dict(positions="learned"), dict(positions="none"), dict(tied_head=True)]


@pytest.mark.task("13.6")
def test_modern_configuration_is_the_TransformerLM():
    """Same state_dict names and shapes, and the same logits once the weights are copied over."""
    cfg = _cfg(d_ff=24)
    torch.manual_seed(0)
    lm = minilm.ClassicLM(cfg)
    ref = minilm.TransformerLM(61, 16, 16, 2, 2, 24)
    assert list(lm.state_dict()) == list(ref.state_dict()) == lm_state_dict_keys(2)
    assert {k: v.shape for k, v in lm.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    with torch.no_grad():
        for p in lm.parameters():
            p.add_(0.1 * torch.randn_like(p))  # move off the initialization, so nothing matches by accident
    ref.load_state_dict(lm.state_dict())
    ids = torch.randint(0, 61, (3, 16))
    assert_close(lm(ids), ref(ids), atol=1e-5)


@pytest.mark.task("13.6")
@pytest.mark.parametrize("changes", ONE_CHANGE + [dict(norm_position="post", norm="layernorm", ffn="gelu",
                                                       positions="sinusoidal", tied_head=True)],
                         ids=lambda c: "-".join(f"{v}" for v in c.values()) or "modern")
def test_state_dict_and_parameter_count_follow_the_config(changes):
    cfg = _cfg(**changes)
    lm = minilm.ClassicLM(cfg)
    assert list(lm.state_dict()) == classic_lm_keys(cfg)
    assert sum(p.numel() for p in lm.parameters()) == classic_parameter_count(cfg)
    assert lm(torch.randint(0, 61, (2, 16))).shape == (2, 16, 61)


@pytest.mark.task("13.6")
def test_tied_head_shares_the_embedding_through_training():
    lm = minilm.ClassicLM(_cfg(tied_head=True))
    assert lm.lm_head.weight is lm.token_embeddings.weight
    opt = torch.optim.SGD(lm.parameters(), lr=0.1)
    ids = torch.randint(0, 61, (2, 10))
    F.cross_entropy(lm(ids).flatten(0, 1), ids.flatten()).backward()
    opt.step()
    assert lm.lm_head.weight is lm.token_embeddings.weight
    # The same function as the untied model whose head holds the embedding divided by √d.
    untied = minilm.ClassicLM(_cfg())
    state = dict(lm.state_dict())
    state["lm_head.weight"] = state["token_embeddings.weight"] / math.sqrt(16)
    untied.load_state_dict(state)
    assert_close(lm(ids), untied(ids), atol=1e-5)


@pytest.mark.task("13.6")
def test_sinusoidal_positions_are_added_to_the_embeddings():
    """With zeroed blocks and a post-norm model, the logits are a function of embedding + PE only."""
    lm = minilm.ClassicLM(_cfg(positions="sinusoidal", norm_position="post", norm="layernorm", num_layers=1))
    with torch.no_grad():
        lm.layers[0].attn.output_proj.weight.zero_()
        lm.layers[0].ffn.w2.weight.zero_()
    ids = torch.randint(0, 61, (2, 9))
    x = lm.token_embeddings.weight[ids] + minilm.sinusoidal_positions(9, 16)
    want = F.linear(F.layer_norm(F.layer_norm(x, (16,)), (16,)), lm.lm_head.weight)
    assert_close(lm(ids), want, atol=1e-4)
    assert not any("sinus" in k for k in lm.state_dict()), "sinusoidal positions are derived, not learned"


@pytest.mark.task("13.6")
@pytest.mark.parametrize("changes", ONE_CHANGE[1:], ids=lambda c: "-".join(f"{v}" for v in c.values()))
@settings(max_examples=5)  # 7 configurations: a few examples each is plenty
@given(t=st.integers(0, 8), seed=seeds)
def test_every_configuration_is_causal_and_batch_independent(changes, t, seed):
    torch.manual_seed(seed)
    lm = minilm.ClassicLM(_cfg(**changes))
    ids = torch.randint(0, 61, (3, 10))
    changed = ids.clone()
    changed[:, t + 1:] = (changed[:, t + 1:] + 1) % 61
    full = lm(ids)
    assert_close(lm(changed)[:, : t + 1], full[:, : t + 1], atol=1e-5)
    assert_close(lm(ids[1:2]), full[1:2], atol=1e-5)


@pytest.mark.task("13.6")
def test_bad_configurations_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match=r"ClassicConfig: norm must be one of 'rmsnorm', 'layernorm', got 'ln'"):
        _cfg(norm="ln")
    with pytest.raises(ValueError, match=r"ClassicConfig: positions must be one of 'rope', 'sinusoidal', 'learned', "
                                         r"'none', got 'alibi'"):
        _cfg(positions="alibi")
    with pytest.raises(ValueError, match=r"ClassicConfig: d_model must be divisible by num_heads"):
        minilm.ClassicConfig(61, 16, 18, 1, 4)
    with pytest.raises(ValueError, match=r"ClassicLM: the sequence has 17 tokens, more than context_length=16"):
        minilm.ClassicLM(_cfg())(torch.zeros(1, 17, dtype=torch.long))
