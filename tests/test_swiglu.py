import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm


@pytest.mark.task("4.1")
@given(shape=leading_shapes, seed=seeds, scale=st.sampled_from([0.1, 1.0, 20.0]))
def test_silu_matches_F_silu(shape, seed, scale):
    x = randn(shape, seed, scale)
    assert_close(minilm.silu(x), F.silu(x))


@pytest.mark.task("4.2")
@given(lead=leading_shapes, d_model=st.integers(1, 8), d_ff=st.integers(1, 12), seed=seeds)
def test_swiglu_matches_its_definition_from_torch_ops(lead, d_model, d_ff, seed):
    x = randn((*lead, d_model), seed)
    w1, w2, w3 = randn((d_ff, d_model), seed + 1), randn((d_model, d_ff), seed + 2), randn((d_ff, d_model), seed + 3)
    want = F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)
    assert_close(minilm.swiglu(x, w1, w2, w3), want)


@pytest.mark.task("4.2")
def test_swiglu_gates_with_w1_not_w3():
    x = randn((3, 4), 0)
    w1, w2, w3 = randn((6, 4), 1), randn((4, 6), 2), randn((6, 4), 3)
    swapped = F.linear(F.silu(F.linear(x, w3)) * F.linear(x, w1), w2)
    assert not torch.allclose(minilm.swiglu(x, w1, w2, w3), swapped, atol=1e-4)


@pytest.mark.task("4.3")
def test_SwiGLU_submodules_and_forward():
    ffn = minilm.SwiGLU(8, 20)
    shapes = {k: tuple(v.shape) for k, v in ffn.state_dict().items()}
    assert shapes == {"w1.weight": (20, 8), "w2.weight": (8, 20), "w3.weight": (20, 8)}
    x = randn((2, 3, 8), 4)
    sd = ffn.state_dict()
    want = F.linear(F.silu(F.linear(x, sd["w1.weight"])) * F.linear(x, sd["w3.weight"]), sd["w2.weight"])
    assert_close(ffn(x), want)
