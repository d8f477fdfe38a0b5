"""Trusted side: the HTTP API of ``evalkit serve`` (Starlette): one ``Evaluator`` behind it, every request judged
on its judges and caches.

    GET    /v1/health          {"ok": true, "version": ..., "in_flight": N, "batches": N, "kept_bytes": N}
    POST   /v1/judge           {"problem": ID} or {"reference_code": STR, "name"?, "settings"?}, plus "answer": STR,
                               "sample"?, "id"?, "deadline_s"? -> the row
    POST   /v1/batch           {"items": [judge bodies], "deadline_s"?} -> {"id": ID, "size": N}
    GET    /v1/batch/{id}      {"done": bool, "size": N, "rows": [rows decided so far, in the order decided]}
    DELETE /v1/batch/{id}      ends the batch's answers not yet judged -> {"id", "done", "size", "cancelled": N}

Every client is untrusted (docs/hostile.md, The reward service): what it sends is bounded before any work
(``bodies``); a reference it sends runs only in a sandbox, and its problem's id ends in its content's hash, so that
no client takes another's name; an id names only a problem of the server's own folder; errors name no folder of
the server. Every error is JSON ``{"error": ..., "field": ...}``; every row of a batch carries its item (the client's
``id``, else its index); an answer never takes the server down (whatever it does is its row). The token and the
request log are ``http.guarded``'s.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from evalkit.records import EvalkitError
from evalkit.schedule.engine import DeadlinePassed
from evalkit.schedule.evaluator import Evaluator
from evalkit.server.batches import KEPT_MIB, Batch, KeptBatches
from evalkit.server.bodies import BadRequest, Item, batch_body, judge_body, read_body
from evalkit.server.http import error_body, guarded
from evalkit.sources.problems import INLINE_FOLDER, Problem, problem_from_source
from evalkit.version import __version__

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT = 4096  # answers accepted and not yet decided, over every request
CANCEL_WAIT_S = 30.0  # how long a DELETE waits for its batch's answers in hand to end
GONE_POLL_S = 1.0  # how often a judge request looks whether its client is still there


def _end(batch: Batch, evaluator: Evaluator, kind: str, message: str) -> None:
    """Every item without a row gets a ``skipped`` one saying why (``error.kind``): one row per item, always."""
    for index, item in list(batch.undecided()):
        batch.add(evaluator.unjudged_row(batch.problems[index], item.answer, batch.samples[index], kind,
                                         message).to_dict())


@dataclass
class _Service:
    evaluator: Evaluator
    in_flight: int = 0
    batches: KeptBatches = field(default_factory=KeptBatches)

    def public(self, text: str) -> str:
        """``text`` with the server's own folders (its cache, its problems, its temporary files) left out."""
        folders = {str(self.evaluator.options.cache_dir), tempfile.gettempdir(),
                   *(str(p.path.parent) for p in self.evaluator.problems.values() if p.trusted)}
        for folder in sorted(folders, key=len, reverse=True):
            if len(folder) > 1:
                text = text.replace(folder, "<server>")
        return text


