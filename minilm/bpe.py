"""Tasks 9.2 and 9.3: train a byte-level BPE tokenizer, then encode and decode with it (notebooks/09_data.ipynb)."""

# YOUR FILE: write the bodies that raise NotImplementedError (see the task ids below).
# Generated from the reference by `minilm stubs`: the signatures,
# shape annotations and docstrings are the spec, and the validation calls are provided.

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator

import regex

from minilm.course.validate import check_bpe_args, check_id_list, check_text, check_tokenizer_args

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


class Tokenizer:
    """Task 9.3: encode text into token ids and decode them back with a byte-level BPE's vocab and
    merges, as GPT-2 does (CS336's Tokenizer: Tokenizer(vocab, merges, special_tokens)).

    vocab: {id: bytes} and merges: [(left, right), …] in the order learned, as train_bpe returns
    them; special_tokens: strings such as "<|endoftext|>" that always stay one token. A special
    token whose UTF-8 bytes are already a token of vocab keeps that id; the others get new ids
    after the largest one, max(vocab) + 1, + 2, … in the order given.

    encode(text) → list[int]:
      1. Split the text at the special tokens, each of which becomes its own id. Where two special
         tokens overlap ("<|endoftext|><|endoftext|>" is one too), the longer one wins.
      2. Pre-tokenize every piece between them with regex.finditer(GPT2_PATTERN, piece), as
         train_bpe does: tokens never cross a chunk boundary.
      3. Each chunk starts as its UTF-8 bytes, one token per byte. Among the adjacent pairs of
         tokens that are merges, take the one learned first (the lowest index in merges: its
         rank; not the most frequent pair, not the longest token) and merge it everywhere in the
         chunk, left to right ("aaa" with the merge (a, a) becomes [aa, a]). Repeat until no
         adjacent pair is a merge; each token's id is its id in vocab.
    decode(ids) → str: the bytes of every id joined, then decoded as UTF-8 with errors="replace"
      (one token may hold part of a character, so decode the joined bytes, not token by token;
      only bytes that are no UTF-8 at all become "\\ufffd").
    encode_iterable(texts) (provided): the ids of "".join(texts), read piece by piece.

    Speed: `minilm train --tokenizer mine` encodes a million characters. A text repeats few
    distinct chunks (Tiny Shakespeare: ~14k of 250k), so keep each chunk's ids in a dict.
    """

    def __init__(self, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]],
                 special_tokens: list[str] | None = None):
        check_tokenizer_args(vocab, merges, special_tokens, "Tokenizer")
        raise NotImplementedError("Task 9.3 is not implemented yet: write Tokenizer.__init__ in minilm/bpe.py")

    def encode(self, text: str) -> list[int]:
        check_text(text, "Tokenizer.encode")
        raise NotImplementedError("Task 9.3 is not implemented yet: write Tokenizer.encode in minilm/bpe.py")

    def decode(self, ids: list[int]) -> str:
        check_id_list(ids, "Tokenizer.decode")
        raise NotImplementedError("Task 9.3 is not implemented yet: write Tokenizer.decode in minilm/bpe.py")

    def encode_iterable(self, texts: Iterable[str]) -> Iterator[int]:
        """The ids of "".join(texts) (a file's lines, say), one by one, holding little of the text at
        a time: encode a piece up to a line break that ends a line of text and precedes another, where
        pre-tokenization always cuts (a chunk holding "\\n" is whitespace only), and keep the rest
        for the next piece (with special tokens that hold no line break). Provided: it calls your encode."""
        buffer = ""
        for text in texts:
            buffer += text
            cut = _last_line_cut(buffer)
            if cut:
                yield from self.encode(buffer[:cut])
                buffer = buffer[cut:]
        if buffer:
            yield from self.encode(buffer)


def _last_line_cut(text: str) -> int:
    """The last position p with text[p - 2] not whitespace, text[p - 1] == "\n" and text[p] not
    whitespace (0 if none): GPT2_PATTERN's chunks of text[:p] and text[p:] are those of text."""
    p = text.rfind("\n", 0, len(text) - 1)
    while p >= 1:
        if not text[p - 1].isspace() and not text[p + 1].isspace():
            return p + 1
        p = text.rfind("\n", 0, p)
    return 0
