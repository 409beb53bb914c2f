"""Where a distributed lesson's processes run, decided from the machine's facts alone.

The scripts that ``torchrun`` starts (lessons 05 and 12) and the notebooks that start them ask the same
question: with this many GPUs on the node and this PyTorch build, does each process get GPUs and NCCL, or
a share of the CPU and gloo? The answer is a function of the facts, so the tests ask it for made-up
machines (one T4, 2 to 8 GPUs) without a GPU::

    placement = cu.process_placement(local_rank, local_world, gpus=torch.cuda.device_count(),
                                     nccl=dist.is_nccl_available(), stages=1)
    dist.init_process_group(placement.backend)
    model.to(placement.devices[0])
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """One process's backend and devices (one per model stage), and why."""

    backend: str  # "nccl" or "gloo"
    devices: tuple[str, ...]  # "cuda:N" or "cpu", one per stage
    reason: str

    @property
    def on_gpus(self) -> bool:
        return self.backend == "nccl"


def process_placement(local_rank: int, local_world: int, *, gpus: int, nccl: bool, stages: int = 1) -> Placement:
    """The backend and devices of process ``local_rank`` of the ``local_world`` processes on a node.

    Every process owns ``stages`` GPUs of its own (NCCL refuses two ranks on one GPU): with at least
    ``stages * local_world`` GPUs and an NCCL build, process ``r`` takes GPUs ``stages*r`` to
    ``stages*r + stages - 1`` and NCCL; otherwise every stage runs on the CPU and the processes talk gloo.

    Raises:
        ValueError: for a rank outside ``[0, local_world)``, or a count below 1 (stages, processes) or 0 (GPUs).
    """
    for name, value, least in (("local_world", local_world, 1), ("stages", stages, 1), ("gpus", gpus, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, got {value!r}.")
    if isinstance(local_rank, bool) or not isinstance(local_rank, int) or not 0 <= local_rank < local_world:
        raise ValueError(f"local_rank must be in [0, {local_world}) for {local_world} processes, got {local_rank!r}.")
    needed = stages * local_world
    if nccl and gpus >= needed:
        first = stages * local_rank
        each = "a GPU" if stages == 1 else f"{stages} GPUs"
        return Placement("nccl", tuple(f"cuda:{first + s}" for s in range(stages)),
                         f"nccl between GPUs ({each} for each of {local_world} processes, of the {gpus} here)")
    why = ("this PyTorch build has no NCCL" if gpus and not nccl else "no CUDA GPU here" if not gpus else
           f"{local_world} processes with {'a GPU' if stages == 1 else f'{stages} GPUs'} each need {needed}, "
           f"this node has {gpus}")
    return Placement("gloo", ("cpu",) * stages, f"gloo between CPU processes ({why})")
