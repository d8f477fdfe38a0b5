"""Trusted side: which kernels an answer's forward launches, seen by the profiler in a worker of their own.

Starting the profiler (CUPTI, through ``torch.profiler``) costs a fresh process 1.0-1.6 s on the H200, and a
process that has started it launches kernels several percent slower from then on (9% on a 0.15 ms
convolution): so it is never started in the worker an answer is timed in, and no answer waits for it to
start. Once the answer is timed and its worker closed, the answer is loaded again in a second worker that
started the profiler while it waited (``protocol.PRELOAD_PROFILER_VARIABLE``), called once on fresh inputs
(the profiled call is not its first), then profiled for one call.

What that worker claims can only add flags (``plausibility.kernel_flags``): the verdict and the times come
from the answer's own worker. One that fails, hangs or breaks the protocol fails the answer, as the same
failure in the timed worker would (``Judge.examine``): an answer cannot escape its flags by failing when
profiled. On a CPU, where no profiler names kernels, the answer's own worker, once timed, is profiled instead,
for the native code the answer built and called (``observe_native_calls``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from evalkit.judge.kernel_origin import own_kernels
from evalkit.judge.plausibility import kernel_flags, kernel_shares, no_custom_kernel
from evalkit.judge.reference import OutputSpec
from evalkit.judge.session import Session, WorkerChannel
from evalkit.row_parts import CorrectnessRecord

# A worker started to profile, and the path of the answer's code in its folder.
ProfilingWorker = Callable[[], tuple[WorkerChannel, Path]]


def observe_kernels(session: Session, fields: dict[str, Any], specs: list[OutputSpec], templates: list[Any],
                    originals: list[Any], correctness: CorrectnessRecord,
                    meanwhile: Callable[[], None] | None = None) -> list[str]:
    """Set up and load the answer in ``session``'s worker, call it once on ``originals``, then profile one call:
    the flags its kernels earn. Records the kernels and their shares of the device time in ``correctness``.
    ``meanwhile``: the judge's own work, done while the worker sets up and loads (``Session.load``)."""
    code = Path(fields["code_path"]).read_text(errors="replace")  # before it can run
    uses_load_inline, own = "load_inline" in code, own_kernels(code)
    session.start(fields, specs, templates)
    session.load(meanwhile)
    session.observe([originals])
    claim = session.profile()
    correctness["kernels"] = claim.kernels[:50]
    shares = kernel_shares(claim.kernels, claim.kernel_us, own)
    correctness.update(shares)
    return kernel_flags(claim.kernels, uses_load_inline, shares.get("custom_time_share"), own)


def observe_native_calls(session: Session, code: str, correctness: CorrectnessRecord) -> list[str]:
    """On a CPU, where no profiler names kernels: one more call of the answer in ``session``'s worker, once it is timed
    (nothing timed comes after it), watched for the functions of native code the answer built that the call ran
    (``evalkit.sandbox.untrusted.native_calls``; no profiler is started); ``code`` is the answer's, read before it
    ran. Records them in ``correctness``; the flags they earn: ``no_custom_kernel`` when none."""
    claim = session.profile()
    correctness["kernels"] = correctness["custom_kernels"] = claim.kernels[:50]
    return [] if claim.kernels else no_custom_kernel("load_inline" in code)
