"""Tests for minilm/course/viz/rope.py and minilm/course/viz/attention.py: the plots show the right data and
the explorers react to their widgets (no browser: ipywidgets 8 runs observers synchronously)."""

import io
import json
import math
import os
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

import minilm
from minilm.course.viz import attention as va
from minilm.course.viz import rope as vr

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_SHARED_TIKTOKEN = Path(__file__).resolve().parents[2] / "shared" / "tiktoken"
if "TIKTOKEN_CACHE_DIR" not in os.environ and _SHARED_TIKTOKEN.is_dir():  # offline development machines
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_SHARED_TIKTOKEN)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _labelled(fig):
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), f"unlabelled axes: {ax}"


# ---------------------------------------------------------------- RoPE plots


def test_sinusoidal_plot_draws_the_clocks_of_the_formula():
    fig = vr.plot_sinusoidal(16, 16)
    waves, lengths = fig.axes[0].get_lines(), fig.axes[1].get_lines()[0]
    for line in waves:  # pair i's wave is sin(p · 10000^(−2i/16)) at every plotted p
        i = int(line.get_label().split()[1].rstrip(":"))
        p, y = line.get_xdata(), line.get_ydata()
        assert y == pytest.approx([math.sin(x / 10000 ** (2 * i / 16)) for x in p], abs=1e-9)
        assert p[0] == 0 and p[-1] == 15 and len(p) > 16  # continuous positions, not a table of rows
    assert lengths.get_ydata() == pytest.approx([2 * math.pi * 10000 ** (2 * i / 16) for i in range(8)])
    _labelled(fig)


def test_the_rope_pictures_compute_no_task_of_notebook_13():
    assert not hasattr(vr, "sinusoidal_encoding"), "Task 13.2's table is the student's to build"


def _turn_pair_by_position(x, positions, theta=10000.0):
    """A stand-in rope_fn for the plumbing: every pair becomes (cos p, sin p) at position p."""
    p = torch.as_tensor(positions).float().expand(x.shape[:-1])
    return torch.stack((p.cos(), p.sin()), -1).repeat_interleave(1, -1).repeat(*([1] * (x.dim() - 1)), x.shape[-1] // 2)


def test_plots_work_with_any_rope_fn():
    for fig in (vr.plot_pair_rotation(_turn_pair_by_position), vr.plot_frequencies(_turn_pair_by_position),
                vr.plot_relative_dot(_turn_pair_by_position, num_positions=8, max_distance=16, num_samples=4)):
        _labelled(fig)


@pytest.mark.task("5.1")
def test_pair_rotation_plots_the_rotated_pairs():
    fig = vr.plot_pair_rotation(d_k=16, num_positions=12, pairs=(0, 2))
    want = minilm.rope(vr.unit_pairs(16).expand(12, 16), torch.arange(12))  # the plot shows your rope
    for ax, i in zip(fig.axes[:2], (0, 2)):
        torch.testing.assert_close(torch.tensor(ax.collections[0].get_offsets().data, dtype=torch.float32),
                                   want[:, 2 * i: 2 * i + 2], atol=1e-5, rtol=0)
    _labelled(fig)


@pytest.mark.task("5.1")
def test_pair_rotation_joins_each_pairs_dots_in_order_of_position():
    fig = vr.plot_pair_rotation(d_k=16, num_positions=12, pairs=(0, 2))
    for ax in fig.axes[:2]:
        dots = ax.collections[0].get_offsets().data
        assert any(line.get_xydata().shape == dots.shape and (abs(line.get_xydata() - dots) < 1e-6).all()
                   for line in ax.get_lines()), f"{ax.get_title()}: no line through the dots in order of position"


def _overlap(legend, ax) -> int:
    """How many plotted points of `ax` lie under its legend's box."""
    ax.figure.canvas.draw()
    box = legend.get_window_extent()
    points = [line.get_transform().transform(line.get_xydata()) for line in ax.get_lines()]
    return sum(int(box.contains(x, y)) for xy in points for x, y in xy)


def test_legends_cover_no_curve():
    for fig in (vr.plot_sinusoidal(64, 64), vr.plot_frequencies(d_k=64), vr.plot_frequencies(d_k=16)):
        for ax in fig.axes:
            if ax.get_legend() is not None:
                assert _overlap(ax.get_legend(), ax) == 0, f"the legend of '{ax.get_title()}' covers plotted points"
        plt.close(fig)


@pytest.mark.task("5.1")
def test_measured_frequencies_follow_the_formula():
    omega = vr.measured_frequencies(d_k=16, theta=10000.0)
    torch.testing.assert_close(omega, 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16), rtol=1e-4,
                               atol=1e-6)
    _labelled(vr.plot_frequencies(d_k=16))


