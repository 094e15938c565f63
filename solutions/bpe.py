"""Tasks 9.2 and 9.3: train a byte-level BPE tokenizer, then encode and decode with it (notebooks/09_data.ipynb)."""

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
    # BEGIN SOLUTION 9.2
    # Work on the distinct chunks with their counts: Tiny Shakespeare's million characters are
    # only ~14k distinct chunks, so a merge touches a few thousand short lists, not the text.
    chunks = Counter(m.group().encode("utf-8") for m in regex.finditer(GPT2_PATTERN, text))
    words = [[bytes([b]) for b in chunk] for chunk in chunks]
    freqs = list(chunks.values())

    # Pair counts are kept up to date merge by merge, together with the words each pair occurs
    # in, so a merge recounts only the words it changes instead of every word every time.
    pair_counts: Counter[tuple[bytes, bytes]] = Counter()
    words_with: defaultdict[tuple[bytes, bytes], set[int]] = defaultdict(set)
    for i, (word, freq) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freq
            words_with[pair].add(i)

    def merged(word: list[bytes], pair: tuple[bytes, bytes], token: bytes) -> list[bytes]:
        out, j = [], 0
        while j < len(word):
            if j + 1 < len(word) and (word[j], word[j + 1]) == pair:
                out.append(token)
                j += 2  # both halves are used up: "aaa" gives [aa, a], the last a stays
            else:
                out.append(word[j])
                j += 1
        return out

    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(num_merges):
        if not pair_counts:
            break  # every chunk is a single token: nothing is left to merge
        top = max(pair_counts.values())
        best = max(pair for pair, count in pair_counts.items() if count == top)  # a tie: the greatest pair
        token = best[0] + best[1]
        vocab[256 + len(merges)] = token
        merges.append(best)
        for i in words_with.pop(best):
            word, freq = words[i], freqs[i]
            new = merged(word, best, token)
            if len(new) == len(word):
                continue  # a stale entry: an earlier merge already took this pair out of the word
            for pair in zip(word, word[1:]):
                pair_counts[pair] -= freq
                if pair_counts[pair] == 0:
                    del pair_counts[pair]  # so that `max` and the early stop see only pairs that exist
            for pair in zip(new, new[1:]):
                pair_counts[pair] += freq
                words_with[pair].add(i)
            words[i] = new
    return vocab, merges
    # END SOLUTION


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
        # BEGIN SOLUTION 9.3
        self.vocab = dict(vocab)
        self.ids = {}  # bytes → id; a token whose bytes come twice keeps its lower id
        for i in sorted(self.vocab):
            self.ids.setdefault(self.vocab[i], i)
        self.special_tokens = list(dict.fromkeys(special_tokens or []))
        for token in self.special_tokens:
            if token.encode("utf-8") not in self.ids:
                new = max(self.vocab) + 1
                self.vocab[new], self.ids[token.encode("utf-8")] = token.encode("utf-8"), new
        self.ranks = {pair: rank for rank, pair in reversed(list(enumerate(merges)))}  # a repeated pair: its first rank
        # One alternation, longest first, so that "<|endoftext|><|endoftext|>" beats "<|endoftext|>";
        # the capturing group keeps the special tokens in regex.split's output.
        longest = sorted(self.special_tokens, key=len, reverse=True)
        self.special_pattern = "(" + "|".join(regex.escape(t) for t in longest) + ")" if longest else None
        self.cache: dict[str, list[int]] = {}
        # END SOLUTION

    def encode(self, text: str) -> list[int]:
        check_text(text, "Tokenizer.encode")
        # BEGIN SOLUTION 9.3
        pieces = regex.split(self.special_pattern, text) if self.special_pattern else [text]
        ids: list[int] = []
        for k, piece in enumerate(pieces):
            if k % 2:  # split's odd pieces are the separators it captured: the special tokens
                ids.append(self.ids[piece.encode("utf-8")])
                continue
            for m in regex.finditer(GPT2_PATTERN, piece):
                chunk = m.group()
                if chunk not in self.cache:
                    self.cache[chunk] = [self.ids[token] for token in self._bpe(chunk.encode("utf-8"))]
                ids += self.cache[chunk]
        return ids

    def _bpe(self, chunk: bytes) -> list[bytes]:
        tokens = [bytes([b]) for b in chunk]
        while len(tokens) > 1:
            ranked = [(self.ranks[pair], pair) for pair in zip(tokens, tokens[1:]) if pair in self.ranks]
            if not ranked:
                break
            pair = min(ranked)[1]  # the merge learned first
            merged, i = [], 0
            while i < len(tokens):
                if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
                    merged.append(pair[0] + pair[1])
                    i += 2
                else:
                    merged.append(tokens[i])
                    i += 1
            tokens = merged
        return tokens
        # END SOLUTION

    def decode(self, ids: list[int]) -> str:
        check_id_list(ids, "Tokenizer.decode")
        # BEGIN SOLUTION 9.3
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
        # END SOLUTION

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
