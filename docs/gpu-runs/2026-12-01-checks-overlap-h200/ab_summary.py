"""Call A's table: each run's steps (wall time, rewards a minute, the count of correct verdicts, the stages the
change moves, the server's memory, the GPU's peak), by the answer-pings record's table. `python3 ab_summary.py` in
this folder."""
import importlib.util
from pathlib import Path

HERE = Path(__file__).parent
STAGES = ("timing_s", "checks_s", "profile_s", "correctness_s", "load_s", "setup_s")


def main() -> None:
    spec = importlib.util.spec_from_file_location("summary", HERE.parent / "2026-12-01-answer-pings-h200" / "summary.py")
    assert spec is not None and spec.loader is not None
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    runs = sorted(HERE.glob("a_*.json"), key=lambda p: (p.stem != "a_cold", int("".join(c for c in p.stem if c.isdigit()) or 0)))
    summary.steps_table(runs, STAGES)


if __name__ == "__main__":
    main()
