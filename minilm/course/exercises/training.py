"""Specs of notebooks 9–10b: data, BPE, training and its loop (provided). See minilm/course/exercises/__init__.py."""

from __future__ import annotations

import io
import itertools
import math
import os
import tempfile
from collections.abc import Callable

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
    one_line,
    optimizer_edges,
    randn,
    rises_then_falls,
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


def _get_batch_seeded(m):
    data = np.arange(1000, dtype=np.int64)  # x[b, 0] is row b's start
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        x, _ = m.get_batch(data, 8, 4, "cpu")
        torch.manual_seed(7)
        want = torch.randint(0, 1000 - 4, (8,))
    got = x[:, 0].long() if type(x) is torch.Tensor and x.ndim == 2 else None
    if got is not None and torch.equal(got, want):
        return None
    return (f"after torch.manual_seed(7), on the tokens 0 … 999 with batch 8 and context_length 4, the rows start at "
            f"{got.tolist() if got is not None else '…'}, expected torch.randint(0, 996, (8,))'s draws in the order "
            f"drawn: {want.tolist()}")


GET_BATCH_PROPERTIES = (
    Property("row b starts at the b-th of batch_size starts drawn with one torch.randint, so torch.manual_seed "
             "reproduces the batch", _get_batch_seeded,
             example="torch.manual_seed(7); x, y = minilm.get_batch(np.arange(1000), 8, 4, 'cpu')\n"
                     "torch.manual_seed(7); print(x[:, 0], torch.randint(0, 996, (8,)))  # the same",
             idea="draw the starts with torch.randint(0, len(dataset) − context_length, (batch_size,)) and use them "
                  "in the order drawn: sorting or shuffling them makes row b's start depend on the others"),
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


def _merges_on(m, text: str, num_merges: int) -> list:
    """The merges the student's train_bpe learns from `text` (its vocab is the invariant's to judge)."""
    result = m.train_bpe(text, num_merges)
    merges = result[1] if type(result) is tuple and len(result) == 2 else None
    if type(merges) is not list or not all(type(p) is tuple and len(p) == 2 and all(type(b) is bytes for b in p)
                                           for p in merges):
        raise TypeError(f"train_bpe({text!r}, {num_merges}) returned no list of (bytes, bytes) merges")
    return merges


def _pairs_shown(merges: list, text: str) -> str:
    """Merges for a message: a part made of the probe text's own bytes is shown, anything else as "…"."""
    own = text.encode("utf-8")
    parts = [", ".join(repr(b) if b and b in own else "…" for b in pair) for pair in merges[:6]]
    return "[" + ", ".join(f"({p})" for p in parts) + (", …" if len(merges) > 6 else "") + f"] ({len(merges)})"


def _bpe_learns(text: str, num_merges: int, want: list) -> Callable[[object], str | None]:
    """A probe: train_bpe(text, num_merges) learns exactly the merges `want`, which the contract fixes."""
    def probe(m):
        got = _merges_on(m, text, num_merges)
        if got == want:
            return None
        return (f"train_bpe({text!r}, {num_merges}) learns the merges {_pairs_shown(got, text)}, expected "
                f"{_pairs_shown(want, text)}")
    return probe


# Repeated words, "aaa" and "aaaa" (overlapping pairs), ties: 24 merges in all, of which the probe asks 20.
BPE_TWICE_CORPUS = "aaa aaaa abab ab ba\nlow lower lowest low newer new\nabc abcabc"


def _bpe_merges_once(m):
    merges = _merges_on(m, BPE_TWICE_CORPUS, 20)
    tokens = {bytes([i]) for i in range(256)}
    for k, pair in enumerate(merges):
        if pair in merges[:k]:
            return (f"on {BPE_TWICE_CORPUS!r} with 20 merges, merge {k} is merge {merges.index(pair)} again: after "
                    "a merge no chunk holds that pair any more")
        missing = [b for b in pair if b not in tokens]
        if missing:
            return (f"on {BPE_TWICE_CORPUS!r} with 20 merges, merge {k} joins a token that is neither a byte nor "
                    "an earlier merge's token")
        tokens.add(pair[0] + pair[1])
    return None


_A, _B = b"a", b"b"
BPE_PROPERTIES = (
    Property("every merge takes a pair the chunks hold after the merges before it: no pair is merged twice",
             _bpe_merges_once,
             example="vocab, merges = minilm.train_bpe('aaa aaaa abab ab ba', 10)\n"
                     "print(len(merges), len(set(merges)))  # equal: no pair twice",
             idea="after each merge, replace every occurrence of the pair in every chunk, then count the pairs "
                  "again (or update the counts of the chunks it changed: minus their old pairs, plus their new "
                  "ones, dropping a pair whose count falls to 0)"),
    Property("the pairs a merge makes count for the next one: after (b, c), 'abc' holds (a, bc)",
             _bpe_learns("abc\nabc\nbc", 2, [(_B, b"c"), (_A, b"bc")]),
             example="print(minilm.train_bpe('abc\\nabc\\nbc', 2)[1])  # [(b'b', b'c'), (b'a', b'bc')]",
             idea="after a merge, count the pairs again (or add the new token's pairs with its neighbours to the "
                  "counts): the new token can be merged in its turn"),
    Property("merges stay inside GPT-2's pre-tokens: ' x.' is the chunks ' x' and '.', and a space starts a chunk",
             _bpe_learns("x. x. x.", 1, [(b" ", b"x")]),
             example="print(minilm.train_bpe('x. x. x.', 1)[1])  # [(b' ', b'x')]",
             idea="split the text with regex.finditer(GPT2_PATTERN, text) (not str.split, which drops the spaces) "
                  "and count pairs only inside each chunk"),
    Property("each chunk starts as its UTF-8 bytes, one token per byte: 'é' is the two tokens b'\\xc3' b'\\xa9'",
             _bpe_learns("é é é", 1, [(b"\xc3", b"\xa9")]),
             example="print(minilm.train_bpe('é é é', 1)[1])  # [(b'\\xc3', b'\\xa9')]",
             idea="turn each chunk into [bytes([b]) for b in chunk.encode('utf-8')]: a character beyond ASCII is "
                  "several bytes, each its own token at the start"),
    Property("a chunk holds a pair as often as it occurs in it: 'aaa' holds (a, a) twice",
             _bpe_learns("aaa xy", 1, [(_A, _A)]),
             example="print(minilm.train_bpe('aaa xy', 1)[1])  # [(b'a', b'a')]: twice in 'aaa', against once",
             idea="count every adjacent pair zip(tokens, tokens[1:]), not the set of a chunk's distinct pairs"),
    Property("a chunk's pairs count as many times as the chunk occurs in the text",
             _bpe_learns("xy\nab\nab", 1, [(_A, _B)]),
             example="print(minilm.train_bpe('xy\\nab\\nab', 1)[1])  # [(b'a', b'b')]: 'ab' occurs twice",
             idea="count the chunks (a Counter), then add each chunk's pairs times its count"),
    Property("a tie goes to the greatest pair: (b'b', b'a') beats (b'a', b'z')",
             _bpe_learns("az\nba", 1, [(_B, _A)]),
             example="print(minilm.train_bpe('az\\nba', 1)[1])  # [(b'b', b'a')]",
             idea="among the pairs with the top count take max(pair), the greatest; not the first one counted "
                  "(max(counts, key=counts.get) or most_common keep the order the pairs were seen in)"),
    Property("pairs compare as (left, right) tuples, not joined: (b'ab', b'a') beats (b'a', b'z')",
             _bpe_learns("ab\nab\nab\naba\naz", 2, [(_A, _B), (b"ab", _A)]),
             example="print(minilm.train_bpe('ab\\nab\\nab\\naba\\naz', 2)[1])  # [(b'a', b'b'), (b'ab', b'a')]",
             idea="compare the pairs themselves, max of (count, pair): the left tokens first, then the right; "
                  "b'aba' < b'az' joined, but b'ab' > b'a' on the left"),
    Property("a merge replaces every occurrence of its pair in a chunk: 'abab' becomes [ab, ab]",
             _bpe_learns("abab", 2, [(_A, _B), (b"ab", b"ab")]),
             example="print(minilm.train_bpe('abab', 2)[1])  # [(b'a', b'b'), (b'ab', b'ab')]",
             idea="scan each chunk to its end and merge at every position where the pair occurs, not only the first"),
    Property("a merge scans left to right: with (a, a), 'aaa' becomes [aa, a]",
             _bpe_learns("aaa", 2, [(_A, _A), (b"aa", _A)]),
             example="print(minilm.train_bpe('aaa', 2)[1])  # [(b'a', b'a'), (b'aa', b'a')]",
             idea="walk from the left; where the pair starts at j, emit the token and jump to j + 2, so the two "
                  "tokens it used are not used again"),
    Property("training stops early when no chunk has two tokens left",
             _bpe_learns("no no no", 10, [(b"n", b"o"), (b" ", b"no")]),
             example="print(minilm.train_bpe('no no no', 10)[1])  # [(b'n', b'o'), (b' ', b'no')]: then nothing",
             idea="stop as soon as no pair is left to count (every chunk is one token); a pair whose count fell "
                  "to 0 is no pair: drop it from the counts"),
)

spec("9.2", properties=BPE_PROPERTIES,
     collect=_train_bpe_collect, invariant=_train_bpe_invariant, explain=_explain_merges,
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
    tok = m.Tokenizer(vocab, merges, ["<|b|>", "<|a|>"])  # not in sorted order: the ids follow the order given
    b, a = tok.encode("<|b|>"), tok.encode("<|a|>")
    if b != [max(vocab) + 1] or a != [max(vocab) + 2]:
        return (f"with vocab ids 0 … {max(vocab)} and special tokens ['<|b|>', '<|a|>'], encode gives {shown(b)} and "
                f"{shown(a)}, expected [{max(vocab) + 1}] and [{max(vocab) + 2}], in the order given")
    return None


def _decode_replaces_bad_bytes(m):
    tok = m.Tokenizer(tokenizer_vocab([]), [])
    got = tok.decode([104, 255, 105])  # b"h\xffi": 0xff is no UTF-8
    return None if got == "h\ufffdi" else f"decode([104, 255, 105]), the bytes h, 0xff, i, gives {got!r}, expected " \
                                              "'h\ufffdi' (0xff is no UTF-8: it becomes U+FFFD)"


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
    keeps_inputs("Tokenizer", lambda: ({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")],
                                       ["<|endoftext|>", "<|x|>"]),
                 "Tokenizer(vocab, merges, ['<|endoftext|>', '<|x|>']) with 257 ids"),
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
    Property("bytes that are no UTF-8 decode to U+FFFD (errors='replace'), nothing dropped",
             _decode_replaces_bad_bytes,
             example="tok = minilm.Tokenizer({i: bytes([i]) for i in range(256)}, [])\n"
                     "print(repr(tok.decode([104, 255, 105])))  # 'h\\ufffdi'",
             idea="join the ids' bytes and decode them once with .decode('utf-8', errors='replace')"),
    Property("new special tokens get ids of their own after the largest id of vocab, in the order given",
             _new_specials_distinct,
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
        return Problem(f"cross_entropy gives {loss.item()} for {c['what']}: exp overflowed or underflowed. Use the "
                       "log-sum-exp trick row by row: subtract each row's own max logit (over the last dim) before "
                       "exp and add it back after the log", "no_logsumexp")
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
    shifted, plain = m.cross_entropy(logits + 1e4, targets), m.cross_entropy(logits, targets)
    d = differs(shifted, plain, atol=1e-3)
    if d and type(shifted) is torch.Tensor and type(plain) is torch.Tensor and shifted.numel() == plain.numel() == 1:
        moved = (shifted - plain).item()
        if abs(abs(moved) - 1e4) < 1:  # the loss moved by the shift itself
            d += (f"; yours moved by {moved:+,.0f}, the shift itself: the max m taken out of the log-sum-exp must be "
                  "put back, log Σ exp(z − m) + m")
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


def _not_a_norm(value, when: str) -> str | None:
    """What is wrong with clip_grad_norm's return `value`, which the contract makes a 0-dim tensor in
    every case (a float, or a tensor of shape (1,), is not), or None."""
    if type(value) is torch.Tensor and value.ndim == 0:
        return None
    got = f"a tensor of shape {tuple(value.shape)}" if type(value) is torch.Tensor else f"a {type(value).__name__}"
    return f"{when}, clip_grad_norm returned {got}, expected a 0-dim tensor"


def _clip_returns_norm(m):
    grads, _, returned = _clipped(m, 5.0, 1.0)
    wrong = _not_a_norm(returned, "with gradients of norm 5 and max_norm 1")
    d = wrong or differs(returned.detach().double(), _global_norm(grads), atol=1e-4)
    return wrong or d and f"the returned value and the global norm before clipping: {d}"


def _clip_nothing_to_clip(m):
    zero = [nn.Parameter(torch.ones(3, 4)), nn.Parameter(torch.ones(5))]
    for p in zero:
        p.grad = torch.zeros_like(p)
    none = [nn.Parameter(torch.ones(3, 4)), nn.Parameter(torch.ones(5))]  # .grad None: nothing to clip
    for params, when in ((zero, "with two all-zero gradients and max_norm 1"),
                         (none, "with two parameters whose .grad is None (no gradient at all) and max_norm 1")):
        returned = m.clip_grad_norm(params, 1.0)
        wrong = _not_a_norm(returned, when)
        if wrong:
            return wrong
        found = at_edge(f"{when}, the returned norm and 0", lambda: returned.detach().double(),
                        torch.tensor(0.0, dtype=torch.float64))
        if found:
            return found
    return at_edge("with two all-zero gradients, the gradients after clipping and zeros",
                   lambda: torch.cat([p.grad.flatten() for p in zero]), torch.zeros(17))


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
    for dtype in (torch.bfloat16, torch.float16):  # a model trained in half precision has half-precision gradients
        p = nn.Parameter(torch.zeros(4, 6, dtype=dtype))
        p.grad = randn(86, 4, 6, scale=5.0).to(dtype)
        m.clip_grad_norm([p], 1.0)
        norm = p.grad.double().norm().item()
        if abs(norm - 1.0) > 0.02:
            return (f"with {str(dtype)[6:]} gradients of norm ~24 and max_norm 1, p.grad's norm after clipping is "
                    f"{norm:.3g}, expected 1: the gradients themselves were not scaled")
    return None


CLIP_PROPERTIES = (
    Property("it returns the norm as a 0-dim tensor and scales each .grad in place, in any float dtype",
             _clip_in_place,
             example="a = torch.nn.Parameter(torch.zeros(3))\na.grad = 5 * torch.randn(3)\ng = a.grad\n"
                     "norm = minilm.clip_grad_norm([a], 1.0)\nprint(type(norm), norm.shape, a.grad is g)  "
                     "# Tensor, (), True",
             idea="keep the norm as the tensor torch.sqrt gives (no .item() or float()), and scale the .grad tensors "
                  "themselves (not float copies of them: .float() of a bfloat16 tensor is a copy) with g.mul_(…) "
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


def _cosine_at(want: dict, max_lr: float = 2.0, min_lr: float = 0.5, warmup: int = 10, cycle: int = 70):
    """A probe: lr_cosine_schedule at the its of `want` gives the rates the contract fixes there."""
    return lambda m: off_points(lambda it: m.lr_cosine_schedule(int(it), max_lr, min_lr, warmup, cycle), want,
                                f"max_lr {max_lr:g}, min_lr {min_lr:g}, warmup {warmup} and cycle {cycle}", "it =")


def _schedule_shape(m):
    return rises_then_falls(lambda it: m.lr_cosine_schedule(int(it), 1.0, 0.1, 4, 16), list(range(25)), 4,
                            "max_lr 1, min_lr 0.1, warmup 4 and cycle 16", "it =")


_COSINE = "lr = lambda it: minilm.lr_cosine_schedule(it, 2.0, 0.5, 10, 70)\n"
SCHEDULE_PROPERTIES = (
    Property("the warmup rises linearly from 0 at it = 0: it / warmup_iters · max_lr",
             _cosine_at({0: 0.0, 1: 0.2, 5: 1.0, 9: 1.8}),
             example=_COSINE + "print([lr(it) for it in (0, 1, 5, 9)])  # [0.0, 0.2, 1.0, 1.8]",
             idea="for it < warmup_iters return it / warmup_iters · max_lr: 0 at it = 0, min_lr plays no part"),
    Property("the rate is exactly max_lr at it = warmup_iters, where the cosine starts",
             _cosine_at({10: 2.0}),
             example=_COSINE + "print(lr(10))  # 2.0",
             idea="it = warmup_iters is the cosine's first iteration, at progress 0: (it − warmup_iters) / "
                  "(cosine_cycle_iters − warmup_iters) is 0 there, and the cosine gives max_lr"),
    Property("the rate is exactly min_lr at it = cosine_cycle_iters and at every it after",
             _cosine_at({70: 0.5, 71: 0.5, 100: 0.5, 10**6: 0.5}),
             example=_COSINE + "print([lr(it) for it in (70, 71, 100, 10**6)])  # [0.5, 0.5, 0.5, 0.5]",
             idea="the cosine's progress reaches 1 at it = cosine_cycle_iters, where cos(π) gives min_lr; "
                  "for it > cosine_cycle_iters return min_lr itself"),
    Property("between them the rate follows half a cosine: min_lr + ½ (1 + cos(π · progress)) (max_lr − min_lr)",
             _cosine_at({30: 1.625, 40: 1.25, 50: 0.875}),
             example=_COSINE + "print([lr(it) for it in (30, 40, 50)])  # progress ⅓, ½, ⅔: [1.625, 1.25, 0.875]",
             idea="progress = (it − warmup_iters) / (cosine_cycle_iters − warmup_iters) runs from 0 to 1; the "
                  "rate is min_lr + 0.5 · (1 + math.cos(math.pi · progress)) · (max_lr − min_lr)"),
    Property("with warmup_iters 0 there is no warmup: the cosine starts at max_lr at it = 0",
             _cosine_at({0: 2.0, 20: 1.25, 40: 0.5, 41: 0.5}, warmup=0, cycle=40),
             example="print(minilm.lr_cosine_schedule(0, 2.0, 0.5, 0, 40))  # 2.0",
             idea="test it < warmup_iters before dividing by warmup_iters: with warmup_iters 0 no it is in the "
                  "warmup, and it / warmup_iters would divide by 0"),
    Property("the rate never falls during the warmup and never rises after it", _schedule_shape,
             example="lr = [minilm.lr_cosine_schedule(it, 1.0, 0.1, 4, 16) for it in range(25)]\n"
                     "print(lr)  # up to it = 4, then down to 0.1, then flat",
             idea="three cases by it, each on its own range: the warmup below warmup_iters, the cosine from "
                  "warmup_iters to cosine_cycle_iters (cos of 0 … π only falls), min_lr after"),
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
    g = randn(84, 6, scale=3.0)
    for step in range(1, 4):  # a constant gradient: m̂ = g and v̂ = g² at every step, once both are corrected
        before = p.detach().clone()
        p.grad = g.clone()
        opt.step()
        d = differs((p.detach() - before).abs(), torch.full((6,), 0.1), atol=1e-5)
        if d:
            return (f"with the same gradient (~3) at every step and lr 0.1, step {step} moved each weight by other "
                    f"than 0.1 (bias correction 1 − β^t makes m̂ / √v̂ = ±1 at every step t): {d}")
    return None


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
    Property("the state of each parameter holds step and the moments exp_avg and exp_avg_sq, not bias-corrected",
             _adamw_state,
             idea="keep the step count and the two moments in self.state[p] under PyTorch's names; compute the "
                  "bias-corrected m̂ and v̂ as new tensors (m / (1 − β1ᵗ)), never in place on the stored moments"),
    Property("with the same gradient at every step, each step moves every weight by lr (bias correction makes "
             "m̂ / √v̂ = ±1 at every step)", _adamw_first_step,
             example="p = torch.nn.Parameter(torch.zeros(6))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.0)\n"
                     "p.grad = 3 * torch.randn(6)\nopt.step()\nprint(p)  # every entry ±0.1",
             idea="at step t = 1, m = (1 − β1) g and v = (1 − β2) g²: dividing them by 1 − β1ᵗ and 1 − β2ᵗ gives g "
                  "and g², so the step is lr · g / |g|"),
    Property("with a zero gradient, a step multiplies each weight by 1 − lr · weight_decay", _adamw_decay_alone,
             example="p = torch.nn.Parameter(torch.ones(4))\nopt = minilm.AdamW([p], lr=0.1, weight_decay=0.5)\n"
                     "p.grad = torch.zeros(4)\nopt.step()\nprint(p)  # 0.95",
             idea="the decay is decoupled: p ← p − lr · weight_decay · p, apart from the moments"),
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
    *optimizer_edges(lambda m, params: m.AdamW(params, lr=0.1), "AdamW"),
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
    out = {"iteration": iteration if type(iteration) in (int, float, bool) else repr(type(iteration))[:60],
           "restored": [t.detach().clone() for t in model2.state_dict().values()]}
    # Resuming must continue exactly: the optimizer's state is restored too.
    step(model2, opt2, c["more"])
    out["resumed"] = [t.detach().clone() for t in model2.state_dict().values()]
    return out


class _Counted(Momentum):
    """Momentum that also counts its steps in each parameter's state, as AdamW's "step" does."""

    @torch.no_grad()
    def step(self, closure=None):
        super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["step"] = self.state[p].get("step", 0) + 1


class _WithBuffer(nn.Module):
    """A model whose state_dict holds a buffer besides its weights (a running statistic, a RoPE table)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)  # release: not a task (a model to checkpoint)
        self.register_buffer("count", torch.zeros(2))

    def forward(self, x):
        return self.lin(x) + self.count


def _trained(seed: int, steps: int, lr: float = 0.05) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A small model and its optimizer after `steps` steps: the optimizer holds a momentum and a step count
    per parameter, the model a buffer that training moved."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _WithBuffer()
    opt = _Counted(model.parameters(), lr=lr)
    for k in range(steps):
        _one_step(model, opt, randn(30 + k, 4, 3))
    return model, opt


def _one_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    model.count += 1


def _round_trip(m, iteration: int = 7, out=None):
    """Save a trained model and optimizer with the student's code, load them into fresh ones, also with it:
    (saved model, saved optimizer, restored model, restored optimizer, the iteration returned)."""
    model, opt = _trained(0, 3)
    fresh, fresh_opt = _trained(1, 1, lr=0.01)  # other weights, its own state and lr: all overwritten
    buffer = io.BytesIO() if out is None else out
    m.save_checkpoint(model, opt, iteration, buffer)
    if out is None:
        buffer.seek(0)
    got = m.load_checkpoint(buffer, fresh, fresh_opt)
    return model, opt, fresh, fresh_opt, got


def _checkpoint_iteration(m):
    for iteration in (0, 12345):
        got = _round_trip(m, iteration)[-1]
        if type(got) is not int or got != iteration:
            kind = shown(got) if type(got) in (int, float, bool) or got is None else f"a {type(got).__name__}"
            return f"after save_checkpoint(…, iteration={iteration}, …), load_checkpoint returned {kind}, " \
                   f"expected the int {iteration}"
    return None


def _checkpoint_in_place(m):
    model, opt = _trained(0, 3)
    fresh, fresh_opt = _trained(1, 1, lr=0.01)
    held = [id(p) for p in fresh.parameters()]  # what fresh_opt updates
    buffer = io.BytesIO()
    m.save_checkpoint(model, opt, 3, buffer)
    buffer.seek(0)
    m.load_checkpoint(buffer, fresh, fresh_opt)
    replaced = [n for (n, p), i in zip(fresh.named_parameters(), held) if id(p) != i]
    return replaced and (f"after load_checkpoint, the model's {', '.join(replaced)} are new tensors, not the "
                         "parameters the optimizer holds: its next step would not move the model") or None


def _checkpoint_model(m):
    model, _, fresh, _, _ = _round_trip(m)
    saved, restored = model.state_dict(), fresh.state_dict()
    gaps = {name: d for name in saved if (d := differs(restored.get(name), saved[name], atol=0, rtol=0))}
    if not gaps:
        return None
    names = list(gaps)
    which = f"{', '.join(names[:-1])} and {names[-1]} differ" if len(names) > 1 else f"{names[0]} differs"
    return (f"a model with the weights lin.weight, lin.bias and the buffer count, loaded into another one: "
            f"{which} from the saved model's ({names[0]}: {gaps[names[0]]})")


def _checkpoint_optimizer(m):
    _, opt, fresh, fresh_opt, _ = _round_trip(m)
    saved, restored = opt.state_dict(), fresh_opt.state_dict()
    for i, state in saved["state"].items():
        for key, value in state.items():
            got = restored["state"].get(i, {}).get(key)
            if isinstance(value, torch.Tensor):
                d = differs(got, value, atol=0, rtol=0)
                if d:
                    return f"after load_checkpoint, the optimizer's {key} of parameter {i} and the saved one's: {d}"
            elif got != value:
                return f"after load_checkpoint, the optimizer's {key} of parameter {i} is " \
                       f"{shown(got) if got is None or type(got) is int else '…'}, the saved one's {value}"
    lrs = [g.get("lr") for g in restored["param_groups"]]
    if lrs != [g["lr"] for g in saved["param_groups"]]:
        return f"after load_checkpoint, the optimizer's lr is {shown(lrs)}, the saved one's " \
               f"{[g['lr'] for g in saved['param_groups']]}"
    return None


def _checkpoint_paths(m):
    import pathlib

    with tempfile.TemporaryDirectory() as folder:
        for out, src in ((os.path.join(folder, "a.pt"), pathlib.Path(folder) / "a.pt"),
                         (pathlib.Path(folder) / "b.pt", os.path.join(folder, "b.pt"))):
            model, opt = _trained(0, 2)
            fresh, fresh_opt = _trained(1, 1)
            kinds = f"saved to a path as a {type(out).__name__} and loaded from it as a {type(src).__name__}"
            try:
                m.save_checkpoint(model, opt, 5, out)
                got = m.load_checkpoint(src, fresh, fresh_opt)
            except Exception as e:  # noqa: BLE001 - raising on a path is breaking the property
                return f"{kinds}: your code raised {one_line(e)}"
            d = differs(fresh.lin.weight.detach(), model.lin.weight.detach(), atol=0, rtol=0)
            if d or type(got) is not int or got != 5:
                return f"{kinds}: load_checkpoint returned {shown(got) if type(got) is int else '…'} (saved 5), " \
                       f"and the restored weights and the saved ones: {d or 'equal'}"
    return None


def _checkpoint_resumes(m):
    model, opt, fresh, fresh_opt, _ = _round_trip(m)
    x = randn(50, 4, 3)
    _one_step(model, opt, x)
    _one_step(fresh, fresh_opt, x)
    d = differs(fresh.lin.weight.detach(), model.lin.weight.detach(), atol=1e-7, rtol=1e-6)
    return d and f"one more step after load_checkpoint, and one more step of the run that saved: the weights: {d}"


CHECKPOINT_PROPERTIES = (
    Property("load_checkpoint restores the model's whole state_dict in place, buffers too", _checkpoint_model,
             example="# save a model, load into another one, then\n"
                     "print(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), "
                     "other.state_dict().values())))",
             idea="save model.state_dict() (every parameter and buffer, not only named_parameters()) and call "
                  "model.load_state_dict(checkpoint[...]) on the model given: it copies into its tensors"),
    Property("load_checkpoint copies into the model's own parameters, the ones the optimizer holds",
             _checkpoint_in_place,
             example="ids = [id(p) for p in model.parameters()]\nminilm.load_checkpoint(path, model, optimizer)\n"
                     "print(ids == [id(p) for p in model.parameters()])  # True",
             idea="model.load_state_dict(state) copies the values into the existing tensors; assign=True, or "
                  "setting new nn.Parameters, leaves the optimizer updating tensors the model no longer uses"),
    Property("load_checkpoint restores the optimizer's state: each parameter's moments and step count, and the lr",
             _checkpoint_optimizer,
             example="# after load_checkpoint(src, model, optimizer):\n"
                     "print(optimizer.state_dict()['state'])  # the saved optimizer's",
             idea="save optimizer.state_dict() and restore it with optimizer.load_state_dict(...): the state is "
                  "keyed by the parameters' order, so it fits the new model's parameters"),
    Property("load_checkpoint returns the iteration save_checkpoint stored, an int (0 too)", _checkpoint_iteration,
             example="import io\nbuffer = io.BytesIO()\nminilm.save_checkpoint(model, optimizer, 0, buffer)\n"
                     "buffer.seek(0)\n"
                     "print(minilm.load_checkpoint(buffer, model, optimizer))  # 0",
             idea="store the iteration in the dict you save, under a key of its own, and return the value stored "
                  "there as it is"),
    Property("save_checkpoint and load_checkpoint take a path (a str or an os.PathLike) as well as a file object",
             _checkpoint_paths,
             example="import pathlib\nminilm.save_checkpoint(model, optimizer, 5, pathlib.Path('ckpt.pt'))\n"
                     "print(minilm.load_checkpoint('ckpt.pt', model, optimizer))  # 5",
             idea="hand `out` and `src` to torch.save and torch.load as they are: both take a path or a file object; "
                  "testing isinstance(out, str) leaves pathlib.Path out"),
    Property("training resumed from a checkpoint takes the same step as the run that saved it", _checkpoint_resumes,
             example="# save after some steps, load into a fresh model and optimizer, take one more step on both: "
                     "the weights agree",
             idea="a run resumes from the weights and the optimizer's state together: save both state_dicts and "
                  "load both"),
)

spec("10.5", properties=CHECKPOINT_PROPERTIES, collect=_checkpoint_collect,
     cases=lambda: [dict(seed=0, xs=[randn(s, 5, 4) for s in range(3)], more=randn(9, 5, 4), iteration=3, to_path=False,
                         what="a file object, iteration 3")],
     invariant=lambda got, c: None if type(got["iteration"]) is int and got["iteration"] == c["iteration"] else Problem(
         f"load_checkpoint returned {shown(got['iteration'])}, expected the saved iteration {c['iteration']}, an int"),
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

    def __init__(self, seed: int = 0, lr_scale: float = 0.5, scale: float = 3.0, scaled_first: bool = False):
        g = gen(seed)
        self.w = nn.Parameter(torch.randn(3, generator=g))
        self.b = nn.Parameter(torch.zeros(1))
        self.x, self.y = torch.randn(32, 3, generator=g) * scale, torch.randn(32, generator=g) * scale
        groups = [{"params": [self.w]}, {"params": [self.b], "lr_scale": lr_scale}]
        if scaled_first:  # the scaled group first: code that reads group 0's rate gets the scaled one
            groups = [{"params": [self.w], "lr_scale": lr_scale}, {"params": [self.b]}]
        self.optimizer = Recorder(groups)
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


class _SnapshotRecorder(Recorder):
    """A Recorder that also keeps the weights each of its steps started from."""

    def __init__(self, params):
        super().__init__(params)
        self.before: list[tuple[torch.Tensor, ...]] = []

    @torch.no_grad()
    def step(self, closure=None):
        self.before.append(tuple(p.detach().clone() for group in self.param_groups for p in group["params"]))
        return super().step(closure)


class _Snapshots(Regression):
    """A Regression whose optimizer keeps the weights each step started from, and evaluates with them at hand."""

    def __init__(self, seed: int = 0, scale: float = 3.0):
        super().__init__(seed, scale=scale)
        self.optimizer = _SnapshotRecorder([{"params": [self.w]}, {"params": [self.b], "lr_scale": 0.5}])
        self.evaluated_at: list[tuple[torch.Tensor, torch.Tensor]] = []

    @staticmethod
    def loss_with(w, b, x, y):
        return ((x @ w + b - y) ** 2).mean()  # loss_of with other weights

    def evaluate(self, step: int) -> float:
        self.evaluated_at.append((self.w.detach().clone(), self.b.detach().clone()))
        return super().evaluate(step)


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
    if d:
        return f"with a learning rate of 0, the yielded losses and loss_of(batch(s)) for s = 0, 1, 2: {d}"
    r = _Snapshots()
    done = r.run(m, 0, 3, 0.05, None)
    with torch.no_grad():
        want = _nan_for_none(r.loss_with(w, b, *Regression().batch(s)) for s, (w, b) in enumerate(r.optimizer.before))
    d = differs(_nan_for_none(d.loss for d in done), want)
    return d and ("with lr 0.05, the yielded losses and loss_of(batch(s)) with the weights the optimizer's step s "
                  f"started from, s = 0, 1, 2: {d}")


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
    for scale in (0.5, 0.0):  # 0: a group frozen for a phase trains at rate 0
        r = Regression(lr_scale=scale)
        r.run(m, 0, 2, 0.1, None)
        want = [[0.1, round(0.1 * scale, 9)]] * 2
        got = [[round(v, 9) for v in lrs] for lrs in r.optimizer.seen_lrs]
        if got != want:
            return (f"with lr_at(s) = 0.1 and a second group whose lr_scale is {scale:g}, the optimizer's step saw "
                    f"the groups' lr {shown(got)}, expected {shown(want)}")
    return None


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


def _yields_the_rate(m):
    for scaled_first, which in ((False, "a second group"), (True, "the first group")):
        r = Regression(lr_scale=0.5, scaled_first=scaled_first)
        done = r.run(m, 0, 3, lambda step: 0.1 * (step + 1), None)
        got = [None if d.lr is None else round(_number(d.lr), 9) for d in done]
        if got != [0.1, 0.2, 0.3]:
            return (f"with lr_at(s) = 0.1 · (s + 1) and {which} whose lr_scale is 0.5, the Steps' lr are "
                    f"[{', '.join('None' if v is None else f'{v:g}' for v in got)}], "
                    "expected lr_at(s) itself, [0.1, 0.2, 0.3]")
    return None


def _evaluates_after_the_update(m):
    r = _Snapshots()
    steps = m.train(r.loss_of, [r.w, r.b], r.optimizer, r.batch, lambda s: None if s >= 4 else 0.05, clip=None,
                    evaluate=r.evaluate, eval_every=2)
    for done in itertools.islice(steps, 6):
        if done.val_loss is None:
            continue
        if not r.evaluated_at:
            return f"Step {done.step} carries a val_loss but evaluate was not called"
        w, b = r.evaluated_at[-1]
        if not (torch.equal(w, r.w.detach()) and torch.equal(b, r.b.detach())):
            return (f"with lr 0.05 and eval_every 2, evaluate({done.step}) saw other weights than the ones step "
                    f"{done.step} left (they differ by up to {(w - r.w.detach()).abs().max().item():.3g}): it ran "
                    "before that step's update")
    return None


def _evaluates_counting_from_zero(m):
    r = Regression()
    r.run(m, 2, 8, 0.01, None, eval_every=3)
    return None if r.evaluated == [3, 6] else (
        f"resumed at start = 2 until 8 with eval_every 3, evaluate ran with {shown(r.evaluated)}, expected [3, 6]: "
        "s + 1 counts the steps from 0, not from start")


def _clips_the_parameters_given(m):
    r = _Snapshots(scale=10.0)
    steps = m.train(r.loss_of, [r.w], r.optimizer, r.batch, lambda s: None if s >= 2 else 0.0, clip=1.0)
    done = list(itertools.islice(steps, 4))
    for s, d in enumerate(done):
        w, b = (p.detach().clone().requires_grad_(True) for p in (r.w, r.b))  # lr 0: the weights stay
        gw, gb = torch.autograd.grad(r.loss_with(w, b, *_Snapshots(scale=10.0).batch(s)), (w, b))
        if d.grad_norm is None or abs(_number(d.grad_norm) - gw.norm().item()) > 1e-4 * max(1.0, gw.norm().item()):
            return (f"with parameters = [w] alone (the optimizer holds w and b) and clip 1, Step {s + 1}'s grad_norm "
                    f"is {shown(d.grad_norm)}, expected w's gradient norm {gw.norm().item():.6g}")
        seen = r.optimizer.seen_norms[s]
        want = (1.0 + gb.norm().item() ** 2) ** 0.5  # w's clipped to norm 1, b's untouched
        if abs(seen - want) > 1e-3 * want:
            return (f"with parameters = [w] alone (the optimizer holds w and b) and clip 1, step {s}'s optimizer saw "
                    f"gradients of global norm {seen:.6g}, expected {want:.6g}: w's clipped to 1, b's left as it was")
    return None


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
    Property("before the optimizer's step, every param group's lr is lr_at(s) times its lr_scale", _lr_per_group,
             idea="set group['lr'] = lr * group.get('lr_scale', 1.0) for every group at the top of each step (not "
                  "`group.get('lr_scale') or 1.0`: a scale of 0 is a scale)"),
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
    Property("each Step's lr is lr_at(s) itself, before any group's lr_scale", _yields_the_rate,
             idea="keep lr = lr_at(s) and yield it; the groups' lr (times lr_scale) is the optimizer's, not the "
                  "Step's"),
    Property("evaluate(s + 1) runs after that step's update: it sees the weights the step left",
             _evaluates_after_the_update,
             idea="call the optimizer's step first, then count the step, then evaluate: the validation loss is the "
                  "updated model's"),
    Property("on a resumed run, evaluate still runs where s + 1 is a multiple of eval_every, counted from step 0, "
             "not from start", _evaluates_counting_from_zero,
             idea="test (s + 1) % eval_every == 0 with the step number itself; a run resumed at start = 2 evaluates "
                  "after steps 3, 6, … as the uninterrupted run did"),
    Property("clip and grad_norm cover the `parameters` given, not every parameter the optimizer holds",
             _clips_the_parameters_given,
             idea="call clip_grad_norm(parameters, clip) on the list made from the `parameters` argument; the "
                  "optimizer's param groups may hold others"),
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
