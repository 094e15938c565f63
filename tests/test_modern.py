"""Notebook 14: the modern recipe (14.1–14.6) against independent oracles: torch's SVD for the
Newton–Schulz iteration, torch.optim.Muon for the optimizer, the formulas written out for the
rest; and the recipe's switches and `minilm train`'s flags, in process (no training)."""

import math

import pytest
import torch
from helpers import assert_close, randn
from torch import nn

# torch.optim.Muon and its Newton–Schulz run in bfloat16; the course's in float32.
from torch.optim._muon import _zeropower_via_newtonschulz as torch_newton_schulz  # noqa: E402

import minilm

# ---------------------------------------------------------------- 14.1 Newton–Schulz


def _svd_oracle(G: torch.Tensor, steps: int, eps: float = 1e-7) -> torch.Tensor:
    """The iteration acts on each singular value alone: U φ⁽ˢᵗᵉᵖˢ⁾(S / (‖G‖_F + eps)) Vᵀ, in float64."""
    a, b, c = minilm.NS_COEFFICIENTS
    U, S, Vh = torch.linalg.svd(G.double(), full_matrices=False)
    s = S / (G.double().norm() + eps)
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return U @ torch.diag(s) @ Vh


@pytest.mark.task("14.1")
@pytest.mark.parametrize("shape,steps", [((6, 15), 5), ((20, 7), 5), ((9, 9), 3), ((1, 5), 5), ((12, 4), 0)])
def test_newton_schulz_maps_each_singular_value_by_the_quintic(shape, steps):
    G = randn(shape, sum(shape) + steps, 2.0)
    assert_close(minilm.newton_schulz(G, steps).double(), _svd_oracle(G, steps), atol=2e-5)


@pytest.mark.task("14.1")
def test_newton_schulz_is_nearly_orthogonal_and_agrees_with_torch():
    G = randn((32, 96), 7)
    X = minilm.newton_schulz(G)
    s = torch.linalg.svdvals(X.double())
    assert s.min() > 0.5 and s.max() < 1.5, s  # U S' Vᵀ with S' near 1, not exactly 1
    assert_close(X, torch_newton_schulz(G, minilm.NS_COEFFICIENTS, 5, 1e-7).float(), atol=3e-2, rtol=0)
    assert minilm.newton_schulz(G.double()).dtype == torch.float64


# ---------------------------------------------------------------- 14.2 Muon


@pytest.mark.task("14.2")
@pytest.mark.parametrize("nesterov", [True, False])
def test_muon_matches_torch_optim_muon(nesterov):
    shapes = [(24, 8), (8, 24), (16, 16)]
    ours = [nn.Parameter(randn(s, i)) for i, s in enumerate(shapes)]
    theirs = [nn.Parameter(p.detach().clone()) for p in ours]
    kw = dict(lr=0.01, momentum=0.9, nesterov=nesterov, weight_decay=0.1)
    a, b = minilm.Muon(ours, **kw), torch.optim.Muon(theirs, **kw)
    for t in range(6):
        for i, (p, q) in enumerate(zip(ours, theirs)):
            p.grad = randn(shapes[i], 100 * t + i)
            q.grad = p.grad.clone()
        a.step()
        b.step()
    for p, q in zip(ours, theirs):  # torch orthogonalizes in bfloat16: agree to its precision, per step ~lr·1e-2
        assert_close(p.detach(), q.detach(), atol=6 * 0.01 * 2e-2, rtol=0)


@pytest.mark.task("14.2")
def test_muon_refuses_a_parameter_that_is_not_a_matrix():
    with pytest.raises(ValueError, match="AdamW"):
        minilm.Muon([nn.Parameter(torch.ones(4, 4)), nn.Parameter(torch.ones(4))])


# ---------------------------------------------------------------- 14.3 parameter groups


@pytest.mark.task("14.3")
def test_parameter_groups_on_the_course_model():
    model = minilm.TransformerLM(50, 16, 16, 2, 2, 32)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {k: sorted(names[id(p)] for p in v) for k, v in minilm.parameter_groups(model).items()}
    assert len(groups["muon"]) == 2 * (4 + 3) and all(".attn." in n or ".ffn." in n for n in groups["muon"])
    assert groups["decay"] == ["lm_head.weight"]
    assert "token_embeddings.weight" in groups["no_decay"] and len(groups["no_decay"]) == 1 + 2 * 2 + 1
    adamw = minilm.parameter_groups(model, muon=False)
    assert adamw["muon"] == [] and len(adamw["decay"]) == 2 * 7 + 1


@pytest.mark.task("14.3")
def test_parameter_groups_keep_a_tied_head_out_of_weight_decay():
    """A head tied to the embedding is the embedding: it is not decayed, and it is listed once."""
    model = minilm.TransformerLM(50, 16, 16, 1, 2, 32)
    model.lm_head.weight = model.token_embeddings.weight
    groups = minilm.parameter_groups(model)
    shared = model.token_embeddings.weight
    assert [k for k, v in groups.items() for p in v if p is shared] == ["no_decay"]


# ---------------------------------------------------------------- 14.4 WSD


