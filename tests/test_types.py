"""The type checker's verdict (docs/testing.md, Types): mypy, configured in pyproject.toml's ``[tool.mypy]``, finds no
error in the modules it checks; those hold the records, the rows' writers, the report and where verdicts are
decided; and the parameters typed ``Any`` in evalkit do not grow in number."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REQUIRE_MYPY = "EVALKIT_REQUIRE_MYPY"  # CI sets it (.ci/run): there a missing mypy fails the test, never skips it
# The modules the issue asks a type checker for: the records, the rows' writers, the report, the verdicts.
MUST_CHECK = ("evalkit/records.py", "evalkit/row_parts.py", "evalkit/results_file.py", "evalkit/judge/verdicts.py",
              "evalkit/report")
# Parameters annotated ``Any`` in evalkit/: 150 when this test came (issue 45), this many since. Lower it when you
# type one; a new one takes a type (``object`` for a value only inspected, a record, a protocol) instead.
ANY_PARAMETERS = 123


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _checked_files() -> list[Path]:
    """The Python files mypy checks: pyproject.toml's ``files``, folders expanded."""
    found: list[Path] = []
    for name in _config()["files"]:
        path = ROOT / name
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def test_mypy_finds_no_error_in_the_checked_modules(tmp_path: Path) -> None:
    """Every file of ``[tool.mypy] files`` checked, none with an error (a cold cache of the test's own: the
    verdict cannot come from an earlier run's)."""
    if importlib.util.find_spec("mypy") is None:
        message = "mypy is not installed: pip install -e '.[test]' (the test extra pins it)"
        if os.environ.get(REQUIRE_MYPY):
            pytest.fail(f"{message}; {REQUIRE_MYPY} is set, so this fails rather than skips")
        pytest.skip(f"{message}; set {REQUIRE_MYPY}=1 to fail instead")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)  # a guard against a hang only
    assert done.returncode == 0, done.stdout + done.stderr
    checked = re.search(r"^Success: no issues found in (\d+) source files?$", done.stdout, re.M)
    assert checked is not None, done.stdout + done.stderr
    assert int(checked.group(1)) == len(_checked_files()), done.stdout


def test_the_checked_modules_hold_the_records_writers_report_and_verdicts() -> None:
    config = _config()
    assert set(MUST_CHECK) <= set(config["files"])
    assert all(path.exists() for path in _checked_files())
    assert "ignore_errors" not in config, "no blanket ignore: fix the error, or ignore one line naming its code"
    assert not [o for o in config.get("overrides", []) if o.get("ignore_errors")], config["overrides"]


def test_ci_installs_mypy_and_fails_without_it() -> None:
    """The test extra pins mypy (a new release may find new errors: moved on purpose, with its fixes), and CI
    requires it, so a CI without mypy fails instead of skipping the check."""
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(re.fullmatch(r"mypy==[\d.]+", requirement) for requirement in test_extra), test_extra
    assert re.search(rf"^export {REQUIRE_MYPY}=1$", (ROOT / ".ci" / "run").read_text(), re.M)


def any_parameters(root: Path) -> list[str]:
    """``file:line function(parameter)`` of each parameter of a function under ``root`` annotated ``Any``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]:
                    if isinstance(arg.annotation, ast.Name) and arg.annotation.id == "Any":
                        found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}({arg.arg})")
    return found


def test_parameters_typed_any_do_not_grow() -> None:
    found = any_parameters(ROOT / "evalkit")
    assert len(found) <= ANY_PARAMETERS, (f"{len(found)} parameters typed Any, more than {ANY_PARAMETERS}: type the "
                                          f"new ones\n" + "\n".join(found))


def test_the_count_sees_each_kind_of_parameter(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text(
        "from typing import Any\n"
        "def f(a: Any, /, b: Any, *c: Any, d: Any, **e: Any) -> Any: ...\n"
        "async def g(a: 'Any', b: object, c: list[Any]) -> None: ...\n"
        "class C:\n    def m(self, a: Any) -> None: ...\n")
    assert [entry.split(" ")[1] for entry in any_parameters(package)] == ["f(a)", "f(b)", "f(d)", "f(c)", "f(e)",
                                                                          "m(a)"]
