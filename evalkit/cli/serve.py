"""Trusted side: ``evalkit serve``, the reward service for RL loops in other processes (``evalkit.server``)."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any, Iterator

import click

from evalkit.cli.console import verbosity_options
from evalkit.cli.score import judging_options, machine_options, setting_options


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. There is no authentication: keep it local, or put the server behind one.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--problems", "--problems-dir", "problems_dir", type=click.Path(path_type=Path), envvar="EVALKIT_PROBLEMS",
              help="Problem folders a request may name by id (trusted: their references run in the judge) [default: "
                   "./problems where it exists, else none: problems given as text only; or $EVALKIT_PROBLEMS].")
@machine_options
@setting_options
@judging_options(baselines="eager")
@verbosity_options
def serve_command(host: str, port: int, problems_dir: Path | None, device: str, **settings: object) -> None:
    """Serve the judge over HTTP: POST /v1/judge, POST /v1/batch, GET /v1/batch/ID, GET /v1/health (docs/rl.md).

    Needs `pip install 'evalkit[serve]'`. Stops on SIGINT or SIGTERM once the requests in progress are answered.
    """
    try:
        import uvicorn

        from evalkit.server.app import create_app
    except ImportError as err:
        raise click.ClickException(f"evalkit serve needs the serve extra ({err.name} is missing): "
                                   f"pip install 'evalkit[serve]'") from None
    from evalkit.schedule.evaluator import Evaluator

    options = {key: value for key, value in settings.items() if value is not None}
    if problems_dir is None and Path("problems").is_dir():
        problems_dir = Path("problems")
    if problems_dir is not None and not problems_dir.is_dir():
        raise click.ClickException(f"{problems_dir}: no such problems folder; give --problems DIR, or leave it out to "
                                   f"serve problems given as text only")
    with Evaluator(problems=problems_dir, device=device, **options) as evaluator:
        server = _server_class(uvicorn)(uvicorn.Config(create_app(evaluator), host=host, port=port,
                                                       log_level="warning", timeout_graceful_shutdown=600))
        server.run()
    if server.stopped_by is not None:  # drained and closed: now say how it ended, as evalkit score does
        raise SystemExit(128 + server.stopped_by)


def _server_class(uvicorn: Any) -> Any:
    """uvicorn's server, stopping gracefully on SIGINT/SIGTERM without re-raising the signal afterwards (which
    would end the process before the evaluator closes its sandboxes); the signal is kept for the exit code."""

    class Server(uvicorn.Server):
        stopped_by: int | None = None

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
