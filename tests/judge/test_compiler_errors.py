"""evalkit.judge.compiler_errors: compiler logs and the source files they name are the submission's, so
reading them is bounded: linear in the log, never a pattern, a pipe, a device or more than the head of a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalkit.judge.compiler_errors import first_compiler_errors, map_to_submission
from intake.time_bounds import MAX_GROWTH, QUICK_S, growth, timed

MAIN = "#include <torch/extension.h>\n\ntorch::Tensor run(torch::Tensor x) {\n    return undeclared_value + x;\n}\n"
KERNEL = "__global__ void k(float* y) {\n    y[0] = missing;\n}\n"


@pytest.fixture
def extensions(tmp_path: Path) -> Path:
    """An extension folder as torch's builder leaves it: one folder per extension."""
    ext = tmp_path / "extensions" / "fused"
    ext.mkdir(parents=True)
    (ext / "main.cpp").write_text(MAIN)
    (ext / "cuda.cu").write_text(KERNEL)
    return tmp_path / "extensions"


# --- what it reads ------------------------------------------------------------------------------------

def test_gcc_and_nvcc_errors_with_their_source_lines(extensions: Path) -> None:
    absolute = extensions / "fused" / "cuda.cu"
    log = ("[1/3] c++ -c main.cpp\n"
           "fused/main.cpp:4:12: error: 'undeclared_value' was not declared in this scope\n"
           f"{absolute}(2): error: identifier \"missing\" is undefined\n")
    errors = first_compiler_errors(log, extensions)
    assert errors == [
        {"file": "main.cpp", "line": 4, "message": "'undeclared_value' was not declared in this scope",
         "source": "    return undeclared_value + x;"},
        {"file": "cuda.cu", "line": 2, "message": 'identifier "missing" is undefined', "source": "    y[0] = missing;"},
    ]


def test_repeats_are_one_error_and_at_most_limit_are_kept(extensions: Path) -> None:
    log = "main.cpp:4:1: error: same\n" * 3 + "".join(f"main.cpp:{n}:1: error: other {n}\n" for n in range(1, 9))
    errors = first_compiler_errors(log, extensions, limit=5)
    assert [e["message"] for e in errors] == ["same", "other 1", "other 2", "other 3", "other 4"]


def test_lines_that_only_mention_an_error() -> None:
    log = "ninja: build stopped: subcommand failed.\nRuntimeError: Error building extension 'fused'\nok\n"
    assert first_compiler_errors(log, Path("/nonexistent")) == [
        {"file": "", "line": 0, "message": "RuntimeError: Error building extension 'fused'", "source": ""}]


def test_map_to_submission() -> None:
    code = "src = '''\n" + MAIN + "'''\n"
    assert map_to_submission("  return undeclared_value + x;", code) == 5
    assert map_to_submission("}", code) is None  # too short to be told apart
    assert map_to_submission("not in the code at all", code) is None


# --- what it refuses ----------------------------------------------------------------------------------

def test_a_name_in_the_log_is_never_a_glob_pattern(extensions: Path) -> None:
    (error,) = first_compiler_errors("*.cu:2: error: x\n", extensions)
    assert error["file"] == "*.cu" and error["source"] == ""  # not cuda.cu's line 2


def test_a_fifo_named_in_the_log_is_not_waited_on(extensions: Path) -> None:
    os.mkfifo(extensions / "fused" / "pipe.cu")  # reading it would wait for a writer forever
    (error,), seconds = timed(lambda: first_compiler_errors("pipe.cu:1: error: x\n", extensions))
    assert seconds < QUICK_S and error["source"] == ""


def test_a_device_named_in_the_log_is_not_read(extensions: Path) -> None:
    (extensions / "fused" / "zero.cu").symlink_to("/dev/zero")  # reading it would never end
    (error,), seconds = timed(lambda: first_compiler_errors("zero.cu:1: error: x\n", extensions))
    assert seconds < QUICK_S and error["source"] == ""


