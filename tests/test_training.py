import io
import math
import re

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close, leading_shapes, randn, seeds
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import minilm

# ---------------------------------------------------------------- 10.1 cross_entropy


@pytest.mark.task("10.1")
@given(leading=leading_shapes, vocab=st.integers(1, 30), seed=seeds, scale=st.sampled_from([0.1, 1.0, 30.0]))
def test_cross_entropy_matches_torch(leading, vocab, seed, scale):
    logits = randn((*leading, vocab), seed, scale)
    targets = torch.randint(0, vocab, leading, generator=torch.Generator().manual_seed(seed))
    want = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    assert_close(minilm.cross_entropy(logits, targets), want, what="cross_entropy")


@pytest.mark.task("10.1")
@pytest.mark.parametrize("scale", [1e4, -1e4])
def test_cross_entropy_is_stable_for_huge_logits(scale):
    logits = randn((4, 10), 0) * scale
    targets = torch.tensor([0, 3, 5, 9])
    got = minilm.cross_entropy(logits, targets)
    assert torch.isfinite(got), "cross_entropy overflowed: use the log-sum-exp trick"
    assert_close(got, F.cross_entropy(logits, targets), atol=1e-3, what="cross_entropy at ±1e4")


@pytest.mark.task("10.1")
def test_cross_entropy_gradient_matches_torch():
    logits = randn((3, 5, 7), 1).requires_grad_()
    ref = logits.detach().clone().requires_grad_()
    targets = torch.randint(0, 7, (3, 5))
    minilm.cross_entropy(logits, targets).backward()
    F.cross_entropy(ref.reshape(-1, 7), targets.reshape(-1)).backward()
    assert_close(logits.grad, ref.grad, what="d loss / d logits")


@pytest.mark.task("10.1")
def test_cross_entropy_rejects_bad_targets():
    with pytest.raises(ValueError, match="targets"):
        minilm.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        minilm.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1, 2]))


# ---------------------------------------------------------------- 10.2 clip_grad_norm


def _params_with_grads(seed, scale, shapes=((3, 4), (7,), (2, 3, 2))):
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale
    return params


@pytest.mark.task("10.2")
@given(seed=seeds, scale=st.sampled_from([1e-3, 0.1, 1.0, 10.0]), max_norm=st.sampled_from([0.5, 1.0, 4.0]))
def test_clip_matches_torch(seed, scale, max_norm):
    mine, ref = _params_with_grads(seed, scale), _params_with_grads(seed, scale)
    norm = minilm.clip_grad_norm(mine, max_norm)
    want = torch.nn.utils.clip_grad_norm_(ref, max_norm)
    assert math.isclose(float(norm), float(want), rel_tol=1e-5)
    for p, q in zip(mine, ref):
        assert_close(p.grad, q.grad, what="clipped gradient")


@pytest.mark.task("10.2")
def test_clip_uses_one_global_norm():
    # Two gradients of norm 3 and 4: the global norm is 5, so both scale by 1/5 (not 1/3 and 1/4).
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    a.grad, b.grad = torch.tensor([3.0]), torch.tensor([4.0])
    norm = minilm.clip_grad_norm([a, b], 1.0)
    assert math.isclose(float(norm), 5.0, rel_tol=1e-6)
    assert_close(a.grad, torch.tensor([0.6]), what="a.grad")
    assert_close(b.grad, torch.tensor([0.8]), what="b.grad")


@pytest.mark.task("10.2")
def test_clip_skips_params_without_grad_and_accepts_a_generator():
    model = torch.nn.Linear(3, 2)
    model.weight.grad = torch.full((2, 3), 10.0)
    minilm.clip_grad_norm(model.parameters(), 1.0)  # bias.grad is None
    assert model.bias.grad is None
    assert math.isclose(model.weight.grad.norm().item(), 1.0, rel_tol=1e-5)


# ---------------------------------------------------------------- 10.3 lr_cosine_schedule


@pytest.mark.task("10.3")
def test_schedule_matches_cs336_reference_values():
    # The expected values of CS336 assignment 1's test_get_lr_cosine_schedule.
    expected = [0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855, 0.5714285714285714,
                0.7142857142857143, 0.8571428571428571, 1.0, 0.9887175604818206, 0.9554359905560885,
                0.9018241671106134, 0.8305704108364301, 0.7452476826029011, 0.6501344202803414,
                0.55, 0.44986557971965857, 0.3547523173970989, 0.26942958916356996, 0.19817583288938662,
                0.14456400944391146, 0.11128243951817937, 0.1, 0.1, 0.1, 0.1]
    got = [minilm.lr_cosine_schedule(it, 1.0, 0.1, 7, 21) for it in range(25)]
    wrong = [it for it, (a, b) in enumerate(zip(got, expected)) if a != pytest.approx(b, abs=1e-12)]
    assert not wrong, ("lr_cosine_schedule(it, max_lr=1, min_lr=0.1, warmup_iters=7, cosine_cycle_iters=21) "
                       "differs from "
                       f"CS336's values at it = {wrong}: got {[round(got[i], 4) for i in wrong]}, "
                       f"expected {[round(expected[i], 4) for i in wrong]}")


