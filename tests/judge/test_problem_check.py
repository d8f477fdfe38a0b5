"""``check_problem`` and ``describe_problem``: broken, degenerate, large and valid problems."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from evalkit.judge import problem_check
from evalkit.judge.problem_check import CheckReport, check_problem, describe_problem
from evalkit.sources.problems import ProblemError, load_problem
from evalkit.sources.scaffold import scaffold_problem

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "problems"
BROKEN = ROOT / "tests" / "fixtures" / "broken_problems"

HEADER = "import torch\nimport torch.nn as nn\n\n\n"


def _check(folder: Path, **kwargs: object) -> CheckReport:
    return check_problem(load_problem(folder), **kwargs)


def _problem_from(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "reference.py").write_text(HEADER + body)
    return folder


@pytest.mark.parametrize("name, shape", [("tiny_relu", [4, 8]), ("tiny_conv", [2, 4, 6, 6])])
def test_valid_fixtures_pass_with_forward_run(name: str, shape: list[int]) -> None:
    report = _check(FIXTURES / name)
    assert report.ok and report.errors == [] and report.warnings == []
    assert report.output_shape == shape
    assert any("forward ran on cpu" in note for note in report.notes)
    assert report.to_dict()["ok"] is True


@pytest.mark.parametrize("name, message", [
    ("no_model", "no_model/reference.py: defines no `Model`"),
    ("model_not_module", "`Model` must be a subclass of torch.nn.Module; it is a class that does not derive"),
    ("syntax_error", "syntax_error/reference.py:9: syntax error: '(' was never closed"),
    ("import_error", "importing it raised ModuleNotFoundError: No module named 'evalkit_no_such_module' (line 3"),
    ("inputs_not_tensor", "get_inputs()[1] is '3' of type int, not a torch.Tensor"),
    ("init_fails", "Model(*get_init_inputs()) raised TypeError: "),
    ("forward_fails", "forward on cpu raised RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                      "(4x8 and 5x3) (line 13 of reference.py)"),
])
def test_broken_fixtures_fail_with_a_precise_message(name: str, message: str) -> None:
    report = _check(BROKEN / name)
    assert not report.ok
    assert any(message in error for error in report.errors), report.errors


def test_import_error_fixture_also_lacks_model_but_reports_the_import() -> None:
    assert len(_check(BROKEN / "import_error").errors) == 1


def test_forward_failure_keeps_input_shapes() -> None:
    report = _check(BROKEN / "forward_fails")
    assert report.input_shapes == [[4, 8]] and report.output_shape is None


def test_zero_output_warns_twice() -> None:
    report = _check(BROKEN / "degenerate_zero")
    assert report.ok
    assert any("returning zeros would pass" in w for w in report.warnings)
    assert any("the same for two input seeds" in w for w in report.warnings)


def test_near_constant_output_warns_but_not_about_zeros() -> None:
    report = _check(BROKEN / "constant_mean")
    assert report.ok and report.output_shape == [4]
    assert len(report.warnings) == 1 and "the same for two input seeds" in report.warnings[0]


def test_degenerate_check_uses_the_problem_tolerance(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x * 1e-3\n\n"
                                     "def get_inputs():\n    return [torch.rand(8, 8)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert any("returning zeros would pass" in w for w in _check(folder).warnings)
    (folder / "problem.toml").write_text("atol = 1e-5\nrtol = 1e-5\n")
    assert _check(folder).warnings == []


def test_seed_warning_reports_the_largest_difference(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n"
                                     "        return x * 1e-4 + 1\n\n"
                                     "def get_inputs():\n    return [torch.rand(8, 8)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    [warning] = _check(folder).warnings
    difference = float(re.search(r"the same for two input seeds \(max difference (\S+), within atol=0\.01", warning)[1])
    assert 0 < difference < 1e-4


def test_inf_in_one_seed_only_warns(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n"
                                     "        return x / (x > 0.5)\n\n"
                                     "def get_inputs():\n    return [torch.rand(64)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert _check(folder).warnings == ["output contains NaN or inf for random inputs"]


def test_nan_output_warns(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x / 0 * 0\n\n"
                                     "def get_inputs():\n    return [torch.rand(4)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert any("NaN or inf" in w for w in _check(folder).warnings)


def test_large_problem_is_not_run_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(problem_check, "_run_forward", lambda *args: calls.append("ran"))
    report = _check(FIXTURES / "tiny_conv", max_cpu_elements=100)
    assert report.ok and calls == []
    assert report.output_shape == [2, 4, 6, 6]
    assert any(n.startswith("forward not run on CPU: problem is large (0.00 GB); run `evalkit problems check "
                            "--device cuda` on a GPU machine") for n in report.notes)


@pytest.mark.parametrize("problem_id, shape, gigabytes", [
    ("conv2d_gelu_globalavgpool", [128, 64], "0.27 GB"),
    ("conv2d_square_input_square_kernel", [16, 128, 1022, 1022], "9.63 GB"),
    ("convtranspose2d_gelu_groupnorm", [128, 64, 258, 258], "4.33 GB"),
    ("alexnet_conv1", [256, 96, 55, 55], "0.45 GB"),
    ("conv2d_asymmetric_input_asymmetric_kernel", [8, 128, 508, 250], "0.79 GB"),
])
def test_shipped_problems_check_on_meta_only(problem_id: str, shape: list[int], gigabytes: str) -> None:
    report = _check(ROOT / "problems" / problem_id)
    assert report.ok and report.warnings == []
    assert report.output_shape == shape
    assert any(f"problem is large ({gigabytes})" in note for note in report.notes)


def test_scaffold_passes_the_check(tmp_path: Path) -> None:
    report = _check(scaffold_problem(tmp_path, "new_op"))
    assert report.ok and report.warnings == [], report
    assert report.input_shapes == [[16, 64]] and report.output_shape == [16, 64]


def test_tuple_output_and_tuple_inputs(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n"
                                     "        return x.relu(), x.sum(dim=0)\n\n"
                                     "def get_inputs():\n    return (torch.randn(3, 5),)\n\n"
                                     "def get_init_inputs():\n    return []\n")
    report = _check(folder)
    assert report.ok and report.output_shape == [[3, 5], [5]]
    assert any("returns a tuple" in w for w in report.warnings)


def test_get_inputs_not_a_list(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
                                     "def get_inputs():\n    return torch.rand(3)\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert "get_inputs() must return a list, got Tensor" in _check(folder).errors


def test_missing_functions_are_named(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    pass\n")
    errors = _check(folder).errors
    assert any("defines no function `get_inputs()`" in e for e in errors)
    assert any("defines no function `get_init_inputs()`" in e for e in errors)


def test_forward_that_cannot_run_on_meta_gets_its_shape_from_the_real_run(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n"
                                     "        return x * float(x.sum())\n\n"
                                     "def get_inputs():\n    return [torch.rand(2, 3)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert describe_problem(load_problem(folder))["output_shape"] is None
    report = _check(folder)
    assert report.ok and report.output_shape == [2, 3]
    assert any("does not run on the meta device" in n for n in report.notes)


def test_describe_problem() -> None:
    info = describe_problem(load_problem(FIXTURES / "tiny_conv"))
    assert info["input_shapes"] == [[2, 3, 8, 8]] and info["output_shape"] == [2, 4, 6, 6]
    assert {"id", "title", "source", "path", "level", "tags"} <= set(info) and info["error"] is None
    broken = describe_problem(load_problem(BROKEN / "syntax_error"))
    assert broken["output_shape"] is None and "syntax error" in broken["error"]


def test_unknown_device() -> None:
    with pytest.raises(ProblemError, match="unknown device 'tpu'"):
        _check(FIXTURES / "tiny_relu", device="tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_device_without_gpu_is_a_clear_error() -> None:
    with pytest.raises(ProblemError, match="no CUDA GPU is usable here"):
        _check(FIXTURES / "tiny_relu", device="cuda")


@pytest.mark.cuda
def test_cuda_runs_the_forward() -> None:
    report = _check(FIXTURES / "tiny_conv", device="cuda")
    assert report.ok and any("forward ran on cuda" in n for n in report.notes)


def test_get_inputs_that_fails_only_on_meta_is_built_for_real(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x + 1\n\n"
                                     "def get_inputs():\n    n = int(torch.randint(3, 4, ()).item())\n"
                                     "    return [torch.rand(n, 2)]\n\n"
                                     "def get_init_inputs():\n    return []\n")
    report = _check(folder)
    assert report.ok and report.input_shapes == [[3, 2]] and report.output_shape == [3, 2]
    assert any("get_inputs() fails on the meta device" in n for n in report.notes)


def test_get_inputs_raising_everywhere_is_an_error(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
                                     "def get_inputs():\n    raise ValueError('no inputs today')\n\n"
                                     "def get_init_inputs():\n    return []\n")
    assert any("get_inputs() raised ValueError: no inputs today (line 10 of reference.py)" in e
               for e in _check(folder).errors)


EXP = """
class Model(nn.Module):
    def forward(self, x):
        return torch.exp(x)


def get_inputs():
    return [torch.rand(64, 64) * 4]


def get_init_inputs():
    return []
"""


def test_a_bf16_problem_whose_own_bf16_result_misses_its_tolerance_is_warned(tmp_path: Path) -> None:
    folder = _problem_from(tmp_path, EXP)  # bf16 rounds exp(x) by up to 2**-9 of it
    (folder / "problem.toml").write_text('precision = "bf16"\natol = 1e-3\nrtol = 1e-3\n')
    report = _check(folder)
    assert report.ok and any("PyTorch's own bf16 result misses the tolerance" in w for w in report.warnings), report
    (folder / "problem.toml").write_text('precision = "bf16"\n')  # the default 5e-2 holds bf16's own error
    report = _check(folder)
    assert not any("misses the tolerance" in w for w in report.warnings), report.warnings
    assert any("PyTorch's own bf16 result is within atol=0.05" in n for n in report.notes), report.notes
