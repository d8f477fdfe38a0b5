"""Reports built from ``results.jsonl``: ``summary.json`` for machines, ``index.html`` for people
(no side of the trust boundary: reads rows only, never torch).

``write_reports`` is the entry point (``evalkit score`` and ``evalkit report`` call it); scores come
from the pure ``evalkit.report.scoring``, pages from ``evalkit.report.html.index_page`` /
``evalkit.report.html.detail_page``; the terminal text forms are in ``evalkit.report.text``.
``summary.json`` follows ``docs/report-schema.md``; bump ``SUMMARY_SCHEMA_VERSION`` whenever a field
changes meaning or is removed.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

from evalkit.host_facts import report_host_facts
from evalkit.report import scoring
from evalkit.report.answer_text import answer_of
from evalkit.report.html.detail_page import render_detail
from evalkit.report.html.index_page import page_names, render_index
from evalkit.report_folder import ReportFolder
from evalkit.results_file import (BASELINES_FILE, ENVIRONMENT_FILE, INDEX_FILE, RESULTS_FILE, RUN_SETTINGS_FILE,
                                  SUMMARY_FILE, read_rows)

logger = logging.getLogger(__name__)

SUMMARY_SCHEMA_VERSION = 3

Row = dict[str, Any]


def build_summary(rows: list[Row], problems: list[str] | None = None, name: str = "",
                  report_host: dict[str, Any] | None = None,
                  judge_host: dict[str, Any] | None = None, asked: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``summary.json``'s content: the scores of ``rows`` plus bookkeeping and the environment.

    ``report_host`` defaults to this process's ``report_host_facts()``; ``judge_host`` is what the
    scoring run recorded in ``environment.json`` (torch, CUDA, GPU, driver), or None when unknown.
    """
    scores = scoring.score_all(rows, problems, asked)
    judged_on = scores.pop("judged_on")
    return {
        "summary_schema_version": SUMMARY_SCHEMA_VERSION,
        "results_schema_versions": sorted({r.get("migrated_from", r.get("schema_version")) for r in rows}
                                           - {None}),
        "report": name,
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "rows": {"read": len(rows), "scored": len(scoring.dedupe(rows))},
        **scores,
        "throughput": throughput((judge_host or {}).get("runs")),
        "environment": {"judged_on": judged_on,
                        "report_host": report_host if report_host is not None else report_host_facts(),
                        "judge_host": judge_host},
    }


def throughput(runs: object) -> dict[str, Any] | None:
    """The scoring runs' wall time and answers per hour (a resumed report: every run added up), and each run's
    GPUs' busy fractions, from ``environment.json``'s ``runs``; None where no run recorded them."""
    runs = [run for run in runs if isinstance(run, dict)] if isinstance(runs, list) else []
    if not runs:
        return None
    wall_s = sum(float(run.get("wall_s") or 0) for run in runs)
    judged = sum(int(run.get("answers_judged") or 0) for run in runs)
    return {"wall_s": round(wall_s, 3), "answers_judged": judged,
            "answers_per_hour": round(judged / wall_s * 3600, 1) if wall_s > 0 else None,
            "gpu_busy": [run.get("gpu_busy") for run in runs], "runs": len(runs)}


def write_reports(report_dir: Path, problems: list[str] | None = None) -> Path:
    """Write ``summary.json``, ``index.html`` and one detail page per row; return the index path.

    ``problems`` are known problem ids to count even without rows (fast_p's denominator). When it is
    None, the known problems recorded in an existing ``summary.json`` are kept, so rebuilding a
    report does not change its scores.
    """
    report_dir = Path(report_dir)
    rows = read_rows(report_dir / RESULTS_FILE)
    known = problems if problems is not None else known_problems(report_dir / SUMMARY_FILE)
    logger.debug("%s: %d row(s) read; %d known problem(s) %s", report_dir / RESULTS_FILE, len(rows),
                 len(known or []), "given" if problems is not None else "kept from the previous summary.json")
    asked = baselines_asked(report_dir / RUN_SETTINGS_FILE)
    summary = build_summary(rows, known, report_dir.resolve().name,
                            judge_host=read_judge_host(report_dir / ENVIRONMENT_FILE), asked=asked)
    _add_measured_baselines(summary, report_dir / BASELINES_FILE, asked)
    scored = scoring.dedupe(rows)
    names = page_names(scored)
    with ReportFolder.open(report_dir, create=False) as folder:  # refused while a run writes the folder
        index = folder.write_pages(summary, render_index(summary, scored, names),
                                   _details(scored, names, bases=[report_dir.resolve().parent.parent]))
    logger.debug("%s: wrote %s, %s and %d detail page(s) for %d scored row(s)", report_dir, SUMMARY_FILE, INDEX_FILE,
                 len(names), len(scored))
    return index


def read_run_settings(path: Path) -> dict[str, Any] | None:
    """What a report's run asked for: ``run.json``'s ``settings`` (the overrides, baselines, device, GPU, evalkit
    version and seed); None without a readable one (a report folder made by hand, or by an older evalkit)."""
    try:
        settings = json.loads(path.read_text(encoding="utf-8")).get("settings")
    except (OSError, ValueError, AttributeError):
        return None
    return settings if isinstance(settings, dict) else None


def baselines_asked(path: Path) -> tuple[str, ...] | None:
    """The baseline kinds a report's run asked for (``run.json``'s ``baselines``); None where it does not say (a
    report folder made by hand, or rows gathered from several runs)."""
    asked = (read_run_settings(path) or {}).get("baselines")
    return tuple(str(kind) for kind in asked) if isinstance(asked, list) else None


def _add_measured_baselines(summary: dict[str, Any], path: Path, asked: tuple[str, ...] | None) -> None:
    """Baselines the run timed for problems whose rows carry none (e.g. every submission had no code)."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for entry in entries.values() if isinstance(entries, dict) else []:
        problem = entry.get("problem") if isinstance(entry, dict) else None
        if problem and problem not in summary["baselines"]:
            summary["baselines"][problem] = scoring.only_asked({k: v for k, v in entry.items() if k != "problem"},
                                                               asked)


def read_judge_host(path: Path) -> dict[str, Any] | None:
    """The judging machine's facts the scoring run wrote to ``environment.json``; None without a readable one."""
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) else None


def known_problems(summary_path: Path) -> list[str] | None:
    try:
        known = json.loads(summary_path.read_text(encoding="utf-8"))["problem_set"]["known"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [str(p) for p in known] if isinstance(known, list) else None


def _details(rows: list[Row], names: dict[tuple[str, str, str], str], bases: list[Path]) -> dict[str, str]:
    """One page per row, by file name; a row without code shows its answer, read back from where it was judged."""
    return {names[scoring.sample_key(row)]: render_detail(row, answer_of(row, bases)
                                                          if row.get("verdict") == "no_code" else None)
            for row in rows}
