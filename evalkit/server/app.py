"""Trusted side: the HTTP API of ``evalkit serve`` (Starlette): one ``Evaluator`` behind it, every request judged
on its judges and caches.

    GET  /v1/health                  {"ok": true, "version": ..., "in_flight": N, "batches": N}
    POST /v1/judge                   {"problem": ID} or {"reference_code": STR, "name"?, "settings"?},
                                     plus "answer": STR and "sample"? -> the row
    POST /v1/batch                   {"items": [judge bodies]} -> {"id": ID, "size": N}
    GET  /v1/batch/{id}              {"done": bool, "rows": [rows decided so far, in the order decided]}

Bad input gets a 4xx whose JSON ``{"error": ..., "field": ...}`` names the field; an answer never takes the
server down (whatever it does is its row). No authentication: bind to localhost, or put it behind one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from evalkit.records import EvalkitError
from evalkit.schedule.evaluator import Evaluator
from evalkit.sources.problems import INLINE_FOLDER, problem_from_source
from evalkit.version import __version__

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024  # a batch of answers with their references
MAX_BATCH_ITEMS = 256
MAX_IN_FLIGHT = 4096  # answers accepted and not yet decided, over every request
MAX_BATCHES_KEPT = 1024  # finished batches kept for polling; the oldest finished one goes first


class BadRequest(Exception):
    def __init__(self, message: str, field_name: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.field_name, self.status = field_name, status


@dataclass
class _BatchState:
    size: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task | None = None

    @property
    def done(self) -> bool:
        return len(self.rows) >= self.size


@dataclass
class _Service:
    evaluator: Evaluator
    in_flight: int = 0
    batches: dict[str, _BatchState] = field(default_factory=dict)


def create_app(evaluator: Evaluator) -> Starlette:
    """The Starlette app serving ``evaluator`` (the caller keeps it, and closes it after the server stops)."""
    service = _Service(evaluator)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "version": __version__, "in_flight": service.in_flight,
                             "batches": len(service.batches)})

    async def judge(request: Request) -> JSONResponse:
        item = _item(await _body(request), "")
        with _admitted(service, 1):
            problem, answer, sample = await asyncio.to_thread(_pair, service.evaluator, item, "")  # imports it
            return JSONResponse(await service.evaluator.judge_async(problem, answer, sample=sample))

    async def submit_batch(request: Request) -> JSONResponse:
        items = (await _body(request)).get("items")
        if not isinstance(items, list) or not items:
            raise BadRequest("items: give a non-empty list of judge bodies", "items")
        if len(items) > MAX_BATCH_ITEMS:
            raise BadRequest(f"items: {len(items)} answers, more than {MAX_BATCH_ITEMS} a batch", "items", 413)
        checked = [_item(entry, f"items[{n}].") for n, entry in enumerate(items)]
        pairs = await asyncio.to_thread(lambda: [_pair(service.evaluator, entry, f"items[{n}].")
                                                 for n, entry in enumerate(checked)])
        _admit(service, len(pairs))
        batch_id = uuid.uuid4().hex
        state = _BatchState(size=len(pairs))
        state.task = asyncio.create_task(_run_batch(service, state, pairs))
        service.batches[batch_id] = state
        _forget_old(service)
        return JSONResponse({"id": batch_id, "size": len(pairs)})

    async def poll_batch(request: Request) -> JSONResponse:
        state = service.batches.get(request.path_params["batch_id"])
        if state is None:
            raise BadRequest(f"no batch {request.path_params['batch_id']!r} (unknown, or forgotten long after it "
                             "finished)", "id", 404)
        return JSONResponse({"done": state.done, "size": state.size, "rows": list(state.rows)})

    async def refused(request: Request, err: Exception) -> JSONResponse:
        if isinstance(err, BadRequest):
            return JSONResponse({"error": str(err), "field": err.field_name}, status_code=err.status)
        return JSONResponse({"error": str(err), "field": ""}, status_code=400)

    routes = [Route("/v1/health", health, methods=["GET"]), Route("/v1/judge", judge, methods=["POST"]),
              Route("/v1/batch", submit_batch, methods=["POST"]),
              Route("/v1/batch/{batch_id}", poll_batch, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={BadRequest: refused, EvalkitError: refused})


async def _run_batch(service: _Service, state: _BatchState, pairs: list[tuple[Any, str, str | None]]) -> None:
    try:
        async for row in service.evaluator.judge_many_async(
                [(problem, text, sample) if sample else (problem, text) for problem, text, sample in pairs]):
            state.rows.append(row)
    except Exception:  # noqa: BLE001 - the batch's poller sees it unfinished; the server goes on
        logger.exception("a batch of %d answers failed", state.size)
    finally:
        service.in_flight -= state.size


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"the body is {len(raw)} bytes, more than {MAX_BODY_BYTES}", "", 413)
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise BadRequest(f"the body is not JSON: {err}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _item(body: Any, where: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"{where or 'the body'}: expected a JSON object", where.rstrip("."))
    known = {"problem", "reference_code", "name", "settings", "answer", "sample"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise BadRequest(f"{where}{unknown[0]}: unknown field; the fields are {', '.join(sorted(known))}",
                         f"{where}{unknown[0]}")
    if not isinstance(body.get("answer"), str):
        raise BadRequest(f"{where}answer: give the answer's text as a string", f"{where}answer")
    if ("problem" in body) == ("reference_code" in body):
        raise BadRequest(f"{where}problem: give either problem (an id) or reference_code (a reference's text)",
                         f"{where}problem")
    return body


def _pair(evaluator: Evaluator, item: dict[str, Any], where: str) -> tuple[Any, str, str | None]:
    """(problem, answer, sample) of one judge body, its problem checked before anything is built."""
    sample = item.get("sample")
    if sample is not None and not isinstance(sample, str):
        raise BadRequest(f"{where}sample: a string", f"{where}sample")
    if "problem" in item:
        if not isinstance(item["problem"], str) or item["problem"] not in evaluator.problems:
            raise BadRequest(f"{where}problem: no problem {item['problem']!r} here; known: "
                             f"{', '.join(sorted(evaluator.problems)[:20])}", f"{where}problem", 404)
        return item["problem"], item["answer"], sample
    settings = item.get("settings") or {}
    if not isinstance(settings, dict):
        raise BadRequest(f"{where}settings: an object of problem.toml settings", f"{where}settings")
    try:
        problem = problem_from_source(item["reference_code"], item.get("name"),
                                      root=evaluator.options.cache_dir / INLINE_FOLDER, **settings)
        evaluator.add_problem(problem)
    except EvalkitError as err:
        raise BadRequest(f"{where}reference_code: {err}", f"{where}reference_code") from None
    return problem, item["answer"], sample


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


def _forget_old(service: _Service) -> None:
    finished = [key for key, state in service.batches.items() if state.done]
    for key in finished[: max(0, len(service.batches) - MAX_BATCHES_KEPT)]:
        del service.batches[key]
