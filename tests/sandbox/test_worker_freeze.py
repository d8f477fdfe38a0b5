"""Freezing a worker stops every process of its sandbox, whatever its process group or session: a child that left
the worker's group with ``setpgid(0, 0)`` (hole E of issue 42: it spun 29 s of CPU while its parent was "frozen")
makes no progress until the worker is thawed, by the cgroup freezer where the sandbox has a cgroup and by signals to
every process of the sandbox where it has none. Progress is what the child writes, never wall time."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from evalkit.sandbox import launcher
from evalkit.sandbox.cgroup import SandboxCgroup
from evalkit.sandbox.launcher import Limits, UntrustedProcess
from evalkit.sandbox.protocol import Op, ReadyClaim, setup_request, simple_request
from process_helpers import children, wait_for

# At import, a child that leaves the worker's process group and counts, writing its count where the test reads it.
LEAVES_THE_GROUP = """
import os

if os.fork() == 0:
    os.setpgid(0, 0)
    fd = os.open("progress", os.O_WRONLY | os.O_CREAT, 0o644)
    count = 0
    while True:
        count += 1
        os.pwrite(fd, b"%20d" % count, 0)

import torch


class ModelNew(torch.nn.Module):
    def forward(self):
        return torch.zeros(1)
"""


def _progress(workdir: Path) -> int:
    try:
        return int((workdir / "progress").read_bytes() or b"0")
    except (OSError, ValueError):
        return 0


@pytest.fixture(params=["cgroup", "signals"])
def freezing(request, monkeypatch) -> str:
    if request.param == "signals":  # the fallback where no cgroup can be made
        monkeypatch.setattr(launcher.SandboxCgroup, "create", classmethod(lambda cls, *args, **kwargs: None))
    else:
        probe = SandboxCgroup.create("probe", f"test-freeze-probe-{uuid.uuid4().hex[:8]}", 2**30, 8)
        if probe is None or probe.freezer is None:
            pytest.skip("no cgroup with a freezer can be made here (cgroup v1 or v2, as root or delegated)")
        probe.remove()
    return request.param


def _loaded_worker(tmp_path: Path) -> UntrustedProcess:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "answer.py").write_text(LEAVES_THE_GROUP)
    limits = Limits(group=f"test-freeze-{uuid.uuid4().hex[:8]}")
    worker = UntrustedProcess(workdir, limits)
    worker.send(setup_request("judge", str(workdir / "answer.py"), "cpu", limits.to_dict(), init_inputs=[]))
    worker.send(simple_request(Op.LOAD))
    assert isinstance(worker.receive(120, "load"), ReadyClaim)
    return worker


def test_a_child_that_left_the_workers_process_group_makes_no_progress_while_frozen(tmp_path, freezing):
    worker = _loaded_worker(tmp_path)
    try:
        wait_for(lambda: _progress(worker.workdir) > 0, 30, "the child to start counting")
        child = next(iter(children(worker.pid)))
        assert os.getpgid(child) == child != worker.pid, "the child did not leave the worker's process group"
        assert worker.freezing == ("signals" if freezing == "signals" else worker.cgroup.freezer.kind)
        for _ in range(3):  # as the judge does around every request
            worker.freeze()  # returns once the sandbox is frozen: the count read now is the last
            frozen_at = _progress(worker.workdir)
            time.sleep(0.3)
            assert _progress(worker.workdir) == frozen_at, "the child counted on while its sandbox was frozen"
            worker.thaw()
            wait_for(lambda: _progress(worker.workdir) > frozen_at, 30, "the child to count again once thawed")
    finally:
        worker.close()
    assert worker.ended()
    assert worker.cgroup is None or not worker.cgroup.freezer.path.exists(), "its freezer cgroup outlived it"


def test_a_worker_that_cannot_be_stopped_is_killed_and_judged_no_further(tmp_path, freezing, monkeypatch):
    """A process in uninterruptible sleep stops only on waking: one still running after the freeze's wait could read
    what the judge lends next (a request's inputs are copied in before the clock starts) or rewrite the outputs the
    judge reads. The judge never goes on with a worker it did not see stopped: it kills it, and the answer times out."""
    worker = _loaded_worker(tmp_path)
    try:
        if freezing == "signals":
            monkeypatch.setattr(launcher, "stop_all", lambda pids, members, wait_s: (set(), False))
        else:
            monkeypatch.setattr(worker.cgroup.freezer, "freeze", lambda wait_s=0.0: False)
        with pytest.raises(launcher.WorkerGone) as gone:
            worker.freeze()
        assert gone.value.kind == "timeout" and "stopped within" in str(gone.value)
        wait_for(lambda: not worker.alive(), 30, "the worker to be killed")
    finally:
        worker.close()
    assert worker.ended()
