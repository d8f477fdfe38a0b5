"""No network for builds and workers: an answer that connects to a listener the test opens, at import (its build
and its judging) and in forward, reaches nothing, and the one that needed it is told why."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main

pytestmark = pytest.mark.slow

MODEL = '''
import socket

import torch
import torch.nn as nn


def call_home():
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
        s.sendall(b"{name}")


{at_import}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        {in_forward}
        return torch.relu(self.linear(x))
'''


class Listener:
    """A TCP listener on the loopback that records every connection it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.accepted.append(conn.recv(100))


def test_an_answer_reaches_no_listener_at_import_or_in_forward_and_is_told_why_when_it_needed_one(tmp_path: Path):
    listener = Listener()
    folder = tmp_path / "subs" / "net" / "linear_relu"
    folder.mkdir(parents=True)
    tries = "try:\n    call_home()\nexcept OSError:\n    pass"
    (folder / "tries_at_import.py").write_text(MODEL.format(port=listener.port, name="import", at_import=tries,
                                                            in_forward="pass"))
    (folder / "needs_it_in_forward.py").write_text(MODEL.format(port=listener.port, name="forward", at_import="",
                                                                in_forward="call_home()"))
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["score", str(tmp_path / "subs"), "--problems", str(FIXTURES / "judge_problems"),
                                       "--out", str(out), "--device", "cpu", "--baselines", "none", "--timeout", "20",
                                       "--cache-dir", str(tmp_path / "cache"), "--jobs", "2"], catch_exceptions=False)
    listener.server.close()
    assert result.exit_code == 0, result.output
    rows = {json.loads(line)["sample"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}
    assert listener.accepted == [], "a sandbox reached the listener"
    assert rows["tries_at_import"]["verdict"] == "correct", rows["tries_at_import"]["reason"]
    needed = rows["needs_it_in_forward"]
    assert needed["verdict"] == "runtime_error" and "no network" in needed["reason"], needed["reason"]


UNPRIVILEGED_CONNECT = """
import ctypes, os, socket, sys
from evalkit.sandbox.untrusted.mounts import open_the_way
open_the_way({uid}, [os.getcwd()])
os.setgroups([]); os.setgid({uid}); os.setuid({uid})  # an unprivileged judge's worker, from here on
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable, as a process never run as root is
from evalkit.sandbox.untrusted.privileges import leave_network
left = leave_network(unprivileged_too=True)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    reached = True
except OSError:
    reached = False
print(f"left={{left}} reached={{reached}} uid={{os.getuid()}}")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="plays an unprivileged judge's worker by changing uid: needs root")
def test_an_unprivileged_build_leaves_the_network_in_a_user_namespace_of_its_own(tmp_path):
    import subprocess
    import sys

    from evalkit.sandbox.identity import scrubbed_env

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    code = UNPRIVILEGED_CONNECT.format(uid=61999, port=listener.getsockname()[1])
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=scrubbed_env({}, tmp_path),
                            capture_output=True, text=True, timeout=120)
    listener.close()
    if not _unprivileged_user_namespaces():
        pytest.skip("this kernel lets no unprivileged user make a user namespace: Landlock's TCP rules only")
    assert result.stdout.strip() == "left=True reached=False uid=61999", result.stdout + result.stderr


def _unprivileged_user_namespaces() -> bool:
    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return ""
    return read("/proc/sys/user/max_user_namespaces") not in ("", "0") and \
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") != "1" and \
        read("/proc/sys/kernel/unprivileged_userns_clone") != "0"
