"""The data pipeline (provided code): download with checksum, encode once, memmap, baseline."""

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pytest

from minilm.course import corpus

SHARED = Path(__file__).resolve().parents[2] / "shared"
# The local copy: where MINILM_TINYSHAKESPEARE points (as .ci/run sets it), else shared/ beside the clone.
SHAKESPEARE = Path(os.environ.get("MINILM_TINYSHAKESPEARE") or SHARED / "data" / "tinyshakespeare.txt")

needs_tokenizer = pytest.mark.skipif(not (SHARED / "tiktoken").is_dir() and not os.environ.get("TIKTOKEN_CACHE_DIR"),
                                     reason="no tiktoken cache (set TIKTOKEN_CACHE_DIR)")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    if not os.environ.get("TIKTOKEN_CACHE_DIR") and (SHARED / "tiktoken").is_dir():
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))


def _payload():
    data = b"To be, or not to be\n" * 50
    return data, hashlib.sha256(data).hexdigest()


def test_download_verifies_and_caches(tmp_path):
    data, digest = _payload()
    src = tmp_path / "src.txt"
    src.write_bytes(data)
    dest = tmp_path / "cache" / "out.txt"
    path = corpus.download(src.as_uri(), dest, digest, len(data))
    assert path == dest and dest.read_bytes() == data
    src.unlink()  # a second call uses the verified cached copy, without fetching
    assert corpus.download(src.as_uri(), dest, digest, len(data)) == dest


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_bad_download_is_an_error_and_not_cached(tmp_path, monkeypatch, damage):
    data, digest = _payload()
    bad = data[:-5] if damage == "truncated" else data[:-5] + b"XXXXX"

    def fake_fetch(url, dest):
        Path(dest).write_bytes(bad)

    monkeypatch.setattr(corpus, "_fetch", fake_fetch)
    dest = tmp_path / "out.txt"
    with pytest.raises(RuntimeError, match="truncated" if damage == "truncated" else "sha256"):
        corpus.download("https://example.invalid/x", dest, digest, len(data))
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == [], "the temporary file must be removed too"


def test_tinyshakespeare_local_copy(monkeypatch, tmp_path):
    if not SHAKESPEARE.is_file():
        pytest.skip("no local Tiny Shakespeare")
    monkeypatch.setenv("MINILM_TINYSHAKESPEARE", str(SHAKESPEARE))
    assert corpus.download_tinyshakespeare() == SHAKESPEARE
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("not shakespeare")
    monkeypatch.setenv("MINILM_TINYSHAKESPEARE", str(wrong))
    with pytest.raises(ValueError, match="bytes"):
        corpus.download_tinyshakespeare()
    monkeypatch.setenv("MINILM_TINYSHAKESPEARE", str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="no such file"):
        corpus.download_tinyshakespeare()


@needs_tokenizer
def test_prepare_dataset_splits_by_position_and_skips_repeat_work(tmp_path, story_file):
    train_path, val_path = corpus.prepare_dataset(story_file, tmp_path, val_fraction=0.25)
    train, val = corpus.load_tokens(train_path), corpus.load_tokens(val_path)
    assert isinstance(train, np.memmap) and train.dtype == np.uint16
    # TinyStories separates stories with <|endoftext|>: it must become the one special token.
    ids = corpus.tokenizer().encode(story_file.read_text(encoding="utf-8"), allowed_special={"<|endoftext|>"})
    assert np.concatenate([train, val]).tolist() == ids
    assert len(val) == int(len(ids) * 0.25)
    mtime = train_path.stat().st_mtime_ns
    corpus.prepare_dataset(story_file, tmp_path, val_fraction=0.25)
    assert train_path.stat().st_mtime_ns == mtime, "an up-to-date dataset must not be encoded again"
    corpus.prepare_dataset(story_file, tmp_path, val_fraction=0.5)
    assert len(corpus.load_tokens(val_path)) == int(len(ids) * 0.5), "a new split must re-encode"


def test_load_tokens_reads_raw_bin(tmp_path):
    path = tmp_path / "t.bin"
    np.array([1, 2, 60000], dtype=np.uint16).tofile(path)
    assert corpus.load_tokens(path).tolist() == [1, 2, 60000]
    with pytest.raises(FileNotFoundError):
        corpus.load_tokens(tmp_path / "nope.npy")


def test_unigram_entropy():
    assert corpus.unigram_entropy(np.array([7, 7, 7])) == 0.0
    assert math.isclose(corpus.unigram_entropy(np.array([0, 1, 2, 3] * 5, dtype=np.uint16)), math.log(4))
    p = np.array([0.5, 0.25, 0.25])
    assert math.isclose(corpus.unigram_entropy(np.array([0, 0, 1, 2])), float(-(p * np.log(p)).sum()))
