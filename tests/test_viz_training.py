"""Tests for minilm/course/viz/data.py, training.py and generation.py: the pictures and helpers of
notebooks 09 (tokens and data), 10 (training) and 11 (generation)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import minilm  # noqa: E402
from minilm.course import corpus  # noqa: E402
from minilm.course.viz import data as vd  # noqa: E402
from minilm.course.viz import generation as vg  # noqa: E402
from minilm.course.viz import training as vt  # noqa: E402


def _labelled(fig):
    for ax in fig.axes:
        assert ax.get_title() and ax.get_xlabel()
    plt.close(fig)


# ---------------------------------------------------------------- 09


def test_bpe_merges_replay_tiktoken():
    enc = corpus.tokenizer()
    for chunk in (" Shakespeare", " antidisestablishmentarianism", " 12345", "héllo"):
        steps = vd.bpe_merges(enc, chunk)
        assert b"".join(steps[0]) == chunk.encode() and all(len(p) == 1 for p in steps[0])
        assert [len(s) for s in steps] == list(range(len(steps[0]), len(steps[0]) - len(steps), -1))
        assert [enc.encode_single_token(p) for p in steps[-1]] == enc.encode_ordinary(chunk)
    assert vd.format_merges(vd.bpe_merges(enc, " the")).splitlines()[-1].endswith("·the")


def test_token_spans_html_and_token_text():
    enc = corpus.tokenizer()
    html = vd.token_spans_html(enc, ["a <b> c", "🤖"])
    assert html.count("<span") == len(enc.encode_ordinary("a <b> c")) + len(enc.encode_ordinary("🤖"))
    assert "&lt;" in html and "<b>" not in html and "⟨" in html  # escaped; partial UTF-8 bytes as hex
    assert vd.token_text(b" the\n") == "·the↵"
    assert vd.token_text(b"\xf0\x9f") == "⟨f0 9f⟩"


def test_token_stats_and_batch_plots():
    enc = corpus.tokenizer()
    text = "To be, or not to be: that is the question. Antidisestablishmentarianism!"
    per_word, token_chars = vd.words_and_tokens(enc, text)
    assert len(per_word) == len(text.split()) and per_word.max() > 1
    assert token_chars.sum() == len(text.encode())
    _labelled(vd.plot_token_stats(enc, text, np.asarray(enc.encode_ordinary(text))))
    x = torch.arange(40).reshape(2, 20)
    fig = vd.plot_batch(x, x + 1, str, rows=2, cols=8)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "x[0]" in texts and "y[1]" in texts and "8" in texts  # y[0] starts at x[0, 1]
    _labelled(fig)


def test_shakespeare_dataset_is_prepared_once(tmp_path):
    train_path, val_path = vd.shakespeare_dataset(tmp_path / "ts")
    assert vd.shakespeare_dataset(tmp_path / "ts") == (train_path, val_path)
    assert corpus.load_tokens(train_path).dtype == np.uint16


# ---------------------------------------------------------------- 10


@pytest.mark.task("10.3")
def test_plot_lr_schedule_draws_the_schedule():
    fig = vt.plot_lr_schedule(minilm.lr_cosine_schedule, 1.0, 0.1, 10, 80, 100)
    line = [ln for ln in fig.axes[0].lines if ln.get_label() == "lr_cosine_schedule"][0]
    y = line.get_ydata()
    assert y[0] == 0 and y[10] == pytest.approx(1.0) and y[-1] == pytest.approx(0.1)
    _labelled(fig)


def test_plot_bias_correction_corrected_is_one():
    fig = vt.plot_bias_correction((0.9, 0.999), 20)
    corrected = [ln for ln in fig.axes[0].lines if "corrected" in ln.get_label()]
    assert len(corrected) == 2 and all(np.allclose(ln.get_ydata(), 1.0) for ln in corrected)
    _labelled(fig)


def test_bias_correction_step_panel_shows_adams_steps_for_a_constant_gradient():
    """The right panel's steps against Adam's recursion run step by step (g = 1, ε = 0)."""
    b1, b2, steps = 0.9, 0.999, 60
    m = v = 0.0
    raw, corrected = [], []
    for t in range(1, steps + 1):
        m, v = b1 * m + (1 - b1), b2 * v + (1 - b2)
        raw.append(m / math.sqrt(v))
        corrected.append((m / (1 - b1**t)) / math.sqrt(v / (1 - b2**t)))
    fig = vt.plot_bias_correction((b1, b2), steps)
    panel = fig.axes[1]
    lines = {ln.get_label().split(":")[0]: ln for ln in panel.lines}
    assert np.allclose(lines["without correction"].get_ydata(), raw)
    assert np.allclose(lines["with correction"].get_ydata(), corrected) and np.allclose(corrected, 1)
    assert raw[0] == pytest.approx(0.1 / math.sqrt(0.001)) and max(raw) > 6  # the first steps are far too large
    assert "|Δθ|" in panel.get_title() and panel.get_legend() is not None
    _labelled(fig)


@pytest.mark.task("10.4")
def test_decay_vs_l2_separates_adamw_from_l2():
    r = vt.decay_vs_l2(minilm.AdamW, steps=50)
    assert max(r["AdamW"]) / min(r["AdamW"]) < 1.05
    assert r["Adam + L2"][0] < r["AdamW"][0] < r["Adam + L2"][-1]
    _labelled(vt.plot_decay_vs_l2(r, steps=50))


@pytest.mark.task("10.4")
def test_decay_vs_l2_step_panel_shows_the_actual_steps():
    """The step sizes are the optimizer's real |Δθ| ÷ lr. Step 1, from weights at 1 with
    gradient g: Adam's m̂/√v̂ is sign(g), so AdamW moves by lr·|sign(g) + λ| (decay outside
    the normalisation), and Adam + L2, whose gradient g + λ·1 is positive at scale 0.01, by
    exactly lr. AdamW's steps do not depend on the gradients' scale; L2's do."""
    lr, wd, scales = 0.01, 0.5, (0.01, 0.1, 1.0, 10.0)
    r = vt.decay_vs_l2(minilm.AdamW, lr=lr, weight_decay=wd, steps=40, grad_scales=scales)
    adamw, l2 = np.asarray(r["step"]["AdamW"]), np.asarray(r["step"]["Adam + L2"])
    assert adamw.shape == l2.shape == (len(scales), 40)
    signs = torch.randn(32, generator=torch.Generator().manual_seed(0)).sign()
    assert adamw[:, 0] == pytest.approx((signs + wd).abs().mean().item(), rel=1e-4)
    assert l2[0, 0] == pytest.approx(1.0, rel=1e-4)
    assert np.allclose(adamw[0], adamw[-1], rtol=1e-3)  # scale-free, decay included
    assert not np.allclose(l2[0], l2[-1], rtol=0.1)
    fig = vt.plot_decay_vs_l2(r, scales, lr, wd, steps=40)
    panel = fig.axes[1]
    drawn = {ln.get_label(): ln.get_ydata() for ln in panel.lines}
    assert np.allclose(drawn["Adam + L2, gradients × 0.01"], l2[0]) and np.allclose(drawn["Adam + L2, gradients × 10"],
                                                                                    l2[-1])
    assert np.allclose(drawn["AdamW, gradients × 0.01 or × 10 (the same steps)"], adamw[0])
    assert "|Δθ|" in panel.get_title()
    _labelled(fig)


