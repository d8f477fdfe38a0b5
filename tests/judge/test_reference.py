"""The judge's float64 reference: its backend choice (cuDNN or PyTorch's own kernels) is applied to it alone,
and on a GPU both backends agree and the faster is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import FIXTURES, ROOT
from evalkit.judge.reference import ReferenceProblem
from evalkit.sources.problems import load_problem


def _cudnn_flag_seen_by(ref: ReferenceProblem) -> list[bool]:
    seen: list[bool] = []
    ref._model64.register_forward_hook(lambda *_: seen.append(torch.backends.cudnn.enabled))
    return seen


def test_the_float64_reference_runs_with_the_chosen_backend_and_restores_the_flag():
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=3)
    seen = _cudnn_flag_seen_by(ref)
    inputs = ref.make_inputs(1)
    ref.float64_cudnn = False
    ref.expected(inputs)
    ref.float64_cudnn = True
    ref.expected(inputs)
    assert seen == [False, True]
    assert torch.backends.cudnn.enabled  # the process's own setting is left as it was


def test_a_bf16_problem_casts_weights_and_inputs_and_keeps_a_float64_oracle_on_the_cast_values():
    ref = ReferenceProblem(load_problem(FIXTURES / "judge_problems" / "linear_relu"), "cpu", init_seed=3,
                           precision="bf16")
    assert {v.dtype for v in ref.state_dict.values()} == {torch.bfloat16}
    inputs = ref.make_inputs(1)
    assert inputs[0].dtype == torch.bfloat16
    own, expected = ref.pytorch_own(inputs)[0], ref.expected(inputs)[0]
    assert own.dtype == torch.bfloat16 and expected.dtype == torch.float64
    weight, bias = (ref.state_dict[k].double() for k in ("linear.weight", "linear.bias"))
    assert torch.equal(expected, torch.relu(inputs[0].double() @ weight.T + bias))  # the cast values, in float64


def test_the_precisions_dtypes_are_the_ones_a_worker_accepts():
    from evalkit.sandbox.protocol import DTYPES
    from evalkit.sources.settings import PRECISION_DTYPES, PRECISIONS

    assert tuple(PRECISION_DTYPES) == PRECISIONS and tuple(PRECISION_DTYPES.values()) == DTYPES


@pytest.mark.cuda
def test_on_a_gpu_both_float64_backends_agree_and_the_faster_is_kept(monkeypatch):
    problem = load_problem(Path(ROOT) / "problems" / "convtranspose2d_gelu_groupnorm")
    ref = ReferenceProblem(problem, "cuda", init_seed=3)
    inputs = ref.make_inputs(1)
    outputs = {}
    for use_cudnn in (True, False):
        ref.float64_cudnn = use_cudnn
        outputs[use_cudnn] = ref.expected(inputs)[0]
    assert torch.allclose(outputs[True], outputs[False], rtol=1e-10, atol=1e-12)
    clock = iter([0.0, 2.0, 10.0, 11.0])  # cuDNN's call takes 2 s, the other 1 s
    monkeypatch.setattr("evalkit.judge.reference.time.perf_counter", lambda: next(clock))
    ref.pick_float64_backend(inputs)
    assert ref.float64_cudnn is False
