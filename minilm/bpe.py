"""Task 9.2: train a byte-level BPE tokenizer (notebooks/09_data.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

from collections import Counter, defaultdict

import regex

from minilm.course.validate import check_bpe_args

# GPT-2's pre-tokenization pattern (Radford et al., 2019, as CS336 writes it): contractions
# ('s 't 're 've 'm 'll 'd), a run of letters, of digits or of other symbols, each with at most
# one leading space, and runs of whitespace (a run before a word leaves its last space to the
# word). tiktoken's "gpt2" encoding splits text into the same chunks. \p{L} (any letter) and
# \p{N} (any digit) need the `regex` package: Python's `re` does not know them.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def train_bpe(text: str, num_merges: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Task 9.2: learn `num_merges` byte-pair merges from `text`, byte-level, as GPT-2 does.

    1. Pre-tokenize: split `text` into chunks with regex.finditer(GPT2_PATTERN, text) (the
       `regex` package) and count how often each distinct chunk occurs. Merges never cross
       chunk boundaries: " dog." is the chunks " dog" and ".", so no token holds "g.".
    2. Each chunk starts as its UTF-8 bytes, one token per byte: "é" is two tokens, b"\\xc3" b"\\xa9".
    3. Repeat num_merges times:
       - count every adjacent pair of tokens inside the chunks, each chunk's pairs weighted by
         the number of times the chunk occurs in the text ("aaa" holds the pair (a, a) twice);
       - take the most frequent pair; ties go to the lexicographically greatest pair, i.e. the
         max of (count, pair) in Python's tuple order: (b"b", b"a") beats (b"a", b"z"), and
         (b"ab", b"c") beats (b"a", b"bc");
       - record it, and replace its occurrences in every chunk by one token, scanning left to
         right: with the merge (a, a), "aaa" becomes [aa, a].
       Stop early when no chunk has two tokens left (then there are fewer than num_merges merges).

    Returns (vocab, merges), CS336's convention (without special tokens):
        merges[k] = (left, right), the bytes of the k-th pair merged, in the order learned;
        vocab maps token ids to bytes: vocab[i] = bytes([i]) for the 256 bytes i = 0 … 255,
        then vocab[256 + k] = left + right of merges[k]; so len(vocab) == 256 + len(merges).

    Speed: the notebook learns 1,024 merges from a million characters. Count pairs over the
    distinct chunks (times their counts), not over the text, and after a merge update the pair
    counts of only the chunks that held the merged pair.
    """
    check_bpe_args(text, num_merges, "train_bpe")
    raise NotImplementedError("Task 9.2 is not implemented yet: write train_bpe in minilm/bpe.py")
