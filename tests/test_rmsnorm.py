import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm


def oracle(x, w, eps=1e-5):
    return F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps).to(x.dtype)


@pytest.mark.task("3.1")
@given(lead=leading_shapes, d=st.integers(1, 12), seed=seeds, scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_rms_norm_matches_F_rms_norm(lead, d, seed, scale):
    x, w = randn((*lead, d), seed, scale) + scale, randn((d,), seed + 1)
    assert_close(minilm.rms_norm(x, w), oracle(x, w), what=f"rms_norm(x {tuple(x.shape)}, w) vs F.rms_norm")


@pytest.mark.task("3.1")
def test_rms_norm_normalizes_each_vector_on_its_own():
    """Each vector along the last dim is divided by its own RMS: a row's output does not depend
    on the other rows (rows of very different sizes make a shared mean show)."""
    x, w = randn((3, 8), 4) * torch.tensor([[0.01], [1.0], [100.0]]), randn((8,), 5)
    got = minilm.rms_norm(x, w)
    for i in range(3):
        assert_close(got[i], minilm.rms_norm(x[i], w), what=(
            f"row {i} of rms_norm(x (3, 8)) vs rms_norm of that row alone (mean(x², dim=-1, keepdim=True): "
            "one RMS per vector, not one for the whole tensor)"))


@pytest.mark.task("3.1")
@given(seed=seeds, alpha=st.floats(1e-2, 1e2))
def test_rms_norm_is_invariant_to_scaling_its_input(seed, alpha):
    x, w = randn((3, 16), seed), randn((16,), seed + 1)
    assert_close(minilm.rms_norm(alpha * x, w, eps=0.0), minilm.rms_norm(x, w, eps=0.0), atol=1e-5, rtol=1e-4)


@pytest.mark.task("3.1")
def test_rms_norm_keeps_the_mean():
    """LayerNorm would remove a constant offset; RMSNorm must not."""
    x = torch.full((2, 8), 3.0)
    assert_close(minilm.rms_norm(x, torch.ones(8)), torch.ones(2, 8), atol=1e-5,
                 what="rms_norm of a constant 3.0 (RMSNorm gives 1.0 everywhere; LayerNorm's mean subtraction gives 0)")


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
    assert y.dtype == torch.bfloat16, f"rms_norm must return the input's dtype (bfloat16), got {y.dtype}"
    assert_close(y, oracle(x.float(), w.float()).to(torch.bfloat16), atol=1e-2, rtol=1e-2,
                 what="rms_norm of a bfloat16 x vs F.rms_norm computed in float32")


@pytest.mark.task("3.2")
def test_RMSNorm_weight_starts_at_ones_and_forward_matches():
    norm = minilm.RMSNorm(10, eps=1e-3)
    assert list(norm.state_dict()) == ["weight"] and torch.equal(norm.weight.detach(), torch.ones(10))
    with torch.no_grad():
        norm.weight.mul_(randn((10,), 1))
    x = randn((2, 5, 10), 2, scale=0.01)
    assert_close(norm(x), oracle(x, norm.weight, 1e-3))
