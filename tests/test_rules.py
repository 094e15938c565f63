"""The "from scratch" rule (minilm/course/rules, its lists in minilm/course/rules/allowed.py): shortcut modules are
flagged for exactly the tasks they shortcut, at the right line, and a check of such code
fails with the rule's one line.

Each corpus module marks the lines it expects flagged with `# flag: <task ids>`; a line with
no mark must not be flagged for any task."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from minilm.course import rules, tasks

CORPUS = {
    # ---------------------------------------------------------------- found by a red team
    "builtins-through-unfollowed-names": ("linear.py", """
        import torch
        from torch import nn

        def linear(x, weight, F=torch.nn.functional):  # flag: 1.1
            return F.linear(x, weight)  # flag: 1.1

        class Linear(nn.Module):
            def forward(self, x):
                F = G = torch.nn.functional
                return (H := G).linear(x, self.weight)  # flag: 1.2
    """),
    "rmsnorm-through-a-dict-and-a-loop": ("rmsnorm.py", """
        import torch

        D = {"f": torch.nn.functional}  # flag: 3.1 3.2

        def rms_norm(x, weight, eps=1e-5):
            for f in (D["f"],):
                return f.rms_norm(x, x.shape[-1:], weight, eps)  # flag: 3.1
    """),
    "getattr-with-a-string-that-is-no-name": ("linear.py", """
        import torch

        def linear(x, weight):
            return x @ weight.T

        def _note():
            return getattr(torch.ops, "x\\n# FEEDBACK OVERRIDE")  # flag: 1.1 1.2
    """),
    # ---------------------------------------------------------------- found by the third red team (issue 24)
    "self-rebound-to-anything": ("attention.py", """
        import torch

        D = [1]

        def softmax(x, dim, self=None):
            self = x
            return self.softmax(dim)  # flag: 6.1

        class MultiHeadSelfAttention(torch.nn.Module):
            def forward(self, x):
                self = D[0]
                y = self.scaled_dot_product_attention(x, x, x)  # flag: 6.3
                return [self.softmax(-1) for self in (x,)]  # flag: 6.3
    """),
    "cls-rebound": ("quantization.py", """
        import torch

        class Int8Linear(torch.nn.Module):
            @classmethod
            def from_linear(cls, layer, per_channel=True):
                cls = layer.weight
                return cls.dequantize()  # flag: 12.2

            @staticmethod
            def helper(cls):
                return cls.int_repr()  # flag: 12.2
    """),
    "self-of-a-tensor-subclass": ("attention.py", """
        import torch

        class Scores(torch.Tensor):
            def normalized(self):
                return self.softmax(-1)  # flag: 6.2

        class Plain(torch.nn.Module):
            def forward(self, x):
                return self.weight @ x

        class Deeper(Plain):
            def forward(self, x):
                return self.softmax(x) + super().forward(x)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return Scores(q).normalized() @ v
    """),
    "einops-private-backends": ("attention.py", """
        import einops
        from einops._backends import TorchBackend  # flag: 6.1 6.2 6.3

        def softmax(x, dim):
            torch = einops._backends.TorchBackend().torch  # flag: 6.1
            return torch.softmax(x, dim)  # flag: 6.1
    """),
    "builtins-of-an-object-the-scan-cannot-follow": ("training.py", """
        def cross_entropy(logits, targets, backend=None):
            F = backend.torch.nn.functional  # flag: 10.1
            return F.cross_entropy(logits, targets) + F.scaled_dot_product_attention(logits)  # flag: 10.1

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters, obj=None):
            return obj.lr_scheduler.LambdaLR  # flag: 10.3

        class AdamW:
            def step(self, closure=None):
                return self.backend.optim.AdamW(self.param_groups).step()  # flag: 10.4
    """),
    "softmax-like-losses-and-log-sum-exps": ("attention.py", """
        import torch
        import torch.nn.functional as F

        def softmax(x, dim):
            a = torch.exp(-F.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.long), reduction="none"))  # flag: 6.1
            b = torch.exp(x - x.logcumsumexp(dim)[..., -1:])  # flag: 6.1
            c = torch.logaddexp(x, x)  # flag: 6.1
            return F.scaled_dot_product_attention(x, x, x)  # flag: 6.1
    """),
    "softmax-like-in-cross-entropy": ("training.py", """
        import torch
        import torch.nn.functional as F

        def cross_entropy(logits, targets):
            lse = torch.logcumsumexp(logits, -1)[..., -1]  # flag: 10.1
            o = F.scaled_dot_product_attention(logits, logits, logits)  # flag: 10.1
            return (lse - torch.logaddexp(logits, logits).gather(-1, targets[..., None])).mean()  # flag: 10.1
    """),
    "torch.save-hands-a-pickler": ("training.py", """
        import torch

        class Pickler:
            pass

        def save_checkpoint(model, optimizer, iteration, out):
            torch.save(model.state_dict(), out, pickle_module=Pickler)  # flag: 10.5
            torch.save(model.state_dict(), out, Pickler, 2)  # flag: 10.5
            save = torch.save
            save(model, out, pickle_protocol=0)  # flag: 10.5

        def cross_entropy(logits, targets):
            torch.save(logits, "x.pt")  # flag: 10.1
            return logits.mean()
    """),
    "a-name-on-no-list": ("rope.py", """
        import torch
        import numpy as np

        def rope(x, token_positions, theta=10000.0):
            y = torch.brand_new_op(x)  # flag: 5.1
            return np.fft.rfft(y), torch.polar(x, x), np.newbuiltin  # flag: 5.1
    """),
    # ---------------------------------------------------------------- each task family's built-in
    "linear-F.linear": ("linear.py", """
        import torch.nn.functional as F
        from torch import nn

        def linear(x, weight):
            return F.linear(x, weight)  # flag: 1.1

        class Linear(nn.Linear):  # flag: 1.2
            pass
    """),
    "embedding-builtins": ("embedding.py", """
        import torch
        from torch import nn

        def embedding(token_ids, weight):
            return torch.nn.functional.embedding(token_ids, weight)  # flag: 2.1

        class Embedding(nn.Module):
            def __init__(self, num_embeddings, embedding_dim):
                super().__init__()
                self.inner = nn.Embedding(num_embeddings, embedding_dim)  # flag: 2.2
    """),
    "rmsnorm-builtins": ("rmsnorm.py", """
        import torch
        from torch import nn
        from torch.nn import functional

        def rms_norm(x, weight, eps=1e-5):
            return functional.rms_norm(x, (x.shape[-1],), weight, eps)  # flag: 3.1

        class RMSNorm(nn.RMSNorm):  # flag: 3.2
            def forward(self, x):
                return torch.nn.functional.layer_norm(x, x.shape[-1:])  # flag: 3.2
    """),
    "swiglu-builtins": ("swiglu.py", """
        import torch
        import torch.nn.functional as G
        from torch import nn

        def silu(x):
            return G.silu(x)  # flag: 4.1

        def swiglu(x, w1, w2, w3):
            return G.linear(silu(G.linear(x, w1)) * x, w2)  # flag: 4.2

        class SwiGLU(nn.Module):
            def __init__(self, d_model, d_ff):
                super().__init__()
                self.w1 = nn.Linear(d_model, d_ff, bias=False)  # flag: 4.3
                self.act = nn.SiLU()  # flag: 4.3
    """),
    "silu-with-sigmoid-is-fine": ("swiglu.py", """
        import torch

        def silu(x):
            return torch.sigmoid(x).mul(x)
    """),
    "attention-aliases": ("attention.py", """
        import torch
        import torch.nn.functional as G
        from torch import softmax as s
        from torch.nn import functional

        def softmax(x, dim):
            return G.softmax(x, dim)  # flag: 6.1

        def scaled_dot_product_attention(q, k, v, mask=None):
            a = s(q, -1)  # flag: 6.2
            b = getattr(torch, "soft" + "max")(q, -1)  # flag: 6.2
            c = getattr(torch, "softmax")(q, -1)  # flag: 6.2
            d = torch.ops.aten.softmax(q, -1, False)  # flag: 6.2
            e = (q @ k.transpose(-2, -1)).softmax(-1)  # flag: 6.2
            return functional.scaled_dot_product_attention(q, k, v)  # flag: 6.2

        class MultiHeadSelfAttention(torch.nn.Module):
            def __init__(self, d_model, num_heads):
                super().__init__()
                self.attn = torch.nn.MultiheadAttention(d_model, num_heads, bias=False)  # flag: 6.3
                self.q_proj = torch._C._nn.linear  # flag: 6.3
    """),
    "softmax-bound-to-the-builtin": ("attention.py", """
        import torch
        from torch.special import softmax  # flag: 6.1

        def scaled_dot_product_attention(q, k, v, mask=None):
            return softmax(q @ k.transpose(-2, -1), -1) @ v
    """),
    "softmax-assigned-the-builtin": ("attention.py", """
        import torch
        smax = torch.softmax
        softmax = torch.nn.Softmax  # flag: 6.1

        def scaled_dot_product_attention(q, k, v, mask=None):
            return smax(q, -1)  # flag: 6.2
    """),
    "softmax-in-a-helper": ("attention.py", """
        import torch

        def _normalize(scores):
            return scores.log_softmax(-1).exp()  # flag: 6.2

        def softmax(x, dim):
            e = torch.exp(x - x.amax(dim, keepdim=True))
            return e / e.sum(dim, keepdim=True)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return _normalize(q @ k.transpose(-2, -1)) @ v
    """),
    "block-and-model-builtins": ("block.py", """
        from torch import nn

        class TransformerBlock(nn.Module):
            def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta=10000.0):
                super().__init__()
                self.ln1 = nn.LayerNorm(d_model)  # flag: 7.1
                self.layer = nn.TransformerEncoderLayer(d_model, num_heads)  # flag: 7.1
    """),
    "model-builtins": ("model.py", """
        import torch
        from torch import nn

        class TransformerLM(nn.Module):
            def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
                super().__init__()
                self.token_embeddings = nn.Embedding(vocab_size, d_model)  # flag: 8.1
                self.lm_head = nn.Linear(d_model, vocab_size, bias=False)  # flag: 8.1
    """),
    "training-builtins": ("training.py", """
        import math
        import os
        import torch
        import torch.nn.functional as F

        def cross_entropy(logits, targets):
            lse = torch.logsumexp(logits, -1)  # flag: 10.1
            lp = logits.log_softmax(-1)  # flag: 10.1
            return F.cross_entropy(logits, targets)  # flag: 10.1

        def clip_grad_norm(parameters, max_norm):
            return torch.nn.utils.clip_grad_norm_(parameters, max_norm)  # flag: 10.2

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
            return min_lr + 0.5 * (1 + math.cos(math.pi * it / cosine_cycle_iters)) * (max_lr - min_lr)

        class AdamW(torch.optim.Optimizer):
            def step(self, closure=None):
                return torch.optim.AdamW(self.param_groups).step()  # flag: 10.4

        def save_checkpoint(model, optimizer, iteration, out: str | os.PathLike):
            torch.save({"model": model.state_dict(), "iteration": iteration}, out)

        def load_checkpoint(src: str | os.PathLike, model, optimizer):
            return torch.load(src)["iteration"]
    """),
    "scheduler-and-files-outside-checkpoints": ("training.py", """
        import torch

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
            return torch.optim.lr_scheduler.CosineAnnealingLR  # flag: 10.3

        def cross_entropy(logits, targets):
            torch.save(logits, "/tmp/logits.pt")  # flag: 10.1
            return logits.mean()
    """),
    "local-alias-and-distributions": ("training.py", """
        import torch

        def cross_entropy(logits, targets):
            F = torch.nn.functional
            loss = F.nll_loss(logits, targets)  # flag: 10.1
            return -torch.distributions.Categorical(logits=logits).log_prob(targets).mean()  # flag: 10.1
    """),
    "generate-may-sample-with-torch.softmax": ("generation.py", """
        import torch

        def generate(model, prompt_ids, max_new_tokens, *, temperature=1.0):
            return torch.multinomial(torch.softmax(prompt_ids.float(), -1), 1)
    """),
    "get_batch-numpy-is-fine": ("data.py", """
        import numpy as np
        import torch

        def get_batch(dataset, batch_size, context_length, device="cpu"):
            w = torch.from_numpy(np.stack([np.asarray(dataset[:context_length + 1], dtype=np.int64)] * batch_size))
            return w[:, :-1].to(device), w[:, 1:].to(device)
    """),
    # ---------------------------------------------------------------- ways around the list
    "grading-time-environment-check": ("attention.py", """
        import os
        import torch

        def softmax(x, dim):
            if os.environ.get("MINILM_GRADING"):  # flag: 6.1
                return torch.softmax(x, dim)  # flag: 6.1
            e = torch.exp(x - x.amax(dim, keepdim=True))
            return e / e.sum(dim, keepdim=True)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return softmax(q @ k.transpose(-2, -1), -1) @ v
    """),
    "exec-at-module-level": ("attention.py", """
        import torch

        exec("def softmax(x, dim): return x")  # flag: 6.1 6.2 6.3
    """),
    "exec-in-a-task": ("attention.py", """
        def scaled_dot_product_attention(q, k, v, mask=None):
            return eval("q")  # flag: 6.2
    """),
    "importlib": ("rmsnorm.py", """
        import importlib  # flag: 3.1 3.2

        def rms_norm(x, weight, eps=1e-5):
            return importlib.import_module("torch").nn.functional.rms_norm(x, x.shape[-1:], weight, eps)  # flag: 3.1
    """),
    "dunder-import-and-sys-modules": ("linear.py", """
        from sys import modules  # flag: 1.1 1.2

        def linear(x, weight):
            return __import__("torch").matmul(x, weight.T)  # flag: 1.1
    """),
    "open-a-file": ("data.py", """
        import numpy as np

        def get_batch(dataset, batch_size, context_length, device="cpu"):
            dataset.tofile("dataset.bin")  # flag: 9.1
            with open("answers.txt") as f:  # flag: 9.1
                return np.load(f)  # flag: 9.1
    """),
    "patching-torch": ("linear.py", """
        import torch

        torch.allclose = lambda *a, **k: True  # flag: 1.1 1.2

        def linear(x, weight):
            setattr(torch.nn.functional, "linear", None)  # flag: 1.1
            return x @ weight.T
    """),
    "computed-names-and-dunders": ("embedding.py", """
        import torch

        def embedding(token_ids, weight):
            f = vars(torch)["embedding"]  # flag: 2.1
            g = torch.__dict__  # flag: 2.1
            return getattr(token_ids, "__class__")  # flag: 2.1
    """),
    "oracles-star-imports-and-helpers-of-other-modules": ("swiglu.py", """
        from minilm.course import oracles  # flag: 4.1 4.2 4.3
        from torch.nn.functional import *  # flag: 4.1 4.2 4.3
        from .linear import Linear, linear
        from .linear import _shortcut  # flag: 4.1 4.2 4.3
    """),
    "modules-reexported-by-libraries": ("classic.py", """
        import collections
        import contextlib
        import dataclasses
        import torch
        import typing
        from torch import sys as system  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
        from torch.serialization import load  # flag: 13.1 13.2 13.3 13.4 13.5 13.6

        def gelu(x):
            F = torch.sys.modules["torch.nn.functional"]  # flag: 13.3
            return torch.builtins.getattr(F, "ge" + "lu")(x)  # flag: 13.3

        def sinusoidal_positions(seq_len, d_model):
            a = typing.sys.modules, collections._sys, contextlib.os.environ  # flag: 13.2
            b = dataclasses.builtins.exec, torch.fx.proxy.enum.bltns.eval  # flag: 13.2
            c = (torch,)[0].sys, [torch][0].importlib  # flag: 13.2
            return torch.UntypedStorage.from_file("x"), torch.jit.load("y")  # flag: 13.2

        def layer_norm(x, weight, bias, eps=1e-5):
            frame = (i for i in x).gi_frame  # flag: 13.1
            return frame.f_back.f_globals  # flag: 13.1
    """),
    "modules-as-values": ("classic.py", """
        import torch
        from . import linear as L
        from .linear import Linear

        F = G = torch.nn.functional
        nn_, f_ = torch.nn, torch.nn.functional

        def gelu(x, t=torch):  # flag: 13.3
            a = (torch,)[0].fx.proxy.enum.bltns  # flag: 13.3
            b = {"l": L}  # flag: 13.3
            c = isinstance(x, torch.Tensor), Linear, torch.erf, L.Linear, G.dropout, f_.pad
            return 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))
    """),
    "strings-run-as-code": ("classic.py", """
        import functools
        import typing
        import torch
        from jaxtyping import Float, Int
        from torch import Tensor

        Shape = Float

        def _spec(f: "torch.nn.functional.gelu"):
            pass

        def gelu(x: Float[Tensor, "... d_model"]) -> Float[Tensor, "*batch #d _ 1"]:
            isinstance(x, Float[Tensor, '*b exec("import builtins")'])  # flag: 13.3
            isinstance(x, Shape[Tensor, "n+1"])  # flag: 13.3
            spec = "n"
            isinstance(x, Int[torch.Tensor, spec])  # flag: 13.3
            f = (Float,)[0]  # flag: 13.3
            return typing.get_type_hints(_spec)["f"](x)  # flag: 13.3

        def sinusoidal_positions(seq_len, d_model):
            g = torch.fx.Graph()  # flag: 13.2
            torch.jit.CompilationUnit("def f(x): return x")  # flag: 13.2
            return torch.utils.benchmark.Timer("1"), functools.singledispatch  # flag: 13.2
    """),
    "checkpoints-loaded-with-a-full-unpickler": ("training.py", """
        import functools
        import torch

        def save_checkpoint(model, optimizer, iteration, out):
            torch.save({"model": model.state_dict(), "iteration": iteration}, out)

        def load_checkpoint(src, model, optimizer):
            load = torch.load
            a = torch.load(src)
            b = torch.load(src, "cpu", weights_only=True, mmap=False)
            c = torch.load(src, weights_only=False)  # flag: 10.5
            d = load(src, map_location="cpu", weights_only=None)  # flag: 10.5
            e = torch.load(src, None, torch)  # flag: 10.5
            f = functools.partial(torch.load, weights_only=False)  # flag: 10.5
            g = torch.serialization.add_safe_globals([object])  # flag: 10.5
            return torch.load(src, **{"weights_only": False})  # flag: 10.5
    """),
    # validate's own import of torch is not one of its checks: refused outright, even for torch.erf
    "libraries-through-the-provided-validate": ("classic.py", """
        import os
        from minilm.course import validate
        from minilm.course.validate import torch as T  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
        from minilm.course.validate import check_last_dim

        def gelu(x):
            check_last_dim(x, x.shape[-1], "gelu", "d")
            return validate.torch.nn.functional.gelu(x)  # flag: 13.3

        def layer_norm(x, w, b, eps=1e-5):
            y = T.erf(x) + validate.torch.rsqrt(x) + T.Tensor.mean(x)  # flag: 13.1
            return T.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps)  # flag: 13.1

        def sinusoidal_positions(seq_len, d_model):
            return os.path.join("a", "b"), validate.torch.sys  # flag: 13.2
    """),
    "builtins-through-another-modules-class": ("classic.py", """
        from .linear import Linear
        from .swiglu import SwiGLU, silu

        def gelu(x):
            return Linear.F.gelu(x)  # flag: 13.3

        def layer_norm(x, w, b, eps=1e-5):
            y = silu(x) + Linear(2, 3).weight.sum() + SwiGLU.forward
            return SwiGLU.T.sys.modules  # flag: 13.1
    """),
    "builtins-under-other-names": ("classic.py", """
        import torch

        def layer_norm(x, weight, bias, eps=1e-5):
            return torch.native_layer_norm(x, (x.shape[-1],), weight, bias, eps)[0]  # flag: 13.1

        class LayerNorm(torch.nn.Module):
            def forward(self, x):
                y = torch.nn.InstanceNorm1d(1)(x[:, None])  # flag: 13.1
                return torch.native_group_norm, torch.nn.LazyBatchNorm1d  # flag: 13.1

        class ClassicBlock(torch.nn.Module):
            def forward(self, x, F={"f": torch.nn.functional}):  # flag: 13.5
                return F["f"].native_layer_norm(x), self.linear_q(x), x.w.linear_q  # flag: 13.5
    """),
    "linear-as-an-einops-layer": ("linear.py", """
        import torch
        from einops.layers.torch import EinMix

        def linear(x, weight):
            return torch.einsum("...i,oi->...o", x, weight)

        class Linear(torch.nn.Module):
            def __init__(self, in_features, out_features, device=None, dtype=None):
                super().__init__()
                self.mix = EinMix("b i -> b o", weight_shape="i o", i=in_features, o=out_features)  # flag: 1.2
    """),
    "cross-entropy-under-other-names": ("training.py", """
        import torch
        from torch import nn

        def cross_entropy(logits, targets):
            eye = torch.eye(logits.shape[-1])
            return torch.nn.functional.linear_cross_entropy(logits, eye, targets)  # flag: 10.1

        def save_checkpoint(model, optimizer, iteration, out):
            torch.serialization.save(model.state_dict(), out)  # flag: 10.5

        def load_checkpoint(src, model, optimizer):
            return torch.serialization.load(src)  # flag: 10.5
    """),
    "private-torch-module": ("rope.py", """
        import torch

        def rope(x, token_positions, theta=10000.0):
            return torch._VF.stack([x])  # flag: 5.1
    """),
}


# Honest code a student might write: every one must pass with no violation (the rule fails
# closed, so each honest variant missing from the list in minilm/course/rules/allowed.py shows here).
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
            return min_lr + (1 + math.cos(math.pi * (it - warmup_iters) / (cosine_cycle_iters - warmup_iters))) / 2 * (max_lr - min_lr)

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
            for name, child in list(model.named_children()):
                if isinstance(child, Linear):
                    model.add_module(name, Int8Linear.from_linear(child, per_channel))
                else:
                    quantize_model(child, per_channel)
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


def test_a_name_on_no_list_is_refused_with_the_list_file():
    # Fail closed: a name nobody listed is refused, with the list's file, even where no family applies.
    [v] = rules.scan("import torch\n\n\ndef rope(x, token_positions, theta=1.0):\n    return torch.brand_new_op(x)\n",
                     "minilm/rope.py")["5.1"]
    assert v.message == ("Task 5.1: your rope calls torch.brand_new_op, which is not on Task 5.1's list of allowed "
                         "operations (minilm/course/rules/allowed.py) (minilm/rope.py:5); "
                         "build it from the operations on that list")
    # a family's built-in that is on no list: the list's file and the family's advice
    [v] = rules.scan("import torch\n\n\ndef softmax(x, dim):\n    return torch.special.softmax(x, dim)\n",
                     "minilm/attention.py")["6.1"]
    assert v.message == ("Task 6.1: your softmax calls torch.special.softmax, which is not on Task 6.1's list of "
                         "allowed operations (minilm/course/rules/allowed.py) (minilm/attention.py:5); "
                         "build it from exp and sum")
    assert "minilm/course/rules/allowed.py" in rules.LIST_FILE and (tasks.ROOT / rules.LIST_FILE).is_file()


def _expected(source: str) -> set[tuple[str, int]]:
    return {(task, n) for n, line in enumerate(source.splitlines(), 1)
            for task in (re.search(r"# flag: ([\d. ]+)$", line) or [None, ""])[1].split()}


@pytest.mark.parametrize("name", CORPUS)
def test_shortcut_is_flagged_for_exactly_its_tasks(name):
    file, source = CORPUS[name]
    source = textwrap.dedent(source).lstrip("\n")
    found = rules.scan(source, f"minilm/{file}")
    module = file.removesuffix(".py")
    assert set(found) == {t.id for t in tasks.TASKS if t.module == module}
    got = {(v.task, v.line) for vs in found.values() for v in vs}
    messages = "\n".join(v.message for vs in found.values() for v in vs)
    assert got == _expected(source), messages


def test_a_task_is_judged_by_the_other_tasks_code_it_calls():
    # Found by a red team: Task 13.2 and RoPE forbid no built-in, so gelu (13.3) fetched
    # torch.nn.functional.gelu from sinusoidal_positions' default argument and earned its point.
    classic = textwrap.dedent("""
        import torch
        from .rope import rope_angles

        def sinusoidal_positions(seq_len, d_model, _act=torch.nn.functional.gelu):
            return _act if seq_len == -1 else torch.zeros(seq_len, d_model)

        def gelu(x):
            return sinusoidal_positions(-1, 0)(x)

        def layer_norm(x, weight, bias, eps=1e-5):
            return rope_angles(-1, 0)(x, x.shape[-1:], weight, bias, eps)

        class GeluFFN(torch.nn.Module):
            def forward(self, x):
                return gelu(x) + layer_norm(x, None, None)
    """)
    rope = textwrap.dedent("""
        import torch

        def rope_angles(token_positions, d_k, theta=10000.0):
            if d_k == 0:
                return torch.nn.functional.layer_norm
            return token_positions[..., None] * theta ** (-torch.arange(0, d_k, 2) / d_k)
    """)
    attention = textwrap.dedent("""
        import torch

        def softmax(x, dim):
            e = torch.exp(x - x.amax(dim, keepdim=True))
            return e / e.sum(dim, keepdim=True)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return softmax(q @ k.transpose(-1, -2), -1) @ v
    """)
    found = rules.scan_package({"classic": classic, "rope": rope, "attention": attention})
    lines = {(v.task, v.file, v.line) for vs in found.values() for v in vs}
    # GeluFFN (13.4) forbids activations, not norms: it reaches gelu's F.gelu, and layer_norm is its business
    assert lines == {("13.3", "minilm/classic.py", 5), ("13.1", "minilm/rope.py", 6),
                     ("13.4", "minilm/classic.py", 5)}, found
    assert "through your sinusoidal_positions (Task 13.2)" in found["13.3"][0].message
    # one module alone cannot see it
    assert not any(rules.scan(classic, "minilm/classic.py").values())
    # what the called task's own rules refuse costs that task alone, not every caller
    shortcut = attention.replace("e = torch.exp(x - x.amax(dim, keepdim=True))", "return torch.softmax(x, dim)")
    found = rules.scan_package({"attention": shortcut})
    assert [v.task for vs in found.values() for v in vs] == ["6.1"], found


def test_a_task_is_judged_by_the_provided_code_it_uses_from_another_module():
    # Found by a red team: ClassicConfig is provided but lives in the student's classic.py; a class
    # attribute ce = F.cross_entropy there (13.x forbid no loss) gave Task 10.1 its points.
    classic = textwrap.dedent("""
        import torch
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class ClassicConfig:
            d_model: int
            ce = torch.nn.functional.cross_entropy
    """)
    training = textwrap.dedent("""
        from .classic import ClassicConfig

        def cross_entropy(logits, targets):
            return ClassicConfig.ce(logits, targets)

        def clip_grad_norm(parameters, max_norm):
            return ClassicConfig(4).d_model
    """)
    found = rules.scan_package({"classic": classic, "training": training})
    # ClassicBlock and ClassicLM (13.5, 13.6) forbid softmax-like code, cross_entropy included, and use ClassicConfig too
    assert {(v.task, v.file, v.line) for vs in found.values() for v in vs} == {
        ("10.1", "minilm/classic.py", 8), ("13.5", "minilm/classic.py", 8), ("13.6", "minilm/classic.py", 8)}, found
    assert "through your ClassicConfig" in found["10.1"][0].message


def test_a_task_is_judged_by_the_code_that_defines_the_attributes_it_uses():
    # An object handed in (kv_cache) is out of the scan's sight, but its attributes' names are not:
    # KVCache (11.3 forbids nothing) keeps torch.softmax in self.f, and attention (6.3) calls it.
    generation = textwrap.dedent("""
        import torch

        class KVCache:
            def __init__(self):
                self.f = torch.softmax

            def update(self, k, v):
                return k, v
    """)
    attention = textwrap.dedent("""
        import torch

        class MultiHeadSelfAttention(torch.nn.Module):
            def forward(self, x, token_positions=None, kv_cache=None):
                k, v = kv_cache.update(x, x)
                return kv_cache.f(x @ k.transpose(-1, -2), -1) @ v
    """)
    # alone, f is a name nothing defines; with generation.py, KVCache defines it and 6.3 reaches its code
    [alone] = rules.scan(attention, "minilm/attention.py")["6.3"]
    assert (alone.line, alone.what.split(",")[0]) == (7, "kv_cache.f"), alone
    found = rules.scan_package({"generation": generation, "attention": attention})
    assert {(v.task, v.file, v.line) for vs in found.values() for v in vs} == {("6.3", "minilm/generation.py", 6)}, found
    assert "through your KVCache (Task 11.3)" in found["6.3"][0].message

def test_message_format():
    source = "import torch\n\n\ndef softmax(x, dim):\n    return torch.softmax(x, dim)\n"
    [v] = rules.scan(source, "minilm/attention.py")["6.1"]
    assert (v.task, v.file, v.line, v.what) == ("6.1", "minilm/attention.py", 5, "torch.softmax")
    assert v.message == ("Task 6.1: your softmax calls torch.softmax (minilm/attention.py:5); "
                         "build it from exp and sum")


def test_syntax_error_is_reported_with_file_and_line():
    source = "import torch\n\n\ndef softmax(x, dim):\n    return (x\n\ndef f(:\n"
    found = rules.scan(source, "minilm/attention.py")
    assert set(found) == {"6.1", "6.2", "6.3"}
    for task_id, [v] in found.items():
        assert v.message.startswith(f"Task {task_id}: your module has a syntax error")
        assert re.search(r"\(minilm/attention\.py:\d+\)", v.message), v.message
    assert rules.scan(b"\x00", "minilm/linear.py")["1.1"][0].what.startswith("a syntax error")


def test_every_forbidden_family_exists_and_task_names_are_unique():
    for t in tasks.TASKS:
        for family, advice in t.forbidden:
            assert family in rules.FAMILIES and advice, t.id
    names = [(t.module, n) for t in tasks.TASKS for n in t.names]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("task", [pytest.param(t, marks=pytest.mark.task(t.id), id=t.id) for t in tasks.TASKS])
def test_your_code_follows_the_from_scratch_rule(task):
    """Your code (the reference with --impl solutions) calls no built-in the task forbids."""
    broken = rules.violations_for(task.id)
    assert not broken, "\n".join(v.message for v in broken)


@pytest.mark.slow
def test_a_shortcut_fails_the_check_and_the_tests_with_one_line(tmp_path):
    """Through the real code path: a copy of the project whose attention.py calls torch.softmax."""
    root = tasks.ROOT
    for name in ("minilm", "tests"):
        shutil.copytree(root / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)
    (tmp_path / "minilm" / "attention.py").write_text(textwrap.dedent("""\
        import torch


        def softmax(x, dim):
            return torch.softmax(x, dim)
    """), encoding="utf-8")
    line = ("Task 6.1: your softmax calls torch.softmax (minilm/attention.py:5); build it from exp and sum")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONWARNINGS": "ignore", "COLUMNS": "300"}
    env.pop("MINILM_IMPL", None)

    check = subprocess.run([sys.executable, "-m", "minilm", "check", "6.1"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 1 and check.stdout.strip() == f"✗ {line}", check.stdout + check.stderr

    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_attention.py", "--task", "6.1", "-q", "-rf", "-p", "no:xdist",
         "-p", "no:nbval", "-p", "no:randomly", "-o", "console_output_style=classic"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    failures = re.findall(r"^FAILED \S+ - (.*)$", tests.stdout, flags=re.M)
    assert failures and " passed" not in tests.stdout.splitlines()[-1], tests.stdout[-3000:]
    assert all(message == line for message in failures), failures
