"""Tests for minilm/course/viz/bigram.py: notebook 02's bigram model over characters."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import minilm  # noqa: E402
from minilm.course.viz import bigram as vb  # noqa: E402

TEXT = "the cat sat on the mat. the dog sat on the log. " * 40


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_char_text_ids_and_decode():
    data = vb.char_text("abca")
    assert data.chars == "abc" and data.ids.tolist() == [0, 1, 2, 0] and data.vocab_size == 3
    assert data.decode(data.ids) == "abca"


def test_pair_counts_and_floor():
    data = vb.char_text("abab")  # a→b twice, b→a once
    counts = vb.pair_counts(data)
    assert counts.tolist() == [[0.0, 2.0], [1.0, 0.0]]
    assert vb.bigram_floor(counts) == 0.0  # each character has one successor: a table can be certain
    coin = vb.pair_counts(vb.char_text("aab" * 50 + "a"))  # after a: a or b equally often (nearly)
    assert 0 < vb.bigram_floor(coin) < math.log(2)


def test_table_loss_of_the_count_table_is_the_floor():
    data = vb.char_text(TEXT)
    counts = vb.pair_counts(data)
    table = torch.nn.Embedding(data.vocab_size, data.vocab_size)
    with torch.no_grad():
        table.weight.copy_(counts.clamp_min(1e-12).log())
    assert vb.table_loss(table, counts) == pytest.approx(vb.bigram_floor(counts), abs=1e-6)
    with torch.no_grad():
        table.weight.zero_()  # uniform
    assert vb.table_loss(table, counts) == pytest.approx(math.log(data.vocab_size))


@pytest.mark.task("2.2")
def test_train_bigram_reaches_the_floor_with_the_students_embedding():
    data = vb.char_text(TEXT)
    counts = vb.pair_counts(data)
    torch.manual_seed(0)
    table = minilm.Embedding(data.vocab_size, data.vocab_size)
    initial = vb.table_loss(table, counts)
    losses = vb.train_bigram(table, data, steps=150, batch_size=256)
    assert len(losses) == 150 and initial > math.log(data.vocab_size)
    assert vb.table_loss(table, counts) < vb.bigram_floor(counts) + 0.1
    sample = vb.sample_bigram(table, data, length=50, start="t", seed=1)
    assert len(sample) == 50 and set(sample) <= set(data.chars)
    assert sample == vb.sample_bigram(table, data, length=50, start="t", seed=1)


def test_plot_bigram_losses_is_labelled():
    fig = vb.plot_bigram_losses([4.0, 3.0, 2.6, 2.5], vocab_size=65, floor=2.45, initial=4.6)
    ax = fig.axes[0]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None
    assert [ln.get_ydata()[0] for ln in ax.lines[1:3]] == pytest.approx([math.log(65), 2.45])
