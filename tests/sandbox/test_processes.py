"""The shared /proc reading: one scan per period for every watcher, a marked process found however it hides."""

import os
import subprocess
import sys
import threading
import time
import uuid

from evalkit.sandbox.processes import MARKER_VARIABLE, ProcessTable, sandbox_members

# Waits for a line on stdin, then replaces itself with a process whose environment has no marker.
_EXEC_CLEAN = ("import os, sys; sys.stdin.readline(); "
               "os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'], {})")


def _marked_process(marker: str, code: str = "import time; time.sleep(60)") -> subprocess.Popen:
    name, value = marker.split("=", 1)
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, name: value},
                            stdin=subprocess.PIPE, start_new_session=True)


def _marker() -> str:
    return f"{MARKER_VARIABLE}=test.{uuid.uuid4().hex}"


def test_watchers_sharing_a_table_read_proc_once_per_period(monkeypatch):
    table = ProcessTable(max_age_s=60.0)
    scans = []
    real_scan = table._scan
    monkeypatch.setattr(table, "_scan", lambda: scans.append(1) or real_scan())
    threads = [threading.Thread(target=table.members, args=(-1, _marker())) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(scans) == 1
    table.members(-1, _marker(), fresh=True)
    assert len(scans) == 2


def test_a_recent_reading_misses_a_new_process_and_a_fresh_one_finds_it():
    marker = _marker()
    table = ProcessTable(max_age_s=60.0)
    assert table.members(-1, marker) == []
    proc = _marked_process(marker)
    try:
        assert table.members(-1, marker) == []  # the reading is recent: a watchdog may wait a period
        deadline = time.monotonic() + 10
        while proc.pid not in table.members(-1, marker, fresh=True):  # a kill may not
            assert time.monotonic() < deadline, "a fresh reading never found the marked process"
        assert sandbox_members(-1, marker) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert table.members(-1, marker, fresh=True) == []


def test_a_marked_process_stays_a_member_after_clearing_its_environment():
    marker = _marker()
    table = ProcessTable(max_age_s=0.0)
    proc = _marked_process(marker, _EXEC_CLEAN)
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in table.members(-1, marker, fresh=True):
            assert time.monotonic() < deadline, "the marked process was never found"
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        while b"\0import time" not in open(f"/proc/{proc.pid}/cmdline", "rb").read():
            assert time.monotonic() < deadline, "the process never replaced itself"
            time.sleep(0.01)
        assert sandbox_members(-1, marker) == []  # its environment no longer says where it came from
        assert table.members(-1, marker, fresh=True) == [proc.pid]  # but the table saw it marked
    finally:
        proc.kill()
        proc.wait()


def test_a_process_read_unmarked_before_its_exec_gave_it_a_marker_is_found_after():
    # Between its fork and its exec, a sandbox's first process shows its parent's environment, with no marker; a
    # table that took that for good (it reads a settled process's environment once) would never find it.
    marker = _marker()
    name, value = marker.split("=", 1)
    code = ("import os, sys; sys.stdin.readline(); os.execve(sys.executable, [sys.executable, '-c', "
            f"'import time; time.sleep(60)'], {{**os.environ, {name!r}: {value!r}}})")
    table = ProcessTable(max_age_s=0.0)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.pid not in table.members(-1, marker, fresh=True)  # read while it has no marker yet
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 10
        while proc.pid not in table.members(-1, marker, fresh=True):
            assert time.monotonic() < deadline, "the process the table read unmarked was never found once marked"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()


def test_a_marker_prefix_finds_every_sandbox_of_a_group():
    group = f"test-{uuid.uuid4().hex[:8]}"
    procs = [_marked_process(f"{MARKER_VARIABLE}={group}.{uuid.uuid4().hex}") for _ in range(2)]
    other = _marked_process(f"{MARKER_VARIABLE}={group}x.{uuid.uuid4().hex}")
    try:
        deadline = time.monotonic() + 10
        while len(sandbox_members(-1, f"{MARKER_VARIABLE}={group}.")) < 2:
            assert time.monotonic() < deadline
        assert sorted(sandbox_members(-1, f"{MARKER_VARIABLE}={group}.")) == sorted(p.pid for p in procs)
    finally:
        for proc in procs + [other]:
            proc.kill()
            proc.wait()


def test_a_sandboxs_folders_are_measured_in_bytes_held_and_files_without_following_links(tmp_path):
    from evalkit.sandbox.remains import folder_usage

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "big").write_bytes(b"x" * 100_000)
    for i in range(5):
        (tmp_path / f"f{i}").write_text("")
    (tmp_path / "elsewhere").symlink_to("/usr")
    used, files = folder_usage([tmp_path], max_files=1000)
    assert files == 7 and 100_000 <= used < 200_000
    assert folder_usage([tmp_path], max_files=2)[1] >= 3, "counting stops once over the limit"


def test_a_wait_looks_again_at_once_before_it_sleeps_in_growing_pauses():
    """A freeze or a stop is looked at without a sleep between looks for its first ``SPIN_S``, so the judge's clock
    reads it within a look's microseconds, not at the end of a sleep that overshoots; later looks back off."""
    import inspect
    from itertools import islice

    from evalkit.sandbox.processes import SPIN_S, pauses

    assert SPIN_S >= 1e-3 and inspect.signature(pauses).parameters["spin_s"].default == SPIN_S
    assert list(islice(pauses(spin_s=60.0), 3)) == [0.0, 0.0, 0.0]
    assert list(islice(pauses(spin_s=0.0), 8)) == [20e-6, 40e-6, 80e-6, 160e-6, 320e-6, 640e-6, 1e-3, 1e-3]


def test_a_pause_of_nothing_yields_the_cpu_and_sleeps_not(monkeypatch):
    """While the judge looks again at once, a loaded machine still gives the process it waits for the CPU."""
    from evalkit.sandbox import processes

    calls: list[str] = []
    monkeypatch.setattr(processes.os, "sched_yield", lambda: calls.append("yield"))
    monkeypatch.setattr(processes.time, "sleep", lambda s: calls.append(f"sleep {s}"))
    processes.rest(0.0)
    processes.rest(20e-6)
    assert calls == ["yield", "sleep 2e-05"]
