"""Known mistakes in notebook 16 (past the data limit: Tasks 16.1–16.2).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import torch

from solutions import datalimit
from solutions.mistakes import mutant

_D = "solutions.datalimit"


# ---------------------------------------------------------------- 16.1: dropout


def _dropout(kind: str):
    """dropout with one step done otherwise: no rescaling, scaled by (1 − p), p the keep probability,
    active when not training, or in place."""
    def dropout(x, p, training, generator=None):
        if (not training and kind != "eval") or p == 0:
            return x
        u = torch.rand(x.shape, generator=generator, device=x.device)
        keep = u < p if kind == "keep" else u >= p
        if kind == "in_place":
            return x.masked_fill_(~keep, 0).div_(1 - p)
        scale = {"no_rescale": 1.0, "times": 1 - p}.get(kind, 1 / (1 - p))
        return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype))
    return dropout


# ---------------------------------------------------------------- 16.2: distillation_loss


def _log_softmax(z):
    m = z.amax(dim=-1, keepdim=True).detach()
    return z - m - torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))


def _distill(kind: str):
    """distillation_loss with one step done otherwise: the KL reversed, no T², the teacher not divided by T,
    the teacher's gradient kept, or a sum over positions."""
    def distillation_loss(student_logits, teacher_logits, targets, temperature, alpha):
        teacher = teacher_logits if kind == "gradient" else teacher_logits.detach()
        log_p = _log_softmax(teacher if kind == "teacher_unscaled" else teacher / temperature)
        log_q = _log_softmax(student_logits / temperature)
        each = ((log_q.exp() * (log_q - log_p)) if kind == "reversed" else (log_p.exp() * (log_p - log_q))).sum(-1)
        kl = each.sum() if kind == "sum" else each.mean()
        soft = kl if kind == "no_t2" else temperature**2 * kl
        hard = datalimit.cross_entropy(student_logits, targets)
        if kind == "sum":
            hard = hard * targets.numel()
        return alpha * soft + (1 - alpha) * hard
    return distillation_loss


MISTAKES = [
    # Task 16.1: dropout
    mutant("dropout_no_rescale", "16.1", [(_D, "dropout", _dropout("no_rescale"))], "1 / (1 − p)"),
    mutant("dropout_scaled_by_keep", "16.1", [(_D, "dropout", _dropout("times"))], "do not multiply"),
    mutant("dropout_p_is_keep", "16.1", [(_D, "dropout", _dropout("keep"))], "probability of dropping"),
    mutant("dropout_in_eval", "16.1", [(_D, "dropout", _dropout("eval"))], "not training"),
    mutant("dropout_in_place", "16.1", [(_D, "dropout", _dropout("in_place"))], "argument 1 changed",
           broken="dropout leaves its arguments"),
    # Task 16.2: distillation_loss
    mutant("distill_kl_reversed", "16.2", [(_D, "distillation_loss", _distill("reversed"))], "from the teacher"),
    mutant("distill_no_t_squared", "16.2", [(_D, "distillation_loss", _distill("no_t2"))], "by T²"),
    mutant("distill_teacher_unscaled", "16.2", [(_D, "distillation_loss", _distill("teacher_unscaled"))],
           "softmax(teacher / T)"),
    mutant("distill_teacher_gradient", "16.2", [(_D, "distillation_loss", _distill("gradient"))], "reached teacher",
           broken="no gradient reaches teacher_logits"),
    mutant("distill_sum_not_mean", "16.2", [(_D, "distillation_loss", _distill("sum"))], "not the sum"),
]
