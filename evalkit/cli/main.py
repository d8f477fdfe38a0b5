"""Trusted side: the command line's root group (``evalkit --help``): a thin client of the library; each command lives
in a module of its own beside this one.

Conventions every command follows (README, "Exit codes"): 0 success; 1 a failure, printed as click's
``Error: ...`` on stderr; 2 a usage error (unknown option, bad value, options that cannot go together);
``-v``/``-q`` on the group or the command (``evalkit.cli.console``); ``--json`` puts the result, and only
the result, on stdout; progress only on a terminal.
"""

from __future__ import annotations

import click

from evalkit.version import __version__
from evalkit.cli.console import configure_logging, is_quiet, quiet_numpy_warning, verbose_level, verbosity_options
from evalkit.cli.extract import extract_command
from evalkit.cli.problems import problems
from evalkit.cli.report import report_command
from evalkit.cli.score import score_command
from evalkit.cli.serve import serve_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="evalkit")
@verbosity_options
def main() -> None:
    """Judge LLM-written custom-kernel ModelNew answers against KernelBench-style problems.

    Exit codes: 0 success (whatever the verdicts), 1 a bad input or setting (an "Error: ..." line says
    which and what to do), 2 a usage error, 128 + N when stopped by signal N (`evalkit score`).
    """
    configure_logging(verbose_level(), is_quiet())
    quiet_numpy_warning()


for command in (extract_command, score_command, serve_command, report_command, problems):
    main.add_command(command)


if __name__ == "__main__":
    main()
