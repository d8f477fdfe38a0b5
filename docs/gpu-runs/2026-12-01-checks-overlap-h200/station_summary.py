"""The table of station.sh's runs: each curated solution's speedup vs eager in every run of each tree (in brackets
the judge's time of a call over the answer's own events), how far each tree's runs part (max / min - 1, the first
cold run left out), and new / old of their medians. `python3 station_summary.py ROWS_FOLDER`."""
import json
import statistics
import sys
from pathlib import Path


def main(folder: Path) -> None:
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for path in sorted(folder.glob("run*_*.jsonl"), key=lambda p: int(p.stem[3:].split("_")[0])):
        number, tree = path.stem[3:].split("_")
        if number == "1":
            continue  # the cold run: its builds beside it
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("speedup_vs_eager"):
                ratio = row["timing"]["median_ms"] / (row["timing"].get("claimed_median_ms") or float("nan"))
                rows.setdefault(f"{row['problem'][:28]}/{row['sample'][:24]}", {}).setdefault(tree, []).append(
                    (row["speedup_vs_eager"], ratio))
    print("| answer | old: one judge in the scheduler's process | new: in a judge process of its own | parts by, old; new | new / old, medians |")
    print("| --- | --- | --- | --- | --- |")
    parts: dict[str, list[float]] = {"old": [], "new": []}
    for name, trees in sorted(rows.items()):
        cells, spreads, medians = [], [], {}
        for tree in ("old", "new"):
            runs = trees.get(tree, [])
            cells.append(", ".join(f"{s:.3f} ({r:.3f})" for s, r in runs))
            speedups = [s for s, _ in runs]
            spread = max(speedups) / min(speedups) - 1 if len(speedups) > 1 else float("nan")
            parts[tree].append(spread)
            spreads.append(f"{spread * 100:.1f}%")
            medians[tree] = statistics.median(speedups) if speedups else float("nan")
        print(f"| {name} | {cells[0]} | {cells[1]} | {spreads[0]}; {spreads[1]} | {medians['new'] / medians['old']:.3f} |")
    for tree, values in parts.items():
        values = [v for v in values if v == v]
        if values:
            print(f"{tree}: runs part by {min(values) * 100:.1f}-{max(values) * 100:.1f}%, median {statistics.median(values) * 100:.1f}%")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
