"""Test helpers: the session's build cache, so the fast tier builds each fixture's C++ answer once, not per test.

Most of the suite's time went to cold ``load_inline`` builds of the same few fixture answers, once per test
module or test. ``prebuild`` builds them once per session, through evalkit's own build stage
(``evalkit.judge.builder.build``: the same sandbox, limits and key as ``evalkit score``), into one folder; a test
then gets a cache folder of its own (``cache_sharing_builds``) whose ``builds`` is a link to it: its baselines,
problems given as text and reports stay its own, and only the content-keyed builds are shared.

A link and not a copy: torch's ninja file records the sources' absolute paths, so a build copied to another folder
is compiled again when the judging stage loads it (inside its load limit: a copied cache made a correct answer
time out). evalkit resolves the cache's builds folder (``builder.build``), so every test loads a build at the path it
was built at. A test that must see a build happen (a cold build, the build stage's own behaviour) keeps a cache of
its own, and is marked ``slow``.
"""

from __future__ import annotations

import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from conftest import FIXTURES

if TYPE_CHECKING:
    from evalkit.judge.builder import BuildOutcome

LINEAR_RELU = FIXTURES / "judge_problems" / "linear_relu"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
# The C++ answers the fast tier judges, with the problem whose constructor arguments their build is given. (A slow
# test sharing these builds may build more into the same folder: the precision runs build their two extensions.)
PREBUILT = ((LINEAR_RELU, ANSWERS / "correct_cpp.py"), (LINEAR_RELU, ANSWERS / "compile_error.py"))
EXPECTED = {"correct_cpp.py": "ok", "compile_error.py": "compile_error"}  # each build's status
BUILD_LIMIT_S = 900.0  # evalkit's own build limit: a loaded machine may compile slowly, and must not fail here


def prebuild(builds: Path) -> dict[str, BuildOutcome]:
    """Build every answer of ``PREBUILT`` into ``builds`` (at once) as ``evalkit score --device cpu`` would; the
    outcome per answer file name."""
    from evalkit.intake.triage import triage
    from evalkit.judge import torch_headers
    from evalkit.judge.builder import build, build_key
    from evalkit.schedule.options import default_limits
    from evalkit.sources.problems import load_problem

    limits = default_limits("cpu", None)
    torch_headers.ensure(builds, "cpu")  # first, once: every build of the session takes it (none waits in a run)

    def one(pair: tuple[Path, Path]) -> tuple[str, BuildOutcome]:
        problem, answer = pair
        code = triage(answer.read_text()).code
        assert code, f"{answer} holds no code"
        init_inputs = load_problem(problem).init_inputs_or_none()
        outcome = build(code, builds, "cpu", BUILD_LIMIT_S, limits, init_inputs)
        if outcome.status != EXPECTED[answer.name]:
            # Once more from nothing: a compiler killed from outside (another run's memory hog on a shared machine)
            # reads as a compile error, and would fail every test of the session. A real regression fails again;
            # either way the first failure is told, in the run's warnings.
            warnings.warn(f"the session's build of {answer.name} ended {outcome.status}, built again: "
                          f"{outcome.log_tail[-2000:]}", stacklevel=1)
            shutil.rmtree(builds / build_key(code, "cpu"), ignore_errors=True)
            outcome = build(code, builds, "cpu", BUILD_LIMIT_S, limits, init_inputs)
        return answer.name, outcome

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, PREBUILT))


def cache_sharing_builds(builds: Path, cache: Path) -> Path:
    """``cache`` (created), a cache folder of its own whose ``builds`` is the session's prebuilt ``builds``."""
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "builds").symlink_to(builds, target_is_directory=True)
    return cache
