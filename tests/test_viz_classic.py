"""Tests for minilm/course/viz/classic.py: the pictures and the cached ablation runs of notebook 13."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import minilm  # noqa: E402
from minilm.course.viz import classic as vc  # noqa: E402
from minilm.course.viz import training as vt  # noqa: E402


def _labelled(fig):
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    plt.close(fig)


@pytest.mark.task("13.2")
def test_plot_sinusoids_similarity_depends_on_the_offset_only():
    fig = vc.plot_sinusoids(minilm.sinusoidal_positions, seq_len=64, d_model=32, anchors=(20, 40))
    first, second = fig.axes[1].lines[:2]
    x1, y1 = first.get_data()
    x2, y2 = second.get_data()
    common = np.intersect1d(x1, x2)
    np.testing.assert_allclose(y1[np.isin(x1, common)], y2[np.isin(x2, common)], atol=1e-9)
    assert y1[x1 == 0][0] == pytest.approx(1.0)  # divided by its value at offset 0
    _labelled(fig)


@pytest.mark.task("13.3")
def test_plot_activations_draws_the_students_functions():
    fig = vc.plot_activations(minilm.gelu, minilm.silu)
    relu, gelu, silu = fig.axes[0].lines[:3]
    x = relu.get_xdata()
    np.testing.assert_allclose(gelu.get_ydata(), [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x], atol=1e-6)
    _labelled(fig)


def test_ablation_runs_are_configured_one_change_at_a_time():
    setup = vc.AblationSetup()
    assert setup.config(vc.RUNS[0]) == minilm.ClassicConfig(1024, 64, 64, 2, 4)
    for run in vc.RUNS:
        if run.name not in ("modern", "classic"):
            assert len(run.changes) == 1, run.name
    assert setup.config(next(r for r in vc.RUNS if r.name == "classic")) == minilm.ClassicConfig.classic(1024, 64, 64,
                                                                                                         2, 4)
    for run in vc.HIGH_LR_RUNS:
        assert setup.train_config(run).max_lr == 4 * setup.train.max_lr


@pytest.mark.task("13.6")
@pytest.mark.slow
def test_train_run_learns_caches_and_tabulates(tmp_path, monkeypatch):
    monkeypatch.setenv("MINILM_DATA_DIR", str(tmp_path))
    setup = vc.AblationSetup(vt.TrainConfig(vocab_size=256, context_length=32, d_model=32, num_heads=2, batch_size=8,
                                            steps=30, warmup=3, eval_interval=10, eval_tokens=512))
    data = vt.load_shakespeare(256)
    runs = (vc.Ablation("modern"), vc.Ablation("classic", vc.CLASSIC))
    results = vc.train_runs(setup, runs, data)
    for r in results.values():
        assert r["history"]["val_step"] == [10, 20, 30] and not r["diverged"]
        assert r["history"]["train"][-1] < r["history"]["train"][0] - 0.5
    assert results["modern"]["parameters"] == sum(p.numel()
                                                  for p in minilm.ClassicLM(setup.config(runs[0])).parameters())
    assert len(list((tmp_path / "models").glob("ablation-*.pt"))) == 2
    assert vc.train_runs(setup, runs, data) == results  # loaded from the cache
    table = vc.ablation_rows(results).splitlines()
    assert table[2].startswith("modern") and table[2].endswith("+0.000") and table[3].startswith("classic")
    fig = vc.plot_ablation(results, data.baseline, "test")
    assert list(fig.axes[0].lines[0].get_ydata()) == results["modern"]["history"]["val"]
    _labelled(fig)
