"""Pictures and the ablation runs of notebook 14 (the modern recipe).

- plot_newton_schulz: what the iteration does to singular values (the quintic beside the cubic),
  and the singular values of a gradient before and after.
- plot_schedules: warmup–stable–decay beside the cosine schedule.
- The ablation: named recipes (minilm.course.recipe.Recipe), each trained by the loop of notebook
  10 with the student's code (TransformerLM, AdamW, Muon, parameter_groups, the schedules, …) and
  the same data, steps and batches; runs cached on disk (keyed by the settings and the code);
  the baseline with several seeds, and more seeds for a change whose effect is small.
- ablation_table, plot_deltas: validation bits per byte and the difference from the baseline.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

import minilm
import minilm.course.viz  # noqa: F401  (the course's shared matplotlib style)
from minilm.course import corpus
from minilm.course import recipe as recipes
from minilm.course.train import loop, metrics
from minilm.course.train.loop import ABLATION, TrainConfig  # noqa: F401  (ABLATION: the notebook's setup)
from minilm.course.viz.data import cached_result, shakespeare_dataset
from minilm.course.viz.training import ShakespeareData, _code_fingerprint

# ---------------------------------------------------------------- pictures of the pieces


def _phi(s: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    return a * s + b * s**3 + c * s**5


def plot_newton_schulz(newton_schulz, G: torch.Tensor) -> Figure:
    """Left: one step of the quintic (NS_COEFFICIENTS) and of the cubic (1.5, −0.5, 0) as maps
    s → φ(s) of a singular value, and the quintic applied five times. Right: the singular values of
    G (divided by its Frobenius norm) and of newton_schulz(G), sorted."""
    a, b, c = minilm.NS_COEFFICIENTS
    s = np.linspace(0, 1.05, 300)
    five = s.copy()
    for _ in range(5):
        five = _phi(five, a, b, c)
    cubic5 = s.copy()
    for _ in range(5):
        cubic5 = _phi(cubic5, 1.5, -0.5, 0.0)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax.plot(s, _phi(s, a, b, c), color="C0", lw=1.2, ls="--", label=f"quintic, 1 step (a, b, c = {a}, {b}, {c})")
    ax.plot(s, five, color="C0", lw=2, label="quintic, 5 steps")
    ax.plot(s, cubic5, color="C3", lw=1.5, label="cubic (1.5, −0.5, 0), 5 steps")
    ax.axhline(1, color="k", ls=":", lw=0.8)
    ax.set(title="What Newton–Schulz does to one singular value", xlabel="singular value s (after ÷ ‖G‖_F)",
           ylabel="after the iteration", ylim=(0, 1.6))
    ax.legend(fontsize=8, loc="lower right")
    before = torch.linalg.svdvals(G.double() / G.double().norm()).numpy()  # release: not a task (a picture)
    after = torch.linalg.svdvals(newton_schulz(G).double()).numpy()  # release: not a task (a picture)
    k = np.arange(1, len(before) + 1)
    bx.plot(k, before, "o-", color="0.5", ms=4, label="G / ‖G‖_F")
    bx.plot(k, after, "o-", color="C0", ms=4, label="newton_schulz(G)")
    bx.axhline(1, color="k", ls=":", lw=0.8)
    bx.set(title=f"Singular values of a {tuple(G.shape)} gradient-like matrix", xlabel="index (largest first)",
           ylabel="singular value", ylim=(0, 1.6))
    bx.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_schedules(wsd, cosine, max_lr: float = 1.0, min_lr: float = 0.1, warmup: float = 0.05,
                   decay: float = 0.2, steps: int = 400) -> Figure:
    """The student's WSD (fraction-driven) beside the cosine schedule of Task 10.3, over one run."""
    its = np.arange(steps + 1)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(its, [wsd(i / steps, max_lr, min_lr, warmup, decay) for i in its], color="C0", lw=2,
            label=f"warmup–stable–decay (warmup {warmup:g}, decay {decay:g} of the run)")
    ax.plot(its, [cosine(int(i), max_lr, min_lr, round(warmup * steps), steps) for i in its], color="C3", lw=1.5,
            ls="--", label="cosine with warmup (Task 10.3)")
    ax.axvspan((1 - decay) * steps, steps, color="C0", alpha=0.08)
    ax.set(title="Two learning-rate schedules over one run", xlabel="step", ylabel="learning rate / max_lr")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- the ablation


