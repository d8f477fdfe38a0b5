"""The report's front page, ``index.html``: one self-contained static file with inline CSS, SVG and JS
(no side of the trust boundary: reads rows only, never torch).

Everything that comes from a submission or a row is passed through ``esc`` (``html.escape``) and
only ever lands in element text or quoted attributes; the one inline ``<script>`` is the constant
``assets.SCRIPT``. Tables with class ``sortable`` sort on a header click, or at load from a URL hash
such as ``#sort=submissions.speedup_vs_eager:desc``; the submissions table has a filter box (text,
verdict, and level where levels are known), also driven by the hash (``#q=softmax&verdict=correct``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evalkit.records import CURATED_RUN, EXCLUDED_FLAGS, VERDICT_ORDER
from evalkit.results_file import RESULTS_FILE, SUMMARY_FILE
from evalkit.row_parts import part
from evalkit.report import scoring
from evalkit.report.html import svg
from evalkit.report.html.assets import SCRIPT
from evalkit.report.html.parts import (BELOW_RESOLUTION, NOT_MEASURED, NOT_MEASURED_TITLE, PROBLEMS_TITLE, PageNames,
                                       Row, badge, below_resolution, document, esc, filter_box, flag_badge, flags_html,
                                       fmt_bound, fmt_interval, fmt_ms, fmt_rate, fmt_speedup, id_td, not_measured_td,
                                       num_td, page_names, problems_td, rate_td, table, th)

__all__ = ["page_names", "render_index"]

LEADER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("submissions", "submissions", "rows judged (deduplicated by run/problem/sample)"),
    ("extracted", "code_extracted", "share of submissions with code (verdict not no_code)"),
    ("compiled", "compiled", "share of submissions that got through the build stage"),
    ("correct", "correct", "share of submissions judged correct"),
)


def _overall(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """overall's scores, or none where it pools nothing (only curated solutions were scored): every rate of it
    would read 0% over zero submissions."""
    return [("overall", summary["overall"])] if summary["overall"]["submissions"] else []


def _named_scores(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [*summary["runs"].items(), *_overall(summary)]


def _geo_td(scores: dict[str, Any], baseline: str) -> str:
    geo = scores["geomean_speedup"][baseline]
    if baseline in scores.get("baselines_not_measured", []):
        return not_measured_td()
    return num_td(geo["value"], f"{fmt_speedup(geo['value'])} (n={geo['n']})")


def _leader_row(name: str, scores: dict[str, Any], shown: tuple[str, ...], total: int) -> str:
    rates, fast = scores["rates"], scores["fast_p"]
    cells = [id_td(name), num_td(scores["submissions"], str(scores["submissions"])),
             problems_td(scores, total)]
    cells += [num_td(rates[key], f"{fmt_rate(rates[key])} ({scores['counts'][key]})") for _, key, _ in LEADER_COLUMNS[1:]]
    point = scores.get("fast_p_point") or {}
    eager = [rate_td(scores, "eager", fast["eager"]["0"]), rate_td(scores, "eager", fast["eager"]["1"]),
             rate_td(scores, "eager", (point.get("eager") or {}).get("1"))]
    cells += (eager if "eager" in shown else []) + ([rate_td(scores, "compile", fast["compile"]["1"])]
                                                    if "compile" in shown else [])
    cells += [num_td(scores["pass_at_k"]["1"], fmt_rate(scores["pass_at_k"]["1"]))]
    cells += [_geo_td(scores, baseline) for baseline in shown]
    return "<tr>" + "".join(cells) + "</tr>"


def leaderboard(summary: dict[str, Any], shown: tuple[str, ...] = scoring.BASELINES) -> str:
    """The runs' scores; columns of a baseline not in ``shown`` (measured by no row) left out."""
    columns = [th(label, key, True, title) for label, key, title in LEADER_COLUMNS]
    heads = [th("run", "run"), columns[0], th("problems", "problems", True, PROBLEMS_TITLE), *columns[1:]]
    eager = [th("fast_0 eager", "fast_0_eager", True, "correct and faster than 0x: KernelBench fast_0"),
             th("fast_1 eager", "fast_1_eager", True,
                "correct with speedup > 1 vs eager (its 95% interval's low end above 1), over the problems scored"),
             th("fast_1 eager, point estimate", "fast_1_eager_point", True,
                "as fast_1 eager, counting a speedup's point estimate above 1 (KernelBench's count)")]
    heads += (eager if "eager" in shown else []) + ([th("fast_1 compile", "fast_1_compile", True,
                                                       "correct with speedup > 1 vs torch.compile (its 95% "
                                                       "interval's low end above 1)")] if "compile" in shown else [])
    heads += [th("pass@1", "pass_at_1", True, "unbiased pass@1 over the problems scored")]
    heads += [th(f"geomean vs {b}", f"geomean_{b}", True, "geometric mean over correct, unflagged rows")
              for b in shown]
    total = summary["problem_set"]["count"]
    rows = "".join(_leader_row(run, scores, shown, total) for run, scores in summary["runs"].items())
    foot = "".join(_leader_row(name, scores, shown, total) for name, scores in _overall(summary))
    return (f'<table id="leaderboard" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f"<tbody>{rows}</tbody><tfoot>{foot}</tfoot></table>")


def fast_p_table(summary: dict[str, Any], shown: tuple[str, ...] = scoring.BASELINES) -> str:
    ths = summary["thresholds"]
    head = "<tr><th>run</th><th>baseline</th>" + "".join(f"<th>fast_{esc(p)}</th>" for p in ths) + "</tr>"
    body = []
    for name, scores in _named_scores(summary):
        for base in shown:
            values = scores["fast_p"][base]
            body.append(f"<tr>{id_td(name)}<td>{esc(base)}</td>"
                        + "".join(rate_td(scores, base, values[p]) for p in ths) + "</tr>")
    return f'<table id="fast-p"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


LEVEL_COLUMNS = (("eager", "0"), ("eager", "1"), ("eager", "2"), ("compile", "1"))


def level_table(summary: dict[str, Any], shown: tuple[str, ...]) -> str:
    """fast_p per KernelBench level and run against the ``shown`` baselines (empty when no row carries
    ``problem_level``)."""
    if not summary["problem_set"].get("levels"):
        return ""
    columns = [(b, p) for b, p in LEVEL_COLUMNS if b in shown]
    heads = [th("run", "run"), th("level", "level", True), th("problems", "problems", True),
             th("problems correct", "problems_correct", True)]
    heads += [th(f"fast_{p} {b}", f"fast_{p}_{b}", True) for b, p in columns]
    body = []
    for name, scores in _named_scores(summary):
        for level, entry in scores.get("by_level", {}).items():
            cells = [id_td(name), num_td(float(level), f"level {level}"),
                     num_td(entry["problems"], str(entry["problems"])),
                     num_td(entry["problems_correct"], str(entry["problems_correct"]))]
            cells += [rate_td(scores, b, entry["fast_p"][b][p]) for b, p in columns]
            body.append("<tr>" + "".join(cells) + "</tr>")
    return ('<h3 id="levels-h">fast_p by KernelBench level</h3>'
            f'<table id="levels" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>'
            '<p class="muted small">Each level\'s fast_p is over the problems of that level only; problems whose '
            'rows carry no <code>problem_level</code> are in no level.</p>')


def at_k_table(summary: dict[str, Any], shown: tuple[str, ...] = scoring.BASELINES) -> str:
    body = []
    for name, scores in _named_scores(summary):
        fast = scores["fast_p_at_k"]
        for k in scores["ks"]:
            key = str(k)
            body.append(f"<tr>{id_td(name)}{num_td(k, key)}"
                        f"{num_td(scores['pass_at_k'][key], fmt_rate(scores['pass_at_k'][key]))}"
                        + "".join(rate_td(scores, b, fast[b][key]["1"]) for b in shown) + "</tr>")
    head = "<tr><th>run</th><th>k</th><th>pass@k</th>" + "".join(f"<th>fast_1@k {b}</th>" for b in shown) + "</tr>"
    return f'<table id="at-k"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _speed_cell(entry: dict[str, Any] | None, run: str, problem: str, names: PageNames,
                measured: dict[str, bool], shown: tuple[str, ...]) -> str:
    if entry is None:
        return '<td class="muted" data-v="">no submission</td>'
    correct = entry["verdict"] == "correct"
    value = entry["speedup_vs_eager"] if correct else None
    page = names.get((run, problem, entry["sample"]))
    label = badge(entry["verdict"])
    link = f'<a href="submissions/{esc(page)}">{label}</a>' if page else label
    below = correct and entry.get("below_resolution") is True
    pair = " / ".join(fmt_bound(entry[f"speedup_vs_{b}"], below) or (NOT_MEASURED if not measured[b] else "\u2013")
                      for b in shown)
    speeds = (f" {esc(pair)}" if correct and pair else "") + (
        f' <span class="muted small">{esc(BELOW_RESOLUTION)}</span>' if below and pair else "")
    extra = f' <span class="muted small">{entry["correct"]}/{entry["samples"]} correct</span>' if entry["samples"] > 1 else ""
    v = "" if value is None else repr(value)
    return f'<td class="best" data-v="{esc(v)}">{link}{speeds}{flags_html(entry["flags"])}{extra}</td>'


