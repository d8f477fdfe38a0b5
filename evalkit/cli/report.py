"""No side of the trust boundary (reads rows only): ``evalkit report``: rebuild a report folder from its rows,
export them in KernelBench's shape, or compare two or more report folders (needs no torch).

``evalkit report DIR`` rebuilds DIR's summary.json, index.html and detail pages (``--format text``, the
default, prints the leaderboard; ``--format json`` or ``--json`` the new summary.json). ``evalkit report DIR
--format kernelbench`` writes KernelBench's ``eval_results.json`` instead (``--out FILE``, ``--run``,
``--level``, ``--problems``). ``evalkit report --compare A B [C ...]`` compares report folders, each later
one against the first: the changes as text (``--json``: as JSON), and with ``--out FILE.html`` a
comparison page too.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
from click.core import ParameterSource

from evalkit.cli.console import say, verbosity_options
from evalkit.records import SchemaError
from evalkit.results_file import RESULTS_FILE, SUMMARY_FILE

logger = logging.getLogger(__name__)

FORMATS = ("text", "json", "kernelbench")
DEFAULT_PROBLEMS = Path("problems")
_EXPORT_ONLY = {"run_name": "--run", "level": "--level", "problems_dir": "--problems"}


@click.command("report")
@click.argument("report_dirs", nargs=-1, metavar="REPORT_DIR...",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--compare", is_flag=True,
              help="Compare the report folders (two or more; each later one against the first) instead of "
                   "rebuilding: verdicts flipped, speedups moved > 5%, rows in one only.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="text: print the leaderboard (or the --compare changes) [default]; json: print them as JSON; "
                   "kernelbench: write KernelBench's eval_results.json from the rows instead of rebuilding.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --compare: also write the comparison as one HTML page to this file. With --format "
                   "kernelbench: where eval_results.json goes [REPORT_DIR/eval_results.json].")
@click.option("--run", "run_name", default=None,
              help="With --format kernelbench: the run to export [the one run besides curated].")
@click.option("--level", type=click.IntRange(min=1), default=None,
              help="With --format kernelbench: the KernelBench level to export [the one level of the rows].")
@click.option("--problems", "--problems-dir", "problems_dir", type=click.Path(path_type=Path), default=None,
              envvar="EVALKIT_PROBLEMS",
              help="With --format kernelbench: problem folders whose recorded KernelBench origin numbers the rows "
                   "that carry none [./problems when it exists; $EVALKIT_PROBLEMS].")
@verbosity_options
@click.pass_context
def report_command(ctx: click.Context, report_dirs: tuple[Path, ...], compare: bool, fmt: str | None,
                   as_json: bool, out_file: Path | None, run_name: str | None, level: int | None,
                   problems_dir: Path | None) -> None:
    """Rebuild summary.json and index.html of REPORT_DIR from its results.jsonl, judging nothing.

    --format kernelbench writes REPORT_DIR's rows as KernelBench's eval_results.json (one run of one
    level) instead. With --compare A B [C ...], compare report folders' results.jsonl, keyed by (run,
    problem, sample); --out FILE.html writes the comparison page. Exit 0, 1 when a folder holds no
    results.jsonl or the rows cannot be exported as asked, 2 for a usage error.
    """
    fmt = _format(fmt, as_json)
    _check_usage(report_dirs, compare, out_file, fmt)
    _check_export_options(ctx, fmt)
    for folder in report_dirs:
        _require_results(folder)
    try:
        if compare:
            _compare(list(report_dirs), out_file, fmt == "json")
        elif fmt == "kernelbench":
            _export(report_dirs[0], out_file, run_name, level, _problems_dir(ctx, problems_dir))
        else:
            _rebuild(report_dirs[0], fmt == "json")
    except SchemaError as err:
        raise click.ClickException(str(err)) from None


def _format(fmt: str | None, as_json: bool) -> str:
    """The output format: ``--format``, ``--json`` (its alias for json), else text."""
    if as_json and fmt not in (None, "json"):
        raise click.UsageError(f"--json means --format json, so it cannot go with --format {fmt}; give one of them")
    return "json" if as_json else fmt or "text"


def _check_usage(report_dirs: tuple[Path, ...], compare: bool, out_file: Path | None, fmt: str) -> None:
    """Refuse, as usage errors, the combinations that cannot apply."""
    if not report_dirs:
        raise click.UsageError("give a REPORT_DIR to rebuild, or --compare A B [C ...]")
    if compare and fmt == "kernelbench":
        raise click.UsageError("--format kernelbench exports one report folder; it cannot go with --compare "
                               "(choose text or json)")
    if not compare and len(report_dirs) > 1:
        raise click.UsageError(f"{len(report_dirs)} folders given: rebuild one REPORT_DIR at a time, or add "
                               "--compare to compare them")
    if compare and len(report_dirs) < 2:
        raise click.UsageError("--compare needs two or more report folders: --compare A B [C ...]")
    if out_file is not None and not compare and fmt != "kernelbench":
        raise click.UsageError("--out writes the comparison page: use it with --compare A B [C ...] (or, for "
                               "eval_results.json, with --format kernelbench)")
    seen = [folder.resolve() for folder in report_dirs]
    twice = sorted({str(d) for d, r in zip(report_dirs, seen) if seen.count(r) > 1})
    if twice:
        raise click.UsageError(f"the same report folder is given twice: {', '.join(twice)}")


def _check_export_options(ctx: click.Context, fmt: str) -> None:
    """``--run``, ``--level`` and ``--problems`` (given on the command line) need ``--format kernelbench``."""
    given = [flag for name, flag in _EXPORT_ONLY.items()
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    if given and fmt != "kernelbench":
        raise click.UsageError(f"{', '.join(given)}: only for --format kernelbench (what it exports); add "
                               f"--format kernelbench, or drop {', '.join(given)}")


def _rebuild(folder: Path, as_json: bool) -> None:
    from evalkit.report.summary import write_reports
    from evalkit.report.text import format_leaderboard

    index = write_reports(folder)
    summary = json.loads((index.parent / SUMMARY_FILE).read_text(encoding="utf-8"))
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


def _problems_dir(ctx: click.Context, given: Path | None) -> Path | None:
    """The problems folder to number rows from: the one given (which must exist), else ./problems if any."""
    if given is None:
        return DEFAULT_PROBLEMS if DEFAULT_PROBLEMS.is_dir() else None
    if not given.is_dir():
        where = "$EVALKIT_PROBLEMS" if ctx.get_parameter_source("problems_dir") is ParameterSource.ENVIRONMENT \
            else "--problems"
        raise click.ClickException(f"{where} {given}: no such folder; give the folder of problem folders "
                                   f"(the one `evalkit score` judged against), or leave {where} out")
    return given


def _numbers(problems_dir: Path | None) -> dict[str, tuple[int, int]] | None:
    """{problem id: (KernelBench level, number)} of the problems that record their origin, or None."""
    if problems_dir is None:
        logger.debug("no problems folder: the rows' KernelBench numbers come from the rows alone")
        return None
    from evalkit.sources.kernelbench_layout import kernelbench_numbers
    from evalkit.sources.problems import ProblemError, discover_problems

    try:
        return kernelbench_numbers(discover_problems(problems_dir))
    except ProblemError as err:
        raise click.ClickException(f"{err}\n(the problems folder {problems_dir} numbers the rows for "
                                   f"--format kernelbench; fix it, or give another with --problems DIR)") from err


def _export(folder: Path, out_file: Path | None, run: str | None, level: int | None,
            problems_dir: Path | None) -> None:
    from evalkit.report.kernelbench_export import ExportError, write_eval_results

    numbers = _numbers(problems_dir)
    try:
        written = write_eval_results(folder, out_file, run=run, level=level, numbers=numbers)
    except ExportError as err:
        message = str(err).replace("(run=...)", "with --run NAME").replace("(level=...)", "with --level L")
        raise click.ClickException(message) from err
    except OSError as err:
        raise click.ClickException(f"--out {out_file or folder}: cannot write eval_results.json "
                                   f"({err.strerror or err}); choose another --out FILE") from err
    say(f"eval_results: {written}")


def _require_results(folder: Path) -> None:
    """A report folder must hold ``results.jsonl``: the one file every report is rebuilt from."""
    if not (folder / RESULTS_FILE).is_file():
        raise click.ClickException(f"{folder}: no {RESULTS_FILE} here, so there is no report to read; give a "
                                   f"report folder that `evalkit score` wrote (reports/<name>-<timestamp>/)")
