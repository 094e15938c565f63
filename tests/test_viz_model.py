"""Tests for minilm/course/viz/model.py: the pictures and tables of notebooks 07 (block) and 08 (model)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import minilm  # noqa: E402
from minilm.course.exercises import lm_parameter_count  # noqa: E402
from minilm.course.viz import model as vm  # noqa: E402

SEED = dict(vocab_size=1000, context_length=512, d_model=256, num_layers=4, d_ff=1024)


# ---------------------------------------------------------------- FLOPs (pure arithmetic)


def test_flops_per_token_seed_config():
    f = dict(vm.flops_per_token(**SEED))
    d, n_ctx, d_ff, V, L = 256, 512, 1024, 1000, 4
    assert f["embedding lookup"] == 0
    assert f["per layer: q/k/v/o projections"] == 2 * 4 * d * d
    assert f["per layer: attention scores + sum"] == 2 * 2 * n_ctx * d
    assert f["per layer: SwiGLU"] == 2 * 3 * d * d_ff
    assert f["lm_head"] == 2 * d * V
    assert f["forward"] == L * f["per layer: total"] + f["lm_head"] == 10_997_760
    assert f["backward (≈ 2 × forward)"] == 2 * f["forward"]
    assert f["training step (forward + backward)"] == 3 * f["forward"]
    assert all(isinstance(v, int) for v in f.values())


def test_flops_match_6n_plus_attention_term():
    """3 × forward = 6 × (parameters that multiply activations) + 3 × the attention-scores term."""
    for cfg in (SEED, dict(vocab_size=50257, context_length=1024, d_model=768, num_layers=12, d_ff=3072)):
        f = dict(vm.flops_per_token(**cfg))
        d, L = cfg["d_model"], cfg["num_layers"]
        n = lm_parameter_count(cfg["vocab_size"], d, L, cfg["d_ff"])
        n_matmul = n - cfg["vocab_size"] * d - (2 * L + 1) * d
        assert f["training step (forward + backward)"] == 6 * n_matmul + 3 * L * f["per layer: attention scores + sum"]


def test_flops_table_is_fixed_width_and_complete():
    rows = vm.flops_per_token(**SEED)
    table = vm.flops_table(rows)
    lines = table.splitlines()
    assert len(lines) == len(rows) + 2
    assert len({len(line) for line in lines}) == 1  # fixed width
    assert "10,997,760" in table and "32,993,280" in table
    assert table == vm.flops_table(vm.flops_per_token(**SEED))  # deterministic


def test_plot_flops_vs_context_stacks_to_forward():
    contexts = (128, 512, 2048)
    fig = vm.plot_flops_vs_context(1000, 256, 4, 1024, contexts=contexts)
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.get_legend().get_texts()) == 4
    tops = [0.0] * len(contexts)
    for container in ax.containers:
        for i, bar in enumerate(container):
            tops[i] = max(tops[i], bar.get_y() + bar.get_height())
    for top, n_ctx in zip(tops, contexts):
        want = dict(vm.flops_per_token(1000, n_ctx, 256, 4, 1024))["forward"] / 1e6
        assert math.isclose(top, want, rel_tol=1e-9)
    plt.close(fig)


# ---------------------------------------------------------------- parameters


@pytest.mark.task("8.1")
def test_parameter_breakdown_seed_model():
    model = minilm.TransformerLM(num_heads=8, **SEED)
    counts = vm.parameter_breakdown(model)
    assert list(counts) == list(vm.PARAMETER_GROUPS)
    assert counts == {"token_embeddings": 256_000, "attention": 4 * 4 * 256 * 256, "FFN (SwiGLU)": 4 * 3 * 256 * 1024,
                      "norms": 9 * 256, "lm_head": 256_000}
    assert sum(counts.values()) == lm_parameter_count(1000, 256, 4, 1024) == 4_708_608


@pytest.mark.task("8.1")
def test_plot_parameter_breakdown():
    model = minilm.TransformerLM(97, 32, 32, 2, 4, 48)
    fig = vm.plot_parameter_breakdown(model)
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    counts = vm.parameter_breakdown(model)
    widths = {t.get_text(): bar.get_width() for t, bar in zip(ax.get_yticklabels(), ax.patches)}
    assert widths == counts
    plt.close(fig)


def test_parameter_group_rejects_unknown_names():
    with pytest.raises(ValueError):
        vm.parameter_group("layers.0.mystery.weight")


# ---------------------------------------------------------------- pre-norm vs post-norm


def _block(seed: int = 0):
    torch.manual_seed(seed)
    return minilm.TransformerBlock(64, 4, 192, 16)


@pytest.mark.task("7.1")
def test_post_norm_ends_with_a_norm():
    """Post-norm's output is ln2(…): with ln2's gain at ones, every token has RMS 1, unlike pre-norm's."""
    block = _block()
    x = 3 * torch.randn(2, 5, 64)
    with torch.no_grad():
        got, pre = vm.post_norm(block)(x), block(x)
    torch.testing.assert_close(got.pow(2).mean(-1).sqrt(), torch.ones(2, 5), atol=1e-3, rtol=1e-3)
    assert not torch.allclose(got, pre, atol=1e-2)


@pytest.mark.task("7.1")
def test_post_norm_runs_the_blocks_own_forward_and_restores_it():
    """post_norm swaps stand-ins into the block only while it runs: afterwards the block is as it was,
    and with both sublayers writing nothing, what is left is the two norms, x / RMS(x)."""
    block = _block()
    parts = {name: getattr(block, name) for name in ("ln1", "attn", "ln2", "ffn")}
    x = 3 * torch.randn(2, 5, 64)
    with torch.no_grad():
        before = block(x)
        vm.post_norm(block)(x)
        assert all(getattr(block, name) is module for name, module in parts.items())
        torch.testing.assert_close(block(x), before)
        block.attn, block.ffn = vm._WritesNothing(), vm._WritesNothing()
        got = vm.post_norm(block)(x)
    torch.testing.assert_close(got, x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt(), atol=1e-5, rtol=1e-5)


def test_residual_stream_records_rms_and_carried_coefficient():
    x0 = torch.randn(2, 3, 8)
    stats = vm.residual_stream(lambda x: 2 * x, x0, num_layers=3)
    rms0 = x0.pow(2).mean(-1).sqrt().mean().item()
    assert [round(r / rms0, 6) for r in stats.rms] == [1, 2, 4, 8]
    assert [round(c, 6) for c in stats.carried] == [1, 2, 4, 8]


@pytest.mark.task("7.1")
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_residual_verdicts_are_robust(seed):
    """The notebook prints these verdicts: they must hold for any sensible initialization."""
    stats = vm.prenorm_vs_postnorm(_block(seed), num_layers=12, seed=seed)
    assert all(len(s.rms) == 13 and len(s.carried) == 13 for s in stats.values())
    for line in vm.residual_verdicts(stats):
        assert line.endswith(": True"), line


@pytest.mark.task("7.1")
def test_plot_residual_stream_plots_the_stats():
    stats = vm.prenorm_vs_postnorm(_block(), num_layers=6)
    fig = vm.plot_residual_stream(stats)
    ax_rms, ax_carry = fig.axes
    for ax, field in ((ax_rms, "rms"), (ax_carry, "carried")):
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pre-norm", "post-norm"]
        lines = [line for line in ax.get_lines() if line.get_label() in stats]
        for line in lines:
            assert list(line.get_ydata()) == getattr(stats[line.get_label()], field)
    plt.close(fig)
