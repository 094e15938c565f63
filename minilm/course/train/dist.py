"""Data-parallel training under torchrun: the process group (a no-op stand-in for one process)
and the check that every replica holds the same parameters (--check-sync)."""

from __future__ import annotations

import os

import torch


class Dist:
    """The process group under torchrun (WORLD_SIZE > 1), or a no-op stand-in for one process."""

    def __init__(self, device: str):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.enabled = self.world_size > 1
        if self.enabled:
            import torch.distributed as dist

            backend = "nccl" if device.startswith("cuda") else "gloo"
            dist.init_process_group(backend)
            self.dist = dist

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            self.dist.barrier()

    def mean(self, value: float) -> float:
        """The mean over processes of a float."""
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        self.dist.all_reduce(t)
        return t.item() / self.world_size

    def from_main(self, value: float) -> float:
        """Rank 0's value of a float on every rank (plans made from it then agree)."""
        if not self.enabled:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        self.dist.broadcast(t, src=0)
        return t.item()

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            t = t.clone()
            self.dist.all_reduce(t)
        return t

    def close(self) -> None:
        if self.enabled:
            self.dist.destroy_process_group()


def parameter_checksum(model: torch.nn.Module) -> torch.Tensor:
    """Two float64 numbers that change with any parameter: Σ p and Σ p·(index+1)."""
    flat = torch.cat([p.detach().double().flatten() for p in model.parameters()])
    return torch.stack((flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()))


def check_sync(model: torch.nn.Module, dist: Dist) -> None:
    if not dist.enabled:
        return
    mine = parameter_checksum(model)
    gathered = [torch.zeros_like(mine) for _ in range(dist.world_size)]
    dist.dist.all_gather(gathered, mine)
    if any(not torch.equal(g, gathered[0]) for g in gathered):
        raise RuntimeError(f"--check-sync: the replicas' parameters differ: {[g.tolist() for g in gathered]}")
    if dist.main:
        print(f"check-sync: all {dist.world_size} replicas hold identical parameters")
