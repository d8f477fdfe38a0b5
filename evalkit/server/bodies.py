"""Trusted side: what a client of ``evalkit serve`` may send, read and bounded before any work is done.

Every client is untrusted, and so is everything it sends: a body is read while it streams and refused once it
passes ``MAX_BODY_BYTES`` (never read whole first), then parsed and checked field by field, each with an upper
bound as well as a lower one (an answer's and a reference's size, a batch's items, a name's length, a deadline, and
every problem setting: ``sources.settings.checked_client_value``). A refusal is ``BadRequest``: a 4xx whose JSON
``{"error", "field"}`` names the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, AsyncIterator

from evalkit.sources.problems import MAX_REFERENCE_BYTES

MAX_BODY_BYTES = 8 * 1024 * 1024  # a batch of answers with their references
MAX_ANSWER_BYTES = 1024 * 1024  # an answer's text (long reasoning included); a reference's: MAX_REFERENCE_BYTES
MAX_BATCH_ITEMS = 256
MAX_NAME = 64  # a problem's name (its id adds the content's hash)
MAX_LABEL = 200  # a sample's name, an item's id
MAX_DEADLINE_S = 24 * 3600.0
ITEM_FIELDS = ("problem", "reference_code", "name", "settings", "answer", "sample", "id")
BATCH_FIELDS = ("items", "deadline_s")
JUDGE_FIELDS = ITEM_FIELDS + ("deadline_s",)


class BadRequest(Exception):
    """The client's mistake: ``status`` (4xx) and the ``field`` it concerns ("" for the body)."""

    def __init__(self, message: str, field_name: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.field_name, self.status = field_name, status


@dataclass(frozen=True)
class Item:
    """One answer to judge, as checked: by ``problem`` id, or by ``reference_code`` (with ``name``, ``settings``)."""

    answer: str
    problem: str | None = None
    reference_code: str | None = None
    name: str | None = None
    settings: dict[str, Any] | None = None
    sample: str | None = None
    id: str | None = None  # the client's own, echoed on its row


async def read_body(chunks: AsyncIterator[bytes], declared: str | None) -> dict[str, Any]:
    """The JSON object a body holds, read from ``chunks`` as they arrive and refused (413) as soon as it passes
    ``MAX_BODY_BYTES``, or before the first chunk when its ``Content-Length`` (``declared``) says it would."""
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadRequest(f"the body is {declared} bytes, more than {MAX_BODY_BYTES}: split the batch", "", 413)
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadRequest(f"the body is more than {MAX_BODY_BYTES} bytes: split the batch", "", 413)
        parts.append(chunk)
    try:
        body = json.loads(b"".join(parts))
    except RecursionError:
        raise BadRequest("the body is nested too deeply to read") from None
    except ValueError as err:
        raise BadRequest(f"the body is not JSON: {err}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def judge_body(body: dict[str, Any]) -> tuple[Item, float | None]:
    """A ``POST /v1/judge`` body: its item and its deadline."""
    _known(body, JUDGE_FIELDS, "")
    return item(body, ""), deadline(body)


def batch_body(body: dict[str, Any]) -> tuple[list[Item], float | None]:
    """A ``POST /v1/batch`` body: its items and its deadline (for the whole batch)."""
    _known(body, BATCH_FIELDS, "")
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise BadRequest("items: give a non-empty list of judge bodies", "items")
    if len(items) > MAX_BATCH_ITEMS:
        raise BadRequest(f"items: {len(items)} answers, more than {MAX_BATCH_ITEMS} a batch", "items", 413)
    checked = [item(entry, f"items[{n}].") for n, entry in enumerate(items)]
    ids = [entry.id for entry in checked if entry.id is not None]
    if len(set(ids)) != len(ids):
        raise BadRequest("items: an id is given to two items; give each its own, or none (rows then carry the item's "
                         "index)", "items")
    return checked, deadline(body)


def item(body: Any, where: str) -> Item:
    if not isinstance(body, dict):
        raise BadRequest(f"{where or 'the body'}: expected a JSON object", where.rstrip("."))
    if where:
        _known(body, ITEM_FIELDS, where)
    answer = _text(body, "answer", where, MAX_ANSWER_BYTES, required=True)
    if ("problem" in body) == ("reference_code" in body):
        raise BadRequest(f"{where}problem: give either problem (an id) or reference_code (a reference's text)",
                         f"{where}problem")
    settings = body.get("settings")
    if settings is not None and not isinstance(settings, dict):
        raise BadRequest(f"{where}settings: an object of problem.toml settings", f"{where}settings")
    return Item(answer=answer, problem=_text(body, "problem", where, MAX_LABEL),
                reference_code=_text(body, "reference_code", where, MAX_REFERENCE_BYTES),
                name=_text(body, "name", where, MAX_NAME), settings=settings,
                sample=_text(body, "sample", where, MAX_LABEL), id=_text(body, "id", where, MAX_LABEL))


def deadline(body: dict[str, Any]) -> float | None:
    """``deadline_s``: seconds from now after which what is left is given up (None: none)."""
    value = body.get("deadline_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_DEADLINE_S:
        raise BadRequest(f"deadline_s: seconds, > 0 and at most {MAX_DEADLINE_S:g}; got {value!r}", "deadline_s")
    return float(value)


def _known(body: dict[str, Any], fields: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise BadRequest(f"{where}{unknown[0][:MAX_LABEL]}: unknown field; the fields are {', '.join(sorted(fields))}",
                         f"{where}{unknown[0][:MAX_LABEL]}")


def _text(body: dict[str, Any], key: str, where: str, limit: int, required: bool = False) -> str | None:
    """``body[key]``: a string of at most ``limit`` bytes (UTF-8); 413 when longer, 400 when no string."""
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{where}{key}: give a string", f"{where}{key}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise BadRequest(f"{where}{key}: {size} bytes, more than {limit}", f"{where}{key}", 413)
    return value
