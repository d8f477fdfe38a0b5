"""Trusted side: torch's extension header, precompiled once per build cache for every answer's build.

Every ``load_inline`` answer compiles ``#include <torch/extension.h>`` first, and that header is most of a C++
answer's build (on a CPU, 23.7 s of a trivial extension's build; 9.3 s with it precompiled: ``docs/judge.md``,
Builds). evalkit compiles it once per torch, compiler and device, beside the first builds (none waits for it: they
compile the header themselves until it is there), as its own user and never from answer code, into
``<builds>/torch-headers/<key>/torch/extension.h.gch/`` (or ``$EVALKIT_TORCH_HEADERS/<key>/...``; a folder: one precompiled header per set of extra flags,
of which GCC takes the first whose flags match the answer's, and ignores the rest). Builds and judged workers see
the folder through ``CPATH``; an answer whose flags match none compiles the header itself, as before, so the
result never depends on it, only the time.

The folder is read-only to every sandbox (Landlock; another uid as root): a precompiled header is code compiled
into every later answer. It is never rewritten once made (a build may be reading it); another torch or compiler
gets another key. A compile that takes it lists only the answer's own files as dependencies, so cached builds
never depend on it. Torch's own ``use_pch`` is not used: it writes the header into torch's include folder, shared
by everything on the machine, and every later build that does not use it fails trying to remove it.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.utils import cpp_extension

from evalkit.sandbox.freezer import BuildFreezer

logger = logging.getLogger(__name__)

HEADERS_FOLDER = "torch-headers"  # beside the builds' folders in the build cache (their keys are hex)
HEADERS_ENV = "EVALKIT_TORCH_HEADERS"  # another place for them, shared by several caches
HEADER = "torch/extension.h"
# The extra flags answers give most (extra_cflags); each variant costs one compile (~35 s of a core, 1.4 GiB)
# and ~0.8 GB of disk, once per build cache.
FLAG_VARIANTS: dict[str, tuple[str, ...]] = {"plain": (), "O3": ("-O3",)}
HEADER_BUILD_TIMEOUT_S = 900.0
UNUSABLE = "unusable"  # a file in the key's folder saying why no header was precompiled there


def headers_folder(builds: Path, device: str) -> Path | None:
    """The folder ``CPATH`` names for builds of ``device`` into ``builds`` (created, empty until ``ensure``), or
    None where this torch or compiler cannot precompile its header."""
    cflags = _cflags(device)
    compiler = _compiler_version()
    if cflags is None or compiler is None:
        return None
    material = "\0".join([torch.__version__, compiler, *cflags])
    folder = headers_root(builds) / hashlib.sha256(material.encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)  # before any worker starts: a bind of it shows what comes later
    return folder


def headers_root(builds: Path) -> Path:
    """``$EVALKIT_TORCH_HEADERS`` (one folder shared by several build caches, e.g. a test session's), else the
    ``torch-headers`` folder of the build cache ``builds``."""
    shared = os.environ.get(HEADERS_ENV)
    return Path(shared).resolve() if shared else builds.resolve() / HEADERS_FOLDER


def header_env(builds: Path, device: str) -> dict[str, str]:
    """``CPATH`` for a build or judged worker of ``device`` reading builds from ``builds``; {} without one."""
    folder = headers_folder(builds, device)
    return {"CPATH": str(folder)} if folder is not None else {}


def ensure(builds: Path, device: str) -> Path | None:
    """The precompiled header's folder for ``device``, compiled now if it is not yet (one process at a time, the
    others waiting); None where it cannot be made. Never raises: a build without it only takes longer."""
    folder = headers_folder(builds, device)
    if folder is None:
        return None
    lock = open(folder.parent / f"{folder.name}.lock", "w")  # noqa: SIM115 - let go by ``_make_and_release``
    fcntl.flock(lock, fcntl.LOCK_EX)
    _make_and_release(folder, device, lock, None, None)
    return None if (folder / UNUSABLE).exists() else folder


def start(builds: Path, device: str, marker: str | None = None, freezer: BuildFreezer | None = None
          ) -> threading.Thread | None:
    """Begin precompiling the header for ``device`` in the background when it is not made yet and nobody (no
    thread or process) is making it; the thread making it, else None. The builds that start meanwhile compile
    torch's header themselves, as they would without it (the same extension, only slower), and never wait: one
    answer alone would otherwise wait for the header's ~35 s of compile before its own build. Later builds take
    it. ``marker`` ("VARIABLE=value"): what the compiles carry so the run's clean-up ends them with its sandboxes
    (the thread is a daemon: a run that ends first leaves only a scratch folder, removed by the next maker);
    ``freezer``: the run's, which keeps them off every timing as it keeps the builds."""
    folder = headers_folder(builds, device)
    if folder is None or (folder / UNUSABLE).exists() or _precompiled(folder).exists():
        return None
    lock = open(folder.parent / f"{folder.name}.lock", "w")  # noqa: SIM115 - held by the thread until it is done
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    thread = threading.Thread(target=_make_and_release, args=(folder, device, lock, marker, freezer), daemon=True,
                              name="evalkit-torch-header")
    thread.start()
    return thread


