"""Small inline SVG charts for the HTML report, with no scripts and every label escaped (no side of the
trust boundary: reads rows only, never torch)."""

from __future__ import annotations

import math
from html import escape
from typing import Callable, Mapping

PALETTE = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d", "#4d7c0f")
WIDTH, HEIGHT = 680, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 200, 28, 40
Scale = Callable[[float], float]


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _frame(title: str, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{escape(label)}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">'
            f'<text x="{LEFT}" y="16" class="title">{escape(title)}</text>{"".join(body)}</svg>')


def _axes(x_ticks: list[tuple[float, str]], y_ticks: list[tuple[float, str]], x_label: str, y_label: str) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    parts = [f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" class="axis"/>']
    for x, text in x_ticks:
        parts.append(f'<line x1="{_fmt(x)}" y1="{TOP}" x2="{_fmt(x)}" y2="{bottom}" class="grid"/>'
                     f'<text x="{_fmt(x)}" y="{bottom + 14}" text-anchor="middle">{escape(text)}</text>')
    for y, text in y_ticks:
        parts.append(f'<line x1="{LEFT}" y1="{_fmt(y)}" x2="{right}" y2="{_fmt(y)}" class="grid"/>'
                     f'<text x="{LEFT - 6}" y="{_fmt(y + 4)}" text-anchor="end">{escape(text)}</text>')
    parts.append(f'<text x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{(TOP + bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(TOP + bottom) / 2:.0f})">{escape(y_label)}</text>')
    return parts


def _legend(names: list[str]) -> list[str]:
    x = WIDTH - RIGHT + 12
    return [f'<rect x="{x}" y="{TOP + 18 * i}" width="12" height="12" fill="{color(i)}"/>'
            f'<text x="{x + 18}" y="{TOP + 18 * i + 10}">{escape(name[:28])}</text>' for i, name in enumerate(names)]


def fast_p_curve(series: dict[str, list[float]], n_problems: dict[str, int], title: str) -> str:
    """fast_p as a function of p: one step curve per run. ``series`` maps a run to its fast problems' speedups,
    ``n_problems`` to the problems it is scored over."""
    top = max([2.5] + [min(s, 10.0) * 1.1 for speeds in series.values() for s in speeds])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(p: float) -> float:
        return LEFT + plot_w * min(p, top) / top

    def sy(frac: float) -> float:
        return HEIGHT - BOTTOM - plot_h * frac

    step = 0.5 if top <= 5 else 1.0
    x_ticks = [(sx(i * step), f"{i * step:g}") for i in range(int(top / step) + 1)]
    y_ticks = [(sy(f), f"{f:.0%}") for f in (0, 0.25, 0.5, 0.75, 1.0)]
    body = _axes(x_ticks, y_ticks, "speedup threshold p", "fast_p")
    body.append(f'<line x1="{_fmt(sx(1))}" y1="{TOP}" x2="{_fmt(sx(1))}" y2="{HEIGHT - BOTTOM}" class="one"/>')
    for i, (name, speeds) in enumerate(series.items()):
        body.append(_step_path(sorted(speeds), n_problems.get(name, 0), sx, sy, top, color(i), name))
    body.extend(_legend(list(series)))
    return _frame(title, body, title)


def _step_path(speeds: list[float], n: int, sx: Scale, sy: Scale, top: float, stroke: str, name: str) -> str:
    if n <= 0:
        return ""
    points = [(0.0, len(speeds) / n)]
    for i, s in enumerate(speeds):
        x = min(s, top)
        points += [(x, (len(speeds) - i) / n), (x, (len(speeds) - i - 1) / n)]
    points.append((top, points[-1][1]))
    d = " ".join(f"{'M' if j == 0 else 'L'}{_fmt(sx(x))},{_fmt(sy(y))}" for j, (x, y) in enumerate(points))
    return f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="2"><title>{escape(name)}</title></path>'


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high`` (steps of 1, 2 or 5 times a power of ten)."""
    raw = high / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(high / step)) + 1)]


def timing_plot(samples_ms: list[float], lines: Mapping[str, float | None]) -> str:
    """Each timed call as a dot (call order on x, ms on y) with horizontal lines at the baselines' medians."""
    values = [float(v) for v in samples_ms if isinstance(v, (int, float)) and v > 0]
    marks = {k: float(v) for k, v in lines.items() if isinstance(v, (int, float)) and v > 0}
    if not values:
        return '<p class="muted">no timing samples</p>'
    everything = values + list(marks.values())
    use_log = max(everything) / min(everything) > 20
    if use_log:
        ticks = [10.0 ** e for e in range(math.floor(math.log10(min(everything))), math.ceil(math.log10(max(everything))) + 1)]
    else:
        ticks = nice_ticks(max(everything))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    lo, hi = (math.log10(ticks[0]), math.log10(ticks[-1])) if use_log else (0.0, ticks[-1])
    hi = hi if hi > lo else lo + 1

    def sy(v: float) -> float:
        t = math.log10(v) if use_log else v
        return HEIGHT - BOTTOM - plot_h * (t - lo) / (hi - lo)

    def sx(i: int) -> float:
        return LEFT + plot_w * (i + 0.5) / len(values)

    y_ticks = [(sy(t), f"{t:g}") for t in ticks if t > 0 or not use_log]
    x_ticks = [(sx(i), str(i + 1)) for i in range(0, len(values), max(1, math.ceil(len(values) / 10)))]
    body = _axes(x_ticks, y_ticks, "timed call", "ms" + (" (log)" if use_log else ""))
    body += [f'<circle cx="{_fmt(sx(i))}" cy="{_fmt(sy(v))}" r="3" fill="{color(0)}"><title>call {i + 1}: {v:.4g} ms</title></circle>'
             for i, v in enumerate(values)]
    for j, (name, value) in enumerate(marks.items(), start=1):
        y = _fmt(sy(value))
        body.append(f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="{color(j)}" '
                    f'stroke-dasharray="6 3" stroke-width="1.5"><title>{escape(name)}: {value:.4g} ms</title></line>')
    body.extend(_legend(["calls"] + [f"{name} median {value:.3g} ms" for name, value in marks.items()]))
    return _frame("timing distribution (ms per call)", body, "timing distribution")
