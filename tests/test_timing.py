import time

import pytest
import torch

from course_utils.timing import (
    Timing,
    format_bytes,
    format_seconds,
    measure,
    measure_interleaved,
    page_faults,
    parallel_efficiency,
    ratio_by_round,
    rotations,
    speedup,
    stopwatch,
)


def test_measure_counts_warmup_and_repeats():
    calls = []
    timing = measure(lambda: calls.append(1), warmup=2, repeats=4)
    assert len(calls) == 6 and len(timing.times) == 4


def test_measure_times_real_work():
    timing = measure(lambda: time.sleep(0.01), warmup=0, repeats=3)
    assert 0.009 < timing.median < 0.2 and timing.min <= timing.median


def test_statistics_and_ratios():
    slow, fast = Timing((2.0, 4.0, 3.0)), Timing((1.0, 1.0, 1.0))
    assert slow.median == 3.0 and fast.stdev == 0.0
    assert fast.speedup_over(slow) == 3.0 and fast.throughput(10) == 10.0
    assert "median of 3" in str(slow)


@pytest.mark.parametrize("kwargs", [{"warmup": -1}, {"repeats": 0}])
def test_measure_rejects_bad_counts(kwargs):
    with pytest.raises(ValueError):
        measure(lambda: None, **kwargs)


def test_measure_rejects_non_callables():
    with pytest.raises(TypeError, match="lambda"):
        measure(42)


def test_stopwatch_freezes_at_exit():
    with stopwatch() as elapsed:
        time.sleep(0.01)
    first = elapsed()
    time.sleep(0.01)
    assert first >= 0.009 and elapsed() == first


def test_speedup_laws():
    assert speedup(4.0, 2.0) == 2.0
    assert parallel_efficiency(3.0, 4) == 0.75
    for bad in (lambda: speedup(0, 1), lambda: parallel_efficiency(1.0, 0)):
        with pytest.raises(ValueError):
            bad()


def test_format_seconds_picks_a_unit():
    assert format_seconds(2.5) == "2.5 s" and format_seconds(0.0123) == "12.3 ms"
    assert format_seconds(4.2e-6) == "4.2 µs" and format_seconds(3e-9) == "3 ns"


def test_measure_interleaved_alternates_candidates_and_rotates_who_goes_first():
    calls = []
    timings = measure_interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b"),
                                   "c": lambda: calls.append("c")}, warmup=1, repeats=3, calls=2)
    rounds = ["aabbcc", "bbccaa", "ccaabb", "aabbcc"]  # no candidate always follows the same neighbour
    assert "".join(calls) == "".join(rounds)
    assert list(timings) == ["a", "b", "c"] and all(len(t.times) == 3 for t in timings.values())


def test_rotations_start_each_round_one_name_further_along():
    assert ["".join(r) for r in rotations("abc", 4)] == ["abc", "bca", "cab", "abc"]
    assert list(rotations(["a"], 0)) == []
    for bad in [lambda: list(rotations([], 1)), lambda: list(rotations("ab", -1))]:
        with pytest.raises(ValueError):
            bad()


def test_measure_interleaved_sets_and_restores_threads():
    before, seen = torch.get_num_threads(), []
    measure_interleaved({"a": lambda: seen.append(torch.get_num_threads())}, warmup=0, repeats=2, threads=1)
    assert seen == [1, 1] and torch.get_num_threads() == before


@pytest.mark.parametrize("fns, kwargs", [({}, {}), ({"a": 1}, {}), ({"a": lambda: None}, {"repeats": 0}),
                                         ({"a": lambda: None}, {"calls": 0}), ({"a": lambda: None}, {"threads": 0})])
def test_measure_interleaved_rejects_bad_arguments(fns, kwargs):
    with pytest.raises(ValueError):
        measure_interleaved(fns, **kwargs)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**20) == "3 MiB"
    assert format_bytes(1.5 * 2**30) == "1.5 GiB"


def test_page_faults_count_first_touches_and_freeze_at_exit():
    import numpy as np

    with page_faults() as faults:
        block = np.ones(64 * 2**20 // 8)  # 64 MiB, written: every page touched for the first time
    touched = faults()
    del block
    assert touched >= 64 * 2**20 // 2**21  # a fault per page: 16,384 of 4 KiB, or 32 huge pages of 2 MiB (numpy asks)
    assert faults() == touched

    with page_faults() as faults:
        pass
    assert 0 <= faults() < 100


def test_ratio_by_round_pairs_each_rounds_timings():
    # a takes twice b's time; the machine is 3x slower from round 3 on, except during a's last timing
    timings = {"a": Timing((2.0, 2.0, 6.0, 6.0, 2.0)), "b": Timing((1.0, 1.0, 3.0, 3.0, 3.0))}
    assert ratio_by_round(timings, "a", "b") == 2.0
    assert timings["a"].median / timings["b"].median == 2 / 3  # the medians compare different moments
    with pytest.raises(KeyError, match="no timing named 'c'"):
        ratio_by_round(timings, "a", "c")
    with pytest.raises(ValueError, match="one measure_interleaved call"):
        ratio_by_round({"a": Timing((1.0,)), "b": Timing((1.0, 2.0))}, "a", "b")
