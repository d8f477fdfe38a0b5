"""Trusted side: one registry, shared by every evalkit process of the host, of who is timing and whose builds run.

Each ``BuildFreezer`` (``evalkit.sandbox.freezer``) keeps its own run's builds off its own judges' timings. This
module lets every freezer of the host see the others, so that builds are kept off *every* evalkit timing on the
host and two judges of different runs never time on one GPU at once. The registry is a folder
(``registry_folder``: ``$EVALKIT_TIMING_DIR``, else ``evalkit-timing`` under ``/dev/shm``, else under ``/tmp``)
of *tokens*: small files, each made fresh by one freezer and **live while that freezer holds a write lock on
it** (an open-file-description lock, ``F_OFD_SETLK``; each is locked before it takes its name). The kernel drops
the lock when its holder dies, so a dead process's token is dead at once, whatever is left on disk (old dead tokens
are removed by the next scan, staged ones left before their rename too).

- ``timing.<id>``: that freezer has a judge timing. Every other freezer freezes its builds while one is live.
- ``running.<id>``: that freezer's builds may run. A judge that starts timing waits (at most ``FREEZE_WAIT_S``)
  until no other freezer's is live, i.e. until every other run has frozen its builds.
- ``device.<gpu>.<ticket>.<id>``: that freezer wants, or holds, GPU ``<gpu>`` for a timing (``device_turn``).
- ``want.<gpu>.<n>.<id>``: that freezer has a timing waiting for, or holding, GPU ``<gpu>`` (``wanting``), from
  before it queues for the turn: no new *use* of the GPU starts while one is live (writer preference).
- ``use.<gpu>.<id>``: that judge has non-timed work on GPU ``<gpu>`` (``take_use``; ``gpu_gate.GpuGate``): a judge
  about to time waits for every other use to end, at most ``gpu_gate.USE_WAIT_S``.
- ``memory.<gpu>.<state>.<ticket>.<MiB>.<id>``: that judge waits for (``wait``), or holds (``held``), that much of
  GPU ``<gpu>``'s memory for one answer (``reserve_memory``): the judges of one GPU share its memory this way.

A token counts only if it is a regular file owned by root or by this process's user, and is write-locked: a write
lock needs the file open for writing, which a sandbox's Landlock rules deny outside its own folders, so a sandbox
can neither fake a token nor keep one alive (``docs/hostile.md``, Known limits, says what a sandbox can still do).
Everything is observed by polling (``POLL_S``); nothing here blocks on another process's lock, so a process that
hangs or dies can delay others by at most ``FREEZE_WAIT_S`` per timing (its GPU's turn, and a use of its GPU: until
its timing ends; a timing waits for another judge's use of its GPU at most ``gpu_gate.USE_WAIT_S``).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets
import stat
import struct
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

logger = logging.getLogger(__name__)

FOLDER_ENV = "EVALKIT_TIMING_DIR"  # the registry's folder; every evalkit process that should see another names the same
FOLDER_NAME = "evalkit-timing"
POLL_S = 0.05  # how often a freezer looks for other processes' timings
WAIT_POLL_S = 0.002  # how often a judge about to time looks again for builds still running elsewhere
STALE_S = 60.0  # a token nobody holds, older than this, is removed (its maker died)
PUBLISH_TRIES = 20
STAGED = "staged."  # a token's file while it is made, before it is locked: no scan lists this prefix
_FLOCK = "hhqqi4x"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (and padding)
_NAME_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


def registry_folder() -> Path:
    """The host's registry folder: ``$EVALKIT_TIMING_DIR``, else ``evalkit-timing`` in ``/dev/shm`` (or ``/tmp``)."""
    configured = os.environ.get(FOLDER_ENV, "").strip()
    if configured:
        return Path(configured)
    return Path("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp") / FOLDER_NAME


def open_registry(folder: Path | None = None) -> "HostTiming | None":
    """The registry in ``folder`` (default ``registry_folder()``), made if missing (sticky and open to every user,
    like ``/tmp``); None, with a warning, where it cannot be used safely: then a run keeps builds off its own
    timings only."""
    folder = folder or registry_folder()
    try:
        folder.mkdir(mode=0o700)
        os.chmod(folder, 0o1777)  # root's and other users' evalkit processes share it; each removes only its own
    except FileExistsError:
        pass
    except OSError as err:
        logger.warning("%s: cannot make the host-wide timing registry (%s); builds are kept off this run's own "
                       "timings only. Set %s to a folder this user can write.", folder, err, FOLDER_ENV)
        return None
    problem = _unsafe(folder)
    if problem:
        logger.warning("%s: %s, so it cannot serve as the host-wide timing registry; builds are kept off this run's "
                       "own timings only. Remove it, or set %s to another folder.", folder, problem, FOLDER_ENV)
        return None
    return HostTiming(folder)


