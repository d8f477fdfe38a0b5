"""Helpers for tests that start `evalkit serve` as a process and speak HTTP to it as a client would (the standard
library's client: no test dependency beyond the serve extra)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import FIXTURES, ROOT

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures" / "linear_relu"
REFERENCE = (PROBLEMS / "linear_relu" / "reference.py").read_text()
ZEROS_ANSWER = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
"""


def answer(name: str) -> str:
    return next(ANSWERS.glob(f"{name}.*")).read_text()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def call(url: str, body: Any = None, raw: bytes | None = None, timeout: float = 300, method: str | None = None,
         token: str | None = None) -> tuple[int, Any]:
    """(status, JSON answer) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def start_server(args: list[str], log: Path, cwd: Path = ROOT, env: dict[str, str | None] | None = None,
                 token: str | None = None) -> tuple[str, subprocess.Popen]:
    """`evalkit ARGS serve ...` on a free port, its output in ``log``, once it answers its health check."""
    port = free_port()
    command = [sys.executable, "-m", "evalkit", *args, "--port", str(port)]
    environment = {key: value for key, value in {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}.items()
                   if value is not None}  # a variable given as None is left out
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=environment)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if call(f"{base}/v1/health", timeout=2, token=token)[0] == 200:
                break
        except OSError:
            time.sleep(0.5)
    assert proc.poll() is None, log.read_text()
    return base, proc


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def wait_for_batch(base: str, batch_id: str, timeout_s: float = 300, token: str | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = call(f"{base}/v1/batch/{batch_id}", token=token)[1]
        if state["done"]:
            return state
        time.sleep(0.5)
    raise AssertionError(f"batch {batch_id} not done in {timeout_s} s: {state}")
