"""One base for the errors a user can fix, printed as one line (exit 1); anything else is a bug, shown whole."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from evalkit.records import EvalkitError


def test_every_error_a_user_can_fix_is_an_evalkit_error():
    from evalkit.records import SchemaError
    from evalkit.report.kernelbench_export import ExportError
    from evalkit.sandbox.uid_pool import NoSandboxUid
    from evalkit.schedule.engine import JudgesStopped
    from evalkit.schedule.options import ResultsExist, ScoreError, SettingError
    from evalkit.schedule.placement import PlacementError
    from evalkit.sources.problems import ProblemError
    from evalkit.sources.submissions import SubmissionError
    from evalkit.sources.textio import UnreadableText

    for error in (SchemaError, ExportError, NoSandboxUid, JudgesStopped, ScoreError, ResultsExist, SettingError,
                  PlacementError, ProblemError, SubmissionError, UnreadableText):
        assert issubclass(error, EvalkitError), error


@pytest.mark.parametrize("raised, tidy", [(EvalkitError("submissions/x.md: no such file; give a folder"), True),
                                         (RuntimeError("a bug"), False)])
def test_score_prints_a_fixable_error_in_one_line_and_a_bug_whole(tmp_path, monkeypatch, raised, tidy):
    import evalkit.schedule.local as local
    from evalkit.cli.main import main

    def fail(*args, **kwargs):
        raise raised
    monkeypatch.setattr(local, "score", fail)
    (tmp_path / "answers").mkdir()
    result = CliRunner().invoke(main, ["score", str(tmp_path / "answers"), "--out", str(tmp_path / "out")])
    if tidy:
        assert result.exit_code == 1 and "Error: submissions/x.md: no such file" in result.output, result.output
    else:
        assert isinstance(result.exception, RuntimeError) and "Error:" not in result.output, result.output
