"""The comparison page of two or more reports: one self-contained static file (no side of the trust
boundary: reads rows only, never torch).

Sections: the reports' settings, what each run asked for (``run.json``: a value that differs from the first
report's is marked and warned of, as a change may come from it rather than from the answers); what happened in
each (rows, problems, the machine, the tolerances and timed requests the rows record: facts, never warned of);
the scores of each run in each report, with
the change in fast_1 against the first; fast_p per KernelBench level where rows carry levels; and every
(run, problem, sample) with its verdict and speedup in each report, filterable by what changed. Every
value from a row is escaped; the one script is the constant ``assets.SCRIPT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.records import CURATED_RUN
from evalkit.report import scoring
from evalkit.report.html.assets import SCRIPT
from evalkit.report.html.parts import (NOT_MEASURED, PROBLEMS_TITLE, Row, badge, document, esc, filter_box, flags_html,
                                       fmt_rate, fmt_speedup, num_td, problems_td, rate_td, th)
from evalkit.report.run_diff import CHANGE_KINDS, SPEEDUP_CHANGE, change_kinds

Key = tuple[str, str, str]
@dataclass
class ComparedReport:
    """One report folder as the comparison page shows it (``evalkit.report.compare.load_report`` makes it); ``links`` are relative to the page's folder."""

    label: str
    folder: Path
    rows: list[Row]
    scores: dict[str, Any]
    judge_host: dict[str, Any] | None
    asked: dict[str, Any] | None  # run.json's settings: what the run asked for; None without one
    index_link: str | None
    detail_links: dict[tuple[str, str, str], str]


CHANGE_LABELS = {"verdict": "verdict flipped",
                 "speedup": f"speedup moved > {100 * SPEEDUP_CHANGE:.0f}%, 95% intervals apart",
                 "only": "not in every report", "same": "unchanged"}


# run.json's seed: a run without --seed draws its own, so seeds differ between any two such runs; shown, not warned of.
NOT_WARNED = ("seed",)


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    return (", ".join(map(str, value)) or "none") if isinstance(value, list) else str(value)


def settings_table(reports: list[ComparedReport]) -> str:
    """What each run asked for (``run.json``), one line per setting that some report sets; a value that differs
    from the first report's is marked, and warned of below the table."""
    known = [r for r in reports if r.asked is not None]
    names = list(dict.fromkeys(name for r in known for name in r.asked or {}))
    shown = [n for n in names if any((r.asked or {}).get(n) is not None for r in known)]
    heads = [th("setting")] + [th(r.label) for r in reports]
    body, differs = [], []
    for name in shown:
        cells = [f"<td>{esc(name)}</td>"]
        for report in reports:
            if report.asked is None:
                cells.append('<td class="muted">no run.json</td>')
                continue
            value, first = report.asked.get(name), (reports[0].asked or {}).get(name)
            other = reports[0].asked is not None and report is not reports[0] and value != first
            warned = other and name not in NOT_WARNED
            if warned:
                differs.append(name)
            attrs = (f' class="warn" title="differs from {esc(reports[0].label)}"' if warned
                     else ' class="muted" title="each run without --seed draws its own"' if other else "")
            cells.append(f"<td{attrs}>{esc(_shown(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = (f'<table id="settings"><thead><tr>{"".join(heads)}</tr></thead><tbody>{"".join(body)}</tbody></table>'
             if body else "")
    missing = [r.label for r in reports if r.asked is None]
    return table + _settings_notes([n for n in names if n not in shown], list(dict.fromkeys(differs)), missing)


def _settings_notes(unset: list[str], differs: list[str], missing: list[str]) -> str:
    """The lines under the settings: what no run set, the warning where runs asked for different settings, and
    which reports have no ``run.json`` (unknown, never called different)."""
    notes = [f'<p class="muted small">Unset in every report (each problem\'s own <code>problem.toml</code> value): '
             f"{esc(', '.join(unset))}.</p>"] if unset else []
    if differs:
        notes.append('<p class="warn small" id="settings-differ">These runs asked for different settings '
                     f"({esc(', '.join(differs))}, marked): a change may come from them rather than from the "
                     "answers.</p>")
    if missing:
        notes.append(f'<p class="muted small" id="settings-unknown">No run.json in {esc(", ".join(missing))}: what '
                     "its run asked for is unknown; what happened, below, says what its rows record.</p>")
    return "".join(notes)


