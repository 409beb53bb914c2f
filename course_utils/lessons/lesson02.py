"""Lesson 02 (optimizers): run a hand-written update rule beside ``torch.optim``; time a training run.

An *update rule* is a function ``rule(p, g, state, t)`` that changes the parameter tensor ``p`` in
place, given its gradient ``g``, a dict ``state`` private to that parameter (velocities, moment
estimates) and the 1-based step number ``t``. The rules themselves are written in the notebook::

    def momentum(p, g, state, t, lr=0.1, gamma=0.9):
        state["v"] = gamma * state.get("v", 0) + lr * g
        p -= state["v"]

The exercise checks of the lesson follow its plumbing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import NO_ANSWER, CheckResult, check_numbers, not_yet, worked_solution

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


# ---------------------------------------- many optimizers, one network, side by side

class SideBySide(nn.Module):
    """K copies of one multilayer perceptron, trained side by side: one forward and one backward for all K.

    Built from K ``nn.Sequential`` of the same architecture (``Flatten``, then ``Linear`` layers with elementwise
    activations between them), whose weights it copies. The K first layers are one ``Linear(in, K·out)``
    (the mini-batch is the same for all copies, so that is one matrix product); each later layer applies K
    independent weight matrices with one batched product (``torch.baddbmm``). Nothing mixes copies, so the
    gradient of the *sum* of the K losses with respect to copy k's weights is copy k's own gradient.

    ``run_parameters(k)`` are copy k's weights and biases with ``nn.Linear``'s shapes, as views into the
    stacked tensors: give them to copy k's optimizer, call :meth:`split_grads` after ``backward()``, and each
    optimizer steps its own copy in place. :attr:`preactivations` keeps each layer's pre-activations
    ``(K, batch, out)`` from the last forward (detached), for measurements.
    """

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        if not models:
            raise ValueError("need at least one model.")
        plans = [self._layers(m) for m in models]
        if any([(lin.weight.shape, type(act)) for lin, act in plan] != [(lin.weight.shape, type(act))
                                                                         for lin, act in plans[0]]
               for plan in plans):
            raise ValueError("all models must have the same architecture.")
        self.k = len(models)
        self.weights = nn.ParameterList(nn.Parameter(torch.stack([plan[i][0].weight.detach() for plan in plans]))
                                        for i in range(len(plans[0])))
        self.biases = nn.ParameterList(nn.Parameter(torch.stack([plan[i][0].bias.detach() for plan in plans]))
                                       for i in range(len(plans[0])))
        self.activations = [copy.deepcopy(act) for _, act in plans[0]]
        self._runs = [[t.detach()[k].requires_grad_() for pair in zip(self.weights, self.biases) for t in pair]
                      for k in range(self.k)]
        self.preactivations: list[torch.Tensor] = []

    @staticmethod
    def _layers(model: nn.Module) -> list[tuple[nn.Linear, nn.Module | None]]:
        layers: list[tuple[nn.Linear, nn.Module | None]] = []
        for module in model.children() if isinstance(model, nn.Sequential) else [model]:
            if isinstance(module, nn.Flatten) and not layers:
                continue
            if isinstance(module, nn.Linear) and module.bias is not None:
                layers.append((module, None))
            elif layers and layers[-1][1] is None and not isinstance(module, nn.Linear | nn.Flatten):
                layers[-1] = (layers[-1][0], module)
            else:
                raise ValueError(f"expected Flatten, then Linear layers (with bias) and one activation after each, "
                                 f"got {module}.")
        if not layers:
            raise ValueError("the model has no Linear layer.")
        return layers

    def run_parameters(self, k: int) -> list[torch.Tensor]:
        """Copy k's parameters (weight, bias of each layer, as in ``nn.Sequential.parameters()``): views into
        the stacked tensors."""
        return self._runs[k]

    def split_grads(self) -> None:
        """After ``backward()``: give each copy's parameters their slice of the stacked gradients."""
        stacked = [t for pair in zip(self.weights, self.biases) for t in pair]
        for k, run in enumerate(self._runs):
            for param, big in zip(run, stacked):
                param.grad = None if big.grad is None else big.grad[k]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(K, batch, classes)`` of the K copies on the same inputs ``x``."""
        h = x.flatten(1)
        self.preactivations = []
        for i, (w, b, act) in enumerate(zip(self.weights, self.biases, self.activations)):
            if i == 0:   # shared input: one Linear(in, K·out)
                z = F.linear(h, w.flatten(0, 1), b.flatten()).unflatten(1, (self.k, -1)).transpose(0, 1)
            else:        # K inputs, K matrices: one batched product
                z = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            self.preactivations.append(z.detach())
            h = z if act is None else act(z)
        return h


def minibatches(n: int, batch_size: int, steps: int, *, seed: int = 0) -> Iterator[torch.Tensor]:
    """``steps`` index tensors of exactly ``batch_size`` examples out of ``n``: each epoch a new order from a
    generator seeded with ``seed``; the last incomplete batch of an epoch is dropped."""
    if not 1 <= batch_size <= n or steps < 1:
        raise ValueError(f"need 1 <= batch_size <= n and steps >= 1, got n={n}, batch_size={batch_size}, "
                         f"steps={steps}.")
    generator, per_epoch = torch.Generator().manual_seed(seed), n // batch_size
    for step in range(steps):
        if step % per_epoch == 0:
            order = torch.randperm(n, generator=generator)
        start = (step % per_epoch) * batch_size
        yield order[start:start + batch_size]


@torch.no_grad()
def side_by_side_eval(runs: SideBySide, x: torch.Tensor, y: torch.Tensor, *,
                      chunk: int = 5000) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy and accuracy of each of the K copies on ``(x, y)``: two tensors of shape ``(K,)``."""
    loss, correct = torch.zeros(runs.k, dtype=torch.float64), torch.zeros(runs.k, dtype=torch.float64)
    for i in range(0, len(x), chunk):
        logits, labels = runs(x[i:i + chunk]), y[i:i + chunk]
        loss += F.cross_entropy(logits.flatten(0, 1), labels.repeat(runs.k), reduction="none"
                                ).view(runs.k, -1).sum(1).double()
        correct += (logits.argmax(-1) == labels).sum(1).double()
    return loss / len(x), correct / len(x)


