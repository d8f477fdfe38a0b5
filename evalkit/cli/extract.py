"""Trusted side (nothing runs): ``evalkit extract``: the ModelNew code an answer contains, or why there is none."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from evalkit.cli.console import say, verbosity_options
from evalkit.intake.extract import extract
from evalkit.sources.textio import MAX_TEXT_BYTES, UnreadableText, decode_text, read_text

logger = logging.getLogger(__name__)
STDIN = "-"


def _read_answer(file: str) -> tuple[str, list[str]]:
    """The answer's text and repair warnings: from the file, or from stdin for ``-``."""
    if file != STDIN:
        return read_text(Path(file))
    data = sys.stdin.buffer.read(MAX_TEXT_BYTES + 1)  # click.get_binary_stream is deprecated (Click 9)
    logger.debug("read %d byte(s) from stdin", len(data))
    return decode_text(data, "<stdin>")


def _failure_json(reason: str) -> str:
    return json.dumps({"ok": False, "reason": reason, "code": "", "truncated": False, "block": None,
                       "candidates": [], "warnings": []}, indent=2)


@click.command("extract")
@click.argument("file", type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object with the diagnostics (also when there is no code; the exit code still says).")
@verbosity_options
def extract_command(file: str, as_json: bool) -> None:
    """Print the ModelNew code that FILE's answer contains; FILE - reads the answer from stdin.

    Exit 0 with the code on stdout, or 1 with "Error: ..." on stderr when FILE cannot be read or holds no
    code (with --json: the JSON object on stdout either way, "ok": false, and no error line).
    """
    try:
        text, warnings = _read_answer(file)
    except UnreadableText as err:
        if as_json:
            click.echo(_failure_json(str(err)))
            sys.exit(1)
        raise click.ClickException(str(err)) from err
    result = extract(text)
    result.warnings.extend(warnings)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        sys.exit(0 if result.ok else 1)
    if not result.ok:
        raise click.ClickException(f"no ModelNew code in {'stdin' if file == STDIN else file}: {result.reason}")
    click.echo(result.code, nl=not result.code.endswith("\n"))
    for warning in result.warnings:
        say(f"warning: {warning}", err=True)
