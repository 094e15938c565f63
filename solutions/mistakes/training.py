"""Known mistakes in notebooks 9–10b (data, BPE, training and its loop: Tasks 9.1–10.6).
See solutions/mistakes/__init__.py for the format and how they are used."""

from __future__ import annotations

import contextlib
import math
from collections import Counter

import numpy as np
import regex
import torch

from minilm.course.validate import check_bpe_args, check_positive_int, check_token_array
from solutions.bpe import GPT2_PATTERN, Tokenizer
from solutions.mistakes import mutant, variant
from solutions.training import Step, clip_grad_norm

# ---------------------------------------------------------------- 9.1: get_batch


def _get_batch_not_shifted(dataset, batch_size, context_length, device="cpu"):
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,)).tolist()
    x = torch.from_numpy(np.stack([np.asarray(dataset[i : i + context_length], dtype=np.int64) for i in starts]))
    return x.to(device), x.clone().to(device)  # the target is the input itself


def _get_batch_last_start_never_drawn(dataset, batch_size, context_length, device="cpu"):
    check_positive_int(batch_size, "batch_size", "get_batch")
    check_positive_int(context_length, "context_length", "get_batch")
    check_token_array(dataset, context_length, "get_batch")
    # randint's high is exclusive, so "- 1" drops the last valid start len - context_length - 1.
    starts = torch.randint(0, len(dataset) - context_length - 1, (batch_size,)).tolist()
    windows = torch.from_numpy(np.stack([np.asarray(dataset[i : i + context_length + 1], dtype=np.int64)
                                         for i in starts]))
    return windows[:, :-1].contiguous().to(device), windows[:, 1:].contiguous().to(device)


# ---------------------------------------------------------------- 9.2, 9.3: BPE, Tokenizer


def _train_bpe_variant(pretokenize: bool = True, weighted: bool = True, greatest: bool = True,
                       left_to_right: bool = True, by_string: bool = False):
    """A BPE trainer that recounts every pair at every merge, with one of the usual mistakes switched on."""
    def merge(word, pair, token):
        if by_string:  # tokens joined with a separator and the pair replaced as a string: "xa|b" → "xab"
            return b"\0".join(word).replace(pair[0] + b"\0" + pair[1], token).split(b"\0")
        out, j = [], 0
        if left_to_right:
            while j < len(word):
                if j + 1 < len(word) and (word[j], word[j + 1]) == pair:
                    out.append(token)
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            return out
        j = len(word) - 1  # from the right: "aaa" with (a, a) becomes [a, aa]
        while j >= 0:
            if j >= 1 and (word[j - 1], word[j]) == pair:
                out.append(token)
                j -= 2
            else:
                out.append(word[j])
                j -= 1
        return out[::-1]

    def train_bpe(text, num_merges):
        check_bpe_args(text, num_merges, "train_bpe")
        chunks = Counter(regex.findall(GPT2_PATTERN, text)) if pretokenize else Counter([text])
        words = [([bytes([b]) for b in chunk.encode("utf-8")], freq) for chunk, freq in chunks.items()]
        vocab, merges = {i: bytes([i]) for i in range(256)}, []
        for _ in range(num_merges):
            counts = Counter()
            for word, freq in words:
                for pair in zip(word, word[1:]):
                    counts[pair] += freq if weighted else 1  # unweighted: once per distinct chunk
            if not counts:
                break
            top = max(counts.values())
            tied = [pair for pair, c in counts.items() if c == top]
            best = max(tied) if greatest else min(tied)
            vocab[256 + len(merges)] = best[0] + best[1]
            merges.append(best)
            words = [(merge(word, best, best[0] + best[1]), freq) for word, freq in words]
        return vocab, merges
    return train_bpe


def _merge_everywhere(tokens, pair):
    out, i = [], 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


def _tokenizer_bpe(choose):
    """Tokenizer._bpe that merges the pair `choose(self, pairs)` picks among the adjacent merges."""
    def _bpe(self, chunk):
        tokens = [bytes([b]) for b in chunk]
        while len(tokens) > 1:
            pairs = [p for p in zip(tokens, tokens[1:]) if p in self.ranks]
            if not pairs:
                break
            tokens = _merge_everywhere(tokens, choose(self, pairs))
        return tokens
    return _bpe


