"""Known mistakes in notebook 13 (the classic Transformer: Tasks 13.1–13.6).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import math

import torch
from torch import nn

from solutions import classic
from solutions.mistakes import mutant, variant


def _layer_norm(center: bool = True, unbiased: bool = False, eps_inside: bool = True):
    def layer_norm(x, weight, bias, eps=1e-5):
        xf = x.float()
        centered = xf - xf.mean(-1, keepdim=True) if center else xf
        var = centered.pow(2).sum(-1, keepdim=True) / (xf.shape[-1] - (1 if unbiased else 0))
        std = torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps
        return (centered / std * weight.float() + bias.float()).to(x.dtype)
    return layer_norm


_original_ln_init = classic.LayerNorm.__init__


def _ln_init_no_bias(self, d_model, eps=1e-5, device=None, dtype=None):
    _original_ln_init(self, d_model, eps, device, dtype)
    del self.bias
    self.register_buffer("bias", torch.zeros(d_model, device=device, dtype=dtype), persistent=False)


def _ln_forward_ignores_eps(self, x):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), self.weight, self.bias)  # torch's default eps


def _sinusoid(halves: bool = False, swapped: bool = False, exponent: float = 2.0, offset: int = 0):
    def sinusoidal_positions(seq_len, d_model):
        i = torch.arange(d_model // 2, dtype=torch.float64)
        angles = (torch.arange(seq_len, dtype=torch.float64)[:, None] + offset) * 10000.0 ** (-exponent * i / d_model)
        first, second = (angles.cos(), angles.sin()) if swapped else (angles.sin(), angles.cos())
        if halves:
            return torch.cat((first, second), dim=-1).float()
        return torch.stack((first, second), dim=-1).reshape(seq_len, d_model).float()
    return sinusoidal_positions


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_sigmoid(x):
    return x * torch.sigmoid(1.702 * x)


def _ffn_relu(self, x):
    return self.w2(torch.relu(self.w1(x)))


def _ffn_no_activation(self, x):
    return self.w2(self.w1(x))


def _ffn_gelu_after_w2(self, x):
    return classic.gelu(self.w2(self.w1(x)))


def _block_norm_before_add(self, x, token_positions=None):
    if self.config.norm_position == "pre":
        x = x + self.attn(self.ln1(x), token_positions)
        return x + self.ffn(self.ln2(x))
    x = x + self.ln1(self.attn(x, token_positions))
    return x + self.ln2(self.ffn(x))


def _block_always_pre(self, x, token_positions=None):
    x = x + self.attn(self.ln1(x), token_positions)
    return x + self.ffn(self.ln2(x))


def _block_parallel(self, x, token_positions=None):
    if self.config.norm_position == "pre":
        return x + self.attn(self.ln1(x), token_positions) + self.ffn(self.ln2(x))
    h = self.ln1(x + self.attn(x, token_positions))
    return self.ln2(h + self.ffn(x))


def _block_ln1_for_both(self, x, token_positions=None):
    if self.config.norm_position == "pre":
        x = x + self.attn(self.ln1(x), token_positions)
        return x + self.ffn(self.ln1(x))
    x = self.ln1(x + self.attn(x, token_positions))
    return self.ln1(x + self.ffn(x))


_original_lm_init = classic.ClassicLM.__init__
_original_lm_forward = classic.ClassicLM.forward


def _lm_init_copied_head(self, config, device=None, dtype=None):
    _original_lm_init(self, config, device, dtype)
    if config.tied_head:
        self.lm_head.weight = nn.Parameter(self.token_embeddings.weight.detach().clone())


def _lm_forward_unscaled(self, token_ids):
    if not self.config.tied_head:
        return _original_lm_forward(self, token_ids)
    return _original_lm_forward(self, token_ids) * math.sqrt(self.config.d_model)  # undo the 1/√d


def _lm_forward_no_positions(self, token_ids):
    seq = token_ids.shape[-1]
    positions = torch.arange(seq, device=token_ids.device)
    x = self.token_embeddings(token_ids)  # no sinusoidal or learned positions added
    for layer in self.layers:
        x = layer(x, positions)
    if self.config.norm_position == "pre":
        x = self.ln_final(x)
    if self.config.tied_head:
        x = x / math.sqrt(self.config.d_model)
    return self.lm_head(x)


def _lm_init_final_norm(self, config, device=None, dtype=None):
    _original_lm_init(self, config, device, dtype)
    if config.norm_position == "post":
        norm = classic.RMSNorm if config.norm == "rmsnorm" else classic.LayerNorm
        self.ln_final = norm(config.d_model, device=device, dtype=dtype)


def _lm_init_no_final_norm(self, config, device=None, dtype=None):
    _original_lm_init(self, config, device, dtype)
    if config.norm_position == "pre":
        del self.ln_final
        self.ln_final = nn.Identity()



_C = "solutions.classic"

def _sinusoidal_in_float32(seq_len, d_model):  # the angles p · ω in float32 lose digits at large p
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angles = torch.arange(seq_len, dtype=torch.float32)[:, None] * inv_freq
    return torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(seq_len, d_model)


MISTAKES: list[dict] = [
    # Task 13.1: layer_norm, LayerNorm
    mutant("layer_norm_no_mean", "13.1", [(_C, "layer_norm", _layer_norm(center=False))], "subtract the mean"),
    mutant("layer_norm_unbiased_var", "13.1", [(_C, "layer_norm", _layer_norm(unbiased=True))], "biased variance"),
    mutant("layer_norm_eps_outside_sqrt", "13.1", [(_C, "layer_norm", _layer_norm(eps_inside=False))],
           "inside the square root"),
    mutant("layer_norm_no_bias", "13.1", [(_C, "LayerNorm.__init__", _ln_init_no_bias)], "learnable bias"),
    variant("ignores_eps", "13.1", [(_C, "LayerNorm.forward", _ln_forward_ignores_eps)]),
    # Task 13.2: sinusoidal_positions
    mutant("sinusoid_angles_float32", "13.2", [(_C, "sinusoidal_positions", _sinusoidal_in_float32)], "20,000",
           broken="each row is the previous one turned"),
    mutant("sinusoid_halves", "13.2", [(_C, "sinusoidal_positions", _sinusoid(halves=True))], "interleave"),
    mutant("sinusoid_sin_cos_swapped", "13.2", [(_C, "sinusoidal_positions", _sinusoid(swapped=True))],
           "sine on the even dims"),
    mutant("sinusoid_frequency", "13.2", [(_C, "sinusoidal_positions", _sinusoid(exponent=1.0))], "2i / d_model"),
    mutant("sinusoid_one_based", "13.2", [(_C, "sinusoidal_positions", _sinusoid(offset=1))], "position is 0"),
    # Task 13.3: gelu
    mutant("gelu_tanh", "13.3", [(_C, "gelu", _gelu_tanh)], "tanh approximation"),
    mutant("gelu_sigmoid", "13.3", [(_C, "gelu", _gelu_sigmoid)], "sigmoid approximation"),
    mutant("gelu_relu", "13.3", [(_C, "gelu", torch.relu)], "ReLU"),
    # Task 13.4: GeluFFN
    mutant("gelu_ffn_relu", "13.4", [(_C, "GeluFFN.forward", _ffn_relu)], "ReLU"),
    mutant("gelu_ffn_no_activation", "13.4", [(_C, "GeluFFN.forward", _ffn_no_activation)], "one linear map"),
    mutant("gelu_ffn_gelu_after_w2", "13.4", [(_C, "GeluFFN.forward", _ffn_gelu_after_w2)], "not after w2"),
    # Task 13.5: ClassicBlock
    mutant("norm_before_add", "13.5", [(_C, "ClassicBlock.forward", _block_norm_before_add)],
           "before the residual add"),
    mutant("ignores_norm_position", "13.5", [(_C, "ClassicBlock.forward", _block_always_pre)], "stayed pre-norm"),
    mutant("parallel_sublayers", "13.5", [(_C, "ClassicBlock.forward", _block_parallel)], "one after the other"),
    mutant("ln1_for_both", "13.5", [(_C, "ClassicBlock.forward", _block_ln1_for_both)], "ln2"),
    # Task 13.6: ClassicLM
    mutant("head_copied_not_shared", "13.6", [(_C, "ClassicLM.__init__", _lm_init_copied_head)],
           "shares the embedding"),
    mutant("tied_head_unscaled", "13.6", [(_C, "ClassicLM.forward", _lm_forward_unscaled)], "√d_model"),
    mutant("positions_not_added", "13.6", [(_C, "ClassicLM.forward", _lm_forward_no_positions)], "add the position"),
    mutant("final_norm_in_post_norm", "13.6", [(_C, "ClassicLM.__init__", _lm_init_final_norm)], "no ln_final"),
    mutant("classic_missing_final_norm", "13.6", [(_C, "ClassicLM.__init__", _lm_init_no_final_norm)],
           "needs ln_final"),
]
