"""What every row's ``feedback`` must be for the model that gave the answer, wherever a test judges answers end to
end: never empty, within ``MAX_FEEDBACK``, each error said once, a wrong output's tolerance and worst values given,
and no secret of the judge's."""

from __future__ import annotations

import re
from typing import Any

from evalkit.judge.feedback import MAX_FEEDBACK

SAID_TWICE = re.compile(r"\b(\w+): \1:", re.IGNORECASE)  # "RuntimeError: RuntimeError:", "timeout: timeout:"


def check_feedback(row: dict[str, Any]) -> None:
    text, name = row.get("feedback"), f"{row['problem']}/{row['sample']}"
    assert text and text.strip(), f"{name}: no feedback"
    assert len(text) <= MAX_FEEDBACK, f"{name}: {len(text)} characters"
    assert not SAID_TWICE.search(text), f"{name}: {text}"
    found = row.get("correctness") or {}
    if row["verdict"] == "incorrect" and found.get("bad_count"):
        assert "atol=" in text and "rtol=" in text, f"{name}: no tolerance in {text}"
        assert "Worst elements, expected vs got: out[" in text, f"{name}: no values in {text}"
    for secret in (found.get("inputs_seed"), found.get("timing_inputs_seed")):  # the run's own seed is no secret
        assert not secret or str(secret) not in text, f"{name}: a seed in {text}"
