"""Reports built from ``results.jsonl``: ``summary.json`` for machines, ``index.html`` for people.

``write_reports`` is the entry point (``evalkit score`` and ``evalkit report`` call it); scores come
from the pure ``evalkit.report.scoring``, pages from ``evalkit.report.html.index_page`` / ``evalkit.report.html.detail_page``.
``summary.json`` follows ``docs/report-schema.md``; bump ``SUMMARY_SCHEMA_VERSION`` whenever a field
changes meaning or is removed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from evalkit.report import scoring
from evalkit.judge.environment import environment
from evalkit.report.html.detail_page import render_detail
from evalkit.report.html.index_page import page_names, render_index
from evalkit.judge.baselines import BASELINES_FILE
from evalkit.results_file import RESULTS_FILE, SUMMARY_FILE, read_rows

SUMMARY_SCHEMA_VERSION = 1
INDEX_FILE = "index.html"
DETAIL_DIR = "submissions"
SPEEDUP_CHANGE = 0.05  # --compare reports speedups that moved by more than this fraction

Row = dict[str, Any]


def build_summary(rows: list[Row], problems: list[str] | None = None, name: str = "",
                  host: dict[str, Any] | None = None) -> dict[str, Any]:
    """``summary.json``'s content: the scores of ``rows`` plus bookkeeping and the environment."""
    scores = scoring.score_all(rows, problems)
    judged_on = scores.pop("judged_on")
    return {
        "summary_schema_version": SUMMARY_SCHEMA_VERSION,
        "results_schema_versions": sorted({r.get("schema_version") for r in rows if r.get("schema_version") is not None}),
        "report": name,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "rows": {"read": len(rows), "scored": len(scoring.dedupe(rows))},
        **scores,
        "environment": {"judged_on": judged_on, "report_host": host if host is not None else environment()},
    }


def write_reports(report_dir: Path, problems: list[str] | None = None) -> Path:
    """Write ``summary.json``, ``index.html`` and one detail page per row; return the index path.

    ``problems`` are known problem ids to count even without rows (fast_p's denominator). When it is
    None, the known problems recorded in an existing ``summary.json`` are kept, so rebuilding a
    report does not change its scores.
    """
    report_dir = Path(report_dir)
    rows = read_rows(report_dir / RESULTS_FILE)
    known = problems if problems is not None else _known_problems(report_dir / SUMMARY_FILE)
    summary = build_summary(rows, known, report_dir.resolve().name)
    _add_measured_baselines(summary, report_dir / BASELINES_FILE)
    scored = scoring.dedupe(rows)
    names = page_names(scored)
    _write_text(report_dir / SUMMARY_FILE, json.dumps(summary, indent=2, allow_nan=False) + "\n")
    _write_details(report_dir / DETAIL_DIR, scored, names)
    index = report_dir / INDEX_FILE
    _write_text(index, render_index(summary, scored, names))
    return index


