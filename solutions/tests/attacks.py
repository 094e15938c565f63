"""Attacks on the from-scratch rule, and honest code it must leave alone (instructor tests' data).

CORPUS holds every attack module the earlier, static rule was tested on, kept as regression inputs: a
module file of the student's package, with `# flag: <task ids>` on the lines the old rule flagged. Under
the rule that watches what runs, each flagged task must still earn nothing (solutions/tests/test_rule.py).
"""

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

# ---------------------------------------------------------------- attacks on the rule that watches what runs
# (name, module, task, the task's body in place of the reference's, code at the module's top (after its
# imports of torch), whether the module keeps `from __future__ import annotations`). Each must cost its task.
_F = "torch.nn.functional"
_ADAMW = ("for group in self.param_groups:\n"
          "    inner = OPT(group['params'], lr=group['lr'], betas=group['betas'], eps=group['eps'],\n"
          "                weight_decay=group['weight_decay'])\n"
          "    inner.step()")
RUNTIME_ATTACKS = [
    # the fourth red team: a name bound in a module-level annotation, which Python evaluates at import
    *[(f"annotation-{t}", m, t, body, f"import torch\n_: [F := {_F}] = None\nOPT: [torch.optim.AdamW] = None\n", False)
      for m, t, body in [
          ("linear", "1.1", "return F.linear(x, weight)"),
          ("rmsnorm", "3.1", "return F.rms_norm(x, x.shape[-1:], weight, eps)"),
          ("training", "10.1", "return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))"),
          ("training", "10.2", "return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)"),
          ("training", "10.4", _ADAMW.replace("OPT", "torch.optim.AdamW")),
      ]],
    # the fourth red team: getattr's third argument, at the top level and inside the task's own body
    ("getattr-default-top-level-6.1", "attention", "6.1", "return F(x, dim=dim)",
     f"import torch\nF = getattr(torch, 'no_such_name', {_F}.softmax)\n", True),
    ("getattr-default-in-the-body-6.2", "attention", "6.2",
     f"return getattr(q, 'no_such_name', {_F}.scaled_dot_product_attention)(q, k, v, attn_mask=mask)", "", True),
    ("getattr-default-in-the-body-10.4", "training", "10.4",
     _ADAMW.replace("OPT", "getattr(torch, 'no_such_name', torch.optim.AdamW)"), "", True),
    ("exec-a-string-6.1", "attention", "6.1", "return exec('import torch') or x.softmax(dim)", "", True),
    # other classes of the same kind, which no report named
    ("map-calls-from-c-1.1", "linear", "1.1", f"return list(map({_F}.linear, [x], [weight]))[0]", "", True),
    ("partial-6.1", "attention", "6.1", f"return __import__('functools').partial({_F}.softmax, dim=dim)(x)", "",
     True),
    ("functools-partial-6.1", "attention", "6.1", f"return PARTIAL({_F}.softmax, dim=dim)(x)",
     "import torch\nfrom functools import partial as PARTIAL\n", True),
    ("tensor-method-6.1", "attention", "6.1", "return x.softmax(dim)", "", True),
    ("default-argument-6.1", "attention", "6.1", "return _soft(x, dim)",
     "import torch\ndef _soft(x, dim, f=torch.softmax):\n    return f(x, dim)\n", True),
    ("staticmethod-in-a-class-body-6.1", "attention", "6.1", "return _K.f(x, dim)",
     "import torch\nclass _K:\n    f = staticmethod(torch.softmax)\n", True),
    ("aten-op-6.1", "attention", "6.1", "return torch.ops.aten._softmax(x, dim, False)", "", True),
    ("normalize-does-the-division-6.1", "attention", "6.1",
     f"e = torch.exp(x - x.amax(dim, keepdim=True))\nreturn {_F}.normalize(e, p=1, dim=dim)", "", True),
    ("sorted-key-runs-it-from-c-6.1", "attention", "6.1",
     f"return sorted([x], key=lambda t: 0)[0] * 0 + max([x], key=lambda t: {_F}.softmax(t, dim).sum())"
     f".softmax(dim)", "", True),
    ("vmap-6.1", "attention", "6.1", f"return torch.vmap(lambda r: {_F}.softmax(r, -1))(x.movedim(dim, -1))"
     ".movedim(-1, dim)", "", True),
    ("compile-6.1", "attention", "6.1", "return torch.compile(torch.exp)(x) / torch.exp(x).sum(dim, keepdim=True)",
     "", True),
    ("exception-init-runs-it-10.1", "training", "10.1",
     "try:\n    raise _Loss(logits, targets)\nexcept _Loss as e:\n    return e.value",
     f"import torch\nclass _Loss(ValueError):\n    def __init__(self, logits, targets):\n        super().__init__('x')\n"
     f"        self.value = {_F}.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))\n", True),
    ("renorm-clips-10.2", "training", "10.2",
     "grads = [p.grad for p in parameters if p.grad is not None]\n"
     "norm = torch.stack([g.norm() for g in grads]).norm()\n"
     "for g in grads:\n    g.copy_(g.renorm(2, 0, 1e9) * min(1.0, max_norm / (float(norm) + 1e-6)))\n"
     "return norm", "", True),
    ("switches-the-recording-off-6.1", "attention", "6.1",
     "torch.sys.setprofile(None)\nreturn list(map(torch.softmax, [x], [dim]))[0]", "", True),
    # the fifth red team, against the rule that watches what runs
    ("tensor-subclass-method-6.1", "attention", "6.1", "return x.as_subclass(Scores).softmax(dim).as_subclass(torch.Tensor)",
     'import torch\nclass Scores(torch.Tensor):\n    """Attention scores."""\n', True),
    ("tensor-subclass-logsumexp-10.1", "training", "10.1",
     "lse = logits.as_subclass(Logits).logsumexp(-1).as_subclass(torch.Tensor)\n"
     "return (lse - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean()",
     'import torch\nclass Logits(torch.Tensor):\n    """Logits."""\n', True),
    ("tensor-subclass-renorm-10.2", "training", "10.2",
     "grads = [p.grad for p in parameters if p.grad is not None]\n"
     "norm = torch.stack([g.norm() for g in grads]).norm()\n"
     "for g in grads:\n    g.copy_(g.as_subclass(G).renorm(2, 0, 1e9).as_subclass(torch.Tensor) * "
     "min(1.0, max_norm / (float(norm) + 1e-6)))\nreturn norm",
     'import torch\nclass G(torch.Tensor):\n    """A gradient."""\n', True),
    ("a-private-name-claimed-as-own-10.4", "training", "10.4", "return torch._fused_adamw_",
     "import torch\ndef _fused_adamw_():\n    pass\n", True),
    ("flash-attention-by-a-private-name-6.2", "attention", "6.2",
     "return torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]",
     "import torch\ndef _scaled_dot_product_flash_attention_for_cpu():\n    pass\n", True),
    ("string-formatter-looks-names-up-1.1", "linear", "1.1",
     "return string.Formatter().get_field('0.linear', [torch.nn.functional], {})[0](x, weight)",
     "import torch\nimport string\n", True),
    ("getattr-as-a-value-1.1", "linear", "1.1", "look = getattr\nreturn look(torch.nn.functional, 'linear')(x, weight)",
     "", True),
    ("a-string-annotation-names-a-private-module-1.1", "linear", "1.1", "return x @ weight.T",
     "import torch\ndef _hook(x: 'torch._C._get_function_stack_at'):\n    pass\n", True),
    # the sixth red team: code torch calls back while it has paused the mode, and code the hook itself would run
    ("map-inside-an-index-torch-reads-6.1", "attention", "6.1",
     "return _quietly(lambda: list(map(torch.softmax, [x], [dim]))[0])",
     "import torch\nclass _Rows:\n    def __init__(self, job):\n        self.job, self.seen, self.out = job, [], []\n"
     "    def __len__(self):\n        return 1\n    def __getitem__(self, i):\n        self.seen.append(i)\n"
     "        if len(self.seen) == 2:\n            self.out.append(self.job())\n        raise IndexError(i)\n"
     "def _quietly(job):\n    rows = _Rows(job)\n    try:\n        torch.zeros(1)[rows]\n    except IndexError:\n"
     "        pass\n    return rows.out[0]\n", True),
    ("a-metaclass-hash-the-hook-would-run-6.1", "attention", "6.1",
     "out = []\n_Unwatched.jobs.append(lambda: out.append(list(map(torch.softmax, [x], [dim]))[0]))\n"
     "_Box().get(0)\nhash(_Box)\nreturn out[0]",
     "import torch\nclass _Unwatched(type):\n    jobs = []\n    def __hash__(cls):\n        while _Unwatched.jobs:\n"
     "            _Unwatched.jobs.pop()()\n        return 7\nclass _Box(dict, metaclass=_Unwatched):\n    pass\n", True),
    # the seventh red team: a built-in handed to a torch function, which calls it with the mode paused
    ("partial-handed-to-a-loss-6.1", "attention", "6.1",
     "xt = x.movedim(dim, -1)\nshape = xt.shape\nn = shape[-1]\nrows = xt.reshape(-1, n, 1)\n"
     "q = torch.ones(rows.shape[0], 1, 1, dtype=x.dtype)\neye = torch.eye(n, dtype=x.dtype).expand(rows.shape[0], n, n)\n"
     "f = functools.partial(torch.nn.functional.scaled_dot_product_attention, value=eye, scale=1.0)\n"
     "out = torch.nn.functional.triplet_margin_with_distance_loss(q, rows, torch.zeros_like(rows), distance_function=f, "
     "margin=1.0, reduction='none')\nreturn (out - 1.0 + 1.0 / n).reshape(shape).movedim(-1, dim)",
     "import functools\nimport torch\n", True),
    ("lr-scheduler-10.3", "training", "10.3",
     "import torch\nopt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)\n"
     "return max_lr if it < 0 else torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0).get_last_lr()[0] * 0 + "
     "(it / warmup_iters * max_lr if it < warmup_iters else min_lr if it > cosine_cycle_iters else min_lr + 0.5 * "
     "(1 + math.cos(math.pi * (it - warmup_iters) / (cosine_cycle_iters - warmup_iters))) * (max_lr - min_lr))",
     "", True),
    # the eighth red team: lazy objects that torch iterates with the mode paused, and torch's way to files
    ("map-handed-to-backward-6.1", "attention", "6.1", "return _from_c(torch.softmax, x, dim)",
     "import torch\ndef _from_c(fn, *args):\n    got = []\n    anchor = torch.zeros((), requires_grad=True)\n"
     "    try:\n        anchor.backward(inputs=map(got.append, map(fn, *[[a] for a in args])))\n"
     "    except (TypeError, RuntimeError):\n        pass\n    return got[0]\n", True),
    ("defaultdict-handed-to-a-torch-function-1.1", "linear", "1.1",
     "out = []\nd = collections.defaultdict(functools.partial(lambda: out.append(torch.nn.functional.linear(x, weight))))\n"
     "try:\n    torch.zeros(1).new_tensor(d)\nexcept Exception:\n    pass\nreturn out[0] if out else x @ weight.T",
     "import collections\nimport functools\nimport torch\n", True),
    ("a-tensor-class-whose-property-is-a-builtin-6.1", "attention", "6.1",
     "return torch.exp(x.as_subclass(_Scores)).as_subclass(torch.Tensor) * 0 + x.as_subclass(_Scores).rows",
     "import functools\nimport torch\nclass _Scores(torch.Tensor):\n    rows = property(functools.partial(torch.softmax, dim=-1))\n",
     True),
    # the ninth red team: a C callable as an autograd node's hook, run by the engine inside a backward pass
    ("a-node-prehook-runs-it-in-backward-6.1", "attention", "6.1", "return _offstage(torch.softmax, x, dim)",
     "import functools\nimport torch\ndef _offstage(fn, *args):\n    found = []\n"
     "    anchor = torch.zeros((), requires_grad=True)\n    y = anchor * 1\n"
     "    y.grad_fn.register_prehook(functools.partial(found.extend, map(fn, *[[a] for a in args])))\n"
     "    torch.autograd.grad(y, anchor)\n    return found[0]\n", True),
    ("a-module-backward-hook-6.1", "attention", "6.1",
     "m = torch.nn.Identity()\nfound = []\nm.register_full_backward_hook(functools.partial(_keep, found, x, dim))\n"
     "a = torch.zeros(1, requires_grad=True)\nm(a * 1).sum().backward()\nreturn found[0]",
     "import functools\nimport torch\ndef _keep(found, x, dim, *args):\n    found.extend(map(torch.softmax, [x], [dim]))\n",
     True),
    # the tenth red team: a tensor's hook table set as an attribute, filled after the setter was judged
    ("a-hook-table-set-as-an-attribute-6.1", "attention", "6.1", "return _through_backward(torch.softmax, x, dim)",
     "import functools\nimport torch\ndef _through_backward(fn, x, dim):\n"
     "    leaf = torch.zeros_like(x).requires_grad_()\n    hooks = {}\n    leaf._backward_hooks = hooks\n"
     "    hooks[0] = functools.partial(fn, dim=dim)\n    (leaf * 1).backward(x)\n    return leaf.grad\n", True),
    # the eleventh red team: code that torch's Python functions run with the mode paused, reached through what
    # they are handed (a tensor's own attributes, an instance attribute shadowing a method, the deepcopy memo, a
    # class that says it is numpy's int64), and a getattr done by functools.update_wrapper. Its thread started from
    # C and torch's code re-homed or run with other globals: test_rule.py's test_code_made_or_run_out_of_sight
    ("a-tensors-own-attribute-copied-by-deepcopy-6.1", "attention", "6.1",
     "box = _Box()\nsetattr(box, '__deep' + 'copy__', functools.partial(next, map(torch.softmax, [x], [dim])))\n"
     "carrier = x.detach().clone()\ncarrier.payload = box\nreturn copy.deepcopy(carrier).payload",
     "import copy\nimport functools\nimport torch\nclass _Box:\n    pass\n", True),
    ("an-instance-attribute-shadows-a-tensor-method-6.1", "attention", "6.1",
     "carrier = x.detach()[..., :1]\ncarrier.flip = functools.partial(next, map(torch.softmax, [x], [dim]))\n"
     "return reversed(carrier)", "import functools\nimport torch\n", True),
    ("a-deepcopy-memo-whose-contains-runs-a-builtin-6.1", "attention", "6.1",
     "found = []\nclass Memo(dict):\n    pass\n"
     "setattr(Memo, '__con' + 'tains__', functools.partial(next, map(found.append, map(torch.softmax, [x], [dim]))))\n"
     "copy.deepcopy(x.detach(), Memo())\nreturn found[0]", "import copy\nimport functools\nimport torch\n", True),
    ("a-class-that-says-it-is-numpys-int64-2.1", "embedding", "2.1",
     "found = []\nchain = functools.partial(next, map(found.append, map(torch.embedding, [weight], [token_ids])))\n"
     "spoof = type('int64', (np.int64,), {'__module__': 'numpy', '__index__': chain})\n"
     "try:\n    torch.zeros(spoof(0))\nexcept TypeError:\n    pass\nreturn found[0]",
     "import functools\nimport numpy as np\nimport torch\n", True),
    ("a-getattr-done-by-update-wrapper-1.1", "linear", "1.1",
     "catch, box = _Catch(), _Box()\nsetattr(box, 'functional', catch)\n"
     "functools.update_wrapper(box, torch.nn, assigned=(), updated=('functional',))\n"
     "return catch.value.linear(x, weight)",
     "import functools\nimport torch\nclass _Box:\n    pass\nclass _Catch:\n    def update(self, value):\n"
     "        self.value = value\n", True),
    ("torch-from-file-writes-a-file-6.1", "attention", "6.1",
     "torch.from_file('/tmp/minilm-attack.bin', shared=True, size=4, dtype=torch.uint8)\n"
     "e = torch.exp(x - x.amax(dim, keepdim=True))\nreturn e / e.sum(dim, keepdim=True)", "", True),
]

