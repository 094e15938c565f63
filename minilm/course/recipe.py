"""The modern recipe's switches (provided): what notebook 14 measures and `minilm train` offers as
flags, applied to a TransformerLM (or ClassicLM) built from the student's code.

- Optimizers: Muon (Task 14.2) for the hidden matrices and AdamW (Task 10.4) for the rest, as one
  optimizer (`Optimizers`) that the training loop, checkpoints and schedules treat as one; the
  split is the student's parameter_groups (Task 14.3).
- Model switches, each a small change to a built model: zero-initialized residual output
  projections, QK-norm (the student's rms_norm over each head's query and key), a tanh soft-cap
  on the logits (Task 14.5), the ReLU² FFN at SwiGLU's parameter count (Task 14.6) and residual
  dropout (the student's, Task 16.1).
- EpochBatches: the data-limited regime's reshuffling: every window of the training tokens once
  per epoch, in a new order each epoch, instead of windows drawn at random.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import minilm

OPTIMIZERS = ("adamw", "muon")
SCHEDULES = ("cosine", "wsd")
FFNS = ("swiglu", "relu2")


@dataclass(frozen=True)
class Recipe:
    """Every switch, off by default: the course's model and training of notebook 10b."""

    optimizer: str = "adamw"
    muon_lr: float = 0.02  # Muon's peak learning rate (AdamW's for the rest: the run's lr)
    schedule: str = "cosine"
    decay_frac: float = 0.2  # WSD: the fraction of the run spent decaying
    decay_groups: bool = False  # no weight decay on gains and embeddings (parameter_groups)
    zero_init: bool = False
    qk_norm: bool = False
    softcap: float = 0.0  # 0: off
    ffn: str = "swiglu"
    dropout: float = 0.0
    reshuffle: bool = False
    lr_width: int = 0  # muP-style: AdamW's rate for the matrices (not the embeddings) × lr_width / d_model; 0: off

    def changes(self) -> dict:
        """The fields that differ from the defaults."""
        base = Recipe()
        return {k: v for k, v in self.__dict__.items() if getattr(base, k) != v}


# ---------------------------------------------------------------- optimizers


class Optimizers:
    """Several optimizers as one: step, zero_grad, state_dict and param_groups over all of them.
    Each group keeps "lr_scale", its peak rate over the run's: a schedule sets
    group["lr"] = lr · group["lr_scale"]."""

    def __init__(self, optimizers: dict[str, torch.optim.Optimizer]):
        self.optimizers = optimizers

    @property
    def param_groups(self):
        return [g for opt in self.optimizers.values() for g in opt.param_groups]

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for opt in self.optimizers.values():
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True):
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_state_dict(self, state_dict):
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state_dict[name])

    def __repr__(self):
        return f"Optimizers({', '.join(self.optimizers)})"


def describe_groups(model: nn.Module, groups: dict[str, list]) -> dict[str, list[str]]:
    """The parameters' names in each group."""
    names = {id(p): n for n, p in model.named_parameters()}
    return {k: [names[id(p)] for p in ps] for k, ps in groups.items()}


def _short(names: list[str]) -> str:
    """'lm_head.weight, token_embeddings.weight and 7 gains (ln1.weight, …)' style summary."""
    def is_gain(name: str) -> bool:
        owner = name.split(".")[-2] if "." in name else ""
        return owner.startswith("ln") or owner.endswith("_norm")

    matrices = [n for n in names if not is_gain(n)]
    gains = [n for n in names if n not in matrices]
    parts = matrices[:4] + ([f"… ({len(matrices) - 4} more)"] if len(matrices) > 4 else [])
    if gains:
        parts.append(f"{len(gains)} norm gains")
    return ", ".join(parts) or "nothing"


def make_optimizer(model: nn.Module, recipe: Recipe, lr: float, betas: tuple[float, float],
                   weight_decay: float) -> tuple[torch.optim.Optimizer, list[str]]:
    """The optimizer of `recipe` for `model`, and lines saying which parameters each part trains.
    AdamW alone without decay groups is the course's optimizer: AdamW(model.parameters())."""
    notes: list[str] = []
    if recipe.optimizer == "adamw" and not recipe.decay_groups:
        opt = minilm.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
        for g in opt.param_groups:
            g["lr_scale"] = 1.0
        if recipe.lr_width:
            opt, note = width_scaled_adamw(model, recipe.lr_width, lr, betas, weight_decay)
            notes.append(note)
        return opt, notes
    groups = minilm.parameter_groups(model, muon=recipe.optimizer == "muon")
    named = describe_groups(model, groups)
    decay = weight_decay if recipe.decay_groups else None  # None: every AdamW parameter decays
    adam_groups = [{"params": groups["decay"], "weight_decay": weight_decay, "lr_scale": 1.0},
                   {"params": groups["no_decay"], "weight_decay": weight_decay if decay is None else 0.0,
                    "lr_scale": 1.0}]
    adam_groups = [g for g in adam_groups if g["params"]]
    optimizers = {"adamw": minilm.AdamW(adam_groups, lr=lr, betas=betas, weight_decay=weight_decay)}
    if recipe.optimizer == "muon":
        if groups["muon"]:
            muon = minilm.Muon(groups["muon"], lr=recipe.muon_lr, weight_decay=weight_decay)
            for g in muon.param_groups:
                g["lr_scale"] = recipe.muon_lr / lr
            optimizers["muon"] = muon
            notes.append(f"optimizer: Muon (lr {recipe.muon_lr:g}) for the {len(named['muon'])} hidden matrices; "
                         f"AdamW (lr {lr:g}) for {_short(named['decay'] + named['no_decay'])}, which are not hidden "
                         f"matrices")
        else:
            notes.append("optimizer: Muon has no hidden matrix to train in this model (no 2-D parameter besides "
                         f"the embeddings and the head): AdamW trains all of it ({_short(named['no_decay'])}"
                         + (f", {_short(named['decay'])}" if named["decay"] else "") + ")")
    if recipe.decay_groups:
        notes.append(f"weight decay {weight_decay:g} on {len(named['decay']) + len(named['muon'])} matrices; none on "
                     f"{_short(named['no_decay'])}")
    return (optimizers["adamw"] if len(optimizers) == 1 else Optimizers(optimizers)), notes