def _unsafe(folder: Path) -> str:
    """Why ``folder`` may not hold the registry ("" if it may)."""
    try:
        info = folder.lstat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder (a symbolic link, or a file)"
    if info.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {info.st_uid}, neither root nor this user"
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        return "is writable by other users without the sticky bit (they could remove this process's files)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is not writable by this user"
    return ""


def _safe(device: str) -> str:
    """A GPU's name (a ``CUDA_VISIBLE_DEVICES`` entry) as a part of a token's name."""
    return "".join(c if c in _NAME_SAFE else "_" for c in device)


def _memory_ticket(name: str) -> tuple[str, int]:
    """A memory token's ticket (when it was asked for, then how much) and its MiB (``reserve_memory``); a name of
    another form (another version's) reserves nothing."""
    parts = name.split(".")
    if len(parts) != 6 or not parts[3].isdigit() or not parts[4].isdigit():
        return "", 0
    return f"{parts[3]}.{parts[4]}", int(parts[4])


class Token:
    """One live token: the file and the open description that write-locks it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    def release(self) -> None:
        """Remove the file, then drop the lock (so no scan finds it live and gone at once)."""
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)


class HostTiming:
    """One freezer's view of the host registry (thread-safe: it holds no state but its own tokens' names)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.id = f"{os.getpid()}-{secrets.token_hex(6)}"  # this freezer's, in the name of every token it makes
        self._trusted = {0, os.geteuid()}

    def announce(self, kind: str) -> Token | None:
        """A live ``<kind>.<id>`` token (``timing`` or ``running``); None, with a warning, if none could be made."""
        return self._publish(f"{kind}.{self.id}")

    def others_timing(self) -> bool:
        """Whether another freezer of the host (another process, or another run of this one) has a judge timing."""
        return bool(self._live("timing."))

    def wait_until_others_frozen(self, limit_s: float) -> bool:
        """Wait (at most ``limit_s``) until no other freezer's builds may run; False, with a warning, if some still
        might (a process that hangs, or is stopped, with its builds running)."""
        deadline = time.monotonic() + limit_s
        while True:
            running = self._live("running.")
            if not running:
                return True
            if time.monotonic() >= deadline:
                logger.warning("%s: builds of another evalkit process (%s) were not frozen within %.0f s; timing "
                               "anyway", self.folder, ", ".join(running), limit_s)
                return False
            time.sleep(WAIT_POLL_S)

    @contextmanager
    def wanting(self, device: str) -> Iterator[None]:
        """Say host-wide that a timing wants GPU ``device``, for the duration (around queueing for its turn and the
        timing itself): no new use of it starts meanwhile (``take_use``). Each call's token is its own."""
        token = self._publish(f"want.{_safe(device)}.{secrets.token_hex(4)}.{self.id}")
        try:
            yield
        finally:
            if token is not None:
                token.release()

    def timing_wanted(self, device: str) -> bool:
        """Whether another freezer has a timing that wants, or holds, GPU ``device`` (``wanting``)."""
        return bool(self._live(f"want.{_safe(device)}."))

    def take_use(self, device: str) -> Token | None:
        """A live ``use`` token of GPU ``device``, taken once no other freezer or judge wants the GPU for a timing.
        Announce, then look: a timing that announced first is seen here, and stood aside for (the token dropped until
        no timing wants the GPU); one that announces after sees this use and waits for it (``wait_for_uses``).
        None (warned by ``_publish``) where no token can be made: the use goes on unseen."""
        while True:
            token = self._publish(f"use.{_safe(device)}.{self.id}")
            if token is None or not self.timing_wanted(device):
                return token
            token.release()
            while self.timing_wanted(device):
                time.sleep(POLL_S)

    def wait_for_uses(self, device: str, limit_s: float) -> list[str]:
        """Wait (at most ``limit_s``) until no other judge of the host uses GPU ``device``; the uses still live
        when the bound passed (empty when none was)."""
        deadline = time.monotonic() + limit_s
        while True:
            uses = self._live(f"use.{_safe(device)}.")
            if not uses or time.monotonic() >= deadline:
                return uses
            time.sleep(WAIT_POLL_S)

    @contextmanager
    def device_turn(self, device: str) -> Iterator[None]:
        """Hold GPU ``device`` (a ``CUDA_VISIBLE_DEVICES`` entry) against every other freezer of the host: wait
        until none holds or is about to take it. Announce, then look: whoever finds an earlier ticket stands
        aside until it is gone; whoever finds only later ones waits for them to stand aside or finish."""
        prefix = f"device.{_safe(device)}."
        mine = f"{prefix}{time.time_ns():020d}.{self.id}"
        token = None
        while True:
            token = token or self._publish(mine)
            if token is None:
                break  # warned: time without the turn rather than never
            others = self._live(prefix)
            if not others:
                break
            if min(others) < mine:  # stand aside until every earlier ticket is gone, then announce again
                token.release()
                token = None
                while any(name < mine for name in self._live(prefix)):
                    time.sleep(POLL_S)
            else:
                time.sleep(POLL_S)  # only later tickets: each stands aside (it saw this one) or ends its timing
        try:
            yield
        finally:
            if token is not None:
                token.release()

    def reserve_memory(self, device: str, nbytes: int, budget_bytes: int, limit_s: float) -> Token | None:
        """A live token holding ``nbytes`` of GPU ``device``'s memory, taken once the reservations held by the other
        judges, those waiting since before this one and ``nbytes`` fit in ``budget_bytes`` (or none is held), or
        after ``limit_s`` anyway, warned. First come, first served: a large reservation is not starved by small
        ones; and two that both fit may both go."""
        prefix, mib = f"memory.{_safe(device)}.", -(-nbytes // 2**20)
        ticket = f"{time.time_ns():020d}.{mib}"
        waiting = self._publish(f"{prefix}wait.{ticket}.{self.id}")
        deadline = time.monotonic() + limit_s
        try:
            while True:
                held = [_memory_ticket(name)[1] for name in self._live(f"{prefix}held.")]
                ahead = [mib for other, mib in map(_memory_ticket, self._live(f"{prefix}wait.")) if other < ticket]
                if not held or sum(held) + sum(ahead) + mib <= budget_bytes // 2**20:
                    break
                if time.monotonic() >= deadline:
                    logger.warning("GPU %s: other judges held %d MiB of its memory for %.0f s; judging beside them",
                                   device, sum(held), limit_s)
                    break
                time.sleep(POLL_S)
            return self._publish(f"{prefix}held.{ticket}.{self.id}")
        finally:
            if waiting is not None:
                waiting.release()

    def _live(self, prefix: str) -> list[str]:
        """The names of the other freezers' live tokens starting with ``prefix``; removes old dead ones of its user,
        staged ones (``STAGED``) a maker left by dying before it renamed them among them. An unreadable folder
        counts as holding none: a broken registry never stops builds or judging."""
        try:
            every = os.listdir(self.folder)
        except OSError as err:
            logger.debug("%s: cannot be listed (%s): no other timing seen", self.folder, err)
            return []
        for name in every:
            if name.startswith(STAGED):
                self._is_live(self.folder / name)  # never counted; removed once old and unlocked
        names = sorted(name for name in every if name.startswith(prefix))
        return [name for name in names if not name.endswith(f".{self.id}") and self._is_live(self.folder / name)]

    def _is_live(self, path: Path) -> bool:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False  # gone, a link, or not ours to read
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid not in self._trusted:
                return False
            probe = struct.pack(_FLOCK, fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
            if struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))[0] == fcntl.F_WRLCK:
                return True
            if info.st_uid == os.geteuid() and time.time() - info.st_mtime > STALE_S:
                path.unlink(missing_ok=True)  # its maker died: nobody will lock it again
            return False
        except OSError:
            return False
        finally:
            os.close(fd)

    def _publish(self, name: str) -> Token | None:
        """Make ``name`` a live token: a fresh file, write-locked under a name no scan reads (``STAGED``), then renamed
        to ``name``, so no scan finds ``name`` before it is live (one that looked in that instant took a timing's
        want for none, and started a use beside it). Should the lock fail (a reader held one in that instant), the
        file is dropped and made anew, a few times at most."""
        path, staged = self.folder / name, self.folder / f"{STAGED}{name}"
        for _ in range(PUBLISH_TRIES):
            try:
                fd = os.open(staged, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                staged.unlink(missing_ok=True)  # an earlier one of this very name that its maker left
                continue
            except OSError as err:
                logger.warning("%s: cannot announce %s (%s): other evalkit processes will not see it", self.folder,
                               name.split(".")[0], err)
                return None
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
                os.rename(staged, path)  # replaces an earlier token of this very name that its maker left
                return Token(path, fd)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    logger.warning("%s: cannot lock %s (%s)", self.folder, name, err)
                staged.unlink(missing_ok=True)
                os.close(fd)
        logger.warning("%s: %s could not be announced (locked by another process each time)", self.folder, name)
        return None
