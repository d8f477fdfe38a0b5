"""What rows record of how they were judged, as facts of a run rather than scores (no side of the trust boundary:
reads rows only, never torch): the settings seen in them and where they were judged. ``summary.json`` carries both
(``settings``, ``environment.judged_on``); the comparison page shows them as what happened, beside what each run
asked for (``run.json``).
"""

from __future__ import annotations

from typing import Any

from evalkit.row_parts import part

Row = dict[str, Any]


def settings_seen(rows: list[Row]) -> dict[str, list[Any]]:
    """The judge settings the rows record, each as the sorted list of distinct values."""
    seen: dict[str, set[Any]] = {"precision": set(), "atol": set(), "rtol": set(), "trials": set(),
                                 "reference_precision": set(), "timing_trials": set()}
    for row in rows:
        if row.get("precision") is not None:
            seen["precision"].add(row["precision"])
        correctness = part(row, "correctness")
        for key in ("atol", "rtol", "trials", "reference_precision"):
            if correctness.get(key) is not None:
                seen[key].add(correctness[key])
        timing = part(row, "timing")
        if timing.get("count") is not None:
            seen["timing_trials"].add(timing["count"])
    return {k: sorted(v, key=str) for k, v in seen.items()}


def judged_on(rows: list[Row]) -> dict[str, list[str]]:
    """Where the rows were judged: their devices, device names and evalkit versions."""
    names = {str(name) for r in rows if (name := part(r, "baselines").get("device_name"))}
    return {"devices": sorted({str(r.get("device")) for r in rows if r.get("device")}),
            "device_names": sorted(names),
            "evalkit_versions": sorted({str(r.get("evalkit_version")) for r in rows if r.get("evalkit_version")})}
