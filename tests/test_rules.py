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

        def linear(x, weight, F=torch.nn.functional):  # flag: 1.1 1.2
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
    # ---------------------------------------------------------------- found by the fourth red team
    # a class pattern reads attributes by keyword (and by __match_args__ for positional parts)
    "match-class-pattern-attributes": ("attention.py", """
        from torch import Tensor

        class _Scores(Tensor):
            __match_args__ = ("softmax",)  # flag: 6.1 6.2 6.3

        def softmax(x, dim):
            match x:
                case Tensor(softmax=sm):  # flag: 6.1 6.2 6.3
                    return sm(dim)
                case _Scores(sm):  # flag: 6.1
                    return sm(dim)
                case int(n) | [n, *_] | {"k": n}:
                    return n
    """),
    "match-class-pattern-reaches-globals": ("training.py", """
        import torch

        def _library_adamw():
            match torch.optim.Optimizer:
                case object(__init__=object(__globals__={"torch": library})):  # flag: 10.4
                    match library:
                        case object(optim=object(AdamW=real)):  # flag: 10.3 10.4
                            return real

        class AdamW(torch.optim.Optimizer):
            def step(self, closure=None):
                return _library_adamw()(self.param_groups).step()
    """),
    # a method called through its class gets anything as self; super() follows the instance's class
    "self-of-a-method-called-through-its-class": ("training.py", """
        import torch
        from torch import nn

        class _Reduce(nn.Module):
            def forward(self, dim):
                return self.logsumexp(dim)  # flag: 10.1

        def cross_entropy(logits, targets):
            return _Reduce.forward(logits, -1).mean()
    """),
    "super-of-a-class-mixed-into-a-tensor": ("attention.py", """
        import torch
        from torch import nn

        class _Normalizer(nn.Module):
            def normalized(self, dim):
                return super().softmax(dim)  # flag: 6.1 6.2 6.3

        class _Scores(_Normalizer, torch.Tensor):
            pass

        def scaled_dot_product_attention(q, k, v, mask=None):
            return (q @ k.transpose(-2, -1)).as_subclass(_Scores).normalized(-1) @ v
    """),
    # a parameter named like a refused built-in elsewhere does not make the built-in the student's
    "refused-builtins-shadowed-elsewhere": ("attention.py", """
        def _train_mode(module, eval=False, getattr=None):
            return module.train(not eval), getattr

        def softmax(x, dim):
            e = getattr(x, "exp")  # resolved while aliases are read: getattr is Python's there
            return getattr(x, "soft" + "max")(dim)  # flag: 6.1

        def scaled_dot_product_attention(q, k, v, mask=None):
            return eval("torch.nn.functional.scaled_dot_product_attention")(q, k, v)  # flag: 6.2
    """),
    # an import is judged where it is, and a name bound to different things is no alias
    "local-import-under-a-helpers-alias": ("attention.py", """
        import torch

        def _scores(q, k):
            attend = torch.matmul
            return attend(q, k.transpose(-2, -1))  # flag: 6.1 6.2 6.3

        class MultiHeadSelfAttention(torch.nn.Module):
            def forward(self, x):
                from torch.nn.functional import scaled_dot_product_attention as attend  # flag: 6.3
                return attend(x, x, x)  # flag: 6.3
    """),
    "local-import-shadows-another-tasks-name": ("attention.py", """
        import torch

        def scaled_dot_product_attention(q, k, v, mask=None):
            return q

        class MultiHeadSelfAttention(torch.nn.Module):
            def forward(self, x):
                from torch.nn.functional import scaled_dot_product_attention  # flag: 6.3
                return scaled_dot_product_attention(x, x, x)  # flag: 6.3
    """),
    "local-import-of-the-tasks-own-name": ("training.py", """
        def cross_entropy(logits, targets):
            from torch.nn.functional import cross_entropy  # flag: 10.1
            return cross_entropy(logits, targets)  # flag: 10.1
    """),
    # a family's built-in as a value can be filed anywhere and used by any task of the module
    "builtin-filed-by-another-tasks-decorator": ("training.py", """
        import torch

        _KIT = {}

        def _keep(**tools):
            _KIT.update(tools)
            return lambda f: f

        def cross_entropy(logits, targets):
            return _KIT["loss"](logits, targets) + _KIT["lse"](-1)

        @_keep(loss=torch.nn.functional.cross_entropy)  # flag: 10.1
        def save_checkpoint(model, optimizer, iteration, out):
            _KIT["lse"] = model.logsumexp  # flag: 10.1
            # handed to _keep's lambda, save_checkpoint's code may run for any task of the module
            torch.save(model.state_dict(), out)  # flag: 10.1 10.2 10.3 10.4
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
            def normalized(self):  # (made by torch's metaclass: module-level code)
                return self.softmax(-1)  # flag: 6.1 6.2 6.3

        class Plain(torch.nn.Module):
            def forward(self, x):
                return self.weight @ x

        class Deeper(Plain):
            def forward(self, x):
                return self.softmax(x) + super().forward(x)  # flag: 6.1 6.2 6.3

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
            return obj.lr_scheduler.LambdaLR  # flag: 10.3 10.4

        class AdamW:
            def step(self, closure=None):
                return self.backend.optim.AdamW(self.param_groups).step()  # flag: 10.3 10.4
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

        class Linear(nn.Linear):  # flag: 1.1 1.2
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

        class RMSNorm(nn.RMSNorm):  # flag: 3.1 3.2
            def forward(self, x):  # (a library's class may call its methods as it makes it: module-level code)
                return torch.nn.functional.layer_norm(x, x.shape[-1:])  # flag: 3.1 3.2
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
            return torch.optim.lr_scheduler.CosineAnnealingLR  # flag: 10.3 10.4

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
        from . import linear as L  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
        from .linear import Linear

        F = G = torch.nn.functional
        nn_, f_ = torch.nn, torch.nn.functional

        def gelu(x, t=torch):  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
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
                return torch.native_group_norm, torch.nn.LazyBatchNorm1d  # flag: 13.1 13.5 13.6

        class ClassicBlock(torch.nn.Module):
            def forward(self, x, F={"f": torch.nn.functional}):  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
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
    # An alias binding's annotation runs at module level: F: exec(…) = torch.nn.functional ran unscanned.
    "code-in-an-alias-annotation": ("attention.py", """
        import torch
        F: exec("import os") = torch.nn.functional  # flag: 6.1 6.2 6.3

        def softmax(x, dim):
            return x
    """),
    # ---------------------------------------------------------------- found by the fifth red team
    # A class body's bindings are attributes (Box.T), which no alias follows: a module stored there, then
    # operator.attrgetter("nn.functional.rms_norm")(Box.T), reached any built-in by a string (34 points).
    "modules-stored-in-a-class-body": ("rmsnorm.py", """
        import dataclasses
        import operator
        import torch

        class Box:
            T = torch  # flag: 3.1 3.2
            OP: object = operator  # flag: 3.1 3.2
            import os as OS  # flag: 3.1 3.2
            from torch.nn import functional  # flag: 3.1 3.2

        @dataclasses.dataclass
        class Fields:
            T: object = torch  # flag: 3.1 3.2

        Box.attrgetter = None

        def rms_norm(x, weight, eps=1e-5):
            return Box.OP.attrgetter("nn.functional.rms_norm")(Box.T)(x, x.shape[-1:], weight, eps)

        class RMSNorm(torch.nn.Module):
            F = torch.nn.functional  # flag: 3.1 3.2

            def forward(self, x):
                return self.F.rms_norm(x, x.shape[-1:], self.weight)  # flag: 3.2
    """),
    # A storage's .type("operator.x") imports operator, and its AttributeError holds it in .obj: any module
    # by a string, attrgetter then any built-in; a name the code defines never makes obj or a storage known.
    "a-module-by-a-string-through-a-storage": ("attention.py", """
        import torch

        class Box:
            obj = None
            attrgetter = None

        def lookup(dotted):
            try:
                torch.zeros(1).untyped_storage().type(dotted + ".zzz")  # flag: 6.1
            except AttributeError as e:
                return e.obj  # flag: 6.1

        def softmax(x, dim):
            return lookup("operator").attrgetter("softmax")(lookup("torch"))(x, dim)
    """),
    # Python reads some dunders it finds bound: a dataclass execs its __annotations__' keys (a field
    # named '"\n code\n #' ran code at import), and a module's __builtins__ answers every unbound name.
    "code-through-names-python-reads": ("attention.py", """
        import dataclasses
        import torch.nn.functional as __builtins__  # flag: 6.1 6.2 6.3

        @dataclasses.dataclass
        class Hole:
            __annotations__ = {'"\\n Box.f = 1\\n #': int}  # flag: 6.1 6.2 6.3

        def stable(x, dim):
            return softmax(x, dim)
    """),
    # A method called through its class takes any object as self (a generator, whose frame holds the
    # builtins): self's attributes are checked like any other's, and a method whose decorator is not
    # a plain one (static = staticmethod) has no self at all. A seventh red team earned 6.1's points so.
    "any-object-as-self": ("attention.py", """
        import torch

        static = staticmethod


        class FrameReader(torch.nn.Module):
            gi_frame = f_builtins = None

            def frame(self):
                return self.gi_frame  # flag: 6.1

            @static  # not Python's staticmethod by its name: it may hand `names` out, to run anywhere
            def names(self):
                return self._parameters  # flag: 6.1 6.2 6.3

        def softmax(x, dim):
            b = FrameReader.names(FrameReader.frame(i for i in ()).f_builtins)  # flag: 6.1
            return b["getattr"](b["__import__"]("torch"), "softmax")(x, dim)
    """),
    # functools.wraps copies attributes named by strings (F.relu's __globals__ is F's namespace), and a
    # class's __setattr__ receives them; updated=("__globals__",) pours F's names into the module. The
    # seventh red team earned 15 points on 3.1, 10.1, 10.4, 1.1, 2.1 and 4.1 so. Python calls a dunder
    # method a class defines, or reads a dunder name however it is bound, with its own arguments.
    "attributes-copied-by-name": ("rmsnorm.py", """
        import functools

        import torch


        class Found:
            seen = {}

            def __setattr__(self, name, value):  # flag: 3.1
                self.seen[name] = value

        class __builtins__:  # flag: 3.1 3.2
            pass

        def rms_norm(x, weight, eps=1e-5):
            found = Found()
            functools.wraps(torch.nn.functional.relu, assigned=("__globals__",), updated=())(found)  # flag: 3.1
            return found.seen["__globals__"]["rms_norm"](x, (x.shape[-1],), weight, eps)

        Made = type("Made", (), {"__getattr__": print})  # flag: 3.1 3.2
        functools.wraps(torch.nn.functional.relu, assigned=(), updated=("__globals__",))(rms_norm)  # flag: 3.1 3.2
        try:
            pass
        except ValueError as __builtins__:  # flag: 3.1 3.2
            pass
    """),
    # minilm hands out an exercise module's name as the function of that name (minilm.rope is rope),
    # so importing the module reached a task that forbids nothing (5.1), whose code holds the built-in.
    # An eighth red team earned 10 points on 3.1, 6.1 and 10.1 so. A storage's type imports by a string.
    "a-module-that-is-a-function": ("attention.py", """
        from minilm import rope as rotary  # flag: 6.1 6.2 6.3

        def softmax(x, dim):
            x.storage_type()(4).type("operator")  # flag: 6.1
            return rotary(x, dim)  # flag: 6.1
    """),
    # What runs when the module is imported (defaults, decorators, bases, class bodies) runs for every
    # task: 13.2's default filled a list 13.3 read, and a walrus or a class body's global rebound 13.3's
    # name. The eighth red team earned 13.3's point with F.gelu both ways.
    "code-that-runs-on-import": ("classic.py", """
        import torch

        shelf = []

        def gelu(x):
            return shelf[0](x)

        def sinusoidal_positions(n, d, stash=shelf.append(torch.nn.functional.gelu)):  # flag: 13.3 13.4 13.5 13.6
            return torch.zeros(n, d)

        def layer_norm(x, weight, bias, eps=1e-5, z=(gelu := torch.sigmoid)):  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
            return x

        class LayerNorm(torch.nn.Module):
            global gelu
            gelu = torch.nn.functional.silu  # flag: 13.1 13.2 13.3 13.4 13.5 13.6
    """),
    # torch.load reached through getattr is still a pickler's call: its options are checked.
    "pickler-options-through-getattr": ("training.py", """
        import torch

        def save_checkpoint(model, optimizer, iteration, out):
            torch.save(model.state_dict(), out)

        def load_checkpoint(src, model, optimizer):
            return getattr(torch, "load")(src, pickle_module=None)  # flag: 10.5
    """),
}


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
    # GeluFFN (13.4) forbids activations, not norms: it reaches gelu's F.gelu, and layer_norm is its business;
    # F.gelu as a default is a value any task of classic.py may use: the blocks (13.5, 13.6) pay too
    assert lines == {("13.3", "minilm/classic.py", 5), ("13.1", "minilm/rope.py", 6),
                     ("13.4", "minilm/classic.py", 5), ("13.5", "minilm/classic.py", 5),
                     ("13.6", "minilm/classic.py", 5)}, found
    assert "through your rope (Task 5.1)" in found["13.1"][0].message
    # one module alone sees the default, a value, but not rope.py's layer_norm
    alone = rules.scan(classic, "minilm/classic.py")
    assert {(v.task, v.line) for vs in alone.values() for v in vs} == {("13.3", 5), ("13.4", 5), ("13.5", 5),
                                                                        ("13.6", 5)}, alone
    # what the called task's own rules refuse costs every caller whose rules refuse it too: 6.2's attention
    # does not get a built-in softmax for free because 6.1 already pays for it
    shortcut = attention.replace("e = torch.exp(x - x.amax(dim, keepdim=True))", "return torch.softmax(x, dim)")
    found = rules.scan_package({"attention": shortcut})
    assert [v.task for vs in found.values() for v in vs] == ["6.1", "6.2"], found
    assert "reaches torch.softmax through your softmax (Task 6.1)" in found["6.2"][0].message


def test_a_sacrificed_task_launders_no_built_in_for_its_callers():
    # Found by the ninth red team (14/14 points on 10_training for 1 point lost): 4.1's silu, worth one point,
    # runs CrossEntropyLoss, clip_grad_norm_ and AdamW for the training tasks that call it with a keyword.
    swiglu = textwrap.dedent("""
        import torch

        def silu(x, *how):
            if how and how[0] == "ce":
                return torch.nn.CrossEntropyLoss()(x, how[1])
            if how and how[0] == "clip":
                return torch.nn.utils.clip_grad_norm_(x, how[1])
            if how and how[0] == "adamw":
                return torch.optim.AdamW(how[1])
            return x.sigmoid().mul(x)
    """)
    training = textwrap.dedent("""
        import torch
        from .swiglu import silu

        def cross_entropy(logits, targets):
            return silu(logits, "ce", targets)

        def clip_grad_norm(parameters, max_norm):
            return silu(list(parameters), "clip", max_norm)

        class AdamW(torch.optim.Optimizer):
            def step(self, closure=None):
                silu(None, "adamw", self.param_groups).step()
    """)
    found = rules.scan_package({"swiglu": swiglu, "training": training})
    lines = {t: {(v.file, v.line) for v in found[t]} for t in ("4.1", "10.1", "10.2", "10.4")}
    assert lines == {t: {("minilm/swiglu.py", n) for n in (6, 8, 10)} for t in lines}, found
    assert "reaches torch.nn.CrossEntropyLoss through your silu (Task 4.1)" in found["10.1"][0].message


def test_a_provided_value_carries_no_built_in_to_another_module():
    # Found by the ninth red team (5/5 points on 6.1 and 6.2): NS_COEFFICIENTS, a provided value of
    # modern.py, made by a class whose body holds the built-ins, or a plain tuple holding one.
    attention = textwrap.dedent("""
        from .modern import NS_COEFFICIENTS

        def softmax(x, dim):
            return NS_COEFFICIENTS.values(x, dim)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return NS_COEFFICIENTS[3](q, k, v, attn_mask=mask)
    """)
    in_a_class = textwrap.dedent("""
        import torch

        class _Coefficients(tuple):
            values = torch.softmax

        NS_COEFFICIENTS = _Coefficients((3.4445, -4.7750, 2.0315))
    """)
    in_a_tuple = "import torch\nNS_COEFFICIENTS = (3.4, -4.7, 2.0, torch.nn.functional.scaled_dot_product_attention)\n"
    for modern, line in ((in_a_class, 5), (in_a_tuple, 2)):
        found = rules.scan_package({"modern": modern, "attention": attention})
        assert {(v.file, v.line) for v in found["6.1"]} == {("minilm/modern.py", line)}, found
        assert "through your NS_COEFFICIENTS" in found["6.1"][0].message
    assert {(v.file, v.line) for v in found["6.2"]} == {("minilm/modern.py", 2)}, found
    # and a jaxtyping annotation holds types, never a module
    [v] = rules.scan("import torch\nfrom jaxtyping import Float\ndef softmax(x: Float[torch.nn.functional, '...'], "
                     "dim):\n    return x\n", "minilm/attention.py")["6.1"]
    assert "the module torch.nn.functional as a value" in v.message, v


def test_a_class_body_or_a_decorator_hands_out_no_built_in():
    # Found by the tenth red team (22 points on 1.1-6.2 and 10.1, no task given up): functions defined in a
    # class body that forbids nothing (Tokenizer, 9.3) escape to module scope, by `global` or by a class-body
    # statement that files them; another task of the module (train_bpe, 9.2) hands them out. They, and a
    # function given to a decorator of the student's, are module-level code: every task of the module runs them.
    dispatch = "\ndef train_bpe(text, num_merges, op=None):\n    return OPS[op] if op else []\n"
    by_global = textwrap.dedent("""
        import dataclasses
        import torch

        @dataclasses.dataclass
        class Tokenizer:
            vocab: dict
            global _sdpa

            def _sdpa(*a):
                return torch.nn.functional.scaled_dot_product_attention(*a)
            OPS = {"sdpa": _sdpa}
    """).replace("    OPS = {", "OPS = {")
    by_shelf = textwrap.dedent("""
        import dataclasses
        import torch
        OPS = {}

        @dataclasses.dataclass
        class Tokenizer:
            vocab: dict

            def _sdpa(*a):
                return torch.nn.functional.scaled_dot_product_attention(*a)
            OPS.update(sdpa=_sdpa)
    """)
    attention = textwrap.dedent("""
        from .bpe import train_bpe

        def scaled_dot_product_attention(q, k, v, mask=None):
            return train_bpe("", 0, op="sdpa")(q, k, v, mask)
    """)
    for bpe, line in ((by_global, 11), (by_shelf, 11)):
        found = rules.scan_package({"bpe": bpe + dispatch, "attention": attention})
        assert {(v.file, v.line) for v in found["6.2"]} == {("minilm/bpe.py", line)}, found
        assert "through your bpe.py's top-level code" in found["6.2"][0].message  # and through train_bpe
    # a decorator of the student's gets the function: softmax's torch.softmax runs for 6.2 without its name
    registry = textwrap.dedent("""
        import torch
        REGISTRY = {}

        def _register(f):
            REGISTRY[f.__name__] = f
            return f

        @_register
        def softmax(x, dim):
            return torch.softmax(x, dim)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return REGISTRY["softmax"](q @ k.transpose(-1, -2), -1) @ v
    """)
    found = rules.scan(registry, "minilm/attention.py")
    assert {(t, v.line) for t in ("6.1", "6.2") for v in found[t]} == {("6.1", 11), ("6.2", 11)}, found
    # Python's and the libraries' decorators hand nothing out
    kept = registry.replace("@_register", "@torch.no_grad()")
    assert {v.line for v in rules.scan(kept, "minilm/attention.py")["6.2"]} == set()


def test_a_task_is_judged_by_the_top_level_code_of_every_module_its_module_imports():
    # Found by the eleventh red team (17 points on 3.1, 6.1, 6.2, 10.1, 10.2 and 10.4 for 9.1's 3): importing
    # data.py runs its top-level code in the importer's tasks' processes, where it replaced their functions
    # or planted a method on torch.Tensor. Now every task of the importer runs that code, directly or not.
    data = textwrap.dedent("""
        import torch
        from . import attention
        attention.softmax = torch.softmax
        type(torch.empty(0)).sm = lambda x, dim: torch.special.softmax(x, dim)

        def get_batch(dataset, batch_size, context_length, device):
            return dataset
    """)
    attention = textwrap.dedent("""
        def softmax(x, dim):
            return x.sm(dim)
    """)
    for importer in ("from .data import get_batch\n", "import minilm.data\n", "from .rope import rope\n"):
        found = rules.scan_package({"data": data, "rope": "from . import data\n", "attention": attention + importer})
        # (import minilm.data, a module, and rope's `from . import data` are refused on their own lines too)
        assert {(v.file, v.line) for v in found["6.1"]} >= {("minilm/data.py", n) for n in (3, 4, 5)}, found
        assert "reaches torch.softmax through your data.py's top-level code" in str([v.message for v in found["6.1"]])


def test_a_task_name_imported_in_a_class_body_is_named():
    # Found by the twelfth red team (22 points on 1.1-10.4 for 13.3's 1): an import in a class body binds
    # no alias, so _Box.f called 11.1's next_token_probs (torch.softmax, on 11.1's list) unseen.
    generation = "import torch\n\ndef next_token_probs(logits, t=1.0):\n    return torch.softmax(logits, -1)\n"
    for how in ("from minilm.generation import next_token_probs as f", "from .generation import next_token_probs as f"):
        attention = f"def softmax(x, dim):\n    return _Box.f(x)\n\nclass _Box:\n    {how}\n"
        found = rules.scan_package({"generation": generation, "attention": attention})
        assert [(v.file, v.line) for v in found["6.1"]] == [("minilm/generation.py", 4)], found
        assert "through your next_token_probs (Task 11.1)" in found["6.1"][0].message


def test_a_class_that_python_makes_by_calling_its_methods_is_top_level_code():
    # Found by the thirteenth red team (6.2's 3 points, 10.1's 3, 13.3's 1): making an Enum calls its
    # __init__ for each member and its _generate_next_value_ for each auto(), at import, so a method body
    # named by one task that forbids nothing (10.3, 14.5) filled a global that 10.1 or attention.py read.
    # Such a class's methods, like a metaclass's class's, are module-level code: every task of the module
    # and of its importers runs them.
    training = textwrap.dedent("""
        import enum
        import torch

        def cross_entropy(logits, targets):
            return LOSS(logits, targets)

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
            return max_lr if Phase.WARMUP else min_lr

        class Phase(enum.Enum):
            WARMUP = 1

            def __init__(self, number):
                global LOSS
                LOSS = lambda logits, targets: torch.nn.functional.cross_entropy(logits, targets)
    """)
    found = rules.scan_package({"training": training})
    assert [(v.file, v.line) for v in found["10.1"]] == [("minilm/training.py", 16)], found
    modern = textwrap.dedent("""
        import enum
        import torch
        KERNELS = {}

        class Cap(enum.Enum):
            def _generate_next_value_(name, start, count, last_values):
                KERNELS["attend"] = lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v)
                return count

            TANH = enum.auto()

        def softcap(logits, cap):
            return cap * torch.tanh(logits / cap) if Cap.TANH else logits

        def matched_relu2_d_ff(swiglu_d_ff, kernel=None):
            return KERNELS[kernel] if kernel else round(1.5 * swiglu_d_ff)
    """)
    attention = textwrap.dedent("""
        from .modern import matched_relu2_d_ff

        def scaled_dot_product_attention(q, k, v, mask=None):
            return matched_relu2_d_ff(0, "attend")(q, k, v)
    """)
    found = rules.scan_package({"modern": modern, "attention": attention})
    assert {(v.file, v.line) for v in found["6.2"]} == {("minilm/modern.py", 8)}, found
    assert "through your modern.py's top-level code" in str([v.message for v in found["6.2"]])
    # A metaclass's class: the same. nn.Module's classes and base-less ones call none of their methods.
    meta = textwrap.dedent("""
        import torch
        OPS = {}

        class _Meta(type):
            def __init__(cls, name, bases, ns):
                ns["f"]()

        class Phase(metaclass=_Meta):
            def f():
                OPS["ce"] = lambda a, b: torch.nn.functional.cross_entropy(a, b)

        def cross_entropy(logits, targets):
            return OPS["ce"](logits, targets)

        def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
            return max_lr if Phase else min_lr
    """)
    assert [v.line for v in rules.scan(meta, "minilm/training.py")["10.1"]] == [11]
    plain = meta.replace("class _Meta(type)", "class _Base(torch.nn.Module)")
    for base in ("", "(torch.nn.Module)", "(_Base)"):
        assert rules.scan(plain.replace("(metaclass=_Meta)", base), "minilm/training.py")["10.1"] == [], base
    # a name bound twice is neither class for sure: an Enum may stand behind the plain one's name
    twice = "import enum\n" + plain.replace("(metaclass=_Meta)", "(_Base)") + "\nclass _Base(enum.Enum):\n    pass\n"
    assert [v.line for v in rules.scan(twice, "minilm/training.py")["10.1"]] == [12]


def test_reading_an_attribute_of_the_students_code_at_the_top_level_runs_it():
    # Found by the fourteenth red team (13 points on 6.1, 6.2, 6.3 and 10.1, no task given up): `warmed =
    # Tokenizer.warm` read like an alias, which costs nobody, but a classmethod over a property runs its getter
    # (9.3's code, which forbids nothing) there, at import: it filled the dict that attention.py's tasks read.
    # A name bound to the student's code is module-level code, which every task of the module runs.
    bpe = textwrap.dedent("""
        import torch

        class Tokenizer:
            @classmethod
            @property
            def warm(cls):
                from minilm.attention import MultiHeadSelfAttention
                MultiHeadSelfAttention.kernels.update(sm=torch.softmax)
                return 0
    """)
    attention = textwrap.dedent("""
        import torch
        from .bpe import Tokenizer
        KERNELS = {}

        def softmax(x, dim):
            return KERNELS["sm"](x, dim)

        class MultiHeadSelfAttention(torch.nn.Module):
            kernels = KERNELS

        warmed = Tokenizer.warm
    """)
    found = rules.scan_package({"bpe": bpe, "attention": attention})
    assert {(v.file, v.line) for v in found["6.1"]} == {("minilm/bpe.py", 9)}, found
    assert "through your Tokenizer (Task 9.3)" in found["6.1"][0].message
    # a library's name bound at the top level is still an alias, judged where it is used
    assert rules.scan_package({"bpe": bpe, "attention": attention.replace("Tokenizer.warm", "torch.softmax")})[
        "6.1"] == [], "an unused alias costs nothing"


def test_a_task_runs_the_provided_objects_its_check_builds_from_its_module():
    # Found by the fifteenth red team (13.5's and 13.6's 8 points): the check builds ClassicBlock(ClassicConfig(…))
    # from the student's file, where ClassicConfig returned a carrier whose __call__ ran F.layer_norm and F.sdpa;
    # only 13.2 (which forbids nothing) named ClassicConfig, and calling a value reads no attribute.
    classic = textwrap.dedent("""
        import torch

        class _Carrier:
            def __call__(self, block, x):
                return torch.nn.functional.layer_norm(x, x.shape[-1:])

        def ClassicConfig(**fields):
            return _Carrier()

        def sinusoidal_positions(seq_len, d_model):
            return ClassicConfig and torch.zeros(seq_len, d_model)

        class ClassicBlock(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config

            def forward(self, x, token_positions=None):
                return self.config(self, x)
    """)
    found = rules.scan_package({"classic": classic})
    assert [(v.file, v.line) for v in found["13.5"]] == [("minilm/classic.py", 6)], found
    assert "through your ClassicConfig" in found["13.5"][0].message


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
    # ClassicBlock and ClassicLM (13.5, 13.6) forbid softmax-like code, cross_entropy included, and use
    # ClassicConfig too
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
    assert {(v.task, v.file, v.line) for vs in found.values()
            for v in vs} == {("6.3", "minilm/generation.py", 6)}, found
    assert "through your KVCache (Task 11.3)" in found["6.3"][0].message
    # the same through self: KVCache sets the attention's own attribute, which its forward calls
    generation = generation.replace("self.f = torch.softmax", "self.owner = None").replace(
        "return k, v", "self.owner.g = torch.softmax\n        return k, v")
    attention = attention.replace("kv_cache.f(", "self.g(")
    found = rules.scan_package({"generation": generation, "attention": attention})
    assert {(v.task, v.file, v.line) for vs in found.values()
            for v in vs} == {("6.3", "minilm/generation.py", 9)}, found
    # and a tensor's own methods are not replaced on an object it was handed
    [v] = rules.scan("def update(k):\n    k.transpose = lambda *a: k\n", "minilm/generation.py")["11.3"]
    assert (v.line, v.verb) == (2, "assigns to"), v

def test_attributes_planted_on_a_type_reach_the_code_that_reads_them():
    # Found by a red team: data.py's module-level code (Task 9.1 forbids nothing) planted torch.softmax
    # on torch.Tensor under a name a tensor has (training, a writable one), and softmax called x.training(dim).
    data = textwrap.dedent("""
        import torch

        _tensor_class = type(torch.zeros(()))
        _tensor_class.training = lambda self, dim: torch.softmax(self, dim)
        _tensor_class.fresh = lambda self, dim: torch.softmax(self, dim)

        class _Plant(torch.nn.Module):
            def plant(self):
                self.exp = lambda: torch.softmax(self, -1)

        def get_batch(dataset, batch_size, context_length, device="cpu"):
            _Plant.plant(torch.Tensor)
            return dataset
    """)
    attention = textwrap.dedent("""
        from .data import get_batch

        def softmax(x, dim):
            return x.training(dim)

        def scaled_dot_product_attention(q, k, v, mask=None):
            return q.fresh(-1) @ v

        class MultiHeadSelfAttention:
            def forward(self, x):
                return x.exp()
    """)
    found = rules.scan_package({"data": data, "attention": attention})
    lines = {(v.task, v.file, v.line) for vs in found.values() for v in vs}
    assert {("6.1", "minilm/data.py", 5), ("6.2", "minilm/data.py", 6), ("6.3", "minilm/data.py", 10)} <= lines, found
    assert all(task in ("6.1", "6.2", "6.3", "9.1") for task, _, _ in lines), found


def test_setattr_with_a_computed_name_points_at_add_module():
    # setattr(parent, name, child) over named_children is common, but a computed name can set anything
    # (setattr(type(x), "ex" + "p", torch.softmax)): still refused, with the module's own way to do it.
    source = textwrap.dedent("""
        def quantize_model(model, per_channel=True):
            for _, parent in list(model.named_modules()):
                for name, child in list(parent.named_children()):
                    setattr(parent, name, child)
            return model
    """)
    [v] = rules.scan(source, "minilm/quantization.py")["12.3"]
    assert v.line == 5 and "add_module" in v.advice, v.message


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


def test_a_module_that_does_not_parse_costs_its_own_tasks_only():
    # The check cells scan the whole package: a syntax error in one module must not crash the
    # scan of the others (it did, and every check cell of a submission with one broken file errored).
    broken = "import torch\n\ndef rms_norm(x, weight, eps=1e-5):\n    return (\n"
    found = rules.scan_package({"rmsnorm": broken, "linear": "def linear(x, weight):\n    return x @ weight.T\n"})
    assert {t for t, v in found.items() if v} == {"3.1", "3.2"}
    assert all("syntax error" in v[0].message and "minilm/rmsnorm.py:" in v[0].message for t, v in found.items() if v)
