"""Task 16: past the data limit (notebooks/16_data_limit.ipynb).

When the text runs out, a model that reads it again and again learns it by heart. Two tools of
the data-limited regime: inverted dropout (Srivastava et al., 2014), which trains a model on
randomly thinned copies of itself, and knowledge distillation (Hinton, Vinyals & Dean, 2015),
which trains one model on the softened predictions of others (an ensemble) as well as on the text.
"""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from minilm.course.validate import check_logits_targets, check_positive, check_probability, check_tensor

from .training import cross_entropy  # noqa: F401  (Task 16.2's hard part: your Task 10.1)


def dropout(x: Float[Tensor, "..."], p: float, training: bool,
            generator: torch.Generator | None = None) -> Float[Tensor, "..."]:
    """Task 16.1: inverted dropout. In training, zero each entry of x independently with
    probability p and multiply the entries kept by 1 / (1 − p), so that every entry keeps its
    expected value; not training, or p = 0, return x itself, unchanged.

    Draw the mask as  keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    (one uniform number per entry; an entry is kept when its number is at least p), so that a
    generator makes the result reproducible. Return a new tensor of x's shape and dtype: never
    change x in place. p must lie in [0, 1). No F.dropout, nn.Dropout or torch.dropout.
    """
    check_tensor(x, "x", "dropout")
    check_probability(p, "p", "dropout")
    raise NotImplementedError("Task 16.1 is not implemented yet: write dropout in minilm/datalimit.py")


def distillation_loss(student_logits: Float[Tensor, "... vocab_size"], teacher_logits: Float[Tensor, "... vocab_size"],
                      targets: Int[Tensor, "..."], temperature: float, alpha: float) -> Float[Tensor, ""]:
    """Task 16.2: the knowledge-distillation loss of Hinton, Vinyals & Dean (2015),

        loss = α · T² · KL(p_T ‖ q_T) + (1 − α) · cross_entropy(student_logits, targets)

    where p_T = softmax(teacher_logits / T) (the soft targets) and q_T = softmax(student_logits / T),
    KL(p ‖ q) = Σ_v p_v (log p_v − log q_v) over the vocabulary, and both parts are means over every
    leading position. The teacher is fixed: no gradient may flow into teacher_logits. The factor T²
    keeps the soft part's gradient about the same size whatever T. Use your cross_entropy (Task
    10.1), and log-softmax by the log-sum-exp with the max trick yourself: no F.kl_div, no
    log_softmax, softmax or logsumexp of torch.
    """
    check_logits_targets(student_logits, targets, "distillation_loss")
    check_tensor(teacher_logits, "teacher_logits", "distillation_loss")
    if tuple(teacher_logits.shape) != tuple(student_logits.shape):
        raise ValueError(f"distillation_loss: teacher_logits must have student_logits' shape "
                         f"{tuple(student_logits.shape)}, got {tuple(teacher_logits.shape)}")
    check_positive(temperature, "temperature", "distillation_loss")
    check_probability(alpha, "alpha", "distillation_loss", upper_open=False)
    raise NotImplementedError("Task 16.2 is not implemented yet: write distillation_loss in minilm/datalimit.py")
