"""The command line: a thin layer over the library (``evalkit --help``)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections import Counter
from pathlib import Path

import click

from evalkit import __version__
from evalkit.cli.problems import problems
from evalkit.intake.extract import extract
from evalkit.sources.textio import UnreadableText, read_text


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="evalkit")
@click.option("-v", "--verbose", is_flag=True, help="Log debug details to stderr.")
def main(verbose: bool) -> None:
    """Judge LLM-written custom-kernel ModelNew answers against KernelBench-style problems."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


main.add_command(problems)


@main.command("extract")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the diagnostics.")
def extract_command(file: Path, as_json: bool) -> None:
    """Print the ModelNew code that FILE's answer contains (exit 1 when there is none)."""
    try:
        text, warnings = read_text(file)
    except UnreadableText as err:
        if as_json:
            click.echo(json.dumps({"ok": False, "reason": str(err), "code": "", "truncated": False,
                                   "block": None, "candidates": [], "warnings": []}))
        else:
            click.echo(f"error: {err}", err=True)
        sys.exit(1)
    result = extract(text)
    result.warnings.extend(warnings)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif result.ok:
        click.echo(result.code, nl=not result.code.endswith("\n"))
        for warning in result.warnings:
            click.echo(f"warning: {warning}", err=True)
    else:
        click.echo(f"no code: {result.reason}", err=True)
    sys.exit(0 if result.ok else 1)


def _default_out(submissions: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / f"{submissions.resolve().name}-{stamp}"


def _latest_out(submissions: Path) -> Path | None:
    candidates = sorted(Path("reports").glob(f"{submissions.resolve().name}-*"))
    return candidates[-1] if candidates else None


@main.command("score")
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--problems", "problems_dir", type=click.Path(path_type=Path), default=Path("problems"),
              show_default=True, envvar="EVALKIT_PROBLEMS", help="Folder of problem folders.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Report folder [default: reports/<submissions>-<timestamp>; with --resume, the latest one].")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True)
@click.option("--jobs", type=click.IntRange(min=0), default=0, help="Parallel builds [default: min(8, cores)].")
@click.option("--trials", type=click.IntRange(min=1), default=None, help="Correctness trials [problem.toml, 5].")
@click.option("--timing-trials", type=click.IntRange(min=1), default=None, help="Timed calls [problem.toml, 50].")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up calls before timing.")
@click.option("--atol", type=click.FloatRange(min=0), default=None, help="Absolute tolerance [problem.toml, 1e-2].")
@click.option("--rtol", type=click.FloatRange(min=0), default=None, help="Relative tolerance [problem.toml, 1e-2].")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=None,
              help="Seconds allowed per judging stage (load, correctness, timing) [problem.toml, 300].")
@click.option("--build-timeout", "build_timeout_s", type=click.FloatRange(min=1), default=None,
              help="Seconds allowed for building one submission [problem.toml, 900].")
@click.option("--seed", type=int, default=None, help="Base seed for inputs and weights [random, recorded].")
@click.option("--baselines", default="eager,compile", show_default=True,
              help="PyTorch baselines to time: any of eager,compile, or 'none'.")
@click.option("--resume", is_flag=True, help="Skip submissions already judged in the report folder.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, envvar="EVALKIT_CACHE",
              help="Where builds are cached [~/.cache/evalkit].")
@click.option("--memory-gib", type=click.FloatRange(min=0.5), default=None, help="Host memory limit per submission.")
def score_command(submissions: Path, problems_dir: Path, out_dir: Path | None, resume: bool, baselines: str,
                  cache_dir: Path | None, **options: object) -> None:
    """Extract, build, check and time every submission in SUBMISSIONS; write results.jsonl and summary.json.

    SUBMISSIONS is a folder of runs (<run>/<problem-id>/<sample>.txt), one run folder, one file, or a
    <run>.jsonl manifest. The exit code says whether the run worked, not whether submissions passed.
    """
    from tqdm import tqdm

    from evalkit.sources.problems import ProblemError
    from evalkit.report.summary import format_leaderboard, write_reports
    from evalkit.schedule.local import ScoreOptions, default_cache_dir, score
    from evalkit.sources.submissions import SubmissionError

    if out_dir is None:
        out_dir = (_latest_out(submissions) if resume else None) or _default_out(submissions)
    kinds = tuple(k for k in baselines.split(",") if k and k != "none")
    unknown = [k for k in kinds if k not in ("eager", "compile")]
    if unknown:
        raise click.BadParameter(f"unknown baseline(s) {unknown}; choose from eager, compile, none", param_hint="--baselines")
    opts = ScoreOptions(submissions=submissions, problems_dir=problems_dir, out_dir=out_dir, resume=resume,
                        baselines=kinds, cache_dir=cache_dir or default_cache_dir(), **options)
    bar = tqdm(total=0, unit="sub", desc="evalkit", dynamic_ncols=True, file=sys.stderr)

    def on_progress(stage: str, counts: Counter) -> None:
        if counts:
            bar.update(1)
            bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), refresh=False)
        bar.set_description_str(stage[:60])

    def on_total(total: int) -> None:
        bar.total = total
        bar.refresh()

    try:
        outcome = score(opts, progress=on_progress, total_hook=on_total)
    except (ProblemError, SubmissionError, FileExistsError, RuntimeError) as err:
        raise click.ClickException(str(err)) from err
    finally:
        bar.close()
    html = write_reports(outcome.out_dir, problems=outcome.problems)
    summary = json.loads((outcome.out_dir / "summary.json").read_text())
    click.echo(format_leaderboard(summary))
    click.echo(f"judged {outcome.judged} submission(s) on {outcome.device}"
               + (f", {outcome.skipped_resume} already in the report" if outcome.skipped_resume else "")
               + ": " + ", ".join(f"{k} {v}" for k, v in sorted(outcome.counts.items())))
    for note in outcome.notes:
        click.echo(f"note: {note}")
    click.echo(f"results: {outcome.out_dir / 'results.jsonl'}")
    click.echo(f"report:  {html}")


@main.command("report")
@click.argument("report_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--compare", "compare_dirs", nargs=2, default=None, metavar="A B",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Print what changed from report folder A to B (verdicts, speedups moved > 5%, rows in one only).")
@click.option("--json", "as_json", is_flag=True, help="With --compare: print the changes as one JSON object.")
def report_command(report_dir: Path | None, compare_dirs: tuple[Path, Path] | None, as_json: bool) -> None:
    """Rebuild summary.json and index.html of REPORT_DIR from its results.jsonl, judging nothing.

    With --compare A B, compare two report folders' results.jsonl instead, keyed by (run, problem, sample).
    """
    from evalkit.report.summary import compare_reports, format_comparison, format_leaderboard, write_reports

    if compare_dirs:
        if report_dir is not None:
            raise click.UsageError("give either REPORT_DIR or --compare A B, not both")
        before, after = compare_dirs
        diff = compare_reports(before, after)
        click.echo(json.dumps(diff, indent=2) if as_json else format_comparison(diff, str(before), str(after)))
        return
    if report_dir is None:
        raise click.UsageError("give a REPORT_DIR to rebuild, or --compare A B")
    index = write_reports(report_dir)
    click.echo(format_leaderboard(json.loads((index.parent / "summary.json").read_text(encoding="utf-8"))))
    click.echo(f"report: {index}")


if __name__ == "__main__":
    main()