def test_only_the_head_of_a_huge_source_is_read(extensions: Path) -> None:
    (extensions / "fused" / "huge.cu").write_text("int pad;\n" * 600_000 + "int target;\n")  # 5.4 MB
    near, far = first_compiler_errors("huge.cu:2: error: near\nhuge.cu:600001: error: far\n", extensions)
    assert near["source"] == "int pad;" and far["source"] == ""


def test_a_repeated_error_reads_its_file_once(extensions: Path) -> None:
    (extensions / "fused" / "big.cu").write_text("int pad;\n" * 400_000)
    errors, seconds = timed(lambda: first_compiler_errors("big.cu:400000: error: x\n" * 2_000, extensions))
    assert seconds < QUICK_S and errors == [{"file": "big.cu", "line": 400000, "message": "x", "source": "int pad;"}]


def test_a_name_longer_than_the_file_system_allows(extensions: Path) -> None:
    (error,) = first_compiler_errors("a" * 300 + ".cu:1: error: x\n", extensions)
    assert error["line"] == 1 and error["source"] == ""


# --- adversarial logs: bounded time, bounded records --------------------------------------------------

LONG_LINES = {
    "colons": ":" * 10_000_000 + " error\n",
    "dots": "." * 10_000_000 + ".cu:1: error: x\n",
    "parentheses": "(" * 10_000_000 + "a.cu(1): error: x\n",
    "a.cu( on one line": "a.cu(" * 2_000_000 + "1): error: x\n",
    "a.cu( lines": "a.cu(\n" * 1_700_000,
    "a long message": "a.cu:1: error: " + "x" * 10_000_000 + "\n",
}


@pytest.mark.parametrize("log", LONG_LINES.values(), ids=LONG_LINES)
def test_ten_megabyte_logs(log: str, extensions: Path) -> None:
    errors, seconds = timed(lambda: first_compiler_errors(log, extensions))
    assert seconds < QUICK_S and len(errors) <= 1
    assert all(len(e["message"]) <= 2000 and len(e["source"]) <= 2000 for e in errors)


def test_many_matching_lines(extensions: Path) -> None:
    log = "".join(f"d{n % 7}/cuda.cu({n % 3 + 1}): error: x\n" for n in range(100_000))
    errors, seconds = timed(lambda: first_compiler_errors(log, extensions))
    assert seconds < QUICK_S and [e["line"] for e in errors] == [1, 2, 3]
    assert [e["source"] for e in errors] == KERNEL.splitlines()


def test_mapping_into_a_huge_answer() -> None:
    code = "x = 1\n" * 3_000_000 + "    return undeclared_value + x;\n"
    line, seconds = timed(lambda: map_to_submission("return undeclared_value + x;", code))
    assert seconds < QUICK_S and line == 3_000_001


GROWING = {
    "first_compiler_errors: matching lines": (
        lambda log: first_compiler_errors(log, Path("/nonexistent")), lambda n: "a.cu(1): error: x\n" * n, 50_000),
    "first_compiler_errors: a.cu( lines": (
        lambda log: first_compiler_errors(log, Path("/nonexistent")), lambda n: "a.cu(\n" * n, 250_000),
    "map_to_submission": (lambda code: map_to_submission("return x;", code), lambda n: "    x = 1\n" * n + "return x;\n",
                          400_000),
}


@pytest.mark.parametrize("case", GROWING)
def test_time_grows_linearly(case: str) -> None:
    function, make_input, n = GROWING[case]
    assert growth(function, make_input, n) < MAX_GROWTH


TRITON_ERROR = """CompilationError: at 5:8:
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.lod(y_ptr + offs, mask=mask)
        ^
AttributeError("module 'triton.language' has no attribute 'lod'")"""
TRITON_ANSWER = """import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.lod(y_ptr + offs, mask=mask)
"""


def test_a_triton_compile_error_points_at_the_answers_line():
    from evalkit.judge.compiler_errors import first_jit_errors, map_to_submission

    [error] = first_jit_errors(TRITON_ERROR)
    assert error["line"] == 5 and "no attribute 'lod'" in error["message"]
    assert map_to_submission(error["source"], TRITON_ANSWER) == 10
    assert first_jit_errors("RuntimeError: at 5:8: nothing follows") == []
