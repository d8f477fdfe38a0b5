"""torch's extension header, precompiled once per build cache (``evalkit.judge.torch_headers``): a C++ answer's
build takes it, an answer whose flags match none still builds, one that cannot be made only costs time, and no
sandbox can write where it lives."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit.intake.triage import triage
from evalkit.judge import torch_headers
from evalkit.judge.builder import build, build_env, build_key
from evalkit.schedule.options import default_limits
from torch.utils.cpp_extension import get_cxx_compiler

CODE = triage((FIXTURES / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py").read_text()).code


@pytest.mark.slow  # compiles an answer's main.cpp as torch's ninja file does (most of a minute on 2 cores)
def test_a_cpp_answers_build_takes_the_precompiled_header(prebuilt: Path, session_torch_headers: Path, tmp_path):
    # The session's fixture answers were built through the build stage, which began precompiling the header beside
    # them; ``ensure`` waits for it to be done.
    folder = torch_headers.ensure(prebuilt, "cpu")
    assert folder is not None and folder.parent == session_torch_headers.resolve()
    precompiled = folder / "torch" / "extension.h.gch"
    assert not (folder / torch_headers.UNUSABLE).exists(), (folder / torch_headers.UNUSABLE).read_text()
    assert sorted(p.name for p in precompiled.iterdir()) == ["O3.gch", "plain.gch"]
    env = build_env(prebuilt / build_key(CODE, "cpu"), "cpu")
    assert env["CPATH"] == str(folder)
    # torch's own compile of an answer's main.cpp, as its ninja file runs it, in the build's environment; -H says
    # which headers it read ("!": a precompiled one taken; "x": one tried and refused)
    main = tmp_path / "main.cpp"
    main.write_text("#include <torch/extension.h>\nint answer() { return 42; }\n")
    for extra, taken in (((), "plain.gch"), (("-O3",), "O3.gch"), (("-std=c++17",), None)):
        compiled = subprocess.run([get_cxx_compiler(), "-H", "-MMD", "-MF", str(tmp_path / "main.o.d"),
                                   *torch_headers.torch_cflags("cpu"), *extra, "-c", str(main), "-o", os.devnull],
                                  env={**os.environ, **env}, capture_output=True, text=True)
        assert compiled.returncode == 0, compiled.stderr[-2000:]
        used = [line[2:] for line in compiled.stderr.splitlines() if line.startswith("! ")]
        assert used == ([str(precompiled / taken)] if taken else []), (extra, compiled.stderr[:500])


@pytest.mark.slow  # needs the session's precompiled header, which only a session with slow tests makes
def test_the_folder_is_readable_by_every_sandbox_and_writable_by_none(prebuilt: Path):
    folder = torch_headers.ensure(prebuilt, "cpu")
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH), path
        assert mode & stat.S_IROTH, path


@pytest.mark.slow  # a cold build that compiles the header itself
def test_an_answer_whose_flags_match_no_precompiled_header_still_builds(tmp_path: Path):
    code = CODE.replace("load_inline(", "load_inline(extra_cflags=['-std=c++17'], ", 1)
    assert code != CODE
    outcome = build(code, tmp_path, "cpu", 600, default_limits("cpu", 2.0))
    assert outcome.status == "ok", outcome.log_tail


def test_a_header_that_cannot_be_precompiled_is_noted_and_costs_nothing_else(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(torch_headers.HEADERS_ENV, str(tmp_path / "headers"))
    monkeypatch.setattr(torch_headers, "FLAG_VARIANTS", {"plain": ("-fno-such-flag-evalkit",)})
    assert torch_headers.ensure(tmp_path / "builds", "cpu") is None
    folder = torch_headers.headers_folder(tmp_path / "builds", "cpu")
    assert "no-such-flag-evalkit" in (folder / torch_headers.UNUSABLE).read_text()
    assert not (folder / "torch").exists() and not list(folder.glob(".building-*"))
    assert torch_headers.ensure(tmp_path / "builds", "cpu") is None  # noted once: never tried again in this folder


def test_without_a_shared_place_the_headers_live_in_the_build_cache(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(torch_headers.HEADERS_ENV)
    folder = torch_headers.headers_folder(tmp_path / "builds", "cpu")
    assert folder.parent == (tmp_path / "builds").resolve() / torch_headers.HEADERS_FOLDER
    assert torch_headers.header_env(tmp_path / "builds", "cpu") == {"CPATH": str(folder)}


@pytest.mark.slow  # needs the session's precompiled header, which only a session with slow tests makes
def test_a_hostile_build_cannot_plant_a_header_for_the_next_answers(prebuilt: Path, tmp_path: Path):
    """A precompiled header is code compiled into every later answer: a build that could write one would choose
    what other answers' extensions do."""
    hostile = '''import os, pathlib
folder = pathlib.Path(os.environ["CPATH"]) / "torch" / "extension.h.gch"
for name in ("evil.gch", "plain.gch"):
    try:
        (folder / name).write_bytes(b"planted")
    except OSError:
        pass
import torch
from torch.utils.cpp_extension import load_inline
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''
    builds = tmp_path / "builds"
    builds.symlink_to(prebuilt, target_is_directory=True)
    torch_headers.ensure(prebuilt, "cpu")
    build(hostile, builds, "cpu", 240, default_limits("cpu", 2.0))
    precompiled = torch_headers.headers_folder(prebuilt, "cpu") / "torch" / "extension.h.gch"
    assert sorted(p.name for p in precompiled.iterdir()) == ["O3.gch", "plain.gch"]
    assert (precompiled / "plain.gch").read_bytes()[:7] != b"planted"
    assert build_key(hostile, "cpu")  # the build ran: its record is in the cache
    assert (prebuilt.resolve() / build_key(hostile, "cpu") / "build.json").exists()


def test_no_build_waits_for_the_header_and_the_runs_clean_up_ends_its_compile(tmp_path: Path, monkeypatch):
    """One answer alone waited for the header's compile (~35 s of a core, more than a C++ answer's build) before
    its own build: now the header is made beside the builds, and a run that ends first ends its compile."""
    import time
    import uuid

    from evalkit.sandbox.remains import kill_group

    monkeypatch.setenv(torch_headers.HEADERS_ENV, str(tmp_path / "headers"))
    folder = torch_headers.headers_folder(tmp_path / "builds", "cpu")  # torch's flags and compiler read first
    started = tmp_path / "compiler-started"
    compiler = tmp_path / "slow-compiler"  # the header's compile, held until the run's clean-up ends it
    compiler.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 600\n")
    compiler.chmod(0o755)
    monkeypatch.setattr(torch_headers.cpp_extension, "get_cxx_compiler", lambda: str(compiler))
    limits = default_limits("cpu", 2.0, group=f"test-{uuid.uuid4().hex[:8]}")
    outcome = build("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", tmp_path / "builds", "cpu", 240,
                    limits)
    assert outcome.status == "ok", outcome.log_tail
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the header's compile was never begun"
    assert torch_headers.start(tmp_path / "builds", "cpu") is None  # one maker at a time
    assert kill_group(limits.group) >= 1  # the run's clean-up finds the compile by the run's marker
    lock = open(folder.parent / f"{folder.name}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the maker let go
    assert not (folder / torch_headers.UNUSABLE).exists(), "a compile stopped by the clean-up is no verdict on it"
    assert not (folder / "torch").exists() and not list(folder.glob(".building-*"))


def test_the_headers_compile_is_kept_off_every_timing_as_builds_are():
    """It runs beside the builds, so it is held like one: stopped while a judge times (the run's freezer)."""
    import uuid

    from evalkit.sandbox.freezer import BuildFreezer
    from evalkit.sandbox.processes import MARKER_VARIABLE, process_state

    freezer = BuildFreezer(f"test-{uuid.uuid4().hex[:8]}", use_cgroup=False)
    compile_ = torch_headers._launch(["sleep", "600"], f"{MARKER_VARIABLE}=test.torch-headers", freezer)
    try:
        assert process_state(compile_.pid) != "T"
        with freezer.timing():
            assert process_state(compile_.pid) == "T"
        assert process_state(compile_.pid) != "T"
    finally:
        compile_.kill()
        torch_headers._finished(compile_, freezer)
        freezer.close()
