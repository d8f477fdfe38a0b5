"""Trusted side: ``evalkit score``: judge a folder of answers and write the report (a client of ``evalkit.schedule``)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import shlex
from pathlib import Path
from typing import Any, Callable

import click
from click.core import ParameterSource

from evalkit.cli.console import is_quiet, say, verbosity_options
from evalkit.cli.progress import Progress, display_mode
from evalkit.records import baseline_kinds
from evalkit.results_file import SUMMARY_FILE
from evalkit.sources.settings import PER_RUN, RUN_MINIMUMS, SETTINGS, default_text

logger = logging.getLogger(__name__)

# Options the --resume command printed after an interruption never repeats: it sets them itself, or they
# only change what is printed.
_SET_BY_RESUME = ("out_dir", "resume", "as_json", "progress")


def _default_out(submissions: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("reports") / f"{submissions.resolve().name}-{stamp}"


def _latest_out(submissions: Path) -> Path | None:
    candidates = sorted(Path("reports").glob(f"{submissions.resolve().name}-*"))
    return candidates[-1] if candidates else None


def parse_baselines(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    """``--baselines``: a comma-separated list of eager and compile, or ``none`` alone (``baseline_kinds``)."""
    try:
        return baseline_kinds(value)
    except ValueError as wrong:
        raise click.BadParameter(f"{value!r}: {wrong}", ctx=ctx, param=param) from None


def setting_options(command: Any) -> Any:
    """The options that override a problem setting for one run, made from its one declaration
    (``evalkit.sources.settings``): its name in dashes and its older names, its bounds, its help."""
    for key in reversed(PER_RUN):
        setting = SETTINGS[key]
        bounds = {"min": setting.low, "min_open": not setting.inclusive}
        kind = (click.Choice(setting.choices) if setting.choices else
                click.IntRange(**bounds) if setting.kind is int else click.FloatRange(**bounds))
        shown = f"problem.toml, {default_text(key)}" if setting.default is not None else "problem.toml"
        unit = f"{setting.unit}; " if setting.unit else ""
        command = click.option(*setting.flags, key, type=kind, default=None,
                               help=f"{setting.help[0].upper()}{setting.help[1:]} [{unit}{shown}].")(command)
    return command


def machine_options(command: Any) -> Any:
    """Where answers are judged and built: --device, --gpus, --judges, --jobs (``evalkit score``, ``evalkit serve``)."""
    command = click.option("--jobs", type=click.IntRange(min=RUN_MINIMUMS["jobs"]), default=0,
                           help="Parallel builds [default: one per core left by the judges, as far as free memory "
                                "holds a build's peak for each: 1.5 GiB for C++, 4.25 GiB for CUDA].")(command)
    command = click.option("--judges", type=click.IntRange(min=RUN_MINIMUMS["judges"]), default=1, show_default=True,
                           help="Judges at once: on the CPU, N judges; on GPUs, N per GPU of --gpus (they time in turn, "
                                "their other work overlaps).")(command)
    command = click.option("--overlap/--no-overlap", default=False, show_default=True,
                           help="A GPU's only judge sets up, loads and checks the next answer while one answer's "
                                "float64 checks and kernel profile run; never beside a timing (experimental: on one "
                                "H200 it gained no RL step, the lanes' GPU work taking turns: docs/rl.md).")(command)
    command = click.option("--gpus", default="all", show_default=True,
                           help="GPUs to judge on (--judges each): all, a count (2), or indices (0,2; 1, for GPU 1 "
                                "alone).")(command)
    return click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
                        show_default=True)(command)


def judging_options(baselines: str) -> Callable[[Any], Any]:
    """The run's own settings that ``evalkit score`` and ``evalkit serve`` share: --seed, --baselines (by default
    ``baselines``), --cache-dir and --memory-gib, declared here once for both."""
    def add(command: Any) -> Any:
        command = click.option("--memory-gib", type=click.FloatRange(min=RUN_MINIMUMS["memory_gib"]), default=None,
                               help="Host memory limit per submission [GiB].")(command)
        command = click.option("--cache-dir", type=click.Path(path_type=Path), default=None, envvar="EVALKIT_CACHE",
                               help="Builds, baselines and problems given as text [or $EVALKIT_CACHE; "
                                    "~/.cache/evalkit].")(command)
        command = click.option("--baselines", default=baselines, show_default=True, callback=parse_baselines,
                               help="PyTorch baselines to time: any of eager,compile, or 'none' alone.")(command)
        return click.option("--seed", type=int, default=None,
                            help="Base seed for inputs and weights [random; a report records it].")(command)
    return add


@click.command("score")
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--problems", "--problems-dir", "problems_dir", type=click.Path(path_type=Path), default=Path("problems"),
              show_default=True, envvar="EVALKIT_PROBLEMS", help="Folder of problem folders [or $EVALKIT_PROBLEMS].")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Report folder [default: reports/<submissions>-<timestamp>; with --resume, the latest one].")
@machine_options
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where builds and judges run: this machine, or a Ray cluster (pip install 'evalkit[ray]').")
@click.option("--ray-address", default=None, envvar="RAY_ADDRESS",
              help="The Ray cluster to join (--backend ray) [or $RAY_ADDRESS; unset: start a local one].")
@setting_options
@judging_options(baselines="eager,compile")
@click.option("--remeasure-baselines", is_flag=True,
              help="Time the baselines again, even where the build cache holds them from an earlier report "
                   "on this machine (same GPU, driver, torch, evalkit, problem and timing settings).")
@click.option("--resume", is_flag=True,
              help="Continue the report folder: skip submissions already judged there. Repeat the first run's "
                   "options: a resume with other settings (recorded in run.json) is refused.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the final summary (summary.json) as JSON on stdout; other lines go to stderr.")
@click.option("--progress/--no-progress", default=None,
              help="Show progress on stderr [default: only when stderr is a terminal; forced on a pipe: one line per step].")
@verbosity_options
@click.pass_context
def score_command(ctx: click.Context, submissions: Path, problems_dir: Path, out_dir: Path | None, resume: bool,
                  baselines: tuple[str, ...], cache_dir: Path | None, as_json: bool, progress: bool | None,
                  **options: object) -> None:
    """Extract, build, check and time every submission in SUBMISSIONS; write results.jsonl and summary.json.

    SUBMISSIONS is a folder of runs (<run>/<problem-id>/<sample>.txt), one run folder, one file, a
    <run>.jsonl manifest (docs/submissions.md), a problems folder (its curated solutions), or a KernelBench
    run folder runs/<name>/level_<L>_problem_<N>_sample_<S>_kernel.py (or runs/, or one such file) once
    `evalkit problems import` has imported level L.

    The exit code says whether the run worked, not whether submissions passed: 0 it worked, 1 a bad input
    or setting, 2 a usage error (a bad option or a combination that cannot apply), 128 + the signal's
    number when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP; the report is written and the --resume
    command printed).
    """
    if progress and is_quiet():
        raise click.UsageError("--progress and -q/--quiet contradict each other; give one of them")
    if not submissions.exists():  # before anything heavy (torch) is imported: a typo is told in a moment
        raise click.ClickException(f"{submissions}: no such file or folder; give a folder of runs, one run folder, "
                                   f"an answer file or a <run>.jsonl manifest (docs/submissions.md)")
    out_dir = _resolve_out(submissions, out_dir, resume)
    _require_problems_dir(problems_dir, submissions)

    from evalkit.records import EvalkitError
    from evalkit.schedule.interrupt import Interrupted
    from evalkit.schedule.local import score
    from evalkit.schedule.options import ScoreOptions, default_cache_dir

    overrides = {key: options.pop(key) for key in PER_RUN}  # each problem setting this run overrides (None: unset)
    opts = ScoreOptions(submissions=submissions, problems_dir=problems_dir, out_dir=out_dir, resume=resume,
                        baselines=baselines, cache_dir=cache_dir or default_cache_dir(), overrides=overrides, **options)
    logger.debug("scoring with %s", opts)
    interrupted = None
    with Progress(display_mode(progress, is_quiet())) as shown:
        try:
            outcome = score(opts, progress=shown.on_progress, total_hook=shown.on_total)
        except Interrupted as stop:
            interrupted = stop
        except EvalkitError as err:  # what the user can fix; anything else is a bug: shown whole
            raise click.ClickException(str(err)) from err
    if interrupted is not None:
        _finish_interrupted(ctx, interrupted, out_dir, as_json)
    _finish(outcome, as_json)


def _resolve_out(submissions: Path, out_dir: Path | None, resume: bool) -> Path:
    """The report folder; ``--resume`` needs one that exists (the latest of SUBMISSIONS when not given)."""
    if not resume:
        return out_dir or _default_out(submissions)
    if out_dir is None:
        latest = _latest_out(submissions)
        if latest is None:
            raise click.UsageError(f"--resume: there is no earlier report of {submissions.resolve().name!r} under "
                                   f"reports/ to continue; give its folder with --out DIR, or drop --resume")
        return latest
    if not out_dir.is_dir():
        raise click.BadParameter(f"{out_dir} is not a report folder, so --resume has nothing to continue; "
                                 f"give the folder of the run to continue, or drop --resume", param_hint="'--out'")
    return out_dir


def _require_problems_dir(problems_dir: Path, submissions: Path) -> None:
    """The problems folder must exist; when it does not, say how to name it (and where one seems to be)."""
    if problems_dir.is_dir():
        return
    nearby = next((p / "problems" for p in submissions.resolve().parents if (p / "problems").is_dir()), None)
    hint = f" (there is one at {nearby}: --problems {nearby})" if nearby else ""
    raise click.ClickException(f"problems folder {problems_dir} does not exist (looked in {Path.cwd()}); run "
                               f"from the folder that holds problems/, or give it with --problems DIR or "
                               f"$EVALKIT_PROBLEMS{hint}")


def _finish(outcome: Any, as_json: bool) -> None:
    """Write the report of a finished run and say what it judged (with --json: the summary, on stdout)."""
    from evalkit.report.text import format_leaderboard

    html, summary = _write_report(outcome)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        say(format_leaderboard(summary))
    say(_judged_line(outcome), err=as_json)
    for note in outcome.notes:
        say(f"note: {note}", err=as_json)
    say(f"results: {outcome.out_dir / 'results.jsonl'}", err=as_json)
    say(f"report:  {html}", err=as_json)


def _finish_interrupted(ctx: click.Context, stop: Any, out_dir: Path, as_json: bool) -> None:
    """Write the report of what was judged before the signal, print how to continue, exit 128 + signal.
    The signal and the command to continue go to stderr even with -q: the run failed."""
    click.echo(f"interrupted by {stop.signal_name}: stopped judging and killed every sandbox of the run", err=True)
    if stop.outcome is None:
        click.echo("nothing was judged yet; run the same command again to start over", err=True)
        ctx.exit(stop.exit_code)
    html, summary = _write_report(stop.outcome)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    say(_judged_line(stop.outcome) + " before the signal", err=as_json)
    say(f"results: {out_dir / 'results.jsonl'}", err=as_json)
    say(f"report:  {html}", err=as_json)
    click.echo(f"to continue, run: {resume_command(ctx, out_dir)}", err=as_json or is_quiet())
    ctx.exit(stop.exit_code)


def _write_report(outcome: Any) -> tuple[Path, dict[str, Any]]:
    from evalkit.report.summary import write_reports

    html = write_reports(outcome.out_dir, problems=outcome.problems)
    return html, json.loads((outcome.out_dir / SUMMARY_FILE).read_text())


def _judged_line(outcome: Any) -> str:
    return (f"judged {outcome.judged} submission(s) on {outcome.device} (seed {outcome.seed})"
            + (f", {outcome.skipped_resume} already in the report" if outcome.skipped_resume else "")
            + ": " + (", ".join(f"{k} {v}" for k, v in sorted(outcome.counts.items())) or "nothing new"))


def resume_command(ctx: click.Context, out_dir: Path) -> str:
    """The ``evalkit score ... --resume`` command that continues this run: its report folder and every option
    given (on the command line or through the environment), so the settings match those recorded."""
    words = ["evalkit", "score", str(ctx.params["submissions"]), "--out", str(out_dir)]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in _SET_BY_RESUME or param.name not in ctx.params:
            continue
        if ctx.get_parameter_source(param.name) in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            continue
        value = ctx.params[param.name]
        if param.name == "baselines":
            words += [param.opts[0], ",".join(value) or "none"]
        elif param.is_flag:
            words += [param.opts[0]] if value else []
        else:
            words += [param.opts[0], str(value)]
    return shlex.join([*words, "--resume"])