def test_plot_losses_moving_average_is_centred():
    """A loss falling in a straight line: a centred average lies on it (a trailing one would
    sit (k − 1)/2 steps behind, above a falling curve), drawn at the steps it averages."""
    steps = list(range(1, 41))
    history = {"step": steps, "train": [8.0 - 0.1 * s for s in steps], "val_step": [20, 40], "val": [6.0, 4.0]}
    fig = vt.plot_losses(history, baseline=5.0, vocab_size=512)
    (smooth,) = [ln for ln in fig.axes[0].lines if "average" in ln.get_label()]
    x, y = np.asarray(smooth.get_xdata()), np.asarray(smooth.get_ydata())
    assert x[0] == pytest.approx(6.0) and x[-1] == pytest.approx(35.0)  # centres of 11-step windows
    assert np.allclose(y, 8.0 - 0.1 * x)
    _labelled(fig)


def test_shakespeare_data_vocabulary():
    data = vt.load_shakespeare(512)
    assert data.vocab_size == 512 and data.train.max() == data.val.max() == 511
    assert 0.6 < data.coverage < 1 and 0 < data.baseline < math.log(512)
    ids = data.encode("ROMEO: the king")
    assert data.decode(ids) == "ROMEO: the king" and data.decode([data.rare]) == "⁇"


def test_progress_honours_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert vt.progress(range(3)).disable


