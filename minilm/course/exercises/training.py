"""Specs of notebooks 9–10b: data, BPE, training and its loop (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import io
import itertools
import math
import os
import tempfile

import numpy as np
import torch
from torch import nn

from minilm.course.exercises import (
    Problem,
    Property,
    at_edge,
    differs,
    gen,
    gradient_follows,
    keeps_inputs,
    off_points,
    optimizer_edges,
    randn,
    shown,
    spec,
)

# ---------------------------------------------------------------- 9.1: get_batch


def _get_batch_collect(m, c):
    data = c["data"].numpy().astype(c["np_dtype"])  # token i is off + i: a window's first token names its start
    torch.manual_seed(c["seed"])
    x, y = m.get_batch(data, c["batch"], c["ctx"], "cpu")
    torch.manual_seed(c["seed"])
    again, _ = m.get_batch(data, c["batch"], c["ctx"], "cpu")
    starts = []
    if c.get("small"):  # ctx + 3 tokens: the valid starts are 0, 1 and 2, and 300 draws see each
        small = np.arange(c["ctx"] + 3, dtype=np.int64)
        torch.manual_seed(c["seed"])
        starts = sorted(set(m.get_batch(small, 300, c["ctx"], "cpu")[0][:, 0].tolist()))
    return {"x": x, "y": y, "again": again, "starts": starts}


def _get_batch_invariant(got, c) -> Problem | None:
    x, y, shape = got["x"], got["y"], (c["batch"], c["ctx"])
    for name, t in (("x", x), ("y", y)):
        if type(t) is not torch.Tensor:
            return Problem(f"get_batch returned {name} of type {type(t).__name__}, expected a tensor")
        if tuple(t.shape) != shape:
            return Problem(f"{name} has shape {tuple(t.shape)}, expected (batch_size, context_length) = {shape}")
        if t.dtype != torch.long:
            return Problem(f"{name} has dtype {t.dtype}, expected torch.long (int64)"
                           + (f" (for a {c['np_dtype']} dataset too)" if c["np_dtype"] != "int64" else ""))
    if not bool((x[:, 1:] - x[:, :-1] == 1).all()):
        return Problem("each row of x must be consecutive tokens dataset[i : i + context_length]")
    if torch.equal(y, x):
        return Problem("y equals x: the targets must be the inputs shifted by one "
                       "(y = dataset[i + 1 : i + 1 + context_length])", "targets_not_shifted")
    if not torch.equal(y, x + 1):
        return Problem("y must be x shifted by one: y[b, t] = dataset[i + t + 1], the token that follows x[b, t]",
                       "targets_not_shifted")
    start, n = x[:, 0] - c["data"][0].item(), len(c["data"])
    if bool((start < 0).any()) or bool((start > n - c["ctx"] - 1).any()):
        return Problem("a window starts outside 0 … len(dataset) − context_length − 1")
    if type(got["again"]) is not torch.Tensor or not torch.equal(got["again"], x):
        return Problem("two calls after the same torch.manual_seed gave different batches: draw the starts with "
                       "torch.randint")
    if c.get("small") and got["starts"] != [0, 1, 2]:
        n_small, ctx = c["ctx"] + 3, c["ctx"]
        if got["starts"] == [0, 1]:
            return Problem(f"with {n_small} tokens and context_length {ctx} the valid starts are 0, 1 and 2, but 2 "
                           "(= len(dataset) − context_length − 1) was never drawn in 300 draws: torch.randint's "
                           "high is "
                           "exclusive, so torch.randint(0, len(dataset) − context_length, …) already includes the last "
                           "start", "last_start_never_drawn")
        return Problem(f"with {n_small} tokens and context_length {ctx} the valid starts are 0, 1 and 2 (uniformly), "
                       f"got starts {shown(got['starts'])}", "start_range")
    return None


def _get_batch_reads_windows(m):
    import tracemalloc

    tokens = 4_000_000
    data = np.zeros(tokens, dtype=np.uint16)  # stands for a memmap: NumPy reports what it allocates to tracemalloc
    tracemalloc.start()
    try:
        m.get_batch(data, 4, 8, "cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if peak > tokens // 2:  # a quarter of the corpus's bytes: far above 4 windows, far below a whole copy
        return (f"get_batch(a {tokens:,}-token uint16 array, batch 4, context 8) made NumPy arrays of "
                f"{peak / 1e6:.0f} MB at once, for 4 windows of 9 tokens: it copied the whole corpus")
    return None


def _get_batch_one_window(m):
    data = np.arange(100, 109, dtype=np.int64)  # context_length + 1 tokens: the only start is 0
    want = torch.from_numpy(np.stack((data[:-1], data[1:]))).unsqueeze(1).expand(2, 3, 8)
    return at_edge("on a dataset of 9 tokens 100 … 108 with context_length 8 (one window, start 0) and batch 3, "
                   "(x, y) and (dataset[:8], dataset[1:]) in every row",
                   lambda: torch.stack([t.long() for t in m.get_batch(data, 3, 8, "cpu")]), want, atol=0, rtol=0)


def _get_batch_on_device(m):
    x, y = m.get_batch(np.arange(50, dtype=np.int64), 2, 4, "meta")  # a device without data: only where it lives
    places = [t.device.type if type(t) is torch.Tensor else type(t).__name__ for t in (x, y)]
    return None if places == ["meta", "meta"] else f"get_batch(…, device='meta') returned x and y on {places}"


GET_BATCH_PROPERTIES = (
    Property("x and y are on the device it is given", _get_batch_on_device,
             example="x, y = minilm.get_batch(np.arange(50), 2, 4, 'meta')\nprint(x.device, y.device)  # meta meta",
             idea="move both tensors with .to(device) before returning them (on a laptop 'mps' or 'cuda' trains "
                  "only if the batch is there too)"),
    Property("a dataset of context_length + 1 tokens has one window: x = dataset[:-1], y = dataset[1:]",
             _get_batch_one_window,
             example="x, y = minilm.get_batch(np.arange(9), 3, 8, 'cpu')\nprint(x, y)  # rows 0 … 7 and 1 … 8",
             idea="the starts run over 0 … len(dataset) − context_length − 1, both included: torch.randint's high is "
                  "exclusive, so torch.randint(0, len(dataset) − context_length, …), which is 1 here"),
    Property("it reads only the windows it returns, never the whole corpus (a memmap may not fit in memory)",
             _get_batch_reads_windows,
             example="# np.asarray(dataset, dtype=np.int64) copies every token: 8 bytes × the corpus",
             idea="slice each window from the dataset first, dataset[i : i + context_length + 1], and convert "
                  "only those slices to int64"),
)

spec("9.1", properties=GET_BATCH_PROPERTIES, collect=_get_batch_collect, invariant=_get_batch_invariant,
     free=("x", "y", "again", "starts"),
     cases=lambda: [dict(data=torch.arange(1000), np_dtype="int64", batch=4, ctx=8, seed=0, small=True,
                         what="1000 int64 tokens, batch 4, context 8"),
                    dict(data=torch.arange(50), np_dtype="uint16", batch=2, ctx=5, seed=0, what="a uint16 dataset")],
     passed="(x, y) are int64 windows shifted by one, starts uniform over every valid offset")

# ---------------------------------------------------------------- 9.2: train_bpe

# A small corpus where every rule of the docstring decides some merge: repeated words (counts
# weighted by frequency), ties, pre-token boundaries, "aaa" (overlapping pairs), multi-byte
# characters, a contraction and digits.
BPE_CORPUS = ("low low low low low lower lower newest newest newest newest newest newest widest widest widest\n"
              "aaa aaa aaab baaa ab ab ba\n"
              "It's a café; we'll see cafés, 2024 and 2025!\n")
BPE_MERGES = 40


def merge_ids(merges: list[tuple[bytes, bytes]]) -> torch.Tensor:
    """Merges as (left id, right id) rows: ids 0–255 the bytes, 256 + k the k-th merge's token (-1 if unknown)."""
    ids = {bytes([i]): i for i in range(256)}
    rows = []
    for k, (left, right) in enumerate(merges):
        rows.append([ids.get(left, -1), ids.get(right, -1)])
        ids.setdefault(left + right, 256 + k)
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 2)


