"""Trusted side: the HTTP walls of ``evalkit serve`` around its routes (``app``): who may ask, how long a request may
take to arrive, and a line in the log for each.

- ``guarded``: the bearer token, when one is set, required on every route but ``/v1/health`` (compared in constant
  time); every request logged as one line (method, route, status, milliseconds) on the ``evalkit.server`` logger.
- ``read_timeout_protocol``: uvicorn's HTTP/1.1 protocol with a deadline on reading each request, its headers and
  its body together: a client that sends slowly, or half a request and then nothing, is cut off (408) once it
  passes, and on shutdown a request still arriving is cut off at once, so a stop never waits for one.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import Any, Awaitable, Callable

logger = logging.getLogger("evalkit.server")

HEALTH_PATH = "/v1/health"
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_body(message: str, field_name: str = "") -> bytes:
    """Every error's JSON: ``{"error": what is wrong and what to do, "field": the field it concerns or ""}``."""
    return json.dumps({"error": message, "field": field_name}).encode()


def guarded(app: App, token: str | None) -> App:
    """``app`` behind the token (when set) and the request log."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        start, status = time.monotonic(), [0]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            if token is not None and scope["path"] != HEALTH_PATH and not _authorized(scope, token):
                await _refuse(sending, 401, "a bearer token is required: send the header Authorization: Bearer "
                                            "<token> (the server's --token or $EVALKIT_SERVE_TOKEN)",
                              [(b"www-authenticate", b"Bearer")])
                return
            await app(scope, receive, sending)
        finally:
            route = scope.get("route")
            logger.info("%s %s %d %.0f ms", scope["method"], getattr(route, "path", scope["path"])[:200],
                        status[0], (time.monotonic() - start) * 1e3)

    return guard


def _authorized(scope: Scope, token: str) -> bool:
    given = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, value = given.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), token.encode())


async def _refuse(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = error_body(message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def read_timeout_protocol(read_timeout_s: float) -> type:
    """uvicorn's h11 protocol, each request read within ``read_timeout_s`` of its first byte (of the connection's
    opening, for the first), else answered 408 (when nothing was answered yet) and closed."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class ReadTimeoutProtocol(H11Protocol):  # type: ignore[misc]
        _read_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the next request of a kept-alive connection
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
                self._disarm()  # read whole (or the connection is ending): the app's time is not the client's

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def shutdown(self) -> None:
            if self._read_timer is not None and self._arriving():
                self._cut_off()  # never wait for a request still being sent
                return
            super().shutdown()

        def _arriving(self) -> bool:
            return self.conn.their_state is h11.SEND_BODY or bool(self.conn.trailing_data[0])

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(read_timeout_s, self._cut_off)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _cut_off(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is None:  # no request read yet, so nothing answered: say why (else the app answers it)
                body = error_body(f"the request did not arrive within {read_timeout_s:g} s")
                self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                     b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            logger.info("a client was cut off: its request did not arrive within %g s", read_timeout_s)
            self.transport.close()

    return ReadTimeoutProtocol
