"""Benchmark (CPU or GPU host): what torch's precompiled extension header saves one answer's build.

Builds ANSWER (a file holding a load_inline answer; by default the C++ fixture answer) through evalkit's own build
stage (the sandbox, limits and cache key of ``evalkit score``) into a fresh build folder, RUNS times with the
precompiled header and RUNS times without it, alternating, and prints each series' min, median and max and the
ratio of the medians. The header itself is precompiled once first (its cost is printed apart: it is paid once per
cache). Builds run one at a time; run it on a quiet machine, or say what else ran.

    python benchmarks/build_headers.py [--answer FILE] [--device cpu|cuda] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ANSWER = ROOT / "tests" / "fixtures" / "judge_submissions" / "fixtures" / "linear_relu" / "correct_cpp.py"


def _build_once(code: str, device: str, headers: Path | None) -> float:
    from evalkit.judge import torch_headers
    from evalkit.judge.builder import build
    from evalkit.schedule.options import default_limits

    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as scratch:
        os.environ[torch_headers.HEADERS_ENV] = str(headers if headers else Path(scratch) / "no-headers")
        if headers is None:  # a folder noted unusable: builds get no precompiled header, as before
            folder = torch_headers.headers_folder(Path(scratch) / "builds", device)
            (folder / torch_headers.UNUSABLE).write_text("benchmark: without\n")
        outcome = build(code, Path(scratch) / "builds", device, 1800, default_limits(device, None))
    if outcome.status != "ok":
        raise SystemExit(f"the build failed ({outcome.status}): {outcome.log_tail[-2000:]}")
    return outcome.seconds


def _line(name: str, seconds: list[float]) -> str:
    return (f"{name:<8} min {min(seconds):6.1f} s  median {statistics.median(seconds):6.1f} s  "
            f"max {max(seconds):6.1f} s  ({len(seconds)} builds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", type=Path, default=DEFAULT_ANSWER)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from evalkit.intake.triage import triage
    from evalkit.judge import torch_headers

    code = triage(args.answer.read_text()).code
    with tempfile.TemporaryDirectory(prefix="evalkit-headers-") as headers:
        os.environ[torch_headers.HEADERS_ENV] = headers
        start = time.monotonic()
        made = torch_headers.ensure(Path(headers) / "unused", args.device)
        if made is None:
            raise SystemExit("torch's header could not be precompiled here (see the log above)")
        print(f"precompiling the header (once per cache): {time.monotonic() - start:.1f} s, "
              f"{sum(p.stat().st_size for p in made.rglob('*.gch')) / 1e9:.2f} GB")
        with_header, without = [], []
        for _ in range(args.runs):
            with_header.append(_build_once(code, args.device, Path(headers)))
            without.append(_build_once(code, args.device, None))
    print(_line("with", with_header))
    print(_line("without", without))
    print(f"median build with the precompiled header / without: "
          f"{statistics.median(with_header) / statistics.median(without):.2f}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