@pytest.mark.task("14.4")
def test_wsd_phases():
    lr = lambda p: minilm.lr_wsd_schedule(p, 1.0, 0.1, 0.1, 0.2)  # noqa: E731
    assert lr(0.0) == 0.0 and math.isclose(lr(0.05), 0.5)
    assert lr(0.1) == 1.0 and lr(0.5) == 1.0 and lr(0.7999) == 1.0  # stable until the last fifth
    assert math.isclose(lr(0.9), 0.55) and lr(1.0) == 0.1 and lr(3.0) == 0.1


# ---------------------------------------------------------------- 14.5 soft-cap, 14.6 ReLU²


@pytest.mark.task("14.5")
def test_softcap_bounds():
    x = torch.linspace(-1e3, 1e3, 101)
    y = minilm.softcap(x, 15.0)
    assert y.abs().max() <= 15.0 and torch.allclose(minilm.softcap(torch.tensor([0.01]), 15.0), torch.tensor([0.01]))


@pytest.mark.task("14.6")
def test_relu_squared_ffn_matches_swiglu_parameters():
    d, swiglu_d_ff = 12, 32
    ffn = minilm.ReLUSquaredFFN(d, minilm.matched_relu2_d_ff(swiglu_d_ff))
    assert sum(p.numel() for p in ffn.parameters()) == 3 * d * swiglu_d_ff
    x = randn((3, d), 1)
    assert_close(ffn(x), torch.relu(x @ ffn.w1.weight.T).pow(2) @ ffn.w2.weight.T, atol=1e-5)


# ---------------------------------------------------------------- the recipe's switches and minilm train's flags


@pytest.mark.task("14.3")
def test_recipe_switches_and_optimizers_round_trip():
    from minilm.course import recipe as recipes

    model = minilm.TransformerLM(40, 8, 16, 1, 2, 32)
    recipe = recipes.Recipe(optimizer="muon", zero_init=True, qk_norm=True, softcap=5.0, ffn="relu2")
    recipes.apply(model, recipe, seed=0)
    assert "layers.0.attn.q_norm.weight" in model.state_dict() and "layers.0.ffn.w3.weight" not in model.state_dict()
    assert model.layers[0].attn.output_proj.weight.abs().sum() == 0
    opt, notes = recipes.make_optimizer(model, recipe, 1e-3, (0.9, 0.95), 0.1)
    assert "Muon" in notes[0] and "AdamW" in notes[0]
    ids = torch.randint(0, 40, (2, 8))
    logits = model(ids)
    assert logits.abs().max() < 5.0
    minilm.cross_entropy(logits, ids).backward()
    opt.step()
    state = opt.state_dict()
    opt.load_state_dict(state)
    assert set(state) == {"adamw", "muon"}


@pytest.mark.task("14.3")
def test_muon_on_a_model_without_hidden_matrices_says_adamw_trains_it():
    from minilm.course import recipe as recipes

    class Bigram(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embeddings = minilm.Embedding(10, 4)
            self.lm_head = minilm.Linear(4, 10)

    opt, notes = recipes.make_optimizer(Bigram(), recipes.Recipe(optimizer="muon"), 1e-3, (0.9, 0.95), 0.1)
    assert "no hidden matrix" in notes[0] and "AdamW trains all" in notes[0]


@pytest.mark.parametrize("args,message", [
    (["--optimizer", "sgd"], "valid values: adamw, muon"),
    (["--schedule", "linear"], "valid values: cosine, wsd"),
    (["--ffn", "gelu"], "valid values: swiglu, relu2"),
    (["--optimizer", "adamw", "--muon-lr", "0.02"], "give --optimizer muon"),
    (["--schedule", "cosine", "--decay-frac", "0.3"], "give --schedule wsd"),
    (["--dropout", "1.5"], "--dropout"),
])
def test_train_refuses_bad_recipe_flags_before_any_work(args, message, capsys):
    from minilm.course.train.options import build_parser, validate

    parser = build_parser()
    with pytest.raises(SystemExit):
        validate(parser.parse_args(["--steps", "10", *args]), parser)
    assert message in capsys.readouterr().err


def test_train_default_recipe_falls_back_while_its_tasks_are_unwritten(monkeypatch, capsys):
    """A default that needs an unwritten task of notebook 14 becomes the earlier setting, saying so;
    the same setting given as a flag is refused, naming the task."""
    from minilm.course.train import options

    def todo(*args, **kwargs):
        raise NotImplementedError("Task 14.2 is not implemented yet: write Muon in minilm/modern.py")

    monkeypatch.setattr(minilm.exercise_module("modern").Muon, "step", todo)
    monkeypatch.setattr(options, "DEFAULT_RECIPE", options.Recipe(optimizer="muon"))
    parser = options.build_parser()
    args = parser.parse_args(["--steps", "100"])
    options.validate(args, parser)
    assert args.optimizer == "adamw" and "Task 14.2" in args.recipe_notes[0]
    with pytest.raises(SystemExit):
        options.validate(parser.parse_args(["--steps", "100", "--optimizer", "muon"]), parser)
    assert "--optimizer muon needs your code: Task 14.2" in capsys.readouterr().err
