import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import minilm
from helpers import assert_close, leading_shapes, randn, seeds


def oracle(x, w, eps=1e-5):
    return F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps).to(x.dtype)


@pytest.mark.task("3.1")
@given(lead=leading_shapes, d=st.integers(1, 12), seed=seeds, scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_rms_norm_matches_F_rms_norm(lead, d, seed, scale):
    x, w = randn((*lead, d), seed, scale) + scale, randn((d,), seed + 1)
    assert_close(minilm.rms_norm(x, w), oracle(x, w))


@pytest.mark.task("3.1")
@given(seed=seeds, alpha=st.floats(1e-2, 1e2))
def test_rms_norm_is_invariant_to_scaling_its_input(seed, alpha):
    x, w = randn((3, 16), seed), randn((16,), seed + 1)
    assert_close(minilm.rms_norm(alpha * x, w, eps=0.0), minilm.rms_norm(x, w, eps=0.0), atol=1e-5, rtol=1e-4)


@pytest.mark.task("3.1")
def test_rms_norm_keeps_the_mean():
    """LayerNorm would remove a constant offset; RMSNorm must not."""
    x = torch.full((2, 8), 3.0)
    assert_close(minilm.rms_norm(x, torch.ones(8)), torch.ones(2, 8), atol=1e-5)


@pytest.mark.task("3.1")
def test_rms_norm_puts_eps_inside_the_square_root():
    x = torch.full((1, 4), 1e-3)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    assert_close(minilm.rms_norm(x, torch.ones(4)), want)


@pytest.mark.task("3.1")
def test_rms_norm_computes_in_float32_and_returns_the_input_dtype():
    x = (randn((4, 64), 0) * 30).to(torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    y = minilm.rms_norm(x, w)
    assert y.dtype == torch.bfloat16
    assert_close(y, oracle(x.float(), w.float()).to(torch.bfloat16), atol=1e-2, rtol=1e-2)


@pytest.mark.task("3.2")
def test_RMSNorm_weight_starts_at_ones_and_forward_matches():
    norm = minilm.RMSNorm(10, eps=1e-3)
    assert list(norm.state_dict()) == ["weight"] and torch.equal(norm.weight.detach(), torch.ones(10))
    with torch.no_grad():
        norm.weight.mul_(randn((10,), 1))
    x = randn((2, 5, 10), 2, scale=0.01)
    assert_close(norm(x), oracle(x, norm.weight, 1e-3))
