"""Trusted side (reads a finished row only; no torch): ``feedback``, a short text written for the model that gave
the answer, to read on its next turn (an RL loop's "server feedback").

What it says comes from the row the judge decided: the compile errors and their lines in the answer, the runtime
error and its line, which output was wrong and how, the speedup with its interval and the kernels that took the
time, and what a flag means. Never a secret: no seed, no input, no nonce, no path of the judge's machine.
"""

from __future__ import annotations

from typing import Any, Mapping

from evalkit.records import FLAG_INFO, VERDICT_INFO, ResultRow
from evalkit.row_parts import CorrectnessRecord, ErrorRecord

MAX_FEEDBACK = 2000  # characters: a turn's worth, whatever the row holds
CUT_SHORT = "\n[... cut short]"
MAX_ERRORS = 3  # compiler errors quoted
MAX_KERNELS = 3


def feedback_for(row: ResultRow) -> str:
    """The feedback for ``row``: what went wrong and where, or how fast it was; never empty, at most
    ``MAX_FEEDBACK``."""
    write = _WRITERS.get(row.verdict, _reason_only)
    parts = [write(row)] + [_flag_line(flag) for flag in row.flags]
    text = "\n".join(part for part in parts if part) or _reason_only(row)
    return text if len(text) <= MAX_FEEDBACK else text[: MAX_FEEDBACK - len(CUT_SHORT)] + CUT_SHORT


def _reason_only(row: ResultRow) -> str:
    return f"{row.verdict.replace('_', ' ').capitalize()}: {_why(row)}"


def _why(row: ResultRow) -> str:
    """The row's reason, else what its verdict means: never empty."""
    info = VERDICT_INFO.get(row.verdict)  # type: ignore[call-overload]  # a Verdict is its str value
    return row.reason or (info.meaning if info else "no reason was given")


def _no_code(row: ResultRow) -> str:
    why = (row.extraction.get("reason") if row.extraction else None) or row.reason
    return (f"No code was judged: {why}. End the answer with one fenced ```python block holding the whole module, "
            "defining class ModelNew(nn.Module) with the reference's __init__ and forward arguments.")


def _syntax_error(row: ResultRow) -> str:
    error = row.error or ErrorRecord()
    line = error.get("source_line") or error.get("code_line")
    text = f"SyntaxError{f' at line {line} of the code' if line else ''}: {error.get('message') or _why(row)}"
    return text + (f"\n    {error['text'].strip()}" if error.get("text") else "")


def _compile_error(row: ResultRow) -> str:
    """The first compiler errors at the answer's lines: the build's, or a JIT's at the first call (``error``)."""
    build: Mapping[str, Any] = row.build or {}  # a row read back may hold any of its keys
    built = build.get("errors") or []
    claimed = row.error or ErrorRecord()
    errors = built or claimed.get("compiler_errors") or []
    jit = not built and bool(claimed.get("message"))
    if not errors and jit:
        return _failed_in_code(row)
    if not errors:
        tail = "\n".join((build.get("log_tail") or "").strip().splitlines()[-6:])
        return f"The build failed: {build.get('message') or _why(row)}\n{tail}".strip()
    lines = [f"{'A kernel failed to compile at its first call' if jit else 'The build failed'}. First compiler errors:"]
    for error in errors[:MAX_ERRORS]:
        where = (f"line {error['submission_line']} of the answer" if error.get("submission_line")
                 else f"{error.get('file', '?')}:{error.get('line', '?')}")
        lines.append(f"- {where}: {error.get('message', '')}")
        if error.get("source"):
            lines.append(f"    {error['source'].strip()}")
    return "\n".join(lines)


# What the judge was doing when an answer failed, by the worker's stage
_DOING = {"load": "while importing the module", "construct": "while constructing ModelNew",
          "forward": "in forward", "interface": ""}
