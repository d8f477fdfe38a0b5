from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = ROOT / "submissions" / "seeds"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run these on a GPU machine: see docs/gpu-runs/README.md)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def session_torch_headers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch's extension header precompiled once for the whole session (each test's fresh build cache would
    otherwise precompile it again): every build, in this process or a child, finds it through the environment."""
    from evalkit.judge.torch_headers import HEADERS_ENV

    yield from _session_folder_named_by(HEADERS_ENV, tmp_path_factory.mktemp("torch-headers"))


@pytest.fixture(scope="session", autouse=True)
def session_timing_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host-wide timing registry of the session's own (``evalkit.sandbox.host_timing``): another test session on
    the same machine, or a run outside the tests, neither freezes this session's builds nor waits for its judges."""
    from evalkit.sandbox.host_timing import FOLDER_ENV

    yield from _session_folder_named_by(FOLDER_ENV, tmp_path_factory.mktemp("timing-registry"))


def _session_folder_named_by(variable: str, folder: Path) -> Iterator[Path]:
    """``folder`` named by the environment ``variable`` for the session (children inherit it), then put back."""
    previous = os.environ.get(variable)
    os.environ[variable] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = previous


@pytest.fixture(scope="session")
def prebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's builds folder: each fixture C++ answer fast tests judge, built once (tests/shared_builds.py)."""
    from shared_builds import EXPECTED, prebuild

    builds = tmp_path_factory.mktemp("prebuilt") / "builds"
    outcomes = prebuild(builds)
    # Anything else is a broken session cache: said once here, with the build's log, not as a wrong verdict in
    # every test that uses it.
    wrong = {name: f"{outcome.status}: {outcome.log_tail[-3000:]}" for name, outcome in outcomes.items()
             if outcome.status != EXPECTED[name]}
    assert not wrong and outcomes.keys() == EXPECTED.keys(), wrong
    return builds


@pytest.fixture
def warm_cache(prebuilt: Path, tmp_path: Path) -> Path:
    """A cache folder of this test's own whose builds are the session's prebuilt ones (tests/shared_builds.py)."""
    from shared_builds import cache_sharing_builds

    return cache_sharing_builds(prebuilt, tmp_path / "cache")
