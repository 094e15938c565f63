"""The runs and pictures of notebook 16 (past the data limit; provided: not an exercise).

- LIMIT: notebook 14's ablation setup on the first 8,192 training tokens, for 320 steps of 8 × 64
  tokens: 20 passes over the text.
- wall: validation loss after every pass of one run (notebook 14's train_run, evaluated as it goes).
- The levers, as notebook 14's `Change`s against LIMIT's baseline: stronger weight decay, the student's
  dropout (Task 16.1), reshuffling, a larger model regularized, an ensemble of baseline runs and one
  model distilled from it by the student's distillation_loss (Task 16.2). `viz.modern.ablation` runs
  them, `verdict` judges them, `ablation_table` and `plot_deltas` show them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course.viz.modern import ABLATION, Change, train_run
from minilm.course.viz.training import ShakespeareData

TOKENS = 8192  # the slice of the training split the chapter trains on
PASSES = 20
LIMIT = ABLATION.replace(train_tokens=TOKENS, steps=PASSES * TOKENS // (ABLATION.batch_size * ABLATION.context_length))
STEPS_PER_PASS = TOKENS // (LIMIT.batch_size * LIMIT.context_length)

BASELINE = Change("baseline (weight decay 0.1)")
WEIGHT_DECAY = (Change("weight decay 0.5", {}, dict(weight_decay=0.5)),
                Change("weight decay 1.0", {}, dict(weight_decay=1.0)),
                Change("weight decay 2.0", {}, dict(weight_decay=2.0)),
                Change("weight decay 4.0", {}, dict(weight_decay=4.0)))
DROPOUT = Change("dropout 0.1 (yours)", dict(dropout=0.1))
RESHUFFLE = Change("reshuffle each pass", dict(reshuffle=True))
ENSEMBLE = Change("ensemble of 3 baselines", teacher=dict(k=3))
DISTILLED = Change("distilled (T 2, α 0.5)", teacher=dict(k=3, temperature=2.0, alpha=0.5))
LEVERS = (*WEIGHT_DECAY, DROPOUT, RESHUFFLE)


def stopped(passes: int) -> Change:
    """The baseline trained for `passes` passes only, its schedule decayed over them: stopping at the wall."""
    return Change(f"stop after {passes} passes", {}, dict(steps=passes * STEPS_PER_PASS))


def best_of(results: dict[str, dict], changes) -> Change:
    """The change of `changes` with the lowest mean Δ in `results` (an ablation's)."""
    return min(changes, key=lambda c: float(np.mean(results[c.name]["delta"])))


def larger(regularizer: Change, d_model: int = 96, d_ff: int = 256) -> Change:
    """A wider model (d_model 96, SwiGLU's d_ff 8/3 · 96 = 256) with the regularizer's settings (none: the
    baseline's)."""
    name = f"d_model {d_model}" + ("" if regularizer == BASELINE else f" + {regularizer.name}")
    return Change(name, regularizer.recipe, regularizer.train | dict(d_model=d_model, d_ff=d_ff))


def distilled(regularizer: Change) -> Change:
    """DISTILLED (the baseline's ensemble as the teacher) with the regularizer's settings for the student."""
    return Change(f"distilled + {regularizer.name}", regularizer.recipe, regularizer.train,
                  teacher=DISTILLED.teacher)


def wall(data: ShakespeareData, seeds: tuple[int, ...] = (0, 1, 2), setup=LIMIT, cache: bool = True) -> dict:
    """Validation loss (nats per token, the first eval_tokens validation tokens) after every pass over the
    slice, for the baseline with each seed: {"passes": [...], "val": {seed: [...]}, "train": {seed: [...]}}
    (train: the mean training loss over each pass)."""
    out = {"passes": list(range(1, PASSES + 1)), "val": {}, "train": {}}
    for seed in seeds:
        run = train_run(setup, BASELINE, data, seed, cache, eval_every=STEPS_PER_PASS)
        out["val"][seed] = [v for _, v in run["val_curve"]]
        curve = np.asarray(run["curve"])
        out["train"][seed] = curve.reshape(PASSES, STEPS_PER_PASS).mean(1).tolist()
    return out


def turning_point(curve: dict) -> tuple[int, float]:
    """(pass, nats) of the lowest validation loss of the seeds' mean curve."""
    mean = np.mean(list(curve["val"].values()), axis=0)
    i = int(mean.argmin())
    return curve["passes"][i], float(mean[i])


def plot_wall(curve: dict) -> Figure:
    """Training and validation loss against passes over the slice, each seed a thin line, the mean thick, and
    the lowest mean validation loss marked."""
    fig, ax = plt.subplots(figsize=(8.5, 4))
    x = curve["passes"]
    for key, color, label in (("train", "C0", "training loss (mean over the pass)"),
                              ("val", "C3", "validation loss (first 4,096 validation tokens)")):
        runs = np.asarray(list(curve[key].values()))
        for r in runs:
            ax.plot(x, r, color=color, lw=0.7, alpha=0.4)
        ax.plot(x, runs.mean(0), color=color, lw=2, label=f"{label}, mean of {len(runs)} seeds")
    best, nats = turning_point(curve)
    ax.axvline(best, color="k", ls=":", lw=1)
    ax.annotate(f"lowest validation loss: pass {best}", (best, nats), xytext=(best + 1.5, nats + 0.6),
                arrowprops=dict(arrowstyle="->", lw=0.8), fontsize=9)
    ax.set(title=f"The wall: {TOKENS:,} training tokens read {PASSES} times (d_model {LIMIT.d_model}, "
                 f"{LIMIT.num_layers} layers)",
           xlabel="passes over the training tokens (epochs)", ylabel="loss (nats per token)")
    ax.set_xticks(x[::2] if len(x) > 10 else x)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_temperature(distillation_loss, vocab: int = 32, positions: int = 256,
                     temperatures=(0.5, 1.0, 2.0, 4.0, 8.0)) -> Figure:
    """The size of the soft part's gradient (alpha = 1) against the temperature, with the student's
    distillation_loss as written (T² included) and divided by T² (without it)."""
    g = torch.Generator().manual_seed(0)
    s = torch.randn(positions, vocab, generator=g) * 2
    t = torch.randn(positions, vocab, generator=g) * 2
    y = torch.zeros(positions, dtype=torch.long)
    with_t2, without = [], []
    for T in temperatures:
        x = s.clone().requires_grad_()
        distillation_loss(x, t, y, T, 1.0).backward()
        with_t2.append(x.grad.norm().item())
        without.append(x.grad.norm().item() / T**2)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.loglog(temperatures, with_t2, "o-", color="C0", label="α · T² · KL (the contract)")
    ax.loglog(temperatures, without, "s--", color="C3", label="α · KL (without T²)")
    ax.set(title="The soft part's gradient on the student's logits against the temperature",
           xlabel="temperature T", ylabel="‖gradient‖ (random logits, 256 × 32)")
    ax.set_xticks(list(temperatures), [f"{T:g}" for T in temperatures])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