def _baseline_td(record: dict[str, Any] | None, baseline: str, median: float | None) -> str:
    """A problem's baseline median, or why there is none: not measured, or failed (the error as tooltip)."""
    entry = record.get(baseline) if isinstance(record, dict) else None
    if isinstance(record, dict) and baseline not in record:
        return not_measured_td()
    if isinstance(entry, dict) and entry.get("error"):
        return f'<td class="num na" data-v="" title="{esc(entry["error"])}">failed</td>'
    return num_td(median, fmt_ms(median))


def problem_table(summary: dict[str, Any], names: PageNames, shown: tuple[str, ...] = scoring.BASELINES) -> str:
    runs = [r for r in summary["runs"] if r != CURATED_RUN]
    with_levels = bool(summary["problem_set"].get("levels"))
    heads = [th("problem", "problem")] + ([th("level", "level", True)] if with_levels else [])
    heads += [th(f"{b} ms", f"{b}_ms", True) for b in shown]
    versus = f" (vs {' / '.join(shown)})" if shown else ""
    heads += [th(f"{run}{versus}", f"run:{run}", True, names=True) for run in runs]
    with_curated = CURATED_RUN in summary["runs"]  # a report that never scored curated solutions has no such column
    heads += [th(f"curated{versus}", "curated", True)] if with_curated else []
    body = []
    for entry in summary["per_problem"]:
        pid, base, level = entry["problem"], entry["baselines"], entry.get("level")
        record = summary["baselines"].get(pid)
        measured = {b: not isinstance(record, dict) or b in record for b in scoring.BASELINES}
        cells = [id_td(pid)] + ([num_td(level, "" if level is None else str(level))] if with_levels else [])
        cells += [_baseline_td(record, b, base[f"{b}_ms"]) for b in shown]
        cells += [_speed_cell(entry["runs"].get(run), run, pid, names, measured, shown) for run in runs]
        if with_curated:
            cells.append(_speed_cell(entry["curated"], CURATED_RUN, pid, names, measured, shown))
        body.append(("", cells))
    return table("problems", heads, body)


