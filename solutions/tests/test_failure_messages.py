"""What a student sees when a check fails (issue 26): an error names the student's own file:line,
a task whose earlier task's code fails says to fix that one first, and `minilm status`'s Next
opens the function to fix. Wrong submissions are copies of the reference with one function broken,
run as a student runs them (their minilm/ on the path, no MINILM_IMPL)."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from minilm.course import checks, exercises, tasks
from minilm.course.difference import how_it_differs
from solutions import make_stubs, mistakes
from solutions.attention import MultiHeadSelfAttention, scaled_dot_product_attention, softmax
from solutions.block import TransformerBlock
from solutions.classic import ClassicBlock, ClassicLM, layer_norm
from solutions.datalimit import dropout
from solutions.generation import generate, next_token_probs
from solutions.inside import attention_inputs
from solutions.linear import Linear
from solutions.model import TransformerLM
from solutions.modern import Muon, ReLUSquaredFFN, newton_schulz, parameter_groups
from solutions.quantization import Int8Linear, dequantize_int8, linear, quantize_int8
from solutions.rope import RotaryPositionalEmbedding, rope_angles, rotate_pairs
from solutions.swiglu import swiglu
from solutions.tests.test_release import student_env
from solutions.training import AdamW, clip_grad_norm, lr_cosine_schedule, train

ROOT = tasks.ROOT
# The reference's functions, kept: slips below replace them and call the originals.
_CLIP_GRAD_NORM, _QUANTIZE_INT8, _LAYER_NORM = clip_grad_norm, quantize_int8, layer_norm
_CLASSIC_BLOCK_FORWARD, _MUON_STEP = ClassicBlock.forward, Muon.step
_SWIGLU, _TRAIN = swiglu, train
_ATTENTION_INPUTS, _DROPOUT = attention_inputs, dropout
_PARAMETER_GROUPS, _MHSA_FORWARD, _COSINE = parameter_groups, MultiHeadSelfAttention.forward, lr_cosine_schedule


# ---------------------------------------------------------------- the registry's `uses` edges


def _calls(task: tasks.Task) -> set[str]:
    """The tasks whose names the reference's code of `task` and its spec's collect refer to."""
    owner = {name: t.id for t in tasks.TASKS for name in t.names}
    tree = ast.parse((ROOT / "solutions" / f"{task.module}.py").read_text(encoding="utf-8"))
    names = {n.id if isinstance(n, ast.Name) else n.attr
             for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in task.names
             for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}
    names |= set(re.findall(r"\bm\.(\w+)", inspect.getsource(exercises.get(task.id).collect)))
    return {owner[n] for n in names if n in owner} - {task.id}


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.id)
def test_uses_names_every_earlier_task_the_reference_calls(task):
    order = [t.id for t in tasks.TASKS]
    earlier = {t for t in _calls(task) if order.index(t) < order.index(task.id)}  # 6.3's KVCache path is 11.3's
    assert earlier <= set(task.uses), f"Task {task.id} calls {sorted(earlier - set(task.uses))}: add them to its uses"
    assert all(order.index(t) < order.index(task.id) for t in task.uses), task.uses


def test_prerequisites_follow_uses_through():
    assert [t.id for t in tasks.prerequisites("8.1")] == ["1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "4.1", "4.3", "5.1",
                                                          "5.2", "6.1", "6.2", "6.3", "7.1"]
    assert tasks.prerequisites("1.1") == ()


# ---------------------------------------------------------------- in-process, on the reference's known mistakes


@pytest.fixture
def reference(monkeypatch):
    monkeypatch.setenv("MINILM_IMPL", "solutions")


def test_a_task_whose_earlier_task_fails_says_so_first_and_keeps_its_own_diagnosis(reference):
    mutant = mistakes.get("rope_split_halves")  # rotate_pairs of Task 5.1, which 6.3 runs through RoPE
    with mistakes.applied({**mutant, "task": "6.3"}):
        verdict = checks.run("6.3")
    assert verdict.status == checks.FAIL and verdict.mistake == "rope_split_halves", verdict.line
    assert verdict.line.startswith("✗ Task 6.3 MultiHeadSelfAttention: Task 5.1 fails; fix it first: 6.3 uses your "
                                   "rope. Meanwhile 6.3's check says: the output on "), verdict.line
    assert mutant["diagnosis"] in verdict.message


def test_a_task_failing_on_its_own_names_no_earlier_task(reference):
    with mistakes.applied(mistakes.get("missing_final_norm")):
        verdict = checks.run("8.1")
    assert verdict.status == checks.FAIL and verdict.message.startswith("the logits on "), verdict.line
    assert verdict.where is None  # "the logits" name no function: status opens the task's own definition


# ---------------------------------------------------------------- a student's copy with one function broken


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """minilm/ as a student has it after the last task: the stubs with the reference's bodies."""
    out = tmp_path_factory.mktemp("submission")
    shutil.copytree(ROOT / "minilm", out / "minilm", ignore=shutil.ignore_patterns("__pycache__"))
    for module, text in make_stubs.solved_modules().items():
        (out / "minilm" / f"{module}.py").write_text(text, encoding="utf-8")
    return out


def broken(finished: Path, tmp_path: Path, module: str, old: str, new: str) -> tuple[Path, str]:
    """A copy of `finished` with `old` replaced by `new` in minilm/<module>.py, and that file's text."""
    repo = tmp_path / "repo"
    shutil.copytree(finished, repo)
    path = repo / "minilm" / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return repo, text


def minilm(repo: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "minilm", *args], cwd=repo, env=student_env(repo), capture_output=True,
                       text=True, timeout=600, check=False)
    assert not r.stderr.strip(), r.stderr[-2000:]
    return r.stdout


def line_of(text: str, needle: str) -> int:
    (line,) = [i for i, s in enumerate(text.splitlines(), 1) if needle in s]
    return line


@pytest.mark.slow  # the student's commands in subprocesses
def test_a_table_one_position_short_is_named_before_it_raises(finished, tmp_path):
    """A RoPE table one position short: indexing it at the last position would raise a bare IndexError
    inside torch; the check names the cause from the tables' shapes first, and status opens the class."""
    repo, text = broken(finished, tmp_path, "rope", "rope_angles(torch.arange(max_seq_len, device=device)",
                        "rope_angles(torch.arange(max_seq_len - 1, device=device)")
    assert minilm(repo, "check", "5.2").splitlines() == [(
        "✗ Task 5.2 RotaryPositionalEmbedding: the buffers cos and sin have shapes [63, 4] and [63, 4]; "
        "RotaryPositionalEmbedding(10000, 8, 64) needs (64, 4): one row per position 0 … 63 "
        "(torch.arange(max_seq_len)), one column per pair")]
    status = minilm(repo, "status")
    at = f"minilm/rope.py:{line_of(text, 'class RotaryPositionalEmbedding(')}"
    assert (f"Next: Task 5.2 (RotaryPositionalEmbedding with cached cos/sin): open {at}, taught in "
            "notebooks/05_rope.ipynb") in status, status
    assert "Traceback" not in status and "torch/" not in status


@pytest.mark.slow  # the student's commands in subprocesses
def test_an_error_names_the_students_line_not_torchs(finished, tmp_path):
    """Positions indexed one too far: a bare IndexError inside torch; the check shows the student's line."""
    repo, text = broken(finished, tmp_path, "rope", "self.cos[token_positions], self.sin[token_positions]",
                        "self.cos[token_positions + 1], self.sin[token_positions + 1]")
    at = f"minilm/rope.py:{line_of(text, 'return rotate_pairs(x, self.cos[token_positions + 1]')}"
    assert minilm(repo, "check", "5.2").splitlines() == [(
        "✗ Task 5.2 RotaryPositionalEmbedding: your code raised IndexError: index 64 is out of bounds for dimension 0 "
        f"with size 64 ({at})")]


