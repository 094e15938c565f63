"""Tasks 12.1–12.3: int8 quantization. Oracles: round(w / scale) computed in float64, PyTorch's
own torch.quantize_per_channel, and a model whose Linear weights are replaced by their
quantize-dequantize round trip."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, randn, seeds
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import minilm

# PyTorch's quantized tensors are deprecated (PyTorch 2.13 warns so) and may go: their tests then skip.
_torch_quantizes = pytest.mark.skipif(not hasattr(torch, "quantize_per_channel"),
                                      reason="torch has no quantized tensors")
_deprecated = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")
_shapes = st.tuples(st.integers(1, 8), st.integers(1, 12))
_scales = st.sampled_from([1e-3, 1.0, 50.0])


def oracle_scale(w: torch.Tensor, per_channel: bool) -> torch.Tensor:
    w = w.double()
    if per_channel:
        absmax = w.abs().max(dim=1, keepdim=True).values
    else:
        absmax = w.abs().max().view(1, 1)
    return torch.where(absmax > 0, absmax / 127, torch.ones_like(absmax))


def assert_rounded(q: torch.Tensor, exact: torch.Tensor) -> None:
    """q == round(exact) wherever exact is not within 1e-3 of a tie (where float32 and float64
    may round to different neighbours), and within 1 of it there."""
    frac = exact - exact.floor()
    clear = (frac - 0.5).abs() > 1e-3
    assert torch.equal(q.double()[clear], torch.round(exact)[clear]), "q must be round(w / scale) (round to nearest)"
    assert (q.double() - exact).abs().max() <= 0.5 + 1e-3


@pytest.mark.task("12.1")
@given(shape=_shapes, seed=seeds, size=_scales, per_channel=st.booleans())
def test_quantize_int8_matches_a_float64_oracle(shape, seed, size, per_channel):
    w = randn(shape, seed, size)
    q, scale = minilm.quantize_int8(w, per_channel=per_channel)
    want_scale = oracle_scale(w, per_channel)
    assert q.dtype == torch.int8 and q.shape == w.shape
    assert scale.dtype == torch.float32 and scale.shape == want_scale.shape
    assert_close(scale, want_scale, rtol=1e-6, atol=0, what="scale = max |w| / 127")
    assert_rounded(q, w.double() / scale.double())
    assert int(q.abs().max()) == 127, "the largest |w| must map to ±127"
    assert int(q.min()) >= -127


@pytest.mark.task("12.1")
@_torch_quantizes
@_deprecated
@pytest.mark.parametrize("seed", range(4))
def test_quantize_int8_matches_torch_quantize_per_channel(seed):
    w = randn((16, 32), seed) * torch.linspace(0.01, 2.0, 16).unsqueeze(1)
    q, scale = minilm.quantize_int8(w)
    theirs = torch.quantize_per_channel(w, scale.squeeze(1).double(), torch.zeros(16, dtype=torch.long), 0,
                                        torch.qint8).int_repr()
    assert (q.int() - theirs.int()).abs().max() <= 1
    assert (q == theirs).float().mean() > 0.99  # they may differ only where w / scale is a near-tie


@pytest.mark.task("12.1")
@_torch_quantizes
@_deprecated
def test_quantize_int8_per_tensor_matches_torch_quantize_per_tensor():
    w = randn((8, 20), 7, 0.3)
    q, scale = minilm.quantize_int8(w, per_channel=False)
    assert scale.shape == (1, 1)
    theirs = torch.quantize_per_tensor(w, scale.item(), 0, torch.qint8).int_repr()
    assert (q.int() - theirs.int()).abs().max() <= 1 and (q == theirs).float().mean() > 0.99


@pytest.mark.task("12.1")
@given(shape=_shapes, seed=seeds, size=_scales, per_channel=st.booleans())
def test_dequantize_is_within_half_a_step(shape, seed, size, per_channel):
    w = randn(shape, seed, size)
    q, scale = minilm.quantize_int8(w, per_channel=per_channel)
    back = minilm.dequantize_int8(q, scale)
    assert back.dtype == torch.float32 and back.shape == w.shape
    assert bool(((back - w).abs() <= scale / 2 * (1 + 1e-5)).all())
    assert_close(back, q.double() * scale.double(), atol=0, rtol=1e-6, what="dequantize_int8 = q · scale")


@pytest.mark.task("12.1")
def test_ties_round_to_even_and_signs_are_symmetric():
    w = torch.tensor([[0.5, 1.5, 2.5, -0.5, -2.5, 127.0], [-127.0, 3.0, -3.0, 0.0, 0.0, 0.0]])
    q, scale = minilm.quantize_int8(w)
    assert torch.equal(scale, torch.ones(2, 1))
    assert q.tolist() == [[0, 2, 2, 0, -2, 127], [-127, 3, -3, 0, 0, 0]]
    assert torch.equal(minilm.quantize_int8(-w)[0], -q), "symmetric: q(−w) = −q(w)"


@pytest.mark.task("12.1")
def test_zero_and_tiny_rows_are_safe():
    w = torch.zeros(3, 5)
    w[1] = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0])
    w[2] = 1e-44  # max |w| / 127 underflows to 0 in float32
    q, scale = minilm.quantize_int8(w)
    assert bool(torch.isfinite(scale).all()) and bool((scale > 0).all())
    assert scale[0].item() == 1.0 and scale[2].item() == 1.0
    assert torch.equal(q[0], torch.zeros(5, dtype=torch.int8))
    back = minilm.dequantize_int8(q, scale)
    assert torch.equal(back[0], torch.zeros(5)) and bool(torch.isfinite(back).all())
    q_all, s_all = minilm.quantize_int8(torch.zeros(2, 2), per_channel=False)
    assert torch.equal(q_all, torch.zeros(2, 2, dtype=torch.int8)) and s_all.item() == 1.0


@pytest.mark.task("12.1")
def test_an_outlier_costs_only_its_row_per_channel_and_every_row_per_tensor():
    w = randn((6, 40), 3, 0.1)
    spiked = w.clone()
    spiked[0, 5] = 10.0
    for per_channel in (True, False):
        q0, s0 = minilm.quantize_int8(w, per_channel)
        q1, s1 = minilm.quantize_int8(spiked, per_channel)
        others_same = torch.equal(q0[1:], q1[1:]) and torch.equal(s0[1:], s1[1:])
        assert others_same == per_channel
    err = (minilm.dequantize_int8(*minilm.quantize_int8(spiked, per_channel=False)) - spiked)[1:].abs().mean()
    err_pc = (minilm.dequantize_int8(*minilm.quantize_int8(spiked)) - spiked)[1:].abs().mean()
    assert err > 10 * err_pc


@pytest.mark.task("12.1")
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_other_float_dtypes_give_float32_scales(dtype):
    w = randn((4, 6), 2).to(dtype)
    q, scale = minilm.quantize_int8(w)
    assert q.dtype == torch.int8 and scale.dtype == torch.float32
    assert_close(scale, oracle_scale(w.float(), True), rtol=1e-6, atol=0)


@pytest.mark.task("12.1")
@pytest.mark.parametrize("bad, error, words", [
    (torch.ones(3, 4, dtype=torch.long), TypeError, "floating-point"),
    (torch.ones(5), ValueError, "2-D"),
    (torch.ones(2, 3, 4), ValueError, "2-D"),
    (torch.ones(0, 4), ValueError, "non-empty"),
    (torch.tensor([[1.0, float("nan")]]), ValueError, "NaN or inf"),
    ([[1.0, 2.0]], TypeError, "torch.Tensor"),
])
def test_quantize_int8_rejects_bad_input_clearly(bad, error, words):
    with pytest.raises(error, match=words):
        minilm.quantize_int8(bad)


@pytest.mark.task("12.1")
def test_dequantize_int8_rejects_bad_input_clearly():
    q, scale = torch.zeros(3, 4, dtype=torch.int8), torch.ones(3, 1)
    with pytest.raises(TypeError, match="int8"):
        minilm.dequantize_int8(q.float(), scale)
    with pytest.raises(ValueError, match=r"\(d_out, 1\) = \(3, 1\)"):
        minilm.dequantize_int8(q, torch.ones(3))
    with pytest.raises(ValueError, match=r"\(d_out, 1\)"):
        minilm.dequantize_int8(q, torch.ones(1, 4))


# ---------------------------------------------------------------- 12.2


class Holder(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = nn.Parameter(weight)


@pytest.mark.task("12.2")
def test_Int8Linear_holds_int8_and_float32_buffers_only():
    layer = minilm.Int8Linear(7, 3)
    state = layer.state_dict()
    assert sorted(state) == ["scale", "weight_int8"]
    assert not list(layer.parameters())
    assert state["weight_int8"].dtype == torch.int8 and state["weight_int8"].shape == (3, 7)
    assert torch.equal(state["weight_int8"], torch.zeros(3, 7, dtype=torch.int8))
    assert state["scale"].dtype == torch.float32 and torch.equal(state["scale"], torch.ones(3, 1))
    assert minilm.Int8Linear(7, 3, per_channel=False).state_dict()["scale"].shape == (1, 1)


@pytest.mark.task("12.2")
@given(d_in=st.integers(1, 12), d_out=st.integers(1, 12), seed=seeds, per_channel=st.booleans())
def test_Int8Linear_is_F_linear_with_the_dequantized_weight(d_in, d_out, seed, per_channel):
    w = randn((d_out, d_in), seed, 0.5)
    layer = minilm.Int8Linear.from_linear(Holder(w), per_channel=per_channel)
    q, scale = layer.state_dict()["weight_int8"], layer.state_dict()["scale"]
    assert_rounded(q, w.double() / oracle_scale(w, per_channel))
    x = randn((2, 3, d_in), seed + 1)
    want = F.linear(x.double(), q.double() * scale.double())
    assert_close(layer(x), want, atol=1e-5, rtol=1e-5)
    bound = x.double().abs().sum(-1, keepdim=True) * scale.double().T / 2  # |x (ŵ − w)ᵀ| ≤ Σ|x_i| · scale_j / 2
    assert bool(((layer(x).double() - F.linear(x.double(), w.double())).abs() <= bound + 1e-5).all())


@pytest.mark.task("12.2")
def test_Int8Linear_from_your_Linear_state_dict_round_trip_and_size():
    torch.manual_seed(0)
    float_layer = minilm.Linear(64, 32)
    layer = minilm.Int8Linear.from_linear(float_layer)
    fresh = minilm.Int8Linear(64, 32)
    fresh.load_state_dict(layer.state_dict())
    x = randn((5, 64), 1)
    assert torch.equal(fresh(x), layer(x))
    nbytes = sum(t.numel() * t.element_size() for t in layer.state_dict().values())
    assert nbytes == 32 * 64 * 1 + 32 * 4  # an int8 per weight, a float32 per row
    assert nbytes < sum(t.numel() * t.element_size() for t in float_layer.state_dict().values()) / 3.5


@pytest.mark.task("12.2")
def test_Int8Linear_keeps_the_input_dtype_and_takes_no_gradient_for_its_weights():
    layer = minilm.Int8Linear.from_linear(Holder(randn((4, 6), 0)))
    assert layer(randn((2, 6), 1, dtype=torch.float64)).dtype == torch.float64
    x = randn((2, 6), 2).requires_grad_()
    layer(x).sum().backward()
    assert x.grad is not None and x.grad.shape == (2, 6)  # gradients still flow to the input


@pytest.mark.task("12.2")
def test_Int8Linear_rejects_bad_input_clearly():
    with pytest.raises(TypeError, match="linear layer"):
        minilm.Int8Linear.from_linear(torch.ones(3, 4))
    with pytest.raises(ValueError, match="2-D"):
        minilm.Int8Linear.from_linear(Holder(torch.ones(4)))
    with pytest.raises(ValueError, match="in_features=6"):
        minilm.Int8Linear.from_linear(Holder(torch.ones(3, 6)))(torch.ones(2, 5))


# ---------------------------------------------------------------- 12.3

CONFIG = dict(vocab_size=61, context_length=16, d_model=16, num_layers=2, num_heads=2, d_ff=40)


def small_lm(seed=0):
    torch.manual_seed(seed)
    return minilm.TransformerLM(**CONFIG)


def fake_quantized(model: nn.Module, per_channel: bool) -> nn.Module:
    """A copy of the model whose Linear weights are the float64 oracle's quantize-dequantize round trip."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, minilm.Linear):
                w = m.weight.double()
                scale = oracle_scale(w, per_channel)
                m.weight.copy_((torch.round(w / scale).clamp(-127, 127) * scale).float())
    return model  # the oracle's fake-quantized copy


