"""The launcher's environment for a worker: scrubbed, and able to import evalkit from a plain checkout."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import evalkit
from evalkit.sandbox.identity import reachable_by, scrubbed_env


def test_the_worker_can_import_this_evalkit_without_it_being_installed(tmp_path):
    # On a GPU machine evalkit often runs from a checkout; the worker then finds it only via PYTHONPATH.
    env = scrubbed_env({}, tmp_path)
    package = Path(env["PYTHONPATH"]) / "evalkit" / "__init__.py"
    assert package.resolve() == Path(evalkit.__file__).resolve()


def test_secrets_do_not_reach_the_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_TEST_TOKEN", "hunter2")
    env = scrubbed_env({"EXTRA": "1"}, tmp_path)
    assert "EVALKIT_TEST_TOKEN" not in env
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["EXTRA"] == "1"
    assert env.get("PATH") == os.environ.get("PATH")


def test_a_folder_under_a_closed_parent_is_unreachable_for_the_sandbox_user(tmp_path):
    closed = tmp_path / "closed"
    inner = closed / "cache" / "extensions"
    inner.mkdir(parents=True)
    closed.chmod(0o700)
    tmp_path.chmod(0o755)
    other = (os.getuid() + 12345, os.getgid() + 12345)
    assert not reachable_by(inner, other)
    closed.chmod(0o711)
    assert reachable_by(inner, other) == all(p.stat().st_mode & 0o001 for p in inner.resolve().parents)
    assert reachable_by(inner, (os.getuid(), os.getgid()))


def test_folders_not_made_yet_do_not_close_the_way():
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp and / are open to every user
    try:
        base.chmod(0o755)
        other = (os.getuid() + 12345, os.getgid() + 12345)
        assert reachable_by(base / "cache" / "builds" / "abc", other)
        base.chmod(0o700)
        assert not reachable_by(base / "cache" / "builds" / "abc", other)
    finally:
        base.chmod(0o700)
        shutil.rmtree(base)
