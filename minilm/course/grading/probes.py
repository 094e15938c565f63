"""Grading probes (provided): what the grader runs each task's code on, and what it collects.

A probe, for one task:

    collect(m, case)      calls the task's code `m.<name>` on one case and returns plain data
    invariant(got, case)  optional: a check that needs no reference (initialization statistics,
                          random windows), for the outputs in `free` that may differ from the reference's

The cases themselves (plain data: tensors, numbers, str) are the instructor's
(solutions/probe_cases.py): the notebook's inputs, and hidden ones drawn per submission.
`collect` runs twice on the same cases: in the sandboxed worker with the student's code, and in
the trusted grader with the reference. Only the second side compares (solutions/grading/judge.py),
so nothing in this file, which the worker can read and patch, decides a point.

Outputs are flat dicts of str → tensor | int | float | bool | str | list of those, so they
cross the process boundary through torch.save / torch.load(weights_only=True) and nothing else.
"""

from __future__ import annotations

import io
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

# ---------------------------------------------------------------- the contract's shapes (public: see the docstrings)


def attention_shapes(d: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    return {f"{prefix}{n}.weight": (d, d) for n in ("q_proj", "k_proj", "v_proj", "output_proj")}


def block_shapes(d: int, d_ff: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    return {f"{prefix}ln1.weight": (d,), **attention_shapes(d, f"{prefix}attn."), f"{prefix}ln2.weight": (d,),
            f"{prefix}ffn.w1.weight": (d_ff, d), f"{prefix}ffn.w2.weight": (d, d_ff), f"{prefix}ffn.w3.weight": (d_ff, d)}


def lm_shapes(vocab: int, d: int, layers: int, d_ff: int) -> dict[str, tuple[int, ...]]:
    shapes = {"token_embeddings.weight": (vocab, d)}
    for i in range(layers):
        shapes |= block_shapes(d, d_ff, f"layers.{i}.")
    return shapes | {"ln_final.weight": (d,), "lm_head.weight": (vocab, d)}


def weights(g: torch.Generator, shapes: dict[str, tuple[int, ...]], scale: float = 0.3) -> dict[str, torch.Tensor]:
    """Random weights for a state_dict; norm gains near 1 so a swapped or missing norm shows."""
    out = {}
    for name, shape in shapes.items():
        w = torch.randn(shape, generator=g)
        out[name] = 1 + 0.3 * w if "ln" in name.split(".")[-2] else w * scale
    return out


def _randn(g, *shape, scale=1.0, dtype=torch.float32):
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _int(g, lo, hi) -> int:
    return int(torch.randint(lo, hi + 1, (), generator=g))


def _keys(module) -> list[str]:
    return sorted(module.state_dict())


def _load(module, state: dict) -> None:
    module.load_state_dict({k: v.clone() for k, v in state.items()})


# ---------------------------------------------------------------- probes


@dataclass(frozen=True)
class Probe:
    task: str
    collect: Callable[[object, dict], dict]
    free: tuple[str, ...] = ()  # outputs judged by `invariant`, not against the reference
    invariant: Callable[[dict, dict], str | None] | None = None
    atol: float = 1e-5
    rtol: float = 1e-4


PROBES: dict[str, Probe] = {}


def probe(task: str, **kw) -> None:
    PROBES[task] = Probe(task, **kw)


# 1: Linear ----------------------------------------------------------------------------------

def _linear_collect(m, c):
    return {"y": m.linear(c["x"], c["w"])}


probe("1.1", collect=_linear_collect)


def _init_stats(w: torch.Tensor, std: float, what: str) -> str | None:
    w = w.detach().double()
    if w.abs().max() > 3 * std * 1.0001:
        return (f"{what}: some weights lie beyond ±3 std: use a truncated normal cut at a=-3·std, b=3·std "
                f"(trunc_normal_'s a and b are absolute)")
    got = w.std().item()
    if abs(got / (0.9866 * std) - 1) >= 0.05:  # a normal truncated at ±3σ has std 0.9866σ
        return f"{what}: the weights' std is {got:.3g}, expected about {0.9866 * std:.3g} (std {std:.3g} truncated at ±3 std)"
    if abs(w.mean().item()) >= 0.05 * std:
        return f"{what}: the weights' mean should be about 0"
    return None


def _Linear_collect(m, c):
    torch.manual_seed(c["seed"])
    big = m.Linear(c["init_in"], c["init_out"])
    layer = m.Linear(c["d_in"], c["d_out"])
    out = {"keys": _keys(layer), "weight_shape": list(layer.weight.shape), "init": big.weight.detach().clone()}
    _load(layer, {"weight": c["w"]})
    out["y"] = layer(c["x"])
    out["learnable"] = [p.requires_grad for p in layer.parameters()]
    out["dtype"] = str(m.Linear(4, 3, dtype=torch.float64).weight.dtype)
    return out


probe("1.2", collect=_Linear_collect, free=("init",),
       invariant=lambda got, c: _init_stats(got["init"], math.sqrt(2 / (c["init_in"] + c["init_out"])),
                                            f"Linear({c['init_in']}, {c['init_out']}) init"))


# 2: Embedding -------------------------------------------------------------------------------

probe("2.1", collect=lambda m, c: {"y": m.embedding(c["ids"], c["w"])})


def _Embedding_collect(m, c):
    torch.manual_seed(c["seed"])
    emb = m.Embedding(c["vocab"], c["d"])
    out = {"keys": _keys(emb), "weight_shape": list(emb.weight.shape), "init": emb.weight.detach().clone()}
    _load(emb, {"weight": c["w"]})
    out["y"] = emb(c["ids"])
    out["y"].pow(2).sum().backward()
    out["grad"] = emb.weight.grad
    return out


probe("2.2", collect=_Embedding_collect, free=("init",),
       invariant=lambda got, c: _init_stats(got["init"], 1.0, f"Embedding({c['vocab']}, {c['d']}) init"))


# 3: RMSNorm ---------------------------------------------------------------------------------

probe("3.1", collect=lambda m, c: {"y": m.rms_norm(c["x"], c["w"], **({"eps": c["eps"]} if "eps" in c else {}))})


def _RMSNorm_collect(m, c):
    norm = m.RMSNorm(c["d"], **({"eps": c["eps"]} if "eps" in c else {}))
    out = {"keys": _keys(norm), "weight0": norm.weight.detach().clone()}
    _load(norm, {"weight": c["w"]})
    out["y"] = norm(c["x"])
    out["learnable"] = [p.requires_grad for p in norm.parameters()]
    return out


probe("3.2", collect=_RMSNorm_collect)


# 4: SwiGLU ----------------------------------------------------------------------------------

probe("4.1", collect=lambda m, c: {"y": m.silu(c["x"])})


probe("4.2", collect=lambda m, c: {"y": m.swiglu(c["x"], c["w1"], c["w2"], c["w3"])})


def _SwiGLU_collect(m, c):
    ffn = m.SwiGLU(c["d"], c["f"])
    out = {"keys": _keys(ffn), "shapes": [list(v.shape) for _, v in sorted(ffn.state_dict().items())]}
    _load(ffn, c["state"])
    out["y"] = ffn(c["x"])
    return out


probe("4.3", collect=_SwiGLU_collect)


# 5: RoPE ------------------------------------------------------------------------------------

def _rope_collect(m, c):
    kw = {"theta": c["theta"]} if "theta" in c else {}
    if "x" not in c:
        return {"angles": m.rope_angles(c["pos"], c["d_k"], **kw)}
    return {"y": m.rope(c["x"], c["pos"], **kw)}


# Angles computed in float32 (as common as float64) are off by ~1e-7·p rad, so rotated outputs at
# positions in the thousands differ from the reference's by up to ~5e-4: within atol, unlike any mistake.
probe("5.1", collect=_rope_collect, atol=1e-3)


def _RoPE_collect(m, c):
    module = m.RotaryPositionalEmbedding(c["theta"], c["d_k"], c["max_len"])
    return {"keys": _keys(module), "y": module(c["x"], c["pos"])}


probe("5.2", collect=_RoPE_collect, atol=1e-3)


# 6: attention -------------------------------------------------------------------------------

probe("6.1", collect=lambda m, c: {"y": m.softmax(c["x"], dim=c["dim"])})  # release: not a task (m.softmax is the code under test)


probe("6.2", collect=lambda m, c: {"y": m.scaled_dot_product_attention(c["q"], c["k"], c["v"], *([c["mask"]] if "mask" in c else []))})


def _layer_collect(module, c) -> dict:
    """A layer's state_dict names, then its output on x (and positions, when given) with the case's weights."""
    out = {"keys": _keys(module)}
    _load(module, c["state"])
    out["y"] = module(c["x"], c["pos"]) if "pos" in c else module(c["x"])
    return out


probe("6.3", atol=1e-5, collect=lambda m, c: _layer_collect(
    m.MultiHeadSelfAttention(c["d"], c["heads"], *([c["max_len"], c["theta"]] if "theta" in c else [])), c))


# 7–8: block and LM --------------------------------------------------------------------------

probe("7.1", atol=1e-4, collect=lambda m, c: _layer_collect(
    m.TransformerBlock(c["d"], c["heads"], c["d_ff"], c["max_len"], c["theta"]), c))


def _lm_collect(m, c):
    torch.manual_seed(0)
    lm = m.TransformerLM(*c["config"])
    out = {"keys": _keys(lm), "parameters": sum(p.numel() for p in lm.parameters()),
           "tied": lm.lm_head.weight.data_ptr() == lm.token_embeddings.weight.data_ptr()}
    _load(lm, c["state"])
    out["logits"] = lm(c["ids"])
    return out


probe("8.1", collect=_lm_collect, atol=1e-4)


# 9: get_batch -------------------------------------------------------------------------------

def _get_batch_collect(m, c):
    import numpy as np

    data = c["data"].numpy().astype(c["np_dtype"])
    torch.manual_seed(c["seed"])
    x, y = m.get_batch(data, c["batch"], c["ctx"], "cpu")
    torch.manual_seed(c["seed"])
    x2, _ = m.get_batch(data, c["batch"], c["ctx"], "cpu")
    starts = []
    if c.get("small"):
        small = np.arange(c["ctx"] + 3, dtype=np.int64)
        torch.manual_seed(c["seed"])
        starts = sorted(set(m.get_batch(small, 300, c["ctx"], "cpu")[0][:, 0].tolist()))
    return {"x": x, "y": y, "again": x2, "starts": starts}


def _get_batch_invariant(got, c) -> str | None:
    x, y = got["x"], got["y"]
    n = len(c["data"])
    if tuple(x.shape) != (c["batch"], c["ctx"]) or tuple(y.shape) != (c["batch"], c["ctx"]):
        return f"x and y must have shape (batch_size, context_length) = ({c['batch']}, {c['ctx']})"
    if x.dtype != torch.long or y.dtype != torch.long:
        return f"x and y must be int64 (torch.long), got {x.dtype} and {y.dtype}"
    off = c["data"][0].item()  # data is off, off+1, …: a window's first token names its start
    start = x[:, 0] - off
    if not bool(((x[:, 1:] - x[:, :-1]) == 1).all()):
        return "each row of x must be consecutive tokens dataset[i : i + context_length]"
    if not torch.equal(y, x + 1):
        return "y must be x shifted by one: y[b, t] = dataset[i + t + 1]"
    if bool((start < 0).any()) or bool((start > n - c["ctx"] - 1).any()):
        return "a window starts outside 0 … len(dataset) − context_length − 1"
    if not torch.equal(got["again"], x):
        return "two calls after the same torch.manual_seed gave different batches: draw the starts with torch.randint"
    if c.get("small") and got["starts"] != [0, 1, 2]:
        return (f"with {c['ctx'] + 3} tokens and context_length {c['ctx']} the valid starts are 0, 1 and 2, "
                f"got starts {got['starts']}")
    return None


probe("9.1", collect=_get_batch_collect, free=("x", "y", "again", "starts"), invariant=_get_batch_invariant)


# 9.2: train_bpe -----------------------------------------------------------------------------

def _train_bpe_collect(m, c):
    vocab, merges = m.train_bpe(c["text"], c["num_merges"])
    # bytes as hex strings: outputs cross to the grader as plain data (tensors, numbers, str, lists)
    return {"merges": [[left.hex(), right.hex()] for left, right in merges],
            "vocab": [[i, vocab[i].hex()] for i in sorted(vocab)]}


probe("9.2", collect=_train_bpe_collect)


# 10: training -------------------------------------------------------------------------------

probe("10.1", collect=lambda m, c: {"loss": m.cross_entropy(c["logits"], c["targets"])}, atol=1e-4)


def _clip_collect(m, c):
    params = [nn.Parameter(p.clone()) for p in c["params"]]
    for p, gr in zip(params, c["grads"]):
        p.grad = gr.clone()
    no_grad = nn.Parameter(torch.ones(3))
    norm = m.clip_grad_norm(params + [no_grad], c["max_norm"])
    return {"norm": torch.as_tensor(norm, dtype=torch.float32).reshape(()),
            "grads": [p.grad for p in params], "no_grad_untouched": no_grad.grad is None}


probe("10.2", collect=_clip_collect)


probe("10.3", collect=lambda m, c: {"lr": torch.tensor([float(m.lr_cosine_schedule(it, **c["args"])) for it in c["its"]],
                                                         dtype=torch.float64)}, atol=1e-9, rtol=1e-9)


def _adamw_collect(m, c):
    groups = [[nn.Parameter(p.clone()) for p in grp] for grp in c["init"]]
    opt = m.AdamW([{"params": ps, **hp} for ps, hp in zip(groups, c["group_hparams"])], **c["hparams"])
    flat = [p for ps in groups for p in ps]
    for step_grads in c["grads"]:
        for p, gr in zip(flat, step_grads):
            p.grad = gr.clone()
        opt.step()
    out = {"params": [p.detach().clone() for p in flat]}
    p = nn.Parameter(torch.ones(3))
    opt = m.AdamW([p], lr=0.1, weight_decay=0.0)
    opt.param_groups[0]["lr"] = 0.0
    p.grad = torch.ones(3)
    opt.step()
    out["lr_zero_step"] = p.detach().clone()
    return out


probe("10.4", collect=_adamw_collect, atol=1e-6)


def _ckpt_collect(m, c):
    def setup(seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))  # release: not a task (a model to checkpoint)
        return model, torch.optim.AdamW(model.parameters(), lr=0.01)  # release: not a task (an optimizer state to checkpoint)

    def step(model, opt, x):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    model, opt = setup(c["seed"])
    for x in c["xs"]:
        step(model, opt, x)
    if c["to_path"]:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.pt")
            m.save_checkpoint(model, opt, c["iteration"], path)
            model2, opt2 = setup(c["seed"] + 1)
            iteration = m.load_checkpoint(path, model2, opt2)
    else:
        buffer = io.BytesIO()
        m.save_checkpoint(model, opt, c["iteration"], buffer)
        buffer.seek(0)
        model2, opt2 = setup(c["seed"] + 1)
        iteration = m.load_checkpoint(buffer, model2, opt2)
    out = {"iteration": iteration if isinstance(iteration, int) else repr(type(iteration)),
           "restored": [t.detach().clone() for t in model2.state_dict().values()]}
    step(model2, opt2, c["more"])
    out["resumed"] = [t.detach().clone() for t in model2.state_dict().values()]
    return out


probe("10.5", collect=_ckpt_collect)


# 11: generation -----------------------------------------------------------------------------

def _probs_collect(m, c):
    return {"probs": m.next_token_probs(c["logits"], **c["kw"])}


probe("11.1", collect=_probs_collect)


class ToyLM(nn.Module):
    """A fixed stand-in language model for the generate probes, so 11.2 is graded on generate
    alone, without a cache. Each position's logits mix a token table with the whole window, so
    cropping the context to context_length matters."""

    def __init__(self, table: torch.Tensor, context_length: int):
        super().__init__()
        self.table, self.context_length = nn.Parameter(table.clone()), context_length

    def forward(self, token_ids: torch.Tensor, kv_cache=None) -> torch.Tensor:
        if kv_cache is not None:
            raise TypeError("generate probes: this stand-in model has no KV cache (use_cache=False)")
        if token_ids.shape[-1] > self.context_length:
            raise ValueError(f"the model got {token_ids.shape[-1]} tokens, more than context_length {self.context_length}")
        rows = self.table.index_select(0, token_ids.reshape(-1)).reshape(*token_ids.shape, -1)
        return rows + 0.5 * rows.cumsum(-2) / torch.arange(1, token_ids.shape[-1] + 1).unsqueeze(-1)


def _generate_collect(m, c):
    model = ToyLM(c["table"], c["ctx"])
    gen = torch.Generator().manual_seed(c["gen_seed"]) if "gen_seed" in c else None
    prompt = c["prompt"].tolist() if c.get("as_list") else c["prompt"]
    out = m.generate(model, prompt, c["n"], use_cache=False, generator=gen, **c["kw"])
    return {"ids": out}


probe("11.2", collect=_generate_collect)


def _kv_collect(m, c):
    cache = m.KVCache()
    out = {"len0": len(cache)}
    cache.update(c["k1"], c["v1"])
    k, v = cache.update(c["k2"], c["v2"])
    out |= {"k": k, "v": v, "len": len(cache)}
    d, heads, ctx = c["attn_config"]
    attn = m.MultiHeadSelfAttention(d, heads, ctx, 10000.0)
    _load(attn, c["attn_state"])
    x, start, chunks, kv = c["x"], 0, [], m.KVCache()
    with torch.no_grad():
        for n in c["chunks"]:  # the attention's own cache path, token_positions=None
            chunks.append(attn(x[..., start : start + n, :], kv_cache=kv))
            start += n
    out |= {"attn_cached": torch.cat(chunks, dim=-2), "attn_len": len(kv)}
    lm = m.TransformerLM(*c["config"])
    _load(lm, c["state"])
    ids = c["ids"]
    with torch.no_grad():
        full = lm(ids)
        kv = lm.make_kv_cache()
        steps = [lm(ids[:, : c["prefill"]], kv_cache=kv)]
        steps += [lm(ids[:, t : t + 1], kv_cache=kv) for t in range(c["prefill"], ids.shape[1])]
    out |= {"full": full, "cached": torch.cat(steps, dim=1), "layer_len": len(kv[0])}
    out["generated"] = m.generate(lm, ids[0, :3], c["n"], temperature=0.0, use_cache=True)
    return out


probe("11.3", collect=_kv_collect, atol=1e-4)


# 12: quantization ---------------------------------------------------------------------------

def _quantize_collect(m, c):
    q, scale = m.quantize_int8(c["w"], per_channel=c["per_channel"])
    # dequantize_int8 on the case's own int8 values and scales, so a wrong scale shape above costs it nothing
    return {"q": q, "scale": scale, "back": m.dequantize_int8(c["q"], c["q_scale"])}


probe("12.1", collect=_quantize_collect)


class _Weight(nn.Module):
    """A stand-in linear layer, just a weight (out_features, in_features): 12.2 is graded on Int8Linear alone."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.clone())


def _state(module) -> dict:
    """A module's state_dict names and dtypes, and the values of its int8 weight and scale (or "missing")."""
    state = module.state_dict()
    return {"keys": sorted(state), "dtypes": [str(state[k].dtype) for k in sorted(state)],
            "parameters": len(list(module.parameters())),
            **{k: state[k] if k in state else "missing" for k in ("weight_int8", "scale")}}


def _int8_linear_collect(m, c):
    d_out, d_in = c["w"].shape
    layer = m.Int8Linear.from_linear(_Weight(c["w"]), per_channel=c["per_channel"])
    out = _state(layer) | {"y": layer(c["x"])}
    fresh = m.Int8Linear(d_in, d_out, per_channel=c["per_channel"])
    fresh.load_state_dict(layer.state_dict(), strict=False)  # extra or missing keys are judged from "keys"
    out["y_loaded"] = fresh(c["x"])
    return out


probe("12.2", collect=_int8_linear_collect)


def _quantize_model_collect(m, c):
    lm = m.TransformerLM(*c["config"])
    _load(lm, c["state"])
    got = m.quantize_model(lm, per_channel=c["per_channel"])
    state = lm.state_dict()
    out = {"in_place": got is lm, "keys": sorted(state), "dtypes": [str(state[k].dtype) for k in sorted(state)],
           "floats": [state[k] for k in sorted(state) if state[k].is_floating_point() and not k.endswith(".scale")]}
    with torch.no_grad():
        out["logits"] = lm(c["ids"])
    return out


probe("12.3", collect=_quantize_model_collect, atol=1e-4)


# 13: the classic Transformer ----------------------------------------------------------------

def _load_matching(module, state: dict) -> None:
    """Load the case's weights that `module` has: a module with a missing or extra part (a
    LayerNorm without bias, a post-norm LM with ln_final) still runs, so its outputs can name
    that mistake; its state_dict keys, collected first, already differ."""
    own = module.state_dict()
    module.load_state_dict({k: v.clone() for k, v in state.items() if k in own}, strict=False)


def _LayerNorm_collect(m, c):
    norm = m.LayerNorm(c["d"], **({"eps": c["eps"]} if "eps" in c else {}))
    out = {"keys": _keys(norm), "init": [t.detach().clone() for _, t in sorted(norm.state_dict().items())]}
    _load_matching(norm, c["state"])
    out["y"] = norm(c["x"])
    return out


probe("13.1", collect=lambda m, c: ({"y": m.layer_norm(c["x"], c["w"], c["b"], **({"eps": c["eps"]} if "eps" in c else {}))}
                                    if "w" in c else _LayerNorm_collect(m, c)))


probe("13.2", collect=lambda m, c: {"pe": m.sinusoidal_positions(c["seq"], c["d"])[c["rows"]]}, atol=1e-4)


probe("13.3", collect=lambda m, c: {"y": m.gelu(c["x"])})


probe("13.4", collect=lambda m, c: _layer_collect(m.GeluFFN(c["d"], c["f"]), c))


probe("13.5", atol=1e-4, collect=lambda m, c: _layer_collect(m.ClassicBlock(m.ClassicConfig(**c["config"])), c))


def _classic_lm_collect(m, c):
    torch.manual_seed(0)
    lm = m.ClassicLM(m.ClassicConfig(**c["config"]))
    out = {"keys": _keys(lm), "parameters": sum(p.numel() for p in lm.parameters()),
           "shared_head": lm.lm_head.weight is lm.token_embeddings.weight}
    _load_matching(lm, c["state"])
    out["logits"] = lm(c["ids"])
    return out


probe("13.6", collect=_classic_lm_collect, atol=1e-4)
