"""Text corpora and the GPT-2 tokenizer (provided: not an exercise; notebooks 09–11 and
`minilm train` use it).

    path = download_tinyshakespeare()                     # ~/.cache/minilm/tinyshakespeare.txt
    train_path, val_path = prepare_dataset(path, "data")  # GPT-2 token ids, uint16, once
    train = load_tokens(train_path)                       # np.memmap: the input of get_batch
    unigram_entropy(train)                                # the loss of a model that ignores context

Environment variables: MINILM_TINYSHAKESPEARE=/path/to/input.txt uses a local copy instead of
downloading (still checksum-verified); MINILM_DATA_DIR sets the cache directory;
TIKTOKEN_CACHE_DIR is tiktoken's own (where it keeps the gpt2 vocabulary).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

TINYSHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINYSHAKESPEARE_BYTES = 1_115_394

TOKEN_DTYPE = np.uint16  # GPT-2's 50,257 ids fit in 16 bits: half the disk and memory of int32


@functools.lru_cache(maxsize=None)
def tokenizer():
    """The GPT-2 BPE tokenizer (tiktoken's "gpt2" encoding, vocabulary size 50,257), loaded once.

    enc.encode(text) → list of ids; enc.decode(ids) → text; enc.n_vocab → 50257;
    enc.eot_token → 50256, the <|endoftext|> id.
    """
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # no network and no cached vocabulary
        raise RuntimeError(
            f"could not load the GPT-2 tokenizer ({type(e).__name__}: {e}). tiktoken downloads its "
            f"vocabulary on first use; offline, point TIKTOKEN_CACHE_DIR at a directory holding its cache files"
        ) from e


# GPT-2's pre-tokenization pattern, the same as GPT2_PATTERN in the student's minilm/bpe.py
# (tests/test_bpe.py keeps the two in step and checks that it splits text as tiktoken's "gpt2" does).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bpe_tokenizer(vocab: dict[int, bytes], name: str = "minilm-bpe"):
    """A tiktoken encoder for a byte-level BPE vocabulary {id: bytes} such as Task 9.2's
    train_bpe returns (ids 0–255 the single bytes, then one token per merge, in the order learned),
    with GPT-2's pre-tokenization. tiktoken encodes as GPT-2 does: inside each chunk, merge the
    adjacent pair whose merged bytes have the lowest id, until no pair is a token. A token whose
    bytes come twice keeps its lower id.

    Used to measure compression (bytes per token) on text the BPE was not trained on."""
    if not isinstance(vocab, dict) or not all(isinstance(k, int) and isinstance(v, bytes) for k, v in vocab.items()):
        raise TypeError(f"bpe_tokenizer: vocab must be a dict of int ids to bytes, got {type(vocab).__name__}")
    missing = [i for i in range(256) if vocab.get(i) != bytes([i])]
    if missing:
        raise ValueError(f"bpe_tokenizer: ids 0–255 must be the 256 single bytes (vocab[i] = bytes([i])), "
                         f"{len(missing)} are not, the first id {missing[0]}")
    return _ranked_encoding([vocab[i] for i in sorted(vocab)], name)


def _ranked_encoding(tokens: list[bytes], name: str):
    """tiktoken's encoder for `tokens` in rank order (a repeated token keeps its first rank)."""
    import tiktoken

    ranks: dict[bytes, int] = {}
    for rank, token in enumerate(tokens):
        ranks.setdefault(token, rank)
    return tiktoken.Encoding(name, pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})


def gpt2_prefix_tokenizer(vocab_size: int):
    """GPT-2's tokenizer cut to its first `vocab_size` tokens (256 ≤ vocab_size ≤ 50,256): the 256
    bytes and GPT-2's first vocab_size − 256 merges. Ids are ranks in
    tiktoken's "gpt2" encoding, so a prefix of them is the BPE that stopped merging there."""
    enc = tokenizer()
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or not 256 <= vocab_size <= enc.eot_token:
        raise ValueError(f"gpt2_prefix_tokenizer: vocab_size must be an int from 256 to {enc.eot_token:,} "
                         f"(GPT-2's tokens without <|endoftext|>), got {vocab_size!r}")
    # GPT-2's ids 0–255 are the single bytes in another order (not vocab[i] = bytes([i])): ranks as they are.
    return _ranked_encoding([enc.decode_single_token_bytes(i) for i in range(vocab_size)], f"gpt2-first-{vocab_size}")


def bytes_per_token(enc, text: str) -> float:
    """Compression of `text` under the tokenizer `enc`: its UTF-8 bytes per token (higher is shorter)."""
    return len(text.encode("utf-8")) / len(enc.encode_ordinary(text))


def data_dir() -> Path:
    """Where downloads and encoded datasets live: $MINILM_DATA_DIR, else ~/.cache/minilm."""
    return Path(os.environ.get("MINILM_DATA_DIR") or Path.home() / ".cache" / "minilm").expanduser()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(path: Path, sha256: str, size: int, what: str) -> None:
    actual_size = path.stat().st_size
    if actual_size != size:
        raise ValueError(f"{what} has {actual_size:,} bytes, expected {size:,} (a truncated or wrong file)")
    digest = sha256_file(path)
    if digest != sha256:
        raise ValueError(f"{what} has sha256 {digest}, expected {sha256} (a corrupt or wrong file)")


def _fetch(url: str, dest: Path) -> None:
    """Copy the bytes at `url` to the file `dest` (tests replace this function)."""
    with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as f:
        while chunk := response.read(1 << 16):
            f.write(chunk)


