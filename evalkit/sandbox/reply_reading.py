"""Trusted side: reading a worker's reply, the one way the judge does (``decode_reply``).

A reply is one JSON object of at most ``protocol.MAX_REPLY_BYTES``, one of ``protocol``'s claims. Every field's type,
range and size is checked here before anything else sees it; what comes back is a claim, what the worker *says*.
A reply that breaks the protocol raises ``protocol.ProtocolViolation``: the submission's fault. Standard library only.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from evalkit.sandbox.protocol import (CLAIMS, IPC_HANDLE_HEX, MAX_CALLS, MAX_DIMS, MAX_FRAMES, MAX_ITEMS, MAX_NAME,
                                      MAX_SEGMENTS, MAX_TEXT, CalledClaim, Claim, ErrorClaim,
                                      FrameClaim, PlaceClaim, PongClaim, ProfiledClaim, ProtocolViolation, ReadyClaim,
                                      BuiltClaim, SegmentClaim, reply_object, safe_text)


def decode_reply(raw: bytes) -> Claim:
    """The claim in one reply, or ``ProtocolViolation`` saying what is wrong with it."""
    message = reply_object(raw)
    op = message.get("op")
    if not isinstance(op, str) or op not in CLAIMS:
        raise ProtocolViolation(f"a reply with an unknown op {_show(op)}")
    return _READERS[op](message)


def _show(value: Any) -> str:
    return repr(value)[:60]


def _get(message: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = dataclasses.MISSING) -> Any:
    if key not in message:
        if default is dataclasses.MISSING:
            raise ProtocolViolation(f"'{message['op']}' reply without '{key}'")
        return default
    value = message[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolViolation(f"'{message['op']}' reply with '{key}' = {_show(value)}")
    return value


def _text(message: dict[str, Any], key: str, limit: int = MAX_TEXT, default: Any = dataclasses.MISSING) -> str:
    return safe_text(str(_get(message, key, str, default)), limit)


def _choice(message: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = _get(message, key, str)
    if value not in choices:
        raise ProtocolViolation(f"'{message['op']}' reply with '{key}' = {_show(value)}, not one of {choices}")
    return value


def _small_int(value: Any, what: str, low: int = 0, high: int = 2**62) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ProtocolViolation(f"{what} = {_show(value)}")
    return value


def _items(message: dict[str, Any], key: str) -> list[Any]:
    value = _get(message, key, list)
    if len(value) > MAX_ITEMS:
        raise ProtocolViolation(f"'{message['op']}' reply with {len(value)} '{key}' (at most {MAX_ITEMS})")
    return value


def _names(message: dict[str, Any], key: str, nullable: bool = False) -> list[Any]:
    names = _items(message, key)
    for name in names:
        if not (isinstance(name, str) or (nullable and name is None)):
            raise ProtocolViolation(f"'{message['op']}' reply with a '{key}' entry {_show(name)}")
    return [safe_text(n, MAX_NAME) if isinstance(n, str) else None for n in names]


def _shape(value: Any) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_DIMS:
        raise ProtocolViolation(f"a shape {_show(value)}")
    return [_small_int(n, "a shape dimension") for n in value]


def _frame(value: Any) -> FrameClaim:
    if not isinstance(value, dict):
        raise ProtocolViolation(f"a traceback frame {_show(value)}")
    line = value.get("line")
    return FrameClaim(file=safe_text(str(value.get("file", "")), MAX_NAME),
                      line=_small_int(line, "a traceback line", high=10**7) if line is not None else 0,
                      function=safe_text(str(value.get("function", "")), MAX_NAME),
                      in_submission=value.get("in_submission") is True,
                      text=safe_text(str(value.get("text", "")), MAX_NAME))


def _error(m: dict[str, Any]) -> ErrorClaim:
    kind = m.get("kind")
    return ErrorClaim(kind=kind if kind in ErrorClaim.KINDS else "runtime_error", stage=_text(m, "stage", MAX_NAME),
                      message=_text(m, "message"), type=_text(m, "type", MAX_NAME, ""),
                      traceback=[_frame(f) for f in _items(m, "traceback")[-MAX_FRAMES:]] if "traceback" in m else [])


def _called(m: dict[str, Any]) -> CalledClaim:
    shapes = [_shape(s) for s in _items(m, "shapes")]
    places = _listed(m, "places", MAX_CALLS)
    segments = [_segment(entry) for entry in _listed(m, "segments", MAX_SEGMENTS)]
    return CalledClaim(nonce=_nonce(m), formed=_get(m, "formed", bool), types=_names(m, "types"), shapes=shapes,
                       dtypes=_names(m, "dtypes", nullable=True), call_ms=_times(m),
                       places=[[_place(p, len(segments)) for p in _outputs(call)] for call in places],
                       segments=segments)


def _listed(m: dict[str, Any], key: str, most: int) -> list[Any]:
    value = _get(m, key, list, [])
    if len(value) > most:
        raise ProtocolViolation(f"'{m['op']}' reply with {len(value)} '{key}' (at most {most})")
    return value


def _times(m: dict[str, Any]) -> list[float]:
    """The worker's own times of its calls (``call_ms``): finite, not negative."""
    times = _listed(m, "call_ms", MAX_CALLS)
    for value in times:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ProtocolViolation(f"'{m['op']}' reply with a time of {_show(value)} ms")
    return [float(value) for value in times]