@dataclass(frozen=True)
class Change:
    """One run's difference from the baseline: recipe fields, and training settings."""

    name: str
    recipe: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    # An ensemble of `k` baseline runs (seeds s, s + 3, s + 6, … for seed s), their logits averaged: scored
    # as it is when only {"k": k}; with "temperature" and "alpha" too, the teacher that one model of the
    # change's setup is distilled from, by the student's distillation_loss (Task 16.2).
    teacher: dict = field(default_factory=dict)


BASELINE = Change("baseline (AdamW, cosine)")
CHANGES: tuple[Change, ...] = (
    Change("Muon", dict(optimizer="muon")),
    Change("WSD schedule", dict(schedule="wsd")),
    Change("zero-init projections", dict(zero_init=True)),
    Change("QK-norm", dict(qk_norm=True)),
    Change("soft-cap 30", dict(softcap=30.0)),
    Change("ReLU² (matched)", dict(ffn="relu2")),
    Change("decay groups", dict(decay_groups=True)),
    Change("Muon + WSD", dict(optimizer="muon", schedule="wsd")),
)
# The data-limited regime: the first 8,192 training tokens, seen about 6 times in 100 steps.
LIMITED = 8192
LIMITED_BASELINE = Change("baseline, data-limited", {}, dict(train_tokens=LIMITED))
LIMITED_CHANGES: tuple[Change, ...] = (
    Change("dropout 0.1, data-limited", dict(dropout=0.1), dict(train_tokens=LIMITED)),
    Change("weight decay 0.5, data-limited", {}, dict(train_tokens=LIMITED, weight_decay=0.5)),
    Change("reshuffle epochs, data-limited", dict(reshuffle=True), dict(train_tokens=LIMITED)),
)


def _val_bytes(data: ShakespeareData, n: int) -> int:
    """The UTF-8 bytes of the first n validation targets (a RARE id counts its GPT-2 token's bytes)."""
    enc = corpus.tokenizer()
    _, val_path = shakespeare_dataset()
    gpt2_val = np.asarray(corpus.load_tokens(val_path), dtype=np.int64)[1 : n + 1]
    return sum(len(enc.decode_single_token_bytes(int(i))) for i in gpt2_val)


class Ensemble(torch.nn.Module):
    """Several models as one: the mean of their logits."""

    def __init__(self, models):
        super().__init__()
        self.models = torch.nn.ModuleList(models)

    def forward(self, x):
        return torch.stack([m(x) for m in self.models]).mean(0)


def _scored(model, setup: TrainConfig, data: ShakespeareData) -> dict:
    nats, n = metrics.evaluate_sums(model, data.val, setup.context_length, max_tokens=setup.eval_tokens)
    return {"nats": nats / n, "bpb": metrics.bits_per_byte(nats, _val_bytes(data, n)), "tokens": n,
            "parameters": sum(p.numel() for p in model.parameters()), "diverged": not math.isfinite(nats)}


def ensemble(setup: TrainConfig, data: ShakespeareData, k: int, seed: int = 0, cache: bool = True) -> Ensemble:
    """The baseline runs of `setup` with seeds seed, seed + 3, …, seed + 3(k − 1), as one model (in eval mode)."""
    models = []
    for s in range(seed, seed + 3 * k, 3):
        model = setup.model()
        model.load_state_dict(train_run(setup, Change("baseline"), data, s, cache)["state"])
        models.append(model)
    return Ensemble(models).eval()


