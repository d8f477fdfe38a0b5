"""Benchmark (GPU or CPU host): where one answer's build time and memory go, step by step.

For each ANSWER (an answer text or a `.py` file holding a `load_inline` answer), its extension is built once by
torch in a scratch folder (the answer imported in a subprocess, outside evalkit's sandbox: run it on answers you
trust, such as the curated solutions), which leaves torch's ninja file. Then every command of that file runs again
alone, from a cleaned folder, and is measured:

- its wall time, and the peak resident memory of its largest process (the host compiler's cc1plus, nvcc's cicc or
  ptxas): what one build slot needs, to size the build concurrency from the memory that is free;
- for a CUDA source, nvcc's own phases (`nvcc --time`): the front end (cudafe++, cicc), ptxas, fatbinary and the
  host compile of the translated source (which includes torch's headers);
- the host compile of the C++ source (mostly torch's extension headers: what evalkit's precompiled header
  saves, measured by `benchmarks/build_headers.py`), and the link.

    python benchmarks/build_costs.py ANSWER [ANSWER ...] [--json FILE]

Steps run one at a time on an otherwise quiet machine; say what else ran.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Runs one command and reports its wall time and the peak RSS of its largest process (the wrapper's children).
_MEASURE = ("import json, resource, subprocess, sys, time\n"
            "start = time.monotonic()\n"
            "code = subprocess.run(sys.argv[1], shell=True).returncode\n"
            "print(json.dumps({'wall_s': time.monotonic() - start, 'exit': code,\n"
            "                  'peak_rss_mib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n")


def answer_code(path: Path) -> str:
    """The code evalkit would judge: the answer's final code block, or the file itself when it is Python."""
    if path.suffix == ".py":
        return path.read_text()
    sys.path.insert(0, str(ROOT))
    from evalkit.intake.triage import triage

    code = triage(path.read_text()).code
    if not code:
        sys.exit(f"build_costs.py: {path} holds no code evalkit would judge")
    return code


def build_folder(code: str, scratch: Path) -> Path:
    """Build the answer's extension with torch in ``scratch``; the folder holding its ninja file."""
    (scratch / "answer.py").write_text(code)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(scratch / "extensions"), "MAX_JOBS": "1"}
    done = subprocess.run([sys.executable, "-c", "import runpy; runpy.run_path('answer.py')"], cwd=scratch, env=env,
                          capture_output=True, text=True)
    found = sorted((scratch / "extensions").glob("*/build.ninja"))
    if not found:
        sys.exit(f"build_costs.py: the answer built no extension (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return found[0].parent


def ninja_commands(folder: Path) -> list[str]:
    listed = subprocess.run(["ninja", "-C", str(folder), "-t", "commands"], capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if line.strip()]


def step_kind(command: str) -> str:
    if "nvcc" in command.split()[0] and " -c " in command and ".cu" in command:
        return "nvcc compile (.cu)"
    if " -c " in command:
        return "host compile (.cpp)"
    return "link"


def nvcc_phases(times_csv: Path) -> dict[str, float]:
    """nvcc --time's rows summed by phase (milliseconds)."""
    phases: dict[str, float] = defaultdict(float)
    if not times_csv.exists():
        return {}
    with times_csv.open() as handle:
        for raw in csv.DictReader(handle, skipinitialspace=True):
            row = {(key or "").strip(): (value or "").strip() for key, value in raw.items()}
            name = row.get("phase name") or row.get("phase") or "?"
            try:
                phases[name] += float(row.get("metric") or "0")
            except ValueError:
                continue
    return dict(phases)


def measure_steps(folder: Path, scratch: Path) -> list[dict[str, Any]]:
    subprocess.run(["ninja", "-C", str(folder), "-t", "clean"], capture_output=True, check=True)
    steps = []
    for number, command in enumerate(ninja_commands(folder)):
        kind = step_kind(command)
        times_csv = scratch / f"nvcc-time-{number}.csv"
        run = command + (f" --time {times_csv}" if kind.startswith("nvcc") else "")
        done = subprocess.run([sys.executable, "-c", _MEASURE, run], cwd=folder, capture_output=True, text=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        steps.append({"kind": kind, **figures, "nvcc_phases_ms": nvcc_phases(times_csv)})
    return steps


def report(name: str, total_s: float, steps: list[dict[str, Any]]) -> None:
    print(f"\n{name}: torch's own build {total_s:.1f} s; its steps alone:")
    for step in steps:
        print(f"  {step['kind']:<20} {step['wall_s']:6.1f} s  peak RSS {step['peak_rss_mib']:7.0f} MiB"
              + ("" if step["exit"] == 0 else f"  (exit {step['exit']})"))
        for phase, ms in sorted(step["nvcc_phases_ms"].items(), key=lambda item: -item[1]):
            if ms >= 50:
                print(f"      {phase:<28} {ms / 1000:6.2f} s")
    print(f"  sum of steps {sum(s['wall_s'] for s in steps):.1f} s; largest process "
          f"{max(s['peak_rss_mib'] for s in steps):.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    figures = {}
    for path in args.answers:
        with tempfile.TemporaryDirectory(prefix="evalkit-build-costs-") as scratch_name:
            scratch = Path(scratch_name)
            start = time.monotonic()
            folder = build_folder(answer_code(path), scratch)
            total_s = time.monotonic() - start
            steps = measure_steps(folder, scratch)
        report(str(path), total_s, steps)
        figures[str(path)] = {"torch_build_s": total_s, "steps": steps}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