def _train_bpe_collect(m, c):
    result = m.train_bpe(c["text"], c["num_merges"])
    call = f"train_bpe({c['what']})"
    if not (type(result) is tuple and len(result) == 2):
        raise TypeError(f"{call} returned {type(result).__name__}, expected a tuple (vocab, merges)")
    vocab, merges = result
    if type(vocab) is not dict or type(merges) is not list:
        raise TypeError(f"{call}: expected vocab a dict {{id: bytes}} and merges a list, got {type(vocab).__name__} "
                        f"and {type(merges).__name__}")
    for k, pair in enumerate(merges):
        if not (type(pair) is tuple and len(pair) == 2 and all(type(p) is bytes for p in pair)):
            raise TypeError(f"{call}: merges[{k}] must be a pair (bytes, bytes), got {type(pair).__name__}")
    # bytes as hex strings: outputs cross to the grader as plain data (tensors, numbers, str, lists)
    return {"merge_ids": merge_ids(merges), "merges": [[left.hex(), right.hex()] for left, right in merges],
            "vocab": [[i, vocab[i].hex() if type(vocab[i]) is bytes else "?"] for i in sorted(vocab)]}


def _train_bpe_invariant(got, c) -> Problem | None:
    call, n = f"train_bpe({c['what']})", len(got["merges"])
    ids = [i for i, _ in got["vocab"]]
    if ids != list(range(256 + n)):
        return Problem(f"{call}: vocab's ids must be 0 … 255 + len(merges) = {255 + n}, one per byte and per merge")
    if any(h != bytes([i]).hex() for i, h in got["vocab"][:256]):
        return Problem(f"{call}: vocab[i] must be bytes([i]) for i = 0 … 255")
    if any(got["vocab"][256 + k][1] != a + b for k, (a, b) in enumerate(got["merges"])):
        return Problem(f"{call}: vocab[256 + k] must be the bytes of merges[k] joined, left + right")
    return None


def _merges_of(ids: torch.Tensor) -> list[tuple[bytes, bytes]]:
    tokens, merges = [bytes([i]) for i in range(256)], []
    for left, right in ids.tolist():
        merges.append((tokens[left] if left >= 0 else b"?", tokens[right] if right >= 0 else b"?"))
        tokens.append(merges[-1][0] + merges[-1][1])
    return merges


