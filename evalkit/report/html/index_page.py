"""The report's front page, ``index.html``: one self-contained static file with inline CSS, SVG and JS
(no side of the trust boundary: reads rows only, never torch).

Everything that comes from a submission or a row is passed through ``esc`` (``html.escape``) and
only ever lands in element text or quoted attributes; the one inline ``<script>`` is a constant.
Tables with class ``sortable`` sort on a header click, or at load from a URL hash such as
``#sort=submissions.speedup_vs_eager:desc`` (``[table.]key:asc|desc``, several joined by ``,``).
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable

from evalkit.records import CURATED_RUN, EXCLUDED_FLAGS, FLAG_INFO
from evalkit.report import scoring
from evalkit.report.html import svg

Row = dict[str, Any]
PageNames = dict[tuple[str, str, str], str]
FLAG_MEANINGS: dict[str, str] = {flag.value: info.meaning for flag, info in FLAG_INFO.items()}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#111827;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f4f6}
table.sortable td{white-space:nowrap}table.sortable td.reason{white-space:normal}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th[data-key]{cursor:pointer}table.sortable th[data-key]:after{content:" \\2195";color:#9ca3af}
th[aria-sort=ascending]:after{content:" \\2191"!important;color:#111827!important}
th[aria-sort=descending]:after{content:" \\2193"!important;color:#111827!important}
tfoot td{font-weight:600;background:#f9fafb}.muted{color:#6b7280}.small{font-size:12px}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;
white-space:nowrap}.v-correct{background:#15803d}.v-incorrect{background:#c2410c}
.v-runtime_error,.v-crash,.v-timeout{background:#b91c1c}.v-compile_error,.v-syntax_error,.v-interface_error{background:#7e22ce}
.v-no_code{background:#6b7280}.v-skipped{background:#64748b}.v-unknown{background:#374151}
.flag{display:inline-block;padding:0 5px;margin:0 2px;border-radius:4px;background:#fef3c7;color:#92400e;font-size:11px}
.chart{border:1px solid #e5e7eb;margin:4px 12px 4px 0;background:#fff}.chart text{font-size:11px;fill:#374151}
.chart .title{font-size:13px;font-weight:600}.chart .axis{stroke:#6b7280}.chart .grid{stroke:#f1f5f9}
.chart .one{stroke:#9ca3af;stroke-dasharray:4 3}
pre{background:#f9fafb;border:1px solid #e5e7eb;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap}
table.code{border:1px solid #e5e7eb;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;width:100%}
table.code td{border:0;padding:0 8px;white-space:pre}table.code td.ln{color:#9ca3af;text-align:right;
user-select:none;width:1%}table.code tr.hl{background:#fee2e2}table.code tr.hl td.ln{color:#b91c1c;font-weight:700}
tr.chosen{background:#ecfdf5}td.reason{max-width:520px;min-width:240px}a{color:#1d4ed8}
"""

SORT_JS = """
(function () {
  "use strict";
  function cellValue(row, idx) {
    var cell = row.cells[idx];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.trim() : v;
  }
  function sortTable(table, key, dir) {
    var heads = table.tHead.rows[0].cells, idx = -1, i;
    for (i = 0; i < heads.length; i++) { if (heads[i].getAttribute("data-key") === key) { idx = i; } }
    if (idx < 0) { return false; }
    var numeric = heads[idx].getAttribute("data-type") === "num";
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, idx), y = cellValue(b, idx);
      if (x === "" || y === "") { return (x === "") - (y === ""); }
      var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return dir === "desc" ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[idx].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    table.setAttribute("data-sorted", key + ":" + dir);
    return true;
  }
  function onHeaderClick(table, th) {
    var now = th.getAttribute("aria-sort");
    var dir = now === "descending" ? "asc" : now === "ascending" ? "desc"
      : (th.getAttribute("data-type") === "num" ? "desc" : "asc");
    var key = th.getAttribute("data-key");
    sortTable(table, key, dir);
    try { history.replaceState(null, "", "#sort=" + table.id + "." + key + ":" + dir); } catch (e) { /* file:// */ }
  }
  function applyHash() {
    var m = /(?:^#|&)sort=([^&]*)/.exec(location.hash);
    if (!m) { return; }
    decodeURIComponent(m[1]).split(",").forEach(function (spec) {
      var parts = spec.split(":"), target = parts[0], dir = parts[1] === "asc" ? "asc" : "desc";
      var dot = target.indexOf("."), id = dot >= 0 ? target.slice(0, dot) : "", key = target.slice(dot + 1);
      document.querySelectorAll("table.sortable").forEach(function (t) {
        if (!id || t.id === id) { sortTable(t, key, dir); }
      });
    });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (th.getAttribute("data-key")) { th.addEventListener("click", function () { onHeaderClick(table, th); }); }
    });
  });
  window.evalkitSort = sortTable;
  applyHash();
  window.addEventListener("hashchange", applyHash);
})();
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def slug(text: str, limit: int = 48) -> str:
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x")[:limit]


def page_names(rows: Iterable[Row]) -> PageNames:
    """A safe, unique detail-page file name per (run, problem, sample): slugs plus a short sha."""
    names: PageNames = {}
    used: set[str] = set()
    for row in rows:
        key = scoring.sample_key(row)
        base = "__".join(slug(part) for part in key) + "-" + slug(str(row.get("sha256") or "nosha"))[:10]
        name, n = f"{base}.html", 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}.html"
        used.add(name.lower())
        names[key] = name
    return names


def badge(verdict: Any) -> str:
    known = str(verdict) in scoring.PIPELINE_RANK
    return f'<span class="badge v-{esc(verdict) if known else "unknown"}">{esc(verdict)}</span>'


def flag_badge(flag: Any) -> str:
    """One flag as a badge; a known flag's ``FLAG_INFO`` meaning is its tooltip."""
    meaning = FLAG_MEANINGS.get(str(flag))
    title = f' title="{esc(meaning)}"' if meaning else ""
    return f'<span class="flag"{title}>{esc(flag)}</span>'


