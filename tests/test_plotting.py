import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import course_utils as cu  # noqa: E402
from course_utils.lessons.lesson01 import autograd_graph_edges, draw_autograd_graph  # noqa: E402
from course_utils.plotting import DPI, plot_curves, set_figure_defaults, show_images  # noqa: E402


def teardown_function():
    plt.close("all")


def test_plot_curves_labels_axes():
    ax = plot_curves({"a": [3, 2, 1], "b": [1, 2, 3]}, xlabel="step", ylabel="loss", logy=True)
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "loss" and ax.get_yscale() == "log"
    assert len(ax.lines) == 2 and ax.figure.dpi <= 100


def test_plot_curves_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        plot_curves({}, xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="required"):
        plot_curves({"a": [1]}, xlabel="", ylabel="y")
    with pytest.raises(ValueError, match="has 2 values"):
        plot_curves({"a": [1, 2]}, xlabel="x", ylabel="y", x=[1, 2, 3])


def test_show_images_grid():
    fig = show_images(torch.zeros(10, 1, 28, 28), labels=[str(i) for i in range(10)], ncols=5)
    assert len(fig.axes) == 10 and fig.dpi == DPI
    with pytest.raises(ValueError, match="shape"):
        show_images(np.zeros((28, 28)))
    with pytest.raises(ValueError, match="labels"):
        show_images(np.zeros((2, 28, 28)), labels=["a"])


def test_autograd_graph_of_x_plus_y_times_z():
    x, y, z = (torch.tensor(v, requires_grad=True) for v in (-2.0, 5.0, -4.0))
    f = (x + y) * z
    edges = autograd_graph_edges(f)
    kinds = sorted((a.split("#")[0], b.split("#")[0]) for a, b in edges)
    assert kinds == [("AddBackward0", "AccumulateGrad"), ("AddBackward0", "AccumulateGrad"),
                     ("MulBackward0", "AccumulateGrad"), ("MulBackward0", "AddBackward0")]
    ax = draw_autograd_graph(f)
    assert {t.get_text() for t in ax.texts} >= {"MulBackward0", "AccumulateGrad\nleaf -4"}


def test_graph_needs_a_grad_fn():
    with pytest.raises(ValueError, match="requires_grad"):
        autograd_graph_edges(torch.ones(2))


def test_figure_defaults_make_small_light_figures():
    set_figure_defaults()  # what cu.setup() does, so that no notebook passes dpi=
    fig = plt.figure()
    assert fig.dpi == 80 and tuple(fig.get_size_inches()) == (5.0, 3.0)
    plt.close(fig)


def test_show_displays_the_figure_with_its_alt_text(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    cu.show(fig, alt='Loss falls from 1 to 0 over one step; "exact" & <small>.')
    (figure,) = shown
    bundle = figure._repr_mimebundle_()
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,iVBOR')
    assert 'alt="Loss falls from 1 to 0 over one step; &quot;exact&quot; &amp; &lt;small&gt;."' in bundle["text/html"]
    assert bundle["text/plain"] == repr(figure) == '[figure] Loss falls from 1 to 0 over one step; "exact" & <small>.'
    assert not plt.fignum_exists(fig.number), "show closes the figure, so that the inline backend shows it once"


def test_show_wants_a_description():
    fig, _ = plt.subplots()
    for alt in ("", "  ", "x" * 601):
        with pytest.raises(ValueError, match="alt"):
            cu.show(fig, alt=alt)
    plt.close(fig)
