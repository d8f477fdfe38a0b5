"""Call A's table: each run's steps (wall time, rewards a minute, the verdicts' count of correct, the stages the
change moves, the server's memory, the GPU's peak). `python3 ab_summary.py` in this folder."""
import json
from pathlib import Path

STAGES = ("timing_s", "checks_s", "profile_s", "correctness_s", "load_s", "setup_s")


def main() -> None:
    runs = sorted(Path(__file__).parent.glob("a_*.json"), key=lambda p: (p.stem != "a_cold", int("".join(c for c in p.stem if c.isdigit()) or 0)))
    print("run | step | wall s | rewards/min | correct | " + " | ".join(STAGES) + " | server MiB | GPU max GiB")
    for path in runs:
        for number, step in enumerate(json.loads(path.read_text())["steps"], 1):
            stages = step["stage_seconds"]
            print(f"{path.stem} | {number} | {step['wall_s']:.1f} | {step['rewards_per_minute']:.1f} | "
                  f"{step['verdicts'].get('correct', 0)} | " + " | ".join(f"{stages.get(s, 0):.1f}" for s in STAGES)
                  + f" | {step['server_rss_mib']:.0f} | {step['gpu']['memory_mib_max'] / 1024:.1f}")


if __name__ == "__main__":
    main()