@pytest.mark.task("5.1")
def test_relative_scores_depend_only_on_the_offset():
    q, k = torch.randn(16), torch.randn(16)
    s = vr.relative_scores(None, q, k, torch.arange(12))
    for offset in (-3, 0, 5):
        diag = s.diagonal(offset)
        torch.testing.assert_close(diag, diag[0].expand_as(diag), atol=1e-4, rtol=1e-4)
    prof = vr.distance_profile(None, q, q, 8)
    assert prof[0] == pytest.approx(q.dot(q).item(), rel=1e-4)
    _labelled(vr.plot_relative_dot(num_positions=8, max_distance=16, num_samples=4))


# ---------------------------------------------------------------- RoPE explorer


@pytest.mark.task("5.1")
def test_rope_explorer_moves_the_point_with_the_sliders():
    e = vr.rope_explorer(d_k=16)
    png = e.image.value
    for position, theta, pair in ((9, 10000.0, 0), (9, 10000.0, 3), (30, 100.0, 3)):
        before = e.point.get_offsets().copy()
        e.position.value, e.theta.value, e.pair.value = position, theta, pair
        want = minilm.rope(vr.unit_pairs(16)[None], torch.tensor([position]), theta)[0, 2 * pair: 2 * pair + 2]
        got = torch.tensor(e.point.get_offsets()[0], dtype=torch.float32)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        assert not (before == e.point.get_offsets()).all()
        assert len(e.trail.get_xdata()) == position + 1
    angle = (position * theta ** (-2 * pair / 16)) % (2 * math.pi)
    assert e.bars[pair].get_height() == pytest.approx(angle, abs=1e-3)
    assert e.image.value != png  # the shown picture was re-rendered


def test_rope_explorer_takes_any_rope_fn():
    e = vr.rope_explorer(_turn_pair_by_position)
    e.position.value = 3
    assert e.point.get_offsets()[0] == pytest.approx([math.cos(3), math.sin(3)], abs=1e-5)


# ---------------------------------------------------------------- attention


def test_score_scaling_plot():
    fig = va.plot_score_scaling(d_ks=(4, 64, 1024), num_samples=500)
    raw, sqrt_line, scaled = (line.get_ydata() for line in fig.axes[0].get_lines())
    assert raw[-1] / raw[0] == pytest.approx(16, rel=0.25)  # sqrt(1024 / 4)
    assert all(0.85 < s < 1.15 for s in scaled)
    _labelled(fig)


def test_causal_mask():
    m = va.causal_mask(4)
    assert m.dtype == torch.bool and m[2, 2] and m[2, 0] and not m[2, 3]


@pytest.mark.task("6.3")
def test_attention_weights_match_the_module():
    """The recomputed weights, applied to the module's values, give the module's output."""
    attn = minilm.MultiHeadSelfAttention(32, 4, 16, 10000.0)
    x = torch.randn(7, 32)
    w = va.attention_weights(attn, x)
    assert w.shape == (4, 7, 7) and torch.all(w.triu(1) == 0), "weights of future keys must be 0"
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 7))
    v = attn.v_proj(x).view(7, 4, 8).transpose(0, 1)
    out = attn.output_proj((w @ v).transpose(0, 1).reshape(7, 32))
    torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=1e-4)