def _explain_merges(key: str, got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Which merge differs first (or how many were made), for a check's message."""
    if key != "merge_ids" or got.ndim != 2 or want.ndim != 2:
        return None
    mine, expected = _merges_of(got), _merges_of(want)
    first = next((k for k, (a, b) in enumerate(zip(mine, expected)) if a != b), None)
    if first is None:
        return (f"you returned {len(mine)} merges, expected {len(expected)} (training stops when num_merges are made "
                "or when every chunk is a single token, with no pair left to merge)")
    return (f"merge {first} is {mine[first]!r}, expected {expected[first]!r} (the most frequent pair over the chunks, "
            "each weighted by its count; a tie goes to the greatest pair)")


spec("9.2", collect=_train_bpe_collect, invariant=_train_bpe_invariant, explain=_explain_merges,
     cases=lambda: [dict(text=BPE_CORPUS, num_merges=BPE_MERGES, what=f"the check's corpus, {BPE_MERGES} merges"),
                    dict(text="aaa aaa aaab", num_merges=3, what='"aaa aaa aaab", 3 merges'),
                    dict(text=BPE_CORPUS, num_merges=0, what="the check's corpus, 0 merges"),
                    dict(text="ab ab", num_merges=10, what='"ab ab", 10 merges (only 2 are possible)')],
     outputs={"merge_ids": "the merges"},
     mistakes={
         "bpe_no_pretokenization": "your merges cross pre-token boundaries: split the text with "
                                   "regex.finditer(GPT2_PATTERN, text) first and count pairs only inside each chunk",
         "bpe_tie_smallest_pair": "on a tie you took the smallest pair; the rule is the lexicographically greatest "
                                  "(the max of (count, pair))",
         "bpe_counts_not_weighted": "count each chunk's pairs as many times as the chunk occurs in the text, not once "
                                    "per distinct chunk",
         "bpe_merges_right_to_left": "replace a pair's occurrences left to right: with the merge (a, a), \"aaa\" "
                                     "becomes "
                                     "[aa, a], not [a, aa]",
         "bpe_merges_across_tokens": "your merge also joins tokens that only end with the pair's left part and start "
                                     "with its right part (a string replace over the joined tokens: [x, ab] + "
                                     "merge (b, ?) …): merge only two adjacent tokens equal to (left, right)",
     },
     passed=f"the {BPE_MERGES} merges of the check's corpus match, vocab = 256 bytes + one token per merge, "
            "stops when no pair is left")

# ---------------------------------------------------------------- 9.3: Tokenizer (encode, decode)

# The 40 merges train_bpe learns from BPE_CORPUS (Task 9.2's check), so that this check needs no 9.2.
CORPUS_MERGES = [
    (b"w", b"e"), (b"s", b"t"), (b"a", b"a"), (b"l", b"o"), (b"we", b"st"), (b"n", b"e"), (b"ne", b"west"),
    (b" ", b"newest"), (b" ", b"lo"), (b"aa", b"a"), (b" lo", b"w"), (b" ", b"a"), (b"w", b"i"), (b"wi", b"d"),
    (b"wid", b"e"), (b"wide", b"st"), (b" ", b"widest"), (b"\xc3", b"\xa9"), (b"we", b"r"), (b"f", b"\xc3\xa9"),
    (b"c", b"a"), (b"ca", b"f\xc3\xa9"), (b"2", b"0"), (b"20", b"2"), (b" lo", b"wer"), (b" a", b"b"),
    (b" ", b"caf\xc3\xa9"), (b" ", b"b"), (b" ", b"aaa"), (b" ", b"202"), (b"s", b"e"), (b"se", b"e"), (b"n", b"d"),
    (b"lo", b"w"), (b"l", b"l"), (b"I", b"t"), (b"'", b"s"), (b"'", b"ll"), (b" caf\xc3\xa9", b"s"),
    (b" b", b"aaa"),
]
# Merges whose order decides the tokens: "ababc" is [ab, abc] by rank, [abab, c] by frequency or by the
# longest token first, and the three wrong orders differ from each other on the other texts.
ORDER_MERGES = [(b"b", b"c"), (b"a", b"b"), (b"a", b"a"), (b"ab", b"ab"), (b"a", b"bc"), (b"aa", b"a")]
EOT = "<|endoftext|>"


def tokenizer_vocab(merges, extra=()) -> dict[int, bytes]:
    """train_bpe's vocab for these merges: the 256 bytes, one token per merge, then `extra` tokens."""
    tokens = [bytes([i]) for i in range(256)] + [a + b for a, b in merges] + list(extra)
    return dict(enumerate(tokens))


def _tokenizer_collect(m, c):
    merges = [(bytes(a), bytes(b)) for a, b in c["merges"]]
    vocab = tokenizer_vocab(merges, c.get("extra", ()))
    tok = m.Tokenizer(vocab, merges, c["special_tokens"])
    ids, round_trip = [], []
    for text in c["texts"]:
        got = tok.encode(text)
        if type(got) is not list or not all(type(i) is int for i in got):
            raise TypeError(f"Tokenizer.encode returned {type(got).__name__}, expected a list of ints")
        ids.append(torch.tensor(got, dtype=torch.long))
        back = tok.decode(got)
        if type(back) is not str:
            raise TypeError(f"Tokenizer.decode returned {type(back).__name__}, expected a str")
        round_trip.append(back)
    out = {"ids": ids, "round_trip": round_trip}
    if "decode" in c:  # tokens given by their bytes, as ids of this vocabulary
        decoded = tok.decode([next(i for i in sorted(vocab) if vocab[i] == t) for t in c["decode"]])
        if type(decoded) is not str:
            raise TypeError(f"Tokenizer.decode returned {type(decoded).__name__}, expected a str")
        out["decoded"] = torch.tensor([ord(ch) for ch in decoded], dtype=torch.long)  # code points
    return out


def _tokenizer_invariant(got, c) -> Problem | None:
    for k, (text, back) in enumerate(zip(c["texts"], got["round_trip"])):
        if back == text:
            continue
        where = f"decode(encode(text)) on {c['what']}, text {k}"
        if back.count("\ufffd") > text.count("\ufffd"):
            return Problem(f"{where} has \ufffd where the text has a character: decode the bytes of all the ids "
                           "joined, once (b\"\".join(…).decode(\"utf-8\", errors=\"replace\")); one token may hold "
                           "part of a character, so decoding token by token breaks it", "decode_per_token")
        return Problem(f"{where} is not the text: encode must keep every byte of it (and decode give each "
                       "id's bytes back, in order)")
    return None


def _explain_ids(key: str, got: torch.Tensor, want: torch.Tensor) -> str | None:
    if key != "ids" or got.ndim != 1 or want.ndim != 1:
        return None
    first = next((i for i, (a, b) in enumerate(zip(got.tolist(), want.tolist())) if a != b), None)
    if first is None:
        return f"you gave {len(got)} ids, expected {len(want)}"
    ids = f"id {first} is {int(got[first])}, expected {int(want[first])} ({len(got)} ids, expected {len(want)})"
    if max(int(got[first]), int(want[first])) >= 256 + len(CORPUS_MERGES):  # beyond every case's merges: special
        return f"{ids}: a special token's id, the one vocab gives its bytes, else a new one after the largest"
    return f"{ids}: inside each chunk, merge the adjacent pair with the lowest rank until no pair is a merge"


def _new_specials_distinct(m):
    merges = [(bytes(a), bytes(b)) for a, b in CORPUS_MERGES]
    vocab = tokenizer_vocab(merges)
    tok = m.Tokenizer(vocab, merges, ["<|a|>", "<|b|>"])
    a, b = tok.encode("<|a|>"), tok.encode("<|b|>")
    if len(a) != 1 or len(b) != 1 or a == b or min(a[0], b[0]) <= max(vocab):
        return (f"with vocab ids 0 … {max(vocab)} and special tokens <|a|>, <|b|>, encode gives {shown(a)} and "
                f"{shown(b)}, expected [{max(vocab) + 1}] and [{max(vocab) + 2}]")
    return None


def _special_in_vocab_keeps_its_id(m):
    merges = [(bytes(a), bytes(b)) for a, b in CORPUS_MERGES]
    vocab = tokenizer_vocab(merges)
    vocab = {**{i: t for i, t in vocab.items() if i != 120}, 120: EOT.encode(), 400: b"x"}  # its bytes at 120
    tok = m.Tokenizer(vocab, merges, [EOT, "<|new|>"])
    got, new = tok.encode(EOT), tok.encode("<|new|>")
    if got != [120] or new != [401]:
        return (f"with <|endoftext|>'s bytes at id 120 of a vocab whose largest id is 400 (ids with gaps), encode "
                f"gives <|endoftext|> {shown(got)} and a new special token {shown(new)}, expected [120] and [401]")
    return None


def _tokenizers_keep_their_own_state(m):
    merges = [(bytes(a), bytes(b)) for a, b in CORPUS_MERGES]
    vocab = tokenizer_vocab(merges)
    swapped = {i: vocab[{97: 98, 98: 97}.get(i, i)] for i in vocab}  # the ids of a and b exchanged
    text = "a bab abba, a caab: ab ba"
    first, second = m.Tokenizer(vocab, merges), m.Tokenizer(swapped, merges)
    first.encode(text)
    back = second.decode(second.encode(text))
    if back != text:
        return (f"after a Tokenizer encoded {text!r}, a second Tokenizer whose vocab has the ids of a and b "
                f"exchanged gives decode(encode(text)) = {back!r}")
    return None


TOKENIZER_PROPERTIES = (
    Property("a special token whose bytes vocab already holds keeps that id; a new one gets the largest id + 1",
             _special_in_vocab_keeps_its_id,
             example="vocab = {b: bytes([b]) for b in range(256)} | {300: b'<|endoftext|>'}  # a gap: 256 … 299\n"
                     "tok = minilm.Tokenizer(vocab, [], ['<|endoftext|>', '<|new|>'])\n"
                     "print(tok.encode('<|endoftext|>'), tok.encode('<|new|>'))  # [300] [301]",
             idea="look each special token's bytes up among vocab's tokens first; only a token vocab lacks gets a new "
                  "id, max(vocab) + 1 (not len(vocab): ids may have gaps)"),
    Property("two Tokenizers keep their own state: one's vocab and cache never reach the other",
             _tokenizers_keep_their_own_state,
             example="a = minilm.Tokenizer({i: bytes([i]) for i in range(256)}, [])\n"
                     "b = minilm.Tokenizer({i: bytes([255 - i]) for i in range(256)}, [])\n"
                     "a.encode('hi'); print(b.decode(b.encode('hi')))  # 'hi'",
             idea="create every dict and list in __init__ (self.cache = {}), never as a class attribute or a "
                  "module-level variable, which every Tokenizer shares"),
    Property("two new special tokens get two ids of their own, after the largest id of vocab", _new_specials_distinct,
             example="vocab = {b: bytes([b]) for b in range(256)}  # the single bytes\n"
                     "tok = minilm.Tokenizer(vocab, [], ['<|a|>', '<|b|>'])\n"
                     "print(tok.encode('<|a|>'), tok.encode('<|b|>'))  # [256] [257]",
             idea="give each new special token the next id, max(vocab) + 1, + 2, …, taking the maximum again after "
                  "each one is added"),
)

spec("9.3", properties=TOKENIZER_PROPERTIES,
     collect=_tokenizer_collect, invariant=_tokenizer_invariant, explain=_explain_ids,
     cases=lambda: [
         dict(merges=CORPUS_MERGES, special_tokens=[EOT], what="the check's corpus merges and <|endoftext|>",
              texts=["low lower newest widest<|endoftext|>It's a café; we'll see cafés, 2025!",
                     "  aaa aaaa baaa\n\n\nnaïve 🤖 we'st", "", "<|endoftext|><|endoftext|>"],
              decode=[b"ca", b"f", b"\xc3", b"\xa9", b" ", b"\xff", b"!"]),
         dict(merges=ORDER_MERGES, special_tokens=None, what="merges whose order matters",
              texts=["ababc", "abcab", "aaab", "aaaa abc"]),
         dict(merges=CORPUS_MERGES, special_tokens=[EOT, EOT + EOT], extra=[EOT.encode()],
              what="overlapping special tokens, <|endoftext|> already in vocab",
              texts=["low<|endoftext|><|endoftext|>newest<|endoftext|> widest"]),
     ],
     outputs={"ids": "the ids of encode", "decoded": "decode's text (as code points)"},
     free=("round_trip",),
     mistakes={
         "tokenizer_merges_by_frequency": "you merged the pair that occurs most often in the chunk; merge the "
                                          "adjacent pair with the lowest rank (learned first: the smallest index "
                                          "in merges), whatever its count",
         "tokenizer_latest_merge_first": "you applied a later merge before an earlier one; merges apply in the "
                                         "order learned: the adjacent pair with the lowest rank first",
         "tokenizer_longest_match": "you took the longest token of vocab from the left; BPE replays the merges: "
                                    "the adjacent pair with the lowest rank first, until no pair is a merge",
         "tokenizer_specials_pretokenized": "your encoding splits <|endoftext|> into ordinary pieces: split the "
                                            "text at the special tokens first (each one id), then pre-tokenize "
                                            "the pieces between them",
         "tokenizer_specials_not_longest_first": "where special tokens overlap the longest one must win: put them "
                                                 "in the split pattern longest first",
         "tokenizer_no_pretokenization": "your merges cross pre-token boundaries: split each piece with "
                                         "regex.finditer(GPT2_PATTERN, piece) first and merge only inside each chunk",
         "decode_per_token": "decode the bytes of all the ids joined, once: one token may hold part of a character",
     },
     passed="encode replays the merges by rank inside each chunk, special tokens stay whole, "
            "decode(encode(text)) == text")

# ---------------------------------------------------------------- 10: training


def _cross_entropy_invariant(got, c) -> Problem | None:
    loss = got["loss"]
    if type(loss) is torch.Tensor and loss.numel() == 1 and not bool(torch.isfinite(loss).all()):
        return Problem(f"cross_entropy gives {loss.item()} for {c['what']}: exp overflows. Use the log-sum-exp trick: "
                       "subtract the max logit before exp and add it back after the log", "no_logsumexp")
    return None


def _cross_entropy_cases():
    return [dict(logits=randn(1, 4, 7), targets=torch.randint(0, 7, (4,), generator=gen(2)), what="logits (4, 7)"),
            dict(logits=randn(3, 2, 3, 11, scale=3), targets=torch.randint(0, 11, (2, 3), generator=gen(4)),
                 what="logits (2, 3, 11)"),
            dict(logits=randn(5, 1, 5), targets=torch.tensor([4]), what="logits (1, 5)"),
            dict(logits=randn(6, 2, 2, 2, 13), targets=torch.randint(0, 13, (2, 2, 2), generator=gen(7)),
                 what="logits (2, 2, 2, 13)"),
            *(dict(logits=randn(8, 3, 9, scale=scale), targets=torch.tensor([0, 4, 8]),
                   what=f"logits scaled by {scale:g}")
              for scale in (1e4, -1e4))]


def _ce_shift(m):
    logits, targets = randn(80, 3, 7), torch.tensor([0, 6, 2])
    d = differs(m.cross_entropy(logits + 1e4, targets), m.cross_entropy(logits, targets), atol=1e-3)
    return d and f"for logits (3, 7), the loss of logits + 10,000 and of logits: {d}"


def _ce_uniform(m):
    loss = m.cross_entropy(torch.zeros(4, 10), torch.tensor([0, 3, 9, 5]))
    d = differs(torch.as_tensor(loss).double().reshape(()), torch.tensor(2.302585092994046, dtype=torch.float64))
    return d and f"for all-zero logits over 10 tokens, the loss and log 10 = 2.302585: {d}"


def _ce_mean(m):
    logits, targets = randn(81, 2, 3, 5), torch.tensor([[0, 4, 1], [2, 2, 3]])
    each = torch.stack([torch.as_tensor(m.cross_entropy(logits[i, j:j + 1], targets[i, j:j + 1])).reshape(())
                        for i in range(2) for j in range(3)])
    d = differs(torch.as_tensor(m.cross_entropy(logits, targets)).reshape(()), each.mean())
    return d and f"for logits (2, 3, 5), the loss and the mean of its 6 positions' losses: {d}"


CE_PROPERTIES = (
    keeps_inputs("cross_entropy", lambda: (randn(105, 3, 7), torch.tensor([0, 6, 2])), "on logits (3, 7)"),
    Property("all-zero logits over 10 tokens give log 10 (a uniform guess)", _ce_uniform,
             example="print(minilm.cross_entropy(torch.zeros(4, 10), torch.tensor([0, 3, 9, 5])))  # 2.3026",
             idea="−log softmax(logits)[target] = logsumexp(logits) − logits[target]: with equal logits each "
                  "token has probability 1/10"),
    Property("adding one number to every logit changes nothing, even 10,000", _ce_shift,
             example="logits, t = torch.randn(3, 7), torch.tensor([0, 6, 2])\n"
                     "print(minilm.cross_entropy(logits + 1e4, t), minilm.cross_entropy(logits, t))",
             idea="subtract each row's max logit m before exp and add it back outside the log: "
                  "m + log Σ exp(logits − m)"),
    Property("the loss of a batch is the mean of its positions' losses", _ce_mean,
             example="logits, t = torch.randn(2, 3, 5), torch.tensor([[0, 4, 1], [2, 2, 3]])\n"
                     "each = [minilm.cross_entropy(logits[i, j:j+1], t[i, j:j+1])\n"
                     "        for i in range(2) for j in range(3)]\n"
                     "print(minilm.cross_entropy(logits, t), torch.stack(each).mean())",
             idea="one loss per position over every leading dim, then one mean over all of them"),
)

spec("10.1",
     gradient=gradient_follows("cross_entropy", lambda: (randn(134, 4, 9).double(), torch.tensor([0, 3, 8, 2])),
                                "on logits (4, 9)", call="x, torch.tensor([0, 1, 2])"),
     properties=CE_PROPERTIES, collect=lambda m, c: {"loss": m.cross_entropy(c["logits"], c["targets"])},
     cases=_cross_entropy_cases,
     invariant=_cross_entropy_invariant, outputs={"loss": "cross_entropy"}, atol=1e-4,
     mistakes={"sum_not_mean": "you summed the losses; the contract is the mean over every position"},
     passed="matches F.cross_entropy on 4 cases, stable at ±1e4")


def _clip_collect(m, c):
    params = [nn.Parameter(p.clone()) for p in c["params"]]
    for p, g in zip(params, c["grads"]):
        p.grad = g.clone()
    no_grad = nn.Parameter(torch.ones(3))  # .grad is None: must be skipped
    norm = m.clip_grad_norm(params + [no_grad], c["max_norm"])
    return {"norm": torch.as_tensor(norm, dtype=torch.float32).reshape(()),
            "grads": [p.grad for p in params], "no_grad_untouched": no_grad.grad is None}


def _clip_cases():
    cases = []
    for scale, max_norm in ((10.0, 1.0), (0.01, 1.0), (3.0, 2.5)):
        g = gen(1)
        params = [torch.randn(*s, generator=g) for s in ((3, 4), (5,), (2, 2, 2))]
        cases.append(dict(params=params, grads=[torch.randn(p.shape, generator=g) * scale for p in params],
                          max_norm=max_norm, what=f"gradients of size ~{scale:g}, max_norm {max_norm:g}"))
    return cases


def _clipped(m, scale: float, max_norm: float):
    params = [nn.Parameter(torch.zeros(3, 4)), nn.Parameter(torch.zeros(5))]
    grads = [randn(82, 3, 4, scale=scale), randn(83, 5, scale=scale)]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    returned = m.clip_grad_norm(params, max_norm)
    return grads, [p.grad for p in params], returned


def _global_norm(grads) -> torch.Tensor:
    return torch.sqrt(sum((g.double() ** 2).sum() for g in grads))


def _clip_to_max_norm(m):
    grads, clipped, _ = _clipped(m, 5.0, 1.0)
    d = differs(_global_norm(clipped), torch.tensor(1.0, dtype=torch.float64), atol=1e-4)
    if d:
        return f"for two gradients of global norm {_global_norm(grads).item():.3g} and max_norm 1, the norm after: {d}"
    ratios = torch.cat([(c / g).flatten() for c, g in zip(clipped, grads)])
    d = differs(ratios, torch.full_like(ratios, ratios[0].item()))
    return d and f"every gradient entry must be scaled by the same factor, but the factors: {d}"


def _clip_returns_norm(m):
    grads, _, returned = _clipped(m, 5.0, 1.0)
    d = differs(torch.as_tensor(returned).double().reshape(()), _global_norm(grads), atol=1e-4)
    return d and f"the returned value and the global norm before clipping: {d}"


def _clip_nothing_to_clip(m):
    zero = [nn.Parameter(torch.ones(3, 4)), nn.Parameter(torch.ones(5))]
    for p in zero:
        p.grad = torch.zeros_like(p)
    found = at_edge("with two all-zero gradients and max_norm 1, the returned norm and 0",
                    lambda: torch.as_tensor(m.clip_grad_norm(zero, 1.0)).double().reshape(()),
                    torch.tensor(0.0, dtype=torch.float64))
    found = found or at_edge("with two all-zero gradients, the gradients after clipping and zeros",
                             lambda: torch.cat([p.grad.flatten() for p in zero]), torch.zeros(17))
    none = [nn.Parameter(torch.ones(3, 4)), nn.Parameter(torch.ones(5))]  # .grad None: nothing to clip
    return found or at_edge("with two parameters whose .grad is None (no gradient at all) and max_norm 1, the "
                            "returned norm and 0",
                            lambda: torch.as_tensor(m.clip_grad_norm(none, 1.0)).double().reshape(()),
                            torch.tensor(0.0, dtype=torch.float64))


def _clip_in_place(m):
    a, b = nn.Parameter(torch.zeros(3, 4)), nn.Parameter(torch.zeros(5))
    a.grad, b.grad = randn(84, 3, 4, scale=5.0), randn(85, 5, scale=5.0)
    held = [a.grad, b.grad]  # what an optimizer, or a hook, holds: the .grad tensors themselves
    returned = m.clip_grad_norm([a, b], 1.0)
    if type(returned) is not torch.Tensor or returned.shape != ():
        got = type(returned).__name__ if type(returned) is not torch.Tensor else f"a tensor of shape " \
                                                                                  f"{shown(list(returned.shape))}"
        return f"clip_grad_norm returned {got}, expected a 0-dim tensor (as torch.nn.utils.clip_grad_norm_)"
    if a.grad is not held[0] or b.grad is not held[1]:
        return "after clipping, p.grad is a new tensor: the gradients must be multiplied in place, so every " \
               "reference to them (the optimizer's, a hook's) sees the clipped values"
    return None


CLIP_PROPERTIES = (
    Property("it returns the norm as a 0-dim tensor and scales each .grad in place", _clip_in_place,
             example="a = torch.nn.Parameter(torch.zeros(3))\na.grad = 5 * torch.randn(3)\ng = a.grad\n"
                     "norm = minilm.clip_grad_norm([a], 1.0)\nprint(type(norm), norm.shape, a.grad is g)  "
                     "# Tensor, (), True",
             idea="keep the norm as the tensor torch.sqrt gives (no .item() or float()), and scale with g.mul_(…) "
                  "on each gradient rather than assigning p.grad = g * …"),
    Property("above max_norm, every gradient is scaled by one factor so that the global norm becomes max_norm",
             _clip_to_max_norm,
             example="a, b = torch.nn.Parameter(torch.zeros(3, 4)), torch.nn.Parameter(torch.zeros(5))\n"
                     "a.grad, b.grad = 5 * torch.randn(3, 4), 5 * torch.randn(5)\n"
                     "minilm.clip_grad_norm([a, b], 1.0)\n"
                     "print(torch.sqrt((a.grad ** 2).sum() + (b.grad ** 2).sum()))  # 1.0",
             idea="one norm over all gradients together, sqrt(Σ g²), then every gradient times "
                  "max_norm / (norm + 1e-6)"),
    Property("it returns the global norm before clipping", _clip_returns_norm,
             idea="compute the norm first, keep it, clip, then return the norm you kept"),
    Property("with all-zero gradients, or none at all, the norm is 0 and nothing changes", _clip_nothing_to_clip,
             example="a = torch.nn.Parameter(torch.ones(3))\nprint(minilm.clip_grad_norm([a], 1.0))  # a.grad is "
                     "None: tensor(0.)\na.grad = torch.zeros(3)\nprint(minilm.clip_grad_norm([a], 1.0), a.grad)  # 0, "
                     "zeros",
             idea="sum the squares of the gradients there are, starting from 0 (torch.stack or torch.cat of an empty "
                  "list raises), and scale only when the norm exceeds max_norm: 0 never does"),
)

spec("10.2", properties=CLIP_PROPERTIES, collect=_clip_collect, cases=_clip_cases,
     invariant=lambda got, c: None if got["no_grad_untouched"] is True else Problem(
         "a parameter without a gradient must be left alone (its .grad stays None)"),
     outputs={"norm": "the returned norm (before clipping)", "grads": "the gradients after clipping"},
     mistakes={"per_parameter_clipping": "you clipped per parameter, each on its own; compute ONE global norm over all "
                                         "gradients and scale them all by the same factor",
               "clips_under_max_norm": "you scaled gradients whose total norm is already below max_norm up to it: "
                                       "scale only when the norm exceeds max_norm"},
     passed="matches clip_grad_norm_ above and below max_norm, one global norm")


def _lr_collect(m, c):
    return {"lr": torch.tensor([float(m.lr_cosine_schedule(it, **c["args"])) for it in c["its"]], dtype=torch.float64)}


def _schedule_boundaries(m):
    return off_points(lambda it: m.lr_cosine_schedule(int(it), 2.0, 0.5, 10, 50),
                      {0: 0.0, 5: 1.0, 10: 2.0, 30: 1.25, 50: 0.5, 80: 0.5},
                      "max_lr 2, min_lr 0.5, warmup 10 and cycle 50", "it =")


def _schedule_no_warmup(m):
    return off_points(lambda it: m.lr_cosine_schedule(int(it), 2.0, 0.5, 0, 40), {0: 2.0, 20: 1.25, 40: 0.5, 41: 0.5},
                      "max_lr 2, min_lr 0.5, warmup 0 and cycle 40", "it =")


SCHEDULE_PROPERTIES = (
    Property("the rate is 0 at it = 0, max_lr at the end of the warmup, halfway between at mid-cycle, and min_lr "
             "from the end of the cycle on", _schedule_boundaries,
             example="lr = lambda it: minilm.lr_cosine_schedule(it, 2.0, 0.5, 10, 50)\n"
                     "print([lr(it) for it in (0, 5, 10, 30, 50, 80)])  # [0, 1, 2, 1.25, 0.5, 0.5]",
             idea="three cases by it: it < warmup_iters rises linearly from 0; up to cosine_cycle_iters the cosine "
                  "falls from max_lr to min_lr over (it − warmup) / (cycle − warmup); after it, min_lr"),
    Property("with warmup_iters 0 there is no warmup: the cosine starts at max_lr at it = 0", _schedule_no_warmup,
             example="print(minilm.lr_cosine_schedule(0, 2.0, 0.5, 0, 40))  # 2.0",
             idea="test it < warmup_iters before dividing by warmup_iters: with warmup_iters 0 no it is in the "
                  "warmup, and it / warmup_iters would divide by 0"),
)

spec("10.3", properties=SCHEDULE_PROPERTIES,
     collect=_lr_collect, atol=1e-9, rtol=1e-9, outputs={"lr": "the learning rates"},
     cases=lambda: [dict(args=dict(max_lr=1.0, min_lr=0.1, warmup_iters=7, cosine_cycle_iters=21), its=list(range(25)),
                         what="it = 0 … 24 (max_lr 1, min_lr 0.1, warmup 7, cycle 21)")],
     mistakes={
         "warmup_off_by_one": "the warmup is off by one: at it = 0 the rate must be 0, rising as "
                              "it / warmup_iters · max_lr to max_lr at it = warmup_iters",
         "cosine_past_cycle": "after cosine_cycle_iters the rate stays at min_lr, but yours follows the cosine "
                              "back up: "
                              "return min_lr for it > cosine_cycle_iters",
         "cosine_over_cycle": "the cosine's progress runs from 0 at warmup_iters to 1 at cosine_cycle_iters: divide "
                              "it − warmup_iters by cosine_cycle_iters − warmup_iters, not by cosine_cycle_iters",
     },
     passed="matches CS336's schedule for 25 iterations: warmup, cosine and the floor")


def _adamw_collect(m, c):
    groups = [[nn.Parameter(p.clone()) for p in grp] for grp in c["init"]]
    opt = m.AdamW([{"params": ps, **hp} for ps, hp in zip(groups, c["group_hparams"])], **c["hparams"])
    flat = [p for ps in groups for p in ps]
    for step_grads in c["grads"]:
        for p, g in zip(flat, step_grads):
            p.grad = g.clone()
        opt.step()
    out = {"params": [p.detach().clone() for p in flat]}
    # A schedule changes group["lr"] between steps: the optimizer must read it each step.
    p = nn.Parameter(torch.ones(3))
    opt = m.AdamW([p], lr=0.1, weight_decay=0.0)
    opt.param_groups[0]["lr"] = 0.0
    p.grad = torch.ones(3)
    opt.step()
    out["lr_zero_step"] = p.detach().clone()
    return out


def _adamw_cases():
    init = [randn(1, 4, 3), randn(2, 5)]
    grads = [[randn(10 * t + i, *p.shape) for i, p in enumerate(init)] for t in range(6)]
    # Gradients of ~1e-5: v̂ ≈ 1e-10, so where eps goes matters (sqrt(v̂) + 1e-8 ≈ 1e-5, sqrt(v̂ + 1e-8) ≈ 1e-4).
    tiny = [[randn(100 + 10 * t + i, *p.shape, scale=1e-5) for i, p in enumerate(init)] for t in range(4)]
    return [dict(init=[init], group_hparams=[{}], hparams=dict(lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.5),
                 grads=grads, what="6 steps, weight_decay 0.5"),
            dict(init=[init], group_hparams=[{}], hparams=dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1),
                 grads=tiny, what="4 steps with gradients of size ~1e-5, eps 1e-8")]


