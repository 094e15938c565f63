import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import minilm
from helpers import assert_check_passes, assert_close, randn, seeds
from minilm.course.checks_model import lm_state_dict_keys


def _block():
    blk = minilm.TransformerBlock(16, 4, 24, 32, 10000.0)
    with torch.no_grad():  # distinct norm gains, so ln1/ln2 mix-ups show
        blk.ln1.weight.copy_(1 + 0.3 * randn((16,), 1))
        blk.ln2.weight.copy_(1 + 0.3 * randn((16,), 2))
    return blk


@pytest.mark.task("7.1")
def test_block_state_dict_names():
    want = [k.removeprefix("layers.0.") for k in lm_state_dict_keys(1) if k.startswith("layers.0.")]
    assert sorted(_block().state_dict()) == sorted(want)


@pytest.mark.task("7.1")
def test_block_is_pre_norm():
    assert_check_passes("7.1")


@pytest.mark.task("7.1")
def test_block_with_zero_sublayers_is_the_identity():
    """Pre-norm keeps a clean residual path: zero the output projections and x passes unchanged."""
    blk = _block()
    with torch.no_grad():
        blk.attn.output_proj.weight.zero_()
        blk.ffn.w2.weight.zero_()
    x = randn((1, 5, 16), 4)
    assert_close(blk(x), x)


@pytest.mark.task("7.1")
@given(seed=seeds, batch=st.integers(2, 4))
def test_block_is_deterministic_and_batch_independent(seed, batch):
    blk = _block()
    x = randn((batch, 5, 16), seed)
    full = blk(x)
    assert_close(blk(x), full)
    for i in range(batch):
        assert_close(blk(x[i : i + 1]), full[i : i + 1])