def train_run(setup: TrainConfig, change: Change, data: ShakespeareData, seed: int = 0, cache: bool = True,
              eval_every: int = 0) -> dict:
    """{"bpb", "nats", "parameters", "curve", "state"} of one run: a TransformerLM (the student's) with the
    change's recipe, trained by the course's loop; seed decides the weights and the batches. With
    eval_every, "val_curve" too: (step, validation nats per token) every eval_every steps."""
    if change.teacher and "alpha" not in change.teacher:  # an ensemble of baseline runs, scored as it is
        return _scored(ensemble(setup, data, change.teacher["k"], seed, cache), setup, data)
    teacher = ensemble(setup, data, change.teacher["k"], seed, cache) if change.teacher else None
    setup = setup.replace(**change.train)
    recipe = recipes.Recipe(**change.recipe)

    def train() -> dict:
        torch.manual_seed(seed)
        model = setup.model()
        recipes.apply(model, recipe, seed=seed + 1)
        optimizer, _ = recipes.make_optimizer(model, recipe, setup.max_lr, setup.betas, setup.weight_decay)
        tokens = data.train[: setup.train_tokens] if setup.train_tokens else data.train
        epochs = (recipes.EpochBatches(tokens, setup.batch_size, setup.context_length,
                                       torch.Generator().manual_seed(seed)) if recipe.reshuffle else None)

        def batch(step: int):
            torch.manual_seed(1000 * (seed + 1) + step)
            return epochs() if epochs is not None else minilm.get_batch(tokens, setup.batch_size, setup.context_length)

        def loss_of(x, y):
            if teacher is None:
                return minilm.cross_entropy(model(x), y)
            with torch.no_grad():
                soft = teacher(x)
            return minilm.distillation_loss(model(x), soft, y, change.teacher["temperature"], change.teacher["alpha"])

        def evaluate(step: int) -> float:
            nats, n = metrics.evaluate_sums(model, data.val, setup.context_length, max_tokens=setup.eval_tokens)
            return nats / n

        schedule = loop.steps_until(setup.steps, lambda step: recipes.scheduled_lr(
            recipe, step / setup.steps, step, setup.max_lr, setup.min_lr, setup.warmup, setup.steps))
        model.train()
        curve, val_curve = [], []
        for done in minilm.train(loss_of, model.parameters(), optimizer, batch, schedule, setup.clip,
                                 evaluate=evaluate if eval_every else None, eval_every=eval_every):
            curve.append(done.loss.item())
            if done.val_loss is not None:
                val_curve.append((done.step, done.val_loss))
        return _scored(model, setup, data) | {"curve": curve, "state": model.state_dict()} | (
            {"val_curve": val_curve} if eval_every else {})

    if not cache:
        return train()
    extra = ({"teacher": change.teacher} if change.teacher else {}) | ({"eval_every": eval_every} if eval_every else {})
    key = json.dumps({"setup": asdict(setup), "recipe": asdict(recipe), "seed": seed} | extra, sort_keys=True)
    digest = hashlib.sha256((key + _code_fingerprint()).encode()).hexdigest()
    path = corpus.data_dir() / "models" / f"recipe-{digest[:16]}.pt"
    return cached_result(path, train)


