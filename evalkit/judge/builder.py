"""Trusted side: the build stage. Imports each submission once in a sandbox so ``load_inline`` compiles it.

Builds run ahead of judging in a pool of CPU workers, each in its own extension
directory keyed by a hash of the code (every seed names its extension ``conv2d``, so
names must never collide). The outcome is cached beside the build, so rescoring the
same code builds nothing; with it, what the build left in its folder (``entry_manifest``), so that a
judged worker that rewrote its build's files never passes them to a later judging of the same code.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch

from evalkit.judge import torch_headers
from evalkit.judge.compiler_errors import first_compiler_errors
from evalkit.judge.entry_manifest import changed, manifest
from evalkit.row_parts import BuildRecord, CompilerErrorRecord
from evalkit.sandbox import protocol
from evalkit.sandbox.freezer import BuildFreezer
from evalkit.sandbox.launcher import Limits, UntrustedProcess, WorkerGone
from evalkit.sandbox.processes import MARKER_VARIABLE, ProcessTable
from evalkit.sandbox.remains import entry_lock

logger = logging.getLogger(__name__)

BUILD_RECORD = "build.json"
BUILD_MANIFEST = "extensions.json"  # what the build left in its extension folder (``entry_manifest``)


@dataclass
class BuildOutcome:
    status: str  # "ok" | "compile_error" | "import_failed" | "crash" | "timeout"
    seconds: float
    cached: bool = False
    message: str = ""
    log_tail: str = ""
    errors: list[CompilerErrorRecord] = field(default_factory=list)
    extension_dir: str = ""

    def to_dict(self) -> BuildRecord:
        return BuildRecord(status=self.status, seconds=self.seconds, cached=self.cached, message=self.message,
                           log_tail=self.log_tail, errors=[error.copy() for error in self.errors],
                           extension_dir=self.extension_dir)


def build_key(code: str, device: str, arch: str | None = None) -> str:
    """Everything that changes the compiled result: code, torch, Python, target device and arch (this machine's
    GPU's unless given)."""
    arch = arch_list(device) if arch is None else arch
    material = "\0".join([code, torch.__version__, sys.version, device, arch])
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def arch_list(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    return ""


def builds_root(cache_dir: Path) -> Path:
    """Where the builds of a cache live (one folder per ``build_key``, and ``torch_headers``' folder)."""
    return cache_dir / "builds"


def build_env(build_dir: Path, device: str, arch: str | None = None) -> dict[str, str]:
    return {"TORCH_EXTENSIONS_DIR": str(build_dir / "extensions"), **extension_env(device, arch),
            **torch_headers.header_env(build_dir.parent, device)}


def extension_env(device: str, arch: str | None = None) -> dict[str, str]:
    """What torch's extension builder reads besides the folder: the same for every answer on ``device``."""
    arch = arch_list(device) if arch is None else arch
    return {"MAX_JOBS": "4", **({"TORCH_CUDA_ARCH_LIST": arch} if arch else {})}


# A build may go this long without a compiler running before it is taken to hang: an import or a ModelNew() that
# never finishes cost the whole build limit (900 s), where the judging stage would give it its load limit.
BUILD_IDLE_S = 120.0


def build(code: str, cache_root: Path, device: str, timeout_s: float, limits: Limits,
          init_inputs: list[Any] | None = None, freezer: BuildFreezer | None = None,
          arch: str | None = None, processes: ProcessTable | None = None,
          idle_s: float = BUILD_IDLE_S) -> BuildOutcome:
    """Build (import) ``code`` in a sandbox with no GPU visible, or return the cached outcome.

    With a ``freezer``, the sandbox is held while a judge times (and its time limit paused meanwhile). ``arch``:
    the CUDA arch to build for, when it is not this machine's GPU's (a Ray build task holds no GPU).
    ``processes``: the /proc reading the watchers of a process's concurrent builds share. ``idle_s``: how long it
    may run without a compiler before it is stopped as hanging."""
    # The folder as the kernel names it: torch's ninja file records the sources' absolute paths, and the judging
    # stage's load rebuilds the extension (within its load limit) when they differ from the build's. A cache
    # reached through a link (``~/.cache`` on another disk, a test's cache sharing the session's builds) thus
    # builds and loads at one path whichever way it is reached. Only the trusted root is resolved, before the key.
    build_dir = cache_root.resolve() / build_key(code, device, arch)
    build_dir.mkdir(parents=True, exist_ok=True)
    with _only_builder(build_dir):  # the same code twice: the second waits, then finds the first's record
        cached, differing = _recorded(build_dir)
        if cached is not None and not differing:
            return cached
        entry = entry_lock(build_dir / "extensions")  # no judged worker loads from it while it is built again
        try:
            cached, differing = _recorded(build_dir)  # a judged worker may have been loading from it: look again
            if cached is not None and not differing:
                return cached
            if differing:
                logger.warning("the cached build in %s was changed after it was built (%s): building it again",
                               build_dir, ", ".join(differing[:5]))
                (build_dir / BUILD_RECORD).unlink()
                shutil.rmtree(build_dir / "extensions", ignore_errors=True)  # links are removed, never followed
            return _build_afresh(code, build_dir, device, timeout_s, limits, init_inputs, freezer, arch, processes,
                                 idle_s)
        finally:
            os.close(entry)


def _recorded(build_dir: Path) -> tuple[BuildOutcome | None, list[str]]:
    """The recorded outcome of the build in ``build_dir`` (None: none, or a damaged record), and the files of its
    extension folder that are no longer what the build left (``entry_manifest.changed``: a judged worker rewrote
    them)."""
    extensions = build_dir / "extensions"
    try:
        outcome = BuildOutcome(**{**json.loads((build_dir / BUILD_RECORD).read_text()), "cached": True,
                                  "extension_dir": str(extensions)})
    except (OSError, ValueError, TypeError):
        return None, []
    try:
        recorded = json.loads((build_dir / BUILD_MANIFEST).read_text())
    except (OSError, ValueError):  # a build cached before manifests were kept: recorded as it is now
        (build_dir / BUILD_MANIFEST).write_text(json.dumps(manifest(extensions)))
        return outcome, []
    return outcome, changed(extensions, recorded)


def _build_afresh(code: str, build_dir: Path, device: str, timeout_s: float, limits: Limits,
                  init_inputs: list[Any] | None, freezer: BuildFreezer | None, arch: str | None,
                  processes: ProcessTable | None, idle_s: float) -> BuildOutcome:
    """Build ``code`` into ``build_dir``, and record the outcome when a rebuild would repeat it, with what the build
    left in its extension folder (``BUILD_MANIFEST``)."""
    for stale in (build_dir / "extensions").glob("*/lock"):
        if not stale.parent.is_symlink():  # a build may plant a link to another folder: never follow it
            stale.unlink(missing_ok=True)  # left by a build killed mid-compile: torch would wait on it forever
    # once per cache, beside the builds (none waits for it), ended with the run's sandboxes if still going
    torch_headers.start(build_dir.parent, device, f"{MARKER_VARIABLE}={limits.group}.torch-headers", freezer)
    outcome = _run_build(code, build_dir, device, timeout_s, limits, init_inputs, freezer, arch, processes, idle_s)
    if outcome.status in ("ok", "compile_error"):
        (build_dir / BUILD_MANIFEST).write_text(json.dumps(manifest(build_dir / "extensions")))
        (build_dir / BUILD_RECORD).write_text(json.dumps(outcome.to_dict()))  # last: a record has its manifest
    return outcome


def nothing_to_build(code: str, cache_root: Path, device: str) -> Future[BuildOutcome]:
    """The outcome of a build skipped because ``code`` builds nothing (``intake.static_scan.builds_nothing``), done:
    its extension folder (empty) is where a build of it would be, so its judged worker holds it like any other."""
    extensions = cache_root.resolve() / build_key(code, device) / "extensions"  # as ``build`` names it
    extensions.mkdir(parents=True, exist_ok=True)
    done: Future[BuildOutcome] = Future()
    done.set_result(BuildOutcome("ok", 0.0, message="nothing to build: the code names no compiler, extension loader "
                                 "or native library, so no build sandbox ran", extension_dir=str(extensions)))
    return done


@contextmanager
def _only_builder(build_dir: Path) -> Iterator[None]:
    """Hold the build folder's lock (released by the kernel if this process dies): while it is held, no other
    evalkit build of this code runs, so a torch ``lock`` file found there is stale."""
    with open(build_dir / ".evalkit-build-lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_build(code: str, build_dir: Path, device: str, timeout_s: float, limits: Limits,
               init_inputs: list[Any] | None, freezer: BuildFreezer | None, arch: str | None,
               processes: ProcessTable | None, idle_s: float = BUILD_IDLE_S) -> BuildOutcome:
    start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="evalkit-build-"))
    code_path = workdir / "submission.py"
    code_path.write_text(code)
    env = {**build_env(build_dir, device, arch), "CUDA_VISIBLE_DEVICES": ""}
    with freezer.launching() if freezer else nullcontext():
        worker = UntrustedProcess(workdir, limits, env, freezer=freezer, processes=processes, idle_s=idle_s)
        if freezer:
            freezer.register(worker.pid, worker.marker, worker.cgroup)
    outcome = BuildOutcome(status="ok", seconds=0.0, extension_dir=str(build_dir / "extensions"))
    try:
        worker.send(protocol.setup_request("build", str(code_path), "cpu", limits.to_dict(), init_inputs=init_inputs))
        claim = worker.receive(timeout_s, "build")
        if isinstance(claim, protocol.ErrorClaim):  # the judge stage re-imports and reports it properly
            outcome.status = "compile_error" if claim.kind == "compile_error" else "import_failed"
            outcome.message = claim.message
    except WorkerGone as gone:
        outcome.status, outcome.message = gone.kind, str(gone)
    except protocol.ProtocolViolation as violation:
        outcome.status, outcome.message = "import_failed", f"protocol violation {violation}"
    finally:
        stdout, stderr = worker.close()
        if freezer:
            freezer.unregister(worker.pid)
        shutil.rmtree(workdir, ignore_errors=True)
    log = "\n".join(part for part in (outcome.message, stdout, stderr) if part)
    outcome.log_tail = log[-16000:]
    if outcome.status == "compile_error":
        outcome.errors = first_compiler_errors(log, build_dir / "extensions")
    outcome.seconds = time.monotonic() - start
    return outcome