@pytest.mark.task("6.3")
def test_hand_wired_heads_do_what_they_say():
    ids, tokens = va.gpt2_tokens(" one two three four one two three four")
    w = va.attention_weights(va.hand_wired_attention(), va.TokenFeatures()(ids))
    seq = len(tokens)
    assert w[0].argmax(-1)[1:].tolist() == list(range(seq - 1))  # previous token
    for t in range(4, seq):  # same token: the earlier copy gets real weight
        assert w[1, t, t - 4] > 0.3
    assert (w[2, -1, -4:] > 0.05).all()  # recent window, not one-hot


@pytest.mark.task("6.3")
def test_head_grid_and_map_are_labelled_with_tokens():
    ids, tokens = va.gpt2_tokens("Hello world, hello")
    w = va.attention_weights(va.hand_wired_attention(), va.TokenFeatures()(ids))
    fig = va.plot_head_grid(w, tokens, va.HAND_WIRED)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert min(t.get_fontsize()
               for t in ax.get_xticklabels() + ax.get_yticklabels()) >= 10, "token labels too small to read"
    assert ax.get_title() == va.HAND_WIRED[0]
    torch.testing.assert_close(torch.tensor(ax.images[0].get_array().filled(0.0), dtype=torch.float32), w[0],
                               atol=1e-6, rtol=0)
    _labelled(fig)
    _labelled(va.plot_attention_map(w[1], tokens))


@pytest.mark.task("6.3")
def test_attention_explorer_follows_text_layer_and_head():
    torch.manual_seed(0)
    e = va.attention_explorer(text="a b c a b c")
    stack = e.model

    def shown():
        return torch.tensor(e.im.get_array().filled(0.0), dtype=torch.float32)

    png = e.image.value
    for text, layer, head in (("a b c a b c", 0, 1), ("The cat sat on the mat", 0, 0),
                              ("The cat sat on the mat", 1, 3)):
        before = shown()
        e.text.value, e.layer.value, e.head.value = text, layer, head
        ids, tokens = va.gpt2_tokens(text)
        x = stack.token_embeddings(ids)
        for block in stack.layers[:layer]:
            x = x + block.attn(x)
        want = va.attention_weights(stack.layers[layer].attn, x)[head]
        assert e.tokens == tokens and shown().shape == (len(tokens), len(tokens))
        torch.testing.assert_close(shown(), want, atol=1e-5, rtol=1e-4)
        assert before.shape != want.shape or not torch.allclose(before, want)
    assert e.image.value != png


@pytest.mark.task("8.1")
def test_attention_explorer_reads_a_transformer_lm():
    model = minilm.TransformerLM(vocab_size=50257, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=64)
    e = va.attention_explorer(model, text="hello there")
    e.layer.value, e.head.value = 1, 2
    ids, _ = va.gpt2_tokens("hello there")
    with torch.no_grad():
        x = model.layers[0](model.token_embeddings(ids))
        want = va.attention_weights(model.layers[1].attn, model.layers[1].ln1(x))[2]
    torch.testing.assert_close(torch.tensor(e.im.get_array().filled(0.0), dtype=torch.float32), want, atol=1e-5,
                               rtol=1e-4)


# ---------------------------------------------------------------- explorers: size, layout, any model's vocabulary


def _px(value: str) -> int:
    assert value.endswith("px"), f"not a size in CSS pixels: {value!r}"
    return int(value[:-2])


def _picture_is_twice_its_display_size(image):
    from PIL import Image

    shown = (_px(image.layout.width), _px(image.layout.height))
    assert Image.open(io.BytesIO(image.value)).size == (2 * shown[0], 2 * shown[1]), "the PNG is not 2x its display"
    return shown


@pytest.mark.task("5.1")
def test_rope_explorer_shows_a_sharp_picture_at_its_own_size_below_its_sliders():
    e = vr.rope_explorer(d_k=16)
    assert _picture_is_twice_its_display_size(e.image) == vr.RopeExplorer.SIZE
    e.position.value = 12
    assert _picture_is_twice_its_display_size(e.image) == vr.RopeExplorer.SIZE  # redrawn at the same size
    sliders, image = e.widget.children
    assert image is e.image and set(sliders.children) == {e.position, e.theta, e.pair}
    assert vr.RopeExplorer.SIZE[1] + 40 < 600, "sliders and picture must fit a 900-pixel window together"