def flags_html(flags: Iterable[Any]) -> str:
    return "".join(flag_badge(f) for f in flags or [])


def fmt_speedup(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}\u00d7"


def fmt_rate(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def fmt_ms(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def num_td(value: float | None, text: str) -> str:
    v = "" if value is None else repr(float(value))
    return f'<td class="num" data-v="{esc(v)}">{esc(text)}</td>'


def th(label: str, key: str = "", numeric: bool = False, title: str = "") -> str:
    attrs = (f' data-key="{esc(key)}"' if key else "") + (' data-type="num"' if numeric else "")
    attrs += f' title="{esc(title)}"' if title else ""
    return f"<th{attrs}>{esc(label)}</th>"


def document(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}{tail}</body></html>")


LEADER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("submissions", "submissions", "rows judged (deduplicated by run/problem/sample)"),
    ("extracted", "code_extracted", "share of submissions with code (verdict not no_code)"),
    ("compiled", "compiled", "share of submissions that got through the build stage"),
    ("correct", "correct", "share of submissions judged correct"),
)


def _leader_row(name: str, scores: dict[str, Any]) -> str:
    rates, fast = scores["rates"], scores["fast_p"]
    geo = scores["geomean_speedup"]
    cells = [f"<td>{esc(name)}</td>", num_td(scores["submissions"], str(scores["submissions"]))]
    cells += [num_td(rates[key], f"{fmt_rate(rates[key])} ({scores['counts'][key]})") for _, key, _ in LEADER_COLUMNS[1:]]
    cells += [num_td(fast["eager"]["0"], fmt_rate(fast["eager"]["0"])),
              num_td(fast["eager"]["1"], fmt_rate(fast["eager"]["1"])),
              num_td(fast["compile"]["1"], fmt_rate(fast["compile"]["1"])),
              num_td(scores["pass_at_k"]["1"], fmt_rate(scores["pass_at_k"]["1"])),
              num_td(geo["eager"]["value"], f"{fmt_speedup(geo['eager']['value'])} (n={geo['eager']['n']})"),
              num_td(geo["compile"]["value"], f"{fmt_speedup(geo['compile']['value'])} (n={geo['compile']['n']})")]
    return "<tr>" + "".join(cells) + "</tr>"


def leaderboard(summary: dict[str, Any]) -> str:
    heads = [th("run", "run")] + [th(label, key, True, title) for label, key, title in LEADER_COLUMNS]
    heads += [th("fast_0 eager", "fast_0_eager", True, "correct and faster than 0x: KernelBench fast_0"),
              th("fast_1 eager", "fast_1_eager", True, "correct with speedup > 1 vs eager, over all problems"),
              th("fast_1 compile", "fast_1_compile", True, "correct with speedup > 1 vs torch.compile"),
              th("pass@1", "pass_at_1", True, "unbiased pass@1 over all problems"),
              th("geomean vs eager", "geomean_eager", True, "geometric mean over correct, unflagged rows"),
              th("geomean vs compile", "geomean_compile", True, "geometric mean over correct, unflagged rows")]
    rows = "".join(_leader_row(run, scores) for run, scores in summary["runs"].items())
    foot = _leader_row("overall", summary["overall"])
    return (f'<table id="leaderboard" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f"<tbody>{rows}</tbody><tfoot>{foot}</tfoot></table>")


def fast_p_table(summary: dict[str, Any]) -> str:
    ths = summary["thresholds"]
    head = "<tr><th>run</th><th>baseline</th>" + "".join(f"<th>fast_{esc(p)}</th>" for p in ths) + "</tr>"
    body = []
    for name, scores in [*summary["runs"].items(), ("overall", summary["overall"])]:
        for base in scoring.BASELINES:
            values = scores["fast_p"][base]
            body.append(f"<tr><td>{esc(name)}</td><td>{esc(base)}</td>"
                        + "".join(num_td(values[p], fmt_rate(values[p])) for p in ths) + "</tr>")
    return f'<table id="fast-p"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def at_k_table(summary: dict[str, Any]) -> str:
    body = []
    for name, scores in [*summary["runs"].items(), ("overall", summary["overall"])]:
        for k in scores["ks"]:
            key = str(k)
            fast = scores["fast_p_at_k"]
            body.append(f"<tr><td>{esc(name)}</td>{num_td(k, key)}"
                        f"{num_td(scores['pass_at_k'][key], fmt_rate(scores['pass_at_k'][key]))}"
                        f"{num_td(fast['eager'][key]['1'], fmt_rate(fast['eager'][key]['1']))}"
                        f"{num_td(fast['compile'][key]['1'], fmt_rate(fast['compile'][key]['1']))}</tr>")
    head = "<tr><th>run</th><th>k</th><th>pass@k</th><th>fast_1@k eager</th><th>fast_1@k compile</th></tr>"
    return f'<table id="at-k"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _speed_cell(entry: dict[str, Any] | None, run: str, problem: str, names: PageNames) -> str:
    if entry is None:
        return '<td class="muted" data-v="">no submission</td>'
    correct = entry["verdict"] == "correct"
    value = entry["speedup_vs_eager"] if correct else None
    page = names.get((run, problem, entry["sample"]))
    label = badge(entry["verdict"])
    link = f'<a href="submissions/{esc(page)}">{label}</a>' if page else label
    pair = " / ".join(fmt_speedup(entry[f"speedup_vs_{b}"]) or "\u2013" for b in scoring.BASELINES)
    speeds = f" {esc(pair)}" if correct else ""
    extra = f' <span class="muted small">{entry["correct"]}/{entry["samples"]} correct</span>' if entry["samples"] > 1 else ""
    v = "" if value is None else repr(value)
    return f'<td data-v="{esc(v)}">{link}{speeds}{flags_html(entry["flags"])}{extra}</td>'


def problem_table(summary: dict[str, Any], names: PageNames) -> str:
    runs = [r for r in summary["runs"] if r != CURATED_RUN]
    heads = [th("problem", "problem"), th("eager ms", "eager_ms", True), th("compile ms", "compile_ms", True)]
    heads += [th(f"{run} (vs eager / compile)", f"run:{run}", True) for run in runs]
    heads.append(th("curated (vs eager / compile)", "curated", True))
    body = []
    for entry in summary["per_problem"]:
        pid, base = entry["problem"], entry["baselines"]
        cells = [f"<td>{esc(pid)}</td>", num_td(base["eager_ms"], fmt_ms(base["eager_ms"])),
                 num_td(base["compile_ms"], fmt_ms(base["compile_ms"]))]
        cells += [_speed_cell(entry["runs"].get(run), run, pid, names) for run in runs]
        cells.append(_speed_cell(entry["curated"], CURATED_RUN, pid, names))
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table id="problems" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def submissions_table(rows: list[Row], names: PageNames) -> str:
    heads = [th("run", "run"), th("problem", "problem"), th("sample", "sample"), th("verdict", "verdict", True),
             th("vs eager", "speedup_vs_eager", True, "speedup vs eager PyTorch"),
             th("vs compile", "speedup_vs_compile", True, "speedup vs torch.compile"),
             th("median ms", "median_ms", True), th("flags"), th("reason"), th("details")]
    body = []
    for row in rows:
        key = scoring.sample_key(row)
        timing = row.get("timing") if isinstance(row.get("timing"), dict) else {}
        median = timing.get("median_ms") if isinstance(timing.get("median_ms"), (int, float)) else None
        eager, comp = scoring.speedup_of(row, "eager"), scoring.speedup_of(row, "compile")
        rank = scoring.PIPELINE_RANK.get(str(row.get("verdict")), -1)
        body.append(f"<tr><td>{esc(key[0])}</td><td>{esc(key[1])}</td><td>{esc(key[2])}</td>"
                    f'<td data-v="{rank}">{badge(row.get("verdict"))}</td>'
                    f"{num_td(eager, fmt_speedup(eager))}{num_td(comp, fmt_speedup(comp))}{num_td(median, fmt_ms(median))}"
                    f'<td>{flags_html(row.get("flags") or [])}</td><td class="reason">{esc(row.get("reason"))}</td>'
                    f'<td><a class="detail" href="submissions/{esc(names[key])}">details</a></td></tr>')
    return (f'<table id="submissions" class="sortable"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def charts(summary: dict[str, Any], rows: list[Row]) -> str:
    n = summary["problem_set"]["count"]
    out = []
    for base in scoring.BASELINES:
        series = {}
        for run in summary["runs"]:
            best: dict[str, float] = {}
            for row in scoring.rows_of_run(rows, run):
                speed = scoring.speedup_of(row, base)
                if speed is not None and scoring.is_fast(row, base, 0.0):
                    best[str(row.get("problem"))] = max(speed, best.get(str(row.get("problem")), 0.0))
            series[run] = list(best.values())
        out.append(svg.fast_p_curve(series, n, f"fast_p vs torch {base} (n = {n} problems)"))
    return "".join(out)


def _header(summary: dict[str, Any]) -> str:
    env, seen = summary["environment"], summary["settings"]
    judged = env.get("judged_on", {})
    judge_host = env.get("judge_host") or {}
    facts = [("devices", ", ".join(judged.get("devices", []))), ("GPU", ", ".join(judged.get("device_names", []))),
             ("evalkit", ", ".join(judged.get("evalkit_versions", []))), ("judged with torch", judge_host.get("torch")),
             ("atol", seen.get("atol")), ("rtol", seen.get("rtol")), ("trials", seen.get("trials")),
             ("timing trials", seen.get("timing_trials")), ("problems", summary["problem_set"]["count"]),
             ("generated", summary.get("generated_at"))]
    items = " &middot; ".join(f"{esc(k)}: <b>{esc(v if not isinstance(v, list) else ', '.join(map(str, v)))}</b>"
                              for k, v in facts if v not in (None, "", []))
    return (f"<h1>evalkit report: {esc(summary.get('report', ''))}</h1><p class=\"muted small\">{items}</p>"
            '<p class="small"><a href="#leaderboard-h">leaderboard</a> &middot; <a href="#charts-h">charts</a> '
            '&middot; <a href="#problems-h">per problem</a> &middot; <a href="#submissions-h">submissions</a> '
            '&middot; <a href="summary.json">summary.json</a> &middot; <a href="results.jsonl">results.jsonl</a></p>')


def _one_of(badges: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join(filter(None, [", ".join(badges[:-1]), badges[-1]])) if badges else ""


NOTES = ("<p class=\"muted small\">overall pools every run but <em>curated</em>. fast_p: share of <em>all</em> problems in the set whose best sample is correct "
         "with speedup strictly greater than p (a problem without a submission counts as a failure). Rows flagged "
         f"{_one_of([flag_badge(f) for f in sorted(EXCLUDED_FLAGS)])} never count "
         "as fast and are left out of the geometric means. Click a column header to sort.</p>")


def render_index(summary: dict[str, Any], rows: list[Row], names: PageNames) -> str:
    """The whole ``index.html`` for ``summary`` (from ``scoring``) and its deduplicated ``rows``."""
    body = (_header(summary) + '<h2 id="leaderboard-h">Leaderboard</h2>' + leaderboard(summary) + NOTES
            + "<h3>fast_p at every threshold</h3>" + fast_p_table(summary)
            + "<h3>pass@k and fast_1@k (unbiased estimator)</h3>" + at_k_table(summary)
            + '<h2 id="charts-h">Speedup</h2><div>' + charts(summary, rows) + "</div>"
            + '<h2 id="problems-h">Per problem: each run\'s best submission</h2>' + problem_table(summary, names)
            + f'<h2 id="submissions-h">Submissions ({len(rows)})</h2>' + submissions_table(rows, names))
    return document(f"evalkit report: {summary.get('report', '')}", body, SORT_JS)
