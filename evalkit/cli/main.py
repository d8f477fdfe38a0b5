"""Trusted side: the command line's root group (``evalkit --help``): a thin client of the library; each command lives
in a module of its own beside this one."""

from __future__ import annotations

import logging

import click

from evalkit import __version__
from evalkit.cli.extract import extract_command
from evalkit.cli.problems import problems
from evalkit.cli.report import report_command
from evalkit.cli.score import score_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="evalkit")
@click.option("-v", "--verbose", is_flag=True, help="Log debug details to stderr.")
def main(verbose: bool) -> None:
    """Judge LLM-written custom-kernel ModelNew answers against KernelBench-style problems."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


for command in (extract_command, score_command, report_command, problems):
    main.add_command(command)


if __name__ == "__main__":
    main()