@pytest.mark.slow  # the student's commands in subprocesses
def test_a_wrong_helper_blames_the_earlier_task_and_status_opens_the_helper(finished, tmp_path):
    """rope_angles with doubled frequencies: 5.1's check names the mistake, 8.1's (which runs RoPE in
    every block) says to fix 5.1 first, and status opens rope_angles, not rope."""
    repo, text = broken(finished, tmp_path, "rope", "dtype=torch.float64) / d_k)", "dtype=torch.float64) * 2 / d_k)")
    five, eight = minilm(repo, "check", "5.1", "8.1").splitlines()
    assert five.startswith("✗ Task 5.1 rope: rope_angles on positions 0…5, d_k=8: the frequencies are off"), five
    assert eight.startswith("✗ Task 8.1 TransformerLM: Task 5.1 fails; fix it first: 8.1 uses your rope. "
                            "Meanwhile 8.1's check says: the logits on "), eight
    # Alone, 8.1's check runs the earlier checks it needs to say so.
    assert minilm(repo, "check", "8.1").splitlines() == [eight]
    status = minilm(repo, "status")
    angles = line_of(text, "def rope_angles(")
    assert angles < line_of(text, "def rope(")
    assert (f"Next: Task 5.1 (RoPE: rope_angles, rotate_pairs and rope): open minilm/rope.py:{angles}, "
            "taught in notebooks/05_rope.ipynb") in status, status


# ---------------------------------------------------------------- held-out slips: how the output differs


def _angles_theta_typo(token_positions, d_k, theta=10000.0):
    inv_freq = (theta / 10) ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # 1000 typed for 10000
    return (token_positions.to(torch.float64)[..., None] * inv_freq).float()


def _clip_returns_squared_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = sum((g.detach().float() ** 2).sum() for g in grads)  # the square root left out
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / (norm + 1e-6))
    return norm


def _sinusoid_base_typo(seq_len, d_model):
    inv_freq = 1000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv_freq
    return torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(seq_len, d_model).float()


# Slips that are in no catalogue (the checks store no output for them): the message still says in
# words how the output differs, never only "values differ".
def _silu_gate_detached(x):
    return x * torch.sigmoid(x).detach()  # the right values, half the gradient


def _softmax_through_numpy(x, dim):
    import numpy as np

    e = np.exp(x.detach().numpy() - x.detach().numpy().max(axis=dim, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=dim, keepdims=True)).to(x.dtype)


def _block_adds_in_place(self, x, token_positions=None):
    x += self.attn(self.ln1(x), token_positions)  # the caller's tensor changes
    return x + self.ffn(self.ln2(x))


def _embedding_one_hot(token_ids, weight):
    return torch.nn.functional.one_hot(token_ids, weight.shape[0]).float() @ weight  # float32 only


def _embedding_squeezed(token_ids, weight):
    return weight[token_ids].squeeze()  # ids (1, 3) lose their batch dim


def _embedding_reads_data(token_ids, weight):
    return weight.data[token_ids]  # the right rows, out of autograd's sight: the Embedding never learns


def _sdpa_sizes_from_dim_2(q, k, v, mask=None):
    from solutions.attention import softmax

    scores = q @ k.transpose(-2, -1) / q.shape[2] ** 0.5  # d_k for (batch, seq, d_k) only
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v


def _wsd_cosine_decay(progress, max_lr, min_lr, warmup, decay):
    import math

    if progress < warmup:
        return max_lr * progress / warmup
    if progress < 1 - decay:
        return max_lr
    if progress < 1:  # a cosine where the contract says linear: equal at both ends and at the midpoint
        return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * (progress - (1 - decay)) / decay)) / 2
    return min_lr


def _softcap_beyond_the_cap_only(logits, cap):
    return torch.where(logits.abs() > cap, cap * torch.tanh(logits / cap), logits)


def _dropout_one_mask_for_the_rows(x, p, training, generator=None):
    if not training or p == 0:
        return x
    keep = torch.rand(x.shape[-1:], generator=generator) >= p  # one draw per feature, shared by every row
    return torch.where(keep, x / (1 - p), torch.zeros((), dtype=x.dtype))


def _rms_norm_zeros(x, weight, eps=1e-5):
    return torch.zeros_like(x)


def _swiglu_module_reads_weights(self, x):
    from solutions.swiglu import swiglu

    return swiglu(x, self.w1.weight, self.w2.weight, self.w3.weight)  # an Int8Linear has no weight


def _gelu_ffn_without_dtype(self, d_model, d_ff, device=None, dtype=None):
    torch.nn.Module.__init__(self)
    self.d_model = d_model
    self.w1, self.w2 = Linear(d_model, d_ff), Linear(d_ff, d_model)  # dtype and device dropped


def _get_batch_on_cpu(dataset, batch_size, context_length, device="cpu"):
    import numpy as np

    starts = torch.randint(0, len(dataset) - context_length, (batch_size,)).tolist()
    windows = torch.from_numpy(np.stack([np.asarray(dataset[i : i + context_length + 1], dtype=np.int64)
                                         for i in starts]))
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # device ignored


def _block_drops_the_cache(self, x, token_positions=None, kv_cache=None):
    x = x + self.attn(self.ln1(x), token_positions)  # kv_cache never handed on
    return x + self.ffn(self.ln2(x))


def _load_checkpoint_assigns(src, model, optimizer):
    checkpoint = torch.load(src, map_location="cpu")
    model.load_state_dict(checkpoint["model"], assign=True)  # new tensors: the optimizer holds the old ones
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["iteration"]


def _attention_inputs_as_float(model, ids):
    seen = []
    handles = [layer.attn.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().float()))
               for layer in model.layers]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return seen


_CLASSIC_LM_INIT = ClassicLM.__init__


def _classic_lm_tied_to_the_head(self, config, device=None, dtype=None):
    _CLASSIC_LM_INIT(self, config, device, dtype)
    if config.tied_head:  # the head's fresh Glorot matrix shared, where the contract shares the embedding's
        self.lm_head.weight = Linear(config.d_model, config.vocab_size).weight
        self.token_embeddings.weight = self.lm_head.weight


def _classic_lm_scales_the_embeddings(self, token_ids):
    import math

    from solutions.classic import sinusoidal_positions

    cfg, seq = self.config, token_ids.shape[-1]
    positions = torch.arange(seq, device=token_ids.device)
    x = self.token_embeddings(token_ids)
    if cfg.tied_head:  # Vaswani et al.'s √d_model on the way in, where the contract divides on the way out
        x = x * math.sqrt(cfg.d_model)
    if cfg.positions == "sinusoidal":
        x = x + sinusoidal_positions(seq, cfg.d_model).to(x.device, x.dtype)
    elif cfg.positions == "learned":
        x = x + self.position_embeddings(positions)
    for layer in self.layers:
        x = layer(x, positions)
    if cfg.norm_position == "pre":
        x = self.ln_final(x)
    return self.lm_head(x)


def _classic_lm_adds_each_block(self, token_ids):
    import math

    from solutions.classic import sinusoidal_positions

    cfg, seq = self.config, token_ids.shape[-1]
    positions = torch.arange(seq, device=token_ids.device)
    x = self.token_embeddings(token_ids)
    if cfg.positions == "sinusoidal":
        x = x + sinusoidal_positions(seq, cfg.d_model).to(x.device, x.dtype)
    elif cfg.positions == "learned":
        x = x + self.position_embeddings(positions)
    for layer in self.layers:
        x = x + layer(x, positions)  # a residual around the block, which already adds its own
    if cfg.norm_position == "pre":
        x = self.ln_final(x)
    if cfg.tied_head:
        x = x / math.sqrt(cfg.d_model)
    return self.lm_head(x)


def _groups_1d_to_no_decay(model, muon=True):
    from solutions.embedding import Embedding

    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, Embedding)}
    groups = {"muon": [], "decay": [], "no_decay": []}
    for _, p in model.named_parameters():
        if id(p) in embeddings or p.ndim == 1:  # a 0-D scalar or a 3-D kernel goes on as a matrix
            groups["no_decay"].append(p)
        elif p is model.lm_head.weight or not muon:
            groups["decay"].append(p)
        else:
            groups["muon"].append(p)
    return groups


def _groups_head_by_name(model, muon=True):
    from solutions.embedding import Embedding

    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, Embedding)}
    groups = {"muon": [], "decay": [], "no_decay": []}
    for name, p in model.named_parameters():
        if id(p) in embeddings or p.ndim != 2:
            groups["no_decay"].append(p)
        elif "head" in name or not muon:  # any matrix whose name says head, not model.lm_head.weight
            groups["decay"].append(p)
        else:
            groups["muon"].append(p)
    return groups