@pytest.mark.task("10.4")
@pytest.mark.slow
def test_train_small_model_learns_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("MINILM_DATA_DIR", str(tmp_path))
    cfg = vt.TrainConfig(vocab_size=256, d_model=32, num_heads=2, d_ff=64, context_length=32, steps=30,
                         eval_interval=10, eval_tokens=512, warmup=3)
    data = vt.load_shakespeare(cfg.vocab_size)
    model, history = vt.train_small_model(cfg, data, show_progress=False)
    assert history["step"] == list(range(1, 31)) and history["val_step"] == [10, 20, 30]
    assert history["train"][-1] < history["train"][0] - 1
    assert vt.cache_path(cfg).exists()
    again, history2 = vt.train_small_model(cfg, data, show_progress=False)
    assert history2 == history
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    fig = vt.plot_losses(history, data.baseline, cfg.vocab_size, resumed_at=15)
    assert list(fig.axes[0].lines[0].get_ydata()) == history["train"]
    _labelled(fig)


def test_plot_grad_norms_marks_the_clipped_steps():
    history = {"step": [1, 2, 3, 4], "grad_norm": [0.5, 1.5, 2.0, 0.8]}
    fig = vt.plot_grad_norms(history, max_norm=1.0, resumed_at=2)
    ax = fig.axes[0]
    assert list(ax.lines[0].get_ydata()) == history["grad_norm"]
    assert ax.collections[0].get_offsets()[:, 0].tolist() == [2, 3]  # the steps above max_norm
    assert any("2 of 4 steps" in t.get_text() for t in ax.get_legend().get_texts())
    _labelled(fig)


@pytest.mark.task("10.4")
@pytest.mark.slow
def test_overfit_opens_a_gap_and_its_plot():
    """A tiny model on 256 tokens for a few epochs: the loss on those tokens falls below the
    validation loss, and the plot draws both curves per epoch."""
    cfg = vt.TrainConfig(vocab_size=256, d_model=32, num_heads=2, d_ff=64, context_length=32, eval_tokens=256)
    data = vt.load_shakespeare(cfg.vocab_size)
    result = vt.overfit(data, cfg, tokens=256, epochs=8, batch_size=4, lr=1e-2)
    assert result["epoch"] == list(range(1, 9)) and result["steps_per_epoch"] == 2
    assert result["train"][-1] < result["train"][0] and result["train"][-1] < result["val"][-1]
    fig = vt.plot_overfitting(result, data.baseline)
    assert [list(ln.get_ydata()) for ln in fig.axes[0].lines[:2]] == [result["train"], result["val"]]
    _labelled(fig)


@pytest.mark.task("8.1")
def test_decay_groups_leave_out_the_gains():
    torch.manual_seed(0)
    model = minilm.TransformerLM(64, 16, 16, 2, 2, 32)
    decay, no_decay = vt.decay_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert len(no_decay["params"]) == 2 * 2 + 1  # two RMSNorms per block and the final one
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


@pytest.mark.task("10.4")
def test_training_state_is_16_bytes_per_parameter_with_adamw():
    """fp32 weights, gradients and AdamW's two moments: 4 + 4 + 4 + 4 bytes per parameter, read
    off the tensors themselves; a layer used twice holds its weight once."""
    torch.manual_seed(0)
    shared = torch.nn.Linear(8, 8, bias=False)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), shared, torch.nn.ReLU(), shared, torch.nn.Linear(8, 3))
    n = (5 * 8 + 8) + 8 * 8 + (8 * 3 + 3)
    optimizer = minilm.AdamW(model.parameters(), lr=1e-3)
    before = vt.training_state_bytes(model, optimizer)
    assert before == {"parameters": n, "weights": 4 * n, "gradients": 0, "optimizer": 0}
    model(torch.randn(4, 5)).pow(2).mean().backward()
    optimizer.step()
    after = vt.training_state_bytes(model, optimizer)
    # A step counter kept as a tensor (allowed) is the only state not shaped like its parameter.
    counters = sum(t.untyped_storage().nbytes() for p, state in optimizer.state.items()
                   for t in state.values() if isinstance(t, torch.Tensor) and t.shape != p.shape)
    assert after["weights"] == after["gradients"] == 4 * n
    assert after["optimizer"] - counters == 8 * n  # exp_avg and exp_avg_sq
    assert after["weights"] + after["gradients"] + after["optimizer"] - counters == 16 * n


