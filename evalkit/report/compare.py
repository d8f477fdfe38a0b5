"""The HTML comparison of two or more report folders (no side of the trust boundary: reads rows only,
never torch): ``evalkit report --compare A B [C ...] --out compare.html``.

Each folder is scored afresh from its ``results.jsonl`` (its ``summary.json`` only lends the known
problems, as ``evalkit report`` does), so the pages agree with ``--compare``'s text and JSON, which
come from the same ``run_diff``. The first folder is the one every other is compared with.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from evalkit.report import scoring
from evalkit.report.html.compare_page import ComparedReport, render_comparison
from evalkit.report.html.parts import PageNames, page_names
from evalkit.report.run_diff import diff_many
from evalkit.report.summary import baselines_asked, known_problems, read_judge_host, read_run_settings
from evalkit.results_file import (DETAIL_DIR, ENVIRONMENT_FILE, INDEX_FILE, RESULTS_FILE, RUN_SETTINGS_FILE,
                                  SUMMARY_FILE, read_rows, write_file)

logger = logging.getLogger(__name__)

Row = dict[str, Any]


def labels_for(folders: list[Path]) -> list[str]:
    """Each folder's name; the path as given where two folders share a name."""
    names = [Path(f).resolve().name for f in folders]
    return [str(f) if names.count(name) > 1 else name for f, name in zip(folders, names)]


def _link(target: Path, page_dir: Path) -> str | None:
    return Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix() if target.is_file() else None


def _detail_links(folder: Path, names: PageNames, page_dir: Path) -> dict[tuple[str, str, str], str]:
    """Links to the detail pages that exist (a report not rebuilt since its rows changed may lack some)."""
    links = {}
    for key, name in names.items():
        link = _link(folder / DETAIL_DIR / name, page_dir)
        if link:
            links[key] = link
    return links


def load_report(folder: Path, label: str, page_dir: Path) -> ComparedReport:
    rows = scoring.dedupe(read_rows(folder / RESULTS_FILE))
    scores = scoring.score_all(rows, known_problems(folder / SUMMARY_FILE), baselines_asked(folder / RUN_SETTINGS_FILE))
    logger.debug("%s: %d row(s), %d problem(s)", folder, len(rows), scores["problem_set"]["count"])
    return ComparedReport(label, folder, rows, scores, read_judge_host(folder / ENVIRONMENT_FILE),
                          read_run_settings(folder / RUN_SETTINGS_FILE), _link(folder / INDEX_FILE, page_dir),
                          _detail_links(folder, page_names(rows), page_dir))


def write_comparison(folders: list[Path], out: Path) -> Path:
    """Write the comparison page of ``folders`` (the first is the reference) to ``out``; return its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    reports = [load_report(Path(f), label, out.parent) for f, label in zip(folders, labels_for(folders))]
    write_file(out, render_comparison(reports, diff_many([Path(f) for f in folders])))
    return out
