"""The model's vocabulary: the training split's share of GPT-2's tokens, and the BPE limited to it
(provided: not an exercise; `minilm train` builds one per run and saves its GPT-2 ids as vocab.npy).

    vocab = Vocabulary.from_training(train_ids, corpus.tokenizer(), 2048)  # GPT-2 ids → the first 2,048
    ids = vocab.encode(text)                   # text → model ids, with the vocabulary's own BPE
    enc.decode(vocab.to_gpt2(ids.tolist()))    # model ids → text
    vocab.byte_lengths()                       # what bits per byte divides by

    ids, texts = model_tokens(text, tokenizer, model.vocab_size)  # any model's tokenizer: ids checked, labelled
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

    @property
    def name(self) -> str:
        """Its tokenizer's name: gpt2 (--full-vocab) or gpt2-training-split."""
        return self.encoding.name

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



# ---------------------------------------------------------------- text → any model's ids


def default_tokenizer(vocab_size: int | None):
    """The tokenizer of a model that came without one: GPT-2's (tiktoken "gpt2") for vocab_size None
    (a model that reads any id, such as viz.attention's AttentionStack) or at least 50,257, else GPT-2's
    tokenizer cut to its first vocab_size tokens (corpus.gpt2_prefix_tokenizer), the BPE GPT-2 would
    have been had it stopped merging there: notebook 08's seed model, vocabulary 1,000, untrained.

    A trained model needs the tokenizer it was trained with instead: notebook 10b's ShakespeareData,
    a `minilm train` run's Vocabulary (minilm.course.train.run.load_trained)."""
    enc = corpus.tokenizer()
    if vocab_size is None or vocab_size >= enc.n_vocab:
        return enc
    if vocab_size < 256:
        raise ValueError(f"the model's vocabulary is {vocab_size:,}, fewer than GPT-2's 256 single bytes: no cut of "
                         f"GPT-2's tokenizer fits it; pass the tokenizer the model was trained with")
    return corpus.gpt2_prefix_tokenizer(vocab_size)


def tokenizer_name(tokenizer) -> str:
    """A tokenizer's name for messages: tiktoken's (gpt2, gpt2-first-1000, …) or its class's."""
    name = getattr(tokenizer, "name", None)
    return name if isinstance(name, str) else type(tokenizer).__name__


def token_label(piece: str) -> str:
    """A token's text as an axis label: · for a space, ⏎ for a line break."""
    return piece.replace(" ", "·").replace("\n", "⏎")


def model_tokens(text: str, tokenizer, vocab_size: int | None = None, max_tokens: int | None = None
                 ) -> tuple[list[int], list[str]]:
    """Text → the model's token ids (the first max_tokens; an empty text is one space), and each id's
    text as a label (token_label). One routine for every model the course builds: `tokenizer` is the
    model's own, anything with encode(text) and decode(ids): tiktoken's Encoding (default_tokenizer),
    Vocabulary or OwnVocabulary (`minilm train`), notebook 10b's ShakespeareData, Task 9.3's Tokenizer.
    tiktoken's encode_ordinary is used where there is one (special tokens' text is plain text).

    ValueError when an id does not fit the model's vocabulary (0 … vocab_size − 1): the tokenizer is
    not the model's."""
    encode = getattr(tokenizer, "encode_ordinary", None) or tokenizer.encode

    def ids_of(s: str) -> list[int]:
        return [int(i) for i in encode(s)][:max_tokens]

    ids = ids_of(text) or ids_of(" ")
    for i in ids:
        if vocab_size is not None and not 0 <= i < vocab_size:
            try:
                piece = f" ({tokenizer.decode([i])!r})"
            except Exception:  # noqa: BLE001 - the id is outside this tokenizer's table too
                piece = ""
            raise ValueError(f"the model's vocabulary is {vocab_size:,} (ids 0 … {vocab_size - 1:,}), text encoded "
                             f"to id {i:,}{piece} by {tokenizer_name(tokenizer)}: pass the tokenizer the model was "
                             f"trained with")
    return ids, [token_label(tokenizer.decode([i])) for i in ids]