def download(url: str, dest: str | os.PathLike, sha256: str, size: int) -> Path:
    """Download `url` to `dest` unless a verified copy is already there.

    Writes to a temporary file next to dest, checks its size and sha256, and only then renames
    it into place (atomic), so an interrupted, truncated or corrupt download is never cached.
    """
    dest = Path(dest)
    if dest.exists():
        try:
            _verify(dest, sha256, size, str(dest))
            return dest
        except ValueError:
            dest.unlink()  # a bad cached copy (e.g. edited by hand): fetch it again
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        try:
            _fetch(url, tmp)
        except OSError as e:
            raise RuntimeError(f"could not download {url}: {e}") from e
        try:
            _verify(tmp, sha256, size, f"the download of {url}")
        except ValueError as e:
            raise RuntimeError(f"{e}; nothing was saved, try again") from None
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def download_tinyshakespeare(cache_dir: str | os.PathLike | None = None) -> Path:
    """The path of Tiny Shakespeare (1.1 MB of plays, Karpathy's char-rnn corpus), downloaded on
    first use into cache_dir (default: data_dir()) and checksum-verified.

    With MINILM_TINYSHAKESPEARE=/path/to/input.txt that local copy is used instead (it must
    have the right checksum too).
    """
    local = os.environ.get("MINILM_TINYSHAKESPEARE")
    if local:
        path = Path(local).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"MINILM_TINYSHAKESPEARE={local}: no such file")
        try:
            _verify(path, TINYSHAKESPEARE_SHA256, TINYSHAKESPEARE_BYTES, f"MINILM_TINYSHAKESPEARE={local}")
        except ValueError as e:
            raise ValueError(f"{e}; it should be Tiny Shakespeare from {TINYSHAKESPEARE_URL}") from None
        return path
    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else data_dir()
    return download(TINYSHAKESPEARE_URL, cache_dir / "tinyshakespeare.txt",
                    TINYSHAKESPEARE_SHA256, TINYSHAKESPEARE_BYTES)


def encode_file(text_path: str | os.PathLike) -> np.ndarray:
    """All of a UTF-8 text file as GPT-2 token ids (uint16). <|endoftext|> in the text is
    encoded as the special token (TinyStories separates its stories with it)."""
    text = Path(text_path).read_text(encoding="utf-8")
    ids = tokenizer().encode_ordinary(text) if "<|endoftext|>" not in text else \
        tokenizer().encode(text, allowed_special={"<|endoftext|>"})
    return np.asarray(ids, dtype=TOKEN_DTYPE)


def prepare_dataset(text_path: str | os.PathLike, out_dir: str | os.PathLike,
                    val_fraction: float = 0.1) -> tuple[Path, Path]:
    """Encode a text file with GPT-2 once and split it by position into out_dir/train.npy and
    out_dir/val.npy (uint16 token ids, memory-mappable with load_tokens): the last val_fraction
    of the tokens is the validation set, so it is text the model never trains on.

    Skips the work when both files exist and were made from the same text (same size, mtime
    and val_fraction, recorded in out_dir/meta.json). Returns (train_path, val_path).
    """
    text_path, out_dir = Path(text_path), Path(out_dir)
    if not text_path.is_file():
        raise FileNotFoundError(f"prepare_dataset: no such text file: {text_path}")
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 < val_fraction < 1:
        raise ValueError(f"prepare_dataset: val_fraction must be a number in (0, 1), got {val_fraction!r}")
    train_path, val_path, meta_path = out_dir / "train.npy", out_dir / "val.npy", out_dir / "meta.json"
    stat = text_path.stat()
    meta = {"source": str(text_path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "val_fraction": val_fraction, "tokenizer": "gpt2"}
    if train_path.exists() and val_path.exists() and meta_path.exists():
        try:
            if json.loads(meta_path.read_text(encoding="utf-8")) == meta:
                return train_path, val_path
        except json.JSONDecodeError:
            pass
    ids = encode_file(text_path)
    n_val = max(1, int(len(ids) * val_fraction))
    if len(ids) - n_val < 2:
        raise ValueError(f"prepare_dataset: {text_path} has only {len(ids)} tokens, too few to split")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Write to temporary names and rename, so an interrupted run never leaves half a dataset;
    # per-process names, so two processes preparing the same directory (notebooks run in
    # parallel) never write into one file. Both produce identical files, and renames are atomic.
    for path, data in ((train_path, ids[:-n_val]), (val_path, ids[-n_val:]), (meta_path, None)):
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp{path.suffix}")
        if data is None:
            tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
        else:
            np.save(tmp, data)
        os.replace(tmp, path)
    return train_path, val_path


def load_tokens(path: str | os.PathLike) -> np.ndarray:
    """A token file written by prepare_dataset (.npy), or a raw uint16 .bin file, as a read-only
    np.memmap: nothing is read from disk until get_batch slices it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"load_tokens: no such token file: {path}")
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r")
    return np.memmap(path, dtype=TOKEN_DTYPE, mode="r")


def unigram_entropy(tokens) -> float:
    """The entropy (in nats) of the token frequency distribution of `tokens`, −Σ p log p.

    That is the cross-entropy of the best model that ignores context (it always predicts the
    corpus's token frequencies): a trained language model's loss should end well below it.
    """
    counts = np.bincount(np.asarray(tokens, dtype=np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())