def _add_measured_baselines(summary: dict[str, Any], path: Path) -> None:
    """Baselines the run timed for problems whose rows carry none (e.g. every submission had no code)."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for entry in entries.values() if isinstance(entries, dict) else []:
        problem = entry.get("problem") if isinstance(entry, dict) else None
        if problem and problem not in summary["baselines"]:
            summary["baselines"][problem] = {k: v for k, v in entry.items() if k != "problem"}


def _known_problems(summary_path: Path) -> list[str] | None:
    try:
        known = json.loads(summary_path.read_text(encoding="utf-8"))["problem_set"]["known"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(p) for p in known] if isinstance(known, list) else None


def _write_details(folder: Path, rows: list[Row], names: dict[tuple[str, str, str], str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        _write_text(folder / names[scoring.sample_key(row)], render_detail(row))
    current = set(names.values())
    for stale in folder.glob("*.html"):
        if stale.name not in current:
            stale.unlink()


def _write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def format_leaderboard(summary: dict[str, Any]) -> str:
    """A compact text table of ``summary`` (one line per run, then overall) for the terminal."""
    heads = ("run", "subs", "code", "compiled", "correct", "fast_1 eager", "fast_1 compile", "geomean eager",
             "geomean compile")
    lines = [heads]
    for name, s in [*summary["runs"].items(), ("overall", summary["overall"])]:
        geo = s["geomean_speedup"]
        lines.append((name, str(s["submissions"]), _pct(s["rates"]["code_extracted"]), _pct(s["rates"]["compiled"]),
                      _pct(s["rates"]["correct"]), _pct(s["fast_p"]["eager"]["1"]), _pct(s["fast_p"]["compile"]["1"]),
                      _x(geo["eager"]["value"]), _x(geo["compile"]["value"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(heads))]
    text = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    count = summary["problem_set"]["count"]
    text.append(f"fast_p over {count} problem(s); rows flagged {', '.join(summary['excluded_flags'])} never count as fast")
    return "\n".join(text)


def compare_rows(before: list[Row], after: list[Row], threshold: float = SPEEDUP_CHANGE) -> dict[str, Any]:
    """What changed between two sets of rows, keyed by (run, problem, sample). Pure."""
    old = {scoring.sample_key(r): r for r in scoring.dedupe(before)}
    new = {scoring.sample_key(r): r for r in scoring.dedupe(after)}
    flipped, moved = [], []
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        if a.get("verdict") != b.get("verdict"):
            flipped.append({"key": list(key), "before": a.get("verdict"), "after": b.get("verdict")})
            continue
        for base in scoring.BASELINES:
            x, y = scoring.speedup_of(a, base), scoring.speedup_of(b, base)
            if (x is None) != (y is None) or (x and y and abs(y / x - 1) > threshold):
                moved.append({"key": list(key), "baseline": base, "before": x, "after": y,
                              "change": (y / x - 1) if x and y else None})
    return {"verdicts_flipped": flipped, "speedups_moved": moved,
            "only_before": [{"key": list(k), "verdict": old[k].get("verdict")} for k in sorted(old.keys() - new.keys())],
            "only_after": [{"key": list(k), "verdict": new[k].get("verdict")} for k in sorted(new.keys() - old.keys())],
            "unchanged": len(old.keys() & new.keys()) - len(flipped) - len({tuple(m["key"]) for m in moved})}


def compare_reports(before_dir: Path, after_dir: Path) -> dict[str, Any]:
    """``compare_rows`` of two report folders' ``results.jsonl``."""
    return compare_rows(read_rows(Path(before_dir) / RESULTS_FILE), read_rows(Path(after_dir) / RESULTS_FILE))


def format_comparison(diff: dict[str, Any], before: str = "A", after: str = "B") -> str:
    """``compare_rows``'s result as text lines, one change per line."""
    name = "/".join
    lines = [f"comparing {before} -> {after}"]
    lines += [f"verdict  {name(d['key'])}: {d['before']} -> {d['after']}" for d in diff["verdicts_flipped"]]
    for d in diff["speedups_moved"]:
        change = f" ({100 * d['change']:+.1f}%)" if d["change"] is not None else ""
        lines.append(f"speedup  {name(d['key'])} vs {d['baseline']}: {_x(d['before'])} -> {_x(d['after'])}{change}")
    lines += [f"only in {before}: {name(d['key'])} ({d['verdict']})" for d in diff["only_before"]]
    lines += [f"only in {after}: {name(d['key'])} ({d['verdict']})" for d in diff["only_after"]]
    lines.append(f"{len(diff['verdicts_flipped'])} verdict(s) flipped, {len(diff['speedups_moved'])} speedup(s) moved "
                 f"by more than {100 * SPEEDUP_CHANGE:.0f}%, {len(diff['only_before'])} only in {before}, "
                 f"{len(diff['only_after'])} only in {after}, {diff['unchanged']} unchanged")
    return "\n".join(lines)
