"""The README's first lines are the two commands a newcomer pastes; CI must run the same test command."""

from __future__ import annotations

from conftest import ROOT


def _readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("```bash") + 1
    return lines[start : lines.index("```", start)]


def test_the_readme_opens_with_two_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert "evalkit score submissions/" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readmes_test_command_verbatim():
    assert _readme_commands()[1] in (ROOT / ".ci" / "run").read_text()
