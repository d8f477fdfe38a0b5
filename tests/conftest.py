from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SEEDS = ROOT / "submissions" / "seeds"


def benchmark_module(name: str) -> Any:
    """``benchmarks/<name>.py`` loaded as a module (benchmarks/ is no package), for its tests."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"benchmarks/{name}.py cannot be loaded"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SLOW_TIER_SKIPPED = "the slow tier: add --slow to run it (docs/testing.md)"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true",
                     help="run the slow tier too (docs/testing.md); without it or a -m, the fast tier alone")


def runs_slow_tier(config: pytest.Config) -> bool:
    """Whether ``slow`` tests run: asked with ``--slow``, or chosen by a ``-m`` (``-m slow``, ``-m cuda``)."""
    return bool(config.getoption("--slow") or config.option.markexpr)


def _to_run(session: pytest.Session) -> list[pytest.Item]:
    """The session's tests that no ``skip`` mark keeps from running (a tier's, a missing GPU's)."""
    return [item for item in session.items if item.get_closest_marker("skip") is None]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast tier by default: a ``slow`` test is skipped, saying how to run it, unless ``runs_slow_tier``; and a
    ``cuda`` test is skipped where torch sees no GPU."""
    slow_skipped, no_gpu = not runs_slow_tier(config), not torch.cuda.is_available()
    for item in items:
        if slow_skipped and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.skip(reason=SLOW_TIER_SKIPPED))
        if no_gpu and "cuda" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (run these on a GPU machine: see "
                                                    "docs/gpu-runs/README.md)"))


@pytest.fixture(scope="session", autouse=True)
def session_torch_headers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch's extension header precompiled once for the whole session (each test's fresh build cache would
    otherwise precompile it again): every build, in this process or a child, finds it through the environment.

    Only a session that runs a ``slow`` test makes it. The fast tier builds little beyond the session's prebuilt
    answers, and precompiling cost it more than it saved (on 2 cores: 678-816 CPU-s with it, 573-629 without), so
    there the folder says it is unusable, as on a machine that cannot precompile, and builds compile torch's
    header themselves."""
    from evalkit.judge.torch_headers import HEADERS_ENV, UNUSABLE, headers_folder

    for folder in _session_folder_named_by(HEADERS_ENV, _run_folder(tmp_path_factory, "torch-headers")):
        header = headers_folder(folder, "cpu")
        if header is not None and not any(item.get_closest_marker("slow") for item in _to_run(request.session)):
            (header / UNUSABLE).write_text(f"{FAST_TIER_ONLY}\n")
        yield folder


FAST_TIER_ONLY = "a session without slow tests: builds compile torch's header themselves (tests/conftest.py)"


@pytest.fixture(scope="session", autouse=True)
def session_timing_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host-wide timing registry of the session's own (``evalkit.sandbox.host_timing``): another test session on
    the same machine, or a run outside the tests, neither freezes this session's builds nor waits for its judges."""
    from evalkit.sandbox.host_timing import FOLDER_ENV

    yield from _session_folder_named_by(FOLDER_ENV, tmp_path_factory.mktemp("timing-registry"))


def _run_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of the whole test run: the session's own, or, when pytest-xdist runs the session in several worker
    processes (``-n``), one folder all of them share (their base folders' parent), as several evalkit runs on one
    host share a precompiled header (made safe for that by its lock). The timing registry stays each process's
    own: a judge of one worker must not freeze the builds another worker's test is watching."""
    base = tmp_path_factory.getbasetemp()
    folder = (base if os.environ.get("PYTEST_XDIST_WORKER") is None else base.parent) / name
    folder.mkdir(exist_ok=True)
    return folder


def _session_folder_named_by(variable: str, folder: Path) -> Iterator[Path]:
    """``folder`` named by the environment ``variable`` for the session (children inherit it), then put back."""
    previous = os.environ.get(variable)
    os.environ[variable] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = previous


@pytest.fixture(scope="session", autouse=True)
def prebuild_ahead(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   session_torch_headers: Path, session_timing_registry: Path) -> Iterator[None]:
    """When a test that will run (not skipped) needs ``prebuilt``, its builds start at the session's first test, in
    a thread, while the tests that need none run (with pytest-xdist, a worker would otherwise wait a minute or more
    for the other worker's builds)."""
    if not any("prebuilt" in item.fixturenames for item in _to_run(request.session)):
        yield
        return
    folder = _run_folder(tmp_path_factory, "prebuilt")
    ahead = threading.Thread(target=_prebuilt_once, args=(folder,), name="prebuild-ahead", daemon=True)
    ahead.start()
    yield
    ahead.join()


@pytest.fixture(scope="session")
def prebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's builds folder: each fixture C++ answer fast tests judge, built once (tests/shared_builds.py)."""
    from shared_builds import EXPECTED

    folder = _run_folder(tmp_path_factory, "prebuilt")
    outcomes = _prebuilt_once(folder)
    # Anything else is a broken session cache: said once here, with the build's log, not as a wrong verdict in
    # every test that uses it.
    wrong = {name: f"{status}: {log}" for name, (status, log) in outcomes.items() if status != EXPECTED[name]}
    assert not wrong and outcomes.keys() == EXPECTED.keys(), wrong
    return folder / "builds"


def _prebuilt_once(folder: Path) -> dict[str, list[str]]:
    """Each prebuilt answer's build status and log tail, built into ``folder / "builds"`` by the first caller of
    the run (a thread ahead, or a test; a pytest-xdist worker, or another) while the others wait, then read."""
    from shared_builds import prebuild

    told = folder / "outcomes.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not told.exists():
            told.write_text(json.dumps({name: [outcome.status, outcome.log_tail[-3000:]]
                                        for name, outcome in prebuild(folder / "builds").items()}))
        return json.loads(told.read_text())


@pytest.fixture
def warm_cache(prebuilt: Path, tmp_path: Path) -> Path:
    """A cache folder of this test's own whose builds are the session's prebuilt ones (tests/shared_builds.py)."""
    from shared_builds import cache_sharing_builds

    return cache_sharing_builds(prebuilt, tmp_path / "cache")


def prose_answer_options(tmp_path: Path) -> Any:
    """``evalkit score``'s options over one answer with no code in it (its row needs no judge) to a CPU judge, its
    report in ``tmp_path / "report"``."""
    from evalkit.schedule.options import ScoreOptions

    answer = tmp_path / "subs" / "api" / "linear_relu" / "prose.txt"
    answer.parent.mkdir(parents=True)
    answer.write_text("No code in this answer, sorry.\n")
    return ScoreOptions(submissions=tmp_path / "subs", problems_dir=FIXTURES / "judge_problems",
                        out_dir=tmp_path / "report", device="cpu", baselines=(), seed=7, cache_dir=tmp_path / "cache")
