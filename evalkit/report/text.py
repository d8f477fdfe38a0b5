"""The report's terminal text forms (no side of the trust boundary: reads rows only, never torch).

``format_leaderboard`` prints a ``summary.json`` as a compact table (``evalkit score``, ``evalkit report``);
``format_diff`` prints ``evalkit.report.run_diff.diff_rows``'s result (``evalkit report --compare``).
"""

from __future__ import annotations

from typing import Any, Sequence

from evalkit.report.run_diff import SPEEDUP_CHANGE


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


NOT_MEASURED = "not measured"


def _measured(scores: dict[str, Any], baseline: str, text: str) -> str:
    """``text``, or "not measured" where the scores say the baseline was never timed (never a 0%)."""
    return NOT_MEASURED if baseline in scores.get("baselines_not_measured", []) else text


def _table(heads: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    """Columns lined up: the first left-aligned, the others right-aligned, a rule under the heads."""
    lines = [heads, *body]
    widths = [max(len(line[i]) for line in lines) for i in range(len(heads))]
    text = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return text


def format_leaderboard(summary: dict[str, Any]) -> str:
    """A compact text table of ``summary`` (one line per run, then overall) for the terminal; then fast_1 per
    KernelBench level where rows carry levels."""
    heads = ("run", "subs", "problems", "code", "compiled", "correct", "fast_1 eager", "fast_1 compile",
             "geomean eager", "geomean compile")
    pooled = summary["overall"]["submissions"]  # 0 where only curated solutions were scored: no overall line
    named = [*summary["runs"].items(), *([("overall", summary["overall"])] if pooled else [])]
    lines = []
    count = summary["problem_set"]["count"]
    for name, s in named:
        geo, fast = s["geomean_speedup"], s["fast_p"]
        lines.append((name, str(s["submissions"]), f"{s.get('problems_scored', count)}/{count}",
                      _pct(s["rates"]["code_extracted"]), _pct(s["rates"]["compiled"]),
                      _pct(s["rates"]["correct"]), _measured(s, "eager", _pct(fast["eager"]["1"])),
                      _measured(s, "compile", _pct(fast["compile"]["1"])),
                      _measured(s, "eager", _x(geo["eager"]["value"])), _measured(s, "compile", _x(geo["compile"]["value"]))))
    text = _table(heads, lines)
    over = f", of overall over all {count}" if pooled else ""
    text.append(f"fast_p of a run over the problems it answered (problems){over}; a speedup counted when its 95% "
                f"interval clears p; rows flagged {', '.join(summary['excluded_flags'])} never count as fast")
    if summary["problem_set"].get("levels"):
        text += ["", *_level_table(named)]
    return "\n".join(text)


def _level_table(named: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [(name, f"level {level}", str(entry["problems"]),
              _measured(s, "eager", _pct(entry["fast_p"]["eager"]["1"])),
              _measured(s, "compile", _pct(entry["fast_p"]["compile"]["1"])))
             for name, s in named for level, entry in s.get("by_level", {}).items()]
    return _table(("run", "level", "problems", "fast_1 eager", "fast_1 compile"), lines)


def format_diff(diff: dict[str, Any], before: str = "A", after: str = "B") -> str:
    """``diff_rows``'s result as text lines, one change per line."""
    name = "/".join
    lines = [f"comparing {before} -> {after}"]
    lines += [f"verdict  {name(d['key'])}: {d['before']} -> {d['after']}" for d in diff["verdicts_flipped"]]
    lines += [f"speedup  {_move(d)}" for d in diff["speedups_moved"]]
    lines += [f"within   {_move(d)}" for d in diff.get("speedups_within_intervals", [])]
    lines += [f"only in {before}: {name(d['key'])} ({d['verdict']})" for d in diff["only_before"]]
    lines += [f"only in {after}: {name(d['key'])} ({d['verdict']})" for d in diff["only_after"]]
    lines.append(f"{len(diff['verdicts_flipped'])} verdict(s) flipped, {len(diff['speedups_moved'])} speedup(s) moved "
                 f"by more than {100 * SPEEDUP_CHANGE:.0f}% with their 95% intervals apart, "
                 f"{len(diff.get('speedups_within_intervals', []))} moved as far within them (no change), "
                 f"{len(diff['only_before'])} only in {before}, {len(diff['only_after'])} only in {after}, "
                 f"{diff['unchanged']} unchanged")
    return "\n".join(lines)


def _move(d: dict[str, Any]) -> str:
    """One speedup's move: key, baseline, before and after with their intervals where rows have them."""
    change = f" ({100 * d['change']:+.1f}%)" if d["change"] is not None else ""
    why = {True: ", 95% intervals apart", False: ", 95% intervals overlap", None: ""}[d.get("intervals_apart")]
    return (f"{'/'.join(d['key'])} vs {d['baseline']}: {_x(d['before'])}{_ci(d.get('before_ci'))} -> "
            f"{_x(d['after'])}{_ci(d.get('after_ci'))}{change}{why}")


def _ci(interval: Sequence[float] | None) -> str:
    return f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
