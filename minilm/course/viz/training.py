"""Pictures and helpers for notebooks 10–10c (training), shared with notebook 11 (generation).

- plot_lr_schedule, plot_bias_correction, plot_decay_vs_l2, plot_losses, plot_grad_norms: the pictures.
- load_shakespeare: Tiny Shakespeare as model token ids over a compact vocabulary (the most
  frequent GPT-2 tokens), so that a small model trains in seconds on a CPU.
- TrainConfig, train_steps, train_small_model: notebook 10b's run as a function,
  and a trained model for notebook 11, cached on disk (keyed by the configuration and the code)
  so that notebook 11 never depends on notebook 10b having run.
- overfit, plot_overfitting: the model trained on a tiny slice again and again, train against
  validation loss; decay_groups: AdamW's parameter groups in nanoGPT's rule.
- training_state_bytes, saved_tensor_bytes, activation_estimate, activation_memory,
  plot_activation_memory: what training keeps in memory, measured and estimated.

The training uses the student's code through `minilm` (TransformerLM, get_batch, cross_entropy,
clip_grad_norm, lr_cosine_schedule, AdamW), like `minilm train`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

import minilm
import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course import corpus, tasks
from minilm.course.train import loop, metrics
from minilm.course.train.loop import TrainConfig
from minilm.course.viz.data import _locked, shakespeare_dataset

# ---------------------------------------------------------------- pictures of the pieces


def plot_lr_schedule(schedule: Callable[..., float], max_lr: float, min_lr: float, warmup_iters: int,
                     cosine_cycle_iters: int, total_iters: int) -> Figure:
    """The learning rate schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters) for
    it = 0 … total_iters − 1, with the three phases shaded."""
    its = np.arange(total_iters)
    lrs = [float(schedule(int(it), max_lr, min_lr, warmup_iters, cosine_cycle_iters)) for it in its]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.axvspan(0, warmup_iters, color="C1", alpha=0.12, label="linear warmup")
    ax.axvspan(warmup_iters, cosine_cycle_iters, color="C0", alpha=0.08, label="cosine decay")
    ax.axvspan(cosine_cycle_iters, total_iters - 1, color="0.5", alpha=0.12, label="floor: min_lr")
    ax.plot(its, lrs, color="C0", lw=2, label="lr_cosine_schedule")
    ax.axhline(max_lr, color="k", ls=":", lw=0.8)
    ax.axhline(min_lr, color="k", ls=":", lw=0.8)
    ax.set(title=f"Cosine schedule with warmup (max_lr {max_lr:g}, min_lr {min_lr:g}, warmup {warmup_iters}, "
                 f"cycle {cosine_cycle_iters})", xlabel="iteration", ylabel="learning rate")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def bias_correction_steps(betas: tuple[float, float] = (0.9, 0.999), steps: int = 60) -> dict[str, np.ndarray]:
    """Adam's step ÷ lr for a constant gradient g = 1, closed form (ε ≈ 0): m_t = 1 − β₁ᵗ and
    v_t = 1 − β₂ᵗ, so the step is m̂_t/√v̂_t = 1 with bias correction and m_t/√v_t =
    (1 − β₁ᵗ)/√(1 − β₂ᵗ) without (3.2 at t = 1 and up to 6.6 near t = 12 for (0.9, 0.999))."""
    t = np.arange(1, steps + 1)
    m, v = 1 - betas[0] ** t, 1 - betas[1] ** t
    return {"t": t, "corrected": (m / (1 - betas[0] ** t)) / np.sqrt(v / (1 - betas[1] ** t)),
            "uncorrected": m / np.sqrt(v)}


def plot_bias_correction(betas: tuple[float, float] = (0.9, 0.999), steps: int = 60) -> Figure:
    """Adam's moments for a constant gradient g = 1: the raw averages m_t and v_t start near 0
    (they are initialised at 0) and the bias-corrected m̂_t, v̂_t are exactly 1 from step 1
    (left); the step they make, in units of the learning rate (right, bias_correction_steps)."""
    t = np.arange(1, steps + 1)
    fig, (ax, ax_step) = plt.subplots(1, 2, figsize=(11, 3.6))
    for beta, name, color in ((betas[0], "m", "C0"), (betas[1], "v", "C3")):
        raw = 1 - beta**t  # m_t = (1 − β) Σ β^(t−s) · 1 = 1 − β^t
        ax.plot(t, raw, color=color, label=f"raw ${name}_t$ (β = {beta})")
        ax.plot(t, raw / (1 - beta**t), color=color, ls="--", label=fr"corrected $\hat{{{name}}}_t = {name}_t/(1-β^t)$")
    ax.set(title="Moments for a constant gradient g = 1", xlabel="step t", ylabel="moment estimate", ylim=(0, 1.1))
    ax.legend(fontsize=8, loc="center right")
    step = bias_correction_steps(betas, steps)
    ax_step.plot(step["t"], step["uncorrected"], color="C3",
                 label=r"without correction: $m_t/\sqrt{v_t}$")
    ax_step.plot(step["t"], step["corrected"], color="C0", ls="--",
                 label=r"with correction: $\hat m_t/\sqrt{\hat v_t}$")
    peak = int(np.argmax(step["uncorrected"]))
    ax_step.annotate(f"{step['uncorrected'][peak]:.1f}× lr at step {step['t'][peak]}",
                     (step["t"][peak], step["uncorrected"][peak]),
                     xytext=(step["t"][peak] + 8, step["uncorrected"][peak] - 1.2), fontsize=8,
                     arrowprops=dict(arrowstyle="->", lw=0.8))
    ax_step.set(title="Step size |Δθ| per step, in units of lr", xlabel="step t", ylabel="|Δθ| / lr",
                ylim=(0, step["uncorrected"].max() * 1.15))
    ax_step.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Adam's bias correction, β = {betas}", fontsize=11)
    fig.tight_layout()
    return fig


def decay_vs_l2(adamw_class, lr: float = 0.01, weight_decay: float = 0.5, steps: int = 200,
                grad_scales=(0.01, 0.1, 1.0, 10.0), seed: int = 0) -> dict[str, list]:
    """Weights that start at 1 and receive pure-noise gradients of different sizes (no loss
    pulls them anywhere): the weight after `steps` steps, for AdamW (`adamw_class`, decoupled
    decay) and for Adam with L2 (torch.optim.Adam's weight_decay adds wd·p to the gradient).
    Each scale gets 32 weights; "AdamW" and "Adam + L2" hold the mean |weight| at the end per
    scale, and "step" the optimizer's actual steps: step[name][i][t] is the mean |Δθ| ÷ lr of
    step t + 1 at grad_scales[i]."""
    out = {"AdamW": [], "Adam + L2": [], "step": {"AdamW": [], "Adam + L2": []}}
    for scale in grad_scales:
        for name, make in (("AdamW", lambda ps: adamw_class(ps, lr=lr, weight_decay=weight_decay)),
                           ("Adam + L2", lambda ps: torch.optim.Adam(  # release: not a task (the contrast)
                               ps, lr=lr, weight_decay=weight_decay))):
            p = torch.nn.Parameter(torch.ones(32))
            opt = make([p])
            g = torch.Generator().manual_seed(seed)
            sizes = []
            for _ in range(steps):
                before = p.detach().clone()
                p.grad = torch.randn(32, generator=g) * scale
                opt.step()
                sizes.append((p.detach() - before).abs().mean().item() / lr)
            out[name].append(p.detach().abs().mean().item())
            out["step"][name].append(sizes)
    return out


def plot_decay_vs_l2(result: dict[str, list], grad_scales=(0.01, 0.1, 1.0, 10.0), lr: float = 0.01,
                     weight_decay: float = 0.5, steps: int = 200) -> Figure:
    """Bars of decay_vs_l2: AdamW shrinks every weight alike; with L2 inside Adam, the decay is
    divided by √v̂ like the gradient, so weights with large gradients are barely decayed (left).
    The steps that did it, for the smallest and the largest gradients (right): AdamW's are the
    same whatever the gradients' size; Adam + L2's decay term, λθ/√v̂, makes full-size steps
    where the gradients are tiny and vanishes where they are large."""
    fig, (ax, ax_step) = plt.subplots(1, 2, figsize=(11, 3.8))
    xs = np.arange(len(grad_scales))
    for k, (name, color) in enumerate((("AdamW", "C0"), ("Adam + L2", "C3"))):
        ax.bar(xs + (k - 0.5) * 0.38, result[name], width=0.38, color=color, label=name)
    ax.axhline(1.0, color="k", ls=":", lw=0.8, label="start: |w| = 1")
    ax.axhline((1 - lr * weight_decay) ** steps, color="C0", ls="--", lw=0.8,
               label=f"$(1 - lr·wd)^{{{steps}}}$: pure decoupled decay")
    ax.set_xticks(xs, [f"{s:g}" for s in grad_scales])
    ax.set(title=f"Weights after {steps} steps", xlabel="gradient noise scale", ylabel="mean |weight| at the end",
           ylim=(0, 1.25))
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    t = np.arange(1, steps + 1)
    small, large = 0, len(grad_scales) - 1
    adamw = result["step"]["AdamW"]
    if np.allclose(adamw[small], adamw[large], rtol=1e-3, atol=1e-6):  # Adam's steps ignore the gradients' scale
        ax_step.plot(t, adamw[small], color="C0", lw=1.2,
                     label=f"AdamW, gradients × {grad_scales[small]:g} or × {grad_scales[large]:g} (the same steps)")
    else:
        for i, style in ((small, "-"), (large, "--")):
            ax_step.plot(t, adamw[i], color="C0", ls=style, lw=1.2, label=f"AdamW, gradients × {grad_scales[i]:g}")
    for i, style in ((small, "-"), (large, "--")):
        ax_step.plot(t, result["step"]["Adam + L2"][i], color="C3", ls=style, lw=1.2,
                     label=f"Adam + L2, gradients × {grad_scales[i]:g}")
    ax_step.set(title="Step size |Δθ| per step, in units of lr", xlabel="step t", ylabel="mean |Δθ| / lr",
                ylim=(0, None))
    ax_step.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"Same weight decay {weight_decay:g}, lr {lr:g}, pure-noise gradients", fontsize=11)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the data for a small model


@dataclass
class ShakespeareData:
    """Tiny Shakespeare as token ids of a compact vocabulary: model id i < vocab_size − 1 is the
    i-th most frequent GPT-2 token of the training split; the last id, RARE, stands for all the
    other GPT-2 tokens (decoded as ⁇). The loss and the unigram baseline are both measured on
    these ids, so they compare fairly."""

    train: np.ndarray  # (n_train,) uint16 model ids
    val: np.ndarray  # (n_val,) uint16 model ids
    gpt2_ids: np.ndarray  # (vocab_size − 1,) the GPT-2 id of each model id but RARE
    baseline: float  # unigram entropy of the validation ids, in nats
    coverage: float  # fraction of the validation tokens that are not RARE

    @property
    def vocab_size(self) -> int:
        return len(self.gpt2_ids) + 1

    @property
    def rare(self) -> int:
        return len(self.gpt2_ids)

    @property
    def name(self) -> str:
        return f"the {len(self.gpt2_ids):,} most frequent GPT-2 tokens + RARE"

    def encode(self, text: str) -> list[int]:
        """Text → model ids (GPT-2 tokens outside the vocabulary become RARE)."""
        lookup = {int(g): i for i, g in enumerate(self.gpt2_ids)}
        return [lookup.get(t, self.rare) for t in corpus.tokenizer().encode_ordinary(text)]

    def decode(self, ids) -> str:
        """Model ids → text (RARE shows as ⁇)."""
        enc, out, run = corpus.tokenizer(), [], []
        for i in (int(i) for i in ids):
            if i == self.rare:
                out.append(enc.decode(run) + "⁇")
                run = []
            else:
                run.append(int(self.gpt2_ids[i]))
        return "".join(out) + enc.decode(run)


def load_shakespeare(vocab_size: int = 4096) -> ShakespeareData:
    """Tiny Shakespeare (prepared once by viz.data.shakespeare_dataset) mapped to a vocabulary of
    the vocab_size − 1 most frequent GPT-2 tokens of the training split plus RARE.

    Why: the output layer and its softmax cost vocab_size × d_model per token; with all 50,257
    GPT-2 tokens they would be ~95% of a small model's compute. 4,095 tokens cover about 93% of
    the validation text."""
    train_path, val_path = shakespeare_dataset()
    train, val = corpus.load_tokens(train_path), corpus.load_tokens(val_path)
    counts = np.bincount(np.asarray(train, dtype=np.int64), minlength=corpus.tokenizer().n_vocab)
    gpt2_ids = np.argsort(-counts, kind="stable")[: vocab_size - 1]  # most frequent first; ties by id
    table = np.full(len(counts), vocab_size - 1, dtype=np.int64)  # GPT-2 id → model id
    table[gpt2_ids] = np.arange(vocab_size - 1)
    train_ids = table[np.asarray(train, dtype=np.int64)].astype(np.uint16)
    val_ids = table[np.asarray(val, dtype=np.int64)].astype(np.uint16)
    return ShakespeareData(train_ids, val_ids, gpt2_ids, corpus.unigram_entropy(val_ids),
                           float((val_ids != vocab_size - 1).mean()))


# ---------------------------------------------------------------- training


def progress(iterable, **kwargs):
    """tqdm.auto's progress bar over `iterable`, off when TQDM_DISABLE=1 (as under nbval). tqdm's
    notebook bar ignores that variable (it turns disable=None into False), so it is read here."""
    from tqdm.auto import tqdm

    if os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true"):
        kwargs["disable"] = True
    return tqdm(iterable, **kwargs)


def new_history() -> dict[str, list]:
    """What a training run records: each step's training loss and gradient norm (before clipping),
    and the validation loss every eval_interval steps."""
    return {"step": [], "train": [], "grad_norm": [], "val_step": [], "val": []}


def build_model(cfg: TrainConfig):
    """A fresh TransformerLM (the student's) and AdamW for `cfg`, seeded by cfg.seed."""
    torch.manual_seed(cfg.seed)
    model = cfg.model()
    optimizer = minilm.AdamW(model.parameters(), lr=cfg.max_lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    return model, optimizer


@torch.no_grad()
def evaluate(model, tokens: np.ndarray, context_length: int, max_tokens: int | None = None,
             batch_size: int = 32) -> float:
    """Mean minilm.cross_entropy over the first max_tokens (all if None) of `tokens` in
    non-overlapping windows: always the same text, so evaluations are comparable. The same
    evaluation as the training command's (minilm.course.train.metrics.evaluate), for one process."""
    return metrics.evaluate(model, tokens, context_length, batch_size, max_tokens)


def train_steps(model, optimizer, data: ShakespeareData, cfg: TrainConfig, start: int, stop: int,
                history: dict[str, list], show_progress: bool = True) -> dict[str, list]:
    """Steps start … stop − 1 of notebook 10b's run (your training loop, Task 10.6), appending
    to `history`: the cosine schedule, batches seeded by the step, the validation loss every
    cfg.eval_interval steps and at the last."""
    tokens = data.train[: cfg.train_tokens] if cfg.train_tokens else data.train

    def batch(step: int):
        torch.manual_seed(cfg.batch_seed(step))
        return minilm.get_batch(tokens, cfg.batch_size, cfg.context_length)  # (B, T), (B, T)

    def loss_of(x, y):
        return minilm.cross_entropy(model(x), y)  # logits (B, T, V)

    schedule = loop.steps_until(stop, lambda step: minilm.lr_cosine_schedule(step, cfg.max_lr, cfg.min_lr,
                                                                              cfg.warmup, cfg.steps))
    def validation_loss(step: int) -> float:
        return evaluate(model, data.val, cfg.context_length, cfg.eval_tokens)

    model.train()
    steps = minilm.train(loss_of, model.parameters(), optimizer, batch, schedule, cfg.clip, start,
                         validation_loss, cfg.eval_interval)
    for done in progress(steps, initial=start, total=cfg.steps, desc="training", disable=not show_progress):
        history["step"].append(done.step)
        history["train"].append(done.loss.item())
        history["grad_norm"].append(done.grad_norm)
        val_loss = done.val_loss
        if val_loss is None and done.step == cfg.steps:  # the last step's, between two evaluations
            val_loss = validation_loss(done.step)
        if val_loss is not None:
            history["val_step"].append(done.step)
            history["val"].append(val_loss)
    return history


# Exercise modules that training never runs: editing them (notebooks 12 and 15) keeps the trained model.
_NOT_TRAINED_BY = ("quantization", "inside")


def _code_fingerprint() -> str:
    """A hash of the code that trains: the selected implementation's exercise modules."""
    h = hashlib.sha256(minilm.implementation().encode())
    for module in tasks.EXERCISE_MODULES:
        if module in _NOT_TRAINED_BY:
            continue
        path = getattr(minilm.exercise_module(module), "__file__", None)
        if path:
            h.update(Path(path).read_bytes())
    return h.hexdigest()


def cache_path(cfg: TrainConfig) -> Path:
    """Where train_small_model keeps the model trained with `cfg` by the current code."""
    key = hashlib.sha256((json.dumps(asdict(cfg), sort_keys=True) + _code_fingerprint()).encode()).hexdigest()
    return corpus.data_dir() / "models" / f"shakespeare-{key[:16]}.pt"


def train_small_model(cfg: TrainConfig = TrainConfig(), data: ShakespeareData | None = None,
                      cache: bool = True, show_progress: bool = True):
    """(model, history): a TransformerLM trained on Tiny Shakespeare with cfg, by the same loop as
    notebook 10b. With cache=True the result is saved under corpus.data_dir()/models (written
    atomically; the key is the config and the code) and loaded from there next time."""
    data = data or load_shakespeare(cfg.vocab_size)
    path = cache_path(cfg)
    model, optimizer = build_model(cfg)
    if cache:
        with _locked(path.with_suffix(".lock")):  # a parallel notebook training the same model waits
            if path.exists():
                saved = torch.load(path, map_location="cpu")
                model.load_state_dict(saved["model"])
                return model.eval(), saved["history"]
            history = train_steps(model, optimizer, data, cfg, 0, cfg.steps, new_history(), show_progress)
            fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
            os.close(fd)
            try:
                torch.save({"model": model.state_dict(), "history": history, "config": asdict(cfg)}, tmp)
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)
            return model.eval(), history
    history = train_steps(model, optimizer, data, cfg, 0, cfg.steps, new_history(), show_progress)
    return model.eval(), history


def bits_per_byte(model, data: ShakespeareData, context_length: int) -> dict:
    """Notebook 10's model scored on all of the validation split, as `minilm train` scores: nats
    per token and bits per byte (total nats ÷ ln 2 ÷ the UTF-8 bytes of the predicted tokens), and
    the same for the unigram baseline (the validation ids' own frequencies) on the same tokens.
    A RARE token's loss counts and so do the bytes of the GPT-2 token it stands for."""
    enc = corpus.tokenizer()
    _, val_path = shakespeare_dataset()
    gpt2_val = np.asarray(corpus.load_tokens(val_path), dtype=np.int64)  # the ids data.val was mapped from
    lengths = np.array([len(enc.decode_single_token_bytes(int(i))) for i in gpt2_val], dtype=np.int64)
    nats, n = metrics.evaluate_sums(model, data.val, context_length)
    targets = np.asarray(data.val[1 : n + 1], dtype=np.int64)
    n_bytes = int(lengths[1 : n + 1].sum())
    counts = np.bincount(np.asarray(data.val, dtype=np.int64), minlength=data.vocab_size)
    baseline_nats = float(-(np.log(counts[targets]) - math.log(counts.sum())).sum())
    rare = targets == data.rare
    return dict(tokens=n, bytes=n_bytes, nats=nats, nats_per_token=nats / n,
                bits_per_byte=metrics.bits_per_byte(nats, n_bytes),
                baseline_nats_per_token=baseline_nats / n,
                baseline_bits_per_byte=metrics.bits_per_byte(baseline_nats, n_bytes),
                rare_tokens=float(rare.mean()), rare_bytes=float(lengths[1 : n + 1][rare].sum() / n_bytes))


def plot_losses(history: dict[str, list], baseline: float, vocab_size: int | None = None,
                resumed_at: int | None = None) -> Figure:
    """Training loss (every step, and a centred moving average) and validation loss against the step,
    with the unigram baseline (and ln vocab_size, the loss of uniform guessing)."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    steps, train = np.asarray(history["step"]), np.asarray(history["train"])
    ax.plot(steps, train, color="C0", alpha=0.3, lw=0.8, label="train loss (one batch)")
    k = min(11, len(train))
    if k > 1:
        # A centred window, drawn at the mean step of the steps it averages: a trailing one,
        # drawn at its last step, lags (k − 1)/2 steps behind the curve it smooths.
        smooth = np.convolve(train, np.ones(k) / k, mode="valid")
        ax.plot(np.convolve(steps, np.ones(k) / k, mode="valid"), smooth, color="C0", lw=1.8,
                label=f"train loss (centred {k}-step average)")
    ax.plot(history["val_step"], history["val"], "o-", color="C3", ms=4, label="validation loss")
    ax.axhline(baseline, color="k", ls="--", lw=1, label=f"unigram baseline ({baseline:.2f} nats)")
    if vocab_size:
        ax.axhline(math.log(vocab_size), color="0.5", ls=":", lw=1, label=f"uniform guess: ln {vocab_size:,}")
    if resumed_at is not None:
        ax.axvline(resumed_at, color="C2", lw=1, label=f"checkpoint saved and resumed (step {resumed_at})")
    ax.set(title="Training a small Transformer on Tiny Shakespeare", xlabel="step",
           ylabel="cross-entropy (nats per token)")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_grad_norms(history: dict[str, list], max_norm: float, resumed_at: int | None = None) -> Figure:
    """Each step's global gradient norm before clipping (history["grad_norm"]), with
    max_norm: the steps above the line were scaled down to it, the others left as they were."""
    steps, norms = np.asarray(history["step"]), np.asarray(history["grad_norm"])
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(steps, norms, color="C0", lw=1.2, label="global gradient norm, before clipping")
    clipped = norms > max_norm
    ax.scatter(steps[clipped], norms[clipped], color="C3", s=10, zorder=3,
               label=f"clipped to max_norm ({int(clipped.sum())} of {len(norms)} steps)")
    ax.axhline(max_norm, color="k", ls="--", lw=1, label=f"max_norm = {max_norm:g}")
    if resumed_at is not None:
        ax.axvline(resumed_at, color="C2", lw=1, label=f"resumed from the checkpoint (step {resumed_at})")
    ax.set_ylim(0, 1.15 * max(norms.max(), max_norm))
    ax.set(title="Gradient norm over training", xlabel="step", ylabel="global gradient norm ‖g‖")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def lr_sweep(data: ShakespeareData, cfg: TrainConfig, rates: list[float], steps: int) -> dict[float, dict]:
    """The same short run at each peak rate in `rates` (min_lr a tenth of it, warmup a tenth of the run),
    from the same weights and batches, through your loop: each rate's training and validation curves."""
    runs = {}
    for rate in rates:
        run_cfg = cfg.replace(max_lr=rate, min_lr=rate / 10, steps=steps, warmup=max(1, steps // 10),
                              eval_interval=max(1, steps // 4))
        model, optimizer = build_model(run_cfg)
        runs[rate] = train_steps(model, optimizer, data, run_cfg, 0, steps, new_history(), show_progress=False)
    return runs


def plot_lr_sweep(runs: dict[float, dict], baseline: float) -> Figure:
    """Left: each rate's validation loss at the end of its run, against the rate (log scale). Right: the
    training loss (a centred moving average) of each run, step by step."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    rates = sorted(runs)
    final = [runs[r]["val"][-1] for r in rates]
    best = rates[int(np.argmin(final))]
    left.plot(rates, final, "o-", color="C3")
    left.scatter([best], [min(final)], s=90, facecolors="none", edgecolors="k", zorder=3, label=f"best: {best:g}")
    left.axhline(baseline, color="k", ls="--", lw=1, label=f"unigram baseline ({baseline:.2f})")
    left.set_xscale("log")
    left.set(title="Validation loss after the run", xlabel="peak learning rate max_lr (log scale)",
             ylabel="cross-entropy (nats per token)")
    left.legend(fontsize=8)
    for i, rate in enumerate(rates):
        train = np.asarray(runs[rate]["train"])
        k = min(9, len(train))
        smooth = np.convolve(train, np.ones(k) / k, mode="valid")
        right.plot(np.asarray(runs[rate]["step"])[k // 2: k // 2 + len(smooth)], smooth, color=f"C{i}",
                   lw=2.2 if rate == best else 1.2, label=f"max_lr {rate:g}")
    right.axhline(baseline, color="k", ls="--", lw=1)
    right.set(title=f"Training loss ({k}-step centred average)", xlabel="step", ylabel="cross-entropy (nats per token)")
    right.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def overfit(data: ShakespeareData, cfg: TrainConfig, tokens: int = 1024, epochs: int = 30, batch_size: int = 8,
            lr: float = 5e-3) -> dict[str, list]:
    """Notebook 10's model trained on only the first `tokens` training tokens, again and again: an
    epoch is tokens ÷ (batch_size · context_length) steps of the student's get_batch on that slice,
    at a constant learning rate (no schedule), with the student's TransformerLM, cross_entropy,
    clip_grad_norm and AdamW. After each epoch, the loss on the slice itself and on the first
    cfg.eval_tokens validation tokens (the same text each time)."""
    subset = data.train[:tokens]
    model, optimizer = build_model(cfg)
    steps_per_epoch = max(1, tokens // (batch_size * cfg.context_length))
    result = {"epoch": [], "train": [], "val": [], "tokens": tokens, "steps_per_epoch": steps_per_epoch}

    def batch(step: int):
        torch.manual_seed(cfg.batch_seed(step))
        return minilm.get_batch(subset, batch_size, cfg.context_length)

    def loss_of(x, y):
        return minilm.cross_entropy(model(x), y)

    model.train()
    constant_lr = loop.steps_until(epochs * steps_per_epoch, lr)
    for done in minilm.train(loss_of, model.parameters(), optimizer, batch, constant_lr, cfg.clip):
        if done.step % steps_per_epoch == 0:  # the end of an epoch
            result["epoch"].append(done.step // steps_per_epoch)
            result["train"].append(evaluate(model, subset, cfg.context_length))
            result["val"].append(evaluate(model, data.val, cfg.context_length, cfg.eval_tokens))
    return result


def plot_overfitting(result: dict, baseline: float) -> Figure:
    """Training and validation loss per epoch of `overfit`, the gap between them shaded, and the
    epoch of the lowest validation loss marked."""
    epochs, train, val = (np.asarray(result[k]) for k in ("epoch", "train", "val"))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(epochs, train, "o-", ms=3, color="C0", label=f"loss on the {result['tokens']:,} training tokens")
    ax.plot(epochs, val, "o-", ms=3, color="C3", label="validation loss")
    ax.fill_between(epochs, train, val, color="C3", alpha=0.08, label="the gap")
    best = int(np.argmin(val))
    ax.axvline(epochs[best], color="0.4", ls=":", lw=1, label=f"lowest validation loss (epoch {epochs[best]})")
    ax.axhline(baseline, color="k", ls="--", lw=1, label=f"unigram baseline ({baseline:.2f} nats)")
    ax.set(title=f"Overfitting: {result['tokens']:,} training tokens, seen again every epoch",
           xlabel=f"epoch ({result['steps_per_epoch']} steps each)", ylabel="cross-entropy (nats per token)")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups in nanoGPT's rule (model.py, configure_optimizers): every parameter
    with 2 or more dimensions (the matrices, the embedding included) decays, the 1-D ones (RMSNorm's
    gains; biases, had the model any) do not."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def require(*values, tasks: tuple[str, ...]) -> None:
    """In a cell that uses the results of earlier cells (e.g. a trained model): if one of them is
    None because an earlier cell stopped at a stub, raise that stub's NotImplementedError, so
    that `with needs(...)` prints the same one line instead of a NameError or a traceback."""
    if all(v is not None for v in values):
        return
    from minilm.course import checks

    for task_id in tasks:
        verdict = checks.run(task_id)
        if verdict.status == checks.TODO:
            raise NotImplementedError(verdict.message)
    raise RuntimeError("an earlier cell did not finish: run the notebook from the top")


# ---------------------------------------------------------------- memory for training


def _storage_bytes(tensors, seen: set[int]) -> int:
    """Bytes of the storages behind `tensors` not in `seen` (addresses, updated): a view or a
    parameter shared by two modules is counted once."""
    total = 0
    for t in tensors:
        storage = t.untyped_storage()
        if storage.nbytes() and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def training_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """What training keeps for the whole run, besides the activations of a step, measured tensor by
    tensor: {"parameters": their number, "weights", "gradients", "optimizer": bytes}. "optimizer"
    is every tensor in optimizer.state (AdamW: exp_avg and exp_avg_sq, and a step counter if it is
    kept as a tensor). Gradients and AdamW's state exist only after a backward and a step."""
    seen: set[int] = set()
    params = list(model.parameters())  # a parameter shared by two modules is listed once
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return {"parameters": sum(p.numel() for p in params),
            "weights": _storage_bytes(params, seen),
            "gradients": _storage_bytes([p.grad for p in params if p.grad is not None], seen),
            "optimizer": _storage_bytes(state, seen)}


def saved_tensor_bytes(fn: Callable[[], object], exclude=()) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of fn()'s result: the activations.
    Each storage is counted once, by its address (views share their base's storage); the storages
    of `exclude` (a model's parameters and buffers, which exist anyway) are not counted. fn should
    return the loss, whose graph holds the saved tensors until its backward.

    A saved_tensors_hooks pack hook sees every tensor an operation saves. It saves a detached view
    of each (same storage, no grad_fn: a saved output would otherwise hold its own node alive), so
    that what a discarded branch saved (a max taken and then detached, say) is freed as it would be
    without the hooks: only the tensors still held when fn returns are counted."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    saved: list[tuple[weakref.ref, int, int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept = t.detach()
        storage = kept.untyped_storage()
        saved.append((weakref.ref(kept), storage.data_ptr(), storage.nbytes()))
        return kept

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    held: dict[int, int] = {}
    for ref, address, nbytes in saved:
        if ref() is not None and nbytes and address not in skip:
            held.setdefault(address, nbytes)
    del out
    return sum(held.values())


def activation_estimate(batch: int, seq: int, d_model: int, num_layers: int, num_heads: int, d_ff: int,
                        vocab_size: int) -> dict[str, int]:
    """Notebook 10's formula for the activations one training step keeps for backward, in bytes
    (float32: 4 bytes a number). Per token, each layer keeps
      - 2(2d + 1) for its two RMSNorms: each its input x, x/rms (for the gain's gradient) and 1/rms;
      - 5d + h(2T + 1) for attention: its input, q, k, v and the heads' output, and per head the
        softmax's T exponentials, their sum and T probabilities;
      - d + 5 d_ff for SwiGLU: its input, W1x, σ(W1x) and SiLU(W1x) = W1x·σ(W1x), W3x, the product;
    and the top keeps 2d + 1 (the final norm), d (lm_head's input), 2V + 1 (the logits, their
    exponentials and sum, for the loss), plus 16 bytes of int64 token ids and targets. Left out: the
    causal mask and RoPE's cos/sin, shared by the whole batch (a few kB).
    {"layers", "attention weights" (the 2hT part of "layers", which grows with T), "top", "total"}."""
    tokens, d, h = batch * seq, d_model, num_heads
    layer = 2 * (2 * d + 1) + (5 * d + h * (2 * seq + 1)) + (d + 5 * d_ff)
    top = (2 * d + 1) + d + (2 * vocab_size + 1)
    out = {"layers": 4 * tokens * num_layers * layer,
           "attention weights": 4 * tokens * num_layers * 2 * h * seq,
           "top": 4 * tokens * top + 16 * tokens}
    out["total"] = out["layers"] + out["top"]
    return out


def activation_memory(model: torch.nn.Module, cfg: TrainConfig, batch: int, seq: int,
                      loss_fn: Callable, seed: int = 0) -> dict[str, int]:
    """One training step's activations for a (batch, seq) batch of random token ids:
    {"measured": saved_tensor_bytes of loss_fn(model(x), y), "estimate": activation_estimate's total
    for cfg's sizes, "attention weights": its 2hT part}. `model` must have cfg's sizes."""
    g = torch.Generator().manual_seed(seed)
    x, y = (torch.randint(0, cfg.vocab_size, (batch, seq), generator=g) for _ in range(2))
    measured = saved_tensor_bytes(lambda: loss_fn(model(x), y), exclude=[*model.parameters(), *model.buffers()])
    est = activation_estimate(batch, seq, cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.d_ff, cfg.vocab_size)
    return {"measured": measured, "estimate": est["total"], "attention weights": est["attention weights"]}


def plot_activation_memory(lengths, memory: list[dict[str, int]], batch: int) -> Figure:
    """Activation memory of one training step against the context length (activation_memory's
    results, one per length): measured, the estimate, and the estimate's part for the attention weights."""
    mb = lambda key: [m[key] / 1e6 for m in memory]  # noqa: E731
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    ax.plot(lengths, mb("measured"), "o-", color="C0", label="measured: tensors saved for backward")
    ax.plot(lengths, mb("estimate"), "--", color="C1", label="estimate (the formula)")
    ax.plot(lengths, mb("attention weights"), ":", color="C3",
            label="of which the attention weights: $2hT$ per token and layer")
    ax.set(title=f"Activation memory of one training step (batch {batch})", xlabel="context length T (tokens)",
           ylabel="activations (MB)", ylim=(0, None))
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