def _train_clips_every_group(loss_of, parameters, optimizer, batch, lr_at, clip=1.0, start=0, evaluate=None,
                             eval_every=0):
    from solutions.training import Step, clip_grad_norm

    step = start
    while (lr := lr_at(step)) is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        x, y = batch(step)
        loss = loss_of(x, y)
        optimizer.zero_grad()
        loss.backward()
        everything = [p for group in optimizer.param_groups for p in group["params"]]  # not `parameters`
        grad_norm = None if clip is None else float(clip_grad_norm(everything, clip))
        optimizer.step()
        step += 1
        val_loss = None
        if evaluate is not None and step % eval_every == 0:
            with torch.no_grad():
                val_loss = evaluate(step)
        yield Step(step, loss.detach(), lr, grad_norm, val_loss)


def _train_evaluates_from_start(loss_of, parameters, optimizer, batch, lr_at, clip=1.0, start=0, evaluate=None,
                                eval_every=0):
    from solutions.training import Step, clip_grad_norm

    parameters = list(parameters)
    step = start
    while (lr := lr_at(step)) is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        x, y = batch(step)
        loss = loss_of(x, y)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = None if clip is None else float(clip_grad_norm(parameters, clip))
        optimizer.step()
        step += 1
        val_loss = None
        if evaluate is not None and (step - start) % eval_every == 0:  # counts from the resumed start
            with torch.no_grad():
                val_loss = evaluate(step)
        yield Step(step, loss.detach(), lr, grad_norm, val_loss)


# Slips that only an input at the contract's boundary shows: every visible case passes.
def _probs_topk_unguarded(logits, temperature=1.0, top_k=None, top_p=None):
    if top_k is not None and temperature != 0:  # torch.topk raises for k beyond the vocabulary
        kth = torch.topk(logits.float() / temperature, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits.float() / temperature < kth, float("-inf"))
    return next_token_probs(logits, temperature, None, top_p)


