from __future__ import annotations

from pathlib import Path

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


# The statuses the prebuilt answers' builds must end with (``shared_builds.PREBUILT``): anything else is a broken
# session cache, reported once here rather than as a wrong verdict in every test that uses it.
PREBUILT_STATUSES = {"correct_cpp.py": "ok", "compile_error.py": "compile_error", "float32_only_cpp.py": "ok",
                     "dispatched_cpp.py": "ok"}


@pytest.fixture(scope="session")
def prebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's builds folder: every fixture C++ answer the fast tier judges, built once (tests/shared_builds.py)."""
    from shared_builds import prebuild

    builds = tmp_path_factory.mktemp("prebuilt") / "builds"
    assert prebuild(builds) == PREBUILT_STATUSES
    return builds


@pytest.fixture
def warm_cache(prebuilt: Path, tmp_path: Path) -> Path:
    """A cache folder of this test's own whose builds are the session's prebuilt ones (tests/shared_builds.py)."""
    from shared_builds import cache_sharing_builds

    return cache_sharing_builds(prebuilt, tmp_path / "cache")
