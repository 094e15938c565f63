"""Specs of notebooks 7–8: the Transformer block and language model (provided). See exercises/__init__.py."""

from __future__ import annotations

import torch
from torch import nn

from minilm.course.exercises import (
    Problem,
    Property,
    block_shapes,
    count,
    differs,
    first,
    gen,
    keys_problem,
    layers_of_their_own,
    learns,
    lm_parameter_count,
    lm_shapes,
    lm_state_dict_keys,
    load_state,
    module_contract,
    randn,
    spec,
    state_keys,
    weights,
)
from minilm.course.exercises.rope_attention import batch_rows_property, causal_property, layer_collect

PARALLEL_BLOCK = ("your block runs attention and the FFN side by side on the same x (x + attn(ln1(x)) + ffn(ln2(x))); "
                  "the block is sequential: h = x + attn(ln1(x)), then h + ffn(ln2(h)), so the FFN sees the "
                  "attention's "
                  "output")

def _block_inputs(m):
    block = m.TransformerBlock(32, 4, 48, 32, 10000.0)
    load_state(block, weights(75, block_shapes(32, 48)))
    x = randn(76, 2, 8, 32)
    changed = x.clone()
    changed[:, 5:] = randn(77, 2, 3, 32)
    return block, x, changed


def _lm_inputs(m):
    with torch.random.fork_rng(devices=[]):
        lm = m.TransformerLM(97, 32, 32, 2, 4, 48, 10000.0)
    load_state(lm, weights(78, lm_shapes(97, 32, 2, 48)))
    ids = torch.randint(0, 97, (2, 8), generator=gen(79))
    changed = ids.clone()
    changed[:, 5:] = (ids[:, 5:] + 1) % 97
    return lm, ids, changed


class _Cache:
    """A stand-in for a KVCache that holds `cached` positions: what a layer must hand on, untouched."""

    def __init__(self, cached: int = 0):
        self.cached = cached

    def __len__(self) -> int:
        return self.cached


class _Tap(nn.Module):
    """Records the arguments a submodule is called with and returns its first one: the module it replaces
    does not run, so only what was handed to it is judged."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[tuple, dict]] = []

    def forward(self, x, *args, **kwargs):
        self.calls.append((args, kwargs))
        return x


def _handed(call: tuple[tuple, dict], names: tuple[str, ...]) -> dict:
    """A call's arguments after x by name: positional ones in the order of `names`, then keywords."""
    args, kwargs = call
    return dict(zip(names, args)) | kwargs


def _block_hands_on(m):
    block, x, _ = _block_inputs(m)
    block._modules["attn"] = tap = _Tap()
    positions, cache = torch.tensor([0, 5, 1, 9, 2, 2, 7, 30]), _Cache()
    with torch.no_grad():
        block(x, positions, cache)
    if not tap.calls:
        return "block(x, token_positions, kv_cache) never called self.attn"
    got = _handed(tap.calls[0], ("token_positions", "kv_cache"))
    if got.get("kv_cache") is not cache:
        return "block(x, token_positions, kv_cache) called self.attn without that kv_cache"
    given = got.get("token_positions")
    if type(given) is not torch.Tensor or not torch.equal(given, positions):
        return "block(x, token_positions, kv_cache) called self.attn without those token_positions"
    return None