def _make_and_release(folder: Path, device: str, lock: Any, marker: str | None, freezer: BuildFreezer | None
                      ) -> None:
    try:
        for stale in folder.glob(".building-*"):  # a maker that ended midway: nobody else holds the lock
            shutil.rmtree(stale, ignore_errors=True)
        if not _precompiled(folder).exists() and not (folder / UNUSABLE).exists():
            _precompile(folder, list(_cflags(device) or ()), marker, freezer)
    except Exception:  # noqa: BLE001 - never a build's failure: builds go on without the header
        logger.exception("precompiling torch's extension header failed: builds compile it each time")
    finally:
        lock.close()


@functools.lru_cache(maxsize=None)
def _cflags(device: str) -> tuple[str, ...] | None:
    found = torch_cflags(device)
    return tuple(found) if found is not None else None


def torch_cflags(device: str) -> list[str] | None:
    """The flags torch compiles an extension's C++ file with on ``device`` (its name left out), read from the
    ninja file torch writes: the precompiled header is only used by compiles with the same flags."""
    with tempfile.TemporaryDirectory(prefix="evalkit-cflags-") as scratch:
        try:
            cpp_extension._write_ninja_file_to_build_library(  # noqa: SLF001 - the flags exactly as torch's
                path=os.path.join(scratch, "build.ninja"), name="evalkit_headers", sources=["main.cpp"],
                extra_cflags=[], extra_cuda_cflags=[], extra_sycl_cflags=[], extra_ldflags=[],
                extra_include_paths=[], with_cuda=device == "cuda", with_sycl=False, is_standalone=False)
            text = Path(scratch, "build.ninja").read_text()
        except Exception as err:  # noqa: BLE001 - another torch: builds go on without a precompiled header
            logger.info("torch's extension flags could not be read (%s): no precompiled header", err)
            return None
    line = next((line for line in text.splitlines() if line.startswith("cflags = ")), None)
    if line is None:
        return None
    return [flag for flag in shlex.split(line[len("cflags = "):]) if not flag.startswith("-DTORCH_EXTENSION_NAME=")]


def stray_torch_header(include: Path | None = None) -> Path | None:
    """torch's own precompiled header in torch's include folder (``include``: torch's; ``load_inline(use_pch=True)``
    run by a user who may write there), or None: while it is there, every sandboxed build fails removing it."""
    stray = _precompiled(include or Path(cpp_extension.include_paths("cpu")[0]))
    return stray if stray.exists() else None


def _precompiled(folder: Path) -> Path:
    return folder / f"{HEADER}.gch"


@functools.lru_cache(maxsize=None)  # facts of this process's torch and compiler, read once
def _compiler_version() -> str | None:
    compiler = cpp_extension.get_cxx_compiler()
    try:
        found = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if found.returncode != 0 or not cpp_extension.check_compiler_is_gcc(compiler):
        return None  # precompiled headers are GCC's (clang's take other flags)
    return f"{compiler}\0{found.stdout}"


