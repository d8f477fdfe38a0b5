"""The checks a run makes before building anything: report folder, submissions found, problems' references."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from evalkit.judge.torch_headers import stray_torch_header
from evalkit.schedule import preflight
from evalkit.cli.main import main
from evalkit.schedule.options import ScoreError
from evalkit.sources.problems import ProblemError, load_problem
from evalkit.sources.submissions import Discovered, SubmissionError


def test_a_syntax_error_names_the_file_and_line() -> None:
    problem = load_problem(FIXTURES / "broken_problems" / "syntax_error")
    with pytest.raises(ProblemError, match=r"syntax_error/reference.py:9: syntax error"):
        preflight.check_reference(problem)


def test_an_exception_on_import_names_the_file_and_line() -> None:
    problem = load_problem(FIXTURES / "hygiene_problems" / "raises_on_import")
    with pytest.raises(ProblemError) as raised:
        preflight.check_reference(problem)
    assert "raises_on_import/reference.py: importing it raised KeyError" in str(raised.value)
    assert "(line 6 of reference.py)" in str(raised.value)


def test_a_missing_name_says_what_to_add() -> None:
    problem = load_problem(FIXTURES / "hygiene_problems" / "no_get_inputs")
    with pytest.raises(ProblemError) as raised:
        preflight.check_reference(problem)
    message = str(raised.value)
    assert message.startswith(str(problem.reference_path) + ": defines no get_inputs;")
    assert "add get_inputs()" in message and "get_init_inputs" not in message.split(";")[0]


def test_a_sound_problem_passes_and_every_broken_one_is_listed() -> None:
    preflight.check_reference(load_problem(FIXTURES / "judge_problems" / "linear_relu"))
    broken = [load_problem(FIXTURES / "broken_problems" / "no_model"),
              load_problem(FIXTURES / "hygiene_problems" / "no_get_inputs")]
    with pytest.raises(ProblemError) as raised:
        preflight.check_references(broken)
    assert "no_model/reference.py: defines no Model" in str(raised.value)
    assert "no_get_inputs/reference.py: defines no get_inputs" in str(raised.value)
    sound = load_problem(FIXTURES / "judge_problems" / "linear_relu")
    unusable = preflight.check_references([sound, *broken])  # the sound one's answers are judged, the others' not
    assert sorted(unusable) == ["no_get_inputs", "no_model"]


def test_out_must_not_be_a_file(tmp_path: Path) -> None:
    file = tmp_path / "taken"
    file.write_text("")
    with pytest.raises(ScoreError, match="that is a file, not a report folder"):
        preflight.check_out_dir(file)
    preflight.check_out_dir(tmp_path / "new")  # not there yet: fine
    preflight.check_out_dir(tmp_path)  # an existing folder: fine


def test_no_submissions_names_the_folder_and_the_layouts(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError) as raised:
        preflight.require_submissions(Discovered(), tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path}: no submissions found")
    assert "<run>/<problem-id>/<sample>.txt" in message and ".jsonl" in message and "\n" not in message


def test_the_layouts_listed_include_kernelbench_run_folders(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError) as raised:
        preflight.require_submissions(Discovered(), tmp_path)
    message = str(raised.value)
    assert "runs/<name>/level_<L>_problem_<N>_sample_<S>_kernel.py" in message
    assert "after `evalkit problems import` of level L" in message


def test_torchs_own_precompiled_header_stops_a_run_before_anything_builds(tmp_path: Path, monkeypatch) -> None:
    # load_inline(use_pch=True), run once as a user who may write into torch's include folder, leaves
    # torch/extension.h.gch there; every sandboxed build that does not use it then fails removing it.
    include = tmp_path / "include"
    (include / "torch").mkdir(parents=True)
    assert stray_torch_header(include) is None
    (include / "torch" / "extension.h.gch").write_bytes(b"gch")
    assert stray_torch_header(include) == include / "torch" / "extension.h.gch"
    monkeypatch.setattr(preflight, "stray_torch_header", lambda: include / "torch" / "extension.h.gch")
    with pytest.raises(ScoreError, match=r"extension\.h\.gch: torch's include folder holds a precompiled header.*"
                                         r"Delete it and .*extension\.h\.sign"):
        preflight.check_torch_include()
    stray = include / "torch" / "extension.h.gch"
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["score", str(FIXTURES / "judge_submissions"), "--problems",
                                       str(FIXTURES / "judge_problems"), "--out", str(out), "--device", "cpu"])
    assert result.exit_code == 1 and f"{stray}: torch's include folder holds" in result.output, result.output
    assert not out.exists(), "refused before anything was written"
