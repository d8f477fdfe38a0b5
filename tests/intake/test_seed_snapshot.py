"""The real seeds extract exactly as they did before chat-template markers and ModelNew bindings were
recognised: every field of the extraction and of every block (the code by its SHA-256).

``seed_extractions.json`` was written by the extractor of commit c3a9139, before that change. A change
that means to alter a seed's extraction rewrites the file (``python3 tests/intake/test_seed_snapshot.py
--rewrite``) and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for conftest when run as a script
from conftest import SEEDS  # noqa: E402
from evalkit.intake.extract import extract, find_blocks  # noqa: E402

SNAPSHOT = Path(__file__).with_name("seed_extractions.json")
SEED_FILES = sorted(SEEDS.glob("*/*.txt"))


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def snapshot(text: str) -> dict[str, Any]:
    """What the snapshot keeps of one answer's extraction."""
    data = extract(text).to_dict()
    data["code"] = {"sha256": _digest(data["code"]), "chars": len(data["code"])}
    blocks = [{**b.to_dict(), "code_sha256": _digest(b.code)} for b in find_blocks(text)]
    return {"extraction": data, "blocks": blocks}


def test_the_snapshot_covers_every_seed() -> None:
    assert sorted(json.loads(SNAPSHOT.read_text())) == sorted(p.name for p in SEED_FILES)
    assert len(SEED_FILES) == 5


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name[:3])
def test_seed_extracts_as_before(path: Path) -> None:
    expected = json.loads(SNAPSHOT.read_text())[path.name]
    assert snapshot(path.read_text(encoding="utf-8")) == expected


def _rewrite() -> None:
    data = {p.name: snapshot(p.read_text(encoding="utf-8")) for p in SEED_FILES}
    SNAPSHOT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["--rewrite"]:
    _rewrite()
