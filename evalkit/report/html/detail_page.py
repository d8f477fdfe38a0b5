"""One detail page per judged submission: ``submissions/<safe-name>.html``, static with no script at all
(no side of the trust boundary: reads rows only, never torch).

Shows the extracted code numbered by lines of the original text (``extraction.line_offset``), with
the lines an error points at highlighted; the block choice; the build log; the error; correctness
numbers; and the timing distribution. Every value from the row is escaped.
"""

from __future__ import annotations

from typing import Any

from evalkit.report import scoring
from evalkit.report.html import svg
from evalkit.report.html.index_page import badge, document, esc, flags_html, fmt_ms, fmt_speedup

Row = dict[str, Any]
OPTIONAL_CANDIDATE_FIELDS = ("closed", "in_final_answer", "defines_model_new")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def kv_table(pairs: list[tuple[str, Any]], css_id: str = "") -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{_value(v)}</td></tr>" for k, v in pairs if v not in (None, "", [], {}))
    ident = f' id="{esc(css_id)}"' if css_id else ""
    return f'<table class="kv"{ident}>{rows}</table>' if rows else '<p class="muted">none recorded</p>'


def _value(value: Any) -> str:
    if isinstance(value, float):
        return esc(f"{value:.6g}")
    if isinstance(value, dict):
        return esc(", ".join(f"{k}={_plain(v)}" for k, v in value.items()))
    if isinstance(value, list):
        return esc(", ".join(_plain(v) for v in value))
    return esc(value)