@pytest.mark.task("10.3")
def test_schedule_stays_at_min_lr_after_the_cycle():
    got = [minilm.lr_cosine_schedule(it, 1.0, 0.1, 10, 50) for it in (51, 60, 100, 1000)]
    assert got == pytest.approx([0.1] * 4, abs=1e-12), (
        f"after cosine_cycle_iters = 50 the rate must stay at min_lr = 0.1; at it = 51, 60, 100, 1000 got "
        f"{[round(g, 4) for g in got]} (the cosine must not climb back up: return min_lr for it > cosine_cycle_iters)")


@pytest.mark.task("10.3")
@given(warmup=st.integers(0, 50), extra=st.integers(1, 100), it=st.integers(0, 200))
def test_schedule_property(warmup, extra, it):
    """Between min_lr and max_lr; max_lr at the end of the warmup, min_lr after the cycle, never
    rising after the warmup."""
    lr = lambda i: minilm.lr_cosine_schedule(i, 3e-3, 3e-4, warmup, warmup + extra)  # noqa: E731
    got = lr(it)
    where = f"(max_lr 3e-3, min_lr 3e-4, warmup_iters {warmup}, cosine_cycle_iters {warmup + extra})"
    assert 0 <= got <= 3e-3 + 1e-15, f"the rate at it = {it} is {got:.3g}, outside 0 … max_lr {where}"
    if warmup > 0:
        assert lr(warmup) == pytest.approx(3e-3, abs=1e-15), \
            f"at it = warmup_iters the rate must be max_lr, got {lr(warmup):.3g} {where}"
    if it > warmup + extra:
        assert got == pytest.approx(3e-4, abs=1e-15), \
            f"after the cycle (it = {it}) the rate must stay at min_lr, got {got:.3g} {where}"
    if it >= warmup:
        assert 3e-4 - 1e-15 <= got and lr(it + 1) <= got + 1e-15, \
            f"after the warmup the rate must not fall below min_lr nor rise: {got:.3g} at it = {it}, " \
            f"{lr(it + 1):.3g} next {where}"


@pytest.mark.task("10.3")
def test_schedule_starts_at_zero():
    assert minilm.lr_cosine_schedule(0, 1.0, 0.1, 10, 100) == 0.0, "the warmup starts from 0 at it = 0"


# ---------------------------------------------------------------- 10.4 AdamW


