"""Trusted side: ``evalkit serve``, the reward service for RL loops in other processes (``evalkit.server``).

It says when it starts (where it listens, which problems, whether a token is needed), logs one line per request
and says when it stops, on stderr; ``-q`` keeps it to errors.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import Any, Iterator

import click

from evalkit.cli.console import is_quiet, verbosity_options
from evalkit.cli.score import judging_options, machine_options, setting_options
from evalkit.server.batches import KEEP_AT_LEAST_S, KEPT_MIB

TOKEN_VARIABLE = "EVALKIT_SERVE_TOKEN"
READ_TIMEOUT_S = 30.0
logger = logging.getLogger("evalkit.server")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Any local process can connect: on a shared host, set --token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--problems", "--problems-dir", "problems_dir", type=click.Path(path_type=Path),
              envvar="EVALKIT_PROBLEMS",
              help="Problem folders a request may name by id (trusted: their references run in the judge) [default: "
                   "./problems where it exists, else none: problems given as text only; or $EVALKIT_PROBLEMS].")
@click.option("--token", envvar=TOKEN_VARIABLE, show_envvar=True,
              help="Require 'Authorization: Bearer TOKEN' on every route but /v1/health. Set it on any shared host "
                   "(prefer the variable: a command line is visible to every user).")
@click.option("--read-timeout", "read_timeout_s", type=click.FloatRange(min=0.1, max=3600), default=READ_TIMEOUT_S,
              show_default=True, help="Seconds a request may take to arrive (headers and body); a slower client is "
                                      "cut off (408).")
@click.option("--kept-mib", type=click.FloatRange(min=0), default=KEPT_MIB, show_default=True,
              help=f"MiB of finished batches' rows kept for their pollers; past it the oldest finished are forgotten "
                   f"(each kept {KEEP_AT_LEAST_S:g} s at least). A poll of a forgotten batch is a 404.")
@machine_options
@setting_options
@judging_options(baselines="eager")
@verbosity_options
def serve_command(host: str, port: int, problems_dir: Path | None, token: str | None, read_timeout_s: float,
                  kept_mib: float, device: str, **settings: object) -> None:
    """Serve the judge over HTTP: POST /v1/judge, POST /v1/batch, GET and DELETE /v1/batch/ID, GET /v1/health
    (docs/rl.md).

    Needs `pip install 'evalkit[serve]'`. Stops on SIGINT or SIGTERM once the requests in progress are answered.
    """
    try:
        import uvicorn

        from evalkit.server.app import create_app
        from evalkit.server.http import read_timeout_protocol
    except ImportError as err:
        raise click.ClickException(f"evalkit serve needs the serve extra ({err.name} is missing): "
                                   f"pip install 'evalkit[serve]'") from None
    from evalkit.schedule.evaluator import Evaluator
    from evalkit.schedule.judge_process import dump_stacks_on_signal

    if token is not None and not token.strip():
        raise click.BadParameter("an empty token would let anyone in; give one, or leave --token out",
                                 param_hint="--token")
    options = {key: value for key, value in settings.items() if value is not None}
    if problems_dir is None and Path("problems").is_dir():
        problems_dir = Path("problems")
    if problems_dir is not None and not problems_dir.is_dir():
        raise click.ClickException(f"{problems_dir}: no such problems folder; give --problems DIR, or leave it out to "
                                   f"serve problems given as text only")
    _log_requests(not is_quiet())
    dump_stacks_on_signal()
    with Evaluator(problems=problems_dir, device=device, **options) as evaluator:
        config = uvicorn.Config(create_app(evaluator, token, kept_mib), host=host, port=port, log_level="warning",
                                http=read_timeout_protocol(read_timeout_s), timeout_graceful_shutdown=600)
        server = _server_class(uvicorn)(config)
        server.started_line = (f"problems: {len(evaluator.problems)} from {problems_dir}" if problems_dir else
                               "problems: none (problems given as text only)") + \
            f"; device: {evaluator.device}; token: {'required' if token else 'none (keep it local)'}"
        server.run()
    logger.info("stopped%s", f" by {signal.Signals(server.stopped_by).name}" if server.stopped_by else "")
    if server.stopped_by is not None:  # drained and closed: now say how it ended, as evalkit score does
        raise SystemExit(128 + server.stopped_by)


def _log_requests(shown: bool) -> None:
    """The server's own lines (start, each request, stop) on stderr, unless ``-q``; its warnings and errors go the
    way every command's do (``console``)."""
    from evalkit.cli.console import _StderrHandler

    server_log = logging.getLogger("evalkit.server")
    if not shown or any(getattr(h, "evalkit_serve", False) for h in server_log.handlers):
        return
    handler = _StderrHandler()
    handler.evalkit_serve = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s evalkit serve: %(message)s"))
    handler.addFilter(lambda record: record.levelno < logging.WARNING)  # warnings: the console's own handler
    server_log.addHandler(handler)
    if server_log.getEffectiveLevel() > logging.INFO:
        server_log.setLevel(logging.INFO)


def _server_class(uvicorn: Any) -> Any:
    """uvicorn's server, stopping gracefully on SIGINT/SIGTERM without re-raising the signal afterwards (which
    would end the process before the evaluator closes its sandboxes); the signal is kept for the exit code. It says
    where it listens once it does, and that it stops."""

    class Server(uvicorn.Server):
        stopped_by: int | None = None
        started_line = ""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            where = ", ".join(f"http://{s.getsockname()[0]}:{s.getsockname()[1]}" for server in self.servers
                              for s in server.sockets)
            logger.info("listening on %s; %s", where or f"{self.config.host}:{self.config.port}", self.started_line)

        async def shutdown(self, sockets: Any = None) -> None:
            by = f"{signal.Signals(self.stopped_by).name}: " if self.stopped_by else ""
            logger.info("%sstopping: answering the requests in progress, then closing the judges", by)
            await super().shutdown(sockets=sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            def stop(signum: int, frame: Any) -> None:
                self.stopped_by = signum
                self.handle_exit(signum, frame)

            previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    return Server
