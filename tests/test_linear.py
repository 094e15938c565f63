import math

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm


@pytest.mark.task("1.1")
@given(lead=leading_shapes, d_in=st.integers(1, 9), d_out=st.integers(1, 9), seed=seeds)
def test_linear_matches_F_linear(lead, d_in, d_out, seed):
    x, w = randn((*lead, d_in), seed), randn((d_out, d_in), seed + 1)
    assert_close(minilm.linear(x, w), F.linear(x, w))


@pytest.mark.task("1.1")
def test_linear_uses_the_transpose_of_a_square_weight():
    x, w = randn((3, 4), 0), randn((4, 4), 1)
    assert_close(minilm.linear(x, w), x @ w.T, what="y = x Wᵀ (not x W)")


@pytest.mark.task("1.1")
def test_linear_backpropagates():
    x, w = randn((2, 3), 0).requires_grad_(), randn((4, 3), 1).requires_grad_()
    minilm.linear(x, w).sum().backward()
    assert_close(w.grad, torch.ones(2, 4).T @ x.detach())


@pytest.mark.task("1.2")
def test_Linear_has_one_weight_out_by_in_and_no_bias():
    layer = minilm.Linear(5, 3)
    assert list(layer.state_dict()) == ["weight"]
    assert layer.weight.shape == (3, 5)
    assert isinstance(layer, torch.nn.Module)


@pytest.mark.task("1.2")
def test_Linear_forward_matches_F_linear_on_its_weight():
    layer = minilm.Linear(6, 4)
    x = randn((2, 3, 6), 2)
    assert_close(layer(x), F.linear(x, layer.weight))


@pytest.mark.task("1.2")
@pytest.mark.parametrize("d_in, d_out", [(512, 256), (256, 1024)])
def test_Linear_init_is_truncated_normal_with_glorot_std(d_in, d_out):
    w = minilm.Linear(d_in, d_out).weight.detach().double()
    std = math.sqrt(2 / (d_in + d_out))
    assert w.abs().max() <= 3 * std + 1e-7, "weights beyond ±3 std: not truncated"
    # A normal truncated at ±3σ has std 0.9866σ; with ≥ 130k samples the estimate is within 1%.
    assert w.std().item() == pytest.approx(0.9866 * std, rel=0.02)
    assert abs(w.mean().item()) < 0.01 * std * 5
    assert (w.abs() > 2.5 * std).any(), "the tails are missing: truncate at 3 std, not 2"


@pytest.mark.task("1.2")
def test_Linear_respects_device_and_dtype():
    layer = minilm.Linear(3, 2, device="cpu", dtype=torch.float64)
    assert layer.weight.dtype == torch.float64 and layer.weight.device.type == "cpu"
