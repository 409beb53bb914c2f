import json
import socket
import sys
import time

import psutil
import pytest

from course_utils.launch import (
    ProcessResult,
    free_port,
    free_ports,
    read_rank_results,
    run_processes,
    scratch_dir,
    torchrun_command,
)
from course_utils.lessons.lesson06 import cluster_spec, tf_config


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(3)
    assert len(set(ports)) == 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
    with pytest.raises(ValueError):
        free_ports(0)


def test_scratch_dir_is_cleaned_and_validated(tmp_path):
    folder = scratch_dir("05_ddp", base=tmp_path)
    (folder / "old.txt").write_text("x")
    assert scratch_dir("05_ddp", base=tmp_path) == folder and not any(folder.iterdir())
    assert (scratch_dir("05_ddp", base=tmp_path, clean=False) / ".").exists()
    for bad in ("../up", "a/b", ""):
        with pytest.raises(ValueError):
            scratch_dir(bad, base=tmp_path)


def test_run_processes_collects_output_of_each():
    results = run_processes([[sys.executable, "-c", f"print({i}); import sys; sys.exit({i})"] for i in range(2)],
                            timeout=60)
    assert [r.stdout.strip() for r in results] == ["0", "1"] and [r.returncode for r in results] == [0, 1]
    results[0].check()
    with pytest.raises(RuntimeError, match="exited with 1"):
        results[1].check()


def test_timeout_kills_the_whole_process_group():
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(p.pid, flush=True); time.sleep(60)")
    start = time.perf_counter()
    with pytest.raises(TimeoutError, match="did not finish within 2"):
        run_processes([[sys.executable, "-c", code]], timeout=2)
    assert time.perf_counter() - start < 15
    time.sleep(0.5)
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if "time.sleep(60)" in " ".join(p.info["cmdline"] or [])]
    assert not leftovers, leftovers


def test_bad_arguments_are_explained():
    with pytest.raises(ValueError, match="non-empty"):
        run_processes([], timeout=1)
    with pytest.raises(ValueError, match="timeout"):
        run_processes([["true"]], timeout=0)
    with pytest.raises(ValueError, match="master_port"):
        torchrun_command("train.py", nnodes=2, node_rank=1)
    with pytest.raises(ValueError, match="task_type"):
        tf_config({"worker": [1]}, "chief", 0)
    with pytest.raises(ValueError, match="out of range"):
        tf_config({"worker": [1]}, "worker", 1)


def test_tf_config_json():
    config = json.loads(tf_config({"worker": [1111, 2222]}, "worker", 1))
    assert config == {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]},
                      "task": {"type": "worker", "index": 1}}
    assert cluster_spec({"chief": [1], "ps": [3]}) == {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:3"]}
    for bad in ({}, {"worker": []}, {"worker": "12"}):
        with pytest.raises(ValueError, match="non-empty list of ports"):
            cluster_spec(bad)


def test_read_rank_results_sorts_by_rank_and_says_when_there_are_none(tmp_path):
    for name, rank in (("rank1.json", 1), ("rank0.json", 0), ("resumed0.json", 0)):
        (tmp_path / name).write_text(json.dumps({"rank": rank, "RANK": 1 - rank, "file": name}))
    assert [r["file"] for r in read_rank_results(tmp_path)] == ["rank0.json", "rank1.json"]
    assert [r["file"] for r in read_rank_results(tmp_path, key="RANK")] == ["rank1.json", "rank0.json"]
    assert [r["file"] for r in read_rank_results(tmp_path, prefix="resumed")] == ["resumed0.json"]
    with pytest.raises(FileNotFoundError, match="node"):
        read_rank_results(tmp_path, prefix="node")


def test_torchrun_gloo_all_reduce_on_two_processes(tmp_path):
    script = tmp_path / "allreduce.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.tensor([float(dist.get_rank() + 1)])\n"
        "dist.all_reduce(t)\n"
        "import sys\n"  # one write per line: ranks share stdout, and print() writes text and newline apart
        "sys.stdout.write(f\"rank {dist.get_rank()}/{dist.get_world_size()} sum {t.item():g}\\n\")\n"
        "dist.barrier()\n"  # no rank tears its connections down while another still uses them
        "dist.destroy_process_group()\n")
    (result,) = run_processes([torchrun_command(script, nproc_per_node=2)], timeout=120)
    result.check()
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("rank")) == [
        "rank 0/2 sum 3", "rank 1/2 sum 3"]


def test_two_torchrun_nodes_on_one_machine(tmp_path):
    script = tmp_path / "world.py"
    script.write_text("import os, torch.distributed as dist\n"
                      "dist.init_process_group('gloo')\n"
                      "import sys; sys.stdout.write(f'world {dist.get_world_size()} rank {dist.get_rank()}\\n')\n"
                      "dist.barrier()\n"
                      "dist.destroy_process_group()\n")
    port = free_port()
    results = run_processes([torchrun_command(script, nproc_per_node=1, nnodes=2, node_rank=r, master_port=port)
                             for r in range(2)], timeout=120)
    assert sorted(r.check().stdout.strip() for r in results) == ["world 2 rank 0", "world 2 rank 1"]


def test_errors_of_a_torchrun_launch_show_the_rank_that_failed_first(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import torch.distributed as dist\n"
                      "dist.init_process_group('gloo')\n"
                      "if dist.get_rank() == 1:\n"
                      "    raise ValueError('rank 1 has a bug')\n"
                      "dist.barrier()\n")
    (result,) = run_processes([torchrun_command(script, nproc_per_node=2)], timeout=120)
    assert result.returncode != 0 and "ChildFailedError" in result.stderr  # the launcher's summary ends stderr ...
    errors = result.errors                                                  # ... but the cause is what comes first
    assert errors.startswith("rank 1 failed first:\nTraceback") and "ValueError: rank 1 has a bug" in errors
    assert "then rank 0:" in errors and "ChildFailedError" not in errors
    with pytest.raises(RuntimeError, match="ValueError: rank 1 has a bug"):
        result.check()


def test_errors_before_the_process_group_and_without_torchrun():
    launcher = ('Traceback (most recent call last):\n  File "run.py", line 1\n'
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    early = 'Traceback (most recent call last):\n  File "my.py", line 3, in <module>\nNameError: name \'x\'\n'
    assert ProcessResult(("x",), 1, "", early + early + "W1127 agent log\n" + launcher, 1.0).errors == early.strip()
    assert ProcessResult(("x",), 1, "", "usage: error\n" + launcher, 1.0).errors.endswith("ChildFailedError:")
