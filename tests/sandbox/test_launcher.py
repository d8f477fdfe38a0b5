"""The launcher's environment for a worker: scrubbed, and able to import evalkit from a plain checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import evalkit
from evalkit.sandbox.identity import scrubbed_env


def test_the_worker_can_import_this_evalkit_without_it_being_installed(tmp_path):
    # On a GPU machine evalkit often runs from a checkout; the worker then finds it only via PYTHONPATH.
    env = scrubbed_env({}, tmp_path)
    package = Path(env["PYTHONPATH"]) / "evalkit" / "__init__.py"
    assert package.resolve() == Path(evalkit.__file__).resolve()


def test_secrets_do_not_reach_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_TEST_TOKEN", "hunter2")
    env = scrubbed_env({"EXTRA": "1"}, tmp_path)
    assert "EVALKIT_TEST_TOKEN" not in env
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["EXTRA"] == "1"
    assert env.get("PATH") == os.environ.get("PATH")


def test_every_answer_languages_jit_cache_lies_in_the_sandboxs_own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/shared/triton")  # the parent's cache never reaches an answer
    env = scrubbed_env({}, tmp_path)
    for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUTE_DSL_CACHE_DIR", "TILELANG_CACHE_DIR"):
        assert Path(env[name]).is_relative_to(tmp_path), (name, env[name])


def _judged_worker_with_a_build(tmp_path):
    """A worker handed a build-cache entry that holds one built extension, as the judging stage hands it; and the
    entry's folder."""
    import uuid

    from evalkit.sandbox.launcher import Limits, UntrustedProcess
    from evalkit.sandbox.protocol import setup_request

    extensions = tmp_path / "extensions"
    (extensions / "answer_ext").mkdir(parents=True)
    (extensions / "answer_ext" / "answer_ext.so").write_bytes(b"built")
    workdir = tmp_path / "work"
    workdir.mkdir()
    worker = UntrustedProcess(workdir, Limits(group=f"test-{uuid.uuid4().hex[:8]}"),
                              {"TORCH_EXTENSIONS_DIR": str(extensions)})
    worker._hand_over(setup_request("judge", "answer.py", "cpu", {}))
    return worker, extensions


def test_what_a_judged_worker_adds_to_its_builds_folder_goes_with_it(tmp_path):
    # The extension folder is the answer's build-cache entry: its build's files stay; whatever the judged worker
    # wrote there (up to the disk bound) is removed when the worker ends.
    worker, extensions = _judged_worker_with_a_build(tmp_path)
    (extensions / "answer_ext" / "hoard.bin").write_bytes(b"x" * 4096)  # what the judged worker wrote
    (extensions / "planted" / "deep").mkdir(parents=True)
    worker.close()
    assert (extensions / "answer_ext" / "answer_ext.so").read_bytes() == b"built"
    assert sorted(p.name for p in extensions.rglob("*")) == ["answer_ext", "answer_ext.so"]


def test_a_kill_that_lands_late_still_leaves_the_sandbox_known_empty(tmp_path, monkeypatch):
    # SIGKILL lands when the kernel next schedules a process (one reading its imports from disk: once it wakes). On
    # a loaded machine the sandbox looked alive on every look right after the kill, so closing left what the worker
    # added in its build's folder behind (seen in a test run in two processes). Closing now lets each round of
    # kills land before it looks again. Here the sandbox seems alive until that wait has been made.
    from evalkit.sandbox import launcher

    worker, extensions = _judged_worker_with_a_build(tmp_path)
    (extensions / "answer_ext" / "hoard.bin").write_bytes(b"x" * 4096)
    landed: list[set[int]] = []
    members, wait = worker._members, launcher.until_gone
    still_dying = 2**22 + 12345  # above any pid this machine hands out: a process no signal reaches
    monkeypatch.setattr(worker, "_members", lambda fresh=False: members(fresh) if landed else {still_dying})
    monkeypatch.setattr(launcher, "until_gone", lambda pids, within_s: (landed.append(set(pids)), wait(pids, within_s)))
    worker.close()
    assert landed and still_dying in landed[0]
    assert sorted(p.name for p in extensions.rglob("*")) == ["answer_ext", "answer_ext.so"]


def test_one_judged_worker_at_a_time_holds_a_build_cache_entry(tmp_path):
    # Two judges (two GPUs, two processes) judging one answer from one cache: each worker is handed the entry (its
    # uid owns it, torch's load_inline writes a lock there), so the second waits until the first is gone; else the
    # first worker lost its folder mid-judging ("Permission denied: .../lock" on a 4-GPU host).
    import threading
    import uuid

    from evalkit.sandbox.launcher import Limits, UntrustedProcess
    from evalkit.sandbox.protocol import setup_request

    extensions = tmp_path / "cache" / "entry" / "extensions"
    extensions.mkdir(parents=True)
    workers = []
    for n in range(2):
        (tmp_path / f"work{n}").mkdir()
        workers.append(UntrustedProcess(tmp_path / f"work{n}", Limits(group=f"test-{uuid.uuid4().hex[:8]}"),
                                        {"TORCH_EXTENSIONS_DIR": str(extensions)}))
    workers[0]._hand_over(setup_request("judge", "answer.py", "cpu", {}))
    second = threading.Thread(target=workers[1]._hand_over, args=(setup_request("judge", "answer.py", "cpu", {}),))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waiting for the first worker
    workers[0].close()
    second.join(60)
    assert not second.is_alive()
    workers[1].close()
    assert not list(extensions.iterdir())  # nothing either worker left


@pytest.mark.parametrize("host_oom", [False, True], ids=["someone-else", "host-oom-killer"])
def test_a_sigkill_from_outside_evalkit_says_who_may_have_sent_it(tmp_path, monkeypatch, host_oom):
    # Two torch.compile baselines of an H200 run read "killed by signal SIGKILL", which no limit of evalkit's sends
    # (those say why): the row now says whether the kernel's OOM killer ran on the host meanwhile.
    import signal
    import uuid

    from evalkit.sandbox import cgroup, launcher
    from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone

    kills = [100]
    monkeypatch.setattr(launcher, "host_oom_kills", lambda: kills[0])
    monkeypatch.setattr(cgroup, "host_oom_kills", lambda: kills[0])
    worker = UntrustedProcess(tmp_path, Limits(group=f"test-{uuid.uuid4().hex[:8]}"))
    try:
        if host_oom:
            kills[0] += 1
        os.kill(worker.pid, signal.SIGKILL)
        with pytest.raises(WorkerGone) as gone:
            worker.receive(60, "load")
    finally:
        worker.close()
    message = str(gone.value)
    assert "killed by signal SIGKILL" in message
    if host_oom:
        assert "OOM killer ran on the host" in message and "no limit of evalkit's" not in message
    else:
        assert "no limit of evalkit's was reached" in message and "OOM killer" not in message
