"""Lesson 01: the levels of a backward graph, and the Docker facts the lesson's notes state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from course_utils.lessons import lesson01
from course_utils.lessons.lesson01 import _depths

REPO = Path(__file__).resolve().parents[1]


def test_depths_are_longest_paths():
    # a -> b directly and a -> c -> b: b is two edges away along the longer path, so it sits below c
    assert _depths([("a", "b"), ("a", "c"), ("c", "b")], "a") == {"a": 0, "b": 2, "c": 1}


def test_levels_of_the_lecture_graph():
    # f = (x + y) z: the product at the top; the sum and z's AccumulateGrad below it; x's and y's at the bottom
    x, y, z = (torch.tensor(v, requires_grad=True) for v in (-2.0, 5.0, -4.0))
    assert lesson01.graph_levels((x + y) * z) == [
        ["MulBackward0"], ["AddBackward0", "AccumulateGrad"], ["AccumulateGrad", "AccumulateGrad"]]


def test_two_branches_share_their_levels():
    # (sin(a) @ b).sum() + (exp(a) * b).sum(): each level holds one node of each branch; b's AccumulateGrad is
    # reached from the product and the matrix product (depth 3), a's from sin and exp (depth 4)
    a, b = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    g = (a.sin() @ b).sum() + (a.exp() * b).sum()
    assert lesson01.graph_levels(g) == [
        ["AddBackward0"], ["SumBackward0", "SumBackward0"], ["MulBackward0", "MmBackward0"],
        ["ExpBackward0", "AccumulateGrad", "SinBackward0"], ["AccumulateGrad"]]


def test_the_drawing_names_the_leaves_and_its_depths():
    import matplotlib.pyplot as plt

    x, y, z = (torch.tensor(v, requires_grad=True) for v in (-2.0, 5.0, -4.0))
    ax = lesson01.draw_autograd_graph((x + y) * z, leaves={"x": x, "y": y, "z": z}, depths=True)
    texts = {t.get_text() for t in ax.texts}
    assert {"AccumulateGrad\nx = -2", "AccumulateGrad\ny = 5", "AccumulateGrad\nz = -4", "MulBackward0"} <= texts
    assert {"depth 0", "depth 1", "depth 2"} <= texts
    plt.close(ax.figure)


def test_graph_levels_refuses_a_tensor_without_a_graph():
    with pytest.raises(ValueError, match="requires_grad=True"):
        lesson01.graph_levels(torch.ones(2))


def notebook_cell(notebook: str, cell_id: str) -> str:
    cells = json.loads((REPO / "notebooks" / notebook).read_text())["cells"]
    return "".join(next(c for c in cells if c["id"] == cell_id)["source"])


def test_the_docker_notes_say_what_the_dockerfile_and_the_readme_do():
    """Lesson 01's Docker paragraph (cell 33dc52ae) describes the course's image: keep the three in step."""
    notes = notebook_cell("01_autograd.ipynb", "33dc52ae")
    dockerfile = (REPO / "Dockerfile").read_text()
    readme = (REPO / "README.md").read_text()
    assert "ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu" in dockerfile
    assert "PyTorch's CPU index" in notes and "2.14.1+cpu" in notes
    gpu_build = "--build-arg TORCH_INDEX=https://pypi.org/simple"
    assert gpu_build in notes and gpu_build in dockerfile and gpu_build in readme
    assert "--shm-size=1g" in notes and "--shm-size=1g" in dockerfile and "--shm-size=1g" in readme


def test_probability_map_shows_how_much_a_model_varies():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from torch import nn

    points = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    targets = torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    line = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    with torch.no_grad():
        line[0].weight.copy_(torch.tensor([[20.0, 0.0]]))   # p > 0.5 right of x1 = 0.5
        line[0].bias.fill_(-10.0)
    flat = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    with torch.no_grad():
        flat[0].weight.zero_()
        flat[0].bias.zero_()                                 # p = 0.5 everywhere
    fig, (left, right) = plt.subplots(1, 2)
    assert lesson01.draw_probability_map(line, points, targets, left, title="line") > 0.99
    assert lesson01.draw_probability_map(flat, points, targets, right, title="flat") == 0
    assert len(left.collections) > len(right.collections)    # a p = 0.5 line only where p crosses 0.5
    plt.close(fig)