def _adamw_first_step(m):
    p = nn.Parameter(torch.zeros(6))
    opt = m.AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = randn(84, 6, scale=3.0)
    opt.step()
    d = differs(p.detach().abs(), torch.full((6,), 0.1), atol=1e-5)
    return d and f"after one step from 0 with lr 0.1 and gradients ~3, |p| and 0.1: {d}"


def _adamw_decay_alone(m):
    p = nn.Parameter(torch.ones(4))
    opt = m.AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(4)
    opt.step()
    d = differs(p.detach(), torch.full((4,), 0.95))
    return d and f"with a zero gradient, lr 0.1 and weight_decay 0.5, p after one step and 1 − 0.1 · 0.5 = 0.95: {d}"


def _adamw_state(m):
    p = nn.Parameter(torch.zeros(3))
    opt = m.AdamW([p], lr=0.1, betas=(0.9, 0.99))
    p.grad = torch.tensor([1.0, -2.0, 3.0])
    opt.step()
    keys = sorted(map(str, opt.state[p])) if isinstance(opt.state.get(p), dict) else []
    if keys != ["exp_avg", "exp_avg_sq", "step"]:
        return (f"after one step self.state[p] holds {shown(keys) if keys else 'nothing'}, expected exp_avg, "
                "exp_avg_sq and step (notebook 10b reads them, as PyTorch's AdamW names them)")
    state = opt.state[p]
    for key, want in (("exp_avg", 0.1 * p.grad), ("exp_avg_sq", 0.01 * p.grad**2)):
        d = differs(torch.as_tensor(state[key]).detach(), want)
        if d:
            return (f"after one step from gradient [1, -2, 3] with betas (0.9, 0.99), state['{key}'] and "
                    f"(1 − β) · {'g' if key == 'exp_avg' else 'g²'}: {d}")
    return None