def _row_speed_td(row: Row, baseline: str) -> str:
    speed = scoring.speedup_of(row, baseline)
    if speed is None and baseline in scoring.baselines_not_measured([row]):
        return not_measured_td()
    if speed is not None and below_resolution(row):  # the call is faster than the judge can tell apart
        return num_td(speed, fmt_bound(speed, True), BELOW_RESOLUTION)
    return num_td(speed, fmt_speedup(speed), fmt_interval(row.get(f"speedup_vs_{baseline}_ci")))


def submissions_filter(rows: list[Row], with_levels: bool) -> str:
    present = {str(r.get("verdict")) for r in rows}
    verdicts = [v for v in VERDICT_ORDER if v in present] + sorted(present - set(VERDICT_ORDER))
    choices = [("verdict", "every verdict", [(v, f"{v} ({sum(str(r.get('verdict')) == v for r in rows)})")
                                             for v in verdicts])]
    if with_levels:
        levels = sorted({r["problem_level"] for r in rows if isinstance(r.get("problem_level"), int)})
        choices.append(("level", "every level", [(str(lv), f"level {lv}") for lv in levels]))
    return filter_box("submissions", choices, "filter: run, problem, sample, reason, flag\u2026")


def submissions_table(rows: list[Row], names: PageNames, with_levels: bool = False,
                      shown: tuple[str, ...] = scoring.BASELINES) -> str:
    titles = {"eager": "speedup vs eager PyTorch", "compile": "speedup vs torch.compile"}
    heads = [th("run", "run"), th("problem", "problem")] + ([th("level", "level", True)] if with_levels else [])
    heads += [th("sample", "sample"), th("verdict", "verdict", True)]
    heads += [th(f"vs {b}", f"speedup_vs_{b}", True, titles[b]) for b in shown]
    heads += [th("median ms", "median_ms", True), th("flags"), th("reason"), th("details")]
    body = []
    for row in rows:
        key = scoring.sample_key(row)
        timing = part(row, "timing")
        median = timing.get("median_ms") if isinstance(timing.get("median_ms"), (int, float)) else None
        rank = scoring.PIPELINE_RANK.get(str(row.get("verdict")), -1)
        level = row.get("problem_level") if isinstance(row.get("problem_level"), int) else None
        level_td = num_td(level, "" if level is None else str(level))
        cells = [id_td(key[0]), id_td(key[1]), *([level_td] if with_levels else []), id_td(key[2]),
                 f'<td data-v="{rank}">{badge(row.get("verdict"))}</td>',
                 *(_row_speed_td(row, b) for b in shown), num_td(median, fmt_ms(median)),
                 f'<td class="flags">{flags_html(row.get("flags") or [])}</td>', f'<td class="reason">{esc(row.get("reason"))}</td>',
                 f'<td><a class="detail" href="submissions/{esc(names[key])}">details</a></td>']
        body.append((f' data-verdict="{esc(row.get("verdict"))}" data-level="{esc(level)}"', cells))
    return table("submissions", heads, body)


