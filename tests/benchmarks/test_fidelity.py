"""`benchmarks/fidelity.py`: evalkit's speedups beside the in-process method's, from figures it would have read, and
end to end on a CPU, where both methods run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, benchmark_module

fidelity = benchmark_module("fidelity")


def _row(speedup: float, ci: list[float], median: float = 1.0) -> dict:
    return {"problem": "p", "sample": "a", "verdict": "correct", "speedup_vs_eager": speedup,
            "speedup_vs_eager_ci": ci, "timing": {"median_ms": median, "overhead_ms": 0.1, "claimed_median_ms": 0.9}}


def _rounds(reference_ms: float, answer_ms: float) -> list[dict]:
    return [{"reference_ms": reference_ms, "answer_ms": answer_ms, "calls": 100}] * 3


def test_agreement_is_evalkits_median_over_the_in_process_median():
    runs = [[_row(s, [s * 0.98, s * 1.02])] for s in (2.00, 2.06, 1.98)]
    answers = fidelity.summarize(runs, {"p/a": _rounds(2.0, 1.0)})
    entry = answers["p/a"]["eager"]
    assert entry["agreement"] == pytest.approx(2.00 / 2.0)
    assert entry["from_median"] == pytest.approx(0.06 / 2.00)
    assert entry["inside"] == (2, 6)  # 2.06 lies inside no other run's interval, nor they in its
    targets = fidelity.verdicts(answers)
    assert targets["agreement"]["met"] and not targets["reproducible"]["met"]
    assert not targets["inside"]["met"] and targets["half_width"]["met"]


def test_a_speedup_read_low_against_the_in_process_method_misses_its_target():
    runs = [[_row(2.5, [2.45, 2.55])] for _ in range(3)]
    targets = fidelity.verdicts(fidelity.summarize(runs, {"p/a": _rounds(3.0, 1.0)}))
    assert targets["agreement"]["worst"] == pytest.approx(1 - 2.5 / 3.0) and not targets["agreement"]["met"]


def test_a_microsecond_answer_has_the_looser_targets():
    runs = [[_row(1.40, [1.30, 1.50])] for _ in range(3)]  # half-width 7%: too wide for a millisecond answer
    micro = fidelity.summarize(runs, {"p/a": _rounds(0.026, 0.019)})
    assert micro["p/a"]["micro"] and fidelity.verdicts(micro)["half_width"]["met"]
    milli = fidelity.summarize(runs, {"p/a": _rounds(2.6, 1.9)})
    assert not milli["p/a"]["micro"] and not fidelity.verdicts(milli)["half_width"]["met"]


def test_an_answer_not_correct_in_every_run_is_listed_not_compared():
    failed = {"problem": "p", "sample": "a", "verdict": "incorrect"}
    answers = fidelity.summarize([[_row(2.0, [1.9, 2.1])], [failed]], {})
    assert answers["p/a"] == {"verdicts": ["correct", "incorrect"]}


def test_other_options_are_run_alternated_with_the_main_ones_beside_the_same_in_process_figures(tmp_path, monkeypatch,
                                                                                                 capsys):
    order = []

    def score(args, where, extra):
        order.append((where.name, extra))
        speedup = 2.2 if extra == "--judges 2" else 2.0
        return [{**_row(speedup, [speedup * 0.98, speedup * 1.02]), "set": "problems/"}]

    monkeypatch.setattr(fidelity, "score", score)
    monkeypatch.setattr(fidelity, "in_process", lambda args, row, seed: _rounds(2.0, 1.0))
    out = tmp_path / "fidelity.json"
    monkeypatch.setattr(sys, "argv", ["fidelity.py", "--runs", "2", "--against", "--judges 2", "--json", str(out),
                                      "--keep", str(tmp_path)])
    fidelity.main()
    assert order == [("run1", ""), ("run1-against1", "--judges 2"), ("run2", ""), ("run2-against1", "--judges 2")]
    figures = json.loads(out.read_text())
    assert figures["answers"]["p/a"]["eager"]["agreement"] == pytest.approx(1.0)
    other = figures["against"][0]
    assert other["options"] == "--judges 2" and other["runs_done"] == 2
    assert other["answers"]["p/a"]["eager"]["agreement"] == pytest.approx(1.1)
    assert other["against_main"] == {"p/a": pytest.approx(1.1)}
    assert "with '--judges 2'" in capsys.readouterr().out


OTHER_OPTIONS = "--request-length-ms 100 --timing-trials 10"  # what --against runs beside the defaults


@pytest.mark.slow
def test_both_methods_time_the_cpu_fixtures_answers_in_one_call(tmp_path):
    # On a CPU both sides run: the speedups' values depend on the machine's load, the figures' presence does not.
    out = tmp_path / "fidelity.json"
    env = {**os.environ, "EVALKIT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "benchmarks/fidelity.py", "--device", "cpu", "--set",
                           str(FIXTURES / "fidelity_problems"), "--runs", "1", "--rounds", "2", "--calls", "20",
                           "--variants", "kb,gaps,blocks,evalkit", "--gap-ms", "1", "--variant-calls", "4",
                           "--against", OTHER_OPTIONS, "--json", str(out), "--keep", str(tmp_path / "reports")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["runs_done"] == 1 and set(figures["targets"]) == {"agreement", "reproducible", "half_width",
                                                                     "inside"}
    for name in ("scale_relu/same_ops", "scale_relu/in_place"):
        entry = figures["answers"][name]["eager"]
        assert len(entry["evalkit"]) == 1 and len(entry["in_process"]) == 2, figures["answers"][name]
        assert entry["agreement"] > 0 and all(value > 0 for value in entry["in_process"])
        paced = figures["answers"][name]["variants"]  # the same models paced other ways, in the same process
        assert set(paced) == {"kb", "gaps", "blocks", "evalkit"} and all(v["speedup"] > 0 for v in paced.values())
    assert "evalkit/in-process" in done.stdout and "target agreement" in done.stdout and "paced gaps" in done.stdout
    # the other options' run went through evalkit with them: its run.json records them and no answer's timing made
    # more requests than they allow. (How many calls a request holds follows the reference's time as read at the
    # judge's start, which a loaded machine moves: 18 calls in one run and 6 in the other on CI once.)
    settings = {folder: json.loads((tmp_path / "reports" / folder / "set0" / "run.json").read_text())["settings"]
                for folder in ("run1", "run1-against1")}
    assert (settings["run1"]["request_length_ms"], settings["run1"]["timing_trials"]) == (None, None)
    assert (settings["run1-against1"]["request_length_ms"], settings["run1-against1"]["timing_trials"]) == (100, 10)
    other = figures["against"][0]
    assert other["options"] == OTHER_OPTIONS
    assert set(other["against_main"]) == {"scale_relu/same_ops", "scale_relu/in_place"}
    requests = [json.loads(line)["timing"]["count"] for line in
                (tmp_path / "reports" / "run1-against1" / "set0" / "results.jsonl").read_text().splitlines()
                if json.loads(line).get("timing")]
    assert requests and max(requests) <= 10


def test_the_report_says_where_each_sides_requests_went_beyond_their_events(capsys):
    row = _row(2.0, [1.9, 2.1])
    row["timing"]["request_parts_ms"] = {"reply_beyond_events_ms": 0.8, "freeze_ms": 0.25, "idle_ms": 0.01}
    row["timing"]["partner"] = {"request_parts_ms": {"reply_beyond_events_ms": 1.1, "freeze_ms": 0.2, "idle_ms": 0.02}}
    answers = fidelity.summarize([[row]], {"p/a": _rounds(2.0, 1.0)})
    fidelity.print_report(answers, fidelity.verdicts(answers), 1.0)
    assert ("a request beyond its events, ms (answer, baseline): reply_beyond_events 0.800, 1.100, freeze 0.250, "
            "0.200, idle 0.010, 0.020") in capsys.readouterr().out
