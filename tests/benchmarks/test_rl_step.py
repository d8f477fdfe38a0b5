"""`benchmarks/rl_step.py` at small scale on CPU: a GRPO-like step against `evalkit serve` with references sent as
text, twice, every reward back, and the figures it prints (time to first reward, rewards per minute, the server's
memory across steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

# `evalkit serve` in a subprocess judging two GRPO steps, with cold builds in its own cache.
pytestmark = pytest.mark.slow

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


def test_two_steps_bring_back_every_reward_and_print_the_figures(tmp_path: Path) -> None:
    out = tmp_path / "rl.json"
    done = subprocess.run([sys.executable, "benchmarks/rl_step.py", "--device", "cpu",
                           "--problems", str(FIXTURES / "judge_problems"),
                           "--answers", str(FIXTURES / "judge_submissions" / "fixtures"), "--steps", "2",
                           "--group", "3", "--extra=--timing-trials 3 --baselines eager", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(out.read_text())
    assert figures["problems"] == 2 and [s["rewards"] for s in figures["steps"]] == [6, 6]
    assert all(s["first_reward_s"] is not None and s["server_rss_mib"] > 0 for s in figures["steps"])
    assert figures["steps"][0]["verdicts"] == figures["steps"][1]["verdicts"], "the same answers, the same verdicts"
    answers = figures["steps"][-1]["answers"]
    assert len(answers) == 6 and all(a["stage_seconds"] for a in answers.values() if a["verdict"] != "no_code")
    assert all(a["requests"] and a["stopped_by"] for a in answers.values() if a["verdict"] == "correct")
    assert "step 2:" in done.stdout and "server memory from the first step to the last" in done.stdout