def _plain(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def highlighted_lines(row: Row) -> dict[int, str]:
    """Source-text line numbers the row's errors point at, each with why."""
    marks: dict[int, str] = {}
    error, build = _dict(row.get("error")), _dict(row.get("build"))
    if _int(error.get("source_line")):
        marks[error["source_line"]] = f"{error.get('type') or 'error'}: {error.get('message', '')}"
    for frame in error.get("traceback") or []:
        frame = _dict(frame)
        if frame.get("in_submission") and _int(frame.get("source_line")):
            marks.setdefault(frame["source_line"], f"traceback: {frame.get('function', '')}")
    for entry in [*(build.get("errors") or []), *(error.get("compiler_errors") or [])]:
        entry = _dict(entry)
        if _int(entry.get("submission_line")):
            marks.setdefault(entry["submission_line"], f"compiler: {entry.get('message', '')}")
    return marks


def code_section(row: Row) -> str:
    ext = _dict(row.get("extraction"))
    code = ext.get("code") or ""
    if not code:
        return f'<p class="muted">no code extracted: {esc(ext.get("reason") or row.get("reason"))}</p>'
    offset = _int(ext.get("line_offset")) or 0
    marks = highlighted_lines(row)
    lines = code.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = []
    for i, line in enumerate(lines, start=1 + offset):
        why = marks.get(i)
        attrs = f' class="hl" title="{esc(why)}"' if why else ""
        body.append(f'<tr id="L{i}"{attrs}><td class="ln">{i}</td><td>{esc(line)}</td></tr>')
    note = (f'<p class="small muted">lines {1 + offset}\u2013{len(lines) + offset} of {esc(row.get("path"))}'
            + (" (truncated)" if ext.get("truncated") else "") + "</p>")
    return note + f'<table class="code" id="code">{"".join(body)}</table>'


def extraction_section(row: Row) -> str:
    ext = _dict(row.get("extraction"))
    if not ext:
        return '<p class="muted">no extraction record</p>'
    block = _dict(ext.get("block"))
    chosen = block.get("index")
    candidates = [_dict(c) for c in ext.get("candidates") or []]
    extra = [k for k in OPTIONAL_CANDIDATE_FIELDS if any(k in c for c in candidates)]
    heads = ("index", "language", "fence_line", "start_line", "end_line", *extra, "status", "why")
    rows = []
    for cand in candidates:
        css = ' class="chosen"' if chosen is not None and cand.get("index") == chosen else ""
        rows.append(f"<tr{css}>" + "".join(f"<td>{esc(cand.get(h))}</td>" for h in heads) + "</tr>")
    table = (f'<table id="candidates"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr></thead>'
             f'<tbody>{"".join(rows)}</tbody></table>') if rows else '<p class="muted">no fenced blocks</p>'
    summary = kv_table([("ok", ext.get("ok")), ("reason", ext.get("reason")), ("chosen block", block or None),
                        ("whole text taken as code", ext.get("whole_text")), ("line offset", ext.get("line_offset")),
                        ("truncated", ext.get("truncated")), ("warnings", ext.get("warnings"))])
    return summary + table


def build_section(row: Row) -> str:
    build = _dict(row.get("build"))
    if not build:
        return '<p class="muted">not built</p>'
    errors = [_dict(e) for e in build.get("errors") or []]
    heads = ("file", "line", "message", "source", "submission_line")
    table = ""
    if errors:
        cells = "".join("<tr>" + "".join(f"<td>{_line_link(e.get(h)) if h == 'submission_line' else esc(e.get(h))}</td>"
                                          for h in heads) + "</tr>" for e in errors)
        table = f'<table id="build-errors"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr></thead><tbody>{cells}</tbody></table>'
    info = kv_table([("status", build.get("status")), ("seconds", build.get("seconds")), ("cached", build.get("cached"))])
    message, log_tail = str(build.get("message") or ""), str(build.get("log_tail") or "")
    shown = f"<h3>message</h3><pre>{esc(message)}</pre>" if message and message not in log_tail else ""
    log = f'<h3>build log (tail)</h3><pre id="build-log">{esc(log_tail)}</pre>' if log_tail else ""
    return info + table + shown + log


def _line_link(line: Any) -> str:
    return f'<a href="#L{line}">{line}</a>' if _int(line) else esc(line)


def error_section(row: Row) -> str:
    error = _dict(row.get("error"))
    if not error:
        return '<p class="muted">no error</p>'
    info = kv_table([("kind", error.get("kind")), ("stage", error.get("stage")), ("type", error.get("type")),
                     ("message", error.get("message")), ("line (source text)", error.get("source_line")),
                     ("column", error.get("column")), ("text", error.get("text"))], "error-info")
    frames = [_dict(f) for f in error.get("traceback") or []]
    heads = ("file", "line", "function", "text", "source_line")
    trace = ""
    if frames:
        body = "".join(("<tr class=\"chosen\">" if f.get("in_submission") else "<tr>")
                       + "".join(f"<td>{_line_link(f.get(h)) if h == 'source_line' else esc(f.get(h))}</td>" for h in heads)
                       + "</tr>" for f in frames)
        trace = (f'<h3>traceback</h3><table id="traceback"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}'
                 f"</tr></thead><tbody>{body}</tbody></table>")
    tails = "".join(f"<h3>{name}</h3><pre>{esc(error.get(key))}</pre>"
                    for name, key in (("stdout (tail)", "stdout_tail"), ("stderr (tail)", "stderr_tail")) if error.get(key))
    return info + trace + tails


def correctness_section(row: Row) -> str:
    corr = _dict(row.get("correctness"))
    if not corr:
        return '<p class="muted">not checked</p>'
    return kv_table(list(corr.items()), "correctness")


def timing_section(row: Row) -> str:
    timing, base = _dict(row.get("timing")), _dict(row.get("baselines"))
    if not timing and not base:
        return '<p class="muted">not timed</p>'
    stats = [(k, v) for k, v in timing.items() if k != "samples_ms"]
    lines = {name: _dict(base.get(name)).get("median_ms") for name in scoring.BASELINES}
    samples = [v for v in timing.get("samples_ms") or [] if isinstance(v, (int, float))]
    baselines = [(f"{name} baseline", _dict(base.get(name)).get("error")
                  or f"median {fmt_ms(_dict(base.get(name)).get('median_ms'))} ms")
                 for name in scoring.BASELINES if name in base] + [("baseline device", base.get("device_name"))]
    speedups = kv_table([("speedup vs eager", fmt_speedup(scoring.speedup_of(row, "eager"))),
                         ("speedup vs compile", fmt_speedup(scoring.speedup_of(row, "compile")))] + baselines)
    return ((svg.timing_plot(samples, lines) if samples else "") + speedups
            + "<h3>statistics</h3>" + kv_table(stats, "timing"))


def render_detail(row: Row) -> str:
    """The whole detail page of one row."""
    run, problem, sample = scoring.sample_key(row)
    head = (f'<p class="small"><a href="../index.html">&larr; back to the report</a></p>'
            f"<h1>{esc(run)} / {esc(problem)} / {esc(sample)}</h1>"
            f'<p>{badge(row.get("verdict"))} {flags_html(row.get("flags") or [])} <span id="reason">{esc(row.get("reason"))}</span></p>')
    facts = kv_table([("path", row.get("path")), ("sha256", row.get("sha256")), ("device", row.get("device")),
                      ("judged at", row.get("judged_at")), ("evalkit", row.get("evalkit_version")),
                      ("stage seconds", row.get("stage_seconds")), ("warnings", row.get("warnings"))])
    sections = [("error", "Error", error_section), ("code", "Extracted code", code_section),
                ("extraction", "Which block, and why", extraction_section), ("build", "Build", build_section),
                ("correctness", "Correctness", correctness_section), ("timing", "Timing", timing_section)]
    body = head + facts + "".join(f'<h2 id="{key}-h">{title}</h2>{render(row)}' for key, title, render in sections)
    return document(f"{run}/{problem}/{sample}: {row.get('verdict')}", body)
