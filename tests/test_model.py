import math

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, seeds
from hypothesis import given
from hypothesis import strategies as st

import minilm
from minilm.course.exercises import lm_parameter_count, lm_state_dict_keys

SEED_CONFIG = dict(vocab_size=1000, context_length=512, d_model=256, num_layers=4, num_heads=8, d_ff=1024)


def _small_lm():
    return minilm.TransformerLM(vocab_size=61, context_length=16, d_model=16, num_layers=2, num_heads=2, d_ff=24)


@pytest.mark.task("8.1")
def test_seed_configuration():
    """Parameter count, shapes, state_dict names and the initial loss of the seed model, built
    once here (its init alone takes seconds on a CPU) and never cached across tests."""
    lm = minilm.TransformerLM(**SEED_CONFIG)
    n = sum(p.numel() for p in lm.parameters())
    assert n == lm_parameter_count(1000, 256, 4, 1024) == 4_708_608
    assert list(lm.state_dict()) == lm_state_dict_keys(4)
    ids = torch.randint(0, 1000, (2, 20))
    with torch.no_grad():
        logits = lm(ids)
    assert logits.shape == (2, 20, 1000)
    loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
    assert abs(loss.item() - math.log(1000)) < 0.5, "the initial loss should be close to ln(vocab_size)"


@pytest.mark.task("8.1")
def test_lm_head_is_untied():
    lm = _small_lm()
    assert lm.lm_head.weight.data_ptr() != lm.token_embeddings.weight.data_ptr()


@pytest.mark.task("8.1")
@given(t=st.integers(0, 9), seed=seeds)
def test_lm_is_causal_deterministic_and_batch_independent(t, seed):
    torch.manual_seed(seed)
    lm = _small_lm()
    ids = torch.randint(0, 61, (3, 11))
    changed = ids.clone()
    changed[:, t + 1:] = (changed[:, t + 1:] + 1) % 61
    full = lm(ids)
    assert_close(lm(changed)[:, : t + 1], full[:, : t + 1], atol=1e-5)
    assert_close(lm(ids[1:2]), full[1:2], atol=1e-5)
    assert torch.equal(lm(ids), full)
