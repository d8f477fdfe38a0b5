"""The build cache survives a build killed mid-compile: torch's own lock file left behind is cleared (no later
build of that code waits on it until its time limit), the same code built twice at once builds once, and a cache
reached through a link is found where it was built."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import FIXTURES
from process_helpers import wait_for
from evalkit.intake.triage import triage
from evalkit.judge.builder import build, build_key
from evalkit.schedule.options import default_limits

CODE = (FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py").read_text()


def test_a_cache_reached_through_a_link_finds_its_builds_where_they_were_built(prebuilt: Path, tmp_path: Path):
    # torch's ninja file records the sources' absolute paths: loaded from another path, a build compiles again
    # (inside the judging stage's load limit), so the build stage resolves the link and names the folder it built in
    link = tmp_path / "builds"
    link.symlink_to(prebuilt, target_is_directory=True)
    code = triage(CODE).code
    outcome = build(code, link, "cpu", 240, default_limits("cpu", 2.0))
    assert outcome.status == "ok" and outcome.cached, outcome
    assert Path(outcome.extension_dir) == prebuilt.resolve() / build_key(code, "cpu") / "extensions"


@pytest.mark.slow  # a cold build, twice over
def test_a_lock_left_by_a_killed_build_does_not_stall_the_next(tmp_path: Path):
    stale = tmp_path / build_key(CODE, "cpu") / "extensions" / "conv2d" / "lock"
    stale.parent.mkdir(parents=True)
    stale.write_text("")  # what torch leaves when its build process is killed while compiling
    outcome = build(CODE, tmp_path, "cpu", 240, default_limits("cpu", 2.0))
    assert outcome.status == "ok", outcome.message  # had it waited on the lock, the build limit would have ended it
    assert not stale.exists()


@pytest.mark.slow  # a cold build, with a second waiting on it
def test_the_same_code_twice_at_once_is_built_once(tmp_path: Path):
    limits = default_limits("cpu", 2.0)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: build(CODE, tmp_path, "cpu", 240, limits), range(2)))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert sorted(o.cached for o in outcomes) == [False, True]


def test_a_hostile_build_can_neither_poison_the_shared_baselines_nor_aim_the_lock_cleanup_elsewhere(tmp_path):
    """A build imports the answer: it may try to rewrite the baseline cache beside the builds, or the remembered
    probes of the sandbox user (to spare a run the probe), or plant a link named like an extension folder so that
    the next build's stale-lock cleanup deletes a file elsewhere."""
    cache = tmp_path / "cache"
    (cache / "baselines.json").parent.mkdir(parents=True)
    (cache / "baselines.json").write_text("{}")
    (cache / "sandbox-identity.json").write_text('{"passed": []}')
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "lock").write_text("not evalkit's")
    hostile = f'''import os, pathlib
extensions = pathlib.Path(os.environ["TORCH_EXTENSIONS_DIR"])
cache = extensions.parents[2]  # <cache>/builds/<key>/extensions
for target in (cache / "baselines.json", cache / "sandbox-identity.json", extensions.parent / ".evalkit-build-lock"):
    try:
        target.write_text('{{"poisoned": true}}')
    except OSError:
        pass
extensions.mkdir(parents=True, exist_ok=True)
os.symlink({str(victim)!r}, extensions / "planted")
raise RuntimeError("fail the build, so that the next build of this code cleans up again")
'''
    limits = default_limits("cpu", 2.0)
    assert build(hostile, cache / "builds", "cpu", 120, limits).status != "ok"
    build(hostile, cache / "builds", "cpu", 120, limits)  # its cleanup meets the planted link
    assert (cache / "baselines.json").read_text() == "{}"
    assert (cache / "sandbox-identity.json").read_text() == '{"passed": []}'
    assert (victim / "lock").read_text() == "not evalkit's"


HANGS_IN_INIT = """
import time
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        while True:  # never finishes, compiles nothing
            time.sleep(0.1)
"""


def test_a_build_that_hangs_without_compiling_is_stopped_long_before_its_limit(tmp_path: Path):
    # The build limit is 900 s; the constructor hangs with no compiler running: stopped after idle_s (here 3 s),
    # as the judging stage would stop it at its load limit. A build that compiles is not: every other build of
    # the suite runs with the default BUILD_IDLE_S.
    outcome = build(HANGS_IN_INIT, tmp_path, "cpu", 900, default_limits("cpu", 2.0), init_inputs=[4], idle_s=3.0)
    assert outcome.status == "timeout", outcome
    assert "3 s without compiling anything" in outcome.message and "ModelNew" in outcome.message


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def test_a_compiler_is_told_by_its_process_name(tmp_path: Path):
    import subprocess

    from evalkit.sandbox.processes import compiling

    ninja = tmp_path / "ninja"  # what torch's extension builder runs, named as the kernel sees it (comm)
    ninja.symlink_to("/bin/sleep")
    running = subprocess.Popen([str(ninja), "30"])
    other = subprocess.Popen(["sleep", "30"])
    try:
        # Popen returns once a vforked child is in exec, a moment before the kernel renames it (128 of 300 reads
        # found the parent's name on this machine): wait for each name first.
        for process, name in ((running, "ninja"), (other, "sleep")):
            wait_for(lambda: _comm(process.pid) == name, 30, f"process {process.pid} to be named {name}")
        assert compiling({running.pid}) and not compiling({other.pid})
    finally:
        for process in (running, other):
            process.kill()
            process.wait()