_HINTS = {"timeout": "It did not finish in time: an endless loop, a deadlock, a wait that never ends, or work far "
                     "slower than the reference.",
          "crash": "The process died: often a kernel reading or writing out of bounds."}


def _failed_in_code(row: ResultRow) -> str:
    """The exception once ("NameError: name 'F' is not defined"), where the judge was, and the answer's line."""
    error = row.error or {}
    stage = error.get("stage")
    doing = _DOING.get(stage, f"in stage {stage}") if stage else ""
    text = f"{row.verdict.replace('_', ' ').capitalize()}{f' {doing}' if doing else ''}: {_exception(row)}"
    frames = [frame for frame in error.get("traceback") or [] if frame.get("in_submission")]
    if frames:
        frame = frames[-1]
        line = frame.get("source_line") or frame.get("line")
        text += f"\n  at line {line} of the answer, in {frame.get('function', '?')}: {frame.get('text', '').strip()}"
    elif row.verdict in ("crash", "timeout"):
        stderr = "\n".join((error.get("stderr_tail") or "").strip().splitlines()[-3:])
        text += f"\n{stderr}" if stderr else ""
    return text + (f"\n{_HINTS[row.verdict]}" if row.verdict in _HINTS else "")


def _exception(row: ResultRow) -> str:
    """The error's type and message, each once: the worker's message often starts with its type already, and a
    limit's with its kind ("timeout: stage 'forward' exceeded ...")."""
    error = row.error or {}
    exception, kind = error.get("type") or "", error.get("kind") or row.verdict
    message = (error.get("message") or row.reason or "").strip()
    for prefix in (f"{kind}: ", f"{row.verdict}: "):
        message = message.removeprefix(prefix)
    if exception and f"{exception}:" not in message:
        message = f"{exception}: {message}"
    return message or _why(row)


def _incorrect(row: ResultRow) -> str:
    """Which output is wrong and by how much against which tolerance, where (the pattern) and its worst values."""
    found = row.correctness or {}
    if found.get("bad_count") is None:
        return f"Incorrect: {found.get('reason') or _why(row)}"
    when = (f" in trial {found['failed_trial']}" if found.get("failed_trial") else
            f" in timed request {found['timed_request']}, after the correctness trials passed (an output that "
            f"changes from call to call: a result kept from an earlier call, a race, work left unfinished)"
            if found.get("timed_request") else "")
    sampled = " sampled" if found.get("timed_request") else ""
    dtype = f", {found['dtype']}" if found.get("dtype") else ""
    text = (f"Output {found.get('output_index', 0)} (shape {found.get('shape')}{dtype}) is wrong{when}: "
            f"{found['bad_count']} of {found.get('n_elements', '?')}{sampled} elements "
            f"({found.get('bad_fraction', 0):.1%}) "
            f"are outside the tolerance |got - expected| <= atol + rtol * |expected| (atol={found.get('atol')}, "
            f"rtol={found.get('rtol')}); max abs difference {found.get('max_abs_err', 0):.4g}")
    if found.get("mean_abs_err") is not None:
        text += f", mean {found['mean_abs_err']:.4g}"
    text += f"; first wrong element at index {found.get('first_bad_index')}."
    if found.get("unexpected_nonfinite"):
        text += f" {found['unexpected_nonfinite']} NaN/Inf where the reference is finite."
    if found.get("pattern"):
        text += f"\nPattern: {found['pattern']}."
    worst = found.get("worst") or []
    if worst:
        text += "\nWorst elements, expected vs got: " + "; ".join(
            f"out{w.get('index')} {_value(w.get('expected'))} vs {_value(w.get('got'))}" for w in worst) + "."
    return text


def _value(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) else str(value)


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
    kernels = _kernels_by_time(row.correctness or CorrectnessRecord())
    return text + (f"\nKernels that took the time: {kernels}." if kernels else "")


def _kernels_by_time(correctness: CorrectnessRecord) -> str:
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
