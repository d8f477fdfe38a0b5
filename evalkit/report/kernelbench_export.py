"""KernelBench's ``eval_results.json`` from a report folder's rows (no side of the trust boundary: reads rows
only, never torch), so KernelBench's own analysis scripts (``benchmark_eval_analysis.py``, pass@k) can
read what evalkit judged.

The shape is the one ``scripts/eval_from_generations.py`` writes to ``runs/<run>/eval_results.json``: one
run of one level, keyed by the KernelBench problem number as a string (numeric order), each a list of
samples ordered by ``sample_id``::

    {"50": [{"sample_id": 0, "compiled": true, "correctness": true,
             "metadata": {"hardware": "NVIDIA H200", "device": "cuda", "correctness_trials": "(5 / 5)",
                          "evalkit": {"verdict": "correct", ...}},
             "runtime": 1.23, "runtime_stats": {"mean": 1.23, "std": 0.01, "min": 1.2, "max": 1.3,
                                                "num_trials": 50, "median": 1.22, "hardware": ..., "device": ...}}]}

``runtime`` is the mean time of one call in milliseconds (-1.0 and ``runtime_stats`` ``{}`` when the row
was not timed). A row's KernelBench level and number come from, in order: its ``kernelbench`` field
(``{"level", "number"}``), the ``numbers`` given (``evalkit.sources.kernelbench_layout.kernelbench_numbers``),
its answer file's name (``level_{L}_problem_{N}_sample_{S}_kernel.py``), its problem id (``l{L}_{N}_...``).
Rows without one are kept under their evalkit problem id (after the numbers), with a warning.
"""

from __future__ import annotations

import builtins
import json
import logging
import re
from pathlib import Path
from typing import Any, Mapping

from evalkit.records import CURATED_RUN, VERDICT_INFO, EvalkitError, Flag, Verdict
from evalkit.report.scoring import dedupe, is_compiled, is_correct
from evalkit.report_folder import ReportFolder
from evalkit.results_file import RESULTS_FILE, read_rows
from evalkit.row_parts import part

logger = logging.getLogger(__name__)

_KERNEL_NAME = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_STABLE_ID = re.compile(r"^l(\d+)_(\d+)_")
# KernelBench names an error as its ``get_error_name`` does (``module.Class``); where evalkit saw no exception, the
# name KernelBench gives the same failure: its no-ModelNew / syntax path's own "SyntaxError", the RuntimeError
# torch.utils.cpp_extension raises when a build fails, Python's TimeoutError; else ``evalkit.<verdict>``.
_ERROR_NAMES = {"no_code": "SyntaxError", "syntax_error": "SyntaxError", "compile_error": "builtins.RuntimeError",
                "timeout": "builtins.TimeoutError"}
Row = dict[str, Any]
Place = tuple[int | None, str, int | None]  # (level, key, sample_id if the file name says it)


class ExportError(EvalkitError, ValueError):
    """The rows cannot be written as one ``eval_results.json``; the message says why and what to do."""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _place(row: Row, numbers: Mapping[str, tuple[int, int]]) -> Place:
    """Where ``row`` goes: its KernelBench level (None when unknown), its key and its sample id."""
    name = _KERNEL_NAME.search(str(row.get("path") or "").replace("\\", "/"))
    sample = int(name.group(3)) if name else None
    given = row.get("kernelbench")
    level, number = (_int(given.get("level")), _int(given.get("number"))) if isinstance(given, dict) else (None, None)
    if level and number:
        return level, str(number), sample
    if row.get("problem") in numbers:
        level, number = numbers[row["problem"]]
        return level, str(number), sample
    if name:
        return int(name.group(1)), str(int(name.group(2))), sample
    stable = _STABLE_ID.match(str(row.get("problem") or ""))
    if stable:
        return int(stable.group(1)), str(int(stable.group(2))), sample
    return _int(row.get("problem_level")), str(row.get("problem")), sample


def _one_run(rows: list[Row], run: str | None) -> list[Row]:
    runs = sorted({str(r.get("run")) for r in rows})
    if run is not None:
        if run not in runs:
            raise ExportError(f"no rows of run {run!r}; the rows hold run(s): {', '.join(runs) or 'none'}")
        return [r for r in rows if r.get("run") == run]
    judged = [name for name in runs if name != CURATED_RUN] or runs
    if len(judged) > 1:
        raise ExportError(f"the rows hold {len(judged)} runs ({', '.join(judged)}), and eval_results.json holds "
                          f"one run's: choose one (run=...)")
    return [r for r in rows if r.get("run") in judged]