def _cosine_warmup_through_its_end(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
    import math

    if it <= warmup_iters:  # the same rate at it = warmup_iters, but 0 / 0 when warmup_iters is 0
        return it / warmup_iters * max_lr
    if it <= cosine_cycle_iters:
        progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr


def _ns_without_eps(G, steps=5, eps=1e-7):
    return newton_schulz(G / G.norm(), steps, eps)  # 0 / 0 for a zero G


def _quantize_tests_the_max(w, per_channel=True):
    w = w.float()
    absmax = w.abs().amax(dim=1, keepdim=True) if per_channel else w.abs().amax().reshape(1, 1)
    scale = torch.where(absmax > 0, absmax / 127, torch.ones_like(absmax))  # 5e-44 / 127 is still 0
    return torch.round(w / scale).clamp(-127, 127).to(torch.int8), scale


# Slips in a clause the visible cases reach only through a comparison of values: a property names the clause.
def _bpe(pick, to_tokens):
    """A train_bpe that recounts every pair at every merge, picking the merge with pick(counts) and starting each
    chunk as to_tokens(chunk)."""
    def train_bpe(text, num_merges):
        import regex

        from solutions.bpe import GPT2_PATTERN
        from solutions.mistakes.training import _merge_everywhere

        chunks = Counter(m.group() for m in regex.finditer(GPT2_PATTERN, text))
        words = [(to_tokens(chunk), n) for chunk, n in chunks.items()]
        merges = []
        for _ in range(num_merges):
            counts = Counter()
            for word, n in words:
                for pair in zip(word, word[1:]):
                    counts[pair] += n
            if not counts:
                break
            merges.append(pick(counts))
            words = [(_merge_everywhere(word, merges[-1]), n) for word, n in words]
        return {i: bytes([i]) for i in range(256)} | {256 + k: a + b for k, (a, b) in enumerate(merges)}, merges
    return train_bpe


def _utf8_bytes(chunk):
    return [bytes([b]) for b in chunk.encode("utf-8")]


def _greatest_of_the_top(counts):
    return max((c, pair) for pair, c in counts.items())[1]


_bpe_tie_first_counted = _bpe(lambda counts: max(counts, key=counts.get), _utf8_bytes)  # the first seen of a tie
_bpe_characters = _bpe(_greatest_of_the_top, lambda chunk: [ch.encode("utf-8") for ch in chunk])  # "é" one token


def _save_checkpoint_parameters_only(model, optimizer, iteration, out):
    weights = {name: p.detach() for name, p in model.named_parameters()}  # the model's buffers left out
    torch.save({"model": weights, "optimizer": optimizer.state_dict(), "iteration": iteration}, out)


def _cosine_over_one_more(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
    import math

    if it < warmup_iters:
        return it / warmup_iters * max_lr
    if it <= cosine_cycle_iters:  # one iteration too many in the cosine: just above min_lr at its end
        progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters + 1)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr


def _wsd_decay_from_the_stable_end(progress, max_lr, min_lr, warmup, decay):
    if progress < warmup:
        return max_lr * progress / warmup
    if progress < 1 - decay - warmup:  # the stable phase taken as what is left after both: the decay starts early
        return max_lr
    if progress < 1:
        return max_lr + (min_lr - max_lr) * (progress - (1 - decay)) / decay
    return min_lr


_ADAMW_STEP = AdamW.step  # the reference's, kept: the slip replaces AdamW.step


@torch.no_grad()
def _adamw_closure_without_grad(self, closure=None):
    loss = closure() if closure is not None else None  # under step's no_grad: backward raises
    _ADAMW_STEP(self)
    return loss


def _generate_stacks_the_new_tokens(model, prompt_ids, max_new_tokens, **kw):
    ids = generate(model, prompt_ids, max_new_tokens, **kw)
    prompt = torch.as_tensor(prompt_ids)
    return torch.cat((prompt, torch.stack(list(ids[len(prompt):]))))  # no new token: an empty stack



# Slips in one clause of a docstring: the property for that clause names it.
def _generate_eos_if_truthy(model, prompt_ids, max_new_tokens, *, eos_token_id=None, **kw):
    return generate(model, prompt_ids, max_new_tokens, eos_token_id=eos_token_id or None, **kw)  # `if eos_token_id:`


def _generate_global_rng(model, prompt_ids, max_new_tokens, *, generator=None, **kw):
    return generate(model, prompt_ids, max_new_tokens, generator=None, **kw)  # multinomial without generator=


def _int8_init_without_device(self, in_features, out_features, per_channel=True, device=None):
    torch.nn.Module.__init__(self)
    self.in_features, self.out_features, self.per_channel = in_features, out_features, per_channel
    self.register_buffer("weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8))  # device dropped
    self.register_buffer("scale", torch.ones(out_features if per_channel else 1, 1))


def _int8_forward_rounds_x_too(self, x):
    sx = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 127  # activations to int8 as well: no longer linear in x
    return linear(torch.round(x / sx), dequantize_int8(self.weight_int8, self.scale).to(x.dtype)) * sx


def _quantize_model_per_channel_not_passed_on(model, per_channel=True):
    for name, child in list(model.named_children()):
        if isinstance(child, Linear):
            model.add_module(name, Int8Linear.from_linear(child, per_channel))
        else:
            _quantize_model_per_channel_not_passed_on(child)  # the default per_channel below the top
    return model


def _quantize_model_every_matrix(model, per_channel=True):
    for name, child in list(model.named_children()):
        weight = getattr(child, "weight", None)  # "a module with a 2-D weight is a linear layer"
        if isinstance(weight, torch.Tensor) and weight.ndim == 2 and name != "token_embeddings":
            model.add_module(name, Int8Linear.from_linear(child, per_channel))
        else:
            _quantize_model_every_matrix(child, per_channel)
    return model
# Slips the red team found that only heard how values differ (or passed): a property now names the rule.
def _linear_scaled(x, weight):
    return x @ weight.T / weight.shape[1] ** 0.5  # an attention-style scale that a linear layer does not have


def _embedding_module_scaled(self, token_ids):
    return self.weight[token_ids] * self.embedding_dim ** 0.5  # the model's √d_model scale, inside Embedding


def _rms_norm_gain_inside(x, weight, eps=1e-5):
    xw = x.float() * weight.float()  # the gain applied before the RMS: it cancels out
    return (xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)


def _rms_norm_module_gain_twice(self, x):
    from solutions.rmsnorm import rms_norm

    return rms_norm(x, self.weight, self.eps) * self.weight


def _silu_gelu_approximation(x):
    return x * torch.sigmoid(1.702 * x)  # GELU's sigmoid approximation, not SiLU


def _swiglu_silu_after_product(x, w1, w2, w3):
    from solutions.linear import linear
    from solutions.swiglu import silu

    return linear(silu(linear(x, w1) * linear(x, w3)), w2)


def _SwiGLU_silu_after_product(self, x):
    from solutions.swiglu import silu

    return self.w2(silu(self.w1(x) * self.w3(x)))


def _clip_returns_a_float(parameters, max_norm):
    return float(_CLIP_GRAD_NORM(parameters, max_norm))


@torch.no_grad()
def _adamw_shared_step_count(self, closure=None):
    for group in self.param_groups:
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state.update(exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            self.t = getattr(self, "t", 0) + 1  # one counter for every parameter: t runs twice as fast with two
            state["step"] = t = self.t
            m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
            p.mul_(1 - lr * wd)
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            p.addcdiv_(m / (1 - beta1**t), (v / (1 - beta2**t)).sqrt() + eps, value=-lr)


def _probs_times_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature == 0:
        return next_token_probs(logits, 0.0)
    return next_token_probs(logits.float() * temperature**2, temperature, top_k, top_p)  # z · T, not z / T


def _quantize_rounds_half_up(w, per_channel=True):
    q, scale = _QUANTIZE_INT8(w, per_channel)
    return torch.floor(w.float() / scale + 0.5).clamp(-127, 127).to(torch.int8), scale


def _layer_norm_default_eps_typo(x, weight, bias, eps=1e-6):
    return _LAYER_NORM(x, weight, bias, eps)


def _gelu_ffn_silu(self, x):
    from solutions.swiglu import silu

    return self.w2(silu(self.w1(x)))


def _block_drops_positions(self, x, token_positions=None):
    return _CLASSIC_BLOCK_FORWARD(self, x)  # attention falls back to positions 0, 1, …


def _ns_one_step_more(G, steps=5, eps=1e-7):
    return newton_schulz(G, steps + 1, eps)


@torch.no_grad()
def _muon_decays_after_the_step(self, closure=None):
    shrink = [(p, 1 - group["lr"] * group["weight_decay"]) for group in self.param_groups for p in group["params"]
              if p.grad is not None]
    for p, factor in shrink:
        p.div_(factor)  # the reference's decay undone before its step …
    loss = _MUON_STEP(self, closure)
    for p, factor in shrink:
        p.mul_(factor)  # … and done after it: the step shrinks too
    return loss


def _relu2_halved(self, x):
    return self.w2(torch.relu(self.w1(x)).square() / 2)


def _dropout_mask_in_x_dtype(x, p, training, generator=None):
    if not training or p == 0:
        return x
    keep = torch.rand(x.shape, generator=generator, dtype=x.dtype) >= p  # float64 draws differ from float32 ones
    return torch.where(keep, x / (1 - p), torch.zeros((), dtype=x.dtype))


def _log_softmax(z):
    """The distillation slips' own log-softmax (torch's is refused in 16.2)."""
    m = z.amax(dim=-1, keepdim=True).detach()
    return z - m - torch.log(torch.exp(z - m).sum(dim=-1, keepdim=True))


def _distill_kl_mean_over_vocab(student_logits, teacher_logits, targets, temperature, alpha):
    from solutions.training import cross_entropy

    log_p = _log_softmax(teacher_logits.detach() / temperature)
    log_q = _log_softmax(student_logits / temperature)
    kl = (log_p.exp() * (log_p - log_q)).mean()  # a mean over the vocabulary too: KL / vocab_size
    return alpha * temperature**2 * kl + (1 - alpha) * cross_entropy(student_logits, targets)
# A rule the visible cases cannot tell apart from a value: the default theta where another is given, a scale
# or a mask one step off, a hook per head, a batch dim added.
def _rope_theta_left_out(x, token_positions, theta=10000.0):
    angles = rope_angles(token_positions, x.shape[-1])  # theta not passed on: the default's frequencies
    return rotate_pairs(x, angles.cos(), angles.sin())


def _rope_tables_theta_left_out(self, theta, d_k, max_seq_len, device=None, dtype=None):
    torch.nn.Module.__init__(self)
    self.theta, self.d_k, self.max_seq_len = theta, d_k, max_seq_len
    angles = rope_angles(torch.arange(max_seq_len, device=device), d_k)  # the visible cases all use 10000
    self.register_buffer("cos", angles.cos(), persistent=False)
    self.register_buffer("sin", angles.sin(), persistent=False)


def _softmax_max_along_the_last_dim(x, dim):
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))  # right for dim=-1 only: other dims get another shift each
    return exps / exps.sum(dim=dim, keepdim=True)


def _sdpa_precedence(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 1 / 2  # d_k / 2, not √d_k
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v


_MHSA_FORWARD = MultiHeadSelfAttention.forward
_MHSA_INIT = MultiHeadSelfAttention.__init__


def _mhsa_scaled_twice(self, x, token_positions=None, kv_cache=None):
    import math

    from einops import rearrange

    if token_positions is None:
        token_positions = torch.arange(x.shape[-2])
    q, k, v = (rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
               for proj in (self.q_proj, self.k_proj, self.v_proj))
    if self.rope is not None:
        q, k = self.rope(q, token_positions.unsqueeze(-2)), self.rope(k, token_positions.unsqueeze(-2))
    causal = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).tril()
    out = scaled_dot_product_attention(q / math.sqrt(self.d_k), k, v, causal)  # sdpa scales again
    return self.output_proj(rearrange(out, "... heads seq d_k -> ... seq (heads d_k)"))


def _mhsa_rope_arguments_swapped(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
    _MHSA_INIT(self, d_model, num_heads, max_seq_len, theta, device, dtype)
    if theta is not None:  # RotaryPositionalEmbedding(max_seq_len, d_k, theta): a table of theta rows
        self.rope = RotaryPositionalEmbedding(float(max_seq_len), self.d_k, int(theta), device=device)


_BLOCK_INIT = TransformerBlock.__init__
_LM_INIT = TransformerLM.__init__


def _block_theta_left_out(self, d_model, num_heads, d_ff, max_seq_len, theta=10000.0, device=None, dtype=None):
    _BLOCK_INIT(self, d_model, num_heads, d_ff, max_seq_len, device=device, dtype=dtype)  # theta at its default


def _lm_theta_left_out(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta=10000.0,
                       device=None, dtype=None):
    _LM_INIT(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, device=device, dtype=dtype)


def _inputs_with_a_batch_dim(model, ids):
    seen = []
    handles = [layer.attn.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
               for layer in model.layers]
    try:
        with torch.no_grad():
            model(ids if ids.ndim > 1 else ids[None])  # (seq,) made (1, seq): the tensors gain a dim
    finally:
        for handle in handles:
            handle.remove()
    return seen


def _previous_counts_query_0(pattern):
    # query 0's weight on itself counted as if it were a previous token, over all seq queries
    return (pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) + pattern[..., 0, 0]) / pattern.shape[-1]


def _ablate_a_hook_per_head(attn, heads):
    handle = None
    for h in heads:
        def zero(module, args, h=h):
            merged = args[0].clone()
            merged[..., h * attn.d_k:(h + 1) * attn.d_k] = 0.0
            return (merged,)
        handle = attn.output_proj.register_forward_pre_hook(zero)  # only the last one is returned
    return handle if handle is not None else attn.output_proj.register_forward_pre_hook(lambda module, args: None)


def _ablate_float32_mask(attn, heads):
    keep = torch.ones(attn.d_model)  # float32 whatever the module's dtype
    for h in heads:
        keep[h * attn.d_k:(h + 1) * attn.d_k] = 0.0
    return attn.output_proj.register_forward_pre_hook(lambda module, args: (args[0] * keep,))


# Set 6's classes (the held-out set measured at 116e69d), one slip each.
def _softcap_from_exp(logits, cap):
    e = torch.exp(-2 * logits / cap)  # tanh from its definition: inf / inf far below −cap
    return cap * (1 - e) / (1 + e)


def _sdpa_fills_minus_1e9(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # beyond float16's range
    return softmax(scores, dim=-1) @ v


def _rope_tables_as_attributes(self, theta, d_k, max_seq_len, device=None, dtype=None):
    torch.nn.Module.__init__(self)
    self.d_k, self.max_seq_len = d_k, max_seq_len
    angles = rope_angles(torch.arange(max_seq_len, device=device), d_k, theta)
    self.cos, self.sin = angles.cos(), angles.sin()  # .to(device) skips them


def _clip_float_without_gradients(parameters, max_norm):
    parameters = list(parameters)
    if all(p.grad is None for p in parameters):
        return 0.0
    return _CLIP_GRAD_NORM(parameters, max_norm)


def _train_yields_group_0s_rate(loss_of, parameters, optimizer, *args, **kwargs):
    for step in _TRAIN(loss_of, parameters, optimizer, *args, **kwargs):
        yield step._replace(lr=optimizer.param_groups[0]["lr"])


def _dropout_copies_at_p_0(x, p, training, generator=None):
    if not training:
        return x
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return torch.where(keep, x / (1 - p), torch.zeros((), dtype=x.dtype))


def _swiglu_adds_the_residual(x, w1, w2, w3):
    return x + _SWIGLU(x, w1, w2, w3)


def _rms_norm_by_std(x, weight, eps=1e-5):
    return (x / torch.sqrt(x.float().var(dim=-1, keepdim=True) + eps)).to(x.dtype) * weight


def _layer_norm_by_moments(x, weight, bias, eps=1e-5):
    var = x.pow(2).mean(-1, keepdim=True) - x.mean(-1, keepdim=True) ** 2  # cancels for a large mean
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(var + eps) * weight + bias


def _ns_slip(G, steps, eps, float32=True, matmul_square=True):
    """The reference's iteration with one slip: no float32 upcast, or A·A as A * A."""
    from solutions.modern import NS_COEFFICIENTS

    a, b, c = NS_COEFFICIENTS
    X = G.float() if float32 else G
    X = X.T if G.shape[0] > G.shape[1] else X
    X = X / (X.norm() + eps)
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * (A @ A if matmul_square else A * A)) @ X
    return (X.T if G.shape[0] > G.shape[1] else X).to(G.dtype)


def _ns_elementwise_square(G, steps=5, eps=1e-7):
    return _ns_slip(G, steps, eps, matmul_square=False)


# Set 7's classes (held out, measured at 484e959), one slip each.
def _linear_reshape_back_minus_one(x, weight):
    y = x.reshape(-1, x.shape[-1]) @ weight.T
    return y.reshape(*x.shape[:-1], -1)  # -1 cannot be inferred for 0 elements


def _rms_norm_gain_after_the_cast(x, weight, eps=1e-5):
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _get_batch_sorted_starts(dataset, batch_size, context_length, device="cpu"):
    import numpy as np

    starts = sorted(torch.randint(0, len(dataset) - context_length, (batch_size,)).tolist())
    windows = torch.from_numpy(np.stack([np.asarray(dataset[i:i + context_length + 1], dtype=np.int64)
                                         for i in starts]))
    return windows[:, :-1].contiguous().to(device), windows[:, 1:].contiguous().to(device)


def _clip_float_copies(parameters, max_norm):
    grads = [p.grad.float() for p in parameters if p.grad is not None]  # copies for half-precision gradients
    if not grads:
        return torch.tensor(0.0)
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / (norm + 1e-6))
    return norm


