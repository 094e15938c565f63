"""The reference against the independent oracles (solutions/oracles.py), on random shapes and
weights: the instructor-side half of what the visible tests check on the notebook's inputs.
These moved here from tests/ so the student edition ships no implementation of any task."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from solutions import oracles

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from helpers import assert_close, randn, seeds  # noqa: E402

import minilm  # noqa: E402

even_dims = st.integers(1, 8).map(lambda h: 2 * h)


@pytest.fixture(autouse=True)
def _reference(monkeypatch):
    monkeypatch.setenv("MINILM_IMPL", "solutions")


@given(d=even_dims, seq=st.integers(1, 12), seed=seeds, theta=st.sampled_from([10.0, 1e4, 5e5]))
def test_rope_matches_complex_multiplication(d, seq, seed, theta):
    x = randn((2, seq, d), seed)
    pos = torch.randperm(64, generator=torch.Generator().manual_seed(seed))[:seq]
    assert_close(minilm.rope(x, pos, theta), oracles.rope_complex(x, pos, theta))


def test_rope_broadcasts_positions_like_the_oracle():
    x = randn((2, 3, 5, 8), 1)
    pos = torch.tensor([[0, 1, 2, 3, 4], [9, 8, 7, 6, 5]]).unsqueeze(1)
    assert_close(minilm.rope(x, pos), oracles.rope_complex(x, pos))
    module = minilm.RotaryPositionalEmbedding(500.0, 8, 40)
    assert_close(module(x, pos), oracles.rope_complex(x, pos, 500.0))


@pytest.mark.parametrize("theta", [None, 10000.0, 50.0])
def test_mhsa_matches_the_oracle(theta):
    mhsa = minilm.MultiHeadSelfAttention(16, 4, 32 if theta else None, theta)
    x = randn((3, 9, 16), 4)
    sd = {"attn." + k: v for k, v in mhsa.state_dict().items()}
    assert_close(mhsa(x), oracles.attention(x, sd, "attn.", 4, theta))
    pos = torch.tensor([5, 6, 7, 8, 0, 3, 9, 20, 1])
    assert_close(mhsa(x, pos), oracles.attention(x, sd, "attn.", 4, theta, pos))


def test_block_matches_the_oracle():
    blk = minilm.TransformerBlock(16, 4, 24, 32, 10000.0)
    with torch.no_grad():
        blk.ln1.weight.copy_(1 + 0.3 * randn((16,), 1))
        blk.ln2.weight.copy_(1 + 0.3 * randn((16,), 2))
    x = randn((2, 6, 16), 3)
    assert_close(blk(x), oracles.block(x, blk.state_dict(), "", 4, 10000.0), atol=1e-4)


def test_lm_matches_the_oracle():
    lm = minilm.TransformerLM(vocab_size=61, context_length=16, d_model=16, num_layers=2, num_heads=2, d_ff=24)
    with torch.no_grad():
        lm.ln_final.weight.copy_(torch.linspace(0.5, 1.5, 16))
    ids = torch.randint(0, 61, (3, 11))
    assert_close(lm(ids), oracles.transformer_lm(ids, lm.state_dict(), num_heads=2), atol=1e-4)


def test_rms_norm_and_swiglu_match_the_oracle():
    x, w = randn((3, 5, 16), 1), randn((16,), 2)
    assert_close(minilm.rms_norm(x, w), oracles.rms_norm(x, w))
    w1, w2, w3 = randn((24, 16), 3, 0.2), randn((16, 24), 4, 0.2), randn((24, 16), 5, 0.2)
    assert_close(minilm.swiglu(x, w1, w2, w3), oracles.swiglu(x, w1, w2, w3))


def _cs336(it, max_lr, min_lr, warmup, cycle):
    if it < warmup:
        return it / warmup * max_lr
    if it <= cycle:
        return min_lr + 0.5 * (1 + math.cos((it - warmup) / (cycle - warmup) * math.pi)) * (max_lr - min_lr)
    return min_lr


@given(warmup=st.integers(0, 50), extra=st.integers(1, 100), it=st.integers(0, 200))
def test_schedule_matches_cs336_written_out(warmup, extra, it):
    got = minilm.lr_cosine_schedule(it, 3e-3, 3e-4, warmup, warmup + extra)
    assert got == pytest.approx(_cs336(it, 3e-3, 3e-4, warmup, warmup + extra), abs=1e-15)
