"""Bad input gets a clear ValueError/TypeError naming what was expected and what was given.
The checks are provided code, so these pass with the stubs too wherever no stub runs first."""

import pytest
import torch

import minilm


def raises(exc, *fragments):
    """pytest.raises that also requires each fragment in the message."""
    class _Ctx:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *args):
            suppressed = self.ctx.__exit__(*args)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"error message {msg!r} should mention {f!r}"
            return suppressed

    return _Ctx()


def test_linear_last_dim_mismatch_names_both_sizes():
    with raises(ValueError, "in_features=5", "(2, 3)"):
        minilm.linear(torch.ones(2, 3), torch.ones(4, 5))


def test_embedding_rejects_float_and_out_of_range_ids():
    w = torch.ones(10, 4)
    with raises(TypeError, "integer", "float32"):
        minilm.embedding(torch.tensor([1.0]), w)
    with raises(ValueError, "[0, 10)", "12"):
        minilm.embedding(torch.tensor([3, 12]), w)
    with raises(ValueError, "[0, 10)", "-1"):
        minilm.embedding(torch.tensor([-1]), w)


def test_rms_norm_last_dim_mismatch():
    with raises(ValueError, "d_model=8", "(2, 4)"):
        minilm.rms_norm(torch.ones(2, 4), torch.ones(8))


def test_swiglu_weight_shape_mismatch():
    with raises(ValueError, "w2", "(4, 6)"):
        minilm.swiglu(torch.ones(2, 4), torch.ones(6, 4), torch.ones(6, 4), torch.ones(6, 4))


def test_rope_rejects_odd_d_k_and_float_positions():
    with raises(ValueError, "even", "d_k=5"):
        minilm.rope(torch.ones(3, 5), torch.arange(3))
    with raises(TypeError, "integer", "float32"):
        minilm.rope(torch.ones(3, 4), torch.arange(3.0))
    with raises(ValueError, "does not broadcast", "(4,)"):
        minilm.rope(torch.ones(3, 4), torch.arange(4))


def test_rope_module_rejects_odd_d_k_and_positions_past_max_seq_len():
    with raises(ValueError, "even", "d_k=7"):
        minilm.RotaryPositionalEmbedding(10000.0, 7, 16)


@pytest.mark.task("5.2")
def test_rope_module_rejects_positions_past_max_seq_len():
    rope = minilm.RotaryPositionalEmbedding(10000.0, 8, 16)
    with raises(ValueError, "max_seq_len=16", "16"):
        rope(torch.ones(2, 8), torch.tensor([3, 16]))


def test_attention_rejects_heads_that_do_not_divide_d_model():
    with raises(ValueError, "divisible", "d_model=10", "num_heads=3"):
        minilm.MultiHeadSelfAttention(10, 3)


def test_attention_rejects_bad_masks():
    q = torch.ones(2, 3, 4)
    with raises(ValueError, "does not broadcast", "(2, 5)"):
        minilm.scaled_dot_product_attention(q, q, q, torch.ones(2, 5, dtype=torch.bool))
    with raises(TypeError, "boolean", "float32"):
        minilm.scaled_dot_product_attention(q, q, q, torch.ones(3, 3))


def test_sdpa_rejects_mismatched_keys_and_values():
    q = torch.ones(3, 4)
    with raises(ValueError, "same number of keys"):
        minilm.scaled_dot_product_attention(q, q, torch.ones(5, 4))


def test_lm_rejects_non_positive_sizes():
    with raises(ValueError, "num_layers", "0"):
        minilm.TransformerLM(10, 8, 8, 0, 2, 16)
    with raises(ValueError, "divisible"):
        minilm.TransformerLM(10, 8, 10, 1, 3, 16)


@pytest.mark.task("8.1")
def test_lm_rejects_long_sequences_and_bad_token_ids():
    lm = minilm.TransformerLM(10, 8, 8, 1, 2, 16)
    with raises(ValueError, "context_length=8", "9 tokens"):
        lm(torch.zeros(1, 9, dtype=torch.long))
    with raises(ValueError, "[0, 10)", "10"):
        lm(torch.tensor([[1, 10]]))
    with raises(TypeError, "integer"):
        lm(torch.zeros(1, 3))


@pytest.mark.task("3.2")
def test_module_last_dim_mismatch():
    with raises(ValueError, "d_model=8", "(1, 4)"):
        minilm.RMSNorm(8)(torch.ones(1, 4))
