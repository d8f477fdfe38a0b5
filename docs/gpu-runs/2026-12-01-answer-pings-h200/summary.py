"""Print this record's table: each run's steps (wall time, rewards a minute, the verdicts, the stages this record's
changes move, the server's memory, the GPU's peak). `python3 summary.py` in this folder."""
import json
import sys
from pathlib import Path

STAGES = ("calibrate_s", "baseline_s", "setup_s", "profile_s", "timing_s")


def main() -> None:
    runs = sorted(Path(__file__).parent.glob("[abc]_*.json"), key=lambda p: (p.name[0], p.name != f"{p.name[0]}_cold.json",
                                                                             int("".join(c for c in p.stem if c.isdigit()) or 0)))
    steps_table(runs, STAGES)


def steps_table(runs: list[Path], stages: tuple[str, ...]) -> None:
    """The table's rows of ``runs`` (rl_step --json files), with the stages ``stages`` (also used by later records)."""
    print("run | step | wall s | rewards/min | correct | " + " | ".join(stages) + " | server MiB | GPU max GiB")
    for path in runs:
        for number, step in enumerate(json.loads(path.read_text())["steps"], 1):
            seconds = step["stage_seconds"]
            print(f"{path.stem} | {number} | {step['wall_s']:.1f} | {step['rewards_per_minute']:.1f} | "
                  f"{step['verdicts'].get('correct', 0)} | " + " | ".join(f"{seconds.get(s, 0):.1f}" for s in stages)
                  + f" | {step['server_rss_mib']:.0f} | {step['gpu']['memory_mib_max'] / 1024:.1f}")




def speedups_against(prefix: str) -> None:
    """Each answer's speedup in the new runs against the old runs of one call (the medians of each tree's steps)."""
    import statistics
    trees: dict[str, dict[str, list[float]]] = {"new": {}, "old": {}}
    for path in Path(__file__).parent.glob(f"{prefix}_*.json"):
        tree = "new" if "new" in path.stem else "old" if "old" in path.stem else None
        if tree is None:
            continue
        for step in json.loads(path.read_text())["steps"]:
            for answer, (value, *_interval) in dict(step["speedups"]).items():
                trees[tree].setdefault(answer, []).append(value)
    moved = sorted(statistics.median(trees["new"][a]) / statistics.median(trees["old"][a]) - 1
                   for a in trees["new"] if a in trees["old"])
    print(f"call {prefix.upper()}: new against old, {len(moved)} answers: median {statistics.median(moved):+.1%}, "
          f"{moved[0]:+.1%} to {moved[-1]:+.1%}")


if __name__ == "__main__":
    main()
    for call in "abc":
        speedups_against(call)
