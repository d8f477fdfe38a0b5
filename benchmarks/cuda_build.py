"""Build a ``load_inline`` answer's CUDA extension exactly as torch's own ninja file would, on any host with nvcc,
a GPU or not (CPU torch and nvcc from PyPI: ``pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl``).

Used by ``benchmarks/build_costs.py`` (where a build's time goes) and by the test that compiles every CUDA source
the project ships (``tests/judge/test_cuda_sources_compile.py``). It imports the answer (trusted code only: the
curated solutions, the fixtures, answers you trust) with torch's ``_run_ninja_build`` replaced, so torch writes the
sources and ``build.ninja`` of its first extension as it would on a GPU host, and stops there. A CPU build of torch
lacks three things a CUDA build has, which this supplies without touching any flag torch writes:

- ``CUDA_HOME``, which a CPU torch never looks for: set from nvcc's own folder;
- ``c10/cuda/impl/cuda_cmake_macros.h``, a header CMake generates for CUDA builds (``#define
  C10_CUDA_BUILD_SHARED_LIBS``): written into a folder the compilers find through ``CPATH``;
- ``libc10_cuda.so`` and ``libtorch_cuda.so`` to link against: empty stand-ins, found through ``LIBRARY_PATH``, so
  the link runs; what they would define is then checked by ``unresolved_symbols``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

# Runs the answer with torch's ninja run replaced by a stop: prints the build folder torch wrote.
_WRITE_ONLY = """
import json, os, runpy, sys
import torch.utils.cpp_extension as ce

class _Written(BaseException):
    pass

def _stop(build_directory, verbose, error_prefix):
    print("EVALKIT_BUILD_FOLDER " + json.dumps(build_directory), flush=True)
    raise _Written

ce.CUDA_HOME = os.environ["CUDA_HOME"]
ce._run_ninja_build = _stop
try:
    answer = runpy.run_path(sys.argv[1], run_name="evalkit_answer")
    if len(sys.argv) > 2:  # nothing built at import: ModelNew(*get_init_inputs()) may build, as evalkit's build does
        answer["ModelNew"](*runpy.run_path(sys.argv[2])["get_init_inputs"]())
except _Written:
    pass