@pytest.mark.task("12.3")
@pytest.mark.parametrize("per_channel", [True, False])
def test_quantize_model_equals_fake_quantizing_every_linear(per_channel):
    model = small_lm()
    want_model = fake_quantized(model, per_channel)
    embedding = model.token_embeddings.weight.detach().clone()
    got = minilm.quantize_model(model, per_channel=per_channel)
    assert got is model
    ids = torch.randint(0, 61, (2, 16))
    with torch.no_grad():
        assert_close(model(ids), want_model(ids), atol=2e-4, rtol=1e-4, what="the quantized model's logits")
    assert torch.equal(model.token_embeddings.weight, embedding)


@pytest.mark.task("12.3")
def test_quantize_model_swaps_every_linear_lm_head_included_and_nothing_else():
    model = small_lm()
    floats = {k: v.clone() for k, v in model.state_dict().items()}
    minilm.quantize_model(model)
    kinds = {type(m).__name__ for m in model.modules()}
    assert "Int8Linear" in kinds and "Linear" not in kinds
    assert isinstance(model.lm_head, minilm.Int8Linear)
    assert sum(isinstance(m, minilm.Int8Linear) for m in model.modules()) == 7 * CONFIG["num_layers"] + 1
    state = model.state_dict()
    for name, value in floats.items():
        if name.endswith(("proj.weight", "w1.weight", "w2.weight", "w3.weight", "lm_head.weight")):
            stem = name[: -len("weight")]
            assert name not in state and state[stem + "weight_int8"].dtype == torch.int8
        else:  # the embedding and the RMSNorm gains
            assert torch.equal(state[name], value), name