def _tokenizer_longest_match(self, chunk):
    """Greedy: the longest token of vocab from the left, then the next."""
    out, i = [], 0
    while i < len(chunk):
        j = max(j for j in range(i + 1, len(chunk) + 1) if chunk[i:j] in self.ids)
        out.append(chunk[i:j])
        i = j
    return out


def _tokenizer_encode(split_specials: bool = True, longest_first: bool = True, pretokenize: bool = True):
    """Tokenizer.encode with one of the usual mistakes about special tokens or pre-tokenization."""
    def encode(self, text):
        from solutions.bpe import check_text

        check_text(text, "Tokenizer.encode")
        # longest_first=False: the shorter first, so "<|endoftext|>" wins over its double
        specials = sorted(self.special_tokens if split_specials else [], key=len, reverse=longest_first)
        pattern = "(" + "|".join(regex.escape(t) for t in specials) + ")" if specials else None
        pieces = regex.split(pattern, text) if pattern else [text]
        ids = []
        for k, piece in enumerate(pieces):
            if k % 2:
                ids.append(self.ids[piece.encode("utf-8")])
                continue
            chunks = [m.group() for m in regex.finditer(GPT2_PATTERN, piece)] if pretokenize else [piece]
            for chunk in chunks:
                ids += [self.ids[t] for t in self._bpe(chunk.encode("utf-8"))]
        return ids
    return encode


def _tokenizer_decode_per_token(self, ids):
    return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)


# ---------------------------------------------------------------- 10.1–10.4: training


def _cross_entropy_no_logsumexp(logits, targets):
    log_probs = logits - torch.log(torch.exp(logits).sum(dim=-1, keepdim=True))  # exp overflows at ~88
    return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()


def _cross_entropy_sum(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def _clip_per_parameter(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = []
    for g in grads:  # each parameter clipped on its own
        norm = g.norm()
        if norm > max_norm:
            g.mul_(max_norm / (norm + 1e-6))
        norms.append(norm)
    return torch.stack(norms).norm()


def _clip_under_max_norm(parameters, max_norm):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norm = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))
    for g in grads:  # no `if norm > max_norm`: small gradients are scaled up to max_norm
        g.mul_((max_norm / (norm + 1e-6)).to(g.dtype))
    return norm


