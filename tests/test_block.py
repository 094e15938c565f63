import pytest
import torch
from helpers import assert_close, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm
from minilm.course.exercises import lm_state_dict_keys


def _block():
    blk = minilm.TransformerBlock(16, 4, 24, 32, 10000.0)
    with torch.no_grad():  # distinct norm gains, so ln1/ln2 mix-ups show
        blk.ln1.weight.copy_(1 + 0.3 * randn((16,), 1))
        blk.ln2.weight.copy_(1 + 0.3 * randn((16,), 2))
    return blk


@pytest.mark.task("7.1")
def test_block_state_dict_names():
    want = sorted(k.removeprefix("layers.0.") for k in lm_state_dict_keys(1) if k.startswith("layers.0."))
    got = sorted(_block().state_dict())
    assert got == want, f"TransformerBlock's state_dict keys must be {want}, got {got}"


@pytest.mark.task("7.1")
def test_block_ffn_is_as_wide_as_d_ff():
    """The feed-forward width is the d_ff given, not d_model: SwiGLU(d_model, d_ff)'s three weights."""
    shapes = {k: tuple(v.shape) for k, v in minilm.TransformerBlock(16, 4, 40, 32, 10000.0).state_dict().items()}
    assert (shapes["ffn.w1.weight"], shapes["ffn.w2.weight"], shapes["ffn.w3.weight"]) == ((40, 16), (16, 40), (40, 16))


@pytest.mark.task("7.1")
def test_block_is_sequential_pre_norm():
    """The block composed from its own submodules: h = x + attn(ln1(x)), then h + ffn(ln2(h)).
    The FFN sees the attention's output (sequential, not parallel) and the residual stream is
    never normalized (pre-norm, not post-norm)."""
    blk = _block()
    x = randn((2, 5, 16), 3)
    with torch.no_grad():
        h = x + blk.attn(blk.ln1(x))
        want = h + blk.ffn(blk.ln2(h))
        got = blk(x)
    assert_close(got, want, atol=1e-5, what=(
        "TransformerBlock(x) vs h + ffn(ln2(h)) with h = x + attn(ln1(x)), built from the block's own ln1, attn, "
        "ln2 and ffn (the FFN must see the attention's output, and only the sublayers' inputs are normalized)"))


@pytest.mark.task("7.1")
def test_block_with_zero_sublayers_is_the_identity():
    """Pre-norm keeps a clean residual path: zero the output projections and x passes unchanged."""
    blk = _block()
    with torch.no_grad():
        blk.attn.output_proj.weight.zero_()
        blk.ffn.w2.weight.zero_()
    x = randn((1, 5, 16), 4)
    assert_close(blk(x), x, what="the block with zeroed output_proj and w2 (a pre-norm block then returns x unchanged)")


@pytest.mark.task("7.1")
@given(seed=seeds, batch=st.integers(2, 4))
def test_block_is_deterministic_and_batch_independent(seed, batch):
    blk = _block()
    x = randn((batch, 5, 16), seed)
    full = blk(x)
    assert_close(blk(x), full, what="a second call on the same x")
    for i in range(batch):
        assert_close(blk(x[i : i + 1]), full[i : i + 1], what=f"batch row {i} run alone vs within the batch")
