"""Trusted side (nothing runs): ``evalkit extract``: the ModelNew code an answer contains, or why there is none."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from evalkit.intake.extract import extract
from evalkit.sources.textio import UnreadableText, read_text


@click.command("extract")
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
