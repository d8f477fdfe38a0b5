"""Where judges and builds go: N judges per GPU (or N CPU judges), each on cores of its own, builds on the rest."""

from __future__ import annotations

import pytest

from evalkit.schedule.placement import JudgeSlot, PlacementError, host_device, parse_gpus, plan, visible_devices_entry


def test_gpus_all_a_count_or_a_list():
    assert parse_gpus("all", 4) == [0, 1, 2, 3]
    assert parse_gpus("2", 4) == [0, 1]
    assert parse_gpus("3,1", 4) == [3, 1]
    assert parse_gpus(" ALL ", 1) == [0]
    assert parse_gpus("1,", 4) == [1], "a list of one: GPU 1 alone (a trainer keeps GPU 0)"


@pytest.mark.parametrize("spec, visible, says", [
    ("5", 4, "has 4 GPU(s)"),
    ("0", 4, "from 1 to 4"),
    ("0,7", 4, "no GPU 7"),
    ("1,1", 4, "listed twice"),
    ("first", 4, "comma-separated list"),
    ("all", 0, "sees no CUDA GPU"),
])
def test_a_gpu_choice_that_names_no_gpu_says_what_to_give(spec, visible, says):
    with pytest.raises(PlacementError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_gpus(spec, visible)


def test_each_judge_gets_cores_of_its_own_and_builds_the_rest():
    placement = plan("cuda", "all", 1, list(range(16)), 2)
    assert [(s.name, s.gpu, s.cpus) for s in placement.slots] == [("cuda:0", 0, (0, 1)), ("cuda:1", 1, (2, 3))]
    assert placement.build_cpus == tuple(range(4, 16))
    assert not set(placement.build_cpus) & {c for s in placement.slots for c in s.cpus}


def test_cpu_judges_and_a_machine_too_small_to_pin():
    placement = plan("cpu", "all", 3, list(range(8)), 0)
    assert [s.name for s in placement.slots] == ["cpu:0", "cpu:1", "cpu:2"]
    assert placement.build_cpus == (6, 7)
    small = plan("cpu", "all", 2, [0, 1], 0)  # pinning would leave builds no core: nothing is pinned
    assert all(s.cpus == () for s in small.slots) and small.build_cpus == ()


def test_judges_on_a_gpu_are_n_per_gpu_named_by_their_gpu_each_on_cores_of_its_own():
    placement = plan("cuda", "0,2", 2, list(range(16)), 3)
    assert [(s.name, s.gpu, s.cpus, s.gpu_judges) for s in placement.slots] == [
        ("cuda:0", 0, (0, 1), 2), ("cuda:0/1", 0, (2, 3), 2), ("cuda:2", 2, (4, 5), 2), ("cuda:2/1", 2, (6, 7), 2)]
    assert placement.build_cpus == tuple(range(8, 16))
    assert host_device(placement.slots[1], "3,5,7") == "3", "both judges of GPU 0 take its turns under one name"
    assert [(s.name, s.gpu_judges) for s in plan("cuda", "all", 1, list(range(16)), 2).slots] == [
        ("cuda:0", 1), ("cuda:1", 1)], "one judge per GPU unless asked: named as before"
    with pytest.raises(PlacementError, match="at least one judge per GPU"):
        plan("cuda", "all", 0, list(range(16)), 2)
    with pytest.raises(PlacementError, match="at least one judge"):
        plan("cpu", "all", 0, [0, 1], 0)


def test_a_judge_process_sees_only_its_gpu_through_the_inherited_mapping():
    assert visible_devices_entry(1, None) == "1"
    assert visible_devices_entry(1, "3,5") == "5"
    assert visible_devices_entry(0, "GPU-abc, GPU-def") == "GPU-abc"


def test_a_gpu_judges_turn_is_taken_under_the_name_every_process_of_the_host_gives_its_gpu():
    assert host_device(JudgeSlot("cuda:1", "cuda", 1, ()), "3,5") == "5"
    assert host_device(JudgeSlot("cuda:0", "cuda", None, ()), "GPU-ab12,GPU-cd34") == "GPU-ab12"
    assert host_device(JudgeSlot("cuda:1", "cuda", 1, ()), None) == "1"
    assert host_device(JudgeSlot("cpu:0", "cpu", None, (0, 1)), "3,5") is None


@pytest.mark.parametrize("gpus", ["1,", "2", "0,1"])
def test_gpus_asked_for_where_the_judges_run_on_the_cpu_are_an_error_not_a_cpu_run(gpus):
    with pytest.raises(PlacementError, match=f"--gpus {gpus}: asks for GPUs, but the judges run on the CPU"):
        plan("cpu", gpus, 1, [0, 1, 2, 3], 0)
    assert plan("cpu", "all", 1, [0, 1, 2, 3], 0).slots[0].device == "cpu"  # every GPU there is: none, the CPU


def test_builds_default_to_the_build_cores_as_far_as_free_memory_holds_one_each():
    from evalkit.schedule.options import BUILD_PEAK_BYTES, JudgeOptions

    options = JudgeOptions()
    assert options.build_jobs(60, available_bytes=512 * 2**30) == 60  # no fixed cap on a large host
    assert options.build_jobs(60, available_bytes=10 * BUILD_PEAK_BYTES["cpu"]) == 10  # memory bounds it
    assert options.build_jobs(60, available_bytes=0) == 1
    # A CUDA build holds nvcc beside cc1plus: the same memory holds fewer of them.
    assert options.build_jobs(60, available_bytes=40 * 2**30, device="cuda") == 9
    assert options.build_jobs(60, available_bytes=40 * 2**30, device="cpu") == 26
    assert JudgeOptions(jobs=3).build_jobs(60, available_bytes=0) == 3  # --jobs as given


def test_a_pinned_judges_workers_start_on_its_cores_and_the_builds_never_on_another_judges():
    from types import SimpleNamespace

    from evalkit.schedule.engine import Engine

    placement = plan("cuda", "all", 2, list(range(16)), visible_gpus=1)
    engine = SimpleNamespace(placement=placement)
    first, second = placement.slots
    assert Engine._start_cpus(engine, first) == (*first.cpus, *placement.build_cpus)  # type: ignore[arg-type]
    assert not set(Engine._start_cpus(engine, second)) & set(first.cpus)  # type: ignore[arg-type]
    unpinned = plan("cuda", "all", 1, [0, 1], visible_gpus=1)
    assert Engine._start_cpus(SimpleNamespace(placement=unpinned), unpinned.slots[0]) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("device, gpu, station", [("cuda", 0, "process"), ("cpu", None, "direct")])
def test_one_gpu_judge_has_a_process_of_its_own_one_cpu_judge_runs_in_the_callers(monkeypatch, tmp_path, device, gpu,
                                                                                  station):
    # On a GPU, one judge in the scheduler's own (unpinned) process parted by up to 12% from run to run.
    from types import SimpleNamespace

    from evalkit.schedule import backend
    from station_helpers import cpu_station_spec

    monkeypatch.setattr(backend, "ProcessStation", lambda *args, **kwargs: "process")
    monkeypatch.setattr(backend, "DirectStation", lambda *args, **kwargs: "direct")
    local = backend.LocalBackend(1)
    try:
        made = local.station(JudgeSlot(f"{device}:0", device, gpu, (0, 1)), cpu_station_spec(tmp_path), 1,
                             freezer=SimpleNamespace(timing=lambda **kwargs: None), progress=lambda text: None)  # type: ignore[arg-type]
    finally:
        local.close()
    assert made == station
