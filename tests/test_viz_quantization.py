"""Tests for minilm/course/viz/quantization.py: the measurements and pictures of notebook 12."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import minilm  # noqa: E402
from minilm.course.viz import quantization as vq  # noqa: E402


def _weight(seed: int = 0) -> torch.Tensor:
    return torch.randn(48, 32, generator=torch.Generator().manual_seed(seed)) * 0.05


def test_state_dict_bytes_counts_every_tensor():
    layer = torch.nn.Module()
    layer.register_buffer("a", torch.zeros(3, 4, dtype=torch.int8))
    layer.register_buffer("b", torch.zeros(3, 1))
    assert vq.state_dict_bytes(layer) == 12 + 12


@pytest.mark.task("12.1")
def test_relative_error_follows_the_uniform_rounding_estimate():
    w = _weight()
    predicted = (w.abs().max() / w.pow(2).mean().sqrt()).item() / (127 * 12 ** 0.5)
    got = vq.relative_error(w, minilm.quantize_int8, minilm.dequantize_int8, per_channel=False)
    assert abs(got / predicted - 1) < 0.15
    assert vq.relative_error(w, minilm.quantize_int8, minilm.dequantize_int8) < got


@pytest.mark.task("12.1")
def test_an_outlier_spreads_only_per_tensor():
    r = vq.outlier_errors(_weight(1), minilm.quantize_int8, minilm.dequantize_int8, sizes=(1, 10, 100))
    assert max(r["per channel, other rows"]) == min(r["per channel, other rows"])
    assert r["per tensor, other rows"][-1] > 30 * r["per tensor, other rows"][0]
    for part in ("per channel, its row", "per tensor, its row"):
        assert r[part][0] < r[part][1] < r[part][2] <= 1.0 + 1e-6  # at worst everything rounds to 0


@pytest.mark.task("12.1")
def test_pictures_are_titled_labelled_and_have_legends():
    figs = [vq.plot_weight_grid(_weight(), minilm.quantize_int8, minilm.dequantize_int8, "w"),
            vq.plot_outlier_errors(vq.outlier_errors(_weight(), minilm.quantize_int8, minilm.dequantize_int8), "w")]
    for fig in figs:
        titled = [ax for ax in fig.axes if ax.get_title()]  # twin axes share their host's title
        assert titled and all(ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() for ax in titled)
        plt.close(fig)
