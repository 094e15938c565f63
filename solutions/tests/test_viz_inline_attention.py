"""notebooks/06's attention plots (minilm/course/viz/attention.py) on a Task 6.3 that computes
attention inline, never calling scaled_dot_product_attention: the contract allows it, so the plots
must show it, and code they cannot use gets one line, not a traceback (issue 26).

Here and not in tests/: the inline module is a complete answer to Tasks 6.2 and 6.3, and tests/
ships to students."""

import math
import os
from pathlib import Path

import matplotlib
import pytest
import torch

import minilm
from minilm.course.viz import attention as va

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_SHARED_TIKTOKEN = Path(__file__).resolve().parents[3] / "shared" / "tiktoken"
if "TIKTOKEN_CACHE_DIR" not in os.environ and _SHARED_TIKTOKEN.is_dir():  # offline development machines
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_SHARED_TIKTOKEN)


@pytest.fixture(autouse=True)
def _reference_and_no_figures_left(monkeypatch):
    monkeypatch.setenv("MINILM_IMPL", "solutions")  # the plots around the inline module use the reference's parts
    yield
    plt.close("all")


class InlineAttention(torch.nn.Module):
    """A legitimate Task 6.3 that computes attention inline, never calling scaled_dot_product_attention:
    the contract's projections and rope, its own scores, mask and softmax."""

    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.rope = minilm.RotaryPositionalEmbedding(theta, self.d_k, max_seq_len) if theta is not None else None
        self.q_proj, self.k_proj, self.v_proj, self.output_proj = (minilm.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, token_positions=None, kv_cache=None):
        seq = x.shape[-2]
        if token_positions is None:
            token_positions = torch.arange(seq)
        q, k, v = (p(x).unflatten(-1, (self.num_heads, self.d_k)).transpose(-3, -2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.rope is not None:
            q, k = self.rope(q, token_positions.unsqueeze(-2)), self.rope(k, token_positions.unsqueeze(-2))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).masked_fill(~va.causal_mask(seq), float("-inf"))
        out = torch.softmax(scores, -1) @ v
        return self.output_proj(out.transpose(-3, -2).flatten(-2))


@pytest.mark.task("6.3")
@pytest.mark.parametrize("theta", [10000.0, None])
def test_attention_weights_of_a_module_that_inlines_attention(monkeypatch, theta):
    """A MultiHeadSelfAttention that never calls scaled_dot_product_attention is shown as well:
    its recomputed weights, applied to its values, give its output; so do the explorer's."""
    torch.manual_seed(0)
    attn, x = InlineAttention(32, 4, 16, theta), torch.randn(7, 32)
    called = []
    sdpa = minilm.exercise_module("attention").scaled_dot_product_attention
    monkeypatch.setattr(minilm.exercise_module("attention"), "scaled_dot_product_attention",
                        lambda *a, **kw: called.append(1) or sdpa(*a, **kw))
    with torch.no_grad():
        out = attn(x)
    assert not called, "the fixture must not call scaled_dot_product_attention"
    w = va.attention_weights(attn, x)
    assert w.shape == (4, 7, 7) and torch.all(w.triu(1) == 0)
    v = attn.v_proj(x).view(7, 4, 8).transpose(0, 1)
    torch.testing.assert_close(attn.output_proj((w @ v).transpose(0, 1).reshape(7, 32)), out, atol=1e-5, rtol=1e-4)
    if theta is not None:  # the notebook's hand-wired heads and explorer, on the inline module
        stack = va.AttentionStack(hand_wired=False)
        for layer in stack.layers:
            layer.attn = va.hand_wire(InlineAttention(64, 4, 64, theta))
        e = va.attention_explorer(stack, text="a b c a b c")
        e.layer.value = 1
        assert e.weights.shape == (len(e.tokens), len(e.tokens))
        ids, _ = va.gpt2_tokens("a b c a b c")
        w = va.attention_weights(stack.layers[0].attn, stack.token_embeddings(ids))
        assert w[0].argmax(-1)[1:].tolist() == list(range(len(ids) - 1))  # previous-token head


def test_a_module_the_plot_cannot_use_gets_one_line_not_a_traceback(capsys, monkeypatch):
    """needs() prints the viz's one line, naming the task to fix, for code that raises; a stub's
    NotImplementedError still prints the stub's own line."""
    from minilm.course.checks import CannotShow, needs

    attn = InlineAttention(32, 4, 4, 10000.0)  # its rope's cache ends at position 3: 5 tokens raise
    with needs("6.3"):
        va.attention_weights(attn, torch.randn(5, 32))
    out = capsys.readouterr().out
    assert out.startswith("✗ Task 6.3: your MultiHeadSelfAttention's q_proj, k_proj or rope raised"), out
    assert out.count("\n") == 1, out
    del attn.k_proj
    with pytest.raises(CannotShow, match=r"^Task 6\.3: .*k_proj"):
        va.attention_weights(attn, torch.randn(5, 32))

    def stub(q, k, v, mask=None):
        raise NotImplementedError("Task 6.2 is not implemented yet: write scaled_dot_product_attention in "
                                  "minilm/attention.py")

    monkeypatch.setattr(minilm.exercise_module("attention"), "scaled_dot_product_attention", stub)
    with needs("6.3"):
        va.attention_weights(InlineAttention(32, 4, 16, 10000.0), torch.randn(5, 32))
    assert capsys.readouterr().out.startswith("… Task 6.2 is not implemented yet")
    monkeypatch.setattr(minilm.exercise_module("attention"), "scaled_dot_product_attention", lambda q, k, v,
                        mask=None: q)
    with needs("6.3"):
        va.attention_weights(InlineAttention(32, 4, 16, 10000.0), torch.randn(5, 32))
    assert capsys.readouterr().out.startswith("✗ Task 6.2: your scaled_dot_product_attention returned (4, 5, 8)")
