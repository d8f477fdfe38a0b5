"""Every known way to fool a kernel benchmark that a CPU can reproduce: each is caught, and faults
stay inside the sandbox (the next submission is judged correctly, nothing outside changed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from feedback_checks import check_feedback

# 32 hostile answers in one run (a fork bomb, background processes, huge replies): minutes; a memory hog in one of its
# own.
pytestmark = pytest.mark.slow

CANARIES = [Path("/tmp/evalkit-escape-canary.txt"), Path("/evalkit-escape-canary.txt")]

WRONG_ANSWERS = ["predicts_inputs", "empty_output", "cache_by_pointer", "first_call_only",
                 "honest_then_cheat", "patches_comparisons", "gc_walk", "background_thread",
                 "tensor_subclass", "deferred_fill", "predicts_rechecks"]
# On CPU no extension is built by these Python-only answers: that flag is expected, no other.
PYTHON_ONLY = {"no_custom_kernel"}


def _leftover_daemons() -> list[int]:
    """`sleep 300` processes started inside a sandbox (background_process.py) that are still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (b"EVALKIT_SANDBOX_ID=" in (entry / "environ").read_bytes()
                        and (entry / "cmdline").read_bytes() == b"sleep\x00300\x00"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _scored(submissions: Path, out: Path, timeout_s: int, memory_gib: int) -> dict[str, dict]:
    args = ["score", str(submissions), "--problems", str(FIXTURES / "judge_problems"), "--out", str(out),
            "--device", "cpu", "--baselines", "eager", "--timeout", str(timeout_s), "--timing-trials", "5",
            "--warmup", "1", "--seed", "7", "--memory-gib", str(memory_gib), "--cache-dir", str(out.parent / "cache"),
            "--jobs", "2"]
    os.environ["EVALKIT_TEST_SECRET"] = "hunter2"
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        del os.environ["EVALKIT_TEST_SECRET"]
    assert result.exit_code == 0, result.output
    return {json.loads(line)["sample"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    for canary in CANARIES:
        canary.unlink(missing_ok=True)
    return _scored(FIXTURES / "hostile_submissions", tmp_path_factory.mktemp("hostile") / "report", 20, 3)


@pytest.fixture(scope="module")
def hog_row(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The memory hog alone, its limit 1 GiB and its stages' 120 s: on a loaded box its pages come slowly (about
    120 MB/s on this 2-core machine beside another process taking memory), and at 3 GiB and 20 s it reached the time
    limit first. At 1 GiB it reaches its limit in seconds; only a hog left to thrash there reaches 120 s."""
    return _scored(FIXTURES / "memory_hog_submissions", tmp_path_factory.mktemp("hog") / "report", 120, 1)[
        "host_memory_hog"]


@pytest.mark.parametrize("sample", WRONG_ANSWERS)
def test_wrong_answers_do_not_pass(rows, sample):
    assert rows[sample]["verdict"] == "incorrect", rows[sample]["reason"]


def test_every_hostile_answer_gets_feedback_a_model_can_act_on(rows):
    for row in rows.values():
        check_feedback(row)
    caught_late = rows["honest_then_cheat"]["feedback"]  # wrong in a timed call: which one, and the values read
    assert "in timed request" in caught_late and "Worst elements, expected vs got" in caught_late, caught_late


def test_a_cheat_after_the_correctness_trials_is_caught_during_timing(rows):
    assert "during timing" in rows["honest_then_cheat"]["reason"]


def test_reduced_precision_passes_within_tolerance_but_is_flagged(rows):
    row = rows["reduced_precision"]
    assert row["verdict"] == "correct", row["reason"]
    assert "reduced_precision" in row["flags"]
    assert row["correctness"]["precision_class"] in ("tf32_or_half", "lower")
    assert "reduced_precision" not in rows["zz_correct_after_all"]["flags"]


def test_exiting_cleanly_never_passes(rows):
    assert rows["exit_at_import"]["verdict"] == "runtime_error"
    assert "exit(0)" in rows["exit_at_import"]["reason"]
    assert rows["exit_in_forward"]["verdict"] == "crash"
    assert "without replying" in rows["exit_in_forward"]["reason"]


@pytest.mark.parametrize("sample", ["patches_timer", "slows_pings_and_lies"])
def test_a_lying_clock_or_slowed_overhead_probe_gives_no_speedup(rows, sample):
    row = rows[sample]
    assert row["verdict"] == "correct", row["reason"]
    assert row["timing"]["claimed_median_ms"] < 0.01  # what the worker said, kept as its claim
    assert row["timing"]["median_ms"] > 25  # the judge's own clock saw the 30 ms sleep
    # calibrated before the submission could slow the probe: no more than the 5 ms a ping it slowed would add over
    # the baseline's, whose worker runs no submission code (an absolute bound failed on a loaded machine)
    assert row["timing"]["overhead_ms"] < row["baselines"]["eager"]["overhead_ms"] + 5.0


def test_deferred_fills_and_predicted_rechecks_are_caught_during_timing(rows):
    assert "during timing" in rows["deferred_fill"]["reason"]
    assert "during timing" in rows["predicts_rechecks"]["reason"]


def test_a_reply_sent_ahead_of_its_call_is_a_protocol_violation(rows):
    row = rows["replies_ahead"]
    assert row["verdict"] == "runtime_error", row["reason"]
    assert "nonce" in row["reason"]


def test_a_build_spinning_every_core_does_not_bend_the_timings(rows):
    # aab_spins_while_building burns every core while later answers and the eager baseline are timed:
    # builds are frozen while the judge times, so an honest answer (the reference's own computation) still reads
    # about 1x eager. Its median over 5 requests of 0.1 ms is the machine's to move (it read 3.06x once on a loaded
    # CI box), so the judge's own 95% interval is what must not exclude 1x by more than a factor of 2.
    assert rows["aab_spins_while_building"]["verdict"] == "correct"
    honest = rows["zz_correct_after_all"]
    low, high = honest["speedup_vs_eager_ci"]
    assert low < 2 and high > 0.5, (honest["speedup_vs_eager"], honest["timing"])


def test_a_fork_bomb_is_stopped(rows):
    assert rows["fork_bomb"]["verdict"] == "crash", rows["fork_bomb"]["reason"]
    assert "killed" in rows["fork_bomb"]["reason"]  # by the process count or the memory it adds up to


def test_a_memory_hog_is_stopped_for_its_memory(hog_row):
    assert hog_row["verdict"] in ("crash", "runtime_error"), hog_row["reason"]  # never left to thrash until its limit
    assert "memory" in hog_row["reason"].lower(), hog_row["reason"]


def test_printing_a_lot_is_bounded(rows):
    row = rows["prints_a_lot"]
    assert row["verdict"] == "correct", row["reason"]
    assert len(json.dumps(row)) < 200_000


def test_nothing_outlives_or_escapes_the_sandbox(rows):
    assert rows["background_process"]["verdict"] == "correct"
    assert rows["writes_outside"]["verdict"] == "correct"
    assert _leftover_daemons() == []
    assert not any(c.exists() for c in CANARIES)


def test_the_judges_environment_does_not_leak_into_the_sandbox(rows):
    assert rows["reads_secrets"]["verdict"] == "correct", rows["reads_secrets"]["reason"]


def test_the_submission_after_every_attack_is_judged_correctly(rows):
    row = rows["zz_correct_after_all"]
    assert row["verdict"] == "correct", row["reason"]
    assert row["correctness"]["max_abs_err"] < 1e-5
    assert set(row["flags"]) <= PYTHON_ONLY


@pytest.mark.parametrize("sample", ["rewrites_harness_at_import", "rewrites_harness_bad_types",
                                    "rewrites_harness_deep_nesting", "rewrites_harness_huge_reply"])
def test_a_rewritten_harness_is_a_protocol_violation_not_a_judge_crash(rows, sample):
    row = rows[sample]
    assert row["verdict"] == "runtime_error", row["reason"]
    assert "protocol violation" in row["reason"]



def test_a_lone_surrogate_in_an_answers_error_is_its_row_not_the_end_of_the_run(rows):
    row = rows["raises_lone_surrogate"]
    assert row["verdict"] == "runtime_error", row["reason"]
    assert "bad \ufffd output \ufffd" in row["reason"]
    assert rows["zz_correct_after_all"]["verdict"] == "correct"


def test_an_answer_cannot_change_the_judges_or_another_sandboxs_limits(rows):
    import resource

    row = rows["limits_everyone"]
    assert row["verdict"] == "correct", row["reason"]
    assert resource.getrlimit(resource.RLIMIT_CPU)[0] != 1, "the judge's CPU limit was changed"
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 8
    assert rows["zz_correct_after_all"]["verdict"] == "correct", "the next answers are judged as before"


def test_a_sandbox_that_fills_its_folders_with_files_is_stopped(rows):
    row = rows["many_files"]
    assert row["verdict"] == "crash", row["reason"]
    assert "file(s), over the limit" in row["reason"]


def test_a_file_named_like_an_extension_is_no_custom_kernel(rows):
    # Issue 42, F: on a CPU, "custom kernel" meant "some *.so in the extension folder": plain PyTorch that wrote a
    # four-byte x.so at import was judged with no flag, where its twin was flagged. Now only native code the answer
    # built and called counts.
    row = rows["fake_extension_file"]
    assert row["verdict"] == "correct", row["reason"]
    assert "no_custom_kernel" in row["flags"] and row["correctness"]["kernels"] == []
    assert "no_custom_kernel" in rows["zz_correct_after_all"]["flags"]
