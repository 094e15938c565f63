"""Pictures and the ablation runs of notebook 13 (the classic Transformer beside the modern one).

- plot_sinusoids: the position vectors as an image, and how alike two positions' vectors are.
- plot_activations: GELU beside ReLU and SiLU.
- Ablation: named ClassicConfig changes, each trained by your loop (Task 10.6, through train_steps) with
  the same data, steps, batches and seed; every run cached on disk like notebook 11's model
  (keyed by the model's and the run's settings and the code), so a second pass only loads them.
- plot_ablation, ablation_rows: the validation-loss curves and the table of final losses.

The models and the training use the student's code through `minilm` (ClassicLM, AdamW,
cross_entropy, get_batch, clip_grad_norm, lr_cosine_schedule).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

import minilm
import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course import corpus
from minilm.course.train.loop import ABLATION, TrainConfig
from minilm.course.viz.data import cached_result
from minilm.course.viz.training import ShakespeareData, _code_fingerprint, new_history, train_steps

# ---------------------------------------------------------------- pictures of the pieces


def plot_sinusoids(positions: Callable[[int, int], torch.Tensor], seq_len: int = 64, d_model: int = 64,
                   anchors: tuple[int, ...] = (20, 40)) -> Figure:
    """Left: positions(seq_len, d_model) as an image (rows: positions, columns: dims). Right: the
    dot product of each anchor position's vector with every position's, divided by d_model/2 (its
    value at offset 0), against the offset: the curves of different anchors coincide, because
    PE[p]·PE[q] = Σ_i cos((p − q)·ω_i) depends on p − q only."""
    pe = positions(seq_len, d_model).detach().double()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.2, 1]})
    im = a.imshow(pe.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    a.set(title=f"sinusoidal_positions({seq_len}, {d_model})", xlabel="dimension (sin at 2i, cos at 2i+1)",
          ylabel="position p")
    fig.colorbar(im, ax=a, fraction=0.046, label="value")
    for k, anchor in enumerate(anchors):
        sims = (pe @ pe[anchor]) / (d_model / 2)
        b.plot(np.arange(seq_len) - anchor, sims.numpy(), "o-" if k == 0 else "x--", ms=3, lw=1.2, color=f"C{k}",
               label=f"PE[{anchor}] · PE[p]")
    b.axhline(0, color="k", lw=0.6)
    b.set(title="Dot products of position vectors against the offset", xlabel="offset (p − anchor)",
          ylabel="dot product / (d_model / 2)")
    b.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def plot_activations(gelu: Callable[[torch.Tensor], torch.Tensor], silu: Callable[[torch.Tensor], torch.Tensor]
                     ) -> Figure:
    """GELU (the student's) beside ReLU and SiLU (the student's, notebook 04)."""
    x = torch.linspace(-4, 3, 281)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(x, torch.relu(x), color="0.5", ls=":", lw=1.5, label="ReLU: max(0, x)  (Vaswani et al. 2017)")
    ax.plot(x, gelu(x).detach(), color="C3", lw=2, label="GELU: x·Φ(x)  (GPT-1, BERT, GPT-2)")
    ax.plot(x, silu(x).detach(), color="C0", lw=1.5, ls="--", label="SiLU: x·σ(x)  (SwiGLU's gate, LLaMA)")
    ax.set(title="Three activations: GELU and SiLU are smooth and dip below zero", xlabel="x", ylabel="activation(x)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the ablation


@dataclass(frozen=True)
class Ablation:
    """One run: a name, the ClassicConfig fields it changes from the course's model, and the
    training settings it changes (a higher learning rate, for the stability pair)."""

    name: str
    changes: dict = field(default_factory=dict)
    train_changes: dict = field(default_factory=dict)


CLASSIC = dict(norm_position="post", norm="layernorm", ffn="gelu", positions="sinusoidal", tied_head=True)

# The modern model, each classic choice on its own, the classic model; then the other positions.
RUNS: tuple[Ablation, ...] = (
    Ablation("modern"),
    Ablation("post-norm", dict(norm_position="post")),
    Ablation("LayerNorm", dict(norm="layernorm")),
    Ablation("GELU FFN", dict(ffn="gelu")),
    Ablation("sinusoidal positions", dict(positions="sinusoidal")),
    Ablation("tied head", dict(tied_head=True)),
    Ablation("classic", CLASSIC),
    Ablation("learned positions", dict(positions="learned")),
    Ablation("no positions", dict(positions="none")),
)
# Pre- against post-norm at 4× the learning rate (and 4× the floor), the same run otherwise.
HIGH_LR = dict(max_lr=2e-2, min_lr=2e-3)
HIGH_LR_RUNS: tuple[Ablation, ...] = (
    Ablation("modern, lr 0.02", {}, HIGH_LR),
    Ablation("post-norm, lr 0.02", dict(norm_position="post"), HIGH_LR),
)


@dataclass(frozen=True)
class AblationSetup:
    """The shared model size and training run: small enough that all the runs of notebook 13 take
    well under a minute on 2 CPU cores."""

    train: TrainConfig = ABLATION.replace(eval_interval=20, eval_tokens=2048)

    def config(self, run: Ablation):
        t = self.train
        return minilm.ClassicConfig(t.vocab_size, t.context_length, t.d_model, t.num_layers, t.num_heads,
                                    **run.changes)

    def train_config(self, run: Ablation) -> TrainConfig:
        return self.train.replace(**run.train_changes)


def _cache_path(setup: AblationSetup, run: Ablation) -> Path:
    spec = {"model": asdict(setup.config(run)), "train": asdict(setup.train_config(run))}
    key = hashlib.sha256((json.dumps(spec, sort_keys=True) + _code_fingerprint()).encode()).hexdigest()
    return corpus.data_dir() / "models" / f"ablation-{key[:16]}.pt"


def train_run(setup: AblationSetup, run: Ablation, data: ShakespeareData, cache: bool = True) -> dict:
    """{"history": …, "parameters": …, "diverged": …} of one run: a ClassicLM trained by notebook
    10's loop. Seeded by the training config's seed, so every run starts from the same batches;
    cached on disk (written atomically) unless cache=False."""
    cfg, tcfg = setup.config(run), setup.train_config(run)

    def train() -> dict:
        torch.manual_seed(tcfg.seed)
        model = minilm.ClassicLM(cfg)
        optimizer = minilm.AdamW(model.parameters(), lr=tcfg.max_lr, betas=tcfg.betas, weight_decay=tcfg.weight_decay)
        history = train_steps(model, optimizer, data, tcfg, 0, tcfg.steps, new_history(), show_progress=False)
        return {"history": history, "parameters": sum(p.numel() for p in model.parameters()),
                "diverged": not all(np.isfinite(history["val"]))}

    if not cache:
        return train()
    path = _cache_path(setup, run)
    return cached_result(path, train)


def train_runs(setup: AblationSetup, runs, data: ShakespeareData, cache: bool = True) -> dict[str, dict]:
    return {run.name: train_run(setup, run, data, cache) for run in runs}


def plot_ablation(results: dict[str, dict], baseline: float, title: str, highlight=("modern", "classic")) -> Figure:
    """Validation loss against the step for every run; the modern and classic runs drawn bold."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    styles = ["-", "--", "-.", ":"]
    for k, (name, r) in enumerate(results.items()):
        h = r["history"]
        bold = name in highlight
        ax.plot(h["val_step"], h["val"], styles[k % 4] if not bold else "-", marker="o", ms=3 if not bold else 4,
                lw=2.4 if bold else 1.3, color=f"C{k % 10}", label=name)
    ax.axhline(baseline, color="k", ls="--", lw=1, label=f"unigram baseline ({baseline:.2f} nats)")
    ax.set(title=title, xlabel="step", ylabel="validation loss (nats per token)")
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    fig.tight_layout()
    return fig


def final_loss(result: dict) -> float:
    return float(result["history"]["val"][-1])


def ablation_rows(results: dict[str, dict], reference: str = "modern") -> str:
    """A text table: run, parameters, final validation loss, and its difference from `reference`."""
    ref = final_loss(results[reference])
    lines = [f"{'run':<22}{'parameters':>12}{'final val loss':>16}{'vs ' + reference:>12}", "-" * 62]
    for name, r in results.items():
        loss = final_loss(r)
        diff = f"{loss - ref:+.3f}" if np.isfinite(loss) else "diverged"
        lines.append(f"{name:<22}{r['parameters']:>12,}{loss:>16.3f}{diff:>12}")
    return "\n".join(lines)