def create_app(evaluator: Evaluator, token: str | None = None, kept_mib: float = KEPT_MIB) -> Any:
    """The ASGI app serving ``evaluator`` (the caller keeps it, and closes it after the server stops); with ``token``,
    every route but health needs it as a bearer token. Finished batches' rows are kept up to ``kept_mib``
    (``batches.KeptBatches``)."""
    service = _Service(evaluator, batches=KeptBatches(max_bytes=int(kept_mib * 2**20)))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "version": __version__, "in_flight": service.in_flight,
                             "batches": len(service.batches), "kept_bytes": service.batches.kept_bytes()})

    async def judge(request: Request) -> Response:
        item, deadline = judge_body(await _body(request))
        with _admitted(service, 1):
            problem = await asyncio.to_thread(_problem, service, item, "")
            task = asyncio.ensure_future(evaluator.judge_async(problem, item.answer, sample=item.sample,
                                                               timeout_s=deadline))
            try:
                while not (await asyncio.wait({task}, timeout=GONE_POLL_S))[0]:
                    if await request.is_disconnected():  # nobody waits for this row: its answer is cancelled
                        task.cancel()
                        return Response(status_code=499)
                row = task.result()
            except DeadlinePassed as passed:
                raise BadRequest(f"deadline_s: {passed}", "deadline_s", 504) from None
        return JSONResponse({**row, "item": item.id} if item.id is not None else row)

    async def submit_batch(request: Request) -> JSONResponse:
        items, deadline = batch_body(await _body(request))
        problems = await _problems(service, items)
        _admit(service, len(items))
        batch_id = uuid.uuid4().hex
        batch = Batch(items, [p if isinstance(p, str) else p.id for p in problems],
                      [f"{batch_id[:12]}-{n}" for n in range(len(items))])
        batch.task = asyncio.create_task(_run_batch(service, batch, problems, deadline))
        service.batches.add(batch_id, batch)
        return JSONResponse({"id": batch_id, "size": len(items)})

    async def poll_batch(request: Request) -> Response:
        batch = _batch_of(service, request)
        return Response(batch.poll_body(), media_type="application/json")

    async def cancel_batch(request: Request) -> JSONResponse:
        batch = _batch_of(service, request)
        before = len(batch.decided)
        if batch.task is not None and not batch.task.done():
            batch.task.cancel()  # its answers queued are dropped, those in a judge's hands killed (their sandboxes)
            await asyncio.wait({batch.task}, timeout=CANCEL_WAIT_S)
        return JSONResponse({"id": request.path_params["batch_id"], "done": batch.done, "size": batch.size,
                             "cancelled": len(batch.decided) - before if batch.done else 0})

    async def refused(request: Request, err: Exception) -> Response:
        if isinstance(err, BadRequest):
            return _error(service.public(str(err)), err.field_name, err.status)
        if isinstance(err, HTTPException):
            allowed = {"allow": value for key, value in (err.headers or {}).items() if key.lower() == "allow"}
            message = {404: f"no route {request.url.path[:200]}; the routes are under /v1 (docs/rl.md)",
                       405: f"{request.method} is not allowed on {request.url.path[:200]}; allowed: "
                            f"{allowed.get('allow', 'see docs/rl.md')}"}.get(err.status_code, str(err.detail))
            return _error(message, "", err.status_code, allowed)
        if isinstance(err, EvalkitError):
            return _error(service.public(str(err)), "", 400)
        logger.error("%s %s failed", request.method, request.url.path, exc_info=err)
        return _error("the server failed on this request (its log says why); the request may be retried", "", 500)

    routes = [Route("/v1/health", health, methods=["GET"]), Route("/v1/judge", judge, methods=["POST"]),
              Route("/v1/batch", submit_batch, methods=["POST"]),
              Route("/v1/batch/{batch_id}", poll_batch, methods=["GET"]),
              Route("/v1/batch/{batch_id}", cancel_batch, methods=["DELETE"])]
    app = Starlette(routes=routes, exception_handlers={BadRequest: refused, EvalkitError: refused,
                                                       HTTPException: refused, Exception: refused})
    return guarded(app, token)


async def _body(request: Request) -> dict[str, Any]:
    try:
        return await read_body(request.stream(), request.headers.get("content-length"))
    except ClientDisconnect:  # it went away, or was cut off by the read timeout (``http.read_timeout_protocol``)
        raise BadRequest("the request did not arrive whole", "", 408) from None


def _error(message: str, field_name: str, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(message, field_name), status_code=status, media_type="application/json",
                    headers={**(headers or {}), **({"connection": "close"} if status == 413 else {})})