def _happened(report: ComparedReport) -> dict[str, str]:
    """What the report's rows and judge record: facts of the run, not settings."""
    seen, scores = report.scores["settings"], report.scores
    judged = scores["judged_on"]
    host = report.judge_host or {}
    measured = [b for b in scoring.BASELINES if b not in scores["overall"].get("baselines_not_measured", [])]
    values: dict[str, Any] = {
        "rows": len(report.rows), "problems": scores["problem_set"]["count"], "devices": judged["devices"],
        "GPU": judged["device_names"], "torch": host.get("torch"), "evalkit": judged["evalkit_versions"],
        "precision": seen["precision"], "atol": seen["atol"], "rtol": seen["rtol"], "trials": seen["trials"],
        "timing requests": seen["timing_trials"], "baselines timed": measured}
    return {k: ", ".join(map(str, v)) if isinstance(v, list) else ("" if v is None else str(v)) for k, v in values.items()}


HAPPENED_TITLES = {"timing requests": "the timed requests each row made: repetitions stop once the median is known, "
                                      "so they differ between runs of the same settings",
                   "precision": "the precisions, tolerances and trials the rows record"}


def happened_table(reports: list[ComparedReport]) -> str:
    """Each report's rows, problems, machine and what its rows record; values unlike the first report's are marked
    (a fact to know, not a warning: the settings above say what each run asked for)."""
    table = [_happened(r) for r in reports]
    shown = [name for name in table[0] if any(values[name] for values in table)]  # no column nobody recorded
    heads = [th("report")] + [th(name, title=HAPPENED_TITLES.get(name, "")) for name in shown]
    body = []
    for report, values in zip(reports, table):
        label = esc(report.label)
        cells = [f'<td><a href="{esc(report.index_link)}">{label}</a></td>' if report.index_link else f"<td>{label}</td>"]
        for name in shown:
            other = report is not reports[0] and values[name] != table[0][name]
            attrs = f' class="changed" title="unlike {esc(reports[0].label)}"' if other else ""
            cells.append(f"<td{attrs}>{esc(values[name])}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="reports"><thead><tr>{"".join(heads)}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _runs(reports: list[ComparedReport]) -> list[str]:
    names = {run for r in reports for run in r.scores["runs"]}
    pooled = any(r.scores["overall"]["submissions"] for r in reports)  # no overall where only curated was scored
    curated = [CURATED_RUN] if CURATED_RUN in names else []
    return sorted(names - {CURATED_RUN}) + curated + (["overall"] if pooled else [])


def _scores_of(report: ComparedReport, run: str) -> dict[str, Any] | None:
    """The run's scores in ``report``; None where it has no rows (an overall that pools nothing included)."""
    if run == "overall":
        return report.scores["overall"] if report.scores["overall"]["submissions"] else None
    return report.scores["runs"].get(run)


def _delta_td(now: float | None, first: float | None) -> str:
    if now is None or first is None:
        return '<td class="num" data-v=""></td>'
    points = 100 * (now - first)
    return num_td(points, f"{points:+.1f} pts")


def scores_table(reports: list[ComparedReport]) -> str:
    heads = [th("run"), th("report"), th("submissions"), th("problems", title=PROBLEMS_TITLE), th("correct"),
             th("fast_0 eager"), th("fast_1 eager"),
             th("fast_1 compile"), th("pass@1"), th("geomean vs eager"),
             th(f"fast_1 eager vs {reports[0].label}", title="change in percentage points against the first report")]
    body = []
    for run in _runs(reports):
        first = _scores_of(reports[0], run)
        for i, report in enumerate(reports):
            s = _scores_of(report, run)
            lead = f"<td>{esc(run)}</td>" if i == 0 else '<td class="muted small">\u2033</td>'
            if s is None:
                body.append(f'<tr>{lead}<td>{esc(report.label)}</td><td class="muted" colspan="9">no rows</td></tr>')
                continue
            fast, geo = s["fast_p"], s["geomean_speedup"]["eager"]
            base = first["fast_p"]["eager"]["1"] if first and i else None
            body.append(f"<tr>{lead}<td>{esc(report.label)}</td>{num_td(s['submissions'], str(s['submissions']))}"
                        f"{problems_td(s, report.scores['problem_set']['count'])}"
                        f"{num_td(s['rates']['correct'], fmt_rate(s['rates']['correct']))}"
                        f"{rate_td(s, 'eager', fast['eager']['0'])}{rate_td(s, 'eager', fast['eager']['1'])}"
                        f"{rate_td(s, 'compile', fast['compile']['1'])}"
                        f"{num_td(s['pass_at_k']['1'], fmt_rate(s['pass_at_k']['1']))}"
                        f"{num_td(geo['value'], fmt_speedup(geo['value']))}{_delta_td(fast['eager']['1'], base)}</tr>")
    return f'<table id="scores"><thead><tr>{"".join(heads)}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def levels_table(reports: list[ComparedReport]) -> str:
    """fast_1 per KernelBench level: one row per run and level, one eager and one compile column per report."""
    if not any(r.scores["problem_set"].get("levels") for r in reports):
        return ""
    heads = [th("run"), th("level"), th("problems", title="the level's problems in each report")]
    heads += [th(f"{r.label} fast_1 {b}") for b in scoring.BASELINES for r in reports]
    body = []
    for run in _runs(reports):
        scores = [_scores_of(r, run) or {} for r in reports]
        levels = sorted({lv for s in scores for lv in s.get("by_level", {})}, key=int)
        for level in levels:
            entries = [s.get("by_level", {}).get(level) for s in scores]
            counts = sorted({str(e["problems"]) for e in entries if e})
            cells = [rate_td(s, b, e["fast_p"][b]["1"]) if e else '<td class="muted">\u2013</td>'
                     for b in scoring.BASELINES for s, e in zip(scores, entries)]
            body.append(f"<tr><td>{esc(run)}</td><td>level {esc(level)}</td><td>{esc(' / '.join(counts))}</td>"
                        + "".join(cells) + "</tr>")
    return ('<h2 id="levels-h">fast_p by KernelBench level</h2>'
            f'<table id="compare-levels"><thead><tr>{"".join(heads)}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def _speeds(row: Row) -> str:
    """``eager / compile`` speedups of a correct row ("not measured" where that baseline was not timed)."""
    if not scoring.is_correct(row):
        return ""
    unmeasured = scoring.baselines_not_measured([row])
    return " / ".join(NOT_MEASURED if b in unmeasured else (fmt_speedup(scoring.speedup_of(row, b)) or "\u2013")
                      for b in scoring.BASELINES)


def _cell(row: Row | None, changed: bool, link: str | None) -> str:
    if row is None:
        return f'<td class="cmp muted{" changed" if changed else ""}" data-v="">absent</td>'
    label = badge(row.get("verdict"))
    label = f'<a href="{esc(link)}">{label}</a>' if link else label
    speed = scoring.speedup_of(row, "eager")
    attrs = ' class="cmp changed"' if changed else ' class="cmp"'
    return (f'<td{attrs} data-v="{esc("" if speed is None else repr(speed))}">{label} {esc(_speeds(row))}'
            f'{flags_html(row.get("flags") or [])}</td>')


def _x(value: float | None) -> str:
    return fmt_speedup(value) or "\u2013"


def _move(d: dict[str, Any]) -> str:
    moved = f" ({100 * d['change']:+.0f}%)" if d["change"] is not None else ""
    return f"vs {d['baseline']} {_x(d['before'])} \u2192 {_x(d['after'])}{moved}"


def change_notes(reports: list[ComparedReport], diffs: list[dict[str, Any]]) -> tuple[dict[Key, list[str]], set[tuple[Key, int]]]:
    """What changed for each key, in words naming the report, and the (key, report index) cells that changed."""
    notes: dict[Key, list[str]] = {}
    cells: set[tuple[Key, int]] = set()
    for i, diff in enumerate(diffs, start=1):
        label = reports[i].label
        for d in diff["verdicts_flipped"]:
            notes.setdefault(tuple(d["key"]), []).append(f"{label}: {d['before']} \u2192 {d['after']}")
            cells.add((tuple(d["key"]), i))
        for d in diff["speedups_moved"]:
            notes.setdefault(tuple(d["key"]), []).append(f"{label}: {_move(d)}")
            cells.add((tuple(d["key"]), i))
        for d in diff["speedups_within_intervals"]:  # as far, but the intervals overlap: no change, said so
            notes.setdefault(tuple(d["key"]), []).append(f"{label}: {_move(d)}, within the 95% intervals")
        for d in diff["only_before"]:
            notes.setdefault(tuple(d["key"]), []).append(f"not in {label}")
            cells.add((tuple(d["key"]), i))
        for d in diff["only_after"]:
            notes.setdefault(tuple(d["key"]), []).append(f"not in {reports[0].label}")
            cells.add((tuple(d["key"]), i))
    return {k: list(dict.fromkeys(v)) for k, v in notes.items()}, cells


def changes_table(reports: list[ComparedReport], kinds: dict[Key, list[str]], diffs: list[dict[str, Any]]) -> str:
    by_key = [{scoring.sample_key(r): r for r in report.rows} for report in reports]
    notes, changed = change_notes(reports, diffs)
    heads = [th("run", "run"), th("problem", "problem"), th("sample", "sample")]
    heads += [th(f"{r.label} (vs eager / compile)", f"r{i}", True) for i, r in enumerate(reports)]
    heads.append(th("what changed", "change"))
    body = []
    for key in sorted(kinds):
        cells = "".join(_cell(rows.get(key), (key, i) in changed, report.detail_links.get(key))
                        for i, (rows, report) in enumerate(zip(by_key, reports)))
        verdicts = " ".join(sorted({str(rows[key].get("verdict")) for rows in by_key if key in rows}))
        what = "; ".join(notes.get(key, [])) or "unchanged"
        body.append(f'<tr data-change="{esc(" ".join(kinds[key]))}" data-verdict="{esc(verdicts)}">'
                    f"<td>{esc(key[0])}</td><td>{esc(key[1])}</td><td>{esc(key[2])}</td>{cells}"
                    f'<td class="reason">{esc(what)}</td></tr>')
    return (f'<table id="changes" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _change_summary(kinds: dict[Key, list[str]]) -> str:
    counts = {k: sum(k in v for v in kinds.values()) for k in CHANGE_KINDS}
    links = [f'<a href="#change={k}">{counts[k]} {esc(CHANGE_LABELS[k])}</a>' for k in CHANGE_KINDS]
    return f'<p id="change-summary">{" &middot; ".join(links)} <span class="muted small">(click one to show only those)</span></p>'


def render_comparison(reports: list[ComparedReport], diffs: list[dict[str, Any]]) -> str:
    """The whole comparison page: ``reports`` in order (the first is the reference), ``diffs`` from ``diff_many``."""
    keys = sorted({scoring.sample_key(r) for report in reports for r in report.rows})
    kinds = change_kinds(keys, diffs)
    filters = filter_box("changes", [("change", "every change", [(k, CHANGE_LABELS[k]) for k in CHANGE_KINDS])],
                         "filter: run, problem, sample, verdict\u2026")
    title = " \u2192 ".join(r.label for r in reports)
    body = (f"<h1>evalkit comparison: {esc(title)}</h1>"
            f'<p class="muted small">Every report is compared with the first, {esc(reports[0].label)}; scores are '
            "recomputed from each folder's results.jsonl.</p>"
            '<h2 id="settings-h">Settings: what each run asked for (run.json)</h2>' + settings_table(reports)
            + '<h2 id="reports-h">What happened</h2>' + happened_table(reports)
            + '<h2 id="scores-h">Scores</h2>' + scores_table(reports) + levels_table(reports)
            + f'<h2 id="changes-h">Submissions ({len(keys)})</h2>' + _change_summary(kinds) + filters
            + changes_table(reports, kinds, diffs))
    return document(f"evalkit comparison: {title}", body, SCRIPT)