def _quantize_by_class_name(model, per_channel=True):
    for name, child in list(model.named_children()):
        if type(child).__name__ == "Linear":  # torch's nn.Linear too
            model.add_module(name, Int8Linear.from_linear(child, per_channel))
        else:
            _quantize_by_class_name(child, per_channel)
    return model


def _ns_in_the_inputs_dtype(G, steps=5, eps=1e-7):
    return _ns_slip(G, steps, eps, float32=False)


def _inputs_squeezed(model, ids):
    return [t.squeeze(0) for t in _ATTENTION_INPUTS(model, ids)]


def _dropout_seeded_without_a_generator(x, p, training, generator=None):
    return _DROPOUT(x, p, training, generator if generator is not None else torch.Generator().manual_seed(0))


def _sdpa_scales_the_output(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v / q.shape[-1] ** 0.5


def _distill_without_the_max(student_logits, teacher_logits, targets, temperature, alpha):
    from solutions.training import cross_entropy

    def log_softmax(z):
        return torch.log(torch.exp(z) / torch.exp(z).sum(-1, keepdim=True))

    log_p = log_softmax(teacher_logits.detach() / temperature)
    kl = (log_p.exp() * (log_p - log_softmax(student_logits / temperature))).sum(-1).mean()
    return alpha * temperature**2 * kl + (1 - alpha) * cross_entropy(student_logits, targets)


# Set 8's classes (held out, measured at 8797ef5), one slip each.
def _linear_squeezed(x, weight):
    return (x @ weight.T).squeeze(-1)  # d_out = 1 loses its dim


def _rms_norm_module_in_gain_dtype(self, x):
    from solutions.rmsnorm import rms_norm

    return rms_norm(x, self.weight, self.eps).to(self.weight.dtype)


def _silu_one_minus(x):
    return x * (1 - torch.sigmoid(-x))  # cancels to 0 for x ≪ 0


def _quantize_exact_type(model, per_channel=True):
    from solutions.linear import Linear as CourseLinear

    for name, child in list(model.named_children()):
        if type(child) is CourseLinear:  # a subclass is a Linear too
            model.add_module(name, Int8Linear.from_linear(child, per_channel))
        else:
            _quantize_exact_type(child, per_channel)
    return model


def _groups_skip_frozen(model, muon=True):
    return {k: [p for p in v if p.requires_grad] for k, v in _PARAMETER_GROUPS(model, muon).items()}


def _relu2_in_place(self, x):
    h = torch.relu_(self.w1(x))
    return self.w2(h.square_())  # overwrites what relu's backward needs


def _dropout_multiplies(x, p, training, generator=None):
    if not training or p == 0:
        return x
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return x * keep / (1 - p)  # −inf · 0 is NaN


def _mhsa_adds_residual(self, x, token_positions=None, kv_cache=None):
    return x + _MHSA_FORWARD(self, x, token_positions, kv_cache)


def _cosine_as_tensor(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
    return torch.tensor(_COSINE(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters))


# ---------------------------------------------------------------- held-out set 9's classes


def _dropout_bernoulli(x, p, training, generator=None):
    if not training or p == 0:
        return x
    keep = torch.bernoulli(torch.full(x.shape, 1 - p), generator=generator).bool()  # at p 0.5 this is rand < p
    return torch.where(keep, x / (1 - p), torch.zeros((), dtype=x.dtype))


def _mhsa_keys_from_queries(self, x, token_positions=None, kv_cache=None):
    k_proj = self.k_proj
    self.k_proj = self.q_proj  # k computed with q_proj: k_proj takes no part
    try:
        return _MHSA_FORWARD(self, x, token_positions, kv_cache)
    finally:
        self.k_proj = k_proj


_MHSA_FORWARD = MultiHeadSelfAttention.forward


def _from_linear_always_per_channel(cls, linear, per_channel=True):
    return _FROM_LINEAR(linear, per_channel=True)  # the per_channel given is ignored


_FROM_LINEAR = Int8Linear.from_linear


def _quantize_max_not_absmax(w, per_channel=True):
    w = w.float()
    top = w.amax(dim=1, keepdim=True) if per_channel else w.amax().reshape(1, 1)  # max w, not max |w|
    scale = torch.where(top > 0, top / 127, torch.ones_like(top))
    return torch.round(w / scale).clamp(-127, 127).to(torch.int8), scale


def _gelu_erf_over_2(x):
    return 0.5 * x * (1.0 + torch.erf(x / 2.0))  # √2 typed as 2


def _lm_one_block_for_all(self, *args, **kwargs):
    _LM_INIT(self, *args, **kwargs)
    self.layers = torch.nn.ModuleList([self.layers[0]] * len(self.layers))  # [block] * num_layers


_LM_INIT = TransformerLM.__init__
_KEPT: list = []


def _inputs_kept_between_calls(model, ids):
    handles = [layer.attn.register_forward_pre_hook(lambda module, args: _KEPT.append(args[0].detach()))
               for layer in model.layers]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return _KEPT  # a list that outlives the call, as a mutable default argument does


def _block_second_residual_on_x(self, x, token_positions=None, kv_cache=None):
    h = x + self.attn(self.ln1(x), token_positions, kv_cache)
    return x + self.ffn(self.ln2(h))  # adds to x, not h


def _cross_entropy_max_not_put_back(logits, targets):
    m = logits.amax(dim=-1, keepdim=True).detach()
    log_sum_exp = torch.log(torch.exp(logits - m).sum(dim=-1))  # + m left out
    return (log_sum_exp - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)).mean()


def _distill_hard_part_on_z_over_t(student_logits, teacher_logits, targets, temperature, alpha):
    from solutions.training import cross_entropy

    log_p = _log_softmax(teacher_logits.detach() / temperature)
    log_q = _log_softmax(student_logits / temperature)
    soft = temperature**2 * (log_p.exp() * (log_p - log_q)).sum(dim=-1).mean()
    return alpha * soft + (1 - alpha) * cross_entropy(student_logits / temperature, targets)  # / T twice


def _rotate_second_takes_the_even(x, cos, sin):
    pairs = x.float().unflatten(-1, (-1, 2))
    x_even, x_odd = pairs.unbind(-1)
    rotated = torch.stack((x_even * cos - x_odd * sin, x_odd * sin + x_even * cos), dim=-1)  # even and odd swapped
    return rotated.flatten(-2).to(x.dtype)


def _relu2_widened_inside(self, d_model, d_ff, **kwargs):
    _RELU2_INIT(self, d_model, d_ff * 3 // 2, **kwargs)  # the matched width applied a second time


def _probs_divides_in_place(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature > 0:
        logits /= temperature  # the caller's logits change
        temperature = 1.0
    return next_token_probs(logits, temperature, top_k, top_p)


def _quantize_scalar_scale(w, per_channel=True):
    q, scale = quantize_int8(w, per_channel)
    return q, scale if per_channel else scale.reshape(())  # the per-tensor scale lost its (1, 1)


_RELU2_INIT = ReLUSquaredFFN.__init__


SLIPS = [
    # Held-out set 9: a mistake named only where it is the cause, a part unused, the shapes a module is built with,
    # and what an output equals instead (x itself, the shift, logits / T, a pair's entries).
    ("16.1", "solutions.datalimit", "dropout", _dropout_bernoulli, "the entries kept differ from torch.rand"),
    ("6.3", "solutions.attention", "MultiHeadSelfAttention.forward", _mhsa_keys_from_queries,
     "1 parameter(s) have no gradient (k_proj.weight)"),
    ("12.2", "solutions.quantization", "Int8Linear.from_linear", classmethod(_from_linear_always_per_channel),
     "scale has shape [1, 1], expected [6, 1]"),
    ("12.1", "solutions.quantization", "quantize_int8", _quantize_max_not_absmax, "the scales of w and of −w"),
    ("13.3", "solutions.classic", "gelu", _gelu_erf_over_2, "the CDF of a normal of std 1.41, not 1"),
    ("8.1", "solutions.model", "TransformerLM.__init__", _lm_one_block_for_all,
     "layers[0] and layers[1] are one and the same block"),
    ("15.1", "solutions.inside", "attention_inputs", _inputs_kept_between_calls, "the list outlives the call"),
    ("7.1", "solutions.block", "TransformerBlock.forward", _block_second_residual_on_x, "yours is x itself"),
    ("10.1", "solutions.training", "cross_entropy", _cross_entropy_max_not_put_back, "moved by -10,000, the shift"),
    ("16.2", "solutions.datalimit", "distillation_loss", _distill_hard_part_on_z_over_t,
     "the student's logits divided by T"),
    ("5.1", "solutions.rope", "rotate_pairs", _rotate_second_takes_the_even, "as (x[2i], x[2i])"),
    ("14.6", "solutions.modern", "ReLUSquaredFFN.__init__", _relu2_widened_inside,
     "w1.weight has shape [36, 8], expected [24, 8]"),
    # Held-out set 10: an input changed in place is asked before any property that reuses it; a probe that cannot
    # read an output of another shape says so, and the contract's shapes come first.
    ("11.1", "solutions.generation", "next_token_probs", _probs_divides_in_place, "argument 1 changed during the call"),
    ("12.1", "solutions.quantization", "quantize_int8", _quantize_scalar_scale, "scale [] float32, expected"),
    ("5.1", "solutions.rope", "rope_angles", _angles_theta_typo, "pair i turns by p · θ^(−2i/d_k) at position p"),
    ("10.2", "solutions.training", "clip_grad_norm", _clip_returns_squared_norm, "squares of the expected ones"),
    ("13.2", "solutions.classic", "sinusoidal_positions", _sinusoid_base_typo, "position 1's angles by pair"),
    # Right values, wrong gradient: only the gradient property sees it.
    ("4.1", "solutions.swiglu", "silu", _silu_gate_detached, "autograd's gradient of silu is the derivative"),
    ("6.1", "solutions.attention", "softmax", _softmax_through_numpy, "in bfloat16: your code raised TypeError"),
    # Writing into an argument: the check compares each case's tensors before and after the call.
    ("7.1", "solutions.block", "TransformerBlock.forward", _block_adds_in_place, "changed its input x in place"),
    ("3.1", "solutions.rmsnorm", "rms_norm", _rms_norm_zeros, "every value of yours is 0"),
    # Coverage the visible cases lack: other dtypes, and a batch dim more or less.
    ("2.1", "solutions.embedding", "embedding", _embedding_one_hot, "in float64: your code raised RuntimeError"),
    ("2.1", "solutions.embedding", "embedding", _embedding_squeezed, "ids of shape (1, 3) and W (7, 3) give an output "
     "of shape [3, 3]"),
    ("2.1", "solutions.embedding", "embedding", _embedding_reads_data, "no grad_fn"),
    # Properties that fix a value the visible cases do not reach.
    ("14.4", "solutions.modern", "lr_wsd_schedule", _wsd_cosine_decay, "progress 0.7: 1.78033, expected 1.625"),
    ("14.3", "solutions.modern", "parameter_groups", _groups_1d_to_no_decay, "kernel (3-D) is in 'muon'"),
    ("14.3", "solutions.modern", "parameter_groups", _groups_head_by_name, "Linears named heads and output last"),
    ("10.6", "solutions.training", "train", _train_clips_every_group, "b's left as it was"),
    ("10.6", "solutions.training", "train", _train_evaluates_from_start, "evaluate ran with [5, 8], expected [3, 6]"),
    ("14.5", "solutions.modern", "softcap", _softcap_beyond_the_cap_only, "between the two it bends smoothly"),
    ("16.1", "solutions.datalimit", "dropout", _dropout_one_mask_for_the_rows, "one mask shared by the rows"),
    ("6.2", "solutions.attention", "scaled_dot_product_attention", _sdpa_sizes_from_dim_2,
     "your code raised IndexError: tuple index out of range"),
    # How a module is built: what quantize_model swaps, the dtype it is given, the init of what it ties.
    ("4.3", "solutions.swiglu", "SwiGLU.forward", _swiglu_module_reads_weights, "has no attribute 'weight'"),
    ("13.4", "solutions.classic", "GeluFFN.__init__", _gelu_ffn_without_dtype, "w1.weight is float32"),
    ("13.6", "solutions.classic", "ClassicLM.__init__", _classic_lm_tied_to_the_head,
     "token_embeddings.weight (the contract: an Embedding's N(0, 1)): the weights' std is"),
    ("13.6", "solutions.classic", "ClassicLM.forward", _classic_lm_scales_the_embeddings,
     "the first block's input and token_embeddings(ids)"),
    ("13.6", "solutions.classic", "ClassicLM.forward", _classic_lm_adds_each_block,
     "block 1's input and block 0's output"),
    ("9.1", "solutions.data", "get_batch", _get_batch_on_cpu, "returned x and y on ['cpu', 'cpu']"),
    # An argument handed on, state restored in place, a dtype kept: what only another use of the code shows.
    ("7.1", "solutions.block", "TransformerBlock.forward", _block_drops_the_cache, "self.attn without that kv_cache"),
    ("10.5", "solutions.training", "load_checkpoint", _load_checkpoint_assigns, "are new tensors, not the parameters"),
    ("15.1", "solutions.inside", "attention_inputs", _attention_inputs_as_float, "the tensors are float32"),
    # Boundary values the contract allows and no visible case reaches.
    ("11.1", "solutions.generation", "next_token_probs", _probs_topk_unguarded,
     "top_k 50 > the vocabulary's 12 against no filter: your code raised RuntimeError"),
    ("10.3", "solutions.training", "lr_cosine_schedule", _cosine_warmup_through_its_end,
     "warmup 0 and cycle 40, it = 0: your code raised ZeroDivisionError"),
    ("14.1", "solutions.modern", "newton_schulz", _ns_without_eps, "on an all-zero G (4, 6), the result and zeros: "
     "24 of 24 values are NaN or inf"),
    ("12.1", "solutions.quantization", "quantize_int8", _quantize_tests_the_max,
     "row 1 is all 5e-44, per channel (max |w| / 127 underflows to 0)"),
    ("10.4", "solutions.training", "AdamW.step", _adamw_closure_without_grad,
     "AdamW.step(closure), with a closure that runs backward: your code raised RuntimeError"),
    ("11.2", "solutions.generation", "generate", _generate_stacks_the_new_tokens,
     "max_new_tokens=0, use_cache=False) and the prompt: your code raised RuntimeError"),
    # A clause's own property, where the visible cases only show values that differ.
    ("9.2", "solutions.bpe", "train_bpe", _bpe_tie_first_counted,
     "a tie goes to the greatest pair: (b'b', b'a') beats (b'a', b'z'), but train_bpe('az\\nba', 1) learns the "
     "merges [(b'a', b'z')]"),
    ("9.2", "solutions.bpe", "train_bpe", _bpe_characters,
     "train_bpe('é é é', 1) learns the merges [(b' ', b'\\xc3\\xa9')]"),
    ("10.5", "solutions.training", "save_checkpoint", _save_checkpoint_parameters_only,
     "restores the model's whole state_dict in place, buffers too, but your code raised RuntimeError"),
    ("10.3", "solutions.training", "lr_cosine_schedule", _cosine_over_one_more,
     "exactly min_lr at it = cosine_cycle_iters and at every it after, but with max_lr 2, min_lr 0.5, warmup 10 and "
     "cycle 70, it = 70: 0.500994, expected 0.5"),
    ("14.4", "solutions.modern", "lr_wsd_schedule", _wsd_decay_from_the_stable_end,
     "exactly max_lr from progress = warmup until 1 − decay, but with max_lr 2, min_lr 0.5, warmup 0.1 and decay "
     "0.4, progress 0.599: 2.00375, expected 2"),
    # One clause of a docstring each, named by the property for that clause.
    ("11.2", "solutions.generation", "generate", _generate_eos_if_truthy, "eos_token_id=0 and max_new_tokens=10 gives"),
    ("11.2", "solutions.generation", "generate", _generate_global_rng,
     "after torch.manual_seed(0) and then torch.manual_seed(1)"),
    ("12.2", "solutions.quantization", "Int8Linear.__init__", _int8_init_without_device,
     "Int8Linear(5, 3, device='meta'): weight_int8 is on cpu"),
    ("12.2", "solutions.quantization", "Int8Linear.forward", _int8_forward_rounds_x_too,
     "Int8Linear(2a − 3b) and 2·Int8Linear(a) − 3·Int8Linear(b)"),
    ("12.3", "solutions.quantization", "quantize_model", _quantize_model_per_channel_not_passed_on,
     "blocks.0's scale and your quantize_int8 of the weight it replaced, per_channel=False"),
    ("12.3", "solutions.quantization", "quantize_model", _quantize_model_every_matrix, "became Int8Linear too"),
    # The red team's slips that only heard how values differ: a property names the rule they break.
    ("1.1", "solutions.linear", "linear", _linear_scaled, "the unit vector e_i gives W's column i"),
    ("2.2", "solutions.embedding", "Embedding.forward", _embedding_module_scaled, "row i of the module's own weight"),
    ("3.1", "solutions.rmsnorm", "rms_norm", _rms_norm_gain_inside, "rms_norm(x, ones) · w"),
    ("3.2", "solutions.rmsnorm", "RMSNorm.forward", _rms_norm_module_gain_twice, "x / √(mean(x²) + 1e-05) · w"),
    ("4.1", "solutions.swiglu", "silu", _silu_gelu_approximation, "silu(1) = σ(1) = 0.731059"),
    ("4.2", "solutions.swiglu", "swiglu", _swiglu_silu_after_product, "swiglu with 2·w3 and 2 · swiglu with w3"),
    ("4.3", "solutions.swiglu", "SwiGLU.forward", _SwiGLU_silu_after_product, "its own w2(SiLU(w1(x)) ⊙ w3(x))"),
    ("10.2", "solutions.training", "clip_grad_norm", _clip_returns_a_float, "returned float, expected a 0-dim tensor"),
    ("10.4", "solutions.training", "AdamW.step", _adamw_shared_step_count, "in an AdamW of its own"),
    ("11.1", "solutions.generation", "next_token_probs", _probs_times_temperature,
     "temperature 0.5 and the same filter on logits / 0.5"),
    ("12.1", "solutions.quantization", "quantize_int8", _quantize_rounds_half_up, "(ties to even)"),
    ("13.1", "solutions.classic", "layer_norm", _layer_norm_default_eps_typo, "layer_norm(x, w, b, eps=1e-5)"),
    ("13.4", "solutions.classic", "GeluFFN.forward", _gelu_ffn_silu, "its own w2(GELU(w1(x))), GELU exact"),
    ("13.5", "solutions.classic", "ClassicBlock.forward", _block_drops_positions,
     "token_positions [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], the block and x + attn(ln1(x), token_positions)"),
    ("14.1", "solutions.modern", "newton_schulz", _ns_one_step_more, "with steps=0, the result and the diagonal"),
    ("14.2", "solutions.modern", "Muon.step", _muon_decays_after_the_step, "lr · weight_decay · p + lr · O"),
    ("14.6", "solutions.modern", "ReLUSquaredFFN.forward", _relu2_halved, "its own w2(relu(w1(x))²)"),
    ("16.1", "solutions.datalimit", "dropout", _dropout_mask_in_x_dtype, "on a float64 x (3, 4, 5), p 0.3"),
    ("16.2", "solutions.datalimit", "distillation_loss", _distill_kl_mean_over_vocab, "log 3 − 1.5 log 2 = 0.0588915"),
    # Rules the visible cases meet only by coincidence (the default theta, one head per hook, a 2-D ids).
    ("5.1", "solutions.rope", "rope", _rope_theta_left_out, "rope(x, positions, theta=100) on x = (1, 0, 1, 0)"),
    ("5.2", "solutions.rope", "RotaryPositionalEmbedding.__init__", _rope_tables_theta_left_out,
     "RotaryPositionalEmbedding(100, 4, 8) on x = (1, 0, 1, 0)"),
    ("6.1", "solutions.attention", "softmax", _softmax_max_along_the_last_dim,
     "dim=0, with a different number from −40 … 40 added to each slice"),
    ("6.2", "solutions.attention", "scaled_dot_product_attention", _sdpa_precedence, "e^√2 / (e^√2 + 2) = 0.6728"),
    ("6.3", "solutions.attention", "MultiHeadSelfAttention.forward", _mhsa_scaled_twice,
     "MultiHeadSelfAttention(8, 1) on x (2, 5, 8), the output and output_proj(softmax("),
    ("6.3", "solutions.attention", "MultiHeadSelfAttention.__init__", _mhsa_rope_arguments_swapped,
     "MultiHeadSelfAttention(32, 4, 16, 500).rope and RotaryPositionalEmbedding(500, 8, 16)"),
    ("7.1", "solutions.block", "TransformerBlock.__init__", _block_theta_left_out,
     "TransformerBlock(32, 4, 48, 16, theta=500) with ffn.w2 at zero"),
    ("8.1", "solutions.model", "TransformerLM.__init__", _lm_theta_left_out,
     "two TransformerBlock(32, 4, 48, 16, 500)"),
    ("15.1", "solutions.inside", "attention_inputs", _inputs_with_a_batch_dim, "one sequence without a batch "
     "dim, tensor 0 has shape (1, 8, 32), expected (8, 32)"),
    ("15.2", "solutions.inside", "previous_token_score", _previous_counts_query_0,
     "a head (8, 8) that attends only to each token itself (query 0 too) scores 0.125 as previous-token head"),
    ("15.3", "solutions.inside", "ablate_heads", _ablate_a_hook_per_head,
     "after ablating heads 0 and 3 and removing the handle"),
    ("15.3", "solutions.inside", "ablate_heads", _ablate_float32_mask,
     "on MultiHeadSelfAttention(32, 4, dtype=torch.bfloat16) with head 1 ablated"),
    ("14.5", "solutions.modern", "softcap", _softcap_from_exp, "softcap(x, 30) is NaN or inf at x = -10000"),
    ("6.2", "solutions.attention", "scaled_dot_product_attention", _sdpa_fills_minus_1e9,
     "in float16: your code raised RuntimeError"),
    ("5.2", "solutions.rope", "RotaryPositionalEmbedding.__init__", _rope_tables_as_attributes,
     "it keeps cos, sin as plain attributes"),
    ("10.2", "solutions.training", "clip_grad_norm", _clip_float_without_gradients,
     "clip_grad_norm returned a float, expected a 0-dim tensor"),
    ("10.6", "solutions.training", "train", _train_yields_group_0s_rate, "the first group whose lr_scale is 0.5"),
    ("16.1", "solutions.datalimit", "dropout", _dropout_copies_at_p_0, "returned a new tensor and drew random numbers"),
    ("4.2", "solutions.swiglu", "swiglu", _swiglu_adds_the_residual, "with w2 all zeros, the output and 0"),
    ("3.1", "solutions.rmsnorm", "rms_norm", _rms_norm_by_std, "the mean of y² over the last dim and 1"),
    ("13.1", "solutions.classic", "layer_norm", _layer_norm_by_moments, "layer_norm(x + 300) and layer_norm(x)"),
    ("14.1", "solutions.modern", "newton_schulz", _ns_elementwise_square, "newton_schulz(Q G R) and Q newton_schulz"),
    ("1.1", "solutions.linear", "linear", _linear_reshape_back_minus_one, "for x (0, 2, 5), an empty batch"),
    ("3.1", "solutions.rmsnorm", "rms_norm", _rms_norm_gain_after_the_cast,
     "in bfloat16 with float32 weights: expected a bfloat16 tensor (x's dtype), got float32"),
    ("9.1", "solutions.data", "get_batch", _get_batch_sorted_starts, "in the order drawn"),
    ("10.2", "solutions.training", "clip_grad_norm", _clip_float_copies, "the gradients themselves were not scaled"),
    ("12.3", "solutions.quantization", "quantize_model", _quantize_by_class_name, "among them"),
    ("14.1", "solutions.modern", "newton_schulz", _ns_in_the_inputs_dtype, "the bfloat16 output and the float32 one"),
    ("15.1", "solutions.inside", "attention_inputs", _inputs_squeezed, "on ids (1, 8), a batch of one"),
    ("16.1", "solutions.datalimit", "dropout", _dropout_seeded_without_a_generator, "two calls in a row dropped"),
    ("6.2", "solutions.attention", "scaled_dot_product_attention", _sdpa_scales_the_output,
     "is scaled after the softmax"),
    ("16.2", "solutions.datalimit", "distillation_loss", _distill_without_the_max, "with +1000 added to every"),
    ("1.1", "solutions.linear", "linear", _linear_squeezed, "W (1, 6) give y of shape"),
    ("3.2", "solutions.rmsnorm", "RMSNorm.forward", _rms_norm_module_in_gain_dtype, "expected x's dtype"),
    ("4.1", "solutions.swiglu", "silu", _silu_one_minus, "1 − σ(−x) cancels to 0"),
    ("12.3", "solutions.quantization", "quantize_model", _quantize_exact_type, "a subclass of your Linear among"),
    ("14.3", "solutions.modern", "parameter_groups", _groups_skip_frozen, "in no list"),
    ("14.6", "solutions.modern", "ReLUSquaredFFN.forward", _relu2_in_place, "a backward pass through"),
    ("16.1", "solutions.datalimit", "dropout", _dropout_multiplies, "are NaN: a dropped entry is 0"),
    ("6.3", "solutions.attention", "MultiHeadSelfAttention.forward", _mhsa_adds_residual,
     "with output_proj at zero"),
    ("10.3", "solutions.training", "lr_cosine_schedule", _cosine_as_tensor, "expected a Python float"),
]


@pytest.mark.parametrize("task_id, module, name, slip, words", SLIPS, ids=[s[0] for s in SLIPS])
def test_a_slip_in_no_catalogue_is_still_described(reference, task_id, module, name, slip, words):
    with mistakes.applied({"patches": [(module, name, slip)]}):
        verdict = checks.run(task_id)
    assert verdict.status == checks.FAIL and verdict.mistake is None, verdict.line
    assert words in verdict.message, verdict.line


def test_how_it_differs_names_each_pattern():
    want = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(0))
    drift = want.clone()
    drift[:, 3:] += 1
    column = want.clone()
    column[..., 1] += 1
    nan = want.clone()
    nan[1, 2, 3] = float("nan")
    expect = [(want * 3, "3 times the expected one"), (-want, "wrong sign"), (want + 0.5, "off by the same +0.5"),
              (want.flip(1), "in the wrong places"), (torch.softmax(want, -1), "sums to 1"),
              (want.abs() ** 2, None),
              (drift, "axis 1 (size 5) positions 0–2 match and every later one differs, from position 3 on"),
              (column, "axis 2 (size 4) positions 0, 2 and 3 match; position 1 differs"),
              (nan, "NaN or inf at 1 of 40 entries"),
              (want + torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(1)),
               "values differ from the expected")]
    for got, words in expect:
        message = how_it_differs(got, want)
        if words is not None:
            assert words in message, (words, message)
        assert "largest difference" in message or "NaN" in message, message
    assert how_it_differs(want.abs() ** 2, want.abs()).startswith("your values are the squares")
    # One number fits every pattern (2.5 is 2 + 0.5, 1.25 × 2): a scalar is only given with its expected value.
    for got in (torch.tensor(2.5), torch.tensor([4.5]), torch.tensor(-2.0)):
        assert how_it_differs(got, torch.tensor(2.0).reshape(got.shape)) == f"you give {got.item():g}, expected 2"
    # A square is no coincidence of one number (a norm without its square root, 10.2): that one is named.
    assert how_it_differs(torch.tensor(4.0), torch.tensor(2.0)).startswith("your values are the squares")


class Saved:  # what a checkpoint may not hold: torch.load(weights_only=True) refuses it
    pass


def test_an_error_is_one_line_without_colour_codes_or_advice_that_does_not_apply():
    import io

    buffer = io.BytesIO()
    torch.save({"state": Saved()}, buffer)
    buffer.seek(0)
    with pytest.raises(Exception) as refused:
        torch.load(buffer, weights_only=True)
    assert "\x1b[" in str(refused.value) and "weights_only` set to `False`" in str(refused.value)  # torch's words
    line = checks._one_line(refused.value)
    assert "\x1b" not in line and "False" not in line and "\n" not in line, line
    assert "refused the file: Unsupported global" in line and "Saved" in line, line


def test_a_wrong_dtype_is_named_with_the_dtype_given():
    from minilm.course import exercises

    s = exercises.get("14.1")
    case = s.cases()[-1]  # the float64 G
    problem = s.invariant({"shape": list(case["G"].shape), "dtype": "torch.float32"}, case)
    assert problem.mistake == "wrong_dtype" and "got shape [3, 5] and dtype float32" in problem, problem
    made_up = s.invariant({"shape": list(case["G"].shape), "dtype": "anything a submission says"}, case)
    assert "anything" not in made_up  # a submission's own words never reach a message


def test_an_error_inside_an_earlier_module_points_at_the_line_that_called_it(monkeypatch):
    # rope.py's argument checks raise, but the bad argument came from model.py, the task being checked.
    import importlib

    monkeypatch.setenv("MINILM_IMPL", "solutions")
    for name in ("rope", "model"):
        importlib.import_module(f"solutions.{name}")
    ns: dict = {}
    exec(compile("def check(p):\n    raise ValueError('positions must be 1-D')\n",
                 str(tasks.ROOT / "solutions" / "rope.py"), "exec"), ns)
    exec(compile("def forward(p):\n    return check(p)\n", str(tasks.ROOT / "solutions" / "model.py"), "exec"), ns)
    with pytest.raises(ValueError) as raised:
        ns["forward"](0)
    assert checks.raised_at(raised.value) == "solutions/rope.py:2"  # no task running: the deepest line
    with checks._running("8.1"):
        assert checks.raised_at(raised.value) == "solutions/model.py:2"  # checking 8.1: its own line
    assert checks._raised(raised.value, "8.1")[2] == "solutions/model.py:2"  # as a check's verdict reports it
