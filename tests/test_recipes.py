"""The shared recipe scripts: copied by name, shown as text, and each distributed one a small change of the last."""

import pytest

import course_utils as cu
from course_utils import recipes


def test_a_recipe_is_copied_into_the_scratch_folder(tmp_path):
    copy = cu.recipe("train_ddp.py", tmp_path / "05")
    assert copy == tmp_path / "05" / "train_ddp.py"
    assert copy.read_text() == (recipes.RECIPES / "train_ddp.py").read_text()
    with pytest.raises(ValueError, match="the recipes are train_ddp.py, train_fsdp.py, train_single.py"):
        cu.recipe("train_tpu.py", tmp_path)


def test_a_script_shows_as_code(tmp_path):
    script = cu.show_script(cu.recipe("train_single.py", tmp_path))
    assert repr(script).startswith("# train_single.py\n\"\"\"Train a small MLP")
    assert script._repr_markdown_().startswith("`train_single.py`\n\n```python\n")
    with pytest.raises(FileNotFoundError, match="run the cell that writes or copies it first"):
        cu.show_script(tmp_path / "missing.py")


@pytest.mark.parametrize("before, after, key_lines", [
    ("train_single.py", "train_ddp.py", ["+    model = DDP(model)", "+    sampler = DistributedSampler(dataset)"]),
    ("train_ddp.py", "train_fsdp.py", ["+        fully_shard(layer)", "+    fully_shard(model)",
                                       "-    model = DDP(model)"]),
])
def test_each_distributed_recipe_is_a_small_change_of_the_last(before, after, key_lines):
    diff = cu.script_diff(recipes.RECIPES / before, recipes.RECIPES / after)
    assert diff.added + diff.removed <= 25  # the change, not a rewrite
    for key in key_lines:
        assert any(line.startswith(key) for line in diff.lines), key