"""
# evalkit's precompiled torch header for CUDA builds (``evalkit.judge.torch_headers``), made as on a GPU host.
_PRECOMPILE = """
import os, sys
from pathlib import Path
import torch.utils.cpp_extension as ce
ce.CUDA_HOME = os.environ["CUDA_HOME"]
from evalkit.judge import torch_headers
print(torch_headers.ensure(Path(sys.argv[1]), "cuda") or "")
"""
CMAKE_MACROS = "c10/cuda/impl/cuda_cmake_macros.h"
STUB_LIBRARIES = ("c10_cuda", "torch_cuda")
# What the CUDA build of torch, and the CUDA libraries it loads into the process, define: a symbol of these is left
# unresolved by a link against a CPU torch, and resolved when a CUDA torch loads the extension.
CUDA_TORCH_SYMBOL = re.compile(r"^(?:(?:c10|at|torch)::cuda::|c10::cuda|at::native::|at::cuda|"
                               r"(?:cublas|cublasLt|cudnn|cusparse|curand|cufft|cusolver|nccl|nvrtc|cu)[A-Z_]|"
                               r"_?Py|__cxa_|__gxx_|_ITM_|__gmon_start__|__tls_get_addr)")


@dataclass
class Step:
    """One command of torch's ninja file run alone: what it compiled, its wall time and its compilers' CPU time."""

    kind: str  # "cuda" (the .cu), "cpp" (the .cpp), "link"
    command: str
    wall_s: float
    cpu_s: float  # user + system of every process it ran
    peak_rss_mib: float
    exit_code: int
    output: str = ""
    nvcc_phases_ms: dict[str, float] = field(default_factory=dict)


def nvcc_home() -> Path | None:
    """The CUDA toolkit folder holding ``bin/nvcc``: ``$CUDA_HOME``, else PyPI's (``nvidia/cu*``, beside torch), else
    the one whose nvcc is on the ``PATH``; None where there is none."""
    candidates = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    candidates += sorted(Path(sysconfig.get_paths()["purelib"]).glob("nvidia/cu*"), reverse=True)
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    return next((home for home in candidates if (home / "bin" / "nvcc").is_file()
                 and (home / "include" / "cuda_runtime.h").is_file()), None)


def stand_ins(folder: Path, home: Path) -> dict[str, str]:
    """Write what a CPU torch lacks into ``folder``; the environment that makes the compilers and linker find it."""
    header = folder / "include" / CMAKE_MACROS
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    libraries = folder / "lib"
    libraries.mkdir(exist_ok=True)
    empty = folder / "empty.c"
    empty.write_text("")
    for name in STUB_LIBRARIES:
        subprocess.run(["cc", "-shared", "-o", str(libraries / f"lib{name}.so"), str(empty)], check=True)
    runtimes = [path for sub in ("lib64", "lib") for path in sorted((home / sub).glob("libcudart.so*"))]
    if runtimes and not any(path.name == "libcudart.so" for path in runtimes):  # PyPI ships only libcudart.so.13
        (libraries / "libcudart.so").symlink_to(runtimes[0])
    joined = lambda name, path: os.pathsep.join(filter(None, [str(path), os.environ.get(name, "")]))  # noqa: E731
    return {"CPATH": joined("CPATH", folder / "include"), "LIBRARY_PATH": joined("LIBRARY_PATH", libraries)}


def precompiled_header(builds: Path, home: Path, root: Path, arch: str) -> str:
    """evalkit's precompiled torch header for a CUDA extension's ``.cpp`` (one compile per flag variant, once per
    ``builds`` folder or ``$EVALKIT_TORCH_HEADERS``): the folder for ``CPATH``, or '' where it cannot be made.
    ``arch``: as the build's (torch needs one to write its ninja file where no GPU is visible)."""
    env = {**os.environ, "CUDA_HOME": str(home), "PYTHONPATH": str(root), "TORCH_CUDA_ARCH_LIST": arch}
    done = subprocess.run([sys.executable, "-c", _PRECOMPILE, str(builds)], cwd=root, capture_output=True, text=True,
                          env=env)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""


def write_build(answer: Path, scratch: Path, arch: str, home: Path, reference: Path | None = None,
                python: str = sys.executable) -> Path:
    """torch's build folder (sources and ``build.ninja``) for the first extension ``answer`` loads, at import or (with
    its problem's ``reference``) in ``ModelNew(*get_init_inputs())``, built for ``arch`` (a ``TORCH_CUDA_ARCH_LIST``,
    e.g. ``9.0``) with nvcc from ``home``; raises if it loads none."""
    env = {**os.environ, "CUDA_HOME": str(home), "TORCH_CUDA_ARCH_LIST": arch,
           "TORCH_EXTENSIONS_DIR": str(scratch / "extensions"),
           "PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    command = [python, "-c", _WRITE_ONLY, str(answer.resolve()), *([str(reference)] if reference else [])]
    done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=300)
    found = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("EVALKIT_BUILD_FOLDER ")]
    if not found:
        raise RuntimeError(f"{answer}: no load_inline extension written (exit {done.returncode}):\n"
                           f"{done.stderr[-3000:]}")
    return Path(json.loads(found[0]))


def ninja_commands(folder: Path) -> list[str]:
    listed = subprocess.run(["ninja", "-C", str(folder), "-t", "commands"], capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if line.strip()]


def step_kind(command: str) -> str:
    if " -c " in command and ".cu" in command.split(" -o ")[0].split()[-1]:
        return "cuda"
    return "cpp" if " -c " in command else "link"