def _lm_hands_on(m):
    lm, ids, _ = _lm_inputs(m)
    taps = [_Tap() for _ in lm.layers]
    for i, tap in enumerate(taps):
        lm.layers._modules[str(i)] = tap
    caches = [_Cache(3) for _ in taps]  # 3 tokens already cached: the new ones are at positions 3 … 10
    with torch.no_grad():
        lm(ids, kv_cache=caches)
    for i, (tap, cache) in enumerate(zip(taps, caches)):
        if len(tap.calls) != 1:
            return f"with kv_cache given, layers[{i}] ran {len(tap.calls)} times, expected once"
        got = _handed(tap.calls[0], ("token_positions", "kv_cache"))
        if got.get("kv_cache") is not cache:
            return f"with kv_cache = [cache 0, cache 1], layers[{i}] was not handed cache {i}"
        given = got.get("token_positions")
        want = torch.arange(3, 3 + ids.shape[-1])
        if type(given) is not torch.Tensor or not torch.equal(given.reshape(-1)[-ids.shape[-1]:], want):
            shown_ = given.reshape(-1)[: ids.shape[-1]].tolist() if type(given) is torch.Tensor else given
            return (f"with 3 tokens already cached and 8 new ones, layers[{i}] got token_positions {shown_}, "
                    "expected 3 … 10")
    return None


def _block_uses_positions(m):
    block, x, _ = _block_inputs(m)
    d = differs(block(x, torch.tensor([0, 5, 1, 9, 2, 2, 7, 30])), block(x))
    return None if d else "positions [0, 5, 1, 9, 2, 2, 7, 30] and the default 0 … 7 give the same output"


def _block_identity(m):
    block, x, _ = _block_inputs(m)
    state = {k: torch.zeros_like(v) if k.endswith(("output_proj.weight", "w2.weight")) else v
             for k, v in block.state_dict().items()}
    load_state(block, state)
    d = differs(block(x), x)
    return d and f"with attn.output_proj and ffn.w2 at zero, the block's output and its input x: {d}"


def _block_attention_half(m):
    block, x, _ = _block_inputs(m)
    state = {k: torch.zeros_like(v) if k.endswith("w2.weight") else v for k, v in block.state_dict().items()}
    load_state(block, state)
    with torch.no_grad():
        y = block(x)
        d = differs(y, x + block.attn(block.ln1(x)), atol=1e-4)
    if d and not differs(y, x, atol=1e-4):  # what the output is instead says where the attention went
        d += ("; yours is x itself: the attention's output is lost, so the FFN's residual must add to h = x + attn(…), "
              "not to x")
    return d and f"with ffn.w2 at zero, the block's output and x + attn(ln1(x)) from its own modules: {d}"


def _block_attention_built(m):
    """TransformerBlock(32, 4, 48, 16, theta=500) with ffn.w2 at zero against x + a fresh
    MultiHeadSelfAttention(32, 4, 16, 500) holding the block's attention weights, on positions up to 15."""
    block = m.TransformerBlock(32, 4, 48, 16, 500.0)
    state = weights(83, block_shapes(32, 48))
    state["ffn.w2.weight"] = torch.zeros_like(state["ffn.w2.weight"])
    load_state(block, state)
    attn = m.MultiHeadSelfAttention(32, 4, 16, 500.0)
    load_state(attn, {k[len("attn."):]: v for k, v in state.items() if k.startswith("attn.")})
    x, pos = randn(84, 2, 6, 32), torch.tensor([0, 3, 15, 1, 9, 9])
    with torch.no_grad():
        d = differs(block(x, pos), x + attn(block.ln1(x), pos), atol=1e-4)
    return d and ("TransformerBlock(32, 4, 48, 16, theta=500) with ffn.w2 at zero, on positions [0, 3, 15, 1, 9, 9]: "
                  f"the output and x + MultiHeadSelfAttention(32, 4, 16, 500)(ln1(x)) with the same weights: {d}")


