"""How an output differs from the expected one, in a student's words (provided: not an exercise).

A check that matches no known mistake still says something a student can act on: a constant factor,
a constant offset, a flipped sign, rows that sum to 1, the right values in the wrong places, or which
positions along an axis are right. Only ever used on tensors of the same shape.
"""

from __future__ import annotations

import torch

_SHOWN = 4  # indices listed before "…"


def how_it_differs(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> str:
    """One sentence: how `got` differs from `want`, and where the largest difference is."""
    g, w = got.detach().double(), want.detach().double()
    if g.numel() == 1:  # a number: one number fits any offset or factor, so only a square (root) is named
        square = _square(g, w, lambda a, b: torch.allclose(a, b, atol=atol, rtol=rtol))
        return f"{square + ': ' if square else ''}you give {g.item():.6g}, expected {w.item():.6g}"

    def close(a, b) -> bool:
        return torch.allclose(a, b, atol=atol, rtol=rtol)

    bad = ~torch.isfinite(g)
    if bad.any() and torch.isfinite(w).all():
        first = tuple(int(i) for i in bad.nonzero()[0])
        return (f"NaN or inf at {int(bad.sum())} of {g.numel()} entries where the expected values are finite "
                f"(the first at index {first}): an overflow, a 0/0, or a log or sqrt of something ≤ 0?")
    diff = (g - w).abs()
    where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) if diff.ndim else ()
    largest = f"largest difference {diff.max().item():.3g}, at index {where}"
    return f"{_pattern(g, w, close) or 'values differ from the expected ones'}; {largest}"


def named_cause(got: torch.Tensor, want: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """The cause how_it_differs names (a factor, an offset, squares, a softmax, the wrong places), or None
    when it only says where the values differ. NaN or inf where the expected values are finite lists
    candidates (an overflow, a 0/0, a log of 0), not a cause."""
    g, w = got.detach().double(), want.detach().double()
    close = lambda a, b: torch.allclose(a, b, atol=atol, rtol=rtol)  # noqa: E731
    if g.numel() == 1:
        return _square(g, w, close)
    if (~torch.isfinite(g)).any() and torch.isfinite(w).all():
        return None
    return _cause(g, w, close)


def _pattern(g: torch.Tensor, w: torch.Tensor, close) -> str | None:
    return _cause(g, w, close) or _axis(g, w, close)


def _cause(g: torch.Tensor, w: torch.Tensor, close) -> str | None:
    if g.numel() > 0:
        nonzero = w.abs() > 1e-8 * max(w.abs().max().item(), 1e-30)
        if nonzero.any():
            factor = (g[nonzero] / w[nonzero]).median().item()
            if close(g, torch.zeros_like(g)):
                return "every value of yours is 0 (an output never filled in, or a mask or factor that zeroes it?)"
            if close(g, factor * w) and g.numel() > 1:
                if abs(factor + 1) < 1e-6:
                    return "every value has the wrong sign (a minus sign, or a subtraction the wrong way round)"
                return (f"every value is {factor:.4g} times the expected one, a constant factor (a scale, a divisor, "
                        f"a square root or a rate?)")
        if square := _square(g, w, close):
            return square
        offset = (g - w).median().item()
        if close(g, w + offset):
            return f"every value is off by the same {offset:+.4g} (a constant added or left out?)"
    if g.ndim >= 1 and g.shape[-1] > 1 and close(g.sum(-1), torch.ones_like(g.sum(-1))) and not close(
            w.sum(-1), torch.ones_like(w.sum(-1))):
        return "every row of yours sums to 1 (a softmax applied?) where the expected rows do not"
    if g.numel() > 1 and close(g.flatten().sort().values, w.flatten().sort().values):
        return "the right values, in the wrong places (an axis transposed or permuted, or the wrong order?)"
    return None


def _square(g: torch.Tensor, w: torch.Tensor, close) -> str | None:
    if close(g, w * w) and not close(w, w * w):
        return "your values are the squares of the expected ones (a square root left out?)"
    if close(g * g, w) and not close(g, g * g):
        return "your values are the square roots of the expected ones (a square root too many?)"
    return None


def _axis(g: torch.Tensor, w: torch.Tensor, close) -> str | None:
    """The first axis along which some positions match and others do not."""
    for dim, size in enumerate(g.shape):
        if size < 2:
            continue
        ok = [close(g.select(dim, i), w.select(dim, i)) for i in range(size)]
        if all(ok) or not any(ok):
            continue
        right = [i for i in range(size) if ok[i]]
        wrong = [i for i in range(size) if not ok[i]]
        axis = f"along axis {dim} (size {size})" if g.ndim > 1 else ""
        if right == list(range(len(right))):
            where = f"positions {_indices(right)} match" if len(right) > 1 else "position 0 matches"
            # no guess at the cause: an angle, a count or a mask shared by the rows all look like this
            return f"{axis} {where} and every later one differs, from position {wrong[0]} on".lstrip()
        return f"{axis} positions {_indices(right)} match; {_positions(wrong)} from the expected ones".lstrip()
    return None


def _positions(ix: list[int]) -> str:
    return f"position {ix[0]} differs" if len(ix) == 1 else f"positions {_indices(ix)} differ"


def _indices(ix: list[int]) -> str:
    """[0, 1, 2, 3, 7, 9] → "0–3, 7 and 9": runs of consecutive positions as ranges."""
    runs: list[list[int]] = []
    for i in ix:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    parts = [p for r in runs for p in ([f"{r[0]}–{r[-1]}"] if len(r) > 2 else map(str, r))]
    if len(parts) > _SHOWN:
        return ", ".join(parts[:_SHOWN]) + ", …"
    return " and ".join(filter(None, [", ".join(parts[:-1]), parts[-1]]))
