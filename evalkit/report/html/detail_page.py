"""One detail page per judged submission: ``submissions/<safe-name>.html``, static with no script at all
(no side of the trust boundary: reads rows only, never torch).

Shows the extracted code numbered by lines of the original text (``extraction.line_offset``), with
the lines an error points at highlighted; the answer itself when there is no code; the block choice;
the build log; the error, its traceback trimmed to the submission's own frames (the whole one behind a
``<details>``); correctness numbers; and the timing distribution. A section with nothing to show is left
out and named in one "not reached" line. Every value from the row is escaped.
"""

from __future__ import annotations

from typing import Any, Mapping

from evalkit.report import scoring
from evalkit.report.answer_text import Answer
from evalkit.report.html import svg
from evalkit.report.html.parts import (BELOW_RESOLUTION, NOT_MEASURED, badge, below_resolution, document, esc,
                                       flags_html, fmt_bound, fmt_interval, fmt_ms, fmt_speedup)
from evalkit.row_parts import baseline_entry, part

Row = dict[str, Any]
OPTIONAL_CANDIDATE_FIELDS = ("closed", "in_final_answer", "defines_model_new")


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def kv_table(pairs: list[tuple[str, Any]], css_id: str = "") -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{_value(v)}</td></tr>" for k, v in pairs if v not in (None, "", [], {}))
    ident = f' id="{esc(css_id)}"' if css_id else ""
    return f'<table class="kv"{ident}>{rows}</table>' if rows else '<p class="muted">none recorded</p>'


def _value(value: object) -> str:
    if isinstance(value, float):
        return esc(f"{value:.6g}")
    if isinstance(value, dict):
        return esc(", ".join(f"{k}={_plain(v)}" for k, v in value.items()))
    if isinstance(value, list):
        return esc(", ".join(_plain(v) for v in value))
    return esc(value)


def _plain(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def highlighted_lines(row: Row) -> dict[int, str]:
    """Source-text line numbers the row's errors point at, each with why."""
    marks: dict[int, str] = {}
    error, build = part(row, "error"), part(row, "build")
    if _int(error.get("source_line")):
        marks[error["source_line"]] = f"{error.get('type') or 'error'}: {error.get('message', '')}"
    for claimed in error.get("traceback") or []:
        frame = _dict(claimed)
        if frame.get("in_submission") and _int(frame.get("source_line")):
            marks.setdefault(frame["source_line"], f"traceback: {frame.get('function', '')}")
    for compiler_error in [*(build.get("errors") or []), *(error.get("compiler_errors") or [])]:
        entry = _dict(compiler_error)
        if _int(entry.get("submission_line")):
            marks.setdefault(entry["submission_line"], f"compiler: {entry.get('message', '')}")
    return marks


def code_section(row: Row) -> str:
    ext = part(row, "extraction")
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
    ext = part(row, "extraction")
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
                        ("truncated", _truncated(ext)), ("warnings", ext.get("warnings"))])
    return summary + table


def _truncated(ext: Mapping[str, Any]) -> bool:
    """Whether the answer was cut off: rows judged before ``extract`` set ``truncated`` for an answer cut off
    without a code block hold False beside a reason saying "cut off"."""
    return ext.get("truncated") is True or "cut off" in str(ext.get("reason") or "")


def build_section(row: Row) -> str:
    build = part(row, "build")
    if not build:
        return ""
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


def _line_link(line: object) -> str:
    return f'<a href="#L{line}">{line}</a>' if _int(line) else esc(line)


FRAME_HEADS = ("file", "line", "function", "text", "source_line")


def _frames_table(frames: list[dict[str, Any]], css_id: str) -> str:
    body = "".join(("<tr class=\"chosen\">" if f.get("in_submission") else "<tr>")
                   + "".join(f"<td>{_line_link(f.get(h)) if h == 'source_line' else esc(f.get(h))}</td>"
                             for h in FRAME_HEADS) + "</tr>" for f in frames)
    return (f'<table id="{css_id}"><thead><tr>{"".join(f"<th>{h}</th>" for h in FRAME_HEADS)}'
            f"</tr></thead><tbody>{body}</tbody></table>")


def traceback_section(frames: list[dict[str, Any]]) -> str:
    """The submission's own frames; the whole traceback (the judge's harness too) behind a click."""
    if not frames:
        return ""
    mine = [f for f in frames if f.get("in_submission")]
    shown = (_frames_table(mine, "traceback") if mine
             else '<p class="muted">no frame of the traceback is in the submission\'s code</p>')
    return (f"<h3>traceback (the submission's frames: {len(mine)} of {len(frames)})</h3>{shown}"
            f'<details class="trace"><summary>the whole traceback ({len(frames)} frames, evalkit\'s own included)'
            f"</summary>{_frames_table(frames, 'traceback-full')}</details>")