def _lm_blocks_built(m):
    """TransformerLM(…, rope_theta=500) against its token_embeddings, ln_final and lm_head around fresh
    TransformerBlock(32, 4, 48, 16, 500)s holding its layers' weights."""
    with torch.random.fork_rng(devices=[]):
        lm = m.TransformerLM(97, 16, 32, 2, 4, 48, 500.0)
    state = weights(85, lm_shapes(97, 32, 2, 48))
    load_state(lm, state)
    ids = torch.randint(0, 97, (2, 16), generator=gen(86))
    with torch.no_grad():
        h = lm.token_embeddings(ids)
        for i in range(2):
            block = m.TransformerBlock(32, 4, 48, 16, 500.0)
            load_state(block, {k[len(f"layers.{i}."):]: v for k, v in state.items() if k.startswith(f"layers.{i}.")})
            h = block(h)
        d = differs(lm(ids), lm.lm_head(lm.ln_final(h)), atol=1e-4)
    return d and ("TransformerLM(97, 16, 32, 2, 4, 48, rope_theta=500) on ids (2, 16): the logits and "
                  f"lm_head(ln_final(·)) of two TransformerBlock(32, 4, 48, 16, 500) with its layers' weights: {d}")


def _lm_composes(m):
    lm, ids, _ = _lm_inputs(m)
    with torch.no_grad():
        h = lm.token_embeddings(ids)
        for layer in lm.layers:
            h = layer(h)
        d = differs(lm(ids), lm.lm_head(lm.ln_final(h)), atol=1e-4)
    return d and ("the logits and lm_head(ln_final(layers[1](layers[0](token_embeddings(ids))))) from its own "
                  f"modules: {d}")


BLOCK_PROPERTIES = (
    learns(lambda m: (lambda block, x, _: (block, (x,)))(*_block_inputs(m)), "the block"),
    Property("with both sublayers' output projections at zero, the block returns its input: the residuals add "
             "x itself", _block_identity,
             example="block = minilm.TransformerBlock(32, 4, 48, 32, 10000.0)\n"
                     "block.attn.output_proj.weight.data.zero_(); block.ffn.w2.weight.data.zero_()\n"
                     "x = torch.randn(1, 8, 32)\nprint(block(x) - x)  # zeros",
             idea="h = x + attn(ln1(x)), then h + ffn(ln2(h)): the residual carries x, not ln1(x), and no norm "
                  "comes after the addition"),
    Property("with the FFN's output projection at zero, the block is x + attn(ln1(x)): the first residual adds x",
             _block_attention_half,
             example="block = minilm.TransformerBlock(32, 4, 48, 32, 10000.0)\n"
                     "block.ffn.w2.weight.data.zero_()\nx = torch.randn(1, 8, 32)\n"
                     "print(block(x) - (x + block.attn(block.ln1(x))))  # zeros",
             idea="h = x + self.attn(self.ln1(x)) adds the block's input x, then the FFN's residual adds h"),
    causal_property(_block_inputs, "the block"), batch_rows_property(_block_inputs, "the block"),
    Property("the block hands token_positions to its attention: other positions give other outputs",
             _block_uses_positions,
             example="block = minilm.TransformerBlock(32, 4, 48, 32, 10000.0)\nx = torch.randn(1, 8, 32)\n"
                     "print(block(x, torch.tensor([0, 5, 1, 9, 2, 2, 7, 30])) - block(x))  # not all zero",
             idea="forward(x, token_positions) calls self.attn(self.ln1(x), token_positions): RoPE needs them"),
    Property("the block's attention is MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta), with the "
             "theta and max_seq_len given", _block_attention_built,
             example="block = minilm.TransformerBlock(32, 4, 48, 16, 500.0)\n"
                     "attn = minilm.MultiHeadSelfAttention(32, 4, 16, 500.0)\n"
                     "attn.load_state_dict(block.attn.state_dict())\nblock.ffn.w2.weight.data.zero_()\n"
                     "x = torch.randn(1, 6, 32)\nprint(block(x) - (x + attn(block.ln1(x))))  # zeros",
             idea="build self.attn = MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta, …) with the "
                  "block's own arguments, in that order: a theta left at its default turns every head by the "
                  "wrong angles"),
    Property("the block hands its attention token_positions and kv_cache as they are", _block_hands_on,
             example="# forward(x, token_positions, kv_cache): h = x + self.attn(self.ln1(x), token_positions, "
                     "kv_cache)",
             idea="pass both on to self.attn, in its order (x, token_positions, kv_cache) or by name: the cache path "
                  "of notebook 11 goes through the block"),
    *module_contract(lambda m, **kw: m.TransformerBlock(32, 4, 80, 32, 10000.0, **kw),
                     lambda _: (randn(80, 2, 5, 32),), "TransformerBlock(32, 4, 80)", calls_linears=True, meta=False),
)

