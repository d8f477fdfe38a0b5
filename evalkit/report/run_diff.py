"""What changed between two reports (no side of the trust boundary: reads rows only, never torch).

``diff_rows`` compares two sets of ``results.jsonl`` rows keyed by (run, problem, sample): verdicts
that flipped, speedups that moved (by more than ``SPEEDUP_CHANGE``, with 95% intervals that do not overlap,
or appeared/disappeared), and rows present in only one of the two. A move over ``SPEEDUP_CHANGE`` whose two
intervals overlap is no change: it is listed apart, as within the intervals; rows without intervals (schema
2 and earlier) move by ``SPEEDUP_CHANGE`` alone. ``evalkit report --compare A B`` prints it (``evalkit.report.text.format_diff``);
with more folders, each later one is compared with the first (``diff_many``). ``change_kinds`` says, per
key, what changed in any of them: what the HTML comparison (``evalkit.report.compare``) filters on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.report import scoring
from evalkit.results_file import RESULTS_FILE, read_rows

SPEEDUP_CHANGE = 0.05  # --compare reports speedups that moved by more than this fraction

Row = dict[str, Any]


def diff_rows(before: list[Row], after: list[Row], threshold: float = SPEEDUP_CHANGE) -> dict[str, Any]:
    """What changed between two sets of rows, keyed by (run, problem, sample). Pure."""
    old = {scoring.sample_key(r): r for r in scoring.dedupe(before)}
    new = {scoring.sample_key(r): r for r in scoring.dedupe(after)}
    flipped: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    within: list[dict[str, Any]] = []
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        if a.get("verdict") != b.get("verdict"):
            flipped.append({"key": list(key), "before": a.get("verdict"), "after": b.get("verdict")})
            continue
        for base in scoring.BASELINES:
            x, y = scoring.speedup_of(a, base), scoring.speedup_of(b, base)
            if (x is None) == (y is None) and not (x and y and abs(y / x - 1) > threshold):
                continue
            apart = intervals_apart(a, b, base)
            (within if apart is False else moved).append(
                {"key": list(key), "baseline": base, "before": x, "after": y, "change": (y / x - 1) if x and y else None,
                 "before_ci": scoring.speedup_interval(a, base), "after_ci": scoring.speedup_interval(b, base),
                 "intervals_apart": apart})
    return {"verdicts_flipped": flipped, "speedups_moved": moved, "speedups_within_intervals": within,
            "only_before": [{"key": list(k), "verdict": old[k].get("verdict")} for k in sorted(old.keys() - new.keys())],
            "only_after": [{"key": list(k), "verdict": new[k].get("verdict")} for k in sorted(new.keys() - old.keys())],
            "unchanged": len(old.keys() & new.keys()) - len(flipped) - len({tuple(m["key"]) for m in moved})}


def intervals_apart(before: Row, after: Row, baseline: str) -> bool | None:
    """Whether the two rows' 95% speedup intervals against ``baseline`` do not overlap (intervals that touch
    overlap); None when either row has none (schema 2 and earlier, or a speedup that appeared)."""
    a, b = scoring.speedup_interval(before, baseline), scoring.speedup_interval(after, baseline)
    if a is None or b is None:
        return None
    return a[1] < b[0] or b[1] < a[0]


def diff_reports(before_dir: Path, after_dir: Path) -> dict[str, Any]:
    """``diff_rows`` of two report folders' ``results.jsonl``, naming the folders (``before``, ``after``)."""
    diff = diff_rows(read_rows(Path(before_dir) / RESULTS_FILE), read_rows(Path(after_dir) / RESULTS_FILE))
    return {"before": str(before_dir), "after": str(after_dir), **diff}


def diff_many(folders: list[Path]) -> list[dict[str, Any]]:
    """``diff_reports`` of the first folder against each later one."""
    return [diff_reports(folders[0], other) for other in folders[1:]]


CHANGE_KINDS = ("verdict", "speedup", "only", "same")


def change_kinds(keys: list[tuple[str, str, str]], diffs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """For each key, what changed against the first report in any diff: ``verdict`` (flipped), ``speedup``
    (moved), ``only`` (missing from some report), or ``same``; in ``CHANGE_KINDS`` order."""
    found: dict[tuple[str, str, str], set[str]] = {key: set() for key in keys}
    for diff in diffs:
        for kind, entries in (("verdict", diff["verdicts_flipped"]), ("speedup", diff["speedups_moved"]),
                              ("only", diff["only_before"] + diff["only_after"])):
            for entry in entries:
                found.setdefault(tuple(entry["key"]), set()).add(kind)
    return {key: [k for k in CHANGE_KINDS if k in kinds] or ["same"] for key, kinds in found.items()}
