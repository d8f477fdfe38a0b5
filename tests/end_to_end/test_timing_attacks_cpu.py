"""Attacks on the judge's clock and inputs that a CPU reproduces, scored end to end: none earns a speedup its work
does not."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from feedback_checks import check_feedback

pytestmark = pytest.mark.slow

# An attack that works earns 100x or more here (the seed recovery read 319x on a dense layer; an answer that stalls the
# pings has its calls' whole time subtracted). An honest answer's speedup moves with the box's load: its window's two
# sides on a loaded 2-core machine read 0.4x to 2.5x (busy loops beside it) and 4.0x to 5.7x (a full test run and a
# benchmark beside it), so an attack fails only above what load alone gives.
UNEARNED = 10.0


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("timing-attacks") / "report"
    args = ["score", str(FIXTURES / "timing_attacks"), "--problems", str(FIXTURES / "timing_attack_problems"),
            "--out", str(out), "--device", "cpu", "--baselines", "eager", "--timeout", "60", "--timing-budget", "2",
            "--warmup", "1", "--seed", "5", "--memory-gib", "4", "--cache-dir", str(out.parent / "cache"),
            "--jobs", "2"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {json.loads(line)["sample"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}


def test_every_rows_feedback_is_one_a_model_can_act_on(rows):
    for row in rows.values():
        check_feedback(row)


def test_the_seed_recovery_attack_predicts_no_timed_call(rows):
    # Each call's inputs here carry their whole seed, and the calibration pings' leftovers are read at load: under
    # an affine schedule this answer looked up every timed call's output (319x on a dense layer). Seeds drawn
    # independently per call, and pings that move zeros, leave it nothing to predict: it computes, like its twin.
    attack, honest = rows["recovers_seeds"], rows["honest"]
    assert attack["verdict"] == honest["verdict"] == "correct", (attack["reason"], honest["reason"])
    assert attack["speedup_vs_eager"] < UNEARNED, attack["reason"]
    low, high = attack["speedup_vs_eager_ci"]
    assert low <= attack["speedup_vs_eager"] <= high


def test_work_left_running_after_the_reply_is_caught_or_timed(rows):
    # Its output is filled by a thread 200 ms after the reply: frozen with the worker before the judge reads it, so
    # what the judge reads is unfinished.
    row = rows["leaves_work_running"]
    assert row["verdict"] == "incorrect", row["reason"]
    assert row["speedup_vs_eager"] is None


def test_an_answer_that_tells_pings_from_calls_meets_no_ping(rows):
    # It stalls 50 ms on zeros, the pings' inputs; no ping reaches its forward, so its calls are its honest twin's.
    # Had the stall been subtracted from its calls, its speedup (from one window with its baseline, which a loaded box
    # slows alike) would be 100x or more. Its time is not compared with its twin's: two windows apart on a loaded
    # 2-core box, the twin read 63 ms a call against its 4 ms once (CI beside a benchmark).
    attack, honest = rows["tells_pings_from_calls"], rows["honest"]
    assert attack["verdict"] == honest["verdict"] == "correct", (attack["reason"], honest["reason"])
    assert attack["speedup_vs_eager"] < UNEARNED, attack["reason"]