def _run_optimizer(opt_class, steps, seed, **kwargs):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = opt_class(model.parameters(), **kwargs)
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        x, y = torch.randn(16, 5, generator=g), torch.randn(16, 3, generator=g)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.task("10.4")
@settings(max_examples=15, phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no slow shrinking
@given(seed=st.integers(0, 1000), lr=st.sampled_from([1e-3, 1e-2, 0.1]), wd=st.sampled_from([0.0, 0.01, 0.5]),
       betas=st.sampled_from([(0.9, 0.999), (0.9, 0.95), (0.5, 0.9)]))
def test_adamw_matches_torch(seed, lr, wd, betas):
    kwargs = dict(lr=lr, weight_decay=wd, betas=betas, eps=1e-8)
    for got, want in zip(_run_optimizer(minilm.AdamW, 5, seed, **kwargs),
                         _run_optimizer(torch.optim.AdamW, 5, seed, **kwargs)):
        assert_close(got, want, atol=1e-6, rtol=1e-5,
                     what=f"parameters after 5 AdamW steps vs torch.optim.AdamW ({kwargs})")


@pytest.mark.task("10.4")
@pytest.mark.parametrize("scale", [1e-4, 1e-5, 1e-6])
def test_adamw_eps_outside_the_square_root_with_tiny_gradients(scale):
    # With gradients of ~1e-5, v̂ ≈ 1e-10: eps = 1e-8 inside the root, sqrt(v̂ + eps) ≈ 1e-4, would shrink
    # the step tenfold; the update is m̂ / (sqrt(v̂) + eps), about lr per step whatever the gradients' size.
    g = torch.Generator().manual_seed(3)
    init = torch.randn(4, 5, generator=g)
    grads = [torch.randn(4, 5, generator=g) * scale for _ in range(4)]
    params = {}
    for name, opt_class in (("minilm", minilm.AdamW), ("torch", torch.optim.AdamW)):
        p = torch.nn.Parameter(init.clone())
        opt = opt_class([p], lr=0.01, weight_decay=0.1, eps=1e-8)
        for grad in grads:
            p.grad = grad.clone()
            opt.step()
        params[name] = p.detach()
    assert_close(params["minilm"], params["torch"], atol=1e-6, rtol=1e-5, what=(
        f"parameters after 4 AdamW steps with gradients of size ~{scale:g}, eps 1e-8, vs torch.optim.AdamW "
        "(eps belongs outside the square root: p ← p − lr · m̂ / (sqrt(v̂) + eps))"))


@pytest.mark.task("10.4")
def test_adamw_weight_decay_is_decoupled():
    # With a zero gradient, Adam's update is 0 and only the decay acts: p ← p (1 − lr · wd).
    # Adam + L2 would instead move p by about lr (the normalized decay gradient).
    p = torch.nn.Parameter(torch.full((3,), 4.0))
    opt = minilm.AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(3)
    opt.step()
    assert_close(p.detach(), torch.full((3,), 4.0 * (1 - 0.1 * 0.5)), what=(
        "p = 4 after one step with a zero gradient, lr 0.1, weight_decay 0.5: only the decay acts, "
        "p ← p − lr · weight_decay · p = 3.8 (not through the gradient, and not without lr)"))


@pytest.mark.task("10.4")
def test_adamw_first_step_is_lr_sized():
    # Bias correction makes the first update exactly lr · g / |g| (≈ lr), not lr · (1 − β1) / sqrt(1 − β2).
    p = torch.nn.Parameter(torch.zeros(4))
    opt = minilm.AdamW([p], lr=0.01, weight_decay=0.0)
    p.grad = torch.tensor([1.0, -2.0, 0.5, 3.0])
    opt.step()
    assert_close(p.detach(), -0.01 * torch.sign(p.grad), atol=1e-7, what="p after the first step")


@pytest.mark.task("10.4")
def test_adamw_reads_the_scheduled_lr_and_defaults():
    p = torch.nn.Parameter(torch.ones(2))
    opt = minilm.AdamW([p])
    assert opt.defaults["lr"] == 1e-3 and opt.defaults["weight_decay"] == 0.01
    assert tuple(opt.defaults["betas"]) == (0.9, 0.999) and opt.defaults["eps"] == 1e-8
    opt.param_groups[0]["lr"] = 0.0
    p.grad = torch.ones(2)
    opt.step()
    assert torch.equal(p.detach(), torch.ones(2)), "a step with lr 0 must not move the parameters"


@pytest.mark.task("10.4")
def test_adamw_rejects_bad_hyperparameters():
    with pytest.raises(ValueError, match="AdamW: lr"):
        minilm.AdamW([torch.nn.Parameter(torch.ones(1))], lr=-1.0)


# ---------------------------------------------------------------- 10.5 checkpoints


def _model_and_opt(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    return model, torch.optim.AdamW(model.parameters(), lr=0.01)


def _step(model, opt, seed):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(seed))
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()


@pytest.mark.task("10.5")
@pytest.mark.parametrize("to_file", [False, True], ids=["path", "file object"])
def test_checkpoint_round_trip_resumes_exactly(tmp_path, to_file):
    model, opt = _model_and_opt(0)
    for s in range(3):
        _step(model, opt, s)
    target = io.BytesIO() if to_file else tmp_path / "ckpt.pt"
    minilm.save_checkpoint(model, opt, 42, target)
    if to_file:
        target.seek(0)
    model2, opt2 = _model_and_opt(1)
    assert minilm.load_checkpoint(target, model2, opt2) == 42
    _step(model, opt, 7)
    _step(model2, opt2, 7)  # the restored moments must give the same next step
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- 10.6 train: the training loop


def _regression(seed=0):
    """A least-squares problem, its weights, and the loop's inputs for it: batches drawn by the step."""
    torch.manual_seed(seed)
    w = torch.nn.Parameter(torch.randn(3))
    data = torch.randn(64, 3), torch.randn(64)

    def batch(step):
        rows = torch.Generator().manual_seed(step)
        i = torch.randint(0, 64, (8,), generator=rows)
        return data[0][i], data[1][i]

    def loss_of(x, y):
        return ((x @ w - y) ** 2).mean()

    return w, batch, loss_of


def _until(stop, lr):
    return lambda step: None if step >= stop else (lr(step) if callable(lr) else lr)


@pytest.mark.task("10.6")
def test_train_is_the_textbook_step_and_resumes_exactly():
    """Against a hand-written SGD loop (the oracle): the same weights, losses, pre-clip norms and
    evaluations; two halves with a resume in between give the same weights as one run; lr_at's None stops it."""
    lrs = [0.1 / (1 + s) for s in range(10)]
    w, batch, loss_of = _regression()
    oracle_losses, oracle_norms, oracle_vals = [], [], []
    for step in range(10):
        inputs, targets = batch(step)
        loss = loss_of(inputs, targets)
        w.grad = None
        loss.backward()
        norm = w.grad.norm()
        oracle_norms.append(float(norm))
        w.grad *= min(1.0, 0.5 / (float(norm) + 1e-6))
        with torch.no_grad():
            w -= lrs[step] * w.grad
        oracle_losses.append(loss.item())
        oracle_vals.append(float(w.detach().sum()) if (step + 1) % 4 == 0 else None)
    oracle = w.detach().clone()

    w, batch, loss_of = _regression()
    opt = torch.optim.SGD([w], lr=1.0)
    done = list(minilm.train(loss_of, [w], opt, batch, _until(10, lrs.__getitem__), clip=0.5,
                             evaluate=lambda step: float(w.sum()), eval_every=4))
    assert [d.step for d in done] == list(range(1, 11)) and [d.lr for d in done] == lrs
    torch.testing.assert_close([d.loss.item() for d in done], oracle_losses)
    torch.testing.assert_close([d.grad_norm for d in done], oracle_norms)
    assert [d.val_loss is None for d in done] == [v is None for v in oracle_vals]
    torch.testing.assert_close([d.val_loss for d in done if d.val_loss is not None],
                               [v for v in oracle_vals if v is not None])
    torch.testing.assert_close(w.detach(), oracle, rtol=1e-5, atol=1e-6)

    w, batch, loss_of = _regression()
    opt = torch.optim.SGD([w], lr=1.0)
    first = list(minilm.train(loss_of, [w], opt, batch, _until(4, lrs.__getitem__), clip=0.5))
    rest = list(minilm.train(loss_of, [w], opt, batch, _until(10, lrs.__getitem__), clip=0.5, start=4))
    assert [d.step for d in first + rest] == list(range(1, 11))
    torch.testing.assert_close(w.detach(), oracle, rtol=1e-5, atol=1e-6)
    assert list(minilm.train(loss_of, [w], opt, batch, _until(10, 0.1), start=10)) == []


@pytest.mark.task("10.6")
def test_train_scales_muons_groups_and_skips_clipping_when_told():
    w, batch, loss_of = _regression()
    v = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [w]}, {"params": [v], "lr_scale": 4.0}], lr=1.0)
    done = list(minilm.train(loss_of, [w], opt, batch, _until(1, 0.01), clip=None))
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.04] and done[0].grad_norm is None