def width_scaled_adamw(model: nn.Module, base_width: int, lr: float, betas: tuple[float, float],
                       weight_decay: float) -> tuple[torch.optim.Optimizer, str]:
    """AdamW whose matrices (every 2-D parameter but the token embeddings: the blocks' projections and
    the output layer) train at lr · base_width / d_model, and the rest (embeddings, gains) at lr.

    Why: Adam moves every weight by about lr whatever its size, so a matrix with d_model inputs moves
    its outputs about d_model times lr: a wider model at the same rate takes bigger steps in
    function space. Scaling the matrices' rate by 1/d_model (muP's rule for Adam, Yang et al. 2022,
    "Tensor Programs V", Table 3) keeps that step the same at every width, so a rate tuned at
    base_width carries over. Only the rates: the initialization stays the course's (Tasks 1.2, 2.2)."""
    d_model = model.token_embeddings.weight.shape[1]
    scale = base_width / d_model
    matrices = [p for n, p in model.named_parameters() if p.ndim >= 2 and n != "token_embeddings.weight"]
    taken = {id(p) for p in matrices}
    rest = [p for p in model.parameters() if id(p) not in taken]
    groups = [{"params": matrices, "lr_scale": scale}, {"params": rest, "lr_scale": 1.0}]
    opt = minilm.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas, weight_decay=weight_decay)
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]
    return opt, (f"learning rate by width: the {len(matrices)} matrices train at lr × {base_width}/{d_model} = "
                 f"{lr * scale:.3g}, the embeddings and gains at lr = {lr:g} (muP-style, docs/training.md)")


