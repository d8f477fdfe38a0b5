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
REFERENCE_WORKER = "evalkit.judge.reference_worker"
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
    if module == REFERENCE_WORKER:
        wrong = {i for i in imports if not i.startswith(REFERENCE_WORKER_MAY_IMPORT)}
    elif module.startswith(UNTRUSTED_MAY_IMPORT) or module == "evalkit.sandbox.protocol":
        wrong = {i for i in imports if not i.startswith(UNTRUSTED_MAY_IMPORT)}
    elif stage == "report":
        wrong = {i for i in imports if _stage(i) not in REPORT_MAY_IMPORT}
    else:
        allowed = STAGES[: STAGES.index(stage) + 1] + (("report",) if stage in SHOW_ROWS else ())
        wrong = {i for i in imports if _stage(i) not in allowed}
    assert not wrong, f"{module} imports {sorted(wrong)} across the layering"


@pytest.mark.parametrize("path", [p for p in MODULES if not _name(p).startswith("evalkit.sandbox")
                                  and _name(p) != REFERENCE_WORKER], ids=lambda p: _name(p))
def test_only_the_sandbox_imports_its_untrusted_side(path):
    """The untrusted side is the sandbox's to start and speak to; the judge, the scheduler and everything above
    them reach it only through the sandbox's trusted modules (the reference worker, itself untrusted side, runs
    the sandbox's harness)."""
    wrong = sorted(i for i in _evalkit_imports(path) if i.startswith("evalkit.sandbox.untrusted"))
    assert not wrong, f"{_name(path)} imports {wrong}: go through the sandbox's trusted side (evalkit.sandbox.*)"


SCHEDULE_FLOORS = 10  # the longest import chain within evalkit/schedule/, counted in modules (12 before issue 45)


def _import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (at its top, inside a function or for the type checker)."""
    names = {_name(p): p for p in MODULES if _name(p).startswith(package + ".")}
    graph = {}
    for module, path in names.items():
        targets = set()
        for imported in _evalkit_imports(path):
            while imported and imported not in names:
                imported = imported.rpartition(".")[0]
            if imported and imported != module:
                targets.add(imported)
        graph[module] = targets
    return graph


def _floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor: 1 + the highest floor among what it imports; an import circle fails the test."""
    floors: dict[str, int] = {}
    visiting: list[str] = []

    def floor(module: str) -> int:
        assert module not in visiting, f"import circle: {' -> '.join(visiting[visiting.index(module):] + [module])}"
        if module not in floors:
            visiting.append(module)
            floors[module] = 1 + max((floor(t) for t in graph[module]), default=0)
            visiting.pop()
        return floors[module]

    for module in graph:
        floor(module)
    return floors


def test_no_module_of_evalkit_imports_itself_through_others():
    _floors(_import_graph("evalkit"))


def test_the_scheduler_imports_stand_in_few_floors_without_circles():
    graph = _import_graph("evalkit.schedule")
    floors = _floors(graph)
    highest = max(graph, key=floors.__getitem__)
    assert floors[highest] <= SCHEDULE_FLOORS, f"{highest} stands on floor {floors[highest]} of evalkit/schedule/"
    assert "evalkit.schedule.engine" not in graph["evalkit.schedule.ray_backend"], "the Ray backend sits above the engine"


def test_one_judge_method_the_python_apis():
    """One name per role: ``judge`` is what a user calls (``Evaluator.judge``); the scheduler's engine yields
    ``rows``, a station judges one built answer (``judge_answer``), the judge ``examine``s one worker."""
    owners = sorted(f"{_name(path)}.{node.name}" for path in MODULES for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ClassDef) and any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                                                              and item.name == "judge" for item in node.body))
    assert owners == ["evalkit.schedule.evaluator.Evaluator"], owners


def test_the_report_and_its_command_import_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pkgutil, importlib, evalkit.report, evalkit.cli.report\n"
            "for m in pkgutil.walk_packages(evalkit.report.__path__, 'evalkit.report.'):\n"
            "    importlib.import_module(m.name)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


# The report folder has one writer, ``evalkit.report_folder.ReportFolder``. A module that names a file of a report
# folder (``results_file``'s names) calls no writing primitive; the primitives that write a report's files whole
# (``write_file``, ``ResultsWriter``) are imported only by it and by modules that write files of no report folder.
REPORT_FOLDER_OWNER = "evalkit.report_folder"
WRITES_NO_REPORT_FILE = {
    "evalkit.sandbox.identity": "its record of the sandbox users that passed their checks, beside the build cache",
    "evalkit.judge.baselines": "the shared baseline cache, and a judge's own copy of the report's baselines",
    "evalkit.report.compare": "the comparison page at the path the user gives (--out FILE.html)",
}
WRITING_PRIMITIVES = {"write_file", "ResultsWriter", "merge_entry", "record_in_report", "write_text", "write_bytes",
                      "unlink", "rmdir", "rmtree", "mkdir", "rename", "truncate", "copyfile", "copy"}


def _report_file_names() -> set[str]:
    import evalkit.results_file as files

    return {name for name in vars(files) if name.endswith(("_FILE", "_DIR"))}


def _names_used(tree: ast.AST) -> set[str]:
    return {node.id if isinstance(node, ast.Name) else node.attr
            for node in ast.walk(tree) if isinstance(node, (ast.Name, ast.Attribute))}


def _calls(tree: ast.AST) -> set[str]:
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
            if isinstance(func, ast.Name) and func.id == "open" and any(
                    isinstance(arg, ast.Constant) and isinstance(arg.value, str) and set(arg.value) & set("wax+")
                    for arg in [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "mode")]):
                called.add("open for writing")
    return called


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _name(p))
def test_only_the_report_folder_writes_a_report_folders_files(path):
    module = _name(path)
    if module in (REPORT_FOLDER_OWNER, "evalkit.results_file"):  # the owner, and where the names are declared
        return
    tree = ast.parse(path.read_text())
    named = _names_used(tree) & _report_file_names()
    writes = _calls(tree) & (WRITING_PRIMITIVES | {"open for writing"})
    assert not (named and writes) or module in WRITES_NO_REPORT_FILE, (f"{module} names the report folder's {sorted(named)} and writes files "
                                    f"({sorted(writes)}): write them through evalkit.report_folder.ReportFolder")
    imported = {name.rsplit(".", 1)[1] for name in _evalkit_imports(path)} & {"write_file", "ResultsWriter"}
    assert not imported or module in WRITES_NO_REPORT_FILE, \
        f"{module} imports {sorted(imported)}: a report folder's files are written by ReportFolder only"
