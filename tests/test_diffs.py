"""cu.script_diff: a script shown as the change from another."""

from __future__ import annotations

import pytest

from course_utils.diffs import script_diff


def test_only_the_changed_lines_with_a_summary(tmp_path):
    (tmp_path / "one.py").write_text("import torch\n\nmodel = Net()\nloss.backward()\n")
    (tmp_path / "ddp.py").write_text("import torch\nimport torch.distributed as dist\n\nmodel = DDP(Net())\n"
                                     "loss.backward()\n")
    diff = script_diff(tmp_path / "one.py", tmp_path / "ddp.py")
    assert (diff.added, diff.removed) == (2, 1)
    assert repr(diff) == ("one.py → ddp.py: 2 lines added, 1 removed\n"
                          "@@ -1,0 +2 @@\n+import torch.distributed as dist\n"
                          "@@ -3 +4 @@\n-model = Net()\n+model = DDP(Net())")
    page = diff._repr_html_()
    assert "rgba(46,160,67" in page and "rgba(248,81,73" in page and "DDP(Net())" in page
    assert " loss.backward()" in repr(script_diff(tmp_path / "one.py", tmp_path / "ddp.py", context=1))


def test_bad_input_says_what_to_do(tmp_path):
    (tmp_path / "one.py").write_text("x = 1\n")
    with pytest.raises(FileNotFoundError, match="run the cell that writes it"):
        script_diff(tmp_path / "one.py", tmp_path / "missing.py")
    with pytest.raises(ValueError, match="0 or more"):
        script_diff(tmp_path / "one.py", tmp_path / "one.py", context=-1)