@pytest.mark.task("6.3")
def test_attention_explorer_shows_a_sharp_map_at_its_own_size_beside_its_controls():
    e = va.attention_explorer(text="a b c a b c")
    assert _picture_is_twice_its_display_size(e.image) == va.AttentionExplorer.SIZE
    e.text.value = "The cat sat on the mat"
    assert _picture_is_twice_its_display_size(e.image) == va.AttentionExplorer.SIZE
    controls, image = e.widget.children
    assert image is e.image and {e.text, e.layer, e.head} <= set(controls.children)
    assert va.AttentionExplorer.SIZE[1] < 600


def _shown_map(e):
    return torch.tensor(e.im.get_array().filled(0.0), dtype=torch.float32)


@pytest.mark.task("8.1")
def test_attention_explorer_reads_the_seed_model_with_its_vocabulary_of_1000():
    """Notebook 08's seed model reads ids 0 … 999: GPT-2's tokenizer cut to its first 1,000 tokens."""
    from minilm.course import corpus

    torch.manual_seed(0)
    seed = minilm.TransformerLM(vocab_size=1000, context_length=512, d_model=256, num_layers=4, num_heads=8, d_ff=1024)
    text = "The cat sat on the mat."
    e = va.attention_explorer(seed, text=text)
    e.layer.value, e.head.value = 3, 7
    enc = corpus.gpt2_prefix_tokenizer(1000)
    assert e.ids == enc.encode(text) and max(e.ids) < 1000
    assert "".join(e.tokens).replace("·", " ") == text and len(e.ids) > len(corpus.tokenizer().encode(text))
    torch.testing.assert_close(_shown_map(e), va.layer_attention(seed, torch.tensor(e.ids), 3)[7], atol=1e-5,
                               rtol=1e-4)
    assert "1,000" in e.note.value
    with pytest.raises(ValueError, match=r"the model's vocabulary is 1,000 \(ids 0 … 999\), text encoded to id 3,797"):
        va.attention_explorer(seed, text="The cat", tokenizer=corpus.tokenizer())  # raw GPT-2 ids: " cat" is 3797


@pytest.mark.task("8.1")
def test_attention_explorer_reads_a_remapped_vocabulary_through_its_tokenizer():
    """Notebook 10's model reads ShakespeareData's ids (the most frequent GPT-2 tokens, then RARE), not GPT-2's."""
    from minilm.course import corpus
    from minilm.course.viz.training import ShakespeareData

    enc = corpus.tokenizer()
    words = [" mat", " on", " sat", " cat", "The", " the", "."]  # model ids 0 … 6; RARE = 7
    gpt2_ids = np.array([enc.encode_single_token(w) for w in words])
    data = ShakespeareData(np.zeros(4, np.uint16), np.zeros(4, np.uint16), gpt2_ids, 1.0, 1.0)
    model = minilm.TransformerLM(vocab_size=data.vocab_size, context_length=32, d_model=32, num_layers=2,
                                 num_heads=4, d_ff=64)
    e = va.attention_explorer(model, text="The cat sat on the dog.", tokenizer=data)
    assert e.ids == [4, 3, 2, 1, 5, 7, 6] == data.encode("The cat sat on the dog.")
    assert e.tokens == ["The", "·cat", "·sat", "·on", "·the", "⁇", "."]
    e.layer.value, e.head.value = 1, 2
    torch.testing.assert_close(_shown_map(e), va.layer_attention(model, torch.tensor(e.ids), 1)[2], atol=1e-5,
                               rtol=1e-4)
    with pytest.raises(ValueError, match=r"the model's vocabulary is 8 \(ids 0 … 7\), text encoded to id 464 "
                                         r"\('The'\) by gpt2"):
        va.attention_explorer(model, text="The cat", tokenizer=enc)
    with pytest.raises(ValueError, match="the model's vocabulary is 8, fewer than GPT-2's 256 single bytes"):
        va.attention_explorer(model)  # no tokenizer, and no cut of GPT-2's fits 8 ids


