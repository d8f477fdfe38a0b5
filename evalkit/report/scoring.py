"""Scores from ``results.jsonl`` rows: pure functions, no I/O (no side of the trust boundary: reads rows
only, never torch).

Definitions (documented for users in ``docs/report-schema.md``):

- rows are deduplicated by (run, problem, sample); the last row in file order wins (a resumed run
  that judged changed content appends a newer row for the same key);
- ``code_extracted``: verdict is not ``no_code``;
- ``compiled``: the code got through the build stage: verdict is ``interface_error``,
  ``runtime_error``, ``incorrect`` or ``correct``, or ``crash``/``timeout`` with a build record whose
  status is not ``compile_error``/``crash``/``timeout`` (the failure came after the build);
- each run's scores cover the problems the run answered (at least one row; ``problems_scored`` says how
  many), so a run of one problem is not scored over every problem of the folder; ``overall`` covers every
  problem of the problem set, a problem without a submission counting as a failure;
- ``fast_p`` (KernelBench): over the problems scored, the fraction whose best sample is
  correct, unflagged (no flag that ``records.FLAG_INFO`` marks ``excludes_from_fast_p``, i.e. none of
  ``records.EXCLUDED_FLAGS``) and has a speedup whose 95% interval lies strictly above ``p`` (its low end,
  ``speedup_vs_<baseline>_ci[0]``; a row of an earlier schema, which has no interval, by its point estimate);
  ``fast_p_point`` counts by the point estimate alone, as KernelBench does;
- ``pass@k`` / ``fast_p@k``: Chen et al. (2021)'s unbiased estimator ``1 - C(n-c, k) / C(n, k)``
  averaged over the problems scored (``k`` is clamped to ``n`` where a problem has fewer samples);
- a baseline is *not measured* for a set of rows when the set has correct rows and none of them
  records that baseline (``--baselines eager`` or ``none``): its fast_p and fast_p@k are then ``None``
  (shown as "not measured", never 0%), and ``baselines_not_measured`` lists it;
- ``by_level``: the same fast_p over the problems of each KernelBench level, where rows carry the
  optional integer ``problem_level``; a problem without a level is in no level's count;
- the ``overall`` scores pool every row except the ``curated`` run's.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from typing import Any, Callable, Iterable, Mapping

from evalkit.records import BASELINE_KINDS, CURATED_RUN, EXCLUDED_FLAGS, VERDICT_ORDER, Verdict
from evalkit.report import run_facts
from evalkit.row_parts import BaselinesRecord, part

THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
BASELINES: tuple[str, ...] = BASELINE_KINDS
# "Furthest in the pipeline", for picking a problem's best row.
PIPELINE_RANK: dict[str, int] = {v.value: v.rank for v in Verdict}

Row = dict[str, Any]


def threshold_key(p: float) -> str:
    """The JSON key of threshold ``p``: ``0``, ``0.5``, ``1``, ``1.5`` ..."""
    return f"{p:g}"


def sample_key(row: Row) -> tuple[str, str, str]:
    """(run, problem, sample): a row's place in a report, whatever its content."""
    return (str(row.get("run", "")), str(row.get("problem", "")), str(row.get("sample", "")))


def dedupe(rows: Iterable[Row]) -> list[Row]:
    """One row per (run, problem, sample): the last one in file order, kept at its first position."""
    latest: dict[tuple[str, str, str], Row] = {}
    for row in rows:
        latest[sample_key(row)] = row
    return list(latest.values())