def _adamw_decay_then_step(m):
    p = nn.Parameter(torch.ones(6))
    opt = m.AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = randn(86, 6, scale=3.0)
    opt.step()
    want = 0.95 - 0.1 * p.grad.sign()
    d = differs(p.detach(), want, atol=1e-5)
    return d and ("one step from ones with lr 0.1, weight_decay 0.5 and gradients ~3: p and "
                  f"(1 − 0.1 · 0.5) · 1 − 0.1 · sign(g) = 0.85 or 1.05: {d}")


def _adamw_tiny_gradient(m):
    p = nn.Parameter(torch.zeros(4))
    opt = m.AdamW([p], lr=0.1, eps=1e-8, weight_decay=0.0)
    p.grad = torch.tensor([1e-8, -1e-8, 1e-8, -1e-8])
    opt.step()
    d = differs(p.detach().abs(), torch.full((4,), 0.05), atol=1e-4)
    return d and ("one step from 0 with lr 0.1, eps 1e-8 and gradients ±1e-8 (so √v̂ = 1e-8 = eps): |p| and "
                  f"lr · |g| / (|g| + eps) = 0.05: {d}")


def _adamw_params_alone(m):
    init, grads = [randn(87, 3, 2), randn(88, 4)], [[randn(89 + 2 * t + i, *s) for i, s in enumerate(((3, 2), (4,)))]
                                                   for t in range(3)]
    together = [nn.Parameter(w.clone()) for w in init]
    opt = m.AdamW(together, lr=0.05, weight_decay=0.1)
    for g in grads:
        for p, gi in zip(together, g):
            p.grad = gi.clone()
        opt.step()
    for i, w in enumerate(init):
        alone = nn.Parameter(w.clone())
        one = m.AdamW([alone], lr=0.05, weight_decay=0.1)
        for g in grads:
            alone.grad = g[i].clone()
            one.step()
        d = differs(together[i].detach(), alone.detach(), atol=1e-6)
        if d:
            return (f"after 3 steps, parameter {i} of two in one AdamW and the same parameter in an AdamW of its "
                    f"own: {d}")
    return None


