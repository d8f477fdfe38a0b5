"""No side of the trust boundary (reads rows only): ``evalkit report``: rebuild a report folder from its rows,
or compare two or more (needs no torch).

``evalkit report DIR`` rebuilds DIR's summary.json, index.html and detail pages. ``evalkit report --compare
A B [C ...]`` compares report folders, each later one against the first: the changes as text (``--json``:
as JSON), and with ``--out FILE.html`` a comparison page too.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from evalkit.cli.console import say, verbosity_options
from evalkit.results_file import RESULTS_FILE

logger = logging.getLogger(__name__)


@click.command("report")
@click.argument("report_dirs", nargs=-1, metavar="REPORT_DIR...",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--compare", is_flag=True,
              help="Compare the report folders (two or more; each later one against the first) instead of "
                   "rebuilding: verdicts flipped, speedups moved > 5%, rows in one only.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --compare: also write the comparison as one HTML page to this file.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON on stdout: the rebuilt summary.json, or with --compare the changes.")
@verbosity_options
def report_command(report_dirs: tuple[Path, ...], compare: bool, out_file: Path | None, as_json: bool) -> None:
    """Rebuild summary.json and index.html of REPORT_DIR from its results.jsonl, judging nothing.

    With --compare A B [C ...], compare report folders' results.jsonl instead, keyed by (run, problem,
    sample); --out FILE.html writes the comparison page. Exit 0, 1 when a folder holds no results.jsonl,
    2 for a usage error.
    """
    _check_usage(report_dirs, compare, out_file)
    for folder in report_dirs:
        _require_results(folder)
    if compare:
        _compare(list(report_dirs), out_file, as_json)
    else:
        _rebuild(report_dirs[0], as_json)


def _check_usage(report_dirs: tuple[Path, ...], compare: bool, out_file: Path | None) -> None:
    """Refuse, as usage errors, the combinations that cannot apply."""
    if not report_dirs:
        raise click.UsageError("give a REPORT_DIR to rebuild, or --compare A B [C ...]")
    if not compare and len(report_dirs) > 1:
        raise click.UsageError(f"{len(report_dirs)} folders given: rebuild one REPORT_DIR at a time, or add "
                               "--compare to compare them")
    if compare and len(report_dirs) < 2:
        raise click.UsageError("--compare needs two or more report folders: --compare A B [C ...]")
    if out_file is not None and not compare:
        raise click.UsageError("--out writes the comparison page: use it with --compare A B [C ...]")
    seen = [folder.resolve() for folder in report_dirs]
    twice = sorted({str(d) for d, r in zip(report_dirs, seen) if seen.count(r) > 1})
    if twice:
        raise click.UsageError(f"the same report folder is given twice: {', '.join(twice)}")


def _rebuild(folder: Path, as_json: bool) -> None:
    from evalkit.report.summary import write_reports
    from evalkit.report.text import format_leaderboard

    index = write_reports(folder)
    summary = json.loads((index.parent / "summary.json").read_text(encoding="utf-8"))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        say(format_leaderboard(summary))
    say(f"report: {index}", err=as_json)


def _compare(folders: list[Path], out_file: Path | None, as_json: bool) -> None:
    from evalkit.report.run_diff import diff_many
    from evalkit.report.text import format_diff

    diffs = diff_many(folders)
    if as_json:
        click.echo(json.dumps(diffs[0] if len(diffs) == 1 else diffs, indent=2))
    else:
        say("\n\n".join(format_diff(d, d["before"], d["after"]) for d in diffs))
    if out_file is not None:
        from evalkit.report.compare import write_comparison

        try:
            page = write_comparison(folders, out_file)
        except OSError as err:
            raise click.ClickException(f"--out {out_file}: cannot write the comparison page "
                                       f"({err.strerror or err}); choose another file") from err
        say(f"comparison: {page}", err=as_json)


def _require_results(folder: Path) -> None:
    """A report folder must hold ``results.jsonl``: the one file every report is rebuilt from."""
    if not (folder / RESULTS_FILE).is_file():
        raise click.ClickException(f"{folder}: no {RESULTS_FILE} here, so there is no report to read; give a "
                                   f"report folder that `evalkit score` wrote (reports/<name>-<timestamp>/)")
