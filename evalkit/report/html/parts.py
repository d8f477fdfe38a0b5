"""Small pieces every report page is made of: escaping, badges, number formats, table cells, the filter
box and the page frame (no side of the trust boundary: reads rows only, never torch).

Everything that comes from a row passes through ``esc`` (``html.escape``) and only ever lands in element
text or quoted attributes.
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable

from evalkit.records import FLAG_INFO
from evalkit.row_parts import part
from evalkit.report import scoring
from evalkit.report.html.assets import CSS

Row = dict[str, Any]
PageNames = dict[tuple[str, str, str], str]
FLAG_MEANINGS: dict[str, str] = {flag.value: info.meaning for flag, info in FLAG_INFO.items()}
NOT_MEASURED = "not measured"
NOT_MEASURED_TITLE = "this baseline was not timed for these rows (--baselines left it out), so no speedup against it exists"
BELOW_RESOLUTION = "below the timing's resolution"
_EMPTY_TD = re.compile(r"<td[^>]*></td>")


def esc(value: object) -> str:
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


def badge(verdict: object) -> str:
    known = str(verdict) in scoring.PIPELINE_RANK
    return f'<span class="badge v-{esc(verdict) if known else "unknown"}">{esc(verdict)}</span>'


def flag_badge(flag: object) -> str:
    """One flag as a badge; a known flag's ``FLAG_INFO`` meaning is its tooltip."""
    meaning = FLAG_MEANINGS.get(str(flag))
    title = f' title="{esc(meaning)}"' if meaning else ""
    return f'<span class="flag"{title}>{esc(flag)}</span>'


def flags_html(flags: Iterable[Any]) -> str:
    return "".join(flag_badge(f) for f in flags or [])


def fmt_speedup(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}\u00d7"


def below_resolution(row: Row) -> bool:
    """The row's call was faster than the judge can tell apart: its time is the jitter, its speedup a lower bound."""
    return part(row, "timing").get("below_resolution") is True


def fmt_bound(value: float | None, below: bool) -> str:
    """A speedup, ``≥2.00×`` when it is only a lower bound (timed below the resolution)."""
    text = fmt_speedup(value)
    return f"\u2265{text}" if text and below else text


def fmt_interval(interval: object) -> str:
    """A speedup's 95% interval, ``[1.95–2.05]``; "" when the row has none."""
    if not (isinstance(interval, list) and len(interval) == 2 and all(isinstance(v, (int, float)) for v in interval)):
        return ""
    return f"[{interval[0]:.2f}\u2013{interval[1]:.2f}]"


def fmt_rate(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def fmt_ms(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def num_td(value: float | None, text: str, note: str = "") -> str:
    """A numeric cell, sortable by ``value``; ``note`` (an interval, say) follows the text in small print."""
    v = "" if value is None else repr(float(value))
    small = f' <span class="muted small">{esc(note)}</span>' if note else ""
    return f'<td class="num" data-v="{esc(v)}">{esc(text)}{small}</td>'


def id_td(name: object) -> str:
    """A run, problem or sample name: it wraps, anywhere if it must, so a long name never widens its table past the
    window (a 1400 px window shows every column of the report's tables)."""
    return f'<td class="id">{esc(name)}</td>'


def not_measured_td() -> str:
    return f'<td class="num na" data-v="" title="{esc(NOT_MEASURED_TITLE)}">{NOT_MEASURED}</td>'


def rate_td(scores: dict[str, Any], baseline: str, value: float | None, text: str | None = None) -> str:
    """A fast_p-like cell: "not measured" when ``scores`` says the baseline was not timed, else the rate."""
    if baseline in scores.get("baselines_not_measured", []):
        return not_measured_td()
    return num_td(value, fmt_rate(value) if text is None else text)


def th(label: str, key: str = "", numeric: bool = False, title: str = "", names: bool = False) -> str:
    """A header cell; ``names``: its label holds a run's name, which wraps anywhere if it must, as ``id_td``."""
    attrs = (f' data-key="{esc(key)}"' if key else "") + (' data-type="num"' if numeric else "")
    attrs += f' title="{esc(title)}"' if title else ""
    attrs += ' class="id"' if names else ""
    return f"<th{attrs}>{esc(label)}</th>"


def table(css_id: str, heads: list[str], rows: list[tuple[str, list[str]]], css_class: str = "sortable") -> str:
    """A table of ``heads`` and ``rows`` ((``<tr>`` attributes, cells) each) without the columns where every body
    cell is empty: a column of blanks says nothing (a baseline timed for no row, nothing timed at all)."""
    keep = [i for i in range(len(heads)) if not rows or any(not _EMPTY_TD.fullmatch(cells[i]) for _, cells in rows)]
    head = "".join(heads[i] for i in keep)
    body = "".join(f"<tr{attrs}>" + "".join(cells[i] for i in keep) + "</tr>" for attrs, cells in rows)
    return (f'<table id="{esc(css_id)}" class="{esc(css_class)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def filter_box(table_id: str, selects: list[tuple[str, str, list[tuple[str, str]]]], placeholder: str) -> str:
    """The search box and drop-downs that filter ``table_id``'s rows (``assets.SCRIPT`` runs them).

    ``selects``: (row attribute, label of the "any" choice, [(value, label)]) each; a row is kept when its
    ``data-<attribute>`` holds the chosen value.
    """
    parts = [f'<input type="search" data-q placeholder="{esc(placeholder)}" aria-label="{esc(placeholder)}">']
    for name, anything, choices in selects:
        options = f'<option value="">{esc(anything)}</option>' + "".join(
            f'<option value="{esc(value)}">{esc(label)}</option>' for value, label in choices)
        parts.append(f'<select data-filter="{esc(name)}" aria-label="{esc(anything)}">{options}</select>')
    parts.append('<span class="count"></span>')
    return f'<div class="filters" data-table="{esc(table_id)}">{"".join(parts)}</div>'


def document(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}{tail}</body></html>")


def problems_td(scores: dict[str, Any], total: int) -> str:
    """How many problems the scores are over, beside them: ``1 of 9`` (a run: those it answered)."""
    count = scores.get("problems_scored", total)
    return num_td(count, f"{count} of {total}")


PROBLEMS_TITLE = ("the problems the scores are over: for a run, those it answered (at least one row); for overall, "
                  "every problem of the set, one without a submission counting as a failure")
