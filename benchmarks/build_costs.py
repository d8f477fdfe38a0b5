"""Benchmark (GPU or CPU host): where one answer's build time goes, step by step, and what each build lever saves.

For each ANSWER (an answer text, or a `.py` file holding a `load_inline` answer), torch writes its extension's
sources and ninja file as it would on a GPU host (`benchmarks/cuda_build.py`: the answer imported in a subprocess,
outside evalkit's sandbox, so run it on answers you trust, such as the curated solutions and the seeds). nvcc can be
PyPI's on a machine without a GPU. Then every command of that file runs alone, from a cleaned folder, and is measured:
its wall time, the CPU time of every process it ran (user + system: what a build costs a core, whatever else the
machine does), and the peak resident memory of its largest process (what one build slot needs). For the `.cu`, nvcc's
own phases (`nvcc --time`, wall): the preprocessing passes, cudafe++ and the host compiler (both parse torch's
headers again), cicc and ptxas (the device code).

Each lever is one variant of the `.cu` compile, measured the same way:

- `arch`: the one architecture of the GPU that runs the answer (`TORCH_CUDA_ARCH_LIST`, which evalkit already
  sets: `builder.extension_env`) against torch's own choice for a visible GPU (that arch +PTX) and a second arch;
- `pch`: the `.cpp` compiled with evalkit's precompiled torch header (`evalkit/judge/torch_headers.py`) or without;
- `host -O0`: the host pass without the answer's optimization level: what the answer's `-O3` costs (not a lever to
  take: it would change the answer's host code);
- `cache key`: what a key over the preprocessed translation unit costs (`nvcc -E` with the same flags, host and
  device), against the compile a cache hit would save.

    python benchmarks/build_costs.py ANSWER [ANSWER ...] [--arch 9.0] [--levers] [--json FILE]

Say what else ran on the machine (`uptime` before and after): wall times follow the load, CPU times much less.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import cuda_build  # noqa: E402 - beside this script
from cuda_build import Step  # noqa: E402


def answer_file(path: Path, scratch: Path) -> Path | None:
    """A `.py` file of the code evalkit would judge: the answer's final code block, or the file itself; None where
    the answer holds no code evalkit would judge."""
    if path.suffix == ".py":
        return path
    sys.path.insert(0, str(ROOT))
    from evalkit.intake.triage import triage

    code = triage(path.read_text()).code
    if not code:
        return None
    written = scratch / "answer.py"
    written.write_text(code)
    return written


def reference_of(answer: Path) -> Path | None:
    """The reference of the problem an answer under ``<run>/<problem-id>/`` answers (``problems/<problem-id>/``)."""
    reference = ROOT / "problems" / answer.resolve().parent.name / "reference.py"
    return reference if reference.exists() else None


def cuda_variant(steps: list[Step], folder: Path, env: dict[str, str], times: Path, old: str, new: str) -> Step:
    """The `.cu` command of ``steps`` run again with ``old`` in it replaced by ``new``."""
    command = next(step.command for step in steps if step.kind == "cuda")
    if old not in command:
        raise ValueError(f"{old!r} not in the .cu command")
    return cuda_build.run_step(command.replace(old, new, 1), folder, env, times)


def arch_flag(arch: str) -> str:
    number = arch.replace(".", "")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def levers(steps: list[Step], folder: Path, env: dict[str, str], scratch: Path, arch: str,
           other_cpp: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """Each lever's variant of the build, measured as the build itself was."""
    flag = arch_flag(arch)
    number = arch.replace(".", "")
    found: dict[str, Any] = {}
    if any(step.kind == "cuda" for step in steps):
        with_ptx = f"{flag} -gencode=arch=compute_{number},code=compute_{number}"
        found["cu: torch's default for a visible GPU (+PTX)"] = cuda_variant(steps, folder, env, scratch / "ptx.csv",
                                                                              flag, with_ptx)
        found["cu: a second arch (8.0)"] = cuda_variant(steps, folder, env, scratch / "two.csv", flag,
                                                        f"-gencode=arch=compute_80,code=sm_80 {flag}")
        found["cu: host -O0 (the answer's -O3 left out)"] = cuda_variant(
            steps, folder, env, scratch / "o0.csv", " -c ", " -Xcompiler -O0 -c ")
        cuda = next(step for step in steps if step.kind == "cuda")
        preprocess = cuda.command.split(" -c ")[0] + " -E " + cuda.command.split(" -c ")[1].split(" -o ")[0]
        found["cache key: nvcc -E (host and device)"] = cuda_build.run_step(preprocess + " -o /dev/null", folder, env)
    cpp = next((step for step in steps if step.kind == "cpp"), None)
    if cpp is not None:
        found[f"cpp: {other_cpp[0]} the precompiled header"] = cuda_build.run_step(cpp.command, folder, other_cpp[1])
    return found


