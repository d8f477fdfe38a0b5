"""Trusted side: ``evalkit score``: judge a folder of answers and write the report (a client of ``evalkit.schedule``)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections import Counter
from pathlib import Path

import click

from evalkit.sources.settings import default_text


def _default_out(submissions: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / f"{submissions.resolve().name}-{stamp}"


def _latest_out(submissions: Path) -> Path | None:
    candidates = sorted(Path("reports").glob(f"{submissions.resolve().name}-*"))
    return candidates[-1] if candidates else None


@click.command("score")
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--problems", "problems_dir", type=click.Path(path_type=Path), default=Path("problems"),
              show_default=True, envvar="EVALKIT_PROBLEMS", help="Folder of problem folders.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Report folder [default: reports/<submissions>-<timestamp>; with --resume, the latest one].")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True)
@click.option("--jobs", type=click.IntRange(min=0), default=0, help="Parallel builds [default: min(8, cores)].")
@click.option("--trials", type=click.IntRange(min=1), default=None,
              help=f"Correctness trials [problem.toml, {default_text('correctness_trials')}].")
@click.option("--timing-trials", type=click.IntRange(min=1), default=None,
              help=f"Timed calls [problem.toml, {default_text('timing_trials')}].")
@click.option("--warmup", type=click.IntRange(min=0), default=None,
              help=f"Warm-up calls before timing [problem.toml, {default_text('warmup_trials')}].")
@click.option("--atol", type=click.FloatRange(min=0), default=None,
              help=f"Absolute tolerance [problem.toml, {default_text('atol')}].")
@click.option("--rtol", type=click.FloatRange(min=0), default=None,
              help=f"Relative tolerance [problem.toml, {default_text('rtol')}].")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=None,
              help="Seconds allowed per judging step (loading, one call) [problem.toml; "
                   "unset: derived from the reference's own time, see docs/judge.md].")
@click.option("--build-timeout", "build_timeout_s", type=click.FloatRange(min=1), default=None,
              help="Seconds allowed for building one submission "
                   f"[problem.toml, {default_text('build_timeout_s')}].")
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
    from evalkit.report.summary import write_reports
    from evalkit.report.text import format_leaderboard
    from evalkit.schedule.local import score
    from evalkit.schedule.options import ScoreOptions, default_cache_dir
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
