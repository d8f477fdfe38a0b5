"""`benchmarks/timing_under_load.py`'s criterion (it needs a GPU to measure, not to judge a series): a loaded
run is compared with the quiet runs on either side of it, so the GPU's own drift between reports cancels."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, benchmark_module

SCRIPT = ROOT / "benchmarks" / "timing_under_load.py"


def _script():
    return benchmark_module("timing_under_load")


def _run(kind: str, answer: float, eager: float) -> dict:
    return {"kind": kind, "answer": answer, "eager": eager}


def test_drift_between_quiet_runs_cancels_in_the_bracket():
    # The GPU slows 4% across the series; the loaded run sits where the drift puts it: no load effect.
    series = [_run("quiet", 1.00, 2.00), _run("loaded", 1.02, 2.04), _run("quiet", 1.04, 2.08)]
    met, lines = _script().verdict(series)
    assert met, lines
    assert "quiet runs spread 4.00%" in lines[0]


def test_a_loaded_run_slower_than_both_neighbours_fails():
    series = [_run("quiet", 1.00, 2.00), _run("loaded", 1.05, 2.00), _run("quiet", 1.01, 2.00),
              _run("loaded", 1.01, 2.00), _run("quiet", 1.00, 2.00)]
    script = _script()
    effects = script.load_effects(series)
    assert effects[0]["answer"] == pytest.approx(1.05 / 1.005 - 1)
    assert effects[1]["answer"] == pytest.approx(1.01 / 1.005 - 1)
    met, lines = script.verdict(series)
    assert not met and "MISSED" in lines[-1]


def test_a_series_without_a_quiet_run_is_refused():
    with pytest.raises(ValueError, match="no quiet run"):
        _script().load_effects([_run("loaded", 1.0, 2.0)])


def test_verdict_reads_a_printed_series_and_sets_the_exit_code(tmp_path):
    log = tmp_path / "timing_under_load.log"
    series = [_run("quiet", 0.7910, 2.2391), _run("loaded", 0.7772, 2.2056), _run("quiet", 0.8142, 2.2998)]
    log.write_text("quiet: ...\n" + json.dumps({"series": series}) + "\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--verdict", str(log)], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr  # the H200's first series: loaded 3.2% below its bracket
    assert "at most 3.16%" in done.stdout


@pytest.mark.parametrize("content, says", [
    (None, "cannot read it"),
    ("", "not the JSON series"),
    ("quiet: 1.0 ms\n", "not the JSON series"),
    ('{"series": [{"kind": "quiet"}]}\n', "not the JSON series"),
    ('{"series": [{"kind": "loaded", "answer": 1.0, "eager": 2.0}]}\n', "no quiet run"),
])
def test_a_file_that_holds_no_series_gets_a_usage_error_naming_it(tmp_path, content, says):
    log = tmp_path / "log.txt"
    if content is not None:
        log.write_text(content)
    done = subprocess.run([sys.executable, str(SCRIPT), "--verdict", str(log)], capture_output=True, text=True)
    assert done.returncode == 2 and says in done.stderr and str(log) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