def report(name: str, steps: list[Step], variants: dict[str, Any]) -> None:
    print(f"\n{name}: its steps alone (wall s, CPU s = user+sys of its processes, peak RSS):")
    for step in steps:
        print(f"  {step.kind:<5} {step.wall_s:7.1f} s wall {step.cpu_s:7.1f} CPU-s {step.peak_rss_mib:7.0f} MiB"
              + ("" if step.exit_code == 0 else f"  (exit {step.exit_code}: {step.output[-300:]})"))
        for phase, ms in sorted(step.nvcc_phases_ms.items(), key=lambda item: -item[1]):
            if ms >= 50:
                print(f"        {phase:<26} {ms / 1000:6.1f} s wall")
    print(f"  build: {sum(s.cpu_s for s in steps):.1f} CPU-s; its .cu alone "
          f"{sum(s.cpu_s for s in steps if s.kind == 'cuda'):.1f} CPU-s")
    for lever, step in variants.items():
        print(f"  lever {lever:<46} {step.wall_s:7.1f} s wall {step.cpu_s:7.1f} CPU-s"
              + ("" if step.exit_code == 0 else f"  (exit {step.exit_code})"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", nargs="+", type=Path)
    parser.add_argument("--arch", default="9.0", help="TORCH_CUDA_ARCH_LIST of the build (default 9.0: H100, H200)")
    parser.add_argument("--levers", action="store_true", help="also measure each lever's variant")
    parser.add_argument("--no-pch", action="store_true", help="build the .cpp without the precompiled header")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    home = cuda_build.nvcc_home()
    if home is None:
        sys.exit("build_costs.py: no nvcc (pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl)")
    figures = {}
    with tempfile.TemporaryDirectory(prefix="evalkit-build-costs-") as shared_name:
        env = cuda_build.stand_ins(Path(shared_name), home)
        header = cuda_build.precompiled_header(Path(shared_name) / "builds", home, ROOT, args.arch)
        with_pch = {**env, "CPATH": os.pathsep.join([header, env["CPATH"]])} if header else env
        build_env, other_cpp = (env, ("with", with_pch)) if args.no_pch else (with_pch, ("without", env))
        for path in args.answers:
            with tempfile.TemporaryDirectory(prefix="evalkit-build-costs-") as scratch_name:
                scratch = Path(scratch_name)
                answer = answer_file(path, scratch)
                if answer is None:
                    print(f"\n{path}: no code evalkit would judge, nothing to build")
                    continue
                try:
                    folder = cuda_build.write_build(answer, scratch, args.arch, home, reference_of(path))
                except RuntimeError as err:
                    print(f"\n{path}: {err}")
                    continue
                steps = cuda_build.build_steps(folder, build_env, scratch)
                variants = levers(steps, folder, build_env, scratch, args.arch, other_cpp) if args.levers else {}
            report(str(path), steps, variants)
            figures[str(path)] = {"steps": [asdict(step) for step in steps],
                                  "levers": {name: asdict(step) for name, step in variants.items()}}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
