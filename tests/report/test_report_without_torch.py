"""``evalkit report DIR`` works where torch cannot be imported, and the report side never imports torch.

Each check runs in a fresh interpreter (``sys.executable``), so torch loaded by other tests in this
process cannot hide an import.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from evalkit.report.summary import write_reports

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "results.jsonl"
JUDGE_HOST = {"evalkit_version": "0.1.0", "python": "3.11.7", "platform": "Linux", "torch": "2.13.0",
              "cuda": "12.8", "cudnn": 90100, "gpu": "NVIDIA H100", "gpu_capability": "9.0", "driver": "570.1"}

REPORT_WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError
from evalkit.cli.main import main
main(["report", sys.argv[1]])
"""

IMPORT_REPORT_SIDE = """
import importlib, pkgutil, sys
import evalkit.report
names = ["evalkit.cli.report"] + [m.name for m in pkgutil.walk_packages(evalkit.report.__path__, "evalkit.report.")]
for name in names:
    importlib.import_module(name)
print(len(names), sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def report_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "r"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "results.jsonl")
    return folder


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def test_report_runs_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    folder = report_folder(tmp_path)
    (folder / "environment.json").write_text(json.dumps(JUDGE_HOST))
    done = python(REPORT_WITHOUT_TORCH, str(folder))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"report: {folder / 'index.html'}" in done.stdout
    assert (folder / "index.html").is_file()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["overall"]["submissions"] == 13
    environment = summary["environment"]
    assert set(environment["report_host"]) == {"evalkit_version", "python", "platform"}
    assert environment["judge_host"] == JUDGE_HOST
    assert "judged with torch: <b>2.13.0</b>" in (folder / "index.html").read_text()


def test_judge_host_is_null_without_environment_json(tmp_path: Path) -> None:
    folder = report_folder(tmp_path)
    write_reports(folder)
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["environment"]["judge_host"] is None
    assert "torch" not in summary["environment"]["report_host"]


def test_report_side_modules_do_not_import_torch() -> None:
    done = python(IMPORT_REPORT_SIDE)
    assert done.returncode == 0, done.stderr[-2000:]
    count, torch_modules = done.stdout.strip().split(" ", 1)
    assert int(count) >= 9  # cli.report, report.{scoring,summary,run_diff,text,host_facts,html.*}
    assert torch_modules == "[]"
