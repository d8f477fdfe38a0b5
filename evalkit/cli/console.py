"""No side of the trust boundary (runs nothing, imports no torch): how every command talks to the terminal.

``-v/--verbose`` and ``-q/--quiet`` are accepted by the root group and by each command (``evalkit -v score``
and ``evalkit score -v`` are the same): ``-v`` logs evalkit's debug details to stderr (``-vv`` other
libraries' too), ``-q`` prints errors only (plus what ``--json`` asks for). Giving both is a usage error.
Log records go to stderr as ``warning: ...`` lines (with ``-v``: time, level and logger name too).
Errors are click's own ``Error: ...`` (``click.ClickException`` exits 1, ``click.UsageError`` exits 2).
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any, Callable, TypeVar

import click

VERBOSE = "evalkit.verbose"  # keys of click's ``Context.meta``, which every nested context shares
QUIET = "evalkit.quiet"
F = TypeVar("F", bound=Callable[..., Any])


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (click's test runner swaps it per call)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _Formatter(logging.Formatter):
    def __init__(self, verbose: bool) -> None:
        super().__init__("%(relativeCreated)8.0fms %(levelname)s %(name)s: %(message)s" if verbose
                         else "%(levelname)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.levelname = record.levelname.lower()
        return super().format(record)


def quiet_numpy_warning() -> None:
    """torch warns that it cannot initialize NumPy wherever NumPy is missing (it is no dependency of evalkit, and
    torch works without it): a line on every command's stderr, even with -q, that says nothing about the run."""
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)


def configure_logging(verbose: int = 0, quiet: bool = False) -> None:
    """Route log records to stderr at the level the flags ask for (idempotent; called again on each flag)."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:
        handler = _StderrHandler()
        root.addHandler(handler)
    level = logging.ERROR if quiet else logging.DEBUG if verbose else logging.WARNING
    handler.setLevel(level)
    handler.setFormatter(_Formatter(bool(verbose)))
    root.setLevel(logging.DEBUG if verbose >= 2 else min(level, logging.WARNING))
    logging.getLogger("evalkit").setLevel(logging.DEBUG if verbose else logging.NOTSET)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if not value:
        return
    if param.name == "verbose":
        ctx.meta[VERBOSE] = ctx.meta.get(VERBOSE, 0) + int(value)
    else:
        ctx.meta[QUIET] = True
    if ctx.meta.get(VERBOSE) and ctx.meta.get(QUIET):
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other; give one of them", ctx=ctx)
    configure_logging(verbose_level(), is_quiet())


def verbosity_options(command: F) -> F:
    """Add ``-v/--verbose`` and ``-q/--quiet`` to a command or group."""
    command = click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_remember,
                           help="Print errors only (and what --json asks for).")(command)
    return click.option("-v", "--verbose", count=True, expose_value=False, callback=_remember,
                        help="Log debug details to stderr (-vv: other libraries' too).")(command)


def _meta() -> dict[str, Any]:
    ctx = click.get_current_context(silent=True)
    return ctx.meta if ctx is not None else {}


def verbose_level() -> int:
    return int(_meta().get(VERBOSE, 0))


def is_quiet() -> bool:
    return bool(_meta().get(QUIET, False))


def say(message: str, err: bool = False) -> None:
    """Print ``message`` unless ``-q`` was given (stdout, or stderr with ``err``)."""
    if not is_quiet():
        click.echo(message, err=err)
