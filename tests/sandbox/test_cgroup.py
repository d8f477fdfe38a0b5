"""A cgroup per sandbox, where the machine allows one: memory the resident-size poll cannot see (a memfd written
and never mapped) is bounded by the kernel, and a process that left the sandbox's session with a clean
environment (the marker sweep cannot find it) is still killed with it."""

from __future__ import annotations

import errno
import os
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.judge import builder
from evalkit.sandbox.cgroup import SandboxCgroup, remove_run_cgroups
from evalkit.sandbox.launcher import Limits


def _limits(**changes) -> Limits:
    return replace(Limits(group=f"test-cgroup-{uuid.uuid4().hex[:8]}"), **changes)


@pytest.fixture()
def cgroups() -> None:
    probe = SandboxCgroup.create("probe", f"test-cgroup-probe-{uuid.uuid4().hex[:8]}", 2**30, 8)
    if probe is None:
        pytest.skip("no cgroup can be made here (cgroup v1 or v2, as root or delegated)")
    probe.remove()


MEMFD = """
import os, time
fd = os.memfd_create("hoard")
chunk = b"x" * 2**20
for _ in range({mib}):
    os.write(fd, chunk)  # never mapped: not in any process's resident size
time.sleep(60)
"""


def test_memory_in_a_memfd_counts_against_the_sandbox(tmp_path, cgroups):
    limits = _limits(memory_bytes=1536 * 2**20)
    outcome = builder.build(MEMFD.format(mib=2000), tmp_path / "cache", "cpu", 120, limits)
    assert outcome.status == "crash", outcome
    assert "memory" in outcome.message and "GiB" in outcome.message, outcome.message


ESCAPE = """
import subprocess
# A new session, and an environment without the sandbox's marker: the /proc sweep cannot tell it is the sandbox's.
subprocess.Popen(["setsid", "env", "-i", "sleep", "{seconds}"], start_new_session=True)
raise RuntimeError("left a process behind")
"""


def _running(argv_tail: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip().endswith(
                    argv_tail.encode()):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_a_process_that_left_the_session_and_the_marker_dies_with_its_sandbox(tmp_path, cgroups):
    seconds = f"{time.time() % 1000 + 1000:.3f}"  # a sleep no other test runs
    limits = _limits()
    outcome = builder.build(ESCAPE.format(seconds=seconds), tmp_path / "cache", "cpu", 120, limits)
    assert outcome.status == "import_failed" and "left a process behind" in outcome.message, outcome
    deadline = time.monotonic() + 5
    while _running(f"sleep {seconds}") and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _running(f"sleep {seconds}")
    for pid in left:
        os.kill(pid, 9)
    assert not left, "a process that left the sandbox's session and marker outlived it"
    remove_run_cgroups(limits.group)


def test_a_sandbox_gets_no_more_cpu_time_than_the_cores_it_was_pinned_to(cgroups):
    made = SandboxCgroup.create("cpu-bound", f"test-cgroup-{uuid.uuid4().hex[:8]}", 2**30, 4, cpu_cores=2)
    try:
        if "cpu" not in made.paths:
            pytest.skip("no cpu controller for sandbox cgroups here: CPU is bounded by pinning and freezing only")
        path = made.paths["cpu"]
        quota = ((path / "cpu.max").read_text().split()[0] if made.kind == "cgroup2"
                 else (path / "cpu.cfs_quota_us").read_text().strip())
        assert quota == "200000" and "cpu time" in made.walls  # two cores' worth of each 100 ms period
    finally:
        made.remove()


@pytest.mark.parametrize("kind, usage_file, own_key", [("cgroup1", "memory.usage_in_bytes", "rss"),
                                                      ("cgroup2", "memory.current", "anon")])
def test_a_sandbox_pressing_its_limit_with_memory_of_its_own_is_cornered(tmp_path, kind, usage_file, own_key):
    made = SandboxCgroup(kind, {"memory": tmp_path})
    limit = 1000 * 2**20

    def reading(usage_mib: int, own_mib: int) -> bool:
        (tmp_path / usage_file).write_text(f"{usage_mib * 2**20}\n")
        (tmp_path / "memory.stat").write_text(f"{own_key} {(own_mib - 10) * 2**20}\nfile 7\nshmem {10 * 2**20}\n")
        return made.cornered(made.memory_bytes(), limit)

    assert reading(usage_mib=995, own_mib=950)  # at the limit with nothing of its own to give back
    assert not reading(usage_mib=960, own_mib=950)  # below it: it may grow no further, and need not
    assert not reading(usage_mib=1000, own_mib=500)  # at it with page cache, which the kernel reclaims


CORNERED = """
limit, chunk, hoard = {limit}, 16 * 2**20, []
with open("churn.bin", "wb") as out:  # page cache: all the kernel can take back once the memory below is held
    for _ in range(32):
        out.write(b"x" * chunk)
def anon():
    for line in open("/proc/self/status"):
        if line.startswith(("RssAnon:", "RssShmem:")):
            yield int(line.split()[1]) * 1024
while sum(anon()) < 0.92 * limit:  # and its files resident (torch: under 100 MiB) under the limit
    hoard.append(bytearray(chunk))
while True:  # at its limit, but the kernel has page cache to reclaim: it never kills this process
    with open("churn.bin", "rb") as churn:
        while churn.read(chunk):
            pass
"""


def test_a_sandbox_held_at_its_memory_limit_is_killed_not_left_to_thrash(tmp_path, cgroups):
    limit = 2 * 2**30
    outcome = builder.build(CORNERED.format(limit=limit), tmp_path / "cache", "cpu", 120, _limits(memory_bytes=limit))
    assert outcome.status == "crash", outcome  # left to thrash, it reached its 120 s limit: "timeout"
    assert "held at the limit" in outcome.message, outcome.message


@pytest.mark.parametrize("code", [errno.ENOENT, errno.ENODEV])
def test_a_freezer_removed_meanwhile_has_nothing_to_freeze_or_thaw(tmp_path, monkeypatch, code):
    # ENODEV: a run's clean-up thawed a sandbox's freezer while the sandbox's own kill removed it (CI, test_api).
    from evalkit.sandbox.cgroup import CgroupFreezer

    def gone(self, *args, **kwargs):
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(Path, "write_text", gone)
    freezer = CgroupFreezer("cgroup2", tmp_path)
    freezer.thaw()
    assert freezer.freeze(wait_s=0.0)


def test_a_freezer_that_cannot_be_written_for_another_reason_says_so(tmp_path, monkeypatch):
    from evalkit.sandbox.cgroup import CgroupFreezer

    def refused(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "refused")
    monkeypatch.setattr(Path, "write_text", refused)
    with pytest.raises(PermissionError):
        CgroupFreezer("cgroup2", tmp_path).thaw()