@pytest.mark.task("10.5")
def test_attention_explorer_loads_a_minilm_train_checkpoint(tmp_path, story_file):
    from minilm.course import corpus
    from minilm.course.train import run
    from minilm.course.vocab import Vocabulary

    out = tmp_path / "run"
    run.main(["--data", str(story_file), "--context-length", "16", "--d-model", "32", "--num-layers", "2",
              "--num-heads", "2", "--d-ff", "64", "--batch-size", "4", "--warmup", "2", "--steps", "6",
              "--eval-interval", "6", "--eval-tokens", "32", "--sample-tokens", "0", "--out-dir", str(out)])
    text = "Once upon a time, Lily saw a zyzzyva."
    rng = torch.get_rng_state()
    e = va.attention_explorer(checkpoint=out / "checkpoint.pt", text=text)
    assert torch.equal(rng, torch.get_rng_state()), "loading a run must leave the caller's random state alone"
    vocab = Vocabulary(np.load(out / "vocab.npy"), corpus.tokenizer())
    assert e.vocab_size == vocab.size < 50257 and e.max_tokens == 16  # the run's context
    assert e.ids == vocab.encode(text).tolist()[:16] and e.ids != corpus.tokenizer().encode(text)[:16]
    assert "".join(e.tokens).replace("·", " ") == vocab.decode(e.ids)
    assert json.loads((out / "config.json").read_text())["seed"] == 1337
    torch.manual_seed(1337)  # the run's initial weights: the checkpoint's are trained
    fresh = minilm.TransformerLM(vocab.size, 16, 32, 2, 2, 64)
    assert not torch.equal(fresh.lm_head.weight, e.model.lm_head.weight)
    e.layer.value, e.head.value = 1, 1
    torch.testing.assert_close(_shown_map(e), va.layer_attention(e.model, torch.tensor(e.ids), 1)[1], atol=1e-5,
                               rtol=1e-4)
    same = va.attention_explorer(checkpoint=out, text=text)  # the directory does as well as its checkpoint.pt
    assert all(torch.equal(a, b) for a, b in zip(same.model.state_dict().values(), e.model.state_dict().values()))
    with pytest.raises(ValueError, match="not both"):
        va.attention_explorer(e.model, checkpoint=out)
    (out / "vocab.npy").unlink()
    with pytest.raises(FileNotFoundError, match="has no vocab.npy"):
        va.attention_explorer(checkpoint=out)
    with pytest.raises(FileNotFoundError, match=r"is not a finished `minilm train` run: it has no config\.json"):
        va.attention_explorer(checkpoint=tmp_path)


@pytest.mark.task("9.3")
@pytest.mark.task("10.5")
def test_attention_explorer_loads_a_run_on_your_own_bpe(tmp_path, story_file):
    from minilm.course.train import run
    from minilm.course.train.own_tokenizer import OwnVocabulary

    out = tmp_path / "mine"
    run.main(["--data", str(story_file), "--context-length", "16", "--d-model", "16", "--num-layers", "1",
              "--num-heads", "2", "--d-ff", "32", "--batch-size", "4", "--warmup", "1", "--steps", "2",
              "--eval-interval", "2", "--eval-tokens", "32", "--sample-tokens", "0", "--tokenizer", "mine",
              "--vocab-size", "300", "--out-dir", str(out)])
    e = va.attention_explorer(checkpoint=out, text="Once upon a time")
    assert isinstance(e.tokenizer, OwnVocabulary) and e.vocab_size == 300
    assert e.ids == e.tokenizer.encode("Once upon a time").tolist()
    assert "".join(e.tokens).replace("·", " ") == "Once upon a time" and "your BPE" in e.note.value


def test_attention_explorer_refuses_what_is_not_a_model():
    with pytest.raises(TypeError, match="expected a TransformerLM or an AttentionStack"):
        va.attention_explorer(torch.nn.Linear(2, 2))
