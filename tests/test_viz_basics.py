"""Tests for minilm/course/viz/basics.py: the pictures of notebooks 01–04."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import minilm  # noqa: E402
from minilm.course.viz import basics as viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _labelled(fig, legend=True):
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title(), "every panel has a title"
        assert ax.get_xlabel() and ax.get_ylabel(), "every panel has labelled axes"
        if legend and len(ax.get_lines()) + len(ax.collections) > 1:
            assert ax.get_legend() is not None, "panels with several series have a legend"


def test_truncated_normal_pdf_integrates_to_one_and_is_cut():
    std = 0.3
    x = torch.linspace(-1.2, 1.2, 24001, dtype=torch.float64)
    pdf = viz.truncated_normal_pdf(x, std)
    assert torch.trapezoid(pdf, x).item() == pytest.approx(1.0, abs=1e-3)
    assert pdf[x.abs() > 3 * std + 1e-9].abs().max().item() == 0.0


def test_init_histogram_uses_given_weights_and_marks_the_cuts():
    torch.manual_seed(0)
    w = torch.nn.init.trunc_normal_(torch.empty(200, 50), std=0.1, a=-0.3, b=0.3)
    fig = viz.plot_init_histogram(w, 0.1, "init")
    _labelled(fig)
    ax = fig.axes[0]
    heights = sum(p.get_height() * p.get_width() for p in ax.patches)
    assert heights == pytest.approx(1.0, rel=1e-6)  # a density histogram of all the entries
    vlines = sorted(line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    assert vlines == pytest.approx([-0.3, 0.3])
    assert ax.get_title() == "init"


def test_activation_scales_follow_layers():
    x = torch.ones(4, 3)
    stds = viz.activation_scales([lambda t: 2 * t, lambda t: 3 * t], x + torch.arange(3.0))
    base = (x + torch.arange(3.0)).std().item()
    assert stds == pytest.approx([base, 2 * base, 6 * base])


@pytest.mark.task("1.2")
def test_activation_scale_plot_good_init_keeps_scale():
    fig = viz.plot_activation_scale(minilm.Linear, d=64, n_layers=6)
    _labelled(fig)
    lines = {line.get_label(): np.asarray(line.get_ydata()) for line in fig.axes[0].get_lines()}
    assert len(lines) == 3
    good = next(v for k, v in lines.items() if "your init" in k)
    small, large = lines["σ × 0.5"], lines["σ × 2"]
    assert 0.7 < good[-1] / good[0] < 1.1
    assert small[-1] < 0.05 * small[0] and large[-1] > 20 * large[0]


@pytest.mark.task("2.1")
def test_one_hot_lookup_panels_show_one_hot_weight_and_rows():
    torch.manual_seed(0)
    w = torch.randn(7, 4)
    ids = torch.tensor([3, 0, 3])
    fig = viz.plot_one_hot_lookup(ids, w, minilm.embedding, labels=["a", "b", "a"])
    images = [ax.get_images()[0].get_array() for ax in fig.axes]
    assert np.array_equal(images[0], F.one_hot(ids, 7).numpy())
    assert np.allclose(images[1], w.numpy())
    assert np.allclose(images[2], w[ids].numpy())
    assert all(ax.get_title() for ax in fig.axes)
    assert fig._suptitle is not None


def test_layer_norm_helper_matches_definition():
    x = torch.tensor([[1.0, 2.0, 6.0]])
    want = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + 1e-5)
    assert torch.allclose(viz.layer_norm(x), want, atol=1e-6)


@pytest.mark.task("3.1")
def test_rmsnorm_plot_outputs_lie_where_they_should():
    fig = viz.plot_rmsnorm_vs_layernorm(minilm.rms_norm, n_points=30)
    _labelled(fig)
    ax_geo, ax_vec, ax_scale = fig.axes
    rms_pts = next(c for c in ax_geo.collections if c.get_label() == "RMSNorm(x)").get_offsets()
    assert np.allclose(np.linalg.norm(rms_pts, axis=1), math.sqrt(2), atol=1e-3)  # on the circle of radius √d
    ln_pts = np.asarray(next(c for c in ax_geo.collections if c.get_label().startswith("LayerNorm")).get_offsets())
    # ±(1, −1), a little inside when x₁ ≈ x₂ and eps matters
    assert np.allclose(ln_pts.sum(axis=1), 0, atol=1e-3) and np.all(np.abs(ln_pts) <= 1 + 1e-6)
    assert np.median(np.abs(ln_pts)) > 0.99
    lines = {line.get_label(): np.asarray(line.get_ydata()) for line in ax_vec.get_lines()}
    assert np.allclose(lines["RMSNorm(x): RMS 1"], lines["RMSNorm(100·x)"], atol=1e-5)  # scale invariance
    assert abs(lines["LayerNorm(x): mean 0, std 1"].mean()) < 1e-5
    curve = np.asarray(ax_scale.get_lines()[0].get_ydata())
    assert curve[-1] == pytest.approx(1.0, abs=1e-4) and curve[0] < 0.1  # 1 for large α, eps wins for tiny α


def test_activations_plot_default_curves_and_derivatives():
    fig = viz.plot_activations()
    _labelled(fig)
    ax, ax_d = fig.axes
    x = torch.tensor(ax.get_lines()[0].get_xdata())
    ys = [np.asarray(line.get_ydata()) for line in ax.get_lines()][:3]
    for y, fn in zip(ys, (F.relu, F.gelu, F.silu)):
        assert np.allclose(y, fn(x).numpy(), atol=1e-6)
    dsilu = np.asarray(ax_d.get_lines()[2].get_ydata())
    s = torch.sigmoid(x)
    assert np.allclose(dsilu, (s * (1 + x * (1 - s))).numpy(), atol=1e-5)


@pytest.mark.task("4.1")
def test_activations_plot_draws_the_given_silu():
    fig = viz.plot_activations(minilm.silu)
    line = fig.axes[0].get_lines()[2]
    assert np.allclose(line.get_ydata(), F.silu(torch.tensor(line.get_xdata())).numpy(), atol=1e-6)


@pytest.mark.task("4.1")
def test_swiglu_gate_heatmap_is_silu_a_times_b():
    fig = viz.plot_swiglu_gate(minilm.silu, lim=2.0, n=21)
    ax = fig.axes[0]
    _labelled(fig)
    h = np.asarray(ax.get_images()[0].get_array())
    a = torch.linspace(-2, 2, 21)
    want = (F.silu(a)[None, :] * a[:, None]).numpy()  # rows: b, columns: a
    assert np.allclose(h, want, atol=1e-6)
    slices = fig.axes[1].get_lines()
    assert len(slices) == 5


def test_ffn_parameter_counts_match_at_multiples_of_three():
    n = viz.ffn_parameter_counts(768)
    assert n["swiglu_d_ff"] == 2048 and n["swiglu_d_ff"] % 64 == 0
    assert n["relu_params"] == n["swiglu_params"] == 8 * 768**2
    n = viz.ffn_parameter_counts(512)
    assert n["swiglu_d_ff"] >= 8 * 512 / 3 and n["swiglu_d_ff"] % 64 == 0


def test_a_failing_plot_leaves_no_figure_behind():
    def stub(*args):
        raise NotImplementedError("Task 3.1 is not implemented yet: write rms_norm in minilm/rmsnorm.py")

    plt.close("all")
    with pytest.raises(NotImplementedError):
        viz.plot_activation_scale(lambda d_in, d_out: stub(), d=8, n_layers=2)
    with pytest.raises(NotImplementedError):
        viz.plot_rmsnorm_vs_layernorm(stub)
    assert plt.get_fignums() == []