# ---------------------------------------- exercise checks

# Exercise 1: the hyperparameters of the student's RMSprop with momentum, and how closely it must follow torch.
RMSPROP_LR, RMSPROP_GAMMA, RMSPROP_EPS, RMSPROP_MOMENTUM = 0.01, 0.9, 1e-8, 0.9
RMSPROP_STEPS, RMSPROP_TOL = 10, 1e-10

# Exercise 2: the quadratic f(θ) = ½ θᵀAθ of the lesson's section 2 (the problem, not the answer).
QUADRATIC_A = ((5.5, 4.5), (4.5, 5.5))

# Exercise 3: Adam's hyperparameters and the gradient of the first step.
ADAM_LR, ADAM_BETAS, ADAM_EPS, ADAM_GRAD = 1e-3, (0.9, 0.999), 1e-8, 0.5


def _rmsprop_variant(eps_inside: bool = False, no_one_minus: bool = False, no_sqrt: bool = False,
                     no_momentum: bool = False) -> UpdateRule:
    """The right rule, RMSprop with momentum (no flags), or one with a typical mistake."""

    def rule(p: torch.Tensor, g: torch.Tensor, state: dict[str, Any], t: int) -> None:
        e = state.get("E_g2", torch.zeros_like(p))
        e = RMSPROP_GAMMA * e + (1.0 if no_one_minus else 1 - RMSPROP_GAMMA) * g * g
        state["E_g2"] = e
        if no_sqrt:
            denom = e + RMSPROP_EPS
        elif eps_inside:
            denom = (e + RMSPROP_EPS).sqrt()
        else:
            denom = e.sqrt() + RMSPROP_EPS
        if no_momentum:
            p -= RMSPROP_LR * g / denom
            return
        state["b"] = RMSPROP_MOMENTUM * state.get("b", torch.zeros_like(p)) + g / denom
        p -= RMSPROP_LR * state["b"]

    return rule


_RMSPROP_MISTAKES = {
    "eps_inside": "you put ε inside the square root, √(E[g²] + ε) (Ruder's and Keras's form); torch.optim.RMSprop "
                  "adds it elsewhere: section 3's \"Where ε goes\" shows where",
    "no_one_minus": "your running average E[g²] adds the whole g²: look at how section 3's RMSprop weights the "
                    "old average and the new g², so that E[g²] stays an average",
    "no_sqrt": "you divide by E[g²] itself: RMSprop divides by the root mean square of the gradient",
    "no_momentum": "that is plain RMSprop: the exercise adds a momentum buffer b, kept in state, and the step "
                   "follows b instead of the scaled gradient",
}

RMSPROP_SOLUTION = (
    "keep two buffers per parameter in state, both starting at zero. First the running average of g², as in "
    "section 3's RMSprop: E[g²] = γE[g²] + (1 − γ)g², "
    "state[\"E_g2\"] = gamma * state.get(\"E_g2\", 0) + (1 - gamma) * g * g. Then the momentum buffer, with ε "
    "outside the root as torch.optim.RMSprop has it: b = μb + g/(√E[g²] + ε), "
    "state[\"b\"] = mu * state.get(\"b\", 0) + g / (state[\"E_g2\"].sqrt() + eps). Then step in place: θ -= α·b, "
    "p -= lr * state[\"b\"] (not p = p - ..., which changes nothing outside the function); answer_1 = "
    "my_rmsprop_momentum."
)