async def _run_batch(service: _Service, batch: Batch, problems: list[Any], deadline: float | None) -> None:
    evaluator = service.evaluator
    try:
        async for row in evaluator.judge_many_async(
                [(problem, item.answer, sample) for problem, item, sample in zip(problems, batch.items, batch.samples)],
                deadline_s=deadline):
            batch.add(row)
    except DeadlinePassed as passed:
        _end(batch, evaluator, "deadline_passed", f"the batch's deadline_s passed first ({passed})")
    except asyncio.CancelledError:
        _end(batch, evaluator, "cancelled", "its batch was cancelled (DELETE /v1/batch/ID) before it was judged")
    except Exception:  # noqa: BLE001 - the batch's poller sees it end; the server goes on
        logger.exception("a batch of %d answers failed", batch.size)
        _end(batch, evaluator, "server_failed", "the server failed judging its batch (its log says why)")
    finally:
        service.in_flight -= batch.size
        service.batches.forget_old()


def _batch_of(service: _Service, request: Request) -> Batch:
    batch = service.batches.get(request.path_params["batch_id"])
    if batch is None:
        raise BadRequest(f"no batch {request.path_params['batch_id'][:64]!r} (unknown, or forgotten long after it "
                         "finished)", "id", 404)
    return batch


async def _problems(service: _Service, items: list[Item]) -> list[str | Problem]:
    """Each item's problem (``_problem``), the references new to the server checked at once, each in its sandbox,
    and each text once however many items send it (a group of rollouts shares its prompt's reference)."""
    def key(entry: Item) -> str:
        return json.dumps([entry.problem, entry.reference_code, entry.name, entry.settings], sort_keys=True)

    first: dict[str, int] = {}
    for n, entry in enumerate(items):
        first.setdefault(key(entry), n)
    found = await asyncio.gather(*(asyncio.to_thread(_problem, service, items[n], f"items[{n}].")
                                   for n in first.values()))
    by_key = dict(zip(first, found))
    return [by_key[key(entry)] for entry in items]


def _problem(service: _Service, item: Item, where: str) -> str | Problem:
    """The problem ``item`` names: one of the server's own folders by id, or the one its reference's text is (checked
    in a sandbox, before anything is built)."""
    evaluator = service.evaluator
    if item.problem is not None:
        known = evaluator.problems.get(item.problem)
        if known is None or not known.trusted:  # never another client's problem, even by its id
            folders = sorted(p.id for p in evaluator.problems.values() if p.trusted)
            raise BadRequest(f"{where}problem: no problem {item.problem[:64]!r} among the server's folders; "
                             f"known: {', '.join(folders[:20]) or 'none'} (a problem given as text is sent as "
                             f"reference_code each time)", f"{where}problem", 404)
        return item.problem
    try:
        problem = problem_from_source(item.reference_code or "", item.name,
                                      root=evaluator.options.cache_dir / INLINE_FOLDER, from_client=True,
                                      **(item.settings or {}))
    except EvalkitError as err:
        text = service.public(str(err))
        field_name = "settings" if text.startswith("settings:") else "name" if "problem id" in text else \
            "reference_code"
        raise BadRequest(f"{where}{text if text.startswith(field_name) else f'{field_name}: {text}'}",
                         f"{where}{field_name}") from None
    try:
        evaluator.add_problem(problem)
    except EvalkitError as err:
        raise BadRequest(f"{where}reference_code: {service.public(str(err))}", f"{where}reference_code") from None
    return problem


def _admit(service: _Service, count: int) -> None:
    if service.in_flight + count > MAX_IN_FLIGHT:
        raise BadRequest(f"{service.in_flight} answers are in flight; at most {MAX_IN_FLIGHT}: retry later", "", 429)
    service.in_flight += count


class _admitted:
    """``with _admitted(service, n)``: counted in flight for the block."""

    def __init__(self, service: _Service, count: int) -> None:
        self.service, self.count = service, count

    def __enter__(self) -> None:
        _admit(self.service, self.count)

    def __exit__(self, *exc: object) -> None:
        self.service.in_flight -= self.count