def _one_level(placed: list[tuple[Row, Place]], level: int | None) -> list[tuple[Row, Place]]:
    if level is not None:
        return [(row, place) for row, place in placed if place[0] == level]
    levels = sorted({place[0] for _, place in placed if place[0] is not None})
    if len(levels) > 1:
        raise ExportError(f"the rows hold problems of KernelBench levels {', '.join(map(str, levels))}, and "
                          f"eval_results.json keys problems by their number within one level: choose one (level=...)")
    return placed


def _sample_ids(entries: list[tuple[Row, Place]]) -> list[tuple[Row, int]]:
    """Each row's sample id: from its file name, else its sample when that is a number, else the first free
    number (in sample order)."""
    fixed = [(row, place[2] if place[2] is not None else _digits(row.get("sample"))) for row, place in entries]
    used = {sample for _, sample in fixed if sample is not None}
    free = (n for n in range(len(fixed) + len(used) + 1) if n not in used)
    rest = sorted((row for row, sample in fixed if sample is None), key=lambda r: str(r.get("sample")))
    named = {id(row): next(free) for row in rest}
    numbered = [(row, named[id(row)] if sample is None else sample) for row, sample in fixed]
    return sorted(numbered, key=lambda pair: pair[1])


def _digits(value: object) -> int | None:
    text = str(value)
    return int(text) if _is_number(text) else None


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def runtime_stats(row: Row) -> dict[str, Any]:
    """KernelBench's ``runtime_stats`` of a correct row (mean, std, min, max, num_trials in ms; evalkit's median
    beside them; the hardware and device), or {} for a row that was not timed."""
    timing = part(row, "timing")
    mean = timing.get("mean_ms", timing.get("median_ms"))
    if not is_correct(row) or not isinstance(mean, (int, float)):
        return {}
    stats = {"mean": mean, "std": timing.get("std_ms"), "min": timing.get("min_ms"), "max": timing.get("max_ms"),
             "num_trials": timing.get("count"), "median": timing.get("median_ms")}
    return {**stats, **_hardware(row)}


def _hardware(row: Row) -> dict[str, Any]:
    baselines = part(row, "baselines")
    facts = {"hardware": baselines.get("device_name"), "device": row.get("device")}
    return {key: value for key, value in facts.items() if value}


def error_name(row: Row) -> str:
    """What went wrong, named as KernelBench's ``get_error_name`` names an exception (``builtins.TypeError``)."""
    verdict, exception = str(row.get("verdict")), part(row, "error").get("type")
    if verdict in ("no_code", "syntax_error") or not exception:
        return _ERROR_NAMES.get(verdict, f"evalkit.{verdict}")
    builtin = getattr(builtins, exception, None)
    return f"builtins.{exception}" if isinstance(builtin, type) and issubclass(builtin, BaseException) else exception


def _error_metadata(row: Row) -> dict[str, Any]:
    """KernelBench's own metadata keys for what went wrong: the reason under the stage's key, the error's name
    under ``<key>_name``, and for a wrong output the largest and mean difference of the trial that failed."""
    verdict, reason = row.get("verdict"), row.get("reason", "")
    stage = _stage(verdict)
    if stage in ("compilation_error", "runtime_error"):
        frames = [f for f in part(row, "error").get("traceback") or [] if f.get("in_submission")]  # the answer's
        trace = "".join(f'  File "{f.get("file")}", line {f.get("source_line") or f.get("line")}, in '
                        f'{f.get("function")}\n    {f.get("text")}\n' for f in frames)
        extra = {"runtime_error_traceback": trace} if stage == "runtime_error" and trace else {}
        return {stage: reason, f"{stage}_name": error_name(row), **extra}
    if stage == "correctness_issue":
        check = part(row, "correctness")
        differences = {key: [f"{figure:.6f}"] for key, figure in (("max_difference", check.get("max_abs_err")),
                                                                   ("avg_difference", check.get("mean_abs_err")))
                       if isinstance(figure, (int, float))}
        return {"correctness_issue": reason, "correctness_issue_name": "correctness_issue", **differences}
    return {"skipped": reason} if stage == "skipped" else {}


def _stage(verdict: object) -> str:
    """The key of KernelBench's metadata the verdict's reason goes under (``VerdictInfo.kernelbench``), or ""."""
    try:
        return VERDICT_INFO[Verdict(verdict)].kernelbench
    except ValueError:
        return ""


