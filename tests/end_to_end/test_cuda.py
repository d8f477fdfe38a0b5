"""On a CUDA GPU: faults stay inside the sandbox, and side streams or PyTorch substitutes are seen.

Run on a GPU machine (see docs/gpu-runs/README.md); skipped on machines without a GPU.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.cli.main import main
from feedback_checks import check_feedback

pytestmark = pytest.mark.cuda

PROBLEMS = FIXTURES / "judge_problems"
SUBMISSIONS = FIXTURES / "cuda_submissions"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("cuda") / "report"
    args = ["score", str(SUBMISSIONS), "--problems", str(PROBLEMS), "--out", str(out), "--device", "cuda",
            "--baselines", "eager", "--timeout", "30", "--timing-trials", "20", "--seed", "3"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = (out / "results.jsonl").read_text().splitlines()
    return {json.loads(line)["sample"]: json.loads(line) for line in lines}


def test_a_correct_cuda_kernel_is_correct_and_seen(rows):
    row = rows["a_correct_cuda"]
    assert row["verdict"] == "correct", row["reason"]
    assert any("relu_kernel" in k for k in row["correctness"]["custom_kernels"])
    assert "no_custom_kernel" not in row["flags"]


def test_out_of_bounds_write_is_a_crash_or_runtime_error(rows):
    row = rows["b_illegal_memory_access"]
    assert row["verdict"] in ("crash", "runtime_error"), row["reason"]
    assert "cuda error" in (row["reason"] + json.dumps(row["error"])).lower()


def test_kernel_infinite_loop_times_out(rows):
    assert rows["c_kernel_infinite_loop"]["verdict"] == "timeout"


def test_gpu_memory_exhaustion_stays_inside(rows):
    row = rows["d_gpu_memory_exhaustion"]
    assert row["verdict"] in ("runtime_error", "crash"), row["reason"]
    assert "memory" in row["reason"].lower()


def test_the_next_submission_after_faults_is_judged_correctly(rows):
    row = rows["e_correct_after_faults"]
    assert row["verdict"] == "correct", row["reason"]
    assert row["timing"]["median_ms"] < 5


def test_side_stream_work_is_counted(rows):
    row = rows["side_stream"]
    assert row["verdict"] == "correct", row["reason"]
    # The matmul on the side stream is timed: no fake speedup over PyTorch's own matmul.
    assert row["speedup_vs_eager"] < 1.5, row["timing"]


def test_pytorch_substitutes_are_flagged(rows):
    assert "no_custom_kernel" in rows["same_ops"]["flags"]
    assert {"fallback", "no_custom_kernel"} <= set(rows["fallback"]["flags"])


def test_a_triton_kernel_is_judged_like_a_cuda_one_and_counted_as_the_answers(rows):
    row = rows["f_triton_correct"]
    assert row["verdict"] == "correct", row["reason"]
    assert "triton_relu_kernel" in row["correctness"]["custom_kernels"], row["correctness"]["kernels"]
    assert "no_custom_kernel" not in row["flags"]
    assert rows["g_triton_incorrect"]["verdict"] == "incorrect"


def test_a_triton_compile_error_names_the_answers_line(rows):
    row = rows["h_triton_compile_error"]
    assert row["verdict"] == "compile_error", row["reason"]
    assert "line 12 of the answer" in row["reason"], row["reason"]
    assert "line 12 of the answer" in row["feedback"], row["feedback"]


def test_every_rows_feedback_is_one_a_model_can_act_on(rows):
    for row in rows.values():
        check_feedback(row)


def test_inductors_kernels_are_library_work(rows):
    row = rows["i_torch_compile"]
    assert row["verdict"] == "correct", row["reason"]
    assert "no_custom_kernel" in row["flags"], row["correctness"].get("kernels")


@pytest.mark.parametrize("sample", ["j_comment_names_pytorchs_kernel", "k_unused_triton_stub"])
def test_a_kernel_named_in_a_comment_or_by_an_unused_stub_is_not_the_answers(rows, sample):
    # Issue 42, G: both were judged correct with no flag on an H200, PyTorch's or Inductor's kernel taken for theirs.
    row = rows[sample]
    assert row["verdict"] == "correct", row["reason"]
    assert row["correctness"]["kernels"], "the profiler saw no kernel: nothing was tested"
    assert row["correctness"]["custom_kernels"] == [], row["correctness"]["kernels"]
    assert "no_custom_kernel" in row["flags"], row["correctness"]["kernels"]


BIG_OUTPUT_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.rand(64, 1024, 1024)]  # 256 MiB in, 256 MiB out


def get_init_inputs():
    return []
'''
ANSWER = "```python\nimport os\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n" \
         "    def forward(self, x):\n{body}\n```\n"


def test_the_judge_keeps_no_memory_of_finished_workers(tmp_path):
    """Every worker gets buffers in the judge's GPU memory; a worker that exits, crashes or hangs never gives
    them back itself, so the judge must (it once kept them all, and ran out of memory on a large problem)."""
    import torch

    from evalkit import Evaluator

    problem = tmp_path / "problems" / "double_big"
    problem.mkdir(parents=True)
    (problem / "reference.py").write_text(BIG_OUTPUT_PROBLEM)
    answers = {"correct": "        return x * 2.0", "crash": "        os._exit(3)",
               "hang": "        torch.cuda._sleep(1 << 40)\n        return x * 2.0"}
    free: list[int] = []
    # 30 s per step: a load right after the hang once took over 15 s on a busy 4-GPU host.
    with Evaluator(problems=tmp_path / "problems", device="cuda", cache_dir=tmp_path / "cache", baselines=("eager",),
                   timing_trials=5, timeout_s=30.0, seed=5) as ev:
        for i, name in enumerate(("correct", "crash", "hang", "correct", "crash", "correct")):
            row = ev.judge("double_big", ANSWER.format(body=answers[name]), sample=f"{i}_{name}")
            expected = {"correct": "correct", "crash": ("crash", "runtime_error"), "hang": "timeout"}[name]
            assert row["verdict"] in expected, (name, row["reason"])
            free.append(torch.cuda.mem_get_info()[0])
    lost = free[0] - free[-1]
    assert lost < 2**30, f"{lost / 2**30:.1f} GiB less free after five more answers"
