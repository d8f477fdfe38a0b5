"""Trusted side (reads a finished row only; no torch): ``feedback``, a short text written for the model that gave
the answer, to read on its next turn (an RL loop's "server feedback").

What it says comes from the row the judge decided: the compile errors and their lines in the answer, the runtime
error and its line, which output was wrong and how, the speedup with its interval and the kernels that took the
time, and what a flag means. Never a secret: no seed, no input, no nonce, no path of the judge's machine.
"""

from __future__ import annotations

from typing import Any

from evalkit.records import FLAG_INFO, ResultRow

MAX_FEEDBACK = 2000  # characters: a turn's worth, whatever the row holds
CUT_SHORT = "\n[... cut short]"
MAX_ERRORS = 3  # compiler errors quoted
MAX_KERNELS = 3


def feedback_for(row: ResultRow) -> str:
    """The feedback for ``row``: what went wrong and where, or how fast it was; at most ``MAX_FEEDBACK``."""
    write = _WRITERS.get(row.verdict, _reason_only)
    parts = [write(row)] + [_flag_line(flag) for flag in row.flags]
    text = "\n".join(part for part in parts if part)
    return text if len(text) <= MAX_FEEDBACK else text[: MAX_FEEDBACK - len(CUT_SHORT)] + CUT_SHORT


def _reason_only(row: ResultRow) -> str:
    return f"{row.verdict}: {row.reason}"


def _no_code(row: ResultRow) -> str:
    why = (row.extraction or {}).get("reason") or row.reason
    return (f"No code was judged: {why}. End the answer with one fenced ```python block holding the whole module, "
            "defining class ModelNew(nn.Module) with the reference's __init__ and forward arguments.")


def _syntax_error(row: ResultRow) -> str:
    error = row.error or {}
    line = error.get("source_line") or error.get("code_line")
    text = f"SyntaxError at line {line} of the code: {error.get('message', row.reason)}"
    return text + (f"\n    {error['text'].strip()}" if error.get("text") else "")


def _compile_error(row: ResultRow) -> str:
    errors = (row.build or {}).get("errors") or []
    if not errors:
        tail = "\n".join(((row.build or {}).get("log_tail") or "").strip().splitlines()[-6:])
        return f"The build failed: {(row.build or {}).get('message') or row.reason}\n{tail}".strip()
    lines = ["The build failed. First compiler errors:"]
    for error in errors[:MAX_ERRORS]:
        where = (f"line {error['submission_line']} of the answer" if error.get("submission_line")
                 else f"{error.get('file', '?')}:{error.get('line', '?')}")
        lines.append(f"- {where}: {error.get('message', '')}")
        if error.get("source"):
            lines.append(f"    {error['source'].strip()}")
    return "\n".join(lines)


def _failed_in_code(row: ResultRow) -> str:
    error = row.error or {}
    what = ": ".join(part for part in (error.get("type"), error.get("message")) if part) or row.reason
    stage = error.get("stage")
    text = f"{row.verdict.replace('_', ' ')}{f' during {stage}' if stage else ''}: {what}"
    frames = [frame for frame in error.get("traceback") or [] if frame.get("in_submission")]
    if frames:
        frame = frames[-1]
        line = frame.get("source_line") or frame.get("line")
        text += f"\n  at line {line} of the answer, in {frame.get('function', '?')}: {frame.get('text', '').strip()}"
    elif row.verdict in ("crash", "timeout"):
        stderr = "\n".join((error.get("stderr_tail") or "").strip().splitlines()[-3:])
        text += f"\n{stderr}" if stderr else ""
    return text


def _incorrect(row: ResultRow) -> str:
    found = row.correctness or {}
    if found.get("bad_count") is None:
        return f"The output is wrong: {found.get('reason') or row.reason}"
    shape = found.get("shape")
    text = (f"Output {found.get('output_index', 0)} (shape {shape}) is wrong: {found['bad_count']} of "
            f"{found.get('n_elements', '?')} elements ({found.get('bad_fraction', 0):.1%}) differ from the "
            f"reference by more than atol={found.get('atol')} + rtol={found.get('rtol')} x |reference|; "
            f"max abs difference {found.get('max_abs_err', 0):.4g}")
    if found.get("mean_abs_err") is not None:
        text += f", mean {found['mean_abs_err']:.4g}"
    text += f"; first wrong element at index {found.get('first_bad_index')}."
    if found.get("pattern"):
        text += f" It looks like: {found['pattern']}."
    if found.get("unexpected_nonfinite"):
        text += f" {found['unexpected_nonfinite']} NaN/Inf where the reference is finite."
    return text


def _correct(row: ResultRow) -> str:
    parts = []
    for kind in ("eager", "compile"):
        value, interval = getattr(row, f"speedup_vs_{kind}"), getattr(row, f"speedup_vs_{kind}_ci")
        if value:
            span = f" (95% interval {interval[0]:.2f}-{interval[1]:.2f})" if interval else ""
            parts.append(f"{value:.2f}x vs {'PyTorch eager' if kind == 'eager' else 'torch.compile'}{span}")
    median = (row.timing or {}).get("median_ms")
    text = "Correct." + (f" Median {median:.4g} ms a call" if median else "")
    text += (": " + ", ".join(parts) + "." if parts else ".")
    kernels = _kernels_by_time(row.correctness or {})
    return text + (f"\nKernels that took the time: {kernels}." if kernels else "")


def _kernels_by_time(correctness: dict[str, Any]) -> str:
    times = correctness.get("kernel_us") or {}
    ranked = sorted(times.items(), key=lambda item: -item[1])[:MAX_KERNELS]
    return "; ".join(f"{name[:120]} {us:.0f} us" for name, us in ranked)


def _flag_line(flag: str) -> str:
    info = FLAG_INFO.get(flag)  # type: ignore[call-overload]  # a Flag is its str value
    if info is None:
        return f"Flag {flag}."
    counts = " It does not count as fast." if info.excludes_from_fast_p else ""
    return f"Flag {flag}: {info.meaning}{f' ({info.why})' if info.why else ''}.{counts}"


_WRITERS = {"no_code": _no_code, "syntax_error": _syntax_error, "compile_error": _compile_error,
            "interface_error": _failed_in_code, "runtime_error": _failed_in_code, "crash": _failed_in_code,
            "timeout": _failed_in_code, "incorrect": _incorrect, "correct": _correct}
