"""Trusted side: ``evalkit problems``: list, check, scaffold and import problem folders (see docs/problems.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import click

from evalkit.sources.kernelbench import import_kernelbench
from evalkit.sources.kernelbench_layout import shared_origin_text, shared_origins
from evalkit.sources.problems import (Problem, ProblemError, discover_problems, load_problem, problem_folders,
                                      unknown_problem)
from evalkit.sources.scaffold import scaffold_problem
from evalkit.sources.settings import SETTINGS

DEFAULT_PROBLEMS_DIR = Path("problems")
_DIR_HELP = "Folder of problem folders [default: ./problems, or $EVALKIT_PROBLEMS]."


def _dir_option(envvar: str | None) -> Any:
    return click.option("--problems-dir", "--problems", "problems_dir", type=click.Path(path_type=Path),
                        default=None, envvar=envvar, help=_DIR_HELP)


def _problems_dir(ctx: click.Context, given: Path | None) -> Path:
    """The subcommand's --problems-dir, else the group's (which reads $EVALKIT_PROBLEMS), else ./problems."""
    return given or (ctx.obj or {}).get("problems_dir") or DEFAULT_PROBLEMS_DIR


def _shape_text(shape: list[Any] | None) -> str:
    if shape is None:
        return "?"
    if shape and isinstance(shape[0], list):
        return ", ".join(_shape_text(s) for s in shape)
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


@click.group("problems", invoke_without_command=True)
@_dir_option("EVALKIT_PROBLEMS")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.pass_context
def problems(ctx: click.Context, problems_dir: Path | None, as_json: bool) -> None:
    """List the problems: id, title, source, input shapes and output shape (computed on the meta device)."""
    ctx.obj = {"problems_dir": problems_dir}
    if ctx.invoked_subcommand is not None:
        return
    from evalkit.judge.problem_check import describe_problem

    try:
        found = discover_problems(_problems_dir(ctx, None), lenient=True)
    except ProblemError as err:
        raise click.ClickException(str(err)) from err
    infos = [describe_problem(problem) for problem in found.values() if not problem.broken]
    if as_json:
        click.echo(json.dumps(infos, indent=2))
        return
    if not infos:
        click.echo(f"no problems in {_problems_dir(ctx, None)} (`evalkit problems new <id>` makes one)")
        return
    rows = [["ID", "TITLE", "SOURCE", "INPUTS", "OUTPUT"]]
    rows += [[i["id"], i["title"], i["source"], _shape_text(i["input_shapes"]) if i["input_shapes"] else "?",
              "error: see `evalkit problems check`" if i["error"] else _shape_text(i["output_shape"])]
             for i in infos]
    click.echo(_table(rows))


def _echo_report(report: Any) -> None:
    status = click.style("OK  ", fg="green") if report.ok else click.style("FAIL", fg="red")
    shapes = ""
    if report.input_shapes:
        shapes = f"  {_shape_text(report.input_shapes)} -> {_shape_text(report.output_shape)}"
    click.echo(f"{status} {report.problem_id}{shapes}")
    for kind, messages in (("error", report.errors), ("warning", report.warnings), ("note", report.notes)):
        for message in messages:
            click.echo(f"  {kind}: " + message.replace("\n", "\n    "))


def _folders_to_check(root: Path, ids: tuple[str, ...]) -> list[Path]:
    folders = problem_folders(root)
    if not ids:
        return folders
    by_id = {folder.name: folder for folder in folders}
    for problem_id in ids:
        if problem_id not in by_id:
            raise unknown_problem(problem_id, by_id)
    return [by_id[problem_id] for problem_id in dict.fromkeys(ids)]


def _load_all(root: Path) -> dict[Path, Problem | ProblemError]:
    """Every problem folder of ``root``, loaded, or the error that stops it loading."""
    loaded: dict[Path, Problem | ProblemError] = {}
    for folder in problem_folders(root):
        try:
            loaded[folder] = load_problem(folder)
        except ProblemError as err:
            loaded[folder] = err
    return loaded


def _shared_origin_errors(problems: Iterable[Problem]) -> dict[str, list[str]]:
    """{problem id: an error for each KernelBench level and number it records that other folders record too}."""
    errors: dict[str, list[str]] = {}
    for key, claimants in sorted(shared_origins(problems).items()):
        for problem in claimants:
            errors.setdefault(problem.id, []).append(shared_origin_text(key, claimants))
    return errors


@problems.command("check")
@click.argument("ids", nargs=-1)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where to run the real forward (large problems only run on cuda).")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON list, one object per problem: ok, errors, warnings, notes, shapes.")
@_dir_option(None)
@click.pass_context
def check_command(ctx: click.Context, ids: tuple[str, ...], device: str, as_json: bool,
                  problems_dir: Path | None) -> None:
    """Validate problem folders (all, or the IDS given); exit 1 if any has an error."""
    from evalkit.judge.problem_check import CheckReport, check_problem, require_device

    try:
        require_device(device)
        root = _problems_dir(ctx, problems_dir)
        folders = _folders_to_check(root, ids)
        loaded = _load_all(root)
    except ProblemError as err:
        raise click.ClickException(str(err)) from err
    shared = _shared_origin_errors(p for p in loaded.values() if isinstance(p, Problem))
    failed, found = 0, []
    for folder in folders:
        try:  # a folder that does not load (bad problem.toml, no reference.py) fails alone
            problem = loaded[folder]
            if isinstance(problem, ProblemError):
                raise problem
            report = check_problem(problem, device=device)
        except ProblemError as err:
            report = CheckReport(folder.name, errors=[str(err)])
        report.errors += shared.get(folder.name, [])
        if not as_json:
            _echo_report(report)
        found.append(report.to_dict())
        failed += not report.ok
    click.echo(json.dumps(found, indent=2) if as_json else f"{len(folders) - failed} of {len(folders)} problem(s) OK")
    if failed:
        ctx.exit(1)


@problems.command("new")
@click.argument("problem_id", metavar="ID")
@_dir_option(None)
@click.pass_context
def new_command(ctx: click.Context, problem_id: str, problems_dir: Path | None) -> None:
    """Scaffold problems/ID/ with a template reference.py and a commented problem.toml."""
    try:
        folder = scaffold_problem(_problems_dir(ctx, problems_dir), problem_id)
    except ProblemError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"created {folder}/reference.py and {folder}/problem.toml; edit them, then run "
               f"`evalkit problems check {problem_id}`")


@problems.command("import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--source-version", "version", default="", metavar="VERSION",
              help="KernelBench version the files come from (e.g. v0.1), recorded as kernelbench_version.")
@click.option("--level", type=click.IntRange(min=1), default=None,
              help="KernelBench level of files that are not inside a level<L> folder.")
@click.option("--precision", type=click.Choice(SETTINGS["precision"].choices), default=None,
              help="Precision to judge the new problems in, written into their problem.toml (reference.py stays the "
                   "KernelBench file as is); folders already there keep theirs, with a warning where it differs.")
@_dir_option(None)
@click.pass_context
def import_command(ctx: click.Context, source: Path, version: str, level: int | None, precision: str | None,
                   problems_dir: Path | None) -> None:
    """Turn KernelBench <n>_<Name>.py files (a file, or a folder searched recursively) into problem folders.

    A problem already present (the same level and number recorded, or the same code up to formatting) is
    linked or kept, never duplicated; new folders are named l<level>_<number>_<name>. See docs/problems.md.
    """
    try:
        outcome = import_kernelbench(source, _problems_dir(ctx, problems_dir), report=click.echo, version=version,
                                     level=level, precision=precision)
    except ProblemError as err:
        raise click.ClickException(str(err)) from err
    if outcome.skipped and not (outcome.created or outcome.linked or outcome.present):
        raise click.ClickException(f"nothing was imported from {source}: every file was skipped (the lines above say "
                                   "why); give KernelBench <n>_<Name>.py files, and --level where no level<L> "
                                   "folder holds them")
