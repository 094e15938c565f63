"""Known mistakes in notebook 15 (inside the trained model: Tasks 15.1–15.3).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import contextlib

import torch

from solutions.mistakes import mutant

_I = "solutions.inside"


# ---------------------------------------------------------------- 15.1: attention_inputs


def _inputs(where: str = "attn", kind: str = "pre", remove: str = "finally", grad: bool = False,
            reverse: bool = False):
    """attention_inputs with one step done otherwise: the hooked module (the block instead of its attention),
    the hook (a forward hook, which sees the output), the removal (never, or not when the model raises),
    no torch.no_grad() nor detach (grad), or the list reversed."""
    def attention_inputs(model, ids):
        seen = []
        modules = [layer.attn if where == "attn" else layer for layer in model.layers]
        if kind == "pre":
            handles = [m.register_forward_pre_hook(lambda module, args: seen.append(args[0] if grad else
                                                                                    args[0].detach()))
                       for m in modules]
        else:
            handles = [m.register_forward_hook(lambda module, args, out: seen.append(out.detach()))
                       for m in modules]
        if remove == "finally":
            try:
                with contextlib.nullcontext() if grad else torch.no_grad():
                    model(ids)
            finally:
                for h in handles:
                    h.remove()
        else:
            with torch.no_grad():
                model(ids)
            if remove == "after":  # not when the model raised
                for h in handles:
                    h.remove()
        return seen[::-1] if reverse else seen
    return attention_inputs


# ---------------------------------------------------------------- 15.2: head scores


def _previous_self(pattern):
    return pattern.diagonal(dim1=-2, dim2=-1).mean(-1)


def _previous_over_seq(pattern):
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / pattern.shape[-1]


def _induction_earlier_copy(pattern, period):
    return pattern.diagonal(offset=-period, dim1=-2, dim2=-1).mean(-1)


def _induction_from_first_half(pattern, period):
    return pattern.diagonal(offset=1 - period, dim1=-2, dim2=-1).mean(-1)


# ---------------------------------------------------------------- 15.3: ablate_heads


def _ablate(kind: str):
    """ablate_heads zeroing every num_heads-th column (interleaved), the output's columns (output), the weight's
    columns in place (weights) or the heads not listed (others)."""
    def ablate_heads(attn, heads):
        d_k, off = attn.d_k, torch.zeros(attn.d_model, dtype=torch.bool)
        for h in heads:
            if kind == "interleaved":
                off[h::attn.num_heads] = True
            else:
                off[h * d_k:(h + 1) * d_k] = True
        if kind == "others":
            off = ~off
        if kind == "output":
            return attn.output_proj.register_forward_hook(lambda module, args, out: out.masked_fill(off, 0.0))
        if kind == "weights":
            with torch.no_grad():
                attn.output_proj.weight[:, off] = 0.0
            return attn.output_proj.register_forward_pre_hook(lambda module, args: None)
        return attn.output_proj.register_forward_pre_hook(lambda module, args: (args[0].masked_fill(off, 0.0),))
    return ablate_heads


MISTAKES = [
    # Task 15.1: attention_inputs (the hooks left and the grad kept named by the invariant, the values by the
    # property they break)
    mutant("inputs_hooks_never_removed", "15.1", [(_I, "attention_inputs", _inputs(remove="never"))],
           "after attention_inputs returned"),
    mutant("inputs_hooks_left_when_raising", "15.1", [(_I, "attention_inputs", _inputs(remove="after"))],
           "after it raised"),
    mutant("inputs_hook_on_block", "15.1", [(_I, "attention_inputs", _inputs(where="block"))], "before ln1",
           broken="tensor i is what model.layers[i].attn received"),
    mutant("inputs_attention_output", "15.1", [(_I, "attention_inputs", _inputs(kind="forward"))],
           "output, not its input", broken="tensor i is what model.layers[i].attn received"),
    mutant("inputs_reversed", "15.1", [(_I, "attention_inputs", _inputs(reverse=True))], "reverse order",
           broken="tensor i is what model.layers[i].attn received"),
    mutant("inputs_keep_grad", "15.1", [(_I, "attention_inputs", _inputs(grad=True))], "require grad"),
    # Task 15.2: previous_token_score, induction_score
    mutant("prev_score_self", "15.2", [(_I, "previous_token_score", _previous_self)], "key t − 1"),
    mutant("prev_score_over_seq", "15.2", [(_I, "previous_token_score", _previous_over_seq)], "seq − 1 queries"),
    mutant("induction_earlier_copy", "15.2", [(_I, "induction_score", _induction_earlier_copy)],
           "token after the earlier copy"),
    mutant("induction_from_first_half", "15.2", [(_I, "induction_score", _induction_from_first_half)],
           "t = period … seq − 1"),
    # Task 15.3: ablate_heads
    mutant("ablate_interleaved", "15.3", [(_I, "ablate_heads", _ablate("interleaved"))], "(heads d_k)"),
    mutant("ablate_output_columns", "15.3", [(_I, "ablate_heads", _ablate("output"))], "output_proj's input"),
    mutant("ablate_weights", "15.3", [(_I, "ablate_heads", _ablate("weights"))], "handle.remove()"),
    mutant("ablate_the_others", "15.3", [(_I, "ablate_heads", _ablate("others"))], "keep the others"),
]