def coordinate_check(widths: list[int], lr: float, base_width: int = 0, steps: int = 3, seed: int = 0,
                     vocab_size: int = 256, context_length: int = 32, num_layers: int = 2) -> dict[int, list[float]]:
    """A coordinate check (Yang et al. 2022): by width, how far `steps` AdamW steps on one batch of random
    tokens move the logits, as the root mean square of logits_t − logits_0 after each step. With rates
    that transfer the curves hardly depend on the width; with one rate for all they grow with it.
    base_width > 0: width_scaled_adamw's rates; 0: every parameter at lr."""
    g = torch.Generator().manual_seed(seed)
    x, y = (torch.randint(0, vocab_size, (8, context_length), generator=g) for _ in range(2))
    moved = {}
    for d_model in widths:
        torch.manual_seed(seed)
        d_ff = 64 * -(-8 * d_model // 3 // 64)  # 8/3 d_model rounded up to a multiple of 64 (notebook 04)
        model = minilm.TransformerLM(vocab_size, context_length, d_model, num_layers, max(1, d_model // 32), d_ff,
                                     10000.0)
        if base_width:
            optimizer, _ = width_scaled_adamw(model, base_width, lr, (0.9, 0.95), 0.0)
        else:
            optimizer = minilm.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        with torch.no_grad():
            start = model(x)
        moved[d_model] = []
        for _ in range(steps):
            optimizer.zero_grad()
            minilm.cross_entropy(model(x), y).backward()
            optimizer.step()
            with torch.no_grad():
                moved[d_model].append((model(x) - start).pow(2).mean().sqrt().item())
    return moved


def scheduled_lr(recipe: Recipe, progress: float, it: int, lr: float, min_lr: float, warmup: int, steps: int) -> float:
    """The run's learning rate at step `it` of `steps` (progress: the fraction of the run gone)."""
    if recipe.schedule == "wsd":
        warm = min(warmup / max(steps, 1), 1 - recipe.decay_frac)
        return minilm.lr_wsd_schedule(min(progress, 1.0), lr, min_lr, warm, recipe.decay_frac)
    return minilm.lr_cosine_schedule(min(it, steps), lr, min_lr, warmup, steps)


# ---------------------------------------------------------------- model switches


def zero_init_residual(model: nn.Module) -> None:
    """Start every block's residual output projections, attn.output_proj and ffn.w2, at zero:
    each block begins as the identity, and only the residual stream's embeddings reach the head."""
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.output_proj.weight.zero_()
            layer.ffn.w2.weight.zero_()


class HeadRMSNorm(nn.Module):
    """RMS-normalize each head's slice of a projection's output (..., num_heads · d_k), with a gain
    of d_k shared by the heads: QK-norm on q_proj's and k_proj's outputs (before RoPE)."""

    def __init__(self, num_heads: int, d_k: int, eps: float = 1e-5):
        super().__init__()
        self.num_heads, self.d_k, self.eps = num_heads, d_k, eps
        self.weight = nn.Parameter(torch.ones(d_k))

    def forward(self, x):
        heads = x.unflatten(-1, (self.num_heads, self.d_k))
        return minilm.rms_norm(heads, self.weight, self.eps).flatten(-2)


def add_qk_norm(model: nn.Module) -> None:
    """QK-norm: each block's attention gets q_norm and k_norm (HeadRMSNorm), applied to the outputs of
    q_proj and k_proj by forward hooks, so the student's attention runs unchanged."""
    for layer in model.layers:
        attn = layer.attn
        d_model = attn.q_proj.weight.shape[0]
        d_k = d_model // attn.num_heads
        for name, proj in (("q_norm", attn.q_proj), ("k_norm", attn.k_proj)):
            norm = HeadRMSNorm(attn.num_heads, d_k).to(proj.weight.device)
            attn.add_module(name, norm)
            proj.register_forward_hook(lambda module, args, out, norm=norm: norm(out))


def add_softcap(model: nn.Module, cap: float) -> None:
    """The logits through the student's softcap (Task 14.5): a forward hook on lm_head."""
    model.lm_head.register_forward_hook(lambda module, args, out: minilm.softcap(out, cap))


def use_relu2(model: nn.Module) -> int:
    """Every block's SwiGLU replaced by the student's ReLUSquaredFFN at the same parameter count
    (matched_relu2_d_ff); returns its d_ff."""
    d_ff = None
    for layer in model.layers:
        d_model, swiglu_d_ff = layer.ffn.w1.weight.shape[1], layer.ffn.w1.weight.shape[0]
        d_ff = minilm.matched_relu2_d_ff(swiglu_d_ff)
        layer.add_module("ffn", minilm.ReLUSquaredFFN(d_model, d_ff, device=layer.ffn.w1.weight.device))
    return d_ff


def add_dropout(model: nn.Module, p: float) -> None:
    """Dropout (p) on the embeddings' output and on every sublayer's output before its residual add,
    in training mode only (GPT-2's residual dropout), by forward hooks that call the student's
    dropout (Task 16.1)."""
    def drop(module, args, out):
        return minilm.dropout(out, p, module.training)

    model.token_embeddings.register_forward_hook(drop)
    for layer in model.layers:
        layer.attn.register_forward_hook(drop)
        layer.ffn.register_forward_hook(drop)


def apply(model: nn.Module, recipe: Recipe, seed: int | None = None) -> nn.Module:
    """The model switches of `recipe`, in place (the FFN first: the zero-init reaches the new w2).
    New parameters (ReLU², QK-norm gains) are drawn after torch.manual_seed(seed) when it is given."""
    if seed is not None:
        torch.manual_seed(seed)
    if recipe.ffn == "relu2":
        use_relu2(model)
    if recipe.qk_norm:
        add_qk_norm(model)
    if recipe.zero_init:
        zero_init_residual(model)
    if recipe.softcap:
        add_softcap(model, recipe.softcap)
    if recipe.dropout:
        add_dropout(model, recipe.dropout)
    return model


# ---------------------------------------------------------------- data


class EpochBatches:
    """Batches that visit every window of the training tokens once per epoch: the windows start
    at offset + k · context_length (a new random offset each epoch), in a new random order each
    epoch. Against get_batch's windows drawn at random, no window repeats before all were seen."""

    def __init__(self, tokens: np.ndarray, batch_size: int, context_length: int, generator: torch.Generator):
        self.tokens, self.batch_size, self.context_length, self.g = tokens, batch_size, context_length, generator
        self.epoch, self.order = -1, np.zeros(0, dtype=np.int64)

    def _new_epoch(self):
        n = len(self.tokens) - 1 - self.context_length  # the last valid start
        offset = int(torch.randint(0, self.context_length, (), generator=self.g))
        starts = np.arange(offset, n + 1, self.context_length, dtype=np.int64)
        perm = torch.randperm(len(starts), generator=self.g).numpy()
        self.order = np.concatenate([self.order, starts[perm]])
        self.epoch += 1

    def __call__(self, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
        while len(self.order) < self.batch_size:
            self._new_epoch()
        starts, self.order = self.order[: self.batch_size], self.order[self.batch_size:]
        windows = np.stack([np.asarray(self.tokens[s : s + self.context_length + 1], dtype=np.int64) for s in starts])
        windows = torch.from_numpy(windows).to(device)
        return windows[:, :-1], windows[:, 1:]
