"""The reference and the stubs generated from it follow every task's "from scratch" rule
(minilm/course/rules), the registry's task regions match the reference's solution markers, and
honest variants of every solution pass the rule."""

from __future__ import annotations

import ast
import textwrap

import pytest

from minilm.course import rules, tasks
from solutions import make_stubs


@pytest.mark.parametrize("module", tasks.EXERCISE_MODULES)
def test_reference_and_stub_are_flagged_for_nothing(module):
    reference = (make_stubs.SOLUTIONS_DIR / f"{module}.py").read_text(encoding="utf-8")
    for text, file in ((reference, f"solutions/{module}.py"),
                       (make_stubs.stub_source(reference, module), f"minilm/{module}.py")):
        found = rules.scan(text, file)
        assert set(found) == {t.id for t in tasks.TASKS if t.module == module}
        assert not any(found.values()), [v.message for vs in found.values() for v in vs]


@pytest.mark.parametrize("module", tasks.EXERCISE_MODULES)
def test_task_names_cover_every_solution_region(module):
    """Each top-level function or class holding a task's solution is one of that task's names
    (`function` or `also`), so the rule judges that code by that task's rules."""
    lines = (make_stubs.SOLUTIONS_DIR / f"{module}.py").read_text(encoding="utf-8").splitlines()
    tops = [(n.lineno, n.end_lineno, n.name) for n in ast.parse("\n".join(lines)).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for i, line in enumerate(lines, 1):
        m = make_stubs.BEGIN.match(line)
        if m:
            [name] = [name for start, end, name in tops if start <= i <= end]
            assert name in tasks.get(m["task"]).names, f"{module}.py:{i}: {name} is not a name of Task {m['task']}"


# Honest code a student might write: every one must pass with no violation (the rule fails
# closed, so each honest variant missing from the list in minilm/course/rules/allowed.py shows here).
# Instructors only: these are solutions, so they stay out of the student edition's tests.
HONEST = {
    "linear": ("linear.py", """
        import math
        import torch
        from einops import einsum
        from jaxtyping import Float
        from torch import Tensor, nn

        def linear(x: Float[Tensor, "... d_in"], weight: Float[Tensor, "d_out d_in"]) -> Float[Tensor, "... d_out"]:
            a = torch.einsum("...i,oi->...o", x, weight)
            b = einsum(x, weight, "... d_in, d_out d_in -> ... d_out")
            c = torch.matmul(x, weight.transpose(0, 1)) + (x.unsqueeze(-2) * weight).sum(-1)
            return x @ weight.T

        class Linear(nn.Module):
            def __init__(self, in_features, out_features, device=None, dtype=None):
                super().__init__()
                std = math.sqrt(2 / (in_features + out_features))
                self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
                nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

            def forward(self, x):
                return linear(x, self.weight)
    """),
    "embedding": ("embedding.py", """
        import torch
        from torch import nn

        def embedding(token_ids, weight):
            flat = torch.index_select(weight, 0, token_ids.reshape(-1))
            rows = [weight[i] for i in token_ids.flatten().tolist()]
            one_hot = (token_ids[..., None] == torch.arange(weight.shape[0])).to(weight.dtype)
            return flat.view(*token_ids.shape, weight.shape[-1])

        class Embedding(nn.Module):
            def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
                super().__init__()
                w = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
                self.weight = nn.Parameter(nn.init.trunc_normal_(w, std=1.0, a=-3.0, b=3.0))

            def forward(self, token_ids):
                return embedding(token_ids, self.weight)
    """),
    "rmsnorm": ("rmsnorm.py", """
        import torch
        from torch import nn

        def rms_norm(x, weight, eps=1e-5):
            x32 = x.to(torch.float32)
            ms = x32.pow(2).mean(-1, keepdim=True)
            alt = torch.sqrt(torch.mean(x32 * x32, dim=-1, keepdim=True) + eps)
            return (x32 * torch.rsqrt(ms + eps) * weight).type_as(x)

        class RMSNorm(nn.Module):
            def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
                super().__init__()
                self.eps = eps
                self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

            def forward(self, x):
                return rms_norm(x, self.weight, self.eps)
    """),
    "swiglu": ("swiglu.py", """
        import torch
        from torch import nn
        from .linear import Linear, linear

        def silu(x):
            return x / (1 + torch.exp(-x))

        def swiglu(x, w1, w2, w3):
            return linear(silu(linear(x, w1)) * linear(x, w3), w2)

        class SwiGLU(nn.Module):
            def __init__(self, d_model, d_ff, device=None, dtype=None):
                super().__init__()
                self.w1, self.w2, self.w3 = (Linear(a, b, device=device, dtype=dtype)
                                             for a, b in ((d_model, d_ff), (d_ff, d_model), (d_model, d_ff)))

            def forward(self, x):
                return self.w2(silu(self.w1(x)) * self.w3(x))
    """),
    "rope": ("rope.py", """
        import torch
        from einops import rearrange
        from torch import nn

        def rope_angles(token_positions, d_k, theta=10000.0):
            freqs = 1.0 / theta ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
            return torch.outer(token_positions.reshape(-1).double(), freqs).reshape(*token_positions.shape, -1).float()

        def rotate_pairs(x, cos, sin):
            even, odd = x[..., 0::2], x[..., 1::2]
            out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
            pairs = rearrange(x, "... (h two) -> ... h two", two=2)
            return out.flatten(-2)

        def rope(x, token_positions, theta=10000.0):
            angles = rope_angles(token_positions, x.shape[-1], theta)
            return rotate_pairs(x, torch.cos(angles), torch.sin(angles))

        class RotaryPositionalEmbedding(nn.Module):
            def __init__(self, theta, d_k, max_seq_len, device=None, dtype=None):
                super().__init__()
                angles = rope_angles(torch.arange(max_seq_len, device=device), d_k, theta)
                self.register_buffer("cos", angles.cos(), persistent=False)
                self.register_buffer("sin", angles.sin(), persistent=False)

            def forward(self, x, token_positions):
                return rotate_pairs(x, self.cos[token_positions], self.sin[token_positions])
    """),
    "attention": ("attention.py", """
        import math
        import torch
        from einops import einsum, rearrange
        from torch import nn
        from .linear import Linear
        from .rope import RotaryPositionalEmbedding

        def softmax(x, dim):
            m = x.max(dim, keepdim=True).values
            e = (x - m).exp()
            rows = [torch.exp(r - r.max()) for r in x.unbind(0)]
            return e / torch.sum(e, dim=dim, keepdim=True)

        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = einsum(q, k, "... q d, ... k d -> ... q k") / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
                scores = torch.where(mask, scores, torch.full_like(scores, -torch.inf))
            return softmax(scores, -1) @ v

        class MultiHeadSelfAttention(nn.Module):
            def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
                super().__init__()
                self.num_heads = num_heads
                self.q_proj, self.k_proj, self.v_proj, self.output_proj = (
                    Linear(d_model, d_model, device=device, dtype=dtype) for _ in range(4))
                self.rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len) if theta else None

            def forward(self, x, token_positions=None, kv_cache=None):
                seq = x.shape[-2]
                q, k, v = (rearrange(p(x), "... s (h d) -> ... h s d", h=self.num_heads)
                           for p in (self.q_proj, self.k_proj, self.v_proj))
                if kv_cache is not None:
                    k, v = kv_cache.update(k, v)
                mask = torch.tril(torch.ones(seq, k.shape[-2], dtype=torch.bool, device=x.device))
                upper = torch.triu(torch.ones(seq, seq), diagonal=1).bool()
                out = scaled_dot_product_attention(q, k, v, mask)
                return self.output_proj(rearrange(out, "... h s d -> ... s (h d)"))
    """),
    "block": ("block.py", """
        from torch import nn
        from .attention import MultiHeadSelfAttention
        from .rmsnorm import RMSNorm
        from .swiglu import SwiGLU

        class TransformerBlock(nn.Module):
            def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta=10000.0, device=None, dtype=None):
                super().__init__()
                self.ln1, self.ln2 = RMSNorm(d_model), RMSNorm(d_model)
                self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta)
                self.ffn = SwiGLU(d_model, d_ff)

            def forward(self, x, token_positions=None, kv_cache=None):
                h = x + self.attn(self.ln1(x), token_positions, kv_cache)
                return h + self.ffn(self.ln2(h))
    """),
    "model": ("model.py", """
        import torch
        from torch import nn
        from .block import TransformerBlock
        from .embedding import Embedding
        from .generation import KVCache
        from .linear import Linear
        from .rmsnorm import RMSNorm

        class TransformerLM(nn.Module):
            def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta=10000.0,
                         device=None, dtype=None):
                super().__init__()
                self.token_embeddings = Embedding(vocab_size, d_model)
                self.layers = nn.ModuleList([TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta)
                                             for _ in range(num_layers)])
                self.ln_final = RMSNorm(d_model)
                self.lm_head = Linear(d_model, vocab_size)

            def forward(self, token_ids, kv_cache=None):
                start = len(kv_cache[0]) if kv_cache else 0
                positions = torch.arange(start, start + token_ids.size(-1), device=token_ids.device)
                x = self.token_embeddings(token_ids)
                for layer, cache in zip(self.layers, kv_cache or [None] * len(self.layers)):
                    x = layer(x, positions, cache)
                return self.lm_head(self.ln_final(x))
    """),
    "data": ("data.py", """
        import numpy as np
        import torch

        def get_batch(dataset, batch_size, context_length, device="cpu"):
            starts = torch.randint(len(dataset) - context_length, (batch_size,))
            x = torch.stack([torch.from_numpy(dataset[s:s + context_length].astype(np.int64)) for s in starts.tolist()])
            y = torch.tensor(np.array([dataset[s + 1:s + 1 + context_length] for s in starts]), dtype=torch.long)
            return x.to(device), y.to(device)
    """),
    "bpe": ("bpe.py", """
        from collections import Counter, defaultdict
        import regex

        PATTERN = regex.compile(r"\\p{L}+|\\p{N}+|\\s+")

        def train_bpe(text, num_merges):
            chunks = Counter(m.group(0).encode("utf-8") for m in PATTERN.finditer(text))
            words = {tuple(bytes([b]) for b in w): n for w, n in chunks.items()}
            merges, vocab = [], {i: bytes([i]) for i in range(256)}
            for _ in range(num_merges):
                pairs = defaultdict(int)
                for w, n in words.items():
                    for a, b in zip(w, w[1:]):
                        pairs[a, b] += n
                if not pairs:
                    break
                best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
                merges.append(best)
                vocab[len(vocab)] = b"".join(best)
            return vocab, merges
    """),
    "training": ("training.py", """
        import math
        import os
        import torch
        from typing import BinaryIO

        def cross_entropy(logits, targets):
            m = logits.max(dim=-1, keepdim=True).values
            lse = m.squeeze(-1) + (logits - m).exp().sum(-1).log()
            picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
            return torch.mean(lse - picked)

        def clip_grad_norm(parameters, max_norm):
            grads = [p.grad for p in parameters if p.grad is not None]
            total = torch.sqrt(sum(torch.sum(g.float() ** 2) for g in grads)) if grads else torch.tensor(0.0)
            if total > max_norm:
                for g in grads:
                    g.mul_(max_norm / (total + 1e-6))
            return total

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
            if it < warmup_iters:
                return max_lr * it / warmup_iters
            if it > cosine_cycle_iters:
                return min_lr
            progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
            return min_lr + (1 + math.cos(math.pi * progress)) / 2 * (max_lr - min_lr)

        class AdamW(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    b1, b2 = group["betas"]
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        state = self.state[p]
                        if len(state) == 0:
                            state["t"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                        state["t"] += 1
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                        state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                        state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                        denom = (state["v"] / (1 - b2 ** state["t"])).sqrt().add_(group["eps"])
                        p.addcdiv_(state["m"], denom, value=-group["lr"] / (1 - b1 ** state["t"]))

        def save_checkpoint(model, optimizer, iteration, out: str | os.PathLike | BinaryIO):
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": iteration}, out)

        def load_checkpoint(src, model, optimizer):
            state = torch.load(src, weights_only=True)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            return state["iteration"]
    """),
    "generation": ("generation.py", """
        import torch

        def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
            logits = logits.float()
            if temperature == 0:
                return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
            logits = logits / temperature
            if top_k is not None:
                values, _ = torch.topk(logits, top_k)
                logits = logits.masked_fill(logits < values[..., -1:], -float("inf"))
            probs = torch.softmax(logits, dim=-1)
            if top_p is not None:
                sorted_probs, idx = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_probs, -1) - sorted_probs < top_p
                probs = torch.zeros_like(probs).scatter(-1, idx, sorted_probs * keep)
            return probs / probs.sum(-1, keepdim=True)

        def generate(model, prompt_ids, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None,
                     eos_token_id=None, use_cache=True, generator=None):
            ids = torch.as_tensor(prompt_ids, dtype=torch.long)
            model.eval()
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    logits = model(ids[-model.context_length:][None])[0, -1]
                    probs = next_token_probs(logits, temperature, top_k, top_p)
                    nxt = torch.multinomial(probs, 1, generator=generator) if temperature else probs.argmax().view(1)
                    ids = torch.cat([ids, nxt])
                    if nxt.item() == eos_token_id:
                        break
            return ids

        class KVCache:
            def __init__(self):
                self.k = self.v = None

            def update(self, k, v):
                self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
                self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
                return self.k, self.v

            def __len__(self):
                return 0 if self.k is None else self.k.shape[-2]
    """),
    "quantization": ("quantization.py", """
        import torch
        from torch import nn
        from .linear import Linear, linear

        def quantize_int8(w, per_channel=True):
            absmax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().max().view(1, 1)
            scale = torch.where(absmax > 0, absmax / 127, torch.ones_like(absmax))
            return torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8), scale.float()

        def dequantize_int8(q, scale):
            return q.to(torch.float32) * scale

        class Int8Linear(nn.Module):
            def __init__(self, in_features, out_features, per_channel=True, device=None):
                super().__init__()
                self.register_buffer("weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8))
                self.register_buffer("scale", torch.ones(out_features if per_channel else 1, 1))

            @classmethod
            def from_linear(cls, layer, per_channel=True):
                out_features, in_features = layer.weight.shape
                module = cls(in_features, out_features, per_channel)
                q, scale = quantize_int8(layer.weight.detach(), per_channel)
                module.weight_int8.copy_(q)
                module.scale.copy_(scale)
                return module

            def forward(self, x):
                return linear(x, dequantize_int8(self.weight_int8, self.scale).to(x.dtype))

        def quantize_model(model, per_channel=True):
            stack = [model]  # a walk with a stack instead of the reference's recursion
            while stack:
                parent = stack.pop()
                for name, child in list(parent.named_children()):
                    if isinstance(child, Linear):
                        parent.add_module(name, Int8Linear.from_linear(child, per_channel))
                    else:
                        stack.append(child)
            return model
    """),
    "classic": ("classic.py", """
        import math
        import torch
        from torch import nn
        from .attention import MultiHeadSelfAttention
        from .embedding import Embedding
        from .linear import Linear
        from .swiglu import SwiGLU

        def layer_norm(x, weight, bias, eps=1e-5):
            mu = x.mean(-1, keepdim=True)
            var = x.var(-1, unbiased=False, keepdim=True)
            return (x - mu) * torch.rsqrt(var + eps) * weight + bias

        class LayerNorm(nn.Module):
            def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
                super().__init__()
                self.weight, self.bias = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))
                self.eps = eps

            def forward(self, x):
                return layer_norm(x, self.weight, self.bias, self.eps)

        def sinusoidal_positions(seq_len, d_model):
            pos = torch.arange(seq_len, dtype=torch.float64)[:, None]
            div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
            return pe.float()

        def gelu(x):
            return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

        class GeluFFN(nn.Module):
            def __init__(self, d_model, d_ff, device=None, dtype=None):
                super().__init__()
                self.w1, self.w2 = Linear(d_model, d_ff), Linear(d_ff, d_model)

            def forward(self, x):
                return self.w2(gelu(self.w1(x)))
    """),
    "modern": ("modern.py", """
        import math
        import torch
        from torch import nn
        from .embedding import Embedding
        from .linear import Linear

        def newton_schulz(G, steps=5, eps=1e-7):
            a, b, c = 3.4445, -4.7750, 2.0315
            X = G.to(torch.float32)
            wide = X.shape[0] <= X.shape[1]
            X = X if wide else X.mT
            X = X / (torch.sqrt((X * X).sum()) + eps)
            for _ in range(steps):
                A = torch.matmul(X, X.mT)
                X = a * X + torch.matmul(b * A + c * torch.matmul(A, A), X)
            return (X if wide else X.mT).to(G.dtype)

        class Muon(torch.optim.Optimizer):
            def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, weight_decay=0.0, ns_steps=5):
                super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov,
                                              weight_decay=weight_decay, ns_steps=ns_steps))

            @torch.no_grad()
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        if "buf" not in self.state[p]:
                            self.state[p]["buf"] = torch.zeros_like(p)
                        buf = self.state[p]["buf"]
                        buf.lerp_(p.grad, 1 - group["momentum"])
                        u = p.grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                        rows, cols = p.shape
                        p.mul_(1 - group["lr"] * group["weight_decay"])
                        p.sub_(newton_schulz(u, group["ns_steps"]) * group["lr"] * max(1.0, rows / cols) ** 0.5)

        def parameter_groups(model, muon=True):
            embedded = [m.weight for m in model.modules() if isinstance(m, Embedding)]
            out = {"muon": [], "decay": [], "no_decay": []}
            for name, p in model.named_parameters():
                if any(p is e for e in embedded) or p.dim() != 2:
                    out["no_decay"].append(p)
                elif muon and p is not model.lm_head.weight:
                    out["muon"].append(p)
                else:
                    out["decay"].append(p)
            return out

        def lr_wsd_schedule(progress, max_lr, min_lr, warmup, decay):
            if progress >= 1:
                return min_lr
            if progress < warmup:
                return progress / warmup * max_lr
            t = max(0.0, (progress - 1 + decay) / decay)
            return (1 - t) * max_lr + t * min_lr

        def softcap(logits, cap):
            return torch.tanh(logits / cap) * cap

        class ReLUSquaredFFN(nn.Module):
            def __init__(self, d_model, d_ff, device=None, dtype=None):
                super().__init__()
                self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
                self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)

            def forward(self, x):
                h = torch.clamp(self.w1(x), min=0)
                return self.w2(h * h)
    """),
}


def _variant(module: str, *changes: str) -> tuple[str, str]:
    """HONEST[module], dedented, with each (old, new) pair of `changes` replaced at old's indentation."""
    file, source = HONEST[module][0], textwrap.dedent(HONEST[module][1])
    for old, new in zip(changes[::2], changes[1::2]):
        old, new = (textwrap.dedent(t).strip("\n") + "\n" for t in (old, new))
        pad = max((" " * n for n in range(0, 20, 4) if textwrap.indent(old, " " * n) in source), key=len)
        source = source.replace(textwrap.indent(old, pad), textwrap.indent(new, pad))
    return file, source


# Honest variants a red team found refused: each replaces part of one module of HONEST, and the
# package as a whole must still pass.
VARIANTS = {
    "quantize-model-walks-model.modules": _variant("quantization", """
        stack = [model]  # a walk with a stack instead of the reference's recursion
        while stack:
            parent = stack.pop()
            for name, child in list(parent.named_children()):
                if isinstance(child, Linear):
                    parent.add_module(name, Int8Linear.from_linear(child, per_channel))
                else:
                    stack.append(child)
    """, """
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, Linear):
                    parent.add_module(name, Int8Linear.from_linear(child, per_channel))
    """),
    "bpe-with-operator-heapq-bisect-re": _variant("bpe", """
        from collections import Counter, defaultdict
        import regex
    """, """
        from collections import Counter, defaultdict
        import bisect
        import heapq
        import operator
        import re
        import regex

        WORD = re.compile(r"\\w+")

        def _top(pairs, k):
            return heapq.nlargest(k, pairs.items(), key=operator.itemgetter(1)), bisect.bisect_left([1, 3], 2)
    """, """
                best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
    """, """
                best = max(pairs.items(), key=operator.itemgetter(1, 0))[0]
    """),
    "rms-norm-with-a-local-named-input": _variant("rmsnorm", """
        def rms_norm(x, weight, eps=1e-5):
            x32 = x.to(torch.float32)
    """, """
        def rms_norm(x, weight, eps=1e-5):
            input = x.to(torch.float32)
            x32 = input
    """),
    "kv-cache-repr-with-its-class-name": _variant("generation", """
        class KVCache:
            def __init__(self):
    """, """
        class KVCache:
            def __repr__(self):
                return f"{self.__class__.__name__}(tokens={len(self)})"

            def __init__(self):
    """),
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_passes(name):
    file, source = HONEST[name]
    found = rules.scan(textwrap.dedent(source).lstrip("\n"), f"minilm/{file}")
    assert not any(found.values()), "\n".join(v.message for vs in found.values() for v in vs)


def test_honest_package_passes_as_a_whole():
    sources = {file.removesuffix(".py"): textwrap.dedent(src) for file, src in HONEST.values()}
    found = rules.scan_package(sources)
    assert not any(found.values()), "\n".join(v.message for vs in found.values() for v in vs)
    assert set(sources) == set(tasks.EXERCISE_MODULES)


@pytest.mark.parametrize("name", VARIANTS)
def test_honest_variant_passes_in_the_package(name):
    file, source = VARIANTS[name]
    sources = {f.removesuffix(".py"): textwrap.dedent(src) for f, src in HONEST.values()}
    sources[file.removesuffix(".py")] = textwrap.dedent(source)
    found = rules.scan_package(sources)
    assert not any(found.values()), "\n".join(v.message for vs in found.values() for v in vs)