def speedup_of(row: Row, baseline: str) -> float | None:
    """The row's speedup against ``baseline``, or None when absent, non-finite or not positive."""
    value = row.get(f"speedup_vs_{baseline}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def is_correct(row: Row) -> bool:
    return row.get("verdict") == "correct"


def is_flagged(row: Row) -> bool:
    return bool(EXCLUDED_FLAGS.intersection(row.get("flags") or []))


def is_compiled(row: Row) -> bool:
    """The code got through the build; for a crash or timeout, the build record says whether it did."""
    try:
        compiled = Verdict(row.get("verdict")).compiled
    except ValueError:
        return False
    if compiled is not None:
        return compiled
    return part(row, "build").get("status") == "ok"


def speedup_low(row: Row, baseline: str) -> float | None:
    """The low end of the row's speedup interval against ``baseline``, or None when it has none."""
    interval = row.get(f"speedup_vs_{baseline}_ci")
    if not isinstance(interval, list) or len(interval) != 2:
        return None
    low = interval[0]
    return float(low) if isinstance(low, (int, float)) and not isinstance(low, bool) and math.isfinite(low) else None


def speedup_interval(row: Row, baseline: str) -> tuple[float, float] | None:
    """The row's speedup interval against ``baseline`` as (low, high), or None unless both ends are finite numbers."""
    interval = row.get(f"speedup_vs_{baseline}_ci")
    if not isinstance(interval, list) or len(interval) != 2:
        return None
    ends = [float(end) for end in interval
            if isinstance(end, (int, float)) and not isinstance(end, bool) and math.isfinite(end)]
    return (ends[0], ends[1]) if len(ends) == 2 and ends[0] <= ends[1] else None


def is_fast(row: Row, baseline: str, p: float, point: bool = False) -> bool:
    """Counts towards fast_p: correct, unflagged, and its speedup's interval strictly above ``p`` (with ``point``,
    or for a row without an interval, the speedup itself)."""
    speed = speedup_of(row, baseline)
    if not (is_correct(row) and not is_flagged(row) and speed is not None):
        return False
    low = None if point else speedup_low(row, baseline)
    return (speed if low is None else low) > p


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): the chance that at least one of ``k`` samples drawn from ``n`` (``c`` good) is good.

    ``k`` is clamped to ``n``; with ``n == 0`` the answer is 0 (no submission is a failure).
    """
    if n <= 0 or c <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def problem_set(rows: Iterable[Row], known: Iterable[str] | None = None) -> list[str]:
    """Every problem id seen in the rows plus the known ones, sorted."""
    return sorted({str(r.get("problem", "")) for r in rows} | set(known or ()))


def by_problem(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(str(row.get("problem", "")), []).append(row)
    return grouped


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def counts(rows: list[Row]) -> dict[str, Any]:
    """Submission counts, their rates (over all submissions) and the verdict breakdown."""
    n = len(rows)
    numbers = {
        "code_extracted": sum(r.get("verdict") != "no_code" for r in rows),
        "compiled": sum(is_compiled(r) for r in rows),
        "correct": sum(is_correct(r) for r in rows),
        "skipped": sum(r.get("verdict") == "skipped" for r in rows),
        "flagged": sum(is_flagged(r) for r in rows),
    }
    verdicts = Counter(str(r.get("verdict")) for r in rows)
    breakdown = {v: verdicts.pop(v, 0) for v in VERDICT_ORDER}
    breakdown.update(sorted(verdicts.items()))  # verdicts this version does not know, kept visible
    return {"submissions": n, "counts": numbers,
            "rates": {k: _rate(v, n) for k, v in numbers.items() if k != "flagged"},
            "verdicts": breakdown}


def fast_p(rows: list[Row], problems: list[str], baseline: str,
           thresholds: tuple[float, ...] = THRESHOLDS, point: bool = False) -> dict[str, float | None]:
    """KernelBench fast_p: a problem counts when any (so its best) sample is fast; all problems are the denominator."""
    grouped = by_problem(rows)
    result: dict[str, float | None] = {}
    for p in thresholds:
        hits = sum(any(is_fast(r, baseline, p, point) for r in grouped.get(pid, [])) for pid in problems)
        result[threshold_key(p)] = _rate(hits, len(problems))
    return result


def sample_counts(rows: list[Row], problems: list[str]) -> list[int]:
    """The ks to report: 1 and every per-problem sample count present."""
    grouped = by_problem(rows)
    return sorted({1} | {len(grouped[pid]) for pid in problems if grouped.get(pid)})


def mean_at_k(rows: list[Row], problems: list[str], k: int, good: Callable[[Row], bool]) -> float | None:
    """The unbiased estimator averaged over ``problems`` (``good(row) -> bool`` decides c)."""
    grouped = by_problem(rows)
    values = [pass_at_k(len(grouped.get(pid, [])), sum(good(r) for r in grouped.get(pid, [])), k)
              for pid in problems]
    return sum(values) / len(values) if values else None


def at_k(rows: list[Row], problems: list[str], thresholds: tuple[float, ...] = THRESHOLDS) -> dict[str, Any]:
    """pass@k and fast_p@k (against each baseline) for k in {1, n's present}."""
    ks = sample_counts(rows, problems)
    fast: dict[str, Any] = {}
    for baseline in BASELINES:
        fast[baseline] = {str(k): {threshold_key(p): mean_at_k(rows, problems, k, functools.partial(
                                       is_fast, baseline=baseline, p=p)) for p in thresholds} for k in ks}
    return {"ks": ks, "pass_at_k": {str(k): mean_at_k(rows, problems, k, is_correct) for k in ks},
            "fast_p_at_k": fast}


def geomean_speedup(rows: list[Row], baseline: str) -> dict[str, Any]:
    """Geometric mean speedup over correct, unflagged rows that have a speedup (``n`` says how many)."""
    speeds = [s for r in rows if is_correct(r) and not is_flagged(r) and (s := speedup_of(r, baseline))]
    value = math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None
    return {"value": value, "n": len(speeds)}


def measured(row: Row, baseline: str) -> bool:
    """The row has a speedup against ``baseline``, or its baselines record names it (timed, or failed)."""
    return speedup_of(row, baseline) is not None or baseline in part(row, "baselines")


def baselines_not_measured(rows: list[Row]) -> list[str]:
    """Baselines no correct row was timed against (left out by ``--baselines eager|none``); [] without a
    correct row, where every fast_p is 0 whatever was measured."""
    correct = [r for r in rows if is_correct(r)]
    return [b for b in BASELINES if correct and not any(measured(r, b) for r in correct)]


def not_measured(rows: list[Row], asked: tuple[str, ...] | None) -> list[str]:
    """The baselines a report shows as not measured: those its run did not ask for, and those no correct row was
    timed against."""
    missing = baselines_not_measured(rows)
    return [b for b in BASELINES if b in missing or (asked is not None and b not in asked)]


def _unmeasured(value: object) -> Any:
    """``value`` with every number replaced by None (the scores of a baseline that was not measured)."""
    return {k: _unmeasured(v) for k, v in value.items()} if isinstance(value, dict) else None


def problem_levels(rows: Iterable[Row]) -> dict[str, int]:
    """Each problem's KernelBench level, from the first row that carries an integer ``problem_level``."""
    levels: dict[str, int] = {}
    for row in rows:
        level = row.get("problem_level")
        if isinstance(level, int) and not isinstance(level, bool):
            levels.setdefault(str(row.get("problem", "")), level)
    return levels


def by_level(rows: list[Row], problems: list[str], levels: dict[str, int], unmeasured: list[str]) -> dict[str, Any]:
    """fast_p over each level's problems (only problems whose level is known), keyed by the level as a string."""
    out: dict[str, Any] = {}
    for level in sorted(set(levels.values())):
        ids = [pid for pid in problems if levels.get(pid) == level]
        mine = [r for r in rows if str(r.get("problem", "")) in ids]
        out[str(level)] = {"problems": len(ids),
                           "problems_correct": len({str(r.get("problem")) for r in mine if is_correct(r)}),
                           "fast_p": {b: _unmeasured(fast_p(mine, ids, b)) if b in unmeasured else fast_p(mine, ids, b)
                                      for b in BASELINES}}
    return out


def score_rows(rows: list[Row], problems: list[str], levels: dict[str, int] | None = None,
               asked: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Every score of one set of rows (a run, or all runs pooled) over the problem set ``problems``; ``asked``: the
    baselines the run asked for (``run.json``), when known: any other is not measured, whatever rows hold."""
    scores = counts(rows)
    unmeasured = not_measured(rows, asked)
    scores["problems_scored"] = len(problems)
    scores["problems_attempted"] = len({str(r.get("problem", "")) for r in rows})
    scores["problems_correct"] = len({str(r.get("problem", "")) for r in rows if is_correct(r)})
    scores["baselines_not_measured"] = unmeasured
    scores["fast_p"] = {b: fast_p(rows, problems, b) for b in BASELINES}
    scores["fast_p_point"] = {b: fast_p(rows, problems, b, point=True) for b in BASELINES}
    scores.update(at_k(rows, problems))
    for b in unmeasured:
        scores["fast_p"][b] = _unmeasured(scores["fast_p"][b])
        scores["fast_p_point"][b] = _unmeasured(scores["fast_p_point"][b])
        scores["fast_p_at_k"][b] = _unmeasured(scores["fast_p_at_k"][b])
    scores["geomean_speedup"] = {b: geomean_speedup(rows, b) for b in BASELINES}
    scores["by_level"] = by_level(rows, problems, levels or {}, unmeasured)
    return scores


def run_names(rows: Iterable[Row]) -> list[str]:
    """Runs sorted by name, the curated run last."""
    names = {str(r.get("run", "")) for r in rows}
    return sorted(names - {CURATED_RUN}) + ([CURATED_RUN] if CURATED_RUN in names else [])


def answered(rows: list[Row]) -> list[str]:
    """The problems ``rows`` answer (at least one row each, whatever its verdict), sorted: what a run is scored over."""
    return sorted({str(r.get("problem", "")) for r in rows})


def rows_of_run(rows: list[Row], run: str) -> list[Row]:
    return [r for r in rows if str(r.get("run", "")) == run]


def best_row(rows: list[Row]) -> Row | None:
    """Correct with the highest speedup vs eager (unflagged first), else the furthest verdict; ties: first row."""
    best: Row | None = None
    for row in rows:
        if best is None or _rank(row) > _rank(best):
            best = row
    return best


def _rank(row: Row) -> tuple[Any, ...]:
    if is_correct(row):
        speed = speedup_of(row, "eager")
        return (1, not is_flagged(row), speed is not None, speed or 0.0)
    return (0, PIPELINE_RANK.get(str(row.get("verdict")), -1))


def best_entry(rows: list[Row]) -> dict[str, Any] | None:
    """The per-problem table cell of one run: its best row, in brief."""
    best = best_row(rows)
    if best is None:
        return None
    return {"sample": str(best.get("sample", "")), "verdict": best.get("verdict"),
            "speedup_vs_eager": speedup_of(best, "eager"), "speedup_vs_compile": speedup_of(best, "compile"),
            "speedup_vs_eager_ci": best.get("speedup_vs_eager_ci"), "speedup_vs_compile_ci": best.get("speedup_vs_compile_ci"),
            "flags": list(best.get("flags") or []), "samples": len(rows), "correct": sum(map(is_correct, rows)),
            "below_resolution": part(best, "timing").get("below_resolution") is True,
            "sha256": best.get("sha256")}


def per_problem(rows: list[Row], problems: list[str], levels: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One entry per problem: its level (None when unknown), each run's best row (curated apart), its baselines."""
    runs = [r for r in run_names(rows) if r != CURATED_RUN]
    grouped = by_problem(rows)
    table = []
    for pid in problems:
        mine = grouped.get(pid, [])
        cells = {run: best_entry(rows_of_run(mine, run)) for run in runs}
        table.append({"problem": pid, "level": (levels or {}).get(pid), "runs": cells, "curated": best_entry(rows_of_run(mine, CURATED_RUN)),
                      "baselines": baseline_medians(mine)})
    return table


def baselines_by_problem(rows: list[Row]) -> dict[str, BaselinesRecord]:
    """Each problem's fullest baselines record (a problem's kinds may be timed at different moments, so a row
    judged early can hold fewer of them than a later one)."""
    by_problem: dict[str, list[Row]] = {}
    for row in rows:
        by_problem.setdefault(str(row.get("problem", "")), []).append(row)
    return {pid: record for pid, mine in by_problem.items() if (record := _fullest_baselines(mine))}


def only_asked(record: Mapping[str, Any], asked: tuple[str, ...] | None) -> dict[str, Any]:
    """A baselines record without the kinds the run did not ask for (an earlier run's, from a shared cache)."""
    return {k: v for k, v in record.items() if asked is None or k not in BASELINES or k in asked}


def baseline_medians(rows: list[Row]) -> dict[str, float | None]:
    record = _fullest_baselines(rows)
    return {f"{b}_ms": _median(record.get(b)) for b in BASELINES}


def _fullest_baselines(rows: list[Row]) -> BaselinesRecord:
    """The first of the rows' baselines records that holds the most kinds; {} when none has one."""
    records = [record for r in rows if (record := part(r, "baselines"))]
    return max(records, key=lambda record: sum(kind in record for kind in BASELINES), default=BaselinesRecord())


def _median(entry: object) -> float | None:
    value = entry.get("median_ms") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def score_all(rows: list[Row], known_problems: list[str] | None = None,
              asked: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Everything ``summary.json`` says about the rows, except the environment and bookkeeping; ``asked``: the
    baselines the run asked for, when known (``score_rows``)."""
    rows = dedupe(rows)
    problems = problem_set(rows, known_problems)
    levels = problem_levels(rows)
    pooled = [r for r in rows if str(r.get("run", "")) != CURATED_RUN]
    return {
        "problem_set": {"problems": problems, "count": len(problems), "known": sorted(set(known_problems or ())),
                        "without_submissions": sorted(set(problems) - {str(r.get("problem")) for r in pooled}),
                        "levels": {str(lv): [p for p in problems if levels.get(p) == lv]
                                   for lv in sorted(set(levels.values()))}},
        "thresholds": [threshold_key(p) for p in THRESHOLDS],
        "excluded_flags": sorted(EXCLUDED_FLAGS),
        "baselines_asked": list(asked) if asked is not None else None,
        "overall": score_rows(pooled, problems, levels, asked),
        "runs": {run: score_rows(mine, answered(mine), levels, asked)
                 for run in run_names(rows) for mine in [rows_of_run(rows, run)]},
        "per_problem": per_problem(rows, problems, levels),
        "baselines": {problem: only_asked(record, asked) for problem, record in baselines_by_problem(rows).items()},
        "settings": run_facts.settings_seen(rows),
        "judged_on": run_facts.judged_on(rows),
    }