def test_saved_tensor_bytes_counts_what_backward_keeps_once_per_storage():
    x = torch.randn(1000, requires_grad=True)
    w = torch.randn(1000, requires_grad=True)
    assert vt.saved_tensor_bytes(lambda: (x * w).sum()) == 8000  # x·w's gradients need both factors
    assert vt.saved_tensor_bytes(lambda: (x * w).sum(), exclude=[w]) == 4000
    assert vt.saved_tensor_bytes(lambda: (x + w).sum()) == 0  # a sum's gradient needs no inputs

    def squares():
        e = x.exp()  # keeps its output e
        return (e.view(10, 100) * e.view(10, 100)).sum()  # two views of e: still one storage

    assert vt.saved_tensor_bytes(squares) == 4000

    def detached_max():
        m = (x * w).amax().detach()  # the amax node, and what it saved, are dropped at once
        return (x - m).exp().sum()  # keeps exp's output only

    assert vt.saved_tensor_bytes(detached_max, exclude=[x, w]) == 4000
    with torch.no_grad():
        assert vt.saved_tensor_bytes(lambda: (x * w).sum()) == 0


def test_activation_estimate_adds_up_the_listed_tensors():
    """The formula written out tensor by tensor, for d = 8, h = 2, d_ff = 16, V = 32, T = 4."""
    d, h, d_ff, V, T = 8, 2, 16, 32, 4
    norm = d + d + 1  # x, x/rms, 1/rms
    attention = d + 3 * d + d + h * (T + 1 + T)  # input, q k v, heads' output; exps, sum, probs
    swiglu = d + 5 * d_ff
    per_token = 4 * (3 * (2 * norm + attention + swiglu) + norm + d + 2 * V + 1) + 8 + 8
    est = vt.activation_estimate(batch=5, seq=T, d_model=d, num_layers=3, num_heads=h, d_ff=d_ff, vocab_size=V)
    assert est["total"] == 5 * T * per_token == est["layers"] + est["top"]
    assert est["attention weights"] == 4 * 5 * T * 3 * 2 * h * T
    assert vt.activation_estimate(10, T, d, 3, h, d_ff, V)["total"] == 2 * est["total"]


@pytest.mark.task("10.1")
def test_activation_memory_grows_with_the_batch_and_faster_with_the_context():
    cfg = vt.TrainConfig(vocab_size=256, context_length=64, d_model=32, num_layers=2, num_heads=2, d_ff=64)
    torch.manual_seed(0)
    model = minilm.TransformerLM(cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.num_layers, cfg.num_heads,
                                 cfg.d_ff)
    mem = {(b, t): vt.activation_memory(model, cfg, b, t, minilm.cross_entropy) for b, t in
           ((2, 32), (4, 32), (8, 32), (4, 64))}
    measured = {k: v["measured"] for k, v in mem.items()}
    # Exactly linear in the batch: a fixed part (mask, RoPE tables) plus the same bytes per sequence.
    assert measured[8, 32] - measured[4, 32] == 2 * (measured[4, 32] - measured[2, 32]) > 0
    assert measured[4, 64] > 2.05 * measured[4, 32]  # twice the tokens, each attending to twice as many
    lengths = [16, 32, 64]
    fig = vt.plot_activation_memory(lengths, [vt.activation_memory(model, cfg, 2, t, minilm.cross_entropy)
                                              for t in lengths], batch=2)
    assert len(fig.axes[0].lines) == 3 and fig.axes[0].get_legend() is not None
    _labelled(fig)


# ---------------------------------------------------------------- 11


def test_filtered_probs_rules():
    logits = vg.EXAMPLE_LOGITS
    assert torch.allclose(vg.filtered_probs(logits), torch.softmax(logits.double(), -1))
    assert vg.filtered_probs(logits, temperature=0)[0] == 1
    k3 = vg.filtered_probs(logits, top_k=3)
    assert (k3[3:] == 0).all() and k3.sum().item() == pytest.approx(1)
    p = vg.filtered_probs(logits, top_p=0.8)
    full = torch.softmax(logits.double(), -1)
    kept = int((p > 0).sum())
    assert full[: kept - 1].sum() < 0.8 <= full[:kept].sum()
    with pytest.raises(ValueError, match="stored for EXAMPLE_LOGITS"):
        vg.filtered_probs(logits, top_p=1e-9)
    fig = vg.plot_sampling_rules()
    assert len(fig.axes) == 3
    _labelled(fig)


@pytest.mark.task("11.2")
def test_sample_frequencies_follow_the_rules():
    f = vg.sample_frequencies(minilm.generate, n=500, top_k=3)
    assert f.sum() == pytest.approx(1) and f[3:].sum() == 0
    settings = {"top-k": dict(top_k=3)}
    fig = vg.plot_samples_vs_exact(settings, {"top-k": f}, n=500)
    assert np.allclose([b.get_height() for b in fig.axes[0].patches], f)
    _labelled(fig)


