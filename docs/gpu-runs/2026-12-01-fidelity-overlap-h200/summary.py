"""The tables of this record's README, from its files: `python3 summary.py` in this folder (calls 1-2: each
fidelity.json; call 3: the rows of its runs, `call3_run*_judges*.jsonl` in a folder given as the first argument,
not kept here for their size; its output is call3/summary.txt)."""

import glob
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).parent


def fidelity_table(call: str) -> None:
    found = json.loads((HERE / call / "fidelity.json").read_text())
    print(f"## {call}: speedup vs eager (evalkit / in-process)")
    names = [o["options"] for o in found["against"]]
    print("| answer | in-process | one judge | " + " | ".join(names) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in names) + " |")
    for name, main in sorted(found["answers"].items()):
        entry = main.get("eager")
        if not entry:
            continue
        cells = [f"{statistics.median(entry['in_process']):.3f}", _runs(entry)]
        for other in found["against"]:
            theirs = other["answers"].get(name, {})
            cells.append(_runs(theirs["eager"]) if "eager" in theirs else "verdicts " + ", ".join(theirs.get("verdicts", [])))
        print(f"| {name.split('/')[0][:28]}/{name.split('/')[1][:24]} | " + " | ".join(cells) + " |")
    print()
    for label, answers in [("one judge", found["answers"])] + [(o["options"], o["answers"]) for o in found["against"]]:
        ratios = [a["eager"]["agreement"] for a in answers.values() if "eager" in a]
        spreads = [max(a["eager"]["evalkit"]) / min(a["eager"]["evalkit"]) - 1 for a in answers.values()
                   if "eager" in a and len(a["eager"]["evalkit"]) > 1]
        print(f"{label}: evalkit / in-process {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} answers, median "
              f"distance {statistics.median(abs(r - 1) for r in ratios) * 100:.1f}%"
              + (f"; runs part by {min(spreads) * 100:.1f}-{max(spreads) * 100:.1f}%" if spreads else ""))
    print()


def _runs(entry: dict) -> str:
    return ", ".join(f"{s:.3f}" for s in entry["evalkit"]) + f" ({entry['agreement']:.3f})"


def call3_table(folder: Path) -> None:
    rows: dict[str, list[tuple[str, dict]]] = {}
    for path in sorted(folder.glob("call3_run*_judges*.jsonl")):
        judges = path.stem.rsplit("judges", 1)[1]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(f"{row['problem']}/{row['sample']}", []).append((judges, row))
    print("| answer | one judge: speedups (judge / its own events) | two judges | spread, one judge; two | two / one, medians |")
    print("| --- | --- | --- | --- | --- |")
    for name, runs in sorted(rows.items()):
        cells, medians, spreads = [], [], []
        for judges in ("1", "2"):
            mine = [row for j, row in runs if j == judges and row.get("speedup_vs_eager")]
            speedups = [row["speedup_vs_eager"] for row in mine]
            ratios = [row["timing"]["median_ms"] / row["timing"]["claimed_median_ms"] for row in mine]
            cells.append(", ".join(f"{s:.3f} ({r:.3f})" for s, r in zip(speedups, ratios)))
            medians.append(statistics.median(speedups))
            spreads.append(f"{(max(speedups) / min(speedups) - 1) * 100:.1f}%")
        print(f"| {name.split('/')[0][:28]}/{name.split('/')[1][:24]} | {cells[0]} | {cells[1]} | "
              f"{spreads[0]}; {spreads[1]} | {medians[1] / medians[0]:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        call3_table(Path(sys.argv[1]))
    else:
        fidelity_table("call1")
        fidelity_table("call2")
