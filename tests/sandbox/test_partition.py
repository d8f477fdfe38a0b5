"""Builds partitioned off a GPU judge: confined by the kernel to the build cores (a cpuset no build can undo)
and denied the GPU's device files, they run on while the judge times; anything outside the partition is
still frozen, and CPU judges always freeze builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from evalkit.sandbox import freezer as freezer_module
from evalkit.sandbox.freezer import LOOSE, BuildFreezer, _Cgroup, parse_cpu_list
from evalkit.sandbox.processes import MARKER_VARIABLE, process_state
from evalkit.sandbox.untrusted import confine

SPIN = "while True: pass\n"


def test_kernel_cpu_lists_are_read_as_the_kernel_writes_them():
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("5") == {5} and parse_cpu_list("\n") == set()


def _fake_cgroup(folder: Path, effective: str) -> _Cgroup:
    """A cgroup v2 folder as the kernel shows it once ``cpuset.cpus`` is written (no kernel needed)."""
    folder.mkdir()
    (folder / "cpuset.cpus.effective").write_text(effective)
    (folder / "cgroup.procs").write_text("")
    return _Cgroup("cgroup2", folder)


def _freezer_on(monkeypatch, group: _Cgroup) -> BuildFreezer:
    monkeypatch.setattr(freezer_module._Cgroup, "create", classmethod(lambda cls, name: group))
    return BuildFreezer("test")


def test_partitioned_builds_are_neither_frozen_nor_held_back_while_a_judge_times(tmp_path, monkeypatch):
    group = _fake_cgroup(tmp_path / "builds", "2-3\n")
    freezer = _freezer_on(monkeypatch, group)
    assert freezer.partition((2, 3)) and freezer.isolation == "partition (cpuset)"
    assert (group.path / "cpuset.cpus").read_text() == "2,3\n"
    with freezer.timing():
        with freezer.launching():  # a new build starts at once: it cannot reach the judge's cores
            pass
        assert not (group.path / "cgroup.freeze").exists(), "partitioned builds were frozen"
    assert freezer.paused_s() == 0.0  # no build's time limit was paused: none stopped


def test_no_partition_where_the_kernel_grants_other_cores_than_asked(tmp_path, monkeypatch):
    freezer = _freezer_on(monkeypatch, _fake_cgroup(tmp_path / "builds", "0-3\n"))
    assert not freezer.partition((2, 3))
    assert freezer.isolation == "freeze (cgroup2)"


def test_a_build_left_outside_the_partition_is_still_stopped_while_a_judge_times(tmp_path, monkeypatch):
    group = _fake_cgroup(tmp_path / "builds", "2-3\n")
    (group.path / LOOSE / "cgroup.procs").mkdir(parents=True)  # writing the pid fails: the build falls back to signals
    freezer = _freezer_on(monkeypatch, group)
    assert freezer.partition((2, 3))
    marker = f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True,
                            env={**os.environ, **dict([marker.split("=", 1)])})
    try:
        freezer.register(proc.pid, marker)
        time.sleep(0.3)
        with freezer.timing():
            time.sleep(0.1)
            assert process_state(proc.pid) == "T", "a build outside the cpuset ran on during a timing"
        time.sleep(0.1)
        assert process_state(proc.pid) != "T"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("device, abi, partitioned", [("cuda", 5, True), ("cuda", 4, False), ("cpu", 7, False)])
def test_only_a_gpu_judge_with_landlock_for_devices_lets_builds_run_on(monkeypatch, device, abi, partitioned):
    asked: list[tuple[int, ...]] = []

    class Freezer:
        isolation = "test"

        def partition(self, cpus: tuple[int, ...]) -> bool:
            asked.append(cpus)
            return True

    monkeypatch.setattr(freezer_module, "abi_version", lambda: abi)
    freezer_module.partition_builds(Freezer(), device, (2, 3))  # type: ignore[arg-type]
    assert asked == ([(2, 3)] if partitioned else [])


def test_a_builds_confinement_leaves_out_the_gpu_device_files(monkeypatch):
    monkeypatch.setattr(confine.os, "listdir", lambda path: ["null", "nvidia0", "nvidiactl", "nvidia-uvm", "dri"])
    monkeypatch.setattr(confine.os.path, "isdir", lambda path: True)
    judge, build = confine.writable_paths(gpu=True), confine.writable_paths(gpu=False)
    assert {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/dri"} <= set(judge)
    assert not [path for path in build if path.startswith(("/dev/nvidia", "/dev/dri"))]


def _cpuset_available() -> bool:
    root = Path("/sys/fs/cgroup")
    try:
        return "cpuset" in (root / "cgroup.subtree_control").read_text() and os.access(root, os.W_OK)
    except OSError:
        return False


@pytest.mark.skipif(not _cpuset_available(), reason="needs a writable cgroup v2 with the cpuset controller")
def test_a_partitioned_build_cannot_move_itself_onto_the_judges_cores():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}")
    try:
        assert freezer.partition((cores[-1],))
        marker = f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"
        script = ("import os, sys, time\n"
                  "sys.stdin.readline()\n"  # wait until it is in the cgroup
                  "try:\n    os.sched_setaffinity(0, set(range(os.cpu_count())))\nexcept OSError:\n    pass\n"
                  "print(sorted(os.sched_getaffinity(0)), flush=True)\n")
        proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env={**os.environ, **dict([marker.split("=", 1)])})
        freezer.register(proc.pid, marker)
        out, _ = proc.communicate("go\n", timeout=30)
        assert out.strip() == str([cores[-1]])
    finally:
        freezer.close()


CONFINED_GPU_PROBE = """
import errno, fcntl, json, os, sys
from evalkit.sandbox.untrusted.landlock import restrict_writes
from evalkit.sandbox.untrusted.confine import writable_paths
os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # what a hostile build would do first
restrict_writes(writable_paths(gpu=sys.argv[1] == "judge"))
found = {}
try:
    os.close(os.open("/dev/nvidiactl", os.O_RDWR))
    found["open_rw"] = "ok"
except OSError as err:
    found["open_rw"] = errno.errorcode[err.errno]
fd = os.open("/dev/nvidiactl", os.O_RDONLY)
try:
    fcntl.ioctl(fd, (3 << 30) | (0x46 << 8) | 200, 0)  # an NVIDIA control ioctl (its answer does not matter)
    found["ioctl"] = "ok"
except OSError as err:
    found["ioctl"] = errno.errorcode[err.errno]
import torch
found["cuda"] = torch.cuda.is_available()
print(json.dumps(found))
"""


@pytest.mark.cuda
def test_a_build_can_neither_open_nor_drive_the_gpu():
    from evalkit.sandbox.untrusted.landlock import LANDLOCK_ABI_FOR_DEVICES, abi_version

    if abi_version() < LANDLOCK_ABI_FOR_DEVICES:
        pytest.skip("this kernel's Landlock cannot deny device ioctls: builds are frozen instead")
    seen = {}
    for mode in ("build", "judge"):
        out = subprocess.run([sys.executable, "-c", CONFINED_GPU_PROBE, mode], capture_output=True, text=True,
                             timeout=120, cwd=Path(__file__).resolve().parents[2])
        assert out.returncode == 0, out.stderr[-2000:]
        seen[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    print(seen)
    assert seen["build"] == {"open_rw": "EACCES", "ioctl": "EACCES", "cuda": False}
    assert seen["judge"]["open_rw"] == "ok" and seen["judge"]["ioctl"] != "EACCES" and seen["judge"]["cuda"]
