"""Known mistakes in notebooks 7–8 (the Transformer block and the language model: Tasks 7.1–8.1).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

from solutions import attention, block, model
from solutions.mistakes import mutant, variant
from solutions.mistakes._shared import lm_forward

_original_block_init = block.TransformerBlock.__init__
_original_lm_init = model.TransformerLM.__init__
_original_lm_forward = model.TransformerLM.forward


# ---------------------------------------------------------------- 7.1: TransformerBlock


def _block_post_norm(self, x, token_positions=None, kv_cache=None):
    x = self.ln1(x + self.attn(x, token_positions, kv_cache))
    return self.ln2(x + self.ffn(x))


def _block_parallel(self, x, token_positions=None, kv_cache=None):
    return x + self.attn(self.ln1(x), token_positions, kv_cache) + self.ffn(self.ln2(x))


def _block_init_shared_norm(self, *args, **kwargs):
    _original_block_init(self, *args, **kwargs)
    self.ln2 = self.ln1  # one RMSNorm, one gain, for both sublayers


def _block_ln1_for_both(self, x, token_positions=None, kv_cache=None):
    x = x + self.attn(self.ln1(x), token_positions, kv_cache)
    return x + self.ffn(self.ln1(x))  # ln1 again where ln2 belongs


def _block_no_residual(self, x, token_positions=None, kv_cache=None):
    h = x + self.attn(self.ln1(x), token_positions)
    return self.ffn(self.ln2(h))  # the block's output minus x minus attn(ln1(x))


# ---------------------------------------------------------------- 8.1: TransformerLM


def _lm_init_tied(self, *args, **kwargs):
    _original_lm_init(self, *args, **kwargs)
    self.lm_head.weight = self.token_embeddings.weight


def _lm_forward_probabilities(self, token_ids, kv_cache=None):
    return attention.softmax(_original_lm_forward(self, token_ids, kv_cache), dim=-1)  # probabilities, not logits


_B, _M = "solutions.block", "solutions.model"

MISTAKES: list[dict] = [
    # Task 7.1: TransformerBlock
    mutant("post_norm", "7.1", [(_B, "TransformerBlock.forward", _block_post_norm)], "post-norm"),
    mutant("parallel_block", "7.1", [(_B, "TransformerBlock.forward", _block_parallel)], "sequential"),
    mutant("shared_norm", "7.1", [(_B, "TransformerBlock.__init__", _block_init_shared_norm)], "its own RMSNorm"),
    mutant("block_ln1_for_both", "7.1", [(_B, "TransformerBlock.forward", _block_ln1_for_both)], "ln2"),
    variant("no_residual", "7.1", [(_B, "TransformerBlock.forward", _block_no_residual)]),
    # Task 8.1: TransformerLM
    mutant("tied_lm_head", "8.1", [(_M, "TransformerLM.__init__", _lm_init_tied)], "tied"),
    mutant("missing_final_norm", "8.1", [(_M, "TransformerLM.forward", lm_forward(final_norm=False))], "ln_final"),
    mutant("logits_are_probabilities", "8.1", [(_M, "TransformerLM.forward", _lm_forward_probabilities)],
           "sums to 1"),
]