ADAMW_PROPERTIES = (
    Property("the decay multiplies the weight before the Adam step: from 1, one step gives (1 − lr · weight_decay) "
             "− lr · sign(g)", _adamw_decay_then_step,
             example="p = torch.nn.Parameter(torch.ones(6))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.5)\n"
                     "p.grad = 3 * torch.randn(6)\nopt.step()\nprint(p)  # 0.85 or 1.05",
             idea="p ← p − lr · weight_decay · p first, then p ← p − lr · m̂ / (√v̂ + eps): decaying after the "
                  "step also shrinks the step"),
    Property("eps is added to √v̂ after the bias correction: a first gradient of size eps moves the weight by lr / 2",
             _adamw_tiny_gradient,
             example="p = torch.nn.Parameter(torch.zeros(4))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.0)\n"
                     "p.grad = torch.full((4,), 1e-8)\nopt.step()\nprint(p)  # -0.05",
             idea="m̂ = m / (1 − β1ᵗ) and v̂ = v / (1 − β2ᵗ) first, then m̂ / (sqrt(v̂) + eps): the eps goes on the "
                  "corrected root, not on sqrt(v) before the correction (nor inside the root)"),
    Property("each parameter has its own state: two parameters in one AdamW move as each would alone",
             _adamw_params_alone,
             idea="keep step, exp_avg and exp_avg_sq in self.state[p] for each p: a step counter shared by all "
                  "parameters, or one moment for a group, ties them together"),
    Property("the first step moves every weight by lr (bias correction makes m̂ / √v̂ = ±1)", _adamw_first_step,
             example="p = torch.nn.Parameter(torch.zeros(6))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.0)\n"
                     "p.grad = 3 * torch.randn(6)\nopt.step()\nprint(p)  # every entry ±0.1",
             idea="at step t = 1, m = (1 − β1) g and v = (1 − β2) g²: dividing them by 1 − β1ᵗ and 1 − β2ᵗ gives g "
                  "and g², so the step is lr · g / |g|"),
    Property("with a zero gradient, a step multiplies each weight by 1 − lr · weight_decay", _adamw_decay_alone,
             example="p = torch.nn.Parameter(torch.ones(4))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.5)\n"
                     "p.grad = torch.zeros(4)\nopt.step()\nprint(p)  # 0.95",
             idea="the decay is decoupled: p ← p − lr · weight_decay · p, apart from the moments"),
    *optimizer_edges(lambda m, params: m.AdamW(params, lr=0.1), "AdamW"),
    Property("the state of each parameter holds step and the moments exp_avg and exp_avg_sq, not bias-corrected",
             _adamw_state,
             idea="keep the step count and the two moments in self.state[p] under PyTorch's names; compute the "
                  "bias-corrected m̂ and v̂ as new tensors (m / (1 − β1ᵗ)), never in place on the stored moments"),
)

