"""The model's vocabulary: the training split's share of GPT-2's tokens, and the BPE limited to it
(provided: not an exercise; `minilm train` builds one per run and saves its GPT-2 ids as vocab.npy).

    vocab = Vocabulary.from_training(train_ids, corpus.tokenizer(), 2048)  # GPT-2 ids → the first 2,048
    ids = vocab.encode(text)                   # text → model ids, with the vocabulary's own BPE
    enc.decode(vocab.to_gpt2(ids.tolist()))    # model ids → text
    vocab.byte_lengths()                       # what bits per byte divides by
"""

from __future__ import annotations

import numpy as np

from minilm.course import corpus


class Vocabulary:
    """The model's token ids ↔ GPT-2 ids, and the tokenizer that turns text into model ids.

    With --full-vocab: GPT-2 itself, all 50,257 ids. Otherwise it is built from the training split
    alone: the GPT-2 tokens that occur in it, the smaller GPT-2 tokens each of them is merged from,
    and the 256 single bytes, numbered 0 … n − 1 in GPT-2 order (12,806 on Tiny Shakespeare), and
    by default only the first --vocab-size of them (2,048): a BPE that stopped merging earlier.
    The output layer, its softmax and the embedding shrink with it, and on a CPU they are most of
    a small model's compute.

    Its tokenizer is GPT-2's BPE limited to these tokens (same merges, same order). It splits the
    training text exactly as GPT-2 does, and spells a word the training split never had with
    smaller pieces, down to single bytes, as GPT-2 spells a word outside its own vocabulary. So
    there is no unknown token: every validation byte is predicted and scored, and nothing of the
    validation split decides the vocabulary.
    """

    def __init__(self, gpt2_ids: np.ndarray | None, enc):
        self.gpt2_ids = gpt2_ids  # (n,) sorted GPT-2 ids, or None for the identity
        self.size = enc.n_vocab if gpt2_ids is None else len(gpt2_ids)
        self.gpt2 = enc
        self.encoding = enc
        if gpt2_ids is not None:
            self.table = np.full(enc.n_vocab, -1, dtype=np.int64)  # GPT-2 id → model id (−1: not in the vocabulary)
            self.table[gpt2_ids] = np.arange(len(gpt2_ids))
            import tiktoken

            # Ranks in GPT-2's order, renumbered 0 … n − 1: BPE merges the same pairs in the same
            # order, and a token's rank is its model id.
            ranks = {enc.decode_single_token_bytes(int(g)): i for i, g in enumerate(gpt2_ids) if g != enc.eot_token}
            special = {"<|endoftext|>": len(gpt2_ids) - 1} if enc.eot_token in gpt2_ids else {}
            self.encoding = tiktoken.Encoding("gpt2-training-split", pat_str=corpus.GPT2_PATTERN, mergeable_ranks=ranks,
                                              special_tokens=special)

    @classmethod
    def from_training(cls, train_tokens: np.ndarray, enc, limit: int = 0) -> Vocabulary:
        """The vocabulary of the training split's GPT-2 ids (see the class); with a limit, its first
        `limit` tokens in GPT-2's merge order. A token's pieces have lower GPT-2 ids than the token, so
        any such prefix still holds every piece of every token in it: a BPE that stopped merging early."""
        ranks = {enc.decode_single_token_bytes(i): i for i in range(enc.n_vocab) if i != enc.eot_token}
        ids = set(range(256)) if enc.eot_token > 255 else set()  # GPT-2's ids 0–255 are the single bytes
        for g in np.unique(np.asarray(train_tokens, dtype=np.int64)).tolist():
            ids.add(g)
            if g != enc.eot_token:
                ids.update(ranks[part] for part in bpe_parts(enc.decode_single_token_bytes(g), ranks))
        ids = sorted(ids)
        return cls(np.array(ids[:limit] if limit else ids, dtype=np.int64), enc)

    def to_model(self, tokens: np.ndarray) -> np.ndarray:
        """GPT-2 ids of the training split → model ids."""
        if self.gpt2_ids is None:
            return tokens
        ids = self.table[np.asarray(tokens, dtype=np.int64)]
        if (ids < 0).any():
            raise ValueError("Vocabulary.to_model: GPT-2 ids outside the vocabulary; re-encode the text with "
                             "Vocabulary.encode")
        return ids.astype(np.uint16 if self.size <= 1 << 16 else np.int64)

    def encode(self, text: str) -> np.ndarray:
        """Text → model ids, with the vocabulary's own tokenizer (<|endoftext|> as the special
        token only if the vocabulary has it)."""
        special = {"<|endoftext|>"} if "<|endoftext|>" in self.encoding.special_tokens_set else set()
        ids = self.encoding.encode(text, allowed_special=special, disallowed_special=())
        return np.asarray(ids, dtype=np.uint16 if self.size <= 1 << 16 else np.int64)

    def decode(self, ids: list[int]) -> str:
        """Model ids → text."""
        return self.gpt2.decode(self.to_gpt2(list(ids)))

    def to_gpt2(self, ids: list[int]) -> list[int]:
        return ids if self.gpt2_ids is None else self.gpt2_ids[np.asarray(ids, dtype=np.int64)].tolist()

    def byte_lengths(self) -> np.ndarray:
        """(size,) the UTF-8 bytes each model id stands for: what bits per byte divides by."""
        ids = range(self.size) if self.gpt2_ids is None else self.gpt2_ids.tolist()
        return np.array([len(self.gpt2.decode_single_token_bytes(int(i))) for i in ids], dtype=np.int64)


def bpe_parts(token: bytes, ranks: dict[bytes, int]) -> set[bytes]:
    """Every piece byte-level BPE forms on its way from the single bytes of `token` to the token
    itself: repeatedly merge the adjacent pair whose merged bytes have the lowest rank (the
    leftmost on a tie), as tiktoken does."""
    parts = [bytes([b]) for b in token]
    formed = set(parts)
    while len(parts) > 1:
        pair_ranks = [ranks.get(parts[i] + parts[i + 1]) for i in range(len(parts) - 1)]
        candidates = [(r, i) for i, r in enumerate(pair_ranks) if r is not None]
        if not candidates:
            break
        _, i = min(candidates)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
        formed.add(parts[i])
    return formed