# Runs one command; prints its wall time, its children's CPU time and the peak RSS of the largest of them.
_MEASURE = ("import json, resource, subprocess, sys, time\n"
            "start = time.monotonic()\n"
            "done = subprocess.run(sys.argv[1], shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)\n"
            "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "sys.stderr.buffer.write(done.stdout)\n"
            "print(json.dumps({'wall_s': time.monotonic() - start, 'exit_code': done.returncode,\n"
            "                  'cpu_s': used.ru_utime + used.ru_stime, 'peak_rss_mib': used.ru_maxrss / 1024}))\n")


def run_step(command: str, folder: Path, env: dict[str, str], times_csv: Path | None = None) -> Step:
    """Run one command of the ninja file from ``folder``, measured (with ``nvcc --time`` into ``times_csv``)."""
    kind = step_kind(command)
    run = command + (f" --time {times_csv}" if times_csv is not None and kind == "cuda" else "")
    done = subprocess.run([sys.executable, "-c", _MEASURE, run], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env})
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    phases = nvcc_phases(times_csv) if times_csv is not None and kind == "cuda" else {}
    return Step(kind, command, output=done.stderr[-4000:], nvcc_phases_ms=phases, **figures)


def build_steps(folder: Path, env: dict[str, str], times_dir: Path | None = None) -> list[Step]:
    """Every command of torch's ninja file, one after another from a cleaned folder, each measured. Every compile
    runs even when another failed, as in torch's build, which starts the ``.cpp`` and the ``.cu`` at once and lets
    the one still running finish; the link runs only when they all succeeded."""
    subprocess.run(["ninja", "-C", str(folder), "-t", "clean"], capture_output=True, check=True)
    steps: list[Step] = []
    for number, command in enumerate(ninja_commands(folder)):
        if step_kind(command) == "link" and any(step.exit_code != 0 for step in steps):
            break
        steps.append(run_step(command, folder, env, times_dir / f"nvcc-{number}.csv" if times_dir else None))
    return steps


def nvcc_phases(times_csv: Path) -> dict[str, float]:
    """``nvcc --time``'s rows summed by phase (milliseconds of wall time)."""
    import csv

    phases: dict[str, float] = {}
    if not times_csv.exists():
        return phases
    with times_csv.open() as handle:
        for raw in csv.DictReader(handle, skipinitialspace=True):
            row = {(key or "").strip(): (value or "").strip() for key, value in raw.items()}
            name = row.get("phase name") or "?"
            try:
                phases[name] = phases.get(name, 0.0) + float(row.get("metric") or "0")
            except ValueError:
                continue
    return phases


def unresolved_symbols(library: Path, env: dict[str, str]) -> list[str]:
    """The symbols ``library`` needs that neither the libraries it links nor a CUDA torch's process would define:
    what a link against the real CUDA torch would leave undefined (an answer's function declared, never defined)."""
    needed = _symbols(library, undefined=True)
    defined: set[str] = set()
    for dependency in _dependencies(library, env):
        defined |= _symbols(dependency, undefined=False)
    missing = sorted(needed - defined)
    return [name for name, readable in zip(missing, _demangled(missing)) if not CUDA_TORCH_SYMBOL.match(readable)]


def _symbols(library: Path, undefined: bool) -> set[str]:
    listed = subprocess.run(["nm", "-D", "--undefined-only" if undefined else "--defined-only", str(library)],
                            capture_output=True, text=True)
    return {line.split()[-1].split("@")[0] for line in listed.stdout.splitlines() if line.strip()}


def _dependencies(library: Path, env: dict[str, str]) -> list[Path]:
    """The shared libraries ``library`` loads, as the dynamic loader finds them (torch's ``lib`` folder added)."""
    import torch

    paths = os.pathsep.join([str(Path(torch.__file__).parent / "lib"), env.get("LIBRARY_PATH", "")])
    listed = subprocess.run(["ldd", str(library)], capture_output=True, text=True,
                            env={**os.environ, "LD_LIBRARY_PATH": paths})
    return [Path(match) for match in re.findall(r"=> (/\S+)", listed.stdout)]


def _demangled(names: list[str]) -> list[str]:
    done = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    readable = done.stdout.splitlines()
    return readable if len(readable) == len(names) else names