spec("10.4", properties=ADAMW_PROPERTIES, collect=_adamw_collect, cases=_adamw_cases, atol=1e-6,
     invariant=lambda got, c: None if type(got["lr_zero_step"]) is torch.Tensor and torch.equal(
         got["lr_zero_step"], torch.ones(3)) else Problem(
         "after setting param_groups[0]['lr'] = 0 a step must not move the parameters: read lr from the param group "
         "at every step"),
     outputs={"params": "the parameters"},
     mistakes={
         "adam_l2": "you added weight_decay · p to the gradient (Adam with L2); AdamW's decay is decoupled: "
                    "p ← p − lr · weight_decay · p, separately from the moments",
         "no_bias_correction": "missing bias correction: divide m by 1 − β1ᵗ and v by 1 − β2ᵗ (t counts from 1)",
         "decay_without_lr": "your decay is p ← p − weight_decay · p; AdamW decays by weight_decay times the learning "
                             "rate: p ← p − lr · weight_decay · p (so the schedule scales the decay too)",
         "adam_eps_inside_sqrt": "eps belongs outside the square root: p ← p − lr · m̂ / (sqrt(v̂) + eps), not "
                                 "sqrt(v̂ + eps) (with gradients of ~1e-5, v̂ ≈ 1e-10: an eps of 1e-8 under the root "
                                 "shrinks each step tenfold)",
     },
     passed="matches torch.optim.AdamW for 6 steps, decoupled decay and bias correction")


class Momentum(torch.optim.Optimizer):
    """SGD with momentum: a stand-in optimizer whose state (a buffer per parameter) a checkpoint
    must keep. Not torch's own optimizers: their step imports torch._dynamo, a second of every
    `minilm status`."""

    def __init__(self, params, lr: float = 0.01, beta: float = 0.9):
        super().__init__(params, dict(lr=lr, beta=beta))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                    buf.mul_(group["beta"]).add_(p.grad)
                    p.add_(buf, alpha=-group["lr"])


def _checkpoint_collect(m, c):
    def setup(seed):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))  # release: not a task (a model to checkpoint)
        return model, Momentum(model.parameters(), lr=0.01)

    def step(model, opt, x):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    model, opt = setup(c["seed"])
    for x in c["xs"]:
        step(model, opt, x)
    model2, opt2 = setup(c["seed"] + 1)  # other weights, and no optimizer state yet
    if c["to_path"]:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.pt")
            m.save_checkpoint(model, opt, c["iteration"], path)
            iteration = m.load_checkpoint(path, model2, opt2)
    else:
        buffer = io.BytesIO()
        m.save_checkpoint(model, opt, c["iteration"], buffer)
        buffer.seek(0)
        iteration = m.load_checkpoint(buffer, model2, opt2)
    out = {"iteration": iteration if type(iteration) is int else repr(type(iteration))[:60],
           "restored": [t.detach().clone() for t in model2.state_dict().values()]}
    # Resuming must continue exactly: the optimizer's state is restored too.
    step(model2, opt2, c["more"])
    out["resumed"] = [t.detach().clone() for t in model2.state_dict().values()]
    return out


spec("10.5", collect=_checkpoint_collect,
     cases=lambda: [dict(seed=0, xs=[randn(s, 5, 4) for s in range(3)], more=randn(9, 5, 4), iteration=3, to_path=False,
                         what="a file object, iteration 3")],
     invariant=lambda got, c: None if got["iteration"] == c["iteration"] else Problem(
         f"load_checkpoint returned {shown(got['iteration'])}, expected the saved iteration {c['iteration']}"),
     outputs={"restored": "the restored model's weights",
              "resumed": "the weights after one more step from the restored checkpoint (save and restore the "
                         "optimizer's state_dict too)"},
     passed="model, optimizer state and iteration round-trip through a file object")


# ---------------------------------------------------------------- 10.6: the training loop


class Recorder(torch.optim.Optimizer):
    """Plain SGD that records what each of its steps saw: every group's lr and the gradients' global norm."""

    def __init__(self, params):
        super().__init__(params, dict(lr=0.0))
        self.seen_lrs: list[list[float]] = []
        self.seen_norms: list[float] = []

    @torch.no_grad()
    def step(self, closure=None):
        self.seen_lrs.append([float(group["lr"]) for group in self.param_groups])
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        self.seen_norms.append(math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads)))
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])


class Regression:
    """A least-squares problem for the loop to train, counting what the loop asks of it: the weights w and a
    bias b in two param groups (b's with an lr_scale), batches drawn by the step, an evaluation that
    remembers when it ran and whether gradients were on."""

    def __init__(self, seed: int = 0, lr_scale: float = 0.5, scale: float = 3.0):
        g = gen(seed)
        self.w = nn.Parameter(torch.randn(3, generator=g))
        self.b = nn.Parameter(torch.zeros(1))
        self.x, self.y = torch.randn(32, 3, generator=g) * scale, torch.randn(32, generator=g) * scale
        self.optimizer = Recorder([{"params": [self.w]}, {"params": [self.b], "lr_scale": lr_scale}])
        self.asked: list[int] = []
        self.evaluated: list[int] = []
        self.grad_on: list[bool] = []

    def batch(self, step: int):
        self.asked.append(step)
        rows = torch.randint(0, 32, (8,), generator=gen(100 + step))
        return self.x[rows], self.y[rows]

    def loss_of(self, x, y):
        return ((x @ self.w + self.b - y) ** 2).mean()

    def evaluate(self, step: int) -> float:
        self.evaluated.append(step)
        self.grad_on.append(torch.is_grad_enabled())
        return float(self.loss_of(self.x, self.y).detach())

    def run(self, m, start: int, stop: int, lr, clip, eval_every: int = 0) -> list:
        """The loop's Steps for start … stop − 1 (a few more at most, should it not stop)."""
        def lr_at(step):
            return None if step >= stop else (lr(step) if callable(lr) else lr)
        evaluate = self.evaluate if eval_every else None
        # A one-shot generator, as model.parameters() is: a loop must list it once to clip at every step.
        parameters = (p for p in (self.w, self.b))
        steps = m.train(self.loss_of, parameters, self.optimizer, self.batch, lr_at, clip=clip, start=start,
                        evaluate=evaluate, eval_every=eval_every)
        return list(itertools.islice(steps, max(0, stop - start) + 3))


def _number(value) -> float:
    return float(value.detach()) if isinstance(value, torch.Tensor) else float(value)


def _nan_for_none(values) -> torch.Tensor:
    return torch.tensor([math.nan if v is None else _number(v) for v in values], dtype=torch.float64)


def _train_collect(m, c):
    r = Regression(c["seed"])
    done = r.run(m, c["start"], c["stop"], lambda step: c["lr"] * (1 + step % 3), c["clip"], c["eval_every"])
    return {"steps": [d.step for d in done], "batches": r.asked,
            "losses": _nan_for_none(d.loss for d in done),
            "lrs": _nan_for_none(d.lr for d in done),
            "grad_norms": _nan_for_none(d.grad_norm for d in done if d.grad_norm is not None),
            "grad_norm_types": [type(d.grad_norm).__name__ for d in done],
            "val_steps": [d.step for d in done if d.val_loss is not None],
            "val_losses": _nan_for_none(d.val_loss for d in done if d.val_loss is not None),
            "seen_lrs": torch.tensor(r.optimizer.seen_lrs, dtype=torch.float64).reshape(-1, 2),
            "seen_norms": torch.tensor(r.optimizer.seen_norms, dtype=torch.float64),
            "evaluated": r.evaluated, "evaluated_without_grad": [not on for on in r.grad_on],
            "losses_detached": [isinstance(d.loss, torch.Tensor) and not d.loss.requires_grad for d in done],
            "params": torch.cat([r.w.detach(), r.b.detach()])}


def _train_cases():
    return [dict(seed=0, start=0, stop=6, lr=0.01, clip=5.0, eval_every=2,
                 what="steps 0 … 5, clip 5, evaluate every 2 steps"),
            dict(seed=1, start=3, stop=7, lr=0.02, clip=None, eval_every=0,
                 what="resumed at step 3 until 7, no clipping, no evaluation")]