def charts(summary: dict[str, Any], rows: list[Row]) -> str:
    out = []
    for base in scoring.BASELINES:
        measured = [run for run, s in summary["runs"].items() if base not in s.get("baselines_not_measured", [])]
        if not measured:
            out.append(f'<p class="muted">fast_p vs torch {esc(base)}: {NOT_MEASURED} ({esc(NOT_MEASURED_TITLE)})</p>')
            continue
        series = {}
        for run in measured:
            best: dict[str, float] = {}
            for row in scoring.rows_of_run(rows, run):
                speed = scoring.speedup_of(row, base)
                if speed is not None and scoring.is_fast(row, base, 0.0):
                    best[str(row.get("problem"))] = max(speed, best.get(str(row.get("problem")), 0.0))
            series[run] = list(best.values())
        scored = {run: summary["runs"][run].get("problems_scored", summary["problem_set"]["count"]) for run in measured}
        out.append(svg.fast_p_curve(series, scored, f"fast_p vs torch {base} (each run over the problems it answered)"))
    return "".join(out)


def _header(summary: dict[str, Any]) -> str:
    env, seen = summary["environment"], summary["settings"]
    judged = env.get("judged_on", {})
    judge_host = env.get("judge_host") or {}
    levels = summary["problem_set"].get("levels") or {}
    facts = [("devices", ", ".join(judged.get("devices", []))), ("GPU", ", ".join(judged.get("device_names", []))),
             ("evalkit", ", ".join(judged.get("evalkit_versions", []))), ("judged with torch", judge_host.get("torch")),
             ("precision", seen.get("precision")), ("atol", seen.get("atol")), ("rtol", seen.get("rtol")), ("trials", seen.get("trials")),
             ("timing trials", seen.get("timing_trials")), ("problems", summary["problem_set"]["count"]),
             ("levels", ", ".join(f"{lv} ({len(ids)})" for lv, ids in levels.items())),
             ("generated", summary.get("generated_at"))]
    items = " &middot; ".join(f"{esc(k)}: <b>{esc(v if not isinstance(v, list) else ', '.join(map(str, v)))}</b>"
                              for k, v in facts if v not in (None, "", []))
    return (f"<h1>evalkit report: {esc(summary.get('report', ''))}</h1><p class=\"muted small\">{items}</p>"
            '<p class="small"><a href="#leaderboard-h">leaderboard</a> &middot; <a href="#charts-h">charts</a> '
            '&middot; <a href="#problems-h">per problem</a> &middot; <a href="#submissions-h">submissions</a> '
            f'&middot; <a href="{SUMMARY_FILE}">{SUMMARY_FILE}</a> '
            f'&middot; <a href="{RESULTS_FILE}">{RESULTS_FILE}</a></p>')