def check_rmsprop_momentum(rule: UpdateRule | None, *, solution: bool = False) -> CheckResult:
    """Exercise 1: a function ``rule(p, g, state, t)`` implementing RMSprop with momentum (lr = 0.01,
    γ = 0.9, ε = 1e-8, μ = 0.9), run beside ``torch.optim.RMSprop(lr=0.01, alpha=0.9, eps=1e-8, momentum=0.9)``.

    A wrong rule gets a hint (the typical mistake it makes, if it is one of them); ``solution=True`` shows the
    worked solution instead of running the rule."""
    if solution:
        return worked_solution(RMSPROP_SOLUTION)
    if rule is None:
        return NO_ANSWER
    if not callable(rule):
        return CheckResult(False, f"pass your function itself (answer_1 = my_rmsprop_momentum), "
                                  f"got {type(rule).__name__}.")

    def torch_rmsprop(params: Any) -> torch.optim.Optimizer:
        return torch.optim.RMSprop(params, lr=RMSPROP_LR, alpha=RMSPROP_GAMMA, eps=RMSPROP_EPS,
                                   momentum=RMSPROP_MOMENTUM)

    model, batches = check_problem(seed=2)
    try:
        got = compare_with_torch(rule, torch_rmsprop, model, batches, steps=RMSPROP_STEPS)
    except Exception as exc:  # the student's code may fail in any way: report it as the reason
        return not_yet(f"your function raised {type(exc).__name__}: {exc}.")
    if not got.moved:
        return not_yet("the parameters did not change: update p in place (p -= ... or p.copy_(...)), "
                       "since rebinding the name p inside the function changes nothing outside.")
    if got.max_abs_diff <= RMSPROP_TOL:
        return CheckResult(True, f"your rule follows torch.optim.RMSprop(momentum=0.9) to "
                                 f"{got.max_abs_diff:.1e} over {RMSPROP_STEPS} steps: E[g²] = γE[g²] + (1 − γ)g², "
                                 f"b = μb + g/(√E[g²] + ε), θ -= α·b.")
    for flag, hint in _RMSPROP_MISTAKES.items():
        mistaken = compare_with_torch(_rmsprop_variant(**{flag: True}), torch_rmsprop, model, batches,
                                      steps=RMSPROP_STEPS)
        if max(abs(a - b) for a, b in zip(mistaken.losses, got.losses)) < 1e-12:
            return not_yet(f"{hint} (your parameters differ from torch's by {got.max_abs_diff:.1e}).")
    step = got.first_step_above(RMSPROP_TOL)
    assert step is not None  # the rule did not agree, so some step was above the tolerance
    return not_yet(f"your parameters differ from torch.optim.RMSprop's by {got.diffs[step - 1]:.1e} after step "
                   f"{step}. Keep E[g²] and b per parameter in state, start them at zero, and compare each line "
                   f"with the exercise's formula for b and section 3's RMSprop for E[g²].")


def check_divergence_threshold(answer: float | None, *, solution: bool = False) -> CheckResult:
    """Exercise 2: the learning rate above which gradient descent diverges on f(θ) = ½ θᵀAθ."""
    eigenvalues = torch.linalg.eigvalsh(torch.tensor(QUADRATIC_A, dtype=torch.float64))
    lam_min, lam_max = eigenvalues.min().item(), eigenvalues.max().item()
    expected = 2 / lam_max
    return check_numbers(
        answer, [expected], names=["α_max"], rtol=1e-3, solution=solution,
        hints=["section 2: along each eigenvector of A one GD step multiplies the error by a factor that depends "
               "on α and that eigenvalue; compute A's eigenvalues, then find how large α may grow before that "
               "factor exceeds 1 in size (which eigenvalue sets the limit?)"],
        why=[f"along each eigenvector GD multiplies the error by (1 − αλ) per step; A has eigenvalues {lam_min:g} "
             f"and {lam_max:g}, and |1 − αλ| < 1 for both needs α < 2/λ_max, so α_max = 2/λ_max = {expected:g}"],
    )


def check_adam_first_step(answer: Sequence[float] | None, *, solution: bool = False) -> CheckResult:
    """Exercise 3: |Δθ| of Adam's first step (gradient 0.5), with and without bias correction."""
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([p], lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    p.grad = torch.full_like(p, ADAM_GRAD)
    optimizer.step()
    with_correction = p.detach().abs().item()
    (b1, b2), g = ADAM_BETAS, ADAM_GRAD
    m, v = (1 - b1) * g, (1 - b2) * g * g
    without = ADAM_LR * m / (v**0.5 + ADAM_EPS)
    return check_numbers(
        answer, [with_correction, without], names=["with bias correction", "without"], rtol=2e-3,
        solution=solution,
        hints=["start from section 3's Adam formulas with m and v at zero and t = 1, and work out what m̂ and v̂ "
               "come to once the bias corrections divide them",
               "the same first step with m and v themselves in place of m̂ and v̂: the factors (1 − β₁) and "
               "(1 − β₂) no longer cancel, and only one of them sits under the square root"],
        why=[f"with bias correction, m̂ = m/(1 − β₁) = g and v̂ = v/(1 − β₂) = g², so |Δθ| = α·g/(|g| + ε) ≈ α = "
             f"{with_correction:.6g}",
             f"without, m = (1 − β₁)g = {m:g} and √v = √(1 − β₂)·|g| = {v**0.5:.6g}, so |Δθ| = α·m/(√v + ε) = "
             f"{without:.6g}, about {without / ADAM_LR:.3g}·α: the first steps would be too large"],
    )
