"""The student's subcommands of `minilm` (status, check, test, hint), one module each with
`main(argv, prog)`; minilm/course/cli.py's COMMANDS table lists them beside the others."""

from __future__ import annotations

from minilm.course import tasks


def for_small_checks() -> None:
    """Set torch up for the checks' small tensors: one thread (a pool's hand-offs cost more than
    such ops, most of all on a busy machine: status takes half the time), and no torch._dynamo
    import. torch.optim.Optimizer's add_param_group, state_dict, load_state_dict and zero_grad
    import it on their first call (over a second) only to mark themselves as never compiled; the
    check commands compile nothing, so mark them so here (a torch without this private hook is
    left alone and is merely slower)."""
    import torch

    torch.set_num_threads(1)

    for name in ("add_param_group", "state_dict", "load_state_dict", "zero_grad"):
        fn = getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
        if fn is not None and not hasattr(fn, "__dynamo_disable"):
            setattr(fn, "__dynamo_disable", fn)


def task_ids(ids: list[str], allow_all: bool = True) -> list[str] | str:
    """The ids, or a one-line error naming the valid ones."""
    if allow_all and ids == ["all"]:
        return [t.id for t in tasks.TASKS]
    for task_id in ids:
        try:
            tasks.get(task_id)
        except ValueError as e:
            return str(e)
    return ids
