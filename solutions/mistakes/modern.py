"""Known mistakes in notebook 14 (the modern recipe: Tasks 14.1–14.6).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import math

import torch

from solutions import modern
from solutions.mistakes import mutant


def _ns(coefficients=modern.NS_COEFFICIENTS, normalize: bool = True, fixed_steps: int | None = None):
    def newton_schulz(G, steps=5, eps=1e-7):
        a, b, c = coefficients
        X = G.float()
        tall = X.shape[0] > X.shape[1]
        if tall:
            X = X.T
        if normalize:
            X = X / (X.norm() + eps)
        for _ in range(steps if fixed_steps is None else fixed_steps):
            A = X @ X.T
            X = a * X + (b * A + c * A @ A) @ X
        return (X.T if tall else X).to(G.dtype)
    return newton_schulz


def _muon_step(nesterov: bool = True, scale: str = "rows/cols", orthogonalize: bool = True, decay_lr: bool = True):
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                g, buf = p.grad, state["momentum_buffer"]
                buf.mul_(mu).add_(g, alpha=1 - mu)
                update = g * (1 - mu) + buf * mu if group["nesterov"] and nesterov else buf
                o = modern.newton_schulz(update, group["ns_steps"]) if orthogonalize else update
                rows, cols = p.shape
                s = {"rows/cols": math.sqrt(max(1.0, rows / cols)), "cols/rows": math.sqrt(max(1.0, cols / rows)),
                     "none": 1.0}[scale]
                p.mul_(1 - (lr if decay_lr else 1.0) * wd)
                p.add_(o, alpha=-lr * s)
    return step


def _groups(embeddings_to_muon=False, head_to_muon=False, decay_gains=False, decay_embeddings=False):
    def parameter_groups(model, muon=True):
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, modern.Embedding)}
        head = model.lm_head.weight
        groups = {"muon": [], "decay": [], "no_decay": []}
        for _, p in model.named_parameters():
            if id(p) in embeddings:
                groups["muon" if embeddings_to_muon and muon else "decay" if decay_embeddings else "no_decay"].append(p)
            elif p.ndim != 2:
                groups["decay" if decay_gains else "no_decay"].append(p)
            elif (p is head and not head_to_muon) or not muon:
                groups["decay"].append(p)
            else:
                groups["muon"].append(p)
        return groups
    return parameter_groups


def _wsd(where: str = "end", floor: bool = True, warmup_on: bool = True):
    def lr_wsd_schedule(progress, max_lr, min_lr, warmup, decay):
        low = min_lr if floor else 0.0
        if warmup_on and progress < warmup:
            return max_lr * progress / warmup
        start = 1 - decay if where == "end" else warmup
        if progress < start:
            return max_lr
        if progress < start + decay:
            return max_lr + (low - max_lr) * (progress - start) / decay
        return low
    return lr_wsd_schedule


def _relu2_forward(kind: str):
    def forward(self, x):
        h = self.w1(x)
        if kind == "relu":
            return self.w2(torch.relu(h))
        if kind == "square":
            return self.w2(h.square())
        return torch.relu(self.w2(h)).square()
    return forward



_M = "solutions.modern"

MISTAKES: list[dict] = [
    # Task 14.1: newton_schulz
    mutant("ns_cubic", "14.1", [(_M, "newton_schulz", _ns(coefficients=(1.5, -0.5, 0.0)))], "cubic"),
    mutant("ns_not_normalized", "14.1", [(_M, "newton_schulz", _ns(normalize=False))], "Frobenius norm"),
    mutant("ns_ignores_steps", "14.1", [(_M, "newton_schulz", _ns(fixed_steps=5))], "`steps` times"),
    # Task 14.2: Muon
    mutant("muon_no_nesterov", "14.2", [(_M, "Muon.step", _muon_step(nesterov=False))], "look-ahead"),
    mutant("muon_no_scale", "14.2", [(_M, "Muon.step", _muon_step(scale="none"))], "sqrt(max(1, rows / cols))"),
    mutant("muon_scale_inverted", "14.2", [(_M, "Muon.step", _muon_step(scale="cols/rows"))], "cols / rows"),
    mutant("muon_not_orthogonalized", "14.2", [(_M, "Muon.step", _muon_step(orthogonalize=False))], "newton_schulz"),
    mutant("muon_decay_without_lr", "14.2", [(_M, "Muon.step", _muon_step(decay_lr=False))], "lr · weight_decay"),
    # Task 14.3: parameter_groups
    mutant("muon_on_embeddings", "14.3", [(_M, "parameter_groups", _groups(embeddings_to_muon=True))], "embedding"),
    mutant("muon_on_head", "14.3", [(_M, "parameter_groups", _groups(head_to_muon=True))], "head"),
    mutant("decay_on_gains", "14.3", [(_M, "parameter_groups", _groups(decay_gains=True))], "1-D"),
    mutant("decay_on_embeddings", "14.3", [(_M, "parameter_groups", _groups(decay_embeddings=True))],
           "no weight decay"),
    # Task 14.4: lr_wsd_schedule
    mutant("wsd_decay_after_warmup", "14.4", [(_M, "lr_wsd_schedule", _wsd(where="after warmup"))], "LAST part"),
    mutant("wsd_decay_to_zero", "14.4", [(_M, "lr_wsd_schedule", _wsd(floor=False))], "min_lr"),
    mutant("wsd_no_warmup", "14.4", [(_M, "lr_wsd_schedule", _wsd(warmup_on=False))], "warmup"),
    # Task 14.5: softcap
    mutant("softcap_unscaled_input", "14.5", [(_M, "softcap", lambda x, cap: cap * torch.tanh(x))],
           "inside the tanh"),
    mutant("softcap_clamp", "14.5", [(_M, "softcap", lambda x, cap: x.clamp(-cap, cap))], "hard clamp"),
    mutant("softcap_no_outer_cap", "14.5", [(_M, "softcap", lambda x, cap: torch.tanh(x / cap))], "multiply"),
    # Task 14.6: ReLUSquaredFFN
    mutant("relu2_not_squared", "14.6", [(_M, "ReLUSquaredFFN.forward", _relu2_forward("relu"))], "square the ReLU"),
    mutant("relu2_square_without_relu", "14.6", [(_M, "ReLUSquaredFFN.forward", _relu2_forward("square"))],
           "before squaring"),
    mutant("relu2_after_w2", "14.6", [(_M, "ReLUSquaredFFN.forward", _relu2_forward("after"))], "not after w2"),
]
