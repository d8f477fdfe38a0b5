"""`benchmarks/throughput.py` on CPU: its synthetic corpus has the proportions real LLM output has, every answer
that builds is a distinct build, and each category gets the verdict it stands for when evalkit scores it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT
from evalkit.intake.triage import triage

SCRIPT = ROOT / "benchmarks" / "throughput.py"
PROBLEMS = ROOT / "tests" / "fixtures" / "problems"
BUILDS = {"compile_error", "runtime_error", "wrong_answer", "hang", "slow_correct", "fast_correct"}
EXPECTED = {"no_code": "no_code", "syntax_error": "syntax_error", "compile_error": "compile_error",
            "runtime_error": "runtime_error", "wrong_answer": "incorrect", "hang": "timeout",
            "slow_correct": "correct", "fast_correct": "correct"}
# The shares the corpus stands for: no code or syntax errors, build failures, runtime errors, the rest (built and run).
GROUPS = {"unparsed": ({"no_code", "syntax_error"}, 0.40), "build_failures": ({"compile_error"}, 0.25),
          "runtime_errors": ({"runtime_error"}, 0.10),
          "ran": ({"wrong_answer", "hang", "slow_correct", "fast_correct"}, 0.25)}


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _generate(where: Path, device: str, answers: int) -> dict:
    result = _run("--generate-only", str(where), "--device", device, "--answers", str(answers),
                  "--problems", str(PROBLEMS))
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((where / "_corpus.json").read_text())


@pytest.mark.parametrize("answers", [16, 64])
def test_the_corpus_has_real_proportions_and_every_category(tmp_path, answers):
    manifest = _generate(tmp_path, "cpu", answers)
    entries = manifest["entries"]
    counts = Counter(e["category"] for e in entries)
    assert len(entries) == answers and set(counts) == set(EXPECTED)
    for name, (members, share) in GROUPS.items():
        got = sum(counts[c] for c in members) / answers
        assert abs(got - share) <= (0.07 if answers == 16 else 0.02), (name, got, counts)
    if answers == 64:  # the example: 64 answers
        assert counts == {"no_code": 16, "syntax_error": 10, "compile_error": 16, "runtime_error": 6,
                          "wrong_answer": 3, "hang": 2, "slow_correct": 3, "fast_correct": 8}
    problems = sorted(p.name for p in PROBLEMS.iterdir() if (p / "reference.py").exists())
    assert [e["problem"] for e in entries] == [problems[i % len(problems)] for i in range(answers)]  # round-robin
    files = sorted((tmp_path / "synthetic").rglob("*.md"))
    assert len(files) == answers


def test_every_answer_that_builds_is_a_distinct_build_and_reads_as_its_category(tmp_path):
    manifest = _generate(tmp_path, "cpu", 16)
    codes = []
    for entry in manifest["entries"]:
        text = (tmp_path / entry["path"]).read_text()
        found = triage(text)
        category = entry["category"]
        if category == "no_code":
            assert not found.extraction.ok, entry
            continue
        assert found.extraction.ok, entry
        if category == "syntax_error":
            assert found.syntax is not None, entry
            continue
        assert found.syntax is None and not found.needs_cuda, (entry, found.syntax, found.cuda_evidence)
        assert entry["token"] in found.code and "load_inline" in found.code and "class ModelNew(Model)" in found.code
        codes.append(found.code)
    assert len(codes) == sum(1 for e in manifest["entries"] if e["category"] in BUILDS)
    assert len(set(codes)) == len(codes)  # the build cache is keyed by the code: no hits inside one corpus


def test_the_cuda_flavour_builds_cuda_sources(tmp_path):
    manifest = _generate(tmp_path, "cuda", 16)
    for entry in manifest["entries"]:
        if entry["category"] in BUILDS:
            found = triage((tmp_path / entry["path"]).read_text())
            assert found.syntax is None and "passes cuda_sources to load_inline" in found.cuda_evidence, entry


@pytest.mark.slow
def test_each_category_gets_its_verdict_when_scored(tmp_path):
    """One answer per category, scored on CPU through the script (6 C++ builds on 2 jobs, a 20 s hang)."""
    keep, figures = tmp_path / "kept", tmp_path / "figures.json"
    result = _run("--suite", "corpus", "--device", "cpu", "--answers", "8", "--problems", str(PROBLEMS),
                  "--timeout", "20", "--jobs", "2", "--extra=--baselines eager --timing-trials 5 --seed 1",
                  "--keep", str(keep), "--json", str(figures))
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((keep / "corpus" / "_corpus.json").read_text())
    assert Counter(e["category"] for e in manifest["entries"]) == Counter(list(EXPECTED))  # one of each
    category = {(e["problem"], e["sample"]): e["category"] for e in manifest["entries"]}
    rows = [json.loads(line) for line in (keep / "corpus_report" / "results.jsonl").read_text().splitlines()]
    got = {category[(r["problem"], r["sample"])]: r["verdict"] for r in rows}
    assert got == EXPECTED, [(r["sample"], r["verdict"], r["reason"]) for r in rows]
    built = [r for r in rows if category[(r["problem"], r["sample"])] in BUILDS]
    assert all(r["build"] and not r["build"]["cached"] and r["stage_seconds"]["build_s"] > 0 for r in built)
    corpus = json.loads(figures.read_text())["corpus"]
    assert corpus["answers"] == 8 and corpus["builds_fresh"] == 6 and corpus["builds_cached"] == 0
    assert corpus["unexpected"] == [] and corpus["timed_out_s"] == 20
    assert corpus["answers_per_hour"] > 0 and corpus["build_limited_wall_s"] == pytest.approx(corpus["build_s"] / 2)
    assert corpus["build_limited_wall_s"] <= corpus["builds_alone_wall_s"] <= corpus["build_s"]
    assert corpus["ratio"] == pytest.approx(corpus["wall_s"] / corpus["builds_alone_wall_s"])
    assert "answers/hour" in result.stdout and "builds-alone wall" in result.stdout
    assert corpus["baselines_s"] > 0  # the fresh cache's eager baselines, timed in this run
    # the condition every start-up time depends on is recorded with the figures
    assert json.loads(figures.read_text())["python_bytecode"].startswith("torch has")
    assert "Python bytecode: torch has" in result.stdout


def _load_script(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("throughput_under_test", SCRIPT)
    throughput = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, throughput)  # its dataclasses look their module up there
    spec.loader.exec_module(throughput)
    return throughput


def test_the_builds_alone_wall_starts_builds_in_evalkits_order_on_the_first_free_job(monkeypatch):
    throughput = _load_script(monkeypatch)

    def row(problem, sample, seconds, cached=False):
        return {"problem": problem, "sample": sample, "run": "synthetic", "stage_seconds": {"build_s": seconds},
                "build": {"cached": cached}}

    rows = [row("b", "002_x", 1.0), row("b", "010_x", 2.0), row("a", "9_x", 10.0), row("a", "10_x", 1.0),
            row("a", "11_x", 5.0, cached=True), {"problem": "a", "sample": "12_no_code", "stage_seconds": {}}]
    # order: a/9 (10 s), a/10 (1 s), b/002 (1 s), b/010 (2 s) on two jobs: job 1 runs a/9 until 10; job 2 runs
    # a/10, b/002, b/010 until 4. The total / 2 would say 7 s.
    assert throughput.builds_alone_wall_s(rows, jobs=2) == 10.0
    assert throughput.builds_alone_wall_s(rows, jobs=1) == 14.0
    assert throughput.builds_alone_wall_s([], jobs=4) == 0.0


def test_only_the_baselines_a_run_timed_count_and_their_stages_are_summed(tmp_path, monkeypatch):
    throughput = _load_script(monkeypatch)
    entries = {
        "cached": {"measured_at": "2026-01-01T00:00:00+00:00",
                   "eager": {"judge_s": 9.0, "stage_seconds": {"correctness_s": 9.0}}},
        "timed": {"measured_at": "2026-06-01T00:00:10+00:00", "problem": "p",
                  "eager": {"judge_s": 3.0, "stage_seconds": {"calibrate_s": 1.0, "correctness_s": 2.0}},
                  "compile": {"judge_s": 5.0, "stage_seconds": {"load_s": 4.0, "correctness_s": 1.0}}},
    }
    (tmp_path / "baselines.json").write_text(json.dumps(entries))
    started = throughput._when("2026-06-01T00:00:00+00:00")
    assert throughput.baselines_s(tmp_path, started) == 8.0
    assert throughput.baseline_stages(tmp_path, started) == {"calibrate_s": 1.0, "correctness_s": 3.0, "load_s": 4.0}
    assert throughput.baseline_stages(tmp_path / "missing", started) == {}


def test_the_judges_tail_runs_back_from_its_last_row_to_its_last_wait(tmp_path, monkeypatch):
    throughput = _load_script(monkeypatch)

    def row(ended, judge_s):
        return {"judged_at": f"2026-06-01T00:{ended // 60:02d}:{ended % 60:02d}+00:00", "verdict": "correct",
                "stage_seconds": {"build_s": 50.0, "correctness_s": judge_s}}

    # the judge is busy 10-20 (baselines), waits, then 40-44, 44-50, 51-60 (gaps of at most 3 s): tail 20 s
    rows = [row(44, 4.0), row(60, 9.0), row(50, 6.0), {"sample": "no_code", "stage_seconds": {}}]
    (tmp_path / "baselines.json").write_text(json.dumps(
        {"p": {"measured_at": "2026-06-01T00:00:20+00:00", "eager": {"judge_s": 6.0}, "compile": {"judge_s": 4.0}}}))
    started = throughput._when("2026-06-01T00:00:00+00:00")
    assert throughput.judge_tail_s(rows, tmp_path, started) == 20.0
    # a baseline timed right before the first of them belongs to the tail too
    (tmp_path / "baselines.json").write_text(json.dumps(
        {"p": {"measured_at": "2026-06-01T00:00:38+00:00", "eager": {"judge_s": 9.0}}}))
    assert throughput.judge_tail_s(rows, tmp_path, started) == 31.0
    assert throughput.judge_tail_s([], tmp_path / "missing", started) is None