@pytest.mark.task("12.3")
def test_quantize_model_shrinks_the_linears_about_fourfold_and_is_idempotent():
    model = small_lm()
    linear_bytes = sum(m.weight.numel() * 4 for m in model.modules() if isinstance(m, minilm.Linear))
    before = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    minilm.quantize_model(model)
    after = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    rows = sum(m.out_features for m in model.modules() if isinstance(m, minilm.Int8Linear))
    assert before - after == linear_bytes - linear_bytes // 4 - 4 * rows
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    minilm.quantize_model(model)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in snapshot.items())


@pytest.mark.task("12.3")
def test_quantize_model_reaches_linears_at_any_depth_in_any_container():
    torch.manual_seed(0)
    net = nn.ModuleDict({"a": nn.Sequential(minilm.Linear(3, 4), nn.ModuleList([minilm.Linear(4, 4)])),
                         "b": minilm.Linear(4, 2)})
    minilm.quantize_model(net)
    assert [type(m).__name__ for m in (net["a"][0], net["a"][1][0], net["b"])] == ["Int8Linear"] * 3


@pytest.mark.task("12.3")
def test_quantize_model_rejects_a_non_module():
    with pytest.raises(TypeError, match="nn.Module"):
        minilm.quantize_model({"lm_head": torch.ones(2, 2)})


@pytest.mark.task("12.3")
def test_quantized_model_generates_greedily_like_the_float_model_at_first():
    model = small_lm(3)
    ids = torch.tensor([1, 2, 3, 4])
    with torch.no_grad():
        float_next = model(ids.unsqueeze(0))[0, -1]
    minilm.quantize_model(model)
    with torch.no_grad():
        q_next = model(ids.unsqueeze(0))[0, -1]
    gap = (float_next - q_next).abs().max()
    assert gap < 0.05 * float_next.abs().max() + 1e-3, "int8 per channel barely moves the logits"
    assert not math.isnan(gap.item())