def correctness_trials(row: Row, trials: int | None = None) -> str | None:
    """KernelBench's ``"(passed / trials)"``: every trial of a correct row, or of one wrong only when timed; the
    trials before the one that failed (evalkit stops there: those after it count as not passed). ``trials``: how
    many were asked, where the row does not say (a wrong one's record holds the failing trial only); None when
    unknown, or when the answer never got through its trials (an error)."""
    check = part(row, "correctness")
    asked = _int(check.get("trials")) or trials
    if not asked:
        return None
    if is_correct(row) or check.get("timed_request"):
        return f"({asked} / {asked})"
    failed = _int(check.get("failed_trial"))
    return f"({failed - 1} / {asked})" if failed else None


def kernelbench_metadata(row: Row, trials: int | None = None) -> dict[str, Any]:
    """The ``metadata`` KernelBench's ``eval_kernel_against_ref`` gives for what ``row`` says (its keys, their
    meanings): the hardware and device, the error's key and name, a wrong output's differences, the trials passed;
    ``excessive_speedup`` where evalkit flagged the speedup implausible."""
    metadata: dict[str, Any] = {**_hardware(row), **_error_metadata(row)}
    passed = correctness_trials(row, trials)
    if passed:
        metadata["correctness_trials"] = passed
    if Flag.IMPLAUSIBLE_SPEEDUP.value in (row.get("flags") or []):
        metadata["excessive_speedup"] = True
    return metadata


def _metadata(row: Row) -> dict[str, Any]:
    metadata = kernelbench_metadata(row)
    metadata["evalkit"] = {key: row.get(key) for key in ("run", "problem", "sample", "path", "sha256", "verdict",
                                                          "reason", "flags", "speedup_vs_eager", "speedup_vs_compile")}
    return metadata


def _entry(row: Row, sample_id: int) -> dict[str, Any]:
    stats = runtime_stats(row)
    return {"sample_id": sample_id, "compiled": is_compiled(row), "correctness": is_correct(row),
            "metadata": _metadata(row), "runtime": stats["mean"] if stats else -1.0, "runtime_stats": stats}


def _key_order(key: str) -> tuple[int, int, str]:
    return (0, int(key), "") if _is_number(key) else (1, 0, key)


def eval_results(rows: list[dict], *, run: str | None = None, level: int | None = None,
                 numbers: Mapping[str, tuple[int, int]] | None = None) -> dict:
    """KernelBench's ``eval_results.json`` content for ``rows`` (deduplicated: the last row of a key wins).

    The rows must hold one run (the ``curated`` run is left out when another is present) and one KernelBench
    level, or ``run``/``level`` must pick one; else ``ExportError``. ``numbers`` maps problem ids to
    (level, number) for rows that do not say theirs.
    """
    chosen = _one_run(dedupe(rows), run)
    placed = _one_level([(row, _place(row, numbers or {})) for row in chosen], level)
    groups: dict[str, list[tuple[Row, Place]]] = {}
    for row, place in placed:
        groups.setdefault(place[1], []).append((row, place))
    unnumbered = sorted(key for key in groups if not _is_number(key))
    if unnumbered:
        logger.warning("no KernelBench problem number is known for problem(s) %s: their samples are under "
                       "their evalkit id; run `evalkit problems import` on their KernelBench level to record it",
                       ", ".join(unnumbered))
    return {key: [_entry(row, sample_id) for row, sample_id in _sample_ids(groups[key])]
            for key in sorted(groups, key=_key_order)}


def write_eval_results(report_dir: Path, out: Path | None = None, *, run: str | None = None,
                       level: int | None = None, numbers: Mapping[str, tuple[int, int]] | None = None) -> Path:
    """Write ``eval_results(...)`` of ``report_dir``'s results.jsonl to ``out`` (default:
    ``report_dir/eval_results.json``, indented as KernelBench writes it); return where it went."""
    results = Path(report_dir) / RESULTS_FILE
    if not results.is_file():
        raise ExportError(f"{report_dir}: no {RESULTS_FILE} here, so there is nothing to export; give a report "
                          f"folder that `evalkit score` wrote (reports/<name>-<timestamp>/)")
    try:
        data = eval_results(read_rows(results), run=run, level=level, numbers=numbers)
    except ExportError as err:
        raise ExportError(f"{results}: {err}") from err
    with ReportFolder.open(report_dir, create=False) as folder:
        return folder.write_export(json.dumps(data, indent=4, allow_nan=False) + "\n", out)
