"""Every CUDA source the project ships compiles and links with torch's own flags, on a machine without a GPU.

The curated solutions (``problems/*/solutions``) and the CUDA fixtures are judged only on a GPU, so a broken ``.cu``
used to surface in a GPU record. Here nvcc (PyPI's ``nvidia-cuda-nvcc``, which ``.ci/run`` installs) compiles each
one's extension from the sources and ``build.ninja`` torch itself writes (``benchmarks/cuda_build.py``), for one
architecture (sm_90, the GPUs of the project's records), and links it; nothing runs. The link is checked too: a symbol
the extension needs that neither the libraries it links nor a CUDA torch defines (a function declared, never
defined) fails it. Where no nvcc is found the tests are skipped, unless ``EVALKIT_REQUIRE_NVCC`` is set (CI sets it):
then they fail, so a CI whose nvcc went missing is not green without compiling anything.

Cost on the 2-core machine: see docs/testing.md (the slow tier).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pytest

from conftest import FIXTURES, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.nvcc]

_spec = importlib.util.spec_from_file_location("cuda_build", ROOT / "benchmarks" / "cuda_build.py")
cuda_build = sys.modules.setdefault("cuda_build", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(cuda_build)

ARCH = "9.0"
REQUIRE_NVCC = "EVALKIT_REQUIRE_NVCC"
# Shipped to fail: the fixture whose CUDA calls a function nobody declares (its answer falls back to PyTorch).
COMPILE_ERRORS = {"tests/fixtures/cuda_submissions/cuda/matmul/fallback.py"}
# Copies of one fixture with its number changed (builds beside a judge): compiled once, the copies checked equal.
NUMBERED = FIXTURES / "timing_build_load" / "load" / "tiny_relu"
# Builds at once: one a core this process may run on, at most 4 (a .cu's host front end alone peaks at about 2.2 GiB).
PARALLEL_BUILDS = min(len(os.sched_getaffinity(0)), 4)


def cuda_sources() -> list[Path]:
    """Every shipped Python answer that builds a CUDA extension (``cuda_sources``), but the numbered copies."""
    found = sorted(ROOT.glob("problems/*/solutions/*.py")) + sorted(FIXTURES.rglob("*.py"))
    copies = set(NUMBERED.glob("b_custom_relu_[2-9].py"))
    return [path for path in found if path not in copies and "cuda_sources" in path.read_text()]


SOURCES = cuda_sources()


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """nvcc's folder, and the environment of a build: the stand-ins a CPU torch lacks and the precompiled header."""
    home = cuda_build.nvcc_home()
    if home is None:
        message = "no nvcc (pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl)"
        if os.environ.get(REQUIRE_NVCC):
            pytest.fail(f"{message}, and {REQUIRE_NVCC} is set")
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("cuda-stand-ins")
    env = cuda_build.stand_ins(folder, home)
    header = cuda_build.precompiled_header(folder / "builds", home, ROOT, ARCH)  # $EVALKIT_TORCH_HEADERS: the session's
    if header:
        env["CPATH"] = os.pathsep.join([header, env["CPATH"]])
    return home, env


def test_every_curated_solution_and_cuda_fixture_is_found():
    names = {_name(path) for path in SOURCES}
    assert len([name for name in names if name.startswith("problems/")]) == 8, sorted(names)
    assert {"tests/fixtures/cuda_submissions/cuda/linear_relu/a_correct_cuda.py",
            "tests/fixtures/timing_build_load/load/tiny_relu/b_custom_relu_1.py"} <= names, sorted(names)
    assert COMPILE_ERRORS <= names


def test_the_numbered_copies_differ_only_in_their_number():
    first = (NUMBERED / "b_custom_relu_1.py").read_text()
    copies = sorted(NUMBERED.glob("b_custom_relu_[2-9].py"))
    assert copies
    for copy in copies:
        number = copy.stem.rsplit("_", 1)[1]
        expected = first.replace("_1", f"_{number}").replace("(variant 1:", f"(variant {number}:")
        assert copy.read_text() == expected, f"{copy} is no longer a copy: compile it too"


@pytest.fixture(scope="module")
def builds(toolchain, request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Future]]:
    """Every source's build folder and steps, compiled a core each, all started at once: xdist gives a file's tests
    to one process, and pytest-xdist's ``loadfile`` sends the files of fewest tests last, so this file runs at the
    suite's tail beside idle cores (one after another, its compiles were CI's last half hour on 2 cores)."""
    home, env = toolchain

    def build(answer: Path, scratch: Path) -> tuple[Path, list]:
        folder = cuda_build.write_build(answer, scratch, ARCH, home)
        return folder, cuda_build.build_steps(folder, env)
    selected = _selected(request.session)
    with ThreadPoolExecutor(max_workers=PARALLEL_BUILDS) as pool:
        futures = {answer: pool.submit(build, answer, tmp_path_factory.mktemp("cuda-build"))
                   for answer in SOURCES if answer in selected}
        yield futures
        for future in futures.values():
            future.cancel()


def _selected(session: pytest.Session) -> set[Path]:
    """The sources whose compile test this run holds (``pytest file::test[...]`` compiles that one alone)."""
    return {item.callspec.params["answer"] for item in session.items
            if getattr(item, "originalname", "") == test_the_cuda_extension_compiles_and_links.__name__}


@pytest.mark.parametrize("answer", SOURCES, ids=_name)
def test_the_cuda_extension_compiles_and_links(answer: Path, builds: dict[Path, Future], toolchain):
    folder, steps = builds[answer].result()
    failed = [step for step in steps if step.exit_code != 0]
    if _name(answer) in COMPILE_ERRORS:
        assert failed and failed[0].kind == "cuda", [(step.kind, step.exit_code) for step in steps]
        assert "undefined_symbol" in failed[0].output
        return
    assert not failed, f"{failed[0].kind} step failed:\n{failed[0].command}\n{failed[0].output}"
    assert [step.kind for step in steps].count("cuda") == 1 and steps[-1].kind == "link"
    library = next(folder.glob("*.so"))
    assert cuda_build.unresolved_symbols(library, toolchain[1]) == []


def test_a_function_declared_and_never_defined_is_reported(tmp_path: Path):
    # What a link against a CUDA torch would leave undefined is reported; what a CUDA torch defines is not.
    source = tmp_path / "answer.cpp"
    source.write_text("namespace c10 { namespace cuda { void getCurrentCUDAStream(signed char); } }\n"
                      "namespace answer { void kernel_launcher(int); }\n"
                      "void forward() { c10::cuda::getCurrentCUDAStream(0); answer::kernel_launcher(1); }\n")
    library = tmp_path / "answer.so"
    subprocess.run(["c++", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    missing = cuda_build.unresolved_symbols(library, {})
    assert missing == ["_ZN6answer15kernel_launcherEi"]


def test_ci_installs_nvcc_and_requires_it():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "nvidia-cuda-nvcc" in ci and f"export {REQUIRE_NVCC}=1" in ci
