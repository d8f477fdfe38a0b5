"""The repository holds code, not archives: no tracked file is over ``LIMIT_BYTES`` unless ``.ci/large-files.txt``
lists it (each entry with the reason it must be in git), and that list names only files still tracked and large.
And it speaks only of itself: no tracked file names the folder of the checkout it is tracked in (a log or a record
copied from a run quotes it easily). Run with the rest of the suite by ``.ci/run``, so CI refuses a large file that
slips in, and every checkout's own test run a path of its machine."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from tracked_files import files_naming, git, is_git_checkout, tracked_sizes

LIMIT_BYTES = 512 * 1024
ALLOW_LIST = ROOT / ".ci" / "large-files.txt"


def allowed(allow_list: Path) -> set[str]:
    """The paths the allow-list names: one a line, before any ``#`` (a comment saying why it is there)."""
    if not allow_list.is_file():
        return set()
    return {entry for line in allow_list.read_text().splitlines() if (entry := line.split("#", 1)[0].strip())}


def oversized(sizes: dict[str, int], allow: set[str], limit: int = LIMIT_BYTES) -> tuple[list[str], list[str]]:
    """The tracked files over ``limit`` that ``allow`` does not name, and the entries of ``allow`` that name no
    tracked file over it (stale: a removed or shrunk file, or a typo)."""
    large = {path for path, size in sizes.items() if size > limit}
    return sorted(large - allow), sorted(allow - large)


@pytest.mark.skipif(not is_git_checkout(ROOT), reason="not a git checkout: no tracked files to check")
def test_no_tracked_file_is_over_512_kib_unless_the_allow_list_names_it() -> None:
    sizes = tracked_sizes(ROOT)
    unlisted, stale = oversized(sizes, allowed(ALLOW_LIST))
    assert not unlisted, (f"tracked files over {LIMIT_BYTES // 1024} KiB: "
                          f"{[(path, sizes[path]) for path in unlisted]}; keep them out of git (a GPU record names an "
                          f"archive by its sha256: docs/gpu-runs/README.md), or list them in "
                          f"{ALLOW_LIST.relative_to(ROOT)} saying why they must be tracked")
    assert not stale, f"{ALLOW_LIST.relative_to(ROOT)} lists files that are not tracked or not over the limit: {stale}"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_check_finds_a_large_staged_file_and_the_allow_list_admits_it(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "small.txt").write_text("code\n")
    (tmp_path / "rows.tar.gz").write_bytes(b"\0" * (LIMIT_BYTES + 1))
    (tmp_path / "at_the_limit.bin").write_bytes(b"\0" * LIMIT_BYTES)
    git(tmp_path, "add", "small.txt", "rows.tar.gz", "at_the_limit.bin")
    (tmp_path / "rows.tar.gz").unlink()  # the index is what gets committed, whatever the work tree holds now
    sizes = tracked_sizes(tmp_path)
    assert sizes == {"small.txt": 5, "rows.tar.gz": LIMIT_BYTES + 1, "at_the_limit.bin": LIMIT_BYTES}
    assert oversized(sizes, set()) == (["rows.tar.gz"], [])
    allow_list = tmp_path / "large-files.txt"
    allow_list.write_text("# path  # why\nrows.tar.gz  # a fixture no test can make\nsmall.txt\n")
    assert oversized(sizes, allowed(allow_list)) == ([], ["small.txt"])



@pytest.mark.skipif(not is_git_checkout(ROOT), reason="not a git checkout: no tracked files to check")
def test_no_tracked_file_names_the_folder_of_this_checkout() -> None:
    naming = files_naming(ROOT, f"{ROOT.resolve()}/")
    assert not naming, (f"tracked files name this checkout's folder, a path of this machine: {naming}; name the "
                        f"file as the project does (relative to the repository's root), or drop the line")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_check_finds_a_staged_file_naming_the_checkouts_folder(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "log.txt").write_text(f"problems: 5 from {tmp_path.resolve()}/problems\n")
    (tmp_path / "notes.txt").write_text("problems: 5 from problems/\n")
    git(tmp_path, "add", "log.txt", "notes.txt")
    (tmp_path / "log.txt").unlink()  # the index is what gets committed, whatever the work tree holds now
    assert files_naming(tmp_path, f"{tmp_path.resolve()}/") == ["log.txt"]
