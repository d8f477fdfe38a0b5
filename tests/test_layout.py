"""The layout's rules, checked: each module says which side of the trust boundary it runs on, imports flow
one way (never from a later stage, never from the untrusted side into the judge or back), modules stay
short, and the report needs no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "evalkit"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
SIDES = ("trusted side", "untrusted side", "both sides", "no side of the trust boundary")
MAX_LINES = 400
# Stages in order: a module may import evalkit modules of its own stage or an earlier one.
STAGES = ("version", "row_parts", "records", "host_facts", "results_file", "report_folder", "sources", "intake",
          "sandbox", "judge", "schedule", "kernelbench", "server", "cli")  # kernelbench: KernelBench's call; server: evalkit serve, both over the API
# Report reads rows only: it may import the vocabulary, the results file and the report folder's owner, nothing that
# judges.
REPORT_MAY_IMPORT = ("version", "row_parts", "records", "host_facts", "results_file", "report_folder", "report")
# What shows rows to a user may import report: the CLI, and KernelBench's call (a row in KernelBench's shape, as
# ``evalkit report --format kernelbench`` writes it).
SHOW_ROWS = ("cli", "kernelbench")
# What runs inside the submission's interpreter may import only these evalkit modules.
UNTRUSTED_MAY_IMPORT = ("evalkit.sandbox.protocol", "evalkit.sandbox.clock", "evalkit.sandbox.shared_buffers",
                        "evalkit.sandbox.cuda_buffers", "evalkit.sandbox.typed_fields",
                        "evalkit.sandbox.reference_protocol", "evalkit.sandbox.values", "evalkit.sandbox.untrusted")
# The worker of an untrusted reference runs the judge's own reference code (``judge.reference``, loading the problem
# with ``sources``) on it, in its sandbox: the same computation as for a trusted problem, on the other side.
REFERENCE_WORKER_MAY_IMPORT = UNTRUSTED_MAY_IMPORT + ("evalkit.judge.reference", "evalkit.sources.problems",
                                                      "evalkit.sources.errors")


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _evalkit_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalkit"):
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("evalkit"))
    return found


def _stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "cli"  # the package itself: the top, re-exporting the Python API (``evalkit.Evaluator``) on first use
    return "cli" if parts[1] == "__main__" else parts[1]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _name(p))
def test_every_module_says_which_side_of_the_boundary_it_runs_on(path):
    if path.name == "__main__.py":
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert any(side in " ".join(doc.lower().split()) for side in SIDES) or path.name == "__init__.py" and doc, \
        f"{_name(path)}: its docstring names no side ({' / '.join(SIDES)})"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _name(p))
def test_modules_stay_short(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES, f"{_name(path)} is over {MAX_LINES} lines: split it"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _name(p))
def test_imports_never_flow_from_a_later_stage(path):
    module = _name(path)
    imports = _evalkit_imports(path)
    stage = _stage(module)
    if module == "evalkit.sandbox.untrusted.reference_worker":
        wrong = {i for i in imports if not i.startswith(REFERENCE_WORKER_MAY_IMPORT)}
    elif module.startswith(UNTRUSTED_MAY_IMPORT) or module == "evalkit.sandbox.protocol":
        wrong = {i for i in imports if not i.startswith(UNTRUSTED_MAY_IMPORT)}
    elif stage == "report":
        wrong = {i for i in imports if _stage(i) not in REPORT_MAY_IMPORT}
    else:
        allowed = STAGES[: STAGES.index(stage) + 1] + (("report",) if stage in SHOW_ROWS else ())
        wrong = {i for i in imports if _stage(i) not in allowed}
    assert not wrong, f"{module} imports {sorted(wrong)} across the layering"


def test_the_report_and_its_command_import_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pkgutil, importlib, evalkit.report, evalkit.cli.report\n"
            "for m in pkgutil.walk_packages(evalkit.report.__path__, 'evalkit.report.'):\n"
            "    importlib.import_module(m.name)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
