"""The KernelBench origin of a problem, declared once: which KernelBench problem a problem folder is
(``kernelbench_level``, ``kernelbench_number``, ``kernelbench_file``, ``kernelbench_sha256``, ``kernelbench_version``
in its problem.toml; written by ``evalkit problems import``), its parsing (``parse_origin``) and its lines
(``origin_toml``).

Trusted side; reads problem folders / files; never runs submission code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.sources.errors import ProblemError
from evalkit.sources.settings import toml_string


@dataclass(frozen=True)
class KernelBenchOrigin:
    """Which KernelBench problem a problem folder is: level ``level``, problem ``number`` (the ``<n>`` of
    ``<n>_<Name>.py``), read from ``file`` (relative to the KernelBench folder, e.g.
    ``level1/50_conv_standard_2D__square_input__square_kernel.py``) whose bytes hash to ``sha256``, of
    KernelBench version ``version`` ("" when not given). problem.toml spells each field ``kernelbench_<field>``."""

    level: int
    number: int
    file: str = ""
    sha256: str = ""
    version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


ORIGIN_PREFIX = "kernelbench_"
ORIGIN_KEYS = tuple(ORIGIN_PREFIX + f.name for f in dataclasses.fields(KernelBenchOrigin))
_SHA256 = frozenset("0123456789abcdef")


def _origin_value(key: str, value: Any, path: Path) -> Any:
    if key in ("kernelbench_level", "kernelbench_number"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ProblemError(f"{path}: {key!r} must be a positive integer, got {value!r} "
                               f"(e.g. `{key} = 1`; see docs/problems.md)")
        return value
    if not isinstance(value, str):
        raise ProblemError(f"{path}: {key!r} must be a string, got {value!r} (see docs/problems.md)")
    if key == "kernelbench_sha256" and value and (len(value) != 64 or not set(value) <= _SHA256):
        raise ProblemError(f"{path}: 'kernelbench_sha256' must be 64 lowercase hex digits (a SHA-256), "
                           f"got {value!r}; remove it or run `evalkit problems import` again")
    return value


def parse_origin(data: dict[str, Any], path: Path) -> KernelBenchOrigin | None:
    """The KernelBench origin among the keys of ``path``, or None when it gives none.

    ``kernelbench_level`` and ``kernelbench_number`` come together; the other origin keys need them.
    """
    given = {key[len(ORIGIN_PREFIX):]: _origin_value(key, data[key], path) for key in ORIGIN_KEYS if key in data}
    if not given:
        return None
    missing = [ORIGIN_PREFIX + name for name in ("level", "number") if name not in given]
    if missing:
        raise ProblemError(f"{path}: {', '.join(sorted(ORIGIN_PREFIX + k for k in given))} given without "
                           f"{' and '.join(missing)}; a KernelBench origin needs both the level and the "
                           f"problem number (see docs/problems.md), or none of the kernelbench_ keys")
    return KernelBenchOrigin(**given)


def origin_toml(origin: KernelBenchOrigin) -> list[str]:
    """problem.toml lines recording ``origin`` (empty strings left out)."""
    lines = [f"kernelbench_level = {origin.level}", f"kernelbench_number = {origin.number}"]
    for name in ("file", "sha256", "version"):
        value = getattr(origin, name)
        if value:
            lines.append(f"{ORIGIN_PREFIX}{name} = {toml_string(value)}")
    return lines
