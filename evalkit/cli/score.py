"""Trusted side: ``evalkit score``: judge a folder of answers and write the report (a client of ``evalkit.schedule``)."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from evalkit.sources.settings import default_text

# Options the --resume command printed after an interruption never repeats (it sets them itself).
_SET_BY_RESUME = ("out_dir", "resume")


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
@click.option("--resume", is_flag=True,
              help="Continue the report folder: skip submissions already judged there. Repeat the first run's "
                   "options: a resume with other settings (recorded in run.json) is refused.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, envvar="EVALKIT_CACHE",
              help="Where builds are cached [~/.cache/evalkit].")
@click.option("--memory-gib", type=click.FloatRange(min=0.5), default=None, help="Host memory limit per submission.")
@click.pass_context
def score_command(ctx: click.Context, submissions: Path, problems_dir: Path, out_dir: Path | None, resume: bool,
                  baselines: str, cache_dir: Path | None, **options: object) -> None:
    """Extract, build, check and time every submission in SUBMISSIONS; write results.jsonl and summary.json.

    SUBMISSIONS is a folder of runs (<run>/<problem-id>/<sample>.txt), one run folder, one file, or a
    <run>.jsonl manifest. The exit code says whether the run worked, not whether submissions passed:
    0 it worked, 1 a bad input or setting, 2 a usage error, 128 + the signal's number when interrupted
    (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP; the report is written and the --resume command printed).
    """
    from tqdm import tqdm

    from evalkit.schedule.interrupt import Interrupted
    from evalkit.schedule.local import score
    from evalkit.schedule.options import ScoreError, ScoreOptions, default_cache_dir
    from evalkit.sources.problems import ProblemError
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

    interrupted = None
    try:
        outcome = score(opts, progress=on_progress, total_hook=on_total)
    except Interrupted as stop:
        interrupted = stop
    except (ProblemError, SubmissionError, ScoreError, FileExistsError, RuntimeError) as err:
        raise click.ClickException(str(err)) from err
    finally:
        bar.close()
    if interrupted is not None:
        _finish_interrupted(ctx, interrupted, out_dir)
    _finish(outcome)


def _finish(outcome: Any) -> None:
    """Write the report of a finished run and say what it judged."""
    from evalkit.report.text import format_leaderboard

    html, summary = _write_report(outcome)
    click.echo(format_leaderboard(summary))
    click.echo(_judged_line(outcome))
    for note in outcome.notes:
        click.echo(f"note: {note}")
    click.echo(f"results: {outcome.out_dir / 'results.jsonl'}")
    click.echo(f"report:  {html}")


def _finish_interrupted(ctx: click.Context, stop: Any, out_dir: Path) -> None:
    """Write the report of what was judged before the signal, print how to continue, exit 128 + signal."""
    click.echo(f"interrupted by {stop.signal_name}: stopped judging and killed every sandbox of the run", err=True)
    if stop.outcome is None:
        click.echo("nothing was judged yet; run the same command again to start over", err=True)
        ctx.exit(stop.exit_code)
    html, _ = _write_report(stop.outcome)
    click.echo(_judged_line(stop.outcome) + " before the signal")
    click.echo(f"results: {out_dir / 'results.jsonl'}")
    click.echo(f"report:  {html}")
    click.echo(f"to continue, run: {resume_command(ctx, out_dir)}")
    ctx.exit(stop.exit_code)


def _write_report(outcome: Any) -> tuple[Path, dict[str, Any]]:
    from evalkit.report.summary import write_reports

    html = write_reports(outcome.out_dir, problems=outcome.problems)
    return html, json.loads((outcome.out_dir / "summary.json").read_text())


def _judged_line(outcome: Any) -> str:
    return (f"judged {outcome.judged} submission(s) on {outcome.device} (seed {outcome.seed})"
            + (f", {outcome.skipped_resume} already in the report" if outcome.skipped_resume else "")
            + ": " + (", ".join(f"{k} {v}" for k, v in sorted(outcome.counts.items())) or "nothing new"))


def resume_command(ctx: click.Context, out_dir: Path) -> str:
    """The ``evalkit score ... --resume`` command that continues this run: its report folder and every option
    given (on the command line or through the environment), so the settings match those recorded."""
    words = ["evalkit", "score", str(ctx.params["submissions"]), "--out", str(out_dir)]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in _SET_BY_RESUME:
            continue
        if ctx.get_parameter_source(param.name) in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            continue
        value = ctx.params[param.name]
        if param.is_flag:
            words += [param.opts[0]] if value else []
        else:
            words += [param.opts[0], str(value)]
    return shlex.join([*words, "--resume"])