def _steps_and_batches(m):
    r = Regression()
    done = r.run(m, 2, 5, 0.01, None)
    steps = [d.step for d in done]
    if r.asked != [2, 3, 4]:
        return f"from start = 2 until lr_at(5) is None, it asked for batch({shown(r.asked)}), expected batch([2, 3, 4])"
    if steps != [3, 4, 5]:
        return f"from start = 2 to 5 it yielded steps {shown(steps)}, expected [3, 4, 5]"
    r = Regression()
    done = r.run(m, 4, 4, 0.01, None)
    if r.asked or done:
        return (f"from start = 4 with lr_at(4) None (a run resumed at its end), it asked for batch({shown(r.asked)}) "
                f"and yielded {len(done)} Step(s), expected none: ask lr_at before the first step too")
    r = Regression()
    r.run(m, 0, 3, lambda step: 0.0 if step == 0 else 0.01, None)
    if r.asked != [0, 1, 2]:
        return (f"with lr_at(0) = 0.0 (a warmup's first rate) until lr_at(3) is None, it asked for "
                f"batch({shown(r.asked)}), expected batch([0, 1, 2]): a rate of 0 is a rate, only None ends the run")
    return None


def _loss_before_the_update(m):
    r = Regression()
    before = r.w.detach().clone()
    done = r.run(m, 0, 3, 0.0, None)
    if not torch.equal(r.w.detach(), before):
        return "with a learning rate of 0, w changed"
    with torch.no_grad():
        want = _nan_for_none(r.loss_of(*Regression().batch(s)) for s in range(3))
    got = _nan_for_none(d.loss for d in done)
    d = differs(got, want)
    return d and f"with a learning rate of 0, the yielded losses and loss_of(batch(s)) for s = 0, 1, 2: {d}"


def _one_gradient_per_step(m):
    c = torch.tensor([1.0, -2.0, 0.5])
    w = nn.Parameter(torch.zeros(3))
    optimizer = Recorder([w])
    steps = m.train(lambda x, y: (w * c).sum(), [w], optimizer, lambda s: (None, None),
                    lambda s: None if s >= 3 else 1.0, clip=None)
    list(itertools.islice(steps, 6))
    moved = (-w.detach() / c).mean().item()
    return None if abs(moved - 3) < 1e-5 else (
        f"with loss = (w · c).sum(), plain SGD and lr 1, three steps moved w by {moved:.3g} gradients, expected 3")


def _lr_per_group(m):
    r = Regression(lr_scale=0.5)
    r.run(m, 0, 2, 0.1, None)
    want = [[0.1, 0.05], [0.1, 0.05]]
    got = [[round(v, 9) for v in lrs] for lrs in r.optimizer.seen_lrs]
    return None if got == want else (
        f"with lr_at(s) = 0.1 and a second group whose lr_scale is 0.5, the optimizer's step saw the groups' lr "
        f"{shown(got)}, expected {shown(want)}")


def _clips_before_the_step(m):
    r = Regression(scale=10.0)
    done = r.run(m, 0, 3, 0.001, 1.0)
    seen = r.optimizer.seen_norms
    if len(seen) < 3 or max(seen) > 1.0 + 1e-4:
        return (f"with clip 1 and parameters given as a generator (as model.parameters() is), the optimizer's steps "
                f"saw gradients of global norm {shown([round(v, 3) for v in seen])}")
    norms = [d.grad_norm for d in done]
    kinds = sorted({type(n).__name__ for n in norms if type(n) is not float})
    if kinds:
        return f"grad_norm must be a Python float (float(norm)), got a {' and a '.join(kinds)}"
    if any(n <= 1.0 for n in norms):
        return f"with clip 1 and gradients of norm > 1, grad_norm was {shown(norms)}: the norm before clipping"
    if any(d.grad_norm is not None for d in r.run(m, 2, 3, 0.001, None)):
        return "with clip None, grad_norm must be None"
    return None


def _evaluates_on_schedule(m):
    r = Regression()
    done = r.run(m, 0, 7, 0.01, None, eval_every=3)
    if r.evaluated != [3, 6]:
        return f"with eval_every 3 over steps 0 … 6, evaluate ran with {shown(r.evaluated)}, expected [3, 6]"
    if any(r.grad_on):
        return "evaluate ran with gradients on: wrap it in torch.no_grad()"
    vals = [d.val_loss is not None for d in done]
    want = [d.step in (3, 6) for d in done]
    return None if vals == want else "val_loss must be evaluate's value after steps 3 and 6, and None after the others"


def _loss_detached(m):
    done = Regression().run(m, 0, 1, 0.01, None)
    return None if done and not done[0].loss.requires_grad else (
        "the yielded loss still requires grad: yield loss.detach(), or every step's graph stays alive")


TRAIN_PROPERTIES = (
    Property("it asks for batch(s) for s = start, start + 1, …, stops at the first s where lr_at(s) is None, and "
             "numbers each Step s + 1", _steps_and_batches,
             example="w = torch.nn.Parameter(torch.zeros(1))\nopt = torch.optim.SGD([w], lr=0.0)\n"
                     "steps = minilm.train(lambda x, y: (w - 1).pow(2).sum(), [w], opt,\n"
                     "                     lambda s: (print('batch', s), None), lambda s: None if s >= 5 else 0.1,\n"
                     "                     clip=None, start=2)\n"
                     "print([d.step for d in steps])  # batch 2, 3, 4; [3, 4, 5]",
             idea="keep a step counter from start; each time round, ask lr_at first and stop on None; after the "
                  "update add one and yield that"),
    Property("each Step's loss is loss_of(batch(s)) before that step's update", _loss_before_the_update,
             idea="compute the loss from this step's batch, then backward and step: the loss you yield is the one "
                  "you backpropagated"),
    Property("each update follows that step's gradient alone: the gradients are zeroed before each backward pass",
             _one_gradient_per_step,
             example="w = torch.nn.Parameter(torch.zeros(2))\nopt = torch.optim.SGD([w], lr=1.0)\n"
                     "c = torch.tensor([1.0, 2.0])\n"
                     "list(minilm.train(lambda x, y: (w * c).sum(), [w], opt, lambda s: (None, None),\n"
                     "                  lambda s: None if s >= 3 else 1.0, clip=None))\nprint(w)  # -3 · c",
             idea="backward() adds to .grad: zero the gradients (optimizer.zero_grad()) before each loss.backward(), "
                  "and take the optimizer's step after it"),
    Property("before the optimizer's step, every param group's lr is lr_at(s) times its lr_scale", _lr_per_group,
             idea="set group['lr'] = lr * group.get('lr_scale', 1.0) for every group at the top of each step"),
    Property("with clip, the optimizer steps on gradients of global norm at most clip at every step, and grad_norm "
             "is the norm before clipping, a float (None without clip)", _clips_before_the_step,
             idea="clip after loss.backward() and before optimizer.step(), with your clip_grad_norm, and keep the "
                  "float of the norm it returns; list the parameters once at the start, since a generator such as "
                  "model.parameters() is empty after its first use"),
    Property("evaluate(s) runs after each step s that is a multiple of eval_every, with gradients off, and its value "
             "is that Step's val_loss", _evaluates_on_schedule,
             idea="after the update, with the step count already advanced: if it is a multiple of eval_every, call "
                  "evaluate inside torch.no_grad()"),
    Property("the loss it yields is detached from the graph", _loss_detached,
             idea="yield loss.detach(): a loss that keeps its graph keeps that step's activations alive"),
)

spec("10.6", properties=TRAIN_PROPERTIES, collect=_train_collect, cases=_train_cases, atol=1e-6,
     outputs={"steps": "the Steps' step numbers", "batches": "the steps batch() was asked for",
              "losses": "the yielded losses", "lrs": "the yielded learning rates",
              "grad_norms": "the yielded gradient norms (None without clip)",
              "grad_norm_types": "the yielded gradient norms' types (float, or NoneType without clip)",
              "val_steps": "the Steps that carry a val_loss", "val_losses": "the yielded val_loss values",
              "seen_lrs": "the groups' lr when the optimizer stepped",
              "seen_norms": "the gradients' global norm when the optimizer stepped",
              "evaluated": "the steps evaluate() ran after",
              "evaluated_without_grad": "whether gradients were off while evaluate() ran",
              "losses_detached": "whether each yielded loss was detached", "params": "the trained weights"},
     passed="steps, batches, clipping, per-group rates, evaluation and resuming as the contract says")
