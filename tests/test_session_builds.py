"""The session's prebuilt answers are built once per test run, whichever of its processes or threads asks first
(pytest-xdist's workers, the thread that builds ahead, a test): the others wait, then read what it told."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import conftest
import shared_builds


def test_the_first_caller_builds_and_every_other_waits_then_reads(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    calls = []

    def prebuild(builds: Path) -> dict[str, SimpleNamespace]:
        calls.append(builds)
        time.sleep(0.5)  # long enough for every other caller to come while it builds
        return {"correct_cpp.py": SimpleNamespace(status="ok", log_tail="built")}

    monkeypatch.setattr(shared_builds, "prebuild", prebuild)
    told = []
    callers = [threading.Thread(target=lambda: told.append(conftest._prebuilt_once(tmp_path))) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    told.append(conftest._prebuilt_once(tmp_path))  # a caller after the build

    assert calls == [tmp_path / "builds"], "built more than once"
    assert told == [{"correct_cpp.py": ["ok", "built"]}] * 5