def test_a_cached_build_costs_its_row_nothing_and_keeps_what_it_once_took():
    # A warm reward step's stage seconds summed the builds of earlier steps (264 s of building in a 30 s step).
    from evalkit.judge.builder import BuildOutcome
    from evalkit.judge.verdicts import built_row
    from evalkit.records import Submission

    early = triage(CODE)
    submission = Submission("r", "linear_relu", "s", "s.py", CODE)
    fresh = built_row(submission, early, BuildOutcome(status="ok", seconds=12.5), "cpu")
    cached = built_row(submission, early, BuildOutcome(status="ok", seconds=12.5, cached=True), "cpu")
    assert fresh.stage_seconds["build_s"] == 12.5
    assert cached.stage_seconds["build_s"] == 0.0 and cached.build["seconds"] == 12.5 and cached.build["cached"]


def _fake_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Builds that write a made-up extension instead of compiling: the list grows by one per build run."""
    from evalkit.judge import builder

    runs: list[str] = []

    def fake(code, build_dir, *args, **kwargs):
        runs.append(code)
        extension = build_dir / "extensions" / "ext"
        extension.mkdir(parents=True, exist_ok=True)
        (extension / "ext.so").write_bytes(b"\x7fELF honest kernel")
        (extension / "main.cpp").write_text("// the answer's source\n")
        return builder.BuildOutcome("ok", 0.1, extension_dir=str(build_dir / "extensions"))

    monkeypatch.setattr(builder, "_run_build", fake)
    monkeypatch.setattr(builder.torch_headers, "start", lambda *args, **kwargs: None)
    return runs


def test_a_cached_build_rewritten_after_it_was_built_is_built_again(tmp_path: Path, monkeypatch, caplog):
    # A judged worker owns its build's extension folder while it runs: what it adds is removed after it, and what it
    # rewrites (same size, same time stamp), replaces by a link or removes is caught the next time the build is used.
    import os

    runs = _fake_builds(monkeypatch)
    limits = default_limits("cpu", 2.0)
    first = build("code", tmp_path, "cpu", 60, limits)
    extension = Path(first.extension_dir) / "ext"
    (extension / "lock").write_text("")  # what an honest load may leave behind is not the build's
    (extension / "added.txt").write_text("added by a worker")  # removed after it by the launcher, not counted here
    assert build("code", tmp_path, "cpu", 60, limits).cached and len(runs) == 1
    so = extension / "ext.so"
    stamp = so.stat()
    so.write_bytes(b"\x7fELF poisoned kern")  # the same size
    os.utime(so, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with caplog.at_level("WARNING", logger="evalkit.judge.builder"):
        again = build("code", tmp_path, "cpu", 60, limits)
    assert not again.cached and len(runs) == 2 and "ext/ext.so" in caplog.text
    assert so.read_bytes() == b"\x7fELF honest kernel" and not (extension / "added.txt").exists()
    assert build("code", tmp_path, "cpu", 60, limits).cached and len(runs) == 2
    for tamper in (lambda: (so.unlink(), so.symlink_to("/dev/null")), lambda: (extension / "main.cpp").unlink()):
        tamper()
        assert not build("code", tmp_path, "cpu", 60, limits).cached
    assert len(runs) == 4 and build("code", tmp_path, "cpu", 60, limits).cached


def test_a_build_cached_before_manifests_is_recorded_as_it_is(tmp_path: Path, monkeypatch):
    from evalkit.judge.builder import BUILD_MANIFEST

    runs = _fake_builds(monkeypatch)
    limits = default_limits("cpu", 2.0)
    first = build("code", tmp_path, "cpu", 60, limits)
    manifest = Path(first.extension_dir).parent / BUILD_MANIFEST
    manifest.unlink()  # as an older evalkit left its cache
    assert build("code", tmp_path, "cpu", 60, limits).cached and manifest.exists() and len(runs) == 1


def test_a_build_leaving_a_pipe_or_a_file_it_cannot_read_is_recorded_not_stuck(tmp_path: Path, monkeypatch):
    # What a build leaves in its folder is the answer's doing: a FIFO is recorded by its kind, never opened (it would
    # block the builder); a file the builder cannot read records the outcome all the same, and counts as changed.
    import os

    from evalkit.judge import entry_manifest

    runs = _fake_builds(monkeypatch)
    limits = default_limits("cpu", 2.0)
    first = build("code", tmp_path, "cpu", 60, limits)
    os.mkfifo(Path(first.extension_dir) / "ext" / "pipe")
    (Path(first.extension_dir).parent / "extensions.json").unlink()  # recorded again, now with the pipe in it
    assert build("code", tmp_path, "cpu", 60, limits).cached and build("code", tmp_path, "cpu", 60, limits).cached
    assert len(runs) == 1

    def unreadable(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(entry_manifest, "open", unreadable, raising=False)
    (Path(first.extension_dir).parent / "build.json").unlink()
    assert not build("code", tmp_path, "cpu", 60, limits).cached and len(runs) == 2  # recorded, nothing raised
    assert not build("code", tmp_path, "cpu", 60, limits).cached and len(runs) == 3
