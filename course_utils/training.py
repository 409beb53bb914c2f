"""A plain mini-batch training loop and an accuracy function for in-memory classification data.

Lessons whose subject is *not* the training loop (optimizers compared, pruning, quantization) call
these; lessons that teach the loop write it in their cells.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.progress import progress

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check_data(x: torch.Tensor, y: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("inputs and labels must be tensors (e.g. from cu.load_tensors).")
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"need as many labels as inputs (at least one), got {len(x)} inputs and {len(y)} labels.")


def _check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int = 1000) -> float:
    """Fraction of ``x`` that ``model`` classifies as ``y`` (argmax of the outputs), in eval mode.

    The model's training/eval mode is restored afterwards.
    """
    _check_data(x, y)
    _check_batch_size(batch_size)
    was_training = model.training
    model.eval()
    correct = sum(int((model(x[i:i + batch_size]).argmax(1) == y[i:i + batch_size]).sum())
                  for i in range(0, len(x), batch_size))
    model.train(was_training)
    return correct / len(x)


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                     optimizer: torch.optim.Optimizer | None = None, lr: float = 1e-3, epochs: float = 1,
                     batch_size: int = 128, seed: int = 0, loss_fn: LossFn = F.cross_entropy) -> list[float]:
    """Train ``model`` on in-memory tensors with one optimizer step per mini-batch; return each step's loss.

    Every epoch visits the data in a new random order drawn from a generator seeded with ``seed``,
    so a call is reproducible on a given machine. A fractional ``epochs`` (e.g. 0.5) trains on that
    fraction of the last epoch's batches.

    Args:
        optimizer: the optimizer to step; by default a new ``Adam(model.parameters(), lr=lr)``.
            (For a pruned module the parameters include ``weight_orig``, whose gradient is zero
            where the mask is zero, so pruned weights stay pruned.)
        loss_fn: ``loss_fn(outputs, labels)``, cross-entropy on logits by default.

    Raises:
        TypeError, ValueError: on malformed data, non-positive ``epochs``/``lr`` or a bad ``batch_size``.
    """
    _check_data(x, y)
    _check_batch_size(batch_size)
    if not epochs > 0 or not lr > 0:
        raise ValueError(f"epochs and lr must be positive, got epochs={epochs!r}, lr={lr!r}.")
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    batches_per_epoch = math.ceil(len(x) / batch_size)
    n_steps = max(1, math.ceil(epochs * batches_per_epoch - 1e-9))  # a started batch is trained
    model.train()
    losses: list[float] = []
    for step in progress(range(n_steps), desc=f"training {epochs:g} epochs", unit="step"):
        batch = step % batches_per_epoch
        if batch == 0:  # every epoch visits the data in a new order
            order = torch.randperm(len(x), generator=generator).to(x.device)
        idx = order[batch * batch_size:(batch + 1) * batch_size]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
