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


def test_a_clients_problem_id_ends_in_its_contents_hash_so_no_name_is_taken_from_another(tmp_path: Path) -> None:
    squatter = problem_from_source(REFERENCE + "\n# the squatter's\n", "shared", root=tmp_path, from_client=True)
    victim = problem_from_source(REFERENCE, "shared", root=tmp_path, from_client=True)
    assert squatter.id.startswith("shared_") and victim.id.startswith("shared_") and squatter.id != victim.id
    assert problem_from_source(REFERENCE, "shared", root=tmp_path, from_client=True).id == victim.id
    assert not squatter.trusted and not victim.trusted


@pytest.mark.parametrize(("settings", "says"), [
    ({"correctness_trials": 1_000_000}, "settings: 'correctness_trials' must be integer from 1 to 100 here"),
    ({"timing_budget_s": 86_400}, "'timing_budget_s' must be number > 0 and <= 120 here"),
    ({"run_timeout_s": 0}, "'run_timeout_s' must be a finite number > 0"),
    ({"title": "mine"}, "settings: unknown setting 'title'"),
])
def test_a_clients_settings_are_bounded_above_too_and_refused_naming_no_folder(tmp_path: Path, settings, says) -> None:
    with pytest.raises(ProblemError) as refused:
        problem_from_source(REFERENCE, root=tmp_path, from_client=True, **settings)
    assert says in str(refused.value) and str(tmp_path) not in str(refused.value)
    assert not list(tmp_path.iterdir()), "refused before anything was written"


def test_every_number_a_client_may_send_has_an_upper_bound() -> None:
    from evalkit.sources.settings import SETTINGS

    assert not [key for key, setting in SETTINGS.items() if not setting.choices and setting.client_max is None]


def test_the_servers_docs_list_every_settings_bound_for_clients() -> None:
    import re

    from conftest import ROOT
    from evalkit.sources.settings import SETTINGS, client_bound_text

    text = (ROOT / "docs" / "rl.md").read_text()
    table = text[text.index("| setting | a client may send |"):]
    listed = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|$", table.split("\n\n")[0], re.MULTILINE))
    assert listed == {key: client_bound_text(key) for key in SETTINGS}, "docs/rl.md's table of a client's settings"
