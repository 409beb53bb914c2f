"""Plumbing for lesson 02: run a hand-written update rule beside ``torch.optim``; time a training run.

An *update rule* is a function ``rule(p, g, state, t)`` that changes the parameter tensor ``p`` in
place, given its gradient ``g``, a dict ``state`` private to that parameter (velocities, moment
estimates) and the 1-based step number ``t``. The rules themselves are written in the notebook::

    def momentum(p, g, state, t, lr=0.1, gamma=0.9):
        state["v"] = gamma * state.get("v", 0) + lr * g
        p -= state["v"]
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.training import accuracy, train_classifier

UpdateRule = Callable[[torch.Tensor, torch.Tensor, dict[str, Any], int], None]
Batch = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Agreement:
    """How closely a hand-written rule followed ``torch.optim`` on the same model and batches.

    Attributes:
        diffs: after each step, the largest ``|θ_ours - θ_torch|`` over all parameters.
        losses: the training loss seen by the hand-written rule before each step.
        moved: whether the hand-written rule changed the parameters at all.
        states: the hand-written rule's final ``state`` dict of each parameter.
        torch_states: ``torch.optim``'s final per-parameter state, in the same order.
    """

    diffs: tuple[float, ...]
    losses: tuple[float, ...]
    moved: bool
    states: tuple[dict[str, Any], ...]
    torch_states: tuple[dict[str, Any], ...]

    @property
    def max_abs_diff(self) -> float:
        """The largest parameter difference over all steps."""
        return max(self.diffs)

    def first_step_above(self, tol: float) -> int | None:
        """The first (1-based) step whose difference exceeds ``tol``, or ``None``."""
        return next((t for t, d in enumerate(self.diffs, start=1) if d > tol), None)


def _loss_and_grad(model: nn.Module, batch: Batch, loss_fn: LossFn) -> float:
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(batch[0]), batch[1])
    loss.backward()
    return loss.item()


def compare_with_torch(rule: UpdateRule, make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer],
                       model: nn.Module, batches: Sequence[Batch], *, steps: int,
                       loss_fn: LossFn = F.cross_entropy) -> Agreement:
    """Train two copies of ``model`` from the same weights on the same batches, one with ``rule``
    and one with ``make_optimizer(params)``, and record how far their parameters drift apart.

    Batches are used in order, cycling when ``steps > len(batches)``. ``model`` is not modified.

    Raises:
        ValueError: if ``steps < 1`` or there are no batches.
        TypeError: if ``rule`` is not callable.
    """
    if not callable(rule):
        raise TypeError(f"rule must be a function rule(p, g, state, t), got {type(rule).__name__}.")
    if steps < 1 or not batches:
        raise ValueError(f"need steps >= 1 and at least one batch, got steps={steps}, {len(batches)} batches.")
    ours, ref = copy.deepcopy(model), copy.deepcopy(model)
    start = [p.detach().clone() for p in ours.parameters()]
    optimizer = make_optimizer(ref.parameters())
    states: list[dict[str, Any]] = [{} for _ in ours.parameters()]
    diffs, losses = [], []
    for t in range(1, steps + 1):
        batch = batches[(t - 1) % len(batches)]
        losses.append(_loss_and_grad(ours, batch, loss_fn))
        with torch.no_grad():
            for p, state in zip(ours.parameters(), states):
                assert p.grad is not None  # every parameter takes part in the loss
                rule(p, p.grad, state, t)
        _loss_and_grad(ref, batch, loss_fn)
        optimizer.step()
        with torch.no_grad():
            diffs.append(max((p - q).abs().max().item() for p, q in zip(ours.parameters(), ref.parameters())))
    moved = any(not torch.equal(p, s) for p, s in zip(ours.parameters(), start))
    torch_states = tuple(dict(optimizer.state[p]) for p in ref.parameters())
    return Agreement(tuple(diffs), tuple(losses), moved, tuple(states), torch_states)


def check_problem(seed: int = 0, *, n_batches: int = 4, batch_size: int = 32, n_features: int = 20,
                  n_classes: int = 5, dtype: torch.dtype = torch.float64) -> tuple[nn.Module, list[Batch]]:
    """A small, self-contained classification problem for checking update rules: a 2-layer tanh
    network and ``n_batches`` batches of Gaussian inputs labelled by a random linear teacher."""
    if min(n_batches, batch_size, n_features) < 1 or n_classes < 2:
        raise ValueError("need n_batches, batch_size, n_features >= 1 and n_classes >= 2.")
    gen = torch.Generator().manual_seed(seed)
    teacher = torch.randn(n_features, n_classes, generator=gen, dtype=dtype)
    batches = []
    for _ in range(n_batches):
        x = torch.randn(batch_size, n_features, generator=gen, dtype=dtype)
        batches.append((x, (x @ teacher).argmax(dim=1)))
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(n_features, 16), nn.Tanh(), nn.Linear(16, n_classes)).to(dtype)
    return model, batches


@dataclass(frozen=True)
class TrainResult:
    """One training run: the loss of every mini-batch, the training wall time, the test accuracy."""

    losses: tuple[float, ...]
    seconds: float
    test_accuracy: float

    def final_loss(self, window: int = 20) -> float:
        """Mean training loss over the last ``window`` steps (single mini-batch losses are noisy)."""
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}.")
        tail = self.losses[-window:]
        return sum(tail) / len(tail)


def train_and_evaluate(model: nn.Module, optimizer: torch.optim.Optimizer, train: Batch, test: Batch, *,
                       epochs: int, batch_size: int = 128, seed: int = 0,
                       loss_fn: LossFn = F.cross_entropy) -> TrainResult:
    """Train with :func:`course_utils.training.train_classifier` (one ``optimizer.step()`` per
    mini-batch, a new seeded order each epoch), timing it, then measure the test accuracy.
    The time excludes the test evaluation."""
    start = time.perf_counter()
    losses = train_classifier(model, *train, optimizer=optimizer, epochs=epochs, batch_size=batch_size,
                              seed=seed, loss_fn=loss_fn)
    seconds = time.perf_counter() - start
    return TrainResult(tuple(losses), seconds, accuracy(model, *test))