spec("7.1", properties=BLOCK_PROPERTIES,
     collect=lambda m,
     c: layer_collect(m.TransformerBlock(c["d"], c["heads"], c["d_ff"], c["max_len"], c["theta"]), c),
     # non-trivial norm gains, so a swapped ln1/ln2 shows
     cases=lambda: [dict(d=32, heads=4, d_ff=48, max_len=32, theta=10000.0, state=weights(30, block_shapes(32, 48)),
                         x=randn(32, 2, 7, 32), what="TransformerBlock(32, 4, 48) and x (2, 7, 32)")],
     invariant=lambda got, c: keys_problem(got["keys"], list(block_shapes(c["d"], c["d_ff"])), "TransformerBlock"),
     outputs={"y": "the output"}, atol=1e-4,
     mistakes={
         "post_norm": "your block normalizes after the residual add (post-norm): use h = x + attn(ln1(x)), then h + "
                      "ffn(ln2(h))",
         "no_residual": "add each sublayer's output to its input (the residual connection)",
         "parallel_block": PARALLEL_BLOCK,
         "shared_norm": "ln1 and ln2 are one RMSNorm (self.ln2 = self.ln1), so both sublayers share one gain: give "
                        "each sublayer its own RMSNorm",
         "block_ln1_for_both": "your FFN's input is ln1(h); it is ln2(h): each sublayer has its own norm",
     },
     passed="pre-norm block: h = x + attn(ln1(x)), then h + ffn(ln2(h))")


def _lm_collect(m, c):
    torch.manual_seed(0)
    lm = m.TransformerLM(*c["config"])  # vocab, context, d_model, layers, heads, d_ff, theta
    out = {"keys": state_keys(lm), "parameters": sum(p.numel() for p in lm.parameters()),
           "tied": lm.lm_head.weight.data_ptr() == lm.token_embeddings.weight.data_ptr()}
    load_state(lm, c["state"])
    out["logits"] = lm(c["ids"])
    return out


def _lm_invariant(got, c) -> Problem | None:
    vocab, _, d, layers, _, d_ff, _ = c["config"]
    want = lm_parameter_count(vocab, d, layers, d_ff)
    return first(
        Problem("lm_head shares its weight with token_embeddings (tied): the contract is an untied lm_head with "
                "its own "
                "weight", "tied_lm_head") if got["tied"] is not False else None,
        keys_problem(got["keys"], lm_state_dict_keys(layers), "TransformerLM"),
        None if got["parameters"] == want else Problem(
            f"TransformerLM has {count(got['parameters'])} parameters, expected {want:,}", "parameter_count"))


def _lm_cases():
    cfg = [97, 32, 32, 2, 4, 48, 10000.0]
    return [dict(config=cfg, state=weights(33, lm_shapes(97, 32, 2, 48)),
                 ids=torch.randint(0, 97, (2, 12), generator=gen(34)),
                 what="TransformerLM(97, 32, 32, 2, 4, 48) and ids (2, 12)")]


def _lm_full_context(m):
    lm, ids, _ = _lm_inputs(m)  # context_length 32
    full = torch.randint(0, 97, (2, 32), generator=gen(82))
    with torch.no_grad():
        logits = lm(full)
        d = differs(logits[:, :8], lm(full[:, :8]), atol=1e-4)
    return d and f"on ids (2, 32), as long as context_length, the first 8 positions' logits and ids[:, :8]'s: {d}"


