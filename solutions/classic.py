"""Task 13: the 2017 decoder beside today's (notebooks/13_classic_vs_modern.ipynb).

The pieces the original Transformer (Vaswani et al., 2017) and the GPT-1/BERT generation used
where the course's model now uses others: LayerNorm (with a bias) for RMSNorm, sinusoidal
positions added to the embeddings for RoPE, a GELU feed-forward for SwiGLU, post-norm for
pre-norm, a head tied to the embedding for an untied one; and a block and a language model
that switch between the two, one choice at a time (ClassicConfig).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from minilm.course.validate import (
    check_choice,
    check_last_dim,
    check_pairs,
    check_positive,
    check_positive_int,
    check_seq_len,
    check_token_ids,
)

from .attention import MultiHeadSelfAttention
from .embedding import Embedding
from .linear import Linear
from .rmsnorm import RMSNorm
from .swiglu import SwiGLU


def layer_norm(
    x: Float[Tensor, "... d_model"], weight: Float[Tensor, " d_model"], bias: Float[Tensor, " d_model"],
    eps: float = 1e-5,
) -> Float[Tensor, "... d_model"]:
    """Task 13.1: (x − mean(x)) / sqrt(var(x) + eps) · weight + bias, over the last dim.

    var is the biased variance, mean((x − mean(x))²), dividing by d_model and not d_model − 1,
    as torch.nn.LayerNorm does. Compute in float32 and return the input's dtype, like rms_norm.
    Do not use torch.nn.functional.layer_norm.
    """
    check_last_dim(x, weight.shape[-1], "layer_norm", "d_model")
    check_last_dim(bias, weight.shape[-1], "layer_norm", "d_model", "bias")
    # BEGIN SOLUTION 13.1
    in_dtype = x.dtype
    x = x.float()
    centered = x - x.mean(dim=-1, keepdim=True)
    inv_std = torch.rsqrt(centered.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (centered * inv_std * weight.float() + bias.float()).to(in_dtype)
    # END SOLUTION


class LayerNorm(nn.Module):
    """Task 13.1: LayerNorm with a learnable gain `weight` (starting at ones) and `bias`
    (starting at zeros), both of shape (d_model,). Call your layer_norm."""

    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "LayerNorm")
        check_positive(eps, "eps", "LayerNorm")
        self.d_model, self.eps = d_model, eps
        # BEGIN SOLUTION 13.1
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype))
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "LayerNorm", "d_model")
        # BEGIN SOLUTION 13.1
        return layer_norm(x, self.weight, self.bias, self.eps)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"


def sinusoidal_positions(seq_len: int, d_model: int) -> Float[Tensor, "seq_len d_model"]:
    """Task 13.2: the position vectors of Vaswani et al. (2017, §3.5), one row per position
    p = 0 … seq_len − 1:

        PE[p, 2i]   = sin(p / 10000^(2i / d_model))
        PE[p, 2i+1] = cos(p / 10000^(2i / d_model))

    for i = 0 … d_model/2 − 1: sine on the even dims, cosine on the odd ones, one frequency per
    pair. Return float32; compute the angles in float64 (p · 10000^(−2i/d) loses digits in
    float32 at large p).
    """
    check_positive_int(seq_len, "seq_len", "sinusoidal_positions")
    check_positive_int(d_model, "d_model", "sinusoidal_positions")
    check_pairs(d_model, "d_model", "sinusoidal_positions", "a sine and a cosine share each frequency")
    # BEGIN SOLUTION 13.2
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # 2i / d_model
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv_freq  # (seq_len, d_model / 2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (seq_len, d_model / 2, 2): sin, cos of each pair
    return pe.reshape(seq_len, d_model).float()
    # END SOLUTION


def gelu(x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:
    """Task 13.3: GELU(x) = x · Φ(x), Φ the standard normal CDF, in its exact form
    0.5 · x · (1 + erf(x / √2)), with torch.erf. Not the tanh approximation, and not
    torch.nn.functional.gelu."""
    # BEGIN SOLUTION 13.3
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    # END SOLUTION


class GeluFFN(nn.Module):
    """Task 13.4: the classic two-layer feed-forward network, w2(GELU(w1 x)), with submodules
    w1 (d_model → d_ff) and w2 (d_ff → d_model), bias-free Linears like the rest of the course.
    Use your gelu and Linear."""

    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        check_positive_int(d_model, "d_model", "GeluFFN")
        check_positive_int(d_ff, "d_ff", "GeluFFN")
        self.d_model, self.d_ff = d_model, d_ff
        # BEGIN SOLUTION 13.4
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        check_last_dim(x, self.d_model, "GeluFFN", "d_model")
        # BEGIN SOLUTION 13.4
        return self.w2(gelu(self.w1(x)))
        # END SOLUTION


def matched_swiglu_d_ff(d_model: int) -> int:
    """SwiGLU's hidden width with the parameters of a 4·d_model GELU FFN (provided): SwiGLU has
    three d_model × d_ff matrices, GELU two d_model × 4·d_model ones, so d_ff = 2/3 · 4·d_model
    = 8·d_model/3, rounded to the nearest integer (a difference of at most d_model parameters
    per layer: 64 at d_model = 64, where 170.67 rounds to 171)."""
    return round(8 * d_model / 3)


NORM_POSITIONS = ("pre", "post")
NORMS = ("rmsnorm", "layernorm")
FFNS = ("swiglu", "gelu")
POSITIONS = ("rope", "sinusoidal", "learned", "none")


@dataclass(frozen=True)
class ClassicConfig:
    """A decoder-only Transformer, one architectural choice per field (provided).

    The defaults are the course's model (TransformerLM): pre-norm RMSNorm, SwiGLU, RoPE and an
    untied head. ClassicConfig.classic(...) is the 2017 design (with GELU, as GPT-1 and BERT
    used it, for the paper's ReLU): post-norm LayerNorm, a GELU FFN, sinusoidal positions and a
    head tied to the embedding. d_ff=None takes 4·d_model for GELU and matched_swiglu_d_ff for
    SwiGLU, so the two FFNs have (almost) the same parameters.
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    norm_position: str = "pre"  # "pre": x + f(norm(x));  "post": norm(x + f(x))
    norm: str = "rmsnorm"  # "rmsnorm" | "layernorm"
    ffn: str = "swiglu"  # "swiglu" | "gelu"
    positions: str = "rope"  # "rope" (inside attention) | "sinusoidal" | "learned" (added to the embeddings) | "none"
    tied_head: bool = False  # lm_head shares token_embeddings.weight
    d_ff: int | None = None
    rope_theta: float = 10000.0

    def __post_init__(self):
        for name, value in (("vocab_size", self.vocab_size), ("context_length", self.context_length),
                            ("d_model", self.d_model), ("num_layers", self.num_layers), ("num_heads", self.num_heads)):
            check_positive_int(value, name, "ClassicConfig")
        check_choice(self.norm_position, NORM_POSITIONS, "norm_position", "ClassicConfig")
        check_choice(self.norm, NORMS, "norm", "ClassicConfig")
        check_choice(self.ffn, FFNS, "ffn", "ClassicConfig")
        check_choice(self.positions, POSITIONS, "positions", "ClassicConfig")
        if not isinstance(self.tied_head, bool):
            raise ValueError(f"ClassicConfig: tied_head must be True or False, got {self.tied_head!r}")
        if self.d_ff is not None:
            check_positive_int(self.d_ff, "d_ff", "ClassicConfig")
        check_positive(self.rope_theta, "rope_theta", "ClassicConfig")
        if self.d_model % self.num_heads:
            raise ValueError(f"ClassicConfig: d_model must be divisible by num_heads, got d_model={self.d_model} "
                             f"and num_heads={self.num_heads}")
        if self.positions == "sinusoidal":
            check_pairs(self.d_model, "d_model", "ClassicConfig", "sinusoidal positions pair a sine with a cosine")
        if self.positions == "rope":
            check_pairs(self.d_model // self.num_heads, "d_k", "ClassicConfig", "RoPE rotates pairs of dimensions")

    @property
    def hidden(self) -> int:
        """The FFN's hidden width: d_ff, or the matched default for the chosen FFN."""
        if self.d_ff is not None:
            return self.d_ff
        return 4 * self.d_model if self.ffn == "gelu" else matched_swiglu_d_ff(self.d_model)

    def replace(self, **changes) -> ClassicConfig:
        """A copy with some fields changed: cfg.replace(norm_position="post")."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def modern(cls, vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
               **changes) -> ClassicConfig:
        """The course's model: pre-norm RMSNorm, SwiGLU, RoPE, untied head."""
        return cls(vocab_size, context_length, d_model, num_layers, num_heads, **changes)

    @classmethod
    def classic(cls, vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                **changes) -> ClassicConfig:
        """The 2017 design: post-norm LayerNorm, GELU FFN, sinusoidal positions, tied head."""
        settings = dict(norm_position="post", norm="layernorm", ffn="gelu", positions="sinusoidal", tied_head=True)
        return cls(vocab_size, context_length, d_model, num_layers, num_heads, **(settings | changes))


class ClassicBlock(nn.Module):
    """Task 13.5: a Transformer block built as `config` says, with submodules ln1, attn, ln2, ffn.

    - ln1, ln2: your RMSNorm(d_model) (config.norm == "rmsnorm") or LayerNorm(d_model) ("layernorm").
    - attn: your MultiHeadSelfAttention(d_model, num_heads, context_length, rope_theta), with RoPE
      only when config.positions == "rope" (otherwise MultiHeadSelfAttention(d_model, num_heads)).
    - ffn: your SwiGLU(d_model, config.hidden) or GeluFFN(d_model, config.hidden).
    - config.norm_position "pre":  h = x + attn(ln1(x)),  out = h + ffn(ln2(h))   (as TransformerBlock)
                           "post": h = ln1(x + attn(x)),  out = ln2(h + ffn(h))   (Vaswani et al.)
    """

    def __init__(self, config: ClassicConfig, device=None, dtype=None):
        super().__init__()
        if not isinstance(config, ClassicConfig):
            raise TypeError(f"ClassicBlock: config must be a ClassicConfig, got {type(config).__name__}")
        self.config, self.d_model = config, config.d_model
        # BEGIN SOLUTION 13.5
        norm = RMSNorm if config.norm == "rmsnorm" else LayerNorm
        self.ln1 = norm(config.d_model, device=device, dtype=dtype)
        rope = (config.context_length, config.rope_theta) if config.positions == "rope" else ()
        self.attn = MultiHeadSelfAttention(config.d_model, config.num_heads, *rope, device=device, dtype=dtype)
        self.ln2 = norm(config.d_model, device=device, dtype=dtype)
        ffn = SwiGLU if config.ffn == "swiglu" else GeluFFN
        self.ffn = ffn(config.d_model, config.hidden, device=device, dtype=dtype)
        # END SOLUTION

    def forward(
        self, x: Float[Tensor, "... seq d_model"], token_positions: Int[Tensor, "... seq"] | None = None
    ) -> Float[Tensor, "... seq d_model"]:
        check_last_dim(x, self.d_model, "ClassicBlock", "d_model")
        # BEGIN SOLUTION 13.5
        if self.config.norm_position == "pre":
            x = x + self.attn(self.ln1(x), token_positions)
            return x + self.ffn(self.ln2(x))
        # Post-norm: the residual stream itself is normalized after every add.
        x = self.ln1(x + self.attn(x, token_positions))
        return self.ln2(x + self.ffn(x))
        # END SOLUTION


class ClassicLM(nn.Module):
    """Task 13.6: a language model built as `config` says. Submodules, in this order:

    - token_embeddings: your Embedding(vocab_size, d_model);
    - position_embeddings: your Embedding(context_length, d_model), only with positions "learned";
    - layers: an nn.ModuleList of num_layers ClassicBlock(config);
    - ln_final: the config's norm, only with pre-norm (a post-norm block already ends in a norm);
    - lm_head: your Linear(d_model, vocab_size). With tied_head, its weight IS the embedding's
      (one shared nn.Parameter, not a copy), and the logits are lm_head(x / √d_model): Vaswani et
      al. multiply the shared matrix by √d_model on the way in instead; with the course's std-1
      embeddings, dividing on the way out keeps the initial logits' std near 1, not √d_model.

    forward: positions 0 … seq − 1. With "sinusoidal", add sinusoidal_positions(seq, d_model)
    to the token embeddings (derived, not learned: nothing in the state_dict); with "learned", add
    position_embeddings(positions); with "rope", give the positions to every block; with "none",
    use no positions at all (the causal mask alone tells a token how many came before it).
    With the default config this is TransformerLM: the same state_dict and the same logits.
    """

    def __init__(self, config: ClassicConfig, device=None, dtype=None):
        super().__init__()
        if not isinstance(config, ClassicConfig):
            raise TypeError(f"ClassicLM: config must be a ClassicConfig, got {type(config).__name__}")
        self.config = config
        self.vocab_size, self.context_length = config.vocab_size, config.context_length
        # BEGIN SOLUTION 13.6
        d = config.d_model
        self.token_embeddings = Embedding(config.vocab_size, d, device=device, dtype=dtype)
        if config.positions == "learned":
            self.position_embeddings = Embedding(config.context_length, d, device=device, dtype=dtype)
        self.layers = nn.ModuleList(ClassicBlock(config, device=device, dtype=dtype) for _ in range(config.num_layers))
        if config.norm_position == "pre":
            self.ln_final = (RMSNorm if config.norm == "rmsnorm" else LayerNorm)(d, device=device, dtype=dtype)
        self.lm_head = Linear(d, config.vocab_size, device=device, dtype=dtype)
        if config.tied_head:
            self.lm_head.weight = self.token_embeddings.weight  # one Parameter under two names
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, "batch seq"]) -> Float[Tensor, "batch seq vocab_size"]:
        check_token_ids(token_ids, self.vocab_size, "ClassicLM")
        check_seq_len(token_ids.shape[-1], self.context_length, "ClassicLM")
        # BEGIN SOLUTION 13.6
        cfg, seq = self.config, token_ids.shape[-1]
        positions = torch.arange(seq, device=token_ids.device)
        x = self.token_embeddings(token_ids)
        if cfg.positions == "sinusoidal":
            x = x + sinusoidal_positions(seq, cfg.d_model).to(x.device, x.dtype)
        elif cfg.positions == "learned":
            x = x + self.position_embeddings(positions)
        for layer in self.layers:
            x = layer(x, positions)
        if cfg.norm_position == "pre":
            x = self.ln_final(x)
        if cfg.tied_head:
            x = x / math.sqrt(cfg.d_model)
        return self.lm_head(x)
        # END SOLUTION
