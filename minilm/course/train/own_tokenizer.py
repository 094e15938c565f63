"""`minilm train --tokenizer mine`: the model's vocabulary from the student's own BPE (Tasks 9.2
and 9.3) instead of GPT-2's.

Before any data is prepared, `probe` runs train_bpe and Tokenizer on a short text and stops, in
one line, at a stub or an error. Then `OwnVocabulary.build` learns --vocab-size − 257 merges from
the training split's text alone with train_bpe (the 256 bytes, the merges and <|endoftext|> make
the vocabulary), saves them in OUT_DIR/merges.json (a later run on the same text, or a --resume,
reads them back), refuses merges under which the student's Tokenizer does not give back a sample
of the training text, and encodes both splits with that Tokenizer. The splits are GPT-2's, by
position, as with the default tokenizer: the same validation text, so bits per byte compare.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

import minilm
from minilm.course import checks

EOT = "<|endoftext|>"
MERGES_FILE = "merges.json"
PROBE_TEXT = "low lower lowest newest<|endoftext|>It's naïve, 2024!\n\n"
SAMPLE_LINES = 200  # lines of the training text that must round-trip


def _failure(task: str, exc: BaseException) -> str:
    """One line for what task `task`'s code raised: its not-implemented message, or the error, with
    the student's file:line."""
    todo = checks.todo_message(exc)
    where = checks.raised_at(exc)
    line = todo or f"Task {task}: your code raised " + " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return line + (f" ({where})" if where else "")


def probe() -> None:
    """Run the student's train_bpe and Tokenizer on a short text; SystemExit with the task's own
    one line at a stub or an error, before the run prepares any data."""
    stage = "9.2"
    try:
        vocab, merges = minilm.train_bpe(PROBE_TEXT, 8)
        stage = "9.3"
        tokenizer = minilm.Tokenizer(vocab, merges, [EOT])
        tokenizer.decode(tokenizer.encode(PROBE_TEXT))
    except Exception as e:  # noqa: BLE001 - a student's bug, reported in one line
        raise SystemExit(f"minilm train: error: --tokenizer mine trains with your BPE: {_failure(stage, e)}") from None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_merges(path: Path, merges: list[tuple[bytes, bytes]], num_merges: int, train_text: str) -> None:
    path.write_text(json.dumps({"tokenizer": "mine", "num_merges": num_merges, "train_sha256": _sha256(train_text),
                                "merges": [[a.hex(), b.hex()] for a, b in merges]}, indent=0) + "\n", encoding="utf-8")


def load_merges(path: Path, num_merges: int, train_text: str) -> list[tuple[bytes, bytes]] | None:
    """The merges saved for this training text and number of merges, or None (no file, or another's)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("num_merges") != num_merges or saved.get("train_sha256") != _sha256(train_text):
            return None
        return [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in saved["merges"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_merges(path: Path) -> list[tuple[bytes, bytes]]:
    """The merges saved in `path`, whatever text they were learned from (ValueError if it is no merges file)."""
    try:
        merges = json.loads(Path(path).read_text(encoding="utf-8"))["merges"]
        return [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in merges]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is not a merges file ({type(e).__name__}: {e})") from None


def round_trip_sample(text: str, n: int = SAMPLE_LINES) -> list[str]:
    """Up to n lines spread evenly over `text` (each with its line break), its first and last included."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= n:
        return lines
    return [lines[round(i * (len(lines) - 1) / (n - 1))] for i in range(n)]


class OwnVocabulary:
    """The student's BPE as the model's vocabulary: what minilm/course/vocab.py's Vocabulary offers
    the training command (size, encode, decode, byte_lengths), from merges learned by train_bpe."""

    gpt2_ids = None  # no GPT-2 ids: merges.json, not vocab.npy, records the vocabulary
    name = "your BPE (merges.json)"

    def __init__(self, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], path: Path):
        self.path, self.merges = path, merges
        self.vocab = {i: bytes([i]) for i in range(256)}
        self.vocab.update({256 + k: a + b for k, (a, b) in enumerate(merges)})
        self.vocab[len(self.vocab)] = EOT.encode("utf-8")  # Task 9.3's contract: a new special token's id
        self.size = len(self.vocab)
        self.tokenizer = minilm.Tokenizer(vocab, merges, [EOT])
        self.dtype = np.uint16 if self.size <= 1 << 16 else np.int64

    @classmethod
    def from_merges(cls, merges: list[tuple[bytes, bytes]], path: Path) -> OwnVocabulary:
        """The vocabulary of these merges (read from `path`): the 256 bytes, one token per merge, <|endoftext|>."""
        vocab = {i: bytes([i]) for i in range(256)} | {256 + k: a + b for k, (a, b) in enumerate(merges)}
        return cls(vocab, merges, path)

    @classmethod
    def load(cls, path: Path) -> OwnVocabulary:
        """A finished run's vocabulary from its merges.json (ValueError if it is no merges file)."""
        return cls.from_merges(read_merges(path), path)

    @classmethod
    def build(cls, train_text: str, vocab_size: int, out_dir: Path, main: bool, barrier) -> OwnVocabulary:
        """Learn (rank 0) or read back the merges, then check and return the vocabulary; SystemExit
        with one line when the student's code raises or the merges do not round-trip."""
        num_merges = vocab_size - 257
        path = out_dir / MERGES_FILE
        if main:
            merges = load_merges(path, num_merges, train_text)
            if merges is None:
                print(f"merges: learning {num_merges:,} with your train_bpe from the training split's "
                      f"{len(train_text):,} characters…")  # seconds to minutes, depending on your code
                try:
                    _, merges = minilm.train_bpe(train_text, num_merges)
                except Exception as e:  # noqa: BLE001
                    raise SystemExit(f"minilm train: error: --tokenizer mine: {_failure('9.2', e)}") from None
                save_merges(path, merges, num_merges, train_text)
                print(f"merges: learned {len(merges):,}, saved in {path}")
            else:
                print(f"merges: {len(merges):,} read from {path} (learned from this training split before)")
        barrier()
        try:
            merges = read_merges(path)
        except ValueError as e:
            raise SystemExit(f"minilm train: error: {e}; delete it to learn the merges again") from None
        try:
            own = cls.from_merges(merges, path)
            for line in round_trip_sample(train_text):
                back = own.tokenizer.decode(own.tokenizer.encode(line))
                if back != line:
                    raise SystemExit(f"minilm train: error: refusing {path}: your Tokenizer does not give back "
                                     f"this line of the training text: decode(encode({line!r})) = {back!r}")
        except SystemExit:
            raise
        except Exception as e:  # noqa: BLE001
            raise SystemExit(f"minilm train: error: --tokenizer mine with {path}: {_failure('9.3', e)}") from None
        return own

    def encode(self, text: str) -> np.ndarray:
        """Text → model ids, with <|endoftext|> as the special token."""
        try:
            ids = self.tokenizer.encode(text)
        except Exception as e:  # noqa: BLE001
            raise SystemExit(f"minilm train: error: --tokenizer mine: {_failure('9.3', e)}") from None
        bad = [i for i in ids if not (type(i) is int and 0 <= i < self.size)]
        if bad:
            raise SystemExit(f"minilm train: error: --tokenizer mine: Task 9.3: encode gave the id {bad[0]!r}, "
                             f"outside the vocabulary's 0 … {self.size - 1}")
        return np.asarray(ids, dtype=self.dtype)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def byte_lengths(self) -> np.ndarray:
        """(size,) the UTF-8 bytes each id stands for: what bits per byte divides by."""
        return np.array([len(self.vocab[i]) for i in range(self.size)], dtype=np.int64)