def _outputs(value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise ProtocolViolation(f"a call's places {_show(value)}")
    return value


def _place(value: Any, segments: int) -> PlaceClaim:
    """A place on the wire, ``[segment, offset, strides]`` (``PlaceClaim.wire``)."""
    if not isinstance(value, list) or len(value) != 3:
        raise ProtocolViolation(f"an output's place {_show(value)}")
    segment, offset, strides = value
    if not isinstance(strides, list) or len(strides) > MAX_DIMS:
        raise ProtocolViolation(f"an output's strides {_show(strides)}")
    return PlaceClaim(segment=_small_int(segment, "an output's segment", low=-1, high=segments - 1),
                      offset=_small_int(offset, "an output's offset", high=2**64),
                      strides=[_small_int(n, "an output's stride", high=2**62) for n in strides])


def _segment(value: Any) -> SegmentClaim:
    handle = value.get("handle") if isinstance(value, dict) else None
    if not isinstance(handle, str) or not re.fullmatch(f"[0-9a-f]{{{IPC_HANDLE_HEX}}}", handle):
        raise ProtocolViolation(f"a segment {_show(value)}")
    return SegmentClaim(handle=handle, nbytes=_small_int(value.get("nbytes"), "a segment's size", low=1, high=2**50))


def _nonce(m: dict[str, Any]) -> int:
    return _small_int(m.get("nonce"), f"'{m['op']}' reply's nonce", high=2**64)


def _profiled(m: dict[str, Any]) -> ProfiledClaim:
    kernels = _names(m, "kernels")
    times = _items(m, "kernel_us") if "kernel_us" in m else []
    if times and (len(times) != len(kernels) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0 for t in times)):
        raise ProtocolViolation(f"'profiled' reply with kernel times {_show(times)}")
    return ProfiledClaim(kernels=kernels, aten_ops=_names(m, "aten_ops"), kernel_us=[float(t) for t in times])


_READERS: dict[str, Any] = {
    "error": _error,
    "ready": lambda m: ReadyClaim(weights=_choice(m, "weights", ReadyClaim.WEIGHTS),
                                  landlock=_small_int(m.get("landlock"), "the Landlock ABI", high=1000),
                                  privileges=_text(m, "privileges", MAX_NAME, "")),
    "built": lambda m: BuiltClaim(landlock=_small_int(m.get("landlock"), "the Landlock ABI", high=1000),
                                  privileges=_text(m, "privileges", MAX_NAME, "")),
    "called": _called,
    "profiled": _profiled,
    "pong": lambda m: PongClaim(nonce=_nonce(m), call_ms=_times(m)),
}
