"""Notebook 15: inside the trained model (15.1–15.3) against independent oracles: the weights written
out with torch.softmax, the heads' loops written out, and ablation by zeroing v_proj's rows."""

import copy
import math

import pytest
import torch
from helpers import assert_check_passes, assert_close, randn

import minilm
from minilm.course.viz import attention as viz_attention


def _layer(d=32, heads=4, theta=10000.0, seed=0):
    torch.manual_seed(seed)
    return minilm.MultiHeadSelfAttention(d, heads, *([64, theta] if theta is not None else []))


# ---------------------------------------------------------------- 15.1 attention_pattern


@pytest.mark.task("15.1")
def test_attention_pattern_check_passes_and_matches_softmax_without_rope():
    assert_check_passes("15.1")
    attn, x = _layer(theta=None), randn((2, 9, 32), 1)
    q = (x @ attn.q_proj.weight.T).view(2, 9, 4, 8).transpose(1, 2)
    k = (x @ attn.k_proj.weight.T).view(2, 9, 4, 8).transpose(1, 2)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), -1e30)
    assert_close(minilm.attention_pattern(attn, x), torch.softmax(scores, -1), atol=1e-6)


@pytest.mark.task("15.1")
def test_attention_pattern_with_rope_is_what_the_module_mixes():
    attn, x = _layer(seed=3), randn((3, 7, 32), 2)
    p = minilm.attention_pattern(attn, x)
    assert p.shape == (3, 4, 7, 7)
    assert_close(p, viz_attention.attention_weights(attn, x), atol=1e-6)
    v = (x @ attn.v_proj.weight.T).view(3, 7, 4, 8).transpose(1, 2)
    assert_close((p @ v).transpose(1, 2).reshape(3, 7, 32) @ attn.output_proj.weight.T, attn(x), atol=1e-5)


@pytest.mark.task("15.1")
def test_attention_pattern_rows_are_causal_probabilities():
    attn, x = _layer(d=48, heads=3, theta=500.0, seed=4), randn((11, 48), 5)
    p = minilm.attention_pattern(attn, x)
    assert_close(p.sum(-1), torch.ones(3, 11))
    assert p.triu(1).abs().max().item() == 0.0


# ---------------------------------------------------------------- 15.2 head scores


def _pattern(seed, *shape):
    seq = shape[-1]
    scores = randn(shape, seed, scale=2.0).masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1)


@pytest.mark.task("15.2")
def test_previous_token_score_check_passes_and_matches_the_loop():
    assert_check_passes("15.2")
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
def test_ablate_heads_check_passes_and_equals_zeroing_v(heads):
    assert_check_passes("15.3")
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
