"""No side of the trust boundary (reads rows only): ``evalkit report``: rebuild a report folder from its rows, or compare two (needs no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evalkit.results_file import RESULTS_FILE


@click.command("report")
@click.argument("report_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--compare", "compare_dirs", nargs=2, default=None, metavar="A B",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Print what changed from report folder A to B (verdicts, speedups moved > 5%, rows in one only).")
@click.option("--json", "as_json", is_flag=True, help="With --compare: print the changes as one JSON object.")
def report_command(report_dir: Path | None, compare_dirs: tuple[Path, Path] | None, as_json: bool) -> None:
    """Rebuild summary.json and index.html of REPORT_DIR from its results.jsonl, judging nothing.

    With --compare A B, compare two report folders' results.jsonl instead, keyed by (run, problem, sample).
    """
    from evalkit.report.run_diff import diff_reports
    from evalkit.report.summary import write_reports
    from evalkit.report.text import format_diff, format_leaderboard

    if compare_dirs:
        if report_dir is not None:
            raise click.UsageError("give either REPORT_DIR or --compare A B, not both")
        before, after = compare_dirs
        _require_results(before)
        _require_results(after)
        diff = diff_reports(before, after)
        click.echo(json.dumps(diff, indent=2) if as_json else format_diff(diff, str(before), str(after)))
        return
    if report_dir is None:
        raise click.UsageError("give a REPORT_DIR to rebuild, or --compare A B")
    _require_results(report_dir)
    index = write_reports(report_dir)
    click.echo(format_leaderboard(json.loads((index.parent / "summary.json").read_text(encoding="utf-8"))))
    click.echo(f"report: {index}")


def _require_results(folder: Path) -> None:
    """A report folder must hold ``results.jsonl``: the one file every report is rebuilt from."""
    if not (folder / RESULTS_FILE).is_file():
        raise click.ClickException(f"{folder}: no {RESULTS_FILE} here, so there is no report to read; give a "
                                   f"report folder that `evalkit score` wrote (reports/<name>-<timestamp>/)")
