import pytest
import torch
from torch import nn
from torch.nn.utils import prune

from course_utils.training import accuracy, train_classifier


def small_problem():
    torch.manual_seed(0)
    x = torch.randn(64, 1, 6, 6)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    return net, x, y


def test_training_learns_and_keeps_pruned_weights_at_zero():
    net, x, y = small_problem()
    prune.l1_unstructured(net[2], "weight", amount=0.5)
    before = accuracy(net, x, y, batch_size=10)
    losses = train_classifier(net, x, y, epochs=20, batch_size=16, lr=1e-2)
    assert len(losses) == 20 * 4 and losses[-1] < losses[0]
    assert accuracy(net, x, y) > max(before, 0.8) and net.training
    assert int((net[2].weight == 0).sum()) == 48


def test_fractional_epochs_and_uneven_batches():
    net, x, y = small_problem()
    assert len(train_classifier(net, x, y, epochs=0.5, batch_size=16)) == 2
    assert len(train_classifier(net, x, y, epochs=1.5, batch_size=24)) == 3 + 2  # 3 batches per epoch


def test_same_seed_same_losses_and_a_given_optimizer_is_used():
    first = train_classifier(*small_problem(), epochs=2, batch_size=16, seed=3)
    assert train_classifier(*small_problem(), epochs=2, batch_size=16, seed=3) == first
    net, x, y = small_problem()
    sgd = torch.optim.SGD(net.parameters(), lr=0.0)
    losses = train_classifier(net, x, y, optimizer=sgd, epochs=1, batch_size=64)
    assert losses == train_classifier(net, x, y, optimizer=sgd, epochs=1, batch_size=64)  # lr 0: nothing moves


def test_accuracy_restores_the_mode():
    net, x, y = small_problem()
    net.eval()
    accuracy(net, x, y)
    assert not net.training


def test_bad_input_is_explained():
    net, x, _ = small_problem()
    y3 = torch.zeros(3, dtype=torch.long)
    for call in (lambda: train_classifier(net, x, y3), lambda: accuracy(net, x, y3)):
        with pytest.raises(ValueError, match="as many labels"):
            call()
    y = torch.zeros(64, dtype=torch.long)
    with pytest.raises(ValueError, match="epochs and lr must be positive"):
        train_classifier(net, x, y, epochs=0)
    with pytest.raises(ValueError, match="batch_size"):
        accuracy(net, x, y, batch_size=0)
    with pytest.raises(TypeError, match="tensors"):
        accuracy(net, x.numpy(), y)