def skipped_note(rows: list[Row]) -> str:
    """A line saying how many answers were skipped and why (a CPU run of CUDA answers otherwise reads as 0% all
    over), with the most common reasons."""
    skipped = [r for r in rows if r.get("verdict") == "skipped"]
    if not skipped:
        return ""
    why = Counter(str(r.get("reason", "")).split(" (")[0].split(";")[0] for r in skipped).most_common(3)
    reasons = "; ".join(f"{esc(text)} ({count})" for text, count in why)
    return (f'<p class="note" id="skipped-note"><b>{len(skipped)} of {len(rows)} submission(s) skipped</b>, never '
            f"judged, and counted as failures in every rate below: {reasons}.</p>")


def _one_of(badges: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join(filter(None, [", ".join(badges[:-1]), badges[-1]])) if badges else ""


NOTES = ("<p class=\"muted small\">overall pools every run but <em>curated</em>. Each run is scored over the problems it "
         "answered, overall over <em>all</em> problems in the set, a problem without a submission counting as a "
         "failure (<em>problems</em> says how many). fast_p: share of those problems whose best sample is correct "
         "with a speedup whose 95% interval lies strictly above p (<em>point estimate</em>: the speedup itself above "
         "p, as KernelBench counts); correct, extracted and compiled are shares of submissions. Rows flagged "
         f"{_one_of([flag_badge(f) for f in sorted(EXCLUDED_FLAGS)])} never count "
         f"as fast and are left out of the geometric means. <em>{NOT_MEASURED}</em>: the baseline was not timed "
         "(<code>--baselines</code> left it out). Click a column header to sort.</p>")


def render_index(summary: dict[str, Any], rows: list[Row], names: PageNames) -> str:
    """The whole ``index.html`` for ``summary`` (from ``scoring``) and its deduplicated ``rows``."""
    with_levels = bool(summary["problem_set"].get("levels"))
    # A baseline no correct row was timed against (left out by --baselines) has no column: it would read "not
    # measured" all the way down.
    asked = summary.get("baselines_asked")
    shown = tuple(b for b in scoring.BASELINES
                  if b not in scoring.not_measured(rows, tuple(asked) if asked is not None else None))
    body = (_header(summary) + skipped_note(rows) + '<h2 id="leaderboard-h">Leaderboard</h2>'
            + leaderboard(summary, shown) + NOTES + level_table(summary, shown)
            + "<h3>fast_p at every threshold</h3>" + fast_p_table(summary, shown)
            + "<h3>pass@k and fast_1@k (unbiased estimator)</h3>" + at_k_table(summary, shown)
            + '<h2 id="charts-h">Speedup</h2><div>' + charts(summary, rows) + "</div>"
            + '<h2 id="problems-h">Per problem: each run\'s best submission</h2>' + problem_table(summary, names, shown)
            + f'<h2 id="submissions-h">Submissions ({len(rows)})</h2>' + submissions_filter(rows, with_levels)
            + submissions_table(rows, names, with_levels, shown))
    return document(f"evalkit report: {summary.get('report', '')}", body, SCRIPT)