def _precompile(folder: Path, cflags: list[str], marker: str | None = None, freezer: BuildFreezer | None = None
                ) -> None:
    """Compile every flag variant into a scratch folder beside ``folder``, check that a compile with the plain
    flags takes it, and move it in place readable by all; else note why in ``UNUSABLE``."""
    header = Path(cpp_extension.include_paths("cpu")[0]) / HEADER
    scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=folder))
    target = _precompiled(scratch)
    target.mkdir(parents=True)
    # The header beside it: a compile that takes the precompiled one still opens the header to list it among the
    # object's dependencies (``-MMD``), and one that takes none reads it from here.
    (target.parent / Path(HEADER).name).symlink_to(header)
    compiler = cpp_extension.get_cxx_compiler()
    try:
        compiles = [_launch([compiler, "-x", "c++-header", str(header), "-o", str(target / f"{name}.gch"),
                             *cflags, *extra], marker, freezer) for name, extra in FLAG_VARIANTS.items()]
        failed = [out for out in (_finished(c, freezer) for c in compiles) if out is not None]
        timed_out = any(out.startswith("the compiler ran past") for out in failed)
        if any(c.returncode < 0 for c in compiles) and not timed_out:  # ended by the run's clean-up: no verdict
            logger.info("precompiling torch's extension header was stopped: the next run that builds makes it")
            return
        why = failed[0] if failed else _unused_reason(scratch, cflags)
        if why:
            (folder / UNUSABLE).write_text(why + "\n")
            logger.warning("torch's extension header could not be precompiled (%s): builds compile it each time",
                           why.splitlines()[0][:300])
            return
        for path in [scratch, *scratch.rglob("*")]:
            if not path.is_symlink():  # the header's link: torch's own file is left as it is
                path.chmod(0o755 if path.is_dir() else 0o644)
        (scratch / "torch").rename(folder / "torch")
        logger.info("torch's extension header precompiled into %s", folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _launch(command: list[str], marker: str | None, freezer: BuildFreezer | None) -> subprocess.Popen:
    """Start one compile of the header: marked as the run's sandboxes are, and held off timings as builds are."""
    env = {**os.environ, **dict([marker.split("=", 1)])} if marker else None
    with freezer.launching() if freezer else nullcontext():
        compile_ = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=freezer is not None)
        if freezer is not None and marker:
            freezer.register(compile_.pid, marker)
    return compile_


def _finished(compile_: subprocess.Popen, freezer: BuildFreezer | None = None) -> str | None:
    """None once ``compile_`` succeeded, else what it printed."""
    try:
        out, _ = compile_.communicate(timeout=HEADER_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        compile_.kill()
        compile_.communicate()
        return f"the compiler ran past {HEADER_BUILD_TIMEOUT_S:.0f} s"
    finally:
        if freezer is not None:
            freezer.unregister(compile_.pid)  # (a no-op for one never registered)
    return None if compile_.returncode == 0 else (out or b"").decode(errors="replace")[-2000:] or "compiler failed"


def _unused_reason(scratch: Path, cflags: list[str]) -> str:
    """Why a compile with ``cflags`` through ``CPATH=scratch`` would not take the header ('' when it would)."""
    probe = scratch / "probe.cpp"
    probe.write_text(f"#include <{HEADER}>\n")
    try:
        found = subprocess.run([cpp_extension.get_cxx_compiler(), "-H", "-MMD", "-MF", str(scratch / "probe.d"),
                                *cflags, "-c", str(probe), "-o", os.devnull],
                               env={**os.environ, "CPATH": str(scratch)}, capture_output=True, text=True,
                               timeout=HEADER_BUILD_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as err:
        return f"the check compile failed ({err})"
    if found.returncode == 0 and any(line.startswith("! ") for line in found.stderr.splitlines()):  # -H: "!" marks a precompiled header used
        return ""
    return f"a compile with torch's flags did not take it (exit {found.returncode}): {found.stderr[-500:]}"
