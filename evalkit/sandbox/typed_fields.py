"""Both sides of the trust boundary: one check of a declared message's fields against its dataclass annotations,
shared by the judge protocol (``evalkit.schedule.judge_messages.expect``) and the judge's requests to a worker
(``evalkit.sandbox.protocol.read_request``).

``wrong_field`` walks a message's fields as ``typing.get_type_hints`` declares them: a plain class (an ``int``
is no ``bool``, a ``float`` may be an ``int``), ``X | None``, ``list`` / ``set`` / ``tuple`` / ``dict`` of them
(each item checked), ``Any`` (anything), a ``TypedDict`` (a dict: its keys are ``row_parts``'s to check), and a
nested dataclass, field by field. An annotation it cannot check is a ``TypeError`` naming it, so a message
declared with one fails its tests, never a run.

Standard library only, importing nothing of evalkit: the worker imports it (through ``protocol``) before any
submission code runs.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

_ABSENT = object()
_ITEMS = (list, set, frozenset)


def wrong_field(message: Any) -> str | None:
    """None when every field of the dataclass instance ``message`` holds a value of its declared type, nested
    ones included; else where and how it does not, e.g. ``Prepare.kinds[1]: expected str, got int``."""
    return _wrong_dataclass(message, type(message).__name__)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _wrong_dataclass(value: Any, path: str) -> str | None:
    hints = _hints(type(value))
    for field in dataclasses.fields(value):
        found = _wrong(getattr(value, field.name, _ABSENT), hints[field.name], f"{path}.{field.name}")
        if found is not None:
            return found
    return None


def _wrong(value: Any, hint: Any, path: str) -> str | None:
    if value is _ABSENT:
        return f"{path}: expected {_name(hint)}, got nothing (no such field: a message of another version)"
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _wrong_union(value, hint, path)
    if origin is typing.Literal:
        return None if value in typing.get_args(hint) else f"{path}: expected {_name(hint)}, got {value!r}"
    if not _is_a(value, origin or hint, path):
        return f"{path}: expected {_name(hint)}, got {type(value).__name__}"
    if origin is not None:
        return _wrong_items(value, origin, typing.get_args(hint), path)
    if dataclasses.is_dataclass(hint):
        return _wrong_dataclass(value, path)
    return None


def _is_a(value: Any, kind: Any, path: str) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.is_typeddict(kind):
        return isinstance(value, dict)
    if not isinstance(kind, type):
        raise TypeError(f"{path} is declared {_name(kind)}, which typed_fields cannot check: declare it with a "
                        f"class, X | None, a list, set, tuple or dict of them, a Literal, or Any")
    return isinstance(value, kind)


def _wrong_union(value: Any, hint: Any, path: str) -> str | None:
    arms = typing.get_args(hint)
    found = [_wrong(value, arm, path) for arm in arms]
    if None in found:
        return None
    for arm, wrong in zip(arms, found):  # a container or dataclass of the value's kind: what is wrong inside it
        outer = typing.get_origin(arm)
        if (outer in (dict, tuple, *_ITEMS) or dataclasses.is_dataclass(arm)) and isinstance(value, outer or arm):
            return wrong
    return f"{path}: expected {_name(hint)}, got {type(value).__name__}"


def _wrong_items(value: Any, origin: Any, args: tuple[Any, ...], path: str) -> str | None:
    if not args:
        return None
    if origin is dict:
        pairs = ((_wrong(k, args[0], f"{path} key {k!r}"), _wrong(v, args[1], f"{path}[{k!r}]"))
                 for k, v in value.items())
        return next((wrong for pair in pairs for wrong in pair if wrong is not None), None)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            return f"{path}: expected {_name(origin[args])}, got a tuple of {len(value)}"
        checks = zip(value, args)
    elif origin is tuple or origin in _ITEMS:
        checks = ((item, args[0]) for item in value)
    else:
        raise TypeError(f"{path} is declared {_name(origin[args])}, which typed_fields cannot check")
    found = (_wrong(item, arg, f"{path}[{i}]") for i, (item, arg) in enumerate(checks))
    return next((wrong for wrong in found if wrong is not None), None)


def _name(hint: Any) -> str:
    """``hint`` as its declaration reads, without module paths: ``dict[str, Problem]``, ``int | None``."""
    if hint is type(None) or hint is None:
        return "None"
    if hint is Ellipsis:
        return "..."
    if hint is Any:
        return "Any"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_name(arg) for arg in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(arg) for arg in args)}]"
    if origin is not None:
        return f"{_name(origin)}[{', '.join(_name(arg) for arg in args)}]" if args else _name(origin)
    return getattr(hint, "__name__", repr(hint))