# ---------------------------------------------------------------- honest code the rule must leave alone
# (name, module, code appended at the module's end or (task, body): a task's body). Together, every task
# keeps its points.
HONEST = [
    ("namedtuple-of-hyperparameters", "training", """
from typing import NamedTuple


class Hyper(NamedTuple):
    beta1: float = 0.9
    beta2: float = 0.999


DEFAULTS = Hyper()
"""),
    ("exception-classes-with-init", "training", """
class CheckpointError(RuntimeError):
    def __init__(self, path):
        super().__init__(f"cannot read the checkpoint {path}")
        self.path = path
"""),
    ("an-exception-in-generation", "generation", """
class SamplingError(ValueError):
    def __init__(self, what):
        super().__init__(f"cannot sample: {what}")
"""),
    ("an-enum-and-a-dataclass", "generation", """
import dataclasses
import enum


class Strategy(enum.Enum):
    GREEDY = "greedy"
    SAMPLE = "sample"


@dataclasses.dataclass(frozen=True)
class Settings:
    strategy: Strategy = Strategy.SAMPLE
    top_k: int | None = None
"""),
    ("a-logsumexp-helper", "training", ("10.1", """
def logsumexp(z):
    m = z.amax(dim=-1, keepdim=True).detach()
    return m.squeeze(-1) + torch.log(torch.exp(z - m).sum(dim=-1))

picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
return (logsumexp(logits) - picked).mean()
""")),
    ("einsum-against-matmul", "linear", ("1.1", 'return torch.einsum("...i,oi->...o", x, weight)')),
    ("a-python-loop", "attention", ("6.1", """
exps = torch.exp(x - x.amax(dim=dim, keepdim=True).detach())
total = torch.zeros_like(exps.narrow(dim, 0, 1))
for piece in exps.split(1, dim=dim):
    total = total + piece
return exps / total
""")),
    ("a-helper-shared-across-modules", "swiglu", """
def shared_scale(x):
    return x * 1.0
"""),
    ("the-helper-used-from-another-module", "rmsnorm", ("3.1", """
from .swiglu import shared_scale

x32 = x.float()
inv_rms = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
return shared_scale(x32 * inv_rms * weight.float()).to(x.dtype)
""")),
    ("setattr-replaces-a-child", "quantization", ("12.3", """
for name, child in list(model.named_children()):
    if isinstance(child, Linear):
        setattr(model, name, Int8Linear.from_linear(child, per_channel))
    else:
        quantize_model(child, per_channel)
return model
""")),
    ("a-tensor-subclass-of-your-own", "attention", ("6.1", """
class Scores(torch.Tensor):
    def normalized(self, dim):
        exps = torch.exp(self - self.amax(dim=dim, keepdim=True).detach())
        return exps / exps.sum(dim=dim, keepdim=True)

return x.as_subclass(Scores).normalized(dim).as_subclass(torch.Tensor)
""")),
    ("idioms-the-lint-must-allow", "attention", """
try:
    import einops as _maybe_einops
except ImportError:
    _maybe_einops = None
from typing import Generator, Literal


def _mode(mode: Literal["train", "eval"] = "eval") -> str:
    return mode


def _describe(m) -> str:
    return m.__class__.__name__


def _rows(x: Float[Tensor, "input"]) -> Generator[Tensor, None, None]:
    yield from x


def _forget(module, name):
    delattr(module, name)


_ON_MPS = torch.backends.mps.is_available()
"""),
    ("a-numpy-generator", "data", """
_RNG = np.random.default_rng(0)
"""),
    ("constant-getattr-and-print", "embedding", ("2.1", """
rows = getattr(weight, "shape")[0]
assert rows == weight.shape[0]
return weight[token_ids]
""")),
    # what torch is handed as data: a deepcopy (its memo holds every object copied), numpy's numbers and arrays,
    # slices, Ellipsis, a torch.Size and a generator object of torch's
    ("data-torch-is-handed", "rmsnorm", ("3.1", """
import copy

import numpy as np

ms = x.float().pow(2).mean(dim=-1, keepdim=True)[..., :]
eps_t = copy.deepcopy(torch.as_tensor(np.float64(eps), dtype=torch.float32))
y = x.float() * torch.rsqrt(ms + eps_t + torch.as_tensor(np.zeros(1), dtype=torch.float32))
return (y * weight.float()).to(x.dtype).reshape(torch.Size(list(x.shape)))
""")),
]