@pytest.mark.task("10.6")
def test_train_with_your_adamw_lowers_a_models_loss():
    """The loop with the course's pieces on a tiny language model: the loss on a fixed batch falls."""
    torch.manual_seed(0)
    model = minilm.TransformerLM(32, 8, 16, 1, 2, 48, 10000.0)
    x = torch.randint(0, 32, (4, 8))
    y = torch.roll(x, -1, dims=1)
    opt = minilm.AdamW(model.parameters(), lr=1e-2)
    done = list(minilm.train(lambda a, b: minilm.cross_entropy(model(a), b), model.parameters(), opt,
                             lambda s: (x, y), _until(30, 1e-2)))
    assert done[-1].loss.item() < 0.5 * done[0].loss.item(), [d.loss.item() for d in done[::10]]


@pytest.mark.task("10.6")
@pytest.mark.parametrize("kwargs, says", [
    (dict(clip=-1.0), "clip must be a positive number, got -1.0"),
    (dict(start=-2), "start must be an integer >= 0, got -2"),
    (dict(evaluate=lambda step: 0.0, eval_every=0), "eval_every must be an integer >= 1, got 0"),
    (dict(evaluate=3, eval_every=2), "evaluate must be a function of the step count, got int"),
])
def test_train_says_what_it_expected(kwargs, says):
    w, batch, loss_of = _regression()
    with pytest.raises((TypeError, ValueError), match=re.escape(says)):
        next(iter(minilm.train(loss_of, [w], torch.optim.SGD([w], lr=0.1), batch, _until(3, 0.1), **kwargs)))
    with pytest.raises(TypeError, match="optimizer must be an optimizer .*, got list"):
        next(iter(minilm.train(loss_of, [w], [w], batch, _until(3, 0.1))))
