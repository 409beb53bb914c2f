"""A real TensorBoard server over logs written the lesson's way, queried through its HTTP API.

The logs come from a tiny run of the lesson's code path (the lecture's CNN, one SummaryWriter per
configuration, add_image / add_graph / add_scalar / add_histogram / add_hparams with run_name="."),
the server is the venv's own ``tensorboard`` on 127.0.0.1 and a free port, and it is stopped by its
own process id in a ``finally`` block. Every wait is bounded.
"""

from __future__ import annotations

import warnings

import psutil
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import course_utils as cu  # first: fixes the torch/TensorFlow import order
import tensorboard_server as tb

CONFIGS = [{"lr": 0.01, "batch_size": 8, "shuffle": True}, {"lr": 0.001, "batch_size": 16, "shuffle": False}]
SCALAR_TAGS = {"Loss", "Number Correct", "Accuracy"}
METRICS = {"hparam/loss", "hparam/accuracy"}


class Network(nn.Module):  # the lesson's CNN
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 12, 5)
        self.fc1 = nn.Linear(12 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 60)
        self.out = nn.Linear(60, 10)

    def forward(self, t):
        t = F.max_pool2d(F.relu(self.conv1(t)), 2)
        t = F.max_pool2d(F.relu(self.conv2(t)), 2)
        t = F.relu(self.fc1(t.flatten(1)))
        return self.out(F.relu(self.fc2(t)))


def run_name(lr, batch_size, shuffle):
    return f"lr={lr}_bs={batch_size}_shuffle={shuffle}"


def write_sweep(runs_dir):
    """Two configurations, two epochs each, on 32 random images: the lesson's logging, in miniature."""
    from torch.utils.tensorboard import SummaryWriter
    from torchvision.utils import make_grid

    images_all, labels_all = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
    for config in CONFIGS:
        torch.manual_seed(0)
        model = Network()
        optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
        with SummaryWriter(log_dir=runs_dir / run_name(**config)) as writer:
            writer.add_image("images", make_grid(images_all[:8], normalize=True))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # add_graph traces with the deprecated torch.jit
                writer.add_graph(model, images_all[:2])
            for epoch in range(2):
                total_loss, correct = 0.0, 0
                order = torch.randperm(32) if config["shuffle"] else torch.arange(32)
                for start in range(0, 32, config["batch_size"]):
                    idx = order[start:start + config["batch_size"]]
                    preds = model(images_all[idx])
                    loss = F.cross_entropy(preds, labels_all[idx])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total_loss += loss.item() * len(idx)
                    correct += preds.argmax(1).eq(labels_all[idx]).sum().item()
                writer.add_scalar("Loss", total_loss / 32, epoch)
                writer.add_scalar("Number Correct", correct, epoch)
                writer.add_scalar("Accuracy", correct / 32, epoch)
                for name, weight in model.named_parameters():
                    writer.add_histogram(name, weight, epoch)
            writer.add_hparams(config, {"hparam/loss": total_loss / 32, "hparam/accuracy": correct / 32}, run_name=".")


@pytest.mark.timeout(300)
def test_real_tensorboard_serves_runs_scalars_and_hparams(tmp_path):
    runs_dir = tmp_path / "runs"
    write_sweep(runs_dir)
    expected_runs = {run_name(**c) for c in CONFIGS}

    server = tb.start_tensorboard(runs_dir, port=cu.free_port(), timeout=120)
    pid = server.pid
    try:
        assert set(tb.get_json(server.url + "/data/runs")) == expected_runs

        tags = tb.get_json(server.url + "/data/plugin/scalars/tags")
        assert set(tags) == expected_runs
        for run in expected_runs:
            assert SCALAR_TAGS | METRICS <= set(tags[run])
        loss = tb.get_json(server.url + f"/data/plugin/scalars/scalars?run={run_name(**CONFIGS[0])}&tag=Loss")
        assert [step for _, step, _ in loss] == [0, 1]

        histograms = tb.get_json(server.url + "/data/plugin/histograms/tags")
        assert "conv1.weight" in histograms[run_name(**CONFIGS[0])]

        experiment = tb.post_json(server.url + "/data/plugin/hparams/experiment", {"experimentName": ""})
        assert {h["name"] for h in experiment["hparamInfos"]} == {"lr", "batch_size", "shuffle"}
        assert {m["name"]["tag"] for m in experiment["metricInfos"]} == METRICS

        groups = tb.post_json(server.url + "/data/plugin/hparams/session_groups", {
            "experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS"],
            "colParams": [], "startIndex": 0, "sliceSize": 100})
        sessions = {g["name"]: g for g in groups["sessionGroups"]}
        assert set(sessions) == expected_runs
        for config in CONFIGS:
            group = sessions[run_name(**config)]
            assert group["hparams"]["lr"] == pytest.approx(config["lr"])
            assert group["hparams"]["batch_size"] == config["batch_size"]
            assert {m["name"]["tag"] for m in group["metricValues"]} == METRICS
    finally:
        returncode = tb.stop_tensorboard(server)

    assert server.process.poll() is not None, f"tensorboard (pid {pid}) still running, exit status {returncode}"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(runs_dir) in " ".join(p.info["cmdline"] or [])]
    assert not leftovers, f"processes still serving {runs_dir}: {leftovers}"
