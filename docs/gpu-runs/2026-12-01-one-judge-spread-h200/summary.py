"""The tables of this record's README from the rows of its runs: `python3 summary.py FOLDER` (FOLDER holds the
`runN_VARIANT.jsonl` of one call: `evalkit score problems/`'s results.jsonl, not kept here for their size).

Per answer and run: the speedup over eager, the judge's time of a call against the answer's own events (its claim,
recorded around each forward as the in-process method does), the eager baseline's time of a call in the same window,
and what the answer's request took beyond its own events against what the baseline's did (the part subtracted from
both): milliseconds a request."""

import json
import statistics
import sys
from pathlib import Path


def rows_by_answer(folder: Path) -> tuple[list[str], dict[str, dict[str, dict]]]:
    runs, answers = [], {}
    for path in sorted(folder.glob("run*.jsonl"), key=lambda p: int(p.stem[3:].split("_")[0])):
        runs.append(path.stem)
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("speedup_vs_eager") and (row.get("timing") or {}).get("claimed_median_ms"):
                answers.setdefault(f"{row['problem'][:28]}/{row['sample'][:22]}", {})[path.stem] = row
    return runs, answers


def figures(row: dict) -> tuple[float, float, float, float]:
    timing = row["timing"]
    calls = timing["calls_per_request"]
    beyond_answer = (timing["wall_median_ms"] - timing["claimed_median_ms"]) * calls
    return (row["speedup_vs_eager"], timing["median_ms"] / timing["claimed_median_ms"],
            timing["partner"]["median_ms"], beyond_answer - timing["overhead_ms"] * calls)


def main(folder: Path) -> None:
    runs, answers = rows_by_answer(folder)
    print("runs: " + ", ".join(runs) + "\n")
    print("speedup (judge / own events) [eager ms a call] {answer's request beyond its events minus the baseline's, ms}\n")
    print("| answer | calls a request | " + " | ".join(runs) + " | speedups part by |")
    print("| --- | --- | " + " | ".join("---" for _ in runs) + " | --- |")
    for name, by_run in sorted(answers.items()):
        cells, speedups = [], []
        for run in runs:
            if run not in by_run:
                cells.append("-")
                continue
            speedup, ratio, eager_ms, offset_ms = figures(by_run[run])
            speedups.append(speedup)
            cells.append(f"{speedup:.3f} ({ratio:.3f}) [{eager_ms:.3f}] {{{offset_ms:+.2f}}}")
        calls = next(iter(by_run.values()))["timing"]["calls_per_request"]
        print(f"| {name} | {calls} | " + " | ".join(cells) + f" | {(max(speedups) / min(speedups) - 1) * 100:.1f}% |")
    print()
    for variant in sorted({run.split("_", 1)[1] for run in runs}):
        ratios = [figures(by_run[run])[1] for by_run in answers.values() for run in by_run if run.endswith("_" + variant)]
        print(f"{variant}: judge / own events {min(ratios):.3f}-{max(ratios):.3f}, median distance from 1 "
              f"{statistics.median(abs(r - 1) for r in ratios) * 100:.1f}% over {len(ratios)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
