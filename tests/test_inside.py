"""Notebook 15: inside the trained model (15.1–15.3) against independent oracles: the layers run by
hand, the heads' loops written out, and ablation by zeroing v_proj's rows."""

import copy

import pytest
import torch
from helpers import assert_close, randn

import minilm


def _layer(d=32, heads=4, theta=10000.0, seed=0):
    torch.manual_seed(seed)
    return minilm.MultiHeadSelfAttention(d, heads, *([64, theta] if theta is not None else []))


# ---------------------------------------------------------------- 15.1 attention_inputs


def _model(layers=3, d=32, heads=4, seed=0):
    torch.manual_seed(seed)
    return minilm.TransformerLM(61, 16, d, layers, heads, 40, 10000.0)


def _hooks(model):
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())


@pytest.mark.task("15.1")
@pytest.mark.parametrize("layers, d, heads, shape", [(3, 32, 4, (2, 9)), (1, 24, 3, (7,)), (4, 16, 2, (3, 5))])
def test_attention_inputs_equals_running_the_layers_by_hand(layers, d, heads, shape):
    model, ids = _model(layers, d, heads, seed=layers), torch.randint(0, 61, shape)
    got = minilm.attention_inputs(model, ids)
    assert isinstance(got, list) and len(got) == layers
    with torch.no_grad():
        x = model.token_embeddings(ids)
        for i, layer in enumerate(model.layers):  # what layer i's attention gets: its block's input after ln1
            assert_close(got[i], layer.ln1(x), atol=1e-6)
            x = layer(x)


@pytest.mark.task("15.1")
def test_attention_inputs_leaves_no_hook_and_no_grad_and_the_model_as_it_was():
    model, ids = _model(seed=1), torch.randint(0, 61, (2, 6))
    with torch.no_grad():
        before = model(ids)
    got = minilm.attention_inputs(model, ids)
    assert _hooks(model) == 0
    assert not any(x.requires_grad for x in got)
    with torch.no_grad():
        assert_close(model(ids), before, atol=0.0, rtol=0.0)


@pytest.mark.task("15.1")
def test_attention_inputs_removes_its_hooks_when_the_model_raises():
    model, ids = _model(seed=2), torch.randint(0, 61, (2, 6))

    def stop(module, args):
        raise RuntimeError("stop")

    handle = model.lm_head.register_forward_pre_hook(stop)
    with pytest.raises(RuntimeError, match="stop"):
        minilm.attention_inputs(model, ids)
    handle.remove()
    assert _hooks(model) == 0


# ---------------------------------------------------------------- 15.2 head scores


def _pattern(seed, *shape):
    seq = shape[-1]
    scores = randn(shape, seed, scale=2.0).masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1)


@pytest.mark.task("15.2")
def test_previous_token_score_matches_the_loop():
    p = _pattern(6, 2, 3, 10, 10)
    want = torch.stack([p[..., t, t - 1] for t in range(1, 10)], -1).mean(-1)
    assert_close(minilm.previous_token_score(p), want)


@pytest.mark.task("15.2")
@pytest.mark.parametrize("seq, period", [(10, 5), (9, 4), (6, 1), (7, 6)])
def test_induction_score_matches_the_loop(seq, period):
    p = _pattern(7, 4, seq, seq)
    want = torch.stack([p[..., t, t - period + 1] for t in range(period, seq)], -1).mean(-1)
    assert_close(minilm.induction_score(p, period), want)


@pytest.mark.task("15.2")
def test_scores_of_hand_made_heads():
    seq, period = 12, 6
    prev, ind, dup = torch.zeros(seq, seq), torch.eye(seq), torch.eye(seq)
    prev[0, 0] = 1.0
    prev[torch.arange(1, seq), torch.arange(seq - 1)] = 1.0
    t = torch.arange(period, seq)
    ind[t], dup[t] = 0.0, 0.0
    ind[t, t - period + 1], dup[t, t - period] = 1.0, 1.0
    scores = lambda p: (float(minilm.previous_token_score(p)), float(minilm.induction_score(p, period)))  # noqa: E731
    assert scores(prev) == (1.0, 0.0)
    assert scores(ind)[1] == 1.0 and scores(dup)[1] == 0.0


# ---------------------------------------------------------------- 15.3 ablate_heads


@pytest.mark.task("15.3")
@pytest.mark.parametrize("heads", [[1], [0, 3], [], [0, 1, 2, 3]])
def test_ablate_heads_equals_zeroing_v(heads):
    attn, x = _layer(seed=8), randn((2, 6, 32), 9)
    with torch.no_grad():
        before = attn(x)
        silent = copy.deepcopy(attn)
        for h in heads:  # a head whose values are 0 outputs 0, whatever its weights
            silent.v_proj.weight[h * 8:(h + 1) * 8] = 0.0
        handle = minilm.ablate_heads(attn, heads)
        assert_close(attn(x), silent(x), atol=1e-6)
        handle.remove()
        assert_close(attn(x), before, atol=0.0, rtol=0.0)


@pytest.mark.task("15.3")
def test_ablating_one_head_removes_its_contribution_only():
    attn, x = _layer(d=24, heads=3, seed=10), randn((5, 24), 11)
    with torch.no_grad():
        def out(heads):
            handle = minilm.ablate_heads(attn, heads)
            y = attn(x)
            handle.remove()
            return y
        # the heads' contributions add up: out([]) − out([0]) is head 0's, whether head 1 is on or off
        assert_close(out([]) - out([0]), out([1]) - out([0, 1]), atol=1e-5)
        assert_close(out([0, 1, 2]), torch.zeros(5, 24))
