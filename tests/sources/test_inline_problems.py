"""Problems given as text (an RL dataset's reference code): the same checks and settings as a folder's, and the
same text is one problem, kept once, whoever sends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from evalkit import Problem
from evalkit.sources.errors import ProblemError
from evalkit.sources.problems import problem_from_source

REFERENCE = (FIXTURES / "judge_problems" / "linear_relu" / "reference.py").read_text()


def test_the_same_text_is_one_problem_kept_once(tmp_path: Path) -> None:
    first = problem_from_source(REFERENCE, root=tmp_path, atol=0.05)
    again = problem_from_source(REFERENCE, root=tmp_path, atol=0.05)
    assert first.id == again.id and first.id.startswith("inline_") and first.path == again.path
    assert first.reference_path.read_text() == REFERENCE and first.settings.atol == 0.05
    other = problem_from_source(REFERENCE, root=tmp_path, atol=0.01)  # other settings: another problem
    assert other.id != first.id and other.sha256 != first.sha256
    named = problem_from_source(REFERENCE, "linear_relu_inline", root=tmp_path)
    assert named.id == "linear_relu_inline" and named.sha256 == problem_from_source(REFERENCE, root=tmp_path).sha256
    assert len(list(tmp_path.glob("*/*"))) == 4 and not list(tmp_path.rglob(".writing-*")), "none half written"


def test_the_default_home_is_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    problem = Problem.from_source(REFERENCE)
    assert problem.path.is_relative_to(tmp_path / "cache" / "inline_problems")


@pytest.mark.parametrize(("code", "name", "settings", "says"), [
    ("", None, {}, "reference_code: expected the text of a reference file"),
    (b"bytes", None, {}, "got bytes"),
    (REFERENCE, "Bad Name", {}, "invalid problem id 'Bad Name'"),
    (REFERENCE, None, {"atoll": 0.1}, "atoll"),
    (REFERENCE, None, {"atol": "loose"}, "atol"),
    (REFERENCE, None, {"atol": [1]}, "setting 'atol': [1] is not a number"),
])
def test_a_bad_problem_text_or_setting_is_refused_naming_it(tmp_path: Path, code, name, settings, says: str) -> None:
    with pytest.raises(ProblemError, match=says.replace("(", r"\(").replace("[", r"\[")):
        problem_from_source(code, name, root=tmp_path, **settings)