def error_section(row: Row) -> str:
    """The error record, or "" when the row has none (the build section shows build failures)."""
    error = part(row, "error")
    if not any(v not in (None, "", [], {}) for v in error.values()):
        return ""
    info = kv_table([("kind", error.get("kind")), ("stage", error.get("stage")), ("type", error.get("type")),
                     ("message", error.get("message")), ("line (source text)", error.get("source_line")),
                     ("column", error.get("column")), ("text", error.get("text"))], "error-info")
    trace = traceback_section([_dict(f) for f in error.get("traceback") or []])
    tails = "".join(f"<h3>{name}</h3><pre>{esc(error.get(key))}</pre>"
                    for name, key in (("stdout (tail)", "stdout_tail"), ("stderr (tail)", "stderr_tail")) if error.get(key))
    return info + trace + tails


def answer_section(row: Row, answer: Answer | None) -> str:
    """The answer's text, for a row without code (else "")."""
    if row.get("verdict") != "no_code" or answer is None:
        return ""
    if answer.text is None:
        return f'<p class="muted" id="answer-note">{esc(answer.note)}</p>'
    return (f'<p class="small muted" id="answer-note">{esc(answer.note)}</p>'
            f'<pre class="answer" id="answer">{esc(answer.text)}</pre>')


def correctness_section(row: Row) -> str:
    corr = part(row, "correctness")
    if not corr:
        return ""
    return kv_table(list(corr.items()), "correctness")


def timing_section(row: Row) -> str:
    timing, base = part(row, "timing"), part(row, "baselines")
    if not timing and not base:
        return ""
    stats = [(k, v) for k, v in timing.items() if k != "samples_ms"]
    lines = {name: baseline_entry(row, name).get("median_ms") for name in scoring.BASELINES}
    samples = [v for v in timing.get("samples_ms") or [] if isinstance(v, (int, float))]
    baselines = [(f"{name} baseline", baseline_entry(row, name).get("error")
                  or f"median {fmt_ms(baseline_entry(row, name).get('median_ms'))} ms")
                 for name in scoring.BASELINES if name in base] + [("baseline device", base.get("device_name"))]
    speedups = kv_table([(f"speedup vs {b}", _speedup_text(row, b)) for b in scoring.BASELINES] + baselines)
    return ((svg.timing_plot(samples, lines) if samples else "") + speedups
            + "<h3>statistics</h3>" + kv_table(stats, "timing"))


def _speedup_text(row: Row, baseline: str) -> str:
    if baseline in scoring.baselines_not_measured([row]):
        return f"{NOT_MEASURED} (no {baseline} baseline was timed)"
    speed = scoring.speedup_of(row, baseline)
    if speed is not None and below_resolution(row):  # timed as the judge's jitter: the speedup is a lower bound
        return f"{fmt_bound(speed, True)} ({BELOW_RESOLUTION}: the call took at most the time it was timed at)"
    interval = fmt_interval(row.get(f"speedup_vs_{baseline}_ci"))
    return fmt_speedup(speed) + (f", 95% interval {interval}" if interval else "")


SECTIONS = (("error", "Error"), ("answer", "The answer"), ("code", "Extracted code"),
            ("extraction", "Which block, and why"), ("build", "Build"), ("correctness", "Correctness"),
            ("timing", "Timing"))


def _sections(row: Row, answer: Answer | None) -> str:
    rendered = {"error": error_section(row), "answer": answer_section(row, answer), "code": code_section(row),
                "extraction": extraction_section(row), "build": build_section(row),
                "correctness": correctness_section(row), "timing": timing_section(row)}
    order = list(SECTIONS)
    if part(row, "build").get("status") not in (None, "ok"):  # a failed build: its log is the error
        order.insert(1, order.pop(order.index(("build", "Build"))))
    out = "".join(f'<h2 id="{key}-h">{title}</h2>{rendered[key]}' for key, title in order if rendered[key])
    skipped = [title.lower() for key, title in SECTIONS if not rendered[key] and key in ("build", "correctness", "timing")]
    if skipped:
        out += (f'<p class="muted" id="not-reached">not reached: {esc(", ".join(skipped))} (judging ended with '
                f'{esc(row.get("verdict"))})</p>')
    return out


def render_detail(row: Row, answer: Answer | None = None) -> str:
    """The whole detail page of one row (``answer``: its text, shown when the row has no code)."""
    run, problem, sample = scoring.sample_key(row)
    head = (f'<p class="small"><a href="../index.html">&larr; back to the report</a></p>'
            f"<h1>{esc(run)} / {esc(problem)} / {esc(sample)}</h1>"
            f'<p>{badge(row.get("verdict"))} {flags_html(row.get("flags") or [])} <span id="reason">{esc(row.get("reason"))}</span></p>')
    facts = kv_table([("path", row.get("path")), ("sha256", row.get("sha256")), ("level", row.get("problem_level")),
                      ("device", row.get("device")),
                      ("judged at", row.get("judged_at")), ("evalkit", row.get("evalkit_version")),
                      ("stage seconds", row.get("stage_seconds")), ("warnings", row.get("warnings"))])
    body = head + facts + _sections(row, answer)
    return document(f"{run}/{problem}/{sample}: {row.get('verdict')}", body)