def ablation(setup: TrainConfig, baseline: Change, changes, data: ShakespeareData, seeds: tuple[int, ...] = (0, 1, 2),
             cache: bool = True, every_seed: bool = False) -> dict[str, dict]:
    """The baseline with every seed; each change with the first seed, and with every seed when its
    difference from the baseline of that seed is within the baseline's spread between seeds (the noise
    of `verdict`), or always with every_seed.
    Per run name: {"seeds": [...], "bpb": [...], "delta": [...] (paired with the baseline's seed),
    "parameters"}."""
    base = [train_run(setup, baseline, data, s, cache) for s in seeds]
    spread = max(r["bpb"] for r in base) - min(r["bpb"] for r in base)
    out = {baseline.name: {"seeds": list(seeds), "bpb": [r["bpb"] for r in base], "delta": [0.0] * len(seeds),
                           "parameters": base[0]["parameters"], "spread": spread}}
    for change in changes:
        runs = {seeds[0]: train_run(setup, change, data, seeds[0], cache)}
        if every_seed or abs(runs[seeds[0]]["bpb"] - base[0]["bpb"]) <= spread:
            runs |= {s: train_run(setup, change, data, s, cache) for s in seeds[1:]}
        out[change.name] = {"seeds": list(runs), "bpb": [r["bpb"] for r in runs.values()],
                            "delta": [r["bpb"] - base[seeds.index(s)]["bpb"] for s, r in runs.items()],
                            "parameters": runs[seeds[0]]["parameters"]}
    return out


def verdict(row: dict, spread: float) -> str:
    """The one rule of notebook 14, its table and its picture: the noise is the baseline's spread
    between seeds (largest minus smallest bits per byte), and a change is better (worse) when every
    seed's paired Δ, against the baseline of the same seed, lies below −spread (above +spread).
    Anything else is within noise."""
    d = row["delta"]
    if all(x < -spread for x in d):
        return "better"
    if all(x > spread for x in d):
        return "worse"
    return "within noise"


def ablation_table(results: dict[str, dict]) -> str:
    """Run, seeds, parameters, mean bits per byte, the mean and every seed's paired difference from the
    baseline (the first row) of the same seed, and the verdict; then the baseline by seed and the noise."""
    first = next(iter(results.values()))
    spread = first["spread"]
    lines = [f"{'run':<34}{'seeds':>6}{'parameters':>12}{'bits/byte':>11}{'mean Δ':>9}  {'Δ by seed':<22}verdict",
             "-" * 108]
    for name, r in results.items():
        mean, delta = float(np.mean(r["bpb"])), float(np.mean(r["delta"]))
        by_seed = "" if r is first else " ".join(f"{x:+.3f}" for x in r["delta"])
        shown = "" if r is first else verdict(r, spread)
        lines.append(f"{name:<34}{len(r['seeds']):>6}{r['parameters']:>12,}{mean:>11.3f}"
                     f"{'' if r is first else f'{delta:+.3f}':>9}  {by_seed:<22}{shown}".rstrip())
    seeds = ", ".join(f"{s}: {b:.3f}" for s, b in zip(first["seeds"], first["bpb"]))
    lines.append(f"Δ: bits per byte minus the baseline's of the same seed (the baseline by seed, {seeds}).")
    lines.append(f"Noise: the baseline's spread between seeds, {spread:.3f}; better or worse: every seed's Δ beyond "
                 f"±{spread:.3f}.")
    return "\n".join(lines)


def plot_deltas(*tables: dict[str, dict], title: str) -> Figure:
    """Bars of each change's mean paired difference from its baseline, in bits per byte, with every
    seed's difference as a dot and, on each row, its own baseline's spread between seeds shaded: the
    noise of `verdict`, so a change is better or worse exactly when all its dots lie outside the band."""
    rows = [(name, r, next(iter(t.values()))["spread"]) for t in tables for k, (name, r) in enumerate(t.items())
            if k > 0]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.6))
    spreads = ", ".join(f"±{next(iter(t.values()))['spread']:.3f}" for t in tables)
    for i, (name, r, spread) in enumerate(rows):
        ax.fill_betweenx([i - 0.5, i + 0.5], -spread, spread, color="0.85", lw=0,
                         label=f"noise: the baseline's spread between seeds ({spreads})" if i == 0 else None)
        mean = float(np.mean(r["delta"]))
        ax.barh(i, mean, color="C2" if mean < 0 else "C3", alpha=0.8)
        ax.plot(r["delta"], [i] * len(r["delta"]), "k.", ms=5)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)), [name for name, _, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set(title=title, xlabel="Δ validation bits per byte vs the baseline of the same seed (negative: better)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
