"""Lesson 11: the exercise checks (graph breaks, recompilations, break-even), answered by TorchDynamo itself."""

from __future__ import annotations

import pytest
import torch

import course_utils  # noqa: F401  (first: fixes the torch/TensorFlow import order)
from course_utils.checks import ASK_FOR_SOLUTION, NO_ANSWER
from course_utils.lessons import lesson11


def one_break(x):
    y = x.cos()
    print("a side effect")  # one graph break: the code before and after it make two graphs
    return y + 1


def no_break(x):
    return (x * 2).relu()


def test_no_answer_is_not_an_error():
    assert lesson11.check_graph_breaks(None, no_break, torch.ones(3)) is NO_ANSWER
    assert lesson11.check_recompilations(None, shapes=[(2,)], dynamic=False) is NO_ANSWER
    assert lesson11.check_break_even(None, compile_seconds=1, eager_seconds=0.2, compiled_seconds=0.1) is NO_ANSWER


def test_graph_breaks_are_counted_silently(capsys):
    assert lesson11.graphs_and_breaks(no_break, torch.ones(3)) == (1, 0)
    assert lesson11.check_graph_breaks((2, 1), one_break, torch.ones(3))
    verdict = lesson11.check_graph_breaks((1, 0), one_break, torch.ones(3))
    assert not verdict and "count the breaks first (section 2)" in repr(verdict)  # the hints
    assert "Dynamo cannot trace: a side effect such as print" in repr(verdict)
    assert "explain counts" not in repr(verdict) and repr(verdict).endswith(ASK_FOR_SOLUTION)
    for answer in (None, (1, 0)):
        shown = lesson11.check_graph_breaks(answer, one_break, torch.ones(3), solution=True)
        assert shown.is_solution and "explain counts 2 graph(s)" in repr(shown)
        assert "explain counts 1 break(s)" in repr(shown)
    assert "a side effect" not in capsys.readouterr().out  # the check does not print the function's output