@pytest.mark.task("11.3")
def test_kv_cache_timings_and_plot():
    torch.manual_seed(0)
    model = minilm.TransformerLM(64, 32, 16, 1, 2, 32)
    t = vg.kv_cache_timings(model, lengths=(4, 16, 32), repeats=1)
    assert t["length"] == [4, 16, 32] and all(v > 0 for v in t["no cache"] + t["KV cache"])
    fig = vg.plot_kv_timings(t)
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), 1e3 * np.asarray(t["no cache"]))
    _labelled(fig)


@pytest.mark.task("8.1")
def test_ban_token_never_generated():
    torch.manual_seed(0)
    model = minilm.TransformerLM(16, 8, 16, 1, 2, 32)
    banned = vg.BanToken(model, 3)
    logits = banned(torch.tensor([[1, 2, 3]]))
    assert torch.isinf(logits[..., 3]).all() and torch.isfinite(logits[..., :3]).all()


@pytest.mark.task("14.2")
@pytest.mark.task("14.4")
@pytest.mark.slow
def test_an_ablation_run_trains_with_its_recipe(tmp_path, monkeypatch):
    """Notebook 14's runs (its cell is too slow for nbval): Muon with WSD, on a tiny setup, learns;
    the same run again comes from the cache."""
    from minilm.course.viz import modern as vm

    monkeypatch.setenv("MINILM_DATA_DIR", str(tmp_path))
    setup = vm.ABLATION.replace(vocab_size=256, context_length=32, d_model=32, num_heads=2, d_ff=64, steps=20,
                                warmup=2, eval_tokens=512)
    data = vt.load_shakespeare(setup.vocab_size)
    change = vm.Change("Muon + WSD", dict(optimizer="muon", schedule="wsd"))
    run = vm.train_run(setup, change, data)
    assert len(run["curve"]) == 20 and not run["diverged"]
    assert sum(run["curve"][-5:]) / 5 < sum(run["curve"][:5]) / 5 - 0.5
    again = vm.train_run(setup, change, data)
    assert {k: v for k, v in again.items() if k != "state"} == {k: v for k, v in run.items() if k != "state"}
    assert again["state"].keys() == run["state"].keys()
    assert all(torch.equal(again["state"][k], run["state"][k]) for k in run["state"])  # the weights, for ensembles


def test_ablation_verdicts_table_and_picture_share_one_noise():
    """Notebook 14's rule: Δ against the same seed's baseline, noise = the baseline's spread between
    seeds, better/worse only when every seed's Δ lies beyond it; the table names the baseline by seed
    and the picture shades each table's own spread."""
    import matplotlib.pyplot as plt

    from minilm.course.viz import modern as vm

    base = {"seeds": [0, 1, 2], "bpb": [2.00, 1.96, 1.98], "delta": [0.0] * 3, "parameters": 10, "spread": 0.04}
    rows = {"baseline": base,
            "big": {"seeds": [0], "bpb": [1.90], "delta": [-0.10], "parameters": 10},
            "all higher": {"seeds": [0, 1, 2], "bpb": [2.05, 1.99, 2.03], "delta": [0.05, 0.03, 0.05],
                           "parameters": 10},
            "worse": {"seeds": [0, 1, 2], "bpb": [2.05, 2.01, 2.03], "delta": [0.05, 0.05, 0.05], "parameters": 10},
            "mixed": {"seeds": [0, 1, 2], "bpb": [2.01, 1.95, 1.98], "delta": [0.01, -0.01, 0.0], "parameters": 10}}
    assert [vm.verdict(rows[k], 0.04) for k in ("big", "all higher", "worse", "mixed")] == [
        "better", "within noise", "worse", "within noise"]
    table = vm.ablation_table(rows)
    assert "0: 2.000, 1: 1.960, 2: 1.980" in table and "±0.040" in table and "+0.050 +0.030 +0.050" in table
    limited = {"baseline": dict(base, spread=0.08), "x": rows["worse"]}
    fig = vm.plot_deltas(rows, limited, title="t")
    widths = [c.get_paths()[0].get_extents().width for c in fig.axes[0].collections if c.get_paths()]
    assert widths == [pytest.approx(0.08)] * 4 + [pytest.approx(0.16)]  # ±0.04 on the first table's rows, ±0.08
    plt.close(fig)