def _lr_cosine(warmup_from: int = 0, over_whole_cycle: bool = False, floor: bool = True):
    """lr_cosine_schedule with one slip: the warmup off by one (from 1), the cosine spread over
    cosine_cycle_iters instead of cosine_cycle_iters − warmup_iters (it ends above min_lr), or no
    floor after the cycle (the cosine climbs back up)."""
    def lr_cosine_schedule(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
        if it < warmup_iters:
            return (it + warmup_from) / warmup_iters * max_lr
        if floor and it > cosine_cycle_iters:
            return min_lr
        span = cosine_cycle_iters if over_whole_cycle else cosine_cycle_iters - warmup_iters
        progress = (it - warmup_iters) / span
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return lr_cosine_schedule


def _adam_step(l2: bool, bias_correction: bool, decay_without_lr: bool = False, eps_inside_sqrt: bool = False):
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                t, m, v, g = state["step"], state["exp_avg"], state["exp_avg_sq"], p.grad
                if l2:
                    g = g + wd * p  # weight decay through the gradient: Adam + L2, not AdamW
                elif decay_without_lr:
                    p.mul_(1 - wd)  # θ ← θ − λθ: the decay ignores the (scheduled) learning rate
                else:
                    p.mul_(1 - lr * wd)
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                m_hat, v_hat = (m / (1 - beta1**t), v / (1 - beta2**t)) if bias_correction else (m, v)
                denom = (v_hat + eps).sqrt() if eps_inside_sqrt else v_hat.sqrt() + eps  # inside: sqrt(v̂ + eps)
                p.addcdiv_(m_hat, denom, value=-lr)
        return None
    return step



# ---------------------------------------------------------------- 10.6: the training loop


def _train_loop(zero: str = "before", clip_after_step: bool = False, lr_scale: bool = True, eval_grad: bool = False,
                eval_before_count: bool = False, yield_before_count: bool = False, detach: bool = True,
                listed: bool = True, norm_as_float: bool = True):
    """The training loop with one of the usual mistakes: `zero` "never" or "after_backward" (the gradients
    zeroed between backward and step), and so on."""
    def train(loss_of, parameters, optimizer, batch, lr_at, clip=1.0, start=0, evaluate=None, eval_every=0):
        parameters = list(parameters) if listed else parameters
        step = start
        while (lr := lr_at(step)) is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr * (group.get("lr_scale", 1.0) if lr_scale else 1.0)
            x, y = batch(step)
            loss = loss_of(x, y)
            if zero == "before":
                optimizer.zero_grad()
            loss.backward()
            if zero == "after_backward":
                optimizer.zero_grad()
            grad_norm = None
            if clip is not None and not clip_after_step:
                grad_norm = clip_grad_norm(parameters, clip)
            optimizer.step()
            if clip is not None and clip_after_step:
                grad_norm = clip_grad_norm(parameters, clip)
            if grad_norm is not None and norm_as_float:
                grad_norm = float(grad_norm)
            val_loss = None
            if evaluate is not None and eval_before_count and step % eval_every == 0:
                with torch.no_grad():
                    val_loss = evaluate(step)
            step += 1
            if evaluate is not None and not eval_before_count and step % eval_every == 0:
                with contextlib.nullcontext() if eval_grad else torch.no_grad():
                    val_loss = evaluate(step)
            yield Step(step - 1 if yield_before_count else step, loss.detach() if detach else loss, lr, grad_norm,
                       val_loss)
    return train


_D, _BPE, _T = "solutions.data", "solutions.bpe", "solutions.training"

_tokenizer_init = Tokenizer.__init__


def _Tokenizer_specials_share_an_id(self, vocab, merges, special_tokens=None):
    """max(vocab) + 1 taken from the vocab given, not the one growing: every new special token gets that id."""
    _tokenizer_init(self, vocab, merges, special_tokens)
    first = max(vocab) + 1
    for token in self.special_tokens:
        b = token.encode("utf-8")
        if self.ids[b] > max(vocab):
            self.vocab.pop(self.ids[b], None)
            self.ids[b] = first
            self.vocab[first] = b


MISTAKES: list[dict] = [
    # Task 9.1: get_batch
    mutant("targets_not_shifted", "9.1", [(_D, "get_batch", _get_batch_not_shifted)], "shifted"),
    mutant("last_start_never_drawn", "9.1", [(_D, "get_batch", _get_batch_last_start_never_drawn)], "exclusive"),
    # Task 9.2: train_bpe
    mutant("bpe_no_pretokenization", "9.2", [(_BPE, "train_bpe", _train_bpe_variant(pretokenize=False))],
           "pre-token"),
    mutant("bpe_tie_smallest_pair", "9.2", [(_BPE, "train_bpe", _train_bpe_variant(greatest=False))], "greatest"),
    mutant("bpe_counts_not_weighted", "9.2", [(_BPE, "train_bpe", _train_bpe_variant(weighted=False))], "occurs"),
    mutant("bpe_merges_right_to_left", "9.2", [(_BPE, "train_bpe", _train_bpe_variant(left_to_right=False))],
           "left to right"),
    mutant("bpe_merges_across_tokens", "9.2", [(_BPE, "train_bpe", _train_bpe_variant(by_string=True))],
           "two adjacent tokens"),
    # Task 9.3: Tokenizer's encode and decode
    mutant("specials_share_an_id", "9.3", [("solutions.bpe", "Tokenizer.__init__", _Tokenizer_specials_share_an_id)],
           "expected [296] and [297]", broken="new special tokens get ids"),
    mutant("tokenizer_merges_by_frequency", "9.3",
           [(_BPE, "Tokenizer._bpe",
             _tokenizer_bpe(lambda self, pairs: min(set(pairs), key=lambda p: (-pairs.count(p), self.ranks[p]))))],
           "most often"),
    mutant("tokenizer_latest_merge_first", "9.3",
           [(_BPE, "Tokenizer._bpe", _tokenizer_bpe(lambda self, pairs: max(pairs, key=self.ranks.get)))],
           "order learned"),
    mutant("tokenizer_longest_match", "9.3", [(_BPE, "Tokenizer._bpe", _tokenizer_longest_match)], "longest token"),
    mutant("tokenizer_specials_pretokenized", "9.3",
           [(_BPE, "Tokenizer.encode", _tokenizer_encode(split_specials=False))], "special tokens first"),
    mutant("tokenizer_specials_not_longest_first", "9.3",
           [(_BPE, "Tokenizer.encode", _tokenizer_encode(longest_first=False))], "longest one must win"),
    mutant("tokenizer_no_pretokenization", "9.3",
           [(_BPE, "Tokenizer.encode", _tokenizer_encode(pretokenize=False))], "pre-token boundaries"),
    mutant("decode_per_token", "9.3", [(_BPE, "Tokenizer.decode", _tokenizer_decode_per_token)],
           "part of a character"),
    # Task 10.1: cross_entropy
    mutant("no_logsumexp", "10.1", [(_T, "cross_entropy", _cross_entropy_no_logsumexp)], "log-sum-exp"),
    variant("sum_not_mean", "10.1", [(_T, "cross_entropy", _cross_entropy_sum)]),
    # Task 10.2: clip_grad_norm
    mutant("per_parameter_clipping", "10.2", [(_T, "clip_grad_norm", _clip_per_parameter)], "per parameter"),
    mutant("clips_under_max_norm", "10.2", [(_T, "clip_grad_norm", _clip_under_max_norm)], "only when"),
    # Task 10.3: lr_cosine_schedule
    mutant("warmup_off_by_one", "10.3", [(_T, "lr_cosine_schedule", _lr_cosine(warmup_from=1))], "off by one"),
    mutant("cosine_past_cycle", "10.3", [(_T, "lr_cosine_schedule", _lr_cosine(floor=False))], "stays at min_lr"),
    mutant("cosine_over_cycle", "10.3", [(_T, "lr_cosine_schedule", _lr_cosine(over_whole_cycle=True))],
           "cosine_cycle_iters − warmup_iters"),
    # Task 10.4: AdamW
    mutant("adam_l2", "10.4", [(_T, "AdamW.step", _adam_step(l2=True, bias_correction=True))], "decoupled"),
    mutant("no_bias_correction", "10.4", [(_T, "AdamW.step", _adam_step(l2=False, bias_correction=False))],
           "bias correction"),
    mutant("decay_without_lr", "10.4",
           [(_T, "AdamW.step", _adam_step(l2=False, bias_correction=True, decay_without_lr=True))],
           "times the learning rate"),
    mutant("adam_eps_inside_sqrt", "10.4",
           [(_T, "AdamW.step", _adam_step(l2=False, bias_correction=True, eps_inside_sqrt=True))],
           "eps belongs outside the square root"),
    # Task 10.6: train
    mutant("gradients_pile_up", "10.6", [(_T, "train", _train_loop(zero="never"))], "moved w by 6",
           broken="each update follows that step's gradient alone"),
    mutant("zero_grad_after_backward", "10.6", [(_T, "train", _train_loop(zero="after_backward"))], "moved w by 0",
           broken="each update follows that step's gradient alone"),
    mutant("clips_after_the_step", "10.6", [(_T, "train", _train_loop(clip_after_step=True))],
           "the optimizer's steps saw gradients", broken="with clip, the optimizer steps on gradients"),
    mutant("ignores_lr_scale", "10.6", [(_T, "train", _train_loop(lr_scale=False))], "lr_scale is 0.5",
           broken="before the optimizer's step, every param group's lr"),
    mutant("evaluates_with_grad", "10.6", [(_T, "train", _train_loop(eval_grad=True))], "gradients on",
           broken="evaluate(s) runs after each step s"),
    mutant("evaluates_before_counting", "10.6", [(_T, "train", _train_loop(eval_before_count=True))],
           "expected [3, 6]", broken="evaluate(s) runs after each step s"),
    mutant("numbers_steps_from_start", "10.6", [(_T, "train", _train_loop(yield_before_count=True))],
           "expected [3, 4, 5]", broken="it asks for batch(s)"),
    mutant("clips_a_spent_generator", "10.6", [(_T, "train", _train_loop(listed=False))], "given as a generator",
           broken="with clip, the optimizer steps on gradients"),
    mutant("grad_norm_as_tensor", "10.6", [(_T, "train", _train_loop(norm_as_float=False))], "a Python float",
           broken="with clip, the optimizer steps on gradients"),
    mutant("loss_keeps_its_graph", "10.6", [(_T, "train", _train_loop(detach=False))], "still requires grad",
           broken="the loss it yields is detached"),
]