def test_recompilations():
    # dynamic=False: shapes 8, 16, 32 are three graphs; the second (8, 4) reuses the first.
    assert lesson11.compilations([(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False) == 3
    # dynamic=None: (8, 4) specialised, (16, 4) recompiles with a symbolic size that 32 reuses.
    assert lesson11.compilations([(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=None) == 2
    assert lesson11.compilations([(8, 4), (16, 4)], dynamic=True) == 1
    assert lesson11.check_recompilations(3, shapes=[(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False)
    verdict = lesson11.check_recompilations(5, shapes=[(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False)
    assert not verdict and "Did you count a shape seen before as a new compilation?" in repr(verdict)
    assert "distinct" not in repr(verdict)
    shown = lesson11.check_recompilations(None, shapes=[(8, 4), (8, 4), (16, 4), (8, 4), (32, 4)], dynamic=False,
                                          solution=True)
    assert shown.is_solution and "3 distinct shape(s), (8, 4), (16, 4), (32, 4): 3 compilation(s)" in repr(shown)
    shown = lesson11.check_recompilations(None, shapes=[(8, 4), (16, 4), (32, 4)], dynamic=None, solution=True)
    assert "recompiles once with that size symbolic" in repr(shown) and "2 compilation(s)" in repr(shown)


def test_break_even():
    # 20 s / (5 ms - 3 ms) = 10,000 calls exactly; 1 s / 0.3 s = 3.33 -> 4 calls.
    assert lesson11.break_even_calls(20, 0.005, 0.003) == 10_000
    assert lesson11.break_even_calls(1, 0.5, 0.2) == 4
    assert lesson11.break_even_calls(1, 0.2, 0.3) is None  # slower when compiled: never pays off
    assert lesson11.check_break_even(10_000, compile_seconds=20, eager_seconds=0.005, compiled_seconds=0.003)
    verdict = lesson11.check_break_even(4_000, compile_seconds=20, eager_seconds=0.005, compiled_seconds=0.003)
    assert not verdict and "same unit (ms against s)" in repr(verdict) and "10,000" not in repr(verdict)
    shown = lesson11.check_break_even(4_000, compile_seconds=20, eager_seconds=0.005, compiled_seconds=0.003,
                                      solution=True)
    assert shown.is_solution and "⌈20 / 0.002⌉ = 10,000 calls" in repr(shown)
    with pytest.raises(ValueError):
        lesson11.break_even_calls(1, 0, 0.1)
    with pytest.raises(ValueError, match="faster"):
        lesson11.check_break_even(1, compile_seconds=1, eager_seconds=0.1, compiled_seconds=0.2)


def chain(x):
    return torch.nn.functional.gelu(2 * x + 1).sum(-1)


def test_tensors_made_on_the_meta_device():
    # 2x, +1 and gelu make three 4 x 8 float32 tensors (128 B each); the sum makes 4 floats (16 B).
    assert lesson11.tensors_made(chain, (4, 8)) == [128, 128, 128, 16]
    assert lesson11.tensors_made(chain, (4, 8), torch.float64) == [256, 256, 256, 32]
    # A view (reshape) and an in-place operator (add_) allocate nothing; relu allocates 4 x 8 x 4 B = 128 B.
    assert lesson11.tensors_made(lambda x: x.reshape(8, 4).add_(1).relu(), (4, 8)) == [128]


def test_remapped_pages():
    # 16,384 x 1,024 float32 = 64 MiB a temporary = 16,384 pages of 4 KiB; three of them: 49,152.
    assert lesson11.remapped_pages(chain, (16384, 1024), page_size=4096) == 49_152
    # 8,192 rows: 32 MiB, exactly glibc's ceiling, still mapped afresh: 3 x 8,192 = 24,576.
    assert lesson11.remapped_pages(chain, (8192, 1024), page_size=4096) == 24_576
    # 4,096 rows: 16 MiB, below the ceiling: the heap may keep them, none counted.
    assert lesson11.remapped_pages(chain, (4096, 1024), page_size=4096) == 0
    # 16 KiB pages (Apple silicon): 64 MiB / 16 KiB = 4,096 pages a temporary.
    assert lesson11.remapped_pages(chain, (16384, 1024), page_size=16384) == 12_288
    with pytest.raises(ValueError, match="page_size"):
        lesson11.remapped_pages(chain, (4, 8), page_size=0)


def test_check_page_faults():
    assert lesson11.check_page_faults(None, chain, shape=(16384, 1024), page_size=4096) is NO_ANSWER
    assert lesson11.check_page_faults(49_152, chain, shape=(16384, 1024), page_size=4096)
    assert lesson11.check_page_faults(49_155, chain, shape=(16384, 1024), page_size=4096)  # + malloc's header pages
    verdict = lesson11.check_page_faults(16_384, chain, shape=(16384, 1024), page_size=4096)
    assert not verdict and "count the pages of 4,096 B that each spans" in repr(verdict)  # the hint
    assert "3 tensor(s) of 32 MiB or more" not in repr(verdict) and "49,152" not in repr(verdict)
    shown = lesson11.check_page_faults(None, chain, shape=(16384, 1024), page_size=4096, solution=True)
    assert shown.is_solution and "3 tensor(s) of 32 MiB or more" in repr(shown) and "49,152" in repr(shown)


def test_graph_pieces_interleave_graphs_and_the_lines_that_broke_them(tmp_path, monkeypatch):
    (tmp_path / "breaking.py").write_text(
        "def with_breaks(x):\n    y = x.sin()\n    print('debugging')  # a side effect\n"
        "    if y.sum() > 0:\n        return y * 2\n    return y - 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from breaking import with_breaks

    explained = torch._dynamo.explain(with_breaks)(torch.ones(4))
    pieces = lesson11.graph_pieces(explained)
    assert pieces == [("graph", "sin"), ("python", "print('debugging')"), ("graph", "sum, gt"),
                      ("python", "if y.sum() > 0:"), ("graph", "mul")]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    lesson11.draw_graph_breaks(pieces, ax, "with_breaks")
    assert [t.get_text() for t in ax.texts if t.get_text()] == [
        "graph 1:\nsin", "Python:\nprint('debugging')", "graph 2:\nsum, gt", "Python:\nif y.sum() > 0:",
        "graph 3:\nmul"]
    plt.close(fig)


def test_record_call_and_the_recompilations_picture():
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    calls = {}
    for dynamic in (False, None):
        torch._dynamo.reset()
        graphs.clear()
        compiled = torch.compile(no_break, backend=keep, dynamic=dynamic)
        calls[f"dynamic={dynamic}"] = [lesson11.record_call(compiled, graphs, torch.ones(n, 3)) for n in (2, 4, 2, 8)]
    torch._dynamo.reset()
    # dynamic=False: one specialised graph per new shape, (2, 3) reused; None: the second size made symbolic.
    assert [c.compiled_for for c in calls["dynamic=False"]] == [(2, 3), (4, 3), None, (8, 3)]
    shapes = [c.compiled_for for c in calls["dynamic=None"]]
    assert shapes[0] == (2, 3) and shapes[2:] == [None, None]
    assert isinstance(shapes[1][0], str) and shapes[1][0].startswith("s") and shapes[1][1] == 3
    with pytest.raises(ValueError, match="graph breaks"):
        graphs.clear()
        lesson11.record_call(torch.compile(one_break, backend=keep), graphs, torch.ones(3))
    torch._dynamo.reset()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    lesson11.draw_recompilations(calls, ax)
    texts = [t.get_text() for t in ax.texts]
    assert texts[:4] == ["compiles for\n(2, 3)", "compiles for\n(4, 3)", "cached graph", "compiles for\n(8, 3)"]
    assert texts[5] == f"compiles for\n({shapes[1][0]}, 3)" and texts[6:] == ["cached graph", "cached graph"]
    assert [t.get_fontweight() for t in ax.texts][4:6] == ["normal", "bold"]  # bold: a symbolic size
    assert len(ax.patches) == 8
    assert [t.get_text() for t in ax.get_yticklabels()] == ["dynamic=False\n3 graphs", "dynamic=None\n2 graphs"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["call 1: (2, 3)", "call 2: (4, 3)", "call 3: (2, 3)",
                                                            "call 4: (8, 3)"]
    with pytest.raises(ValueError, match="same calls"):
        lesson11.draw_recompilations({"a": calls["dynamic=False"], "b": calls["dynamic=None"][:2]}, ax)
    with pytest.raises(ValueError, match="empty"):
        lesson11.draw_recompilations({}, ax)
    plt.close(fig)


def test_memory_traffic_of_the_chain_and_its_picture():
    # (4, 8) float32 = 128 B: mul, add, gelu each read 128 B and write 128 B (an intermediate); sum reads the
    # last intermediate and writes the result, 4 floats = 16 B. Fused: 128 B read, 16 B written.
    traffic = lesson11.memory_traffic(chain, (4, 8))
    assert [(k.name, k.read, k.written, k.read_back, k.written_out) for k in traffic.eager] == [
        ("mul", 128, 128, 0, 128), ("add", 128, 128, 128, 128), ("gelu", 128, 128, 128, 128), ("sum", 128, 16, 128, 0)]
    assert (traffic.fused_read, traffic.fused_written) == (128, 16)
    assert (traffic.eager_bytes, traffic.fused_bytes) == (4 * 128 + 3 * 128 + 16, 144)
    assert traffic.ratio == pytest.approx(912 / 144)
    # The lesson's tensor: 8,192 x 1,024 float32 = 32 MiB; 7 passes of 32 MiB + 32 KiB against 32 MiB + 32 KiB.
    assert lesson11.memory_traffic(chain, (8192, 1024)).ratio == pytest.approx((7 * 1024 + 1) / 1025)
    assert lesson11.memory_traffic(chain, (4, 8), torch.float64).fused_bytes == 288
    with pytest.raises(ValueError, match="no element"):
        lesson11.memory_traffic(chain, (0, 8))
    with pytest.raises(ValueError, match="made no tensor"):
        lesson11.memory_traffic(lambda x: x.view(-1), (4, 8))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    lesson11.draw_memory_traffic(lesson11.memory_traffic(chain, (8192, 1024)), ax)
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t in ("mul", "add", "gelu", "sum", "one fused kernel")] == [
        "mul", "add", "gelu", "sum", "one fused kernel"]
    assert "224 MiB" in texts and "32 MiB" in texts and texts.count("write") == 3  # sum's 32 KiB: too thin to label
    assert sum(p.get_hatch() == "//" for p in ax.patches) == 6  # 3 intermediates, each written and read back
    assert len(ax.patches) == 4 * 2 + 2 and "7.0x" in ax.get_title()  # a read and a write bar a kernel
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eager\n4 kernels", "compiled\n1 kernel"]
    assert ax.get_xlabel().startswith("MiB")
    with pytest.raises(ValueError, match="memory_traffic"):
        lesson11.draw_memory_traffic(lesson11.Traffic((), 0, 0), ax)
    plt.close(fig)
