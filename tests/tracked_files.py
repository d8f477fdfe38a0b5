"""What git tracks in a checkout, for the tests that keep the repository a repository of code
(``tests/test_repository.py``, ``tests/test_docs.py``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)} in {root}: {done.stderr.strip()}"
    return done.stdout


def is_git_checkout(root: Path) -> bool:
    return shutil.which("git") is not None and (root / ".git").exists()


def tracked_sizes(root: Path) -> dict[str, int]:
    """Every path git tracks in ``root`` (its index: a file staged but not committed counts) and its blob's bytes."""
    entries = [line.split("\t", 1) for line in _git(root, "ls-files", "-s", "-z").split("\0") if line]
    blobs = {path: meta.split()[1] for meta, path in entries}
    if not blobs:
        return {}
    sizes = _git(root, "cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="\n".join(blobs.values()) + "\n")
    size_of = dict(line.split() for line in sizes.splitlines())
    return {path: int(size_of[blob]) for path, blob in blobs.items()}


def git(root: Path, *args: str) -> str:
    """``git -C root ARGS``'s output; a failure fails the test, with git's message."""
    return _git(root, *args)


def files_naming(root: Path, text: str) -> list[str]:
    """The files git tracks in ``root`` (its index: what a commit would hold) whose text holds ``text``; binary
    files are not read."""
    done = subprocess.run(["git", "-C", str(root), "grep", "--cached", "-l", "-I", "-F", "-e", text],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), f"git grep in {root}: {done.stderr.strip()}"  # 1: no file holds it
    return sorted(done.stdout.splitlines())