LM_PROPERTIES = (
    layers_of_their_own(lambda m: m.TransformerLM(61, 16, 16, 3, 2, 32, 10000.0), "TransformerLM(num_layers=3)"),
    Property("a sequence as long as context_length runs, and its first positions' logits are what a shorter "
             "prefix gives", _lm_full_context,
             example="lm = minilm.TransformerLM(97, 32, 32, 2, 4, 48, 10000.0)\nids = torch.randint(0, 97, (1, 32))\n"
                     "print(lm(ids).shape)  # (1, 32, 97)",
             idea="positions run 0 … seq − 1 ≤ context_length − 1, and every table (RoPE's) holds context_length "
                  "rows: an off-by-one there fails only on a full context"),
    Property("the logits are lm_head(ln_final(·)) of the blocks applied one after the other to the token embeddings, "
             "with nothing added between them", _lm_composes,
             example="lm = minilm.TransformerLM(97, 32, 32, 2, 4, 48, 10000.0)\n"
                     "ids = torch.randint(0, 97, (2, 8))\nh = lm.token_embeddings(ids)\n"
                     "for layer in lm.layers:\n    h = layer(h)\nprint(lm(ids) - lm.lm_head(lm.ln_final(h)))  # zeros",
             idea="each block carries its own residuals: x = layer(x) in the loop, no x + layer(x)"),
    Property("every block is TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta)",
             _lm_blocks_built,
             example="lm = minilm.TransformerLM(97, 16, 32, 2, 4, 48, 500.0)\nids = torch.randint(0, 97, (1, 16))\n"
                     "h = lm.token_embeddings(ids)\nfor layer in lm.layers:\n"
                     "    block = minilm.TransformerBlock(32, 4, 48, 16, 500.0)\n"
                     "    block.load_state_dict(layer.state_dict())\n    h = block(h)\n"
                     "print(lm(ids) - lm.lm_head(lm.ln_final(h)))  # zeros",
             idea="pass the model's own context_length and rope_theta on to every TransformerBlock: a theta left "
                  "at its default rotates with the wrong frequencies"),
    causal_property(_lm_inputs, "the model"), batch_rows_property(_lm_inputs, "the model"),
    Property("with kv_cache given, layer i gets kv_cache[i], and the positions continue after the cached tokens",
             _lm_hands_on,
             example="# start = len(kv_cache[0]); positions = start … start + seq − 1;\n"
                     "# x = layer(x, positions, kv_cache[i]) for the i-th layer",
             idea="read start = len(kv_cache[0]) before running any layer, make positions start … start + seq − 1, "
                  "and give each layer its own cache, kv_cache[i]"),
    *module_contract(lambda m, **kw: m.TransformerLM(97, 32, 32, 2, 4, 80, 10000.0, **kw),
                     lambda _: (torch.randint(0, 97, (2, 5), generator=gen(81)),),
                     "TransformerLM(97, 32, 32, 2, 4, 80)", calls_linears=True, meta=False),
)

spec("8.1", properties=LM_PROPERTIES,
     collect=_lm_collect, cases=_lm_cases, invariant=_lm_invariant, outputs={"logits": "the logits"}, atol=1e-4,
     mistakes={
         "missing_final_norm": "apply ln_final before lm_head",
         "logits_are_probabilities": "your logits are probabilities: every row sums to 1 (a softmax at the end). "
                                     "TransformerLM returns the unnormalized logits, lm_head(ln_final(x)); the softmax "
                                     "belongs to the loss (cross_entropy) and to sampling",
         "post_norm": "your blocks normalize after the residual add (post-norm): the contract is pre-norm",
         "tied_lm_head": "use lm_head, not the embedding matrix, for the logits",
         "parallel_block": "your blocks run attention and the FFN side by side; the block is sequential: "
                           "h = x + attn(ln1(x)), then h + ffn(ln2(h))",
     },
     passed="state_dict names and parameter count match the contract, logits match the oracle")
