"""How many answers an hour does `evalkit score` judge, and where does the time go? Prints the figures.

Every run is `python3 -m evalkit score ...` in a subprocess (the CLI only, no evalkit internals), into a
fresh report folder, with a fresh build cache unless said otherwise. Suites (`--suite`, default `all`;
several with commas: `--suite seeds,rescore`):

- seeds: one lone build of a trivial extension (one answer, cold), then the five seeds (`submissions/seeds`,
  on `problems/`) cold. Target: the seeds' wall time at most 1.3x the lone build's build seconds.
- rescore: the seeds again, into a new report, with the seeds' warm cache (builds and baselines cached; the
  seeds are scored cold first when the seeds suite did not run). Target: at most 10 s of wall time.
- corpus: a synthetic corpus made from the templates in `benchmarks/corpus/` (no code, syntax error, compile
  error, runtime error, wrong answer, hang, slow correct, fast correct: about 40% no code or syntax errors,
  25% build failures, 10% runtime errors, 25% that build and run), round-robin over the problems of
  `--problems`, every answer that builds a distinct build; scored cold with `--jobs J`. Prints answers per
  hour, the verdicts per category, the stage seconds summed over the rows, and what the builds alone would
  need on J parallel jobs: their measured seconds started in evalkit's order (problem, then sample) on the
  first free job, until the last one ends (`builds_alone_wall_s`). The builds' total seconds / J (perfect
  packing, no tail: `build_limited_wall_s`) is printed beside it, a lower bound.
  Target: the corpus's wall at most 1.10x the builds-alone wall.

    python3 benchmarks/throughput.py [--suite seeds,rescore,corpus|all] [--device cuda|cpu] [--answers 64]
        [--problems DIR] [--jobs J] [--timeout S] [--extra='--gpus 1'] [--keep DIR] [--json FILE] [--check]
    python3 benchmarks/throughput.py --generate-only DIR [--device cpu] [--answers 16]   # write a corpus only

J (`--jobs`, passed to `evalkit score --jobs`) defaults to the cores the run leaves to building: every core
but one (the judge's). The targets are for one H200 (`--device cuda`, `problems/`); elsewhere the figures are
printed with "met"/"missed" and the exit code stays 0, unless `--check` (then a missed target exits 1). A run
of evalkit that fails exits 1 with its log's tail. On a CPU machine `--device cpu` writes C++-only answers
(`load_inline(cpp_sources=...)`) and the corpus defaults to the tiny problems of `tests/fixtures/problems`
(the shipped problems take minutes per call on a CPU); the seeds there are mostly skipped (CUDA code).

Run from the repository root. `--extra` takes one string of further `evalkit score` options, given with `=`
(`--extra='--baselines eager --timing-trials 20'`); it goes to every run (the lone build keeps
`--baselines none`).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from evalkit.records import STAGE_PARTS

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "benchmarks" / "corpus"
SEEDS = ROOT / "submissions" / "seeds"
SHIPPED_PROBLEMS = ROOT / "problems"
CPU_PROBLEMS = ROOT / "tests" / "fixtures" / "problems"
RUN_NAME = "synthetic"
MANIFEST = "_corpus.json"  # beside the run folder; names starting with "_" are not judged

# (category, share of the corpus, the verdict it should get). Shares: no code or syntax errors 40%, build
# failures 25%, runtime errors 10%, answers that build and run 25% (wrong, hang, slow and fast correct).
CATEGORIES = (
    ("no_code", 0.25, "no_code"),
    ("syntax_error", 0.15, "syntax_error"),
    ("compile_error", 0.25, "compile_error"),
    ("runtime_error", 0.10, "runtime_error"),
    ("wrong_answer", 0.05, "incorrect"),
    ("hang", 0.025, "timeout"),
    ("slow_correct", 0.05, "correct"),
    ("fast_correct", 0.125, "correct"),
)
EXPECTED = {name: verdict for name, _, verdict in CATEGORIES}
BUILDS = ("compile_error", "runtime_error", "wrong_answer", "hang", "slow_correct", "fast_correct")
TARGETS = {"seeds_vs_one_build": 1.3, "rescore_s": 10.0, "corpus_vs_builds_alone": 1.10}
_SECTION = re.compile(r"^%%%% (any|cpu|cuda)[ \t]*$", re.M)
# A gap between the judge's busy spans longer than this is a wait: stamps have whole seconds, and loading the next
# problem (1-2 s on the H200) is in no row's seconds.
WAIT_S = 3.0
_LIMIT = re.compile(r"exceeded its ([0-9.e+]+) s limit")  # a timeout row's reason


class BenchError(Exception):
    """A run of evalkit that failed, or a setting that cannot work; the message says which."""


# ---- the corpus -------------------------------------------------------------------------------------

def allocate(answers: int) -> dict[str, int]:
    """How many answers of each category: the shares rounded to sum to ``answers``, each category at least
    once when there are at least as many answers as categories."""
    quota = {name: share * answers for name, share, _ in CATEGORIES}
    counts = {name: int(q) for name, q in quota.items()}
    if answers >= len(CATEGORIES):
        counts = {name: max(1, c) for name, c in counts.items()}
    while sum(counts.values()) > answers:  # take from the most over-served category that has more than one
        name = max((n for n in counts if counts[n] > 1 or answers < len(CATEGORIES) and counts[n] > 0),
                   key=lambda n: counts[n] - quota[n])
        counts[name] -= 1
    while sum(counts.values()) < answers:  # give to the most under-served one (ties: the table's order)
        name = max(counts, key=lambda n: quota[n] - counts[n])
        counts[name] += 1
    return counts


def templates(device: str) -> dict[str, list[str]]:
    """Each category's answer texts for ``device`` (sections tagged ``any`` or ``device``)."""
    found = {}
    for name, _, _ in CATEGORIES:
        text = (TEMPLATES / f"{name}.md").read_text()
        parts = _SECTION.split(text)  # ["", tag, body, tag, body, ...]
        bodies = [body.strip("\n") + "\n" for tag, body in zip(parts[1::2], parts[2::2]) if tag in ("any", device)]
        if not bodies:
            raise BenchError(f"{TEMPLATES / (name + '.md')}: no section for device {device!r} (nor 'any')")
        found[name] = bodies
    return found


def problem_ids(problems_dir: Path) -> list[str]:
    ids = sorted(p.name for p in problems_dir.iterdir() if (p / "reference.py").is_file() and p.name[0] not in "._")
    if not ids:
        raise BenchError(f"{problems_dir}: no problem folders (each holds a reference.py)")
    return ids


def fill(template: str, token: str, problem: str, reference: str) -> str:
    return (template.replace("{{REFERENCE}}", reference.strip("\n")).replace("{{TOKEN}}", token)
            .replace("{{PROBLEM}}", problem))


def make_corpus(out: Path, problems_dir: Path, device: str, answers: int, seed: int = 0,
                cache_hits: bool = False) -> dict[str, Any]:
    """Write ``answers`` answers as the run ``synthetic`` under ``out``, and ``out/_corpus.json`` saying
    each one's category; return that manifest. Categories are shuffled (``seed``), problems round-robin.

    Every answer carries its own token, so no two answers that build share a build; with ``cache_hits``,
    answers of the same category and problem share theirs (the later ones hit the build cache)."""
    problems = problem_ids(problems_dir)
    references = {p: (problems_dir / p / "reference.py").read_text() for p in problems}
    texts = templates(device)
    order = [name for name, count in allocate(answers).items() for _ in range(count)]
    random.Random(seed).shuffle(order)
    used: Counter[str] = Counter()
    entries = []
    for index, category in enumerate(order):
        problem = problems[index % len(problems)]
        if cache_hits:
            token, variant = f"s{seed}_{category}_{problems.index(problem)}", problems.index(problem)
        else:
            token, variant = f"s{seed}_{index:03d}", used[category]
        used[category] += 1
        sample = f"{index:03d}_{category}"
        path = out / RUN_NAME / problem / f"{sample}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        variants = texts[category]
        path.write_text(fill(variants[variant % len(variants)], token, problem, references[problem]))
        entries.append({"sample": sample, "problem": problem, "category": category, "expected": EXPECTED[category],
                        "token": token, "builds": category in BUILDS, "path": str(path.relative_to(out))})
    manifest = {"device": device, "seed": seed, "answers": answers, "cache_hits": cache_hits,
                "problems_dir": str(problems_dir), "problems": problems, "counts": dict(Counter(order)),
                "entries": entries}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


# ---- running evalkit --------------------------------------------------------------------------------

@dataclass
class Scored:
    rows: list[dict[str, Any]]
    wall_s: float
    started: float  # time.time() when the command started
    finished: float


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path, reports: Path) -> None:
        self.args, self.work, self.reports = args, work, reports

    def cache(self, name: str) -> Path:
        path = self.work / "caches" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def score(self, submissions: Path, name: str, cache: Path, problems: Path, jobs: int | None = None,
              after: tuple[str, ...] = ()) -> Scored:
        """``evalkit score submissions`` into ``reports/name``; its output goes to ``reports/name.log``."""
        a = self.args
        out, log = self.reports / name, self.reports / f"{name}.log"
        command = [sys.executable, "-m", "evalkit", "score", str(submissions), "--problems", str(problems),
                   "--out", str(out), "--device", a.device, "--jobs", str(jobs or a.jobs), "--cache-dir", str(cache),
                   "--no-progress"]
        if a.timeout is not None:
            command += ["--timeout", f"{a.timeout:g}"]
        command += shlex.split(a.extra) + list(after)
        started, start = time.time(), time.monotonic()
        with log.open("w") as sink:
            sink.write("$ " + shlex.join(command) + "\n")
            sink.flush()
            code = subprocess.run(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT).returncode
        wall = time.monotonic() - start
        if code != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
            raise BenchError(f"evalkit score exited {code} ({log}):\n{tail}")
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
        return Scored(rows, wall, started, time.time())


def fresh_build_s(row: dict[str, Any]) -> float:
    """The seconds this row's build took in this run (0 when it came from the cache or nothing was built)."""
    build = row.get("build") or {}
    return 0.0 if build.get("cached") else float((row.get("stage_seconds") or {}).get("build_s", 0.0))


def builds_alone_wall_s(rows: list[dict[str, Any]], jobs: int) -> float:
    """The wall the fresh builds of ``rows`` alone need on ``jobs`` parallel jobs: each build's measured seconds,
    started in evalkit's order (problem, then sample number, as its build pool starts them) on the first free
    job, until the last one ends. Unlike the total / ``jobs`` it counts the tail, when fewer builds than jobs
    are left to run."""
    free_at = [0.0] * max(jobs, 1)
    for row in sorted(rows, key=_submission_order):
        if seconds := fresh_build_s(row):
            heapq.heappush(free_at, heapq.heappop(free_at) + seconds)
    return max(free_at)


def _submission_order(row: dict[str, Any]) -> tuple[str, str, int, str]:
    number = re.match(r"\d+", row["sample"])
    return row["problem"], row.get("run", ""), int(number.group()) if number else -1, row["sample"]


def judge_s(row: dict[str, Any]) -> float:
    """The judge's seconds on this row: its recorded stages, plus the limit of a stage that timed out (a row
    records only the stages that finished; its reason names the limit that ended the other)."""
    return sum(v for k, v in (row.get("stage_seconds") or {}).items()
               if k != "build_s" and k not in STAGE_PARTS) + timed_out_s(row)


def timed_out_s(row: dict[str, Any]) -> float:
    match = _LIMIT.search(row.get("reason") or "") if row.get("verdict") == "timeout" else None
    return float(match.group(1)) if match else 0.0


def verdicts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(r["verdict"] for r in rows).items()))


def _stamp(row: dict[str, Any]) -> float | None:
    return _when(row.get("judged_at"))


def _when(text: Any) -> float | None:
    """An ISO time stamp (as rows and baselines write them) in seconds since the epoch; None if it is not one."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (AttributeError, TypeError, ValueError):
        return None


def timeline(scored: Scored) -> dict[str, float | None]:
    """From the rows' ``judged_at``: the start until the first row, and the last row until the exit."""
    stamps = sorted(s for s in map(_stamp, scored.rows) if s is not None)
    if not stamps:
        return {"to_first_row_s": None, "after_last_row_s": None}
    return {"to_first_row_s": stamps[0] - scored.started, "after_last_row_s": scored.finished - stamps[-1]}


def _measured_entries(report: Path, started: float) -> list[dict[str, Any]]:
    """The report's baselines.json entries (one per problem) this run timed: those measured before the run
    started came from the cache and cost nothing."""
    try:
        entries = json.loads((report / "baselines.json").read_text())
    except (OSError, ValueError):
        return []
    return [entry for entry in entries.values() if (_when(entry.get("measured_at")) or 0.0) >= int(started)]


def measured_baselines(report: Path, started: float) -> list[dict[str, Any]]:
    """Each baseline kind this run timed."""
    return [kind for entry in _measured_entries(report, started) for kind in entry.values() if isinstance(kind, dict)]


def judge_tail_s(rows: list[dict[str, Any]], report: Path, started: float) -> float | None:
    """The judge's seconds from the end of its last wait to its last row: the judging left once the builds it
    waited for were done, on the corpus's critical path. Each row and each problem's baselines is a busy span
    ending at its stamp; a gap of more than ``WAIT_S`` between spans is a wait. One judge only."""
    spans = [(end - judge_s(row), end) for row in rows if (end := _stamp(row)) is not None and judge_s(row) > 0]
    for entry in _measured_entries(report, started):
        busy = sum(kind.get("judge_s", 0.0) for kind in entry.values() if isinstance(kind, dict))
        spans.append((_when(entry["measured_at"]) - busy, _when(entry["measured_at"])))
    if not spans:
        return None
    spans.sort(key=lambda span: span[1])
    tail_start = spans[-1][0]
    for start, end in reversed(spans[:-1]):
        if tail_start - end > WAIT_S:
            break
        tail_start = min(tail_start, start)
    return spans[-1][1] - tail_start


def baselines_s(report: Path, started: float) -> float:
    """The judge's seconds on baselines this run timed (each kind's ``judge_s``)."""
    return sum(kind.get("judge_s", 0.0) for kind in measured_baselines(report, started))


def baseline_stages(report: Path, started: float) -> dict[str, float]:
    """The stage seconds of the baselines this run timed, summed (what their ``judge_s`` went to)."""
    stages: dict[str, float] = defaultdict(float)
    for kind in measured_baselines(report, started):
        for stage, seconds in (kind.get("stage_seconds") or {}).items():
            stages[stage] += seconds
    return dict(stages)


def target(figures: dict[str, Any], name: str, value: float | None) -> str:
    limit = TARGETS[name]
    met = value is not None and value <= limit
    figures.setdefault("targets", {})[name] = {"value": value, "limit": limit, "met": met}
    return "met" if met else "MISSED"


# ---- the suites -------------------------------------------------------------------------------------

def seeds_suite(run: Runner, figures: dict[str, Any]) -> Path:
    """The lone build, then the seeds cold; returns the seeds' (now warm) cache."""
    args = run.args
    problem = problem_ids(args.problems)[0]
    lone = run.work / "lone"
    answer = lone / "lone" / problem / "lone_build.md"
    answer.parent.mkdir(parents=True)
    reference = (args.problems / problem / "reference.py").read_text()
    answer.write_text(fill(templates(args.device)["fast_correct"][0], f"lone{os.getpid()}", problem, reference))
    one = run.score(lone / "lone", "lone_build", run.cache("lone"), args.problems, jobs=1,
                    after=("--baselines", "none"))
    build = fresh_build_s(one.rows[0])
    print(f"seeds: one lone build ({problem}, a trivial extension, cold): build {build:.1f} s; its whole run "
          f"{one.wall_s:.1f} s, verdict {one.rows[0]['verdict']}", flush=True)
    cache = run.cache("seeds")
    seeds = run.score(SEEDS, "seeds_cold", cache, SHIPPED_PROBLEMS)
    builds = [fresh_build_s(r) for r in seeds.rows if fresh_build_s(r) > 0]
    ratio = seeds.wall_s / build if build > 0 else None
    shown_builds = f"builds of {', '.join(f'{b:.0f}' for b in sorted(builds))} s" if builds else "nothing built"
    baselines = baselines_s(run.reports / "seeds_cold", seeds.started)
    print(f"seeds: five seeds cold: {seeds.wall_s:.1f} s wall; {shown_builds}, judging "
          f"{sum(map(judge_s, seeds.rows)):.1f} s, baselines {baselines:.1f} s; "
          f"verdicts {verdicts(seeds.rows)}", flush=True)
    times = timeline(seeds)
    print(f"seeds: start to first row {_fmt(times['to_first_row_s'])} s; last row to exit "
          f"{_fmt(times['after_last_row_s'])} s (closing the judges, writing the report)")
    shown = f"{ratio:.2f}x" if ratio is not None else "n/a (the lone build built nothing)"
    print(f"seeds: cold seeds / one build = {shown} (target <= {TARGETS['seeds_vs_one_build']}x): "
          f"{target(figures, 'seeds_vs_one_build', ratio)}", flush=True)
    figures["seeds"] = {"lone_build_s": build, "lone_run_wall_s": one.wall_s, "lone_verdict": one.rows[0]["verdict"],
                        "seeds_wall_s": seeds.wall_s, "seeds_build_s": builds,
                        "seeds_judge_s": sum(map(judge_s, seeds.rows)), "seeds_baselines_s": baselines,
                        "seeds_verdicts": verdicts(seeds.rows),
                        "ratio": ratio, **{f"seeds_{k}": v for k, v in times.items()}}
    return cache


def rescore_suite(run: Runner, figures: dict[str, Any], cache: Path | None) -> None:
    if cache is None:
        cache = run.cache("seeds")
        warm = run.score(SEEDS, "seeds_warmup", cache, SHIPPED_PROBLEMS)
        print(f"rescore: seeds scored cold first to warm the cache: {warm.wall_s:.1f} s", flush=True)
    again = run.score(SEEDS, "seeds_rescore", cache, SHIPPED_PROBLEMS)
    built = [r for r in again.rows if r.get("build")]
    rebuilt = sum(1 for r in built if not r["build"].get("cached"))
    print(f"rescore: seeds into a new report, warm cache: {again.wall_s:.1f} s wall (target <= "
          f"{TARGETS['rescore_s']:g} s): {target(figures, 'rescore_s', again.wall_s)}; {len(built) - rebuilt} builds "
          f"cached, {rebuilt} rebuilt; judging {sum(map(judge_s, again.rows)):.1f} s; verdicts {verdicts(again.rows)}",
          flush=True)
    times = timeline(again)
    print(f"rescore: start to first row {_fmt(times['to_first_row_s'])} s, last row to exit "
          f"{_fmt(times['after_last_row_s'])} s", flush=True)
    figures["rescore"] = {"wall_s": again.wall_s, "builds_cached": len(built) - rebuilt, "builds_rebuilt": rebuilt,
                          "judge_s": sum(map(judge_s, again.rows)), "verdicts": verdicts(again.rows), **times}


def repo_relative(path: Path) -> str:
    """A path as a record shows it: relative to the repository when inside it (no machine's own paths)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def corpus_suite(run: Runner, figures: dict[str, Any]) -> None:
    args = run.args
    where = run.reports / "corpus"
    manifest = make_corpus(where, args.problems, args.device, args.answers, args.seed, args.cache_hits)
    where_shown = repo_relative(args.problems)
    print(f"corpus: {args.answers} answers over {len(manifest['problems'])} problems ({where_shown}), "
          f"{args.device} flavour: {manifest['counts']}", flush=True)
    scored = run.score(where / RUN_NAME, "corpus_report", run.cache("corpus"), args.problems)
    category = {e["sample"]: e["category"] for e in manifest["entries"]}
    rows = scored.rows
    stages: dict[str, float] = defaultdict(float)
    per: dict[str, dict[str, Any]] = {name: {"answers": 0, "verdicts": Counter(), "build_s": 0.0, "judge_s": 0.0}
                                      for name, _, _ in CATEGORIES}
    cached = 0
    for row in rows:
        for key, value in (row.get("stage_seconds") or {}).items():
            stages[key if key != "build_s" or fresh_build_s(row) else "build_s (cached)"] += value
        cached += bool((row.get("build") or {}).get("cached"))
        entry = per[category.get(row["sample"], "no_code")]
        entry["answers"] += 1
        entry["verdicts"][row["verdict"]] += 1
        entry["build_s"] += fresh_build_s(row)
        entry["judge_s"] += judge_s(row)
    builds = sum(map(fresh_build_s, rows))
    judging = sum(map(judge_s, rows))
    build_limited = builds / args.jobs
    builds_alone = builds_alone_wall_s(rows, args.jobs)
    ratio = scored.wall_s / builds_alone if builds_alone > 0 else None
    rate = len(rows) / scored.wall_s * 3600
    unexpected = [f"{r['problem']}/{r['sample']}: {r['verdict']} ({r['reason'][:100]})" for r in rows
                  if r["verdict"] != EXPECTED.get(category.get(r["sample"], ""), r["verdict"])]
    print(f"corpus: {len(rows)} answers in {scored.wall_s:.1f} s: {rate:.0f} answers/hour; verdicts {verdicts(rows)}",
          flush=True)
    print(f"corpus: {'category':14} {'n':>3} {'build s':>9} {'judge s':>9}  verdicts (expected)")
    for name, entry in per.items():
        print(f"corpus: {name:14} {entry['answers']:3d} {entry['build_s']:9.1f} {entry['judge_s']:9.1f}  "
              f"{dict(entry['verdicts'])} ({EXPECTED[name]})")
    print("corpus: stage seconds over the rows: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(stages.items())))
    times = timeline(scored)
    timeouts = sum(map(timed_out_s, rows))
    print(f"corpus: builds {builds:.1f} s on --jobs {args.jobs} ({sum(1 for r in rows if fresh_build_s(r))} built, "
          f"{cached} cached) -> alone they need {builds_alone:.1f} s in evalkit's order ({build_limited:.1f} s "
          f"packed perfectly, with no tail)")
    baselines = baselines_s(run.reports / "corpus_report", scored.started)
    spent_on_baselines = baseline_stages(run.reports / "corpus_report", scored.started)
    print("corpus: the baselines' stage seconds: " +
          (", ".join(f"{k} {v:.1f}" for k, v in sorted(spent_on_baselines.items())) or "none timed"))
    print(f"corpus: judging {judging:.1f} s, one answer at a time ({timeouts:.1f} s of it timed-out stages, at their "
          f"limits), and {baselines:.1f} s timing baselines; the rest of the wall, "
          f"{scored.wall_s - judging - baselines:.1f} s, the judge waited for builds, started and wrote the report "
          f"(start to first row {_fmt(times['to_first_row_s'])} s, last row to exit "
          f"{_fmt(times['after_last_row_s'])} s)")
    tail = judge_tail_s(rows, run.reports / "corpus_report", scored.started)
    print(f"corpus: the judge worked without a wait of over {WAIT_S:.0f} s for the last {_fmt(tail)} s to its last row, "
          f"from {_fmt(_minus(scored.wall_s, tail, times['after_last_row_s']))} s into the run (the builds alone: "
          f"{builds_alone:.1f} s): from there on it always had work waiting")
    shown = f"{ratio:.2f}x" if ratio is not None else "n/a (nothing was built)"
    packed = f"{scored.wall_s / build_limited:.2f}x" if build_limited > 0 else "n/a"
    print(f"corpus: wall / builds-alone wall = {shown} (target <= {TARGETS['corpus_vs_builds_alone']:.2f}x; "
          f"{packed} against perfect packing): {target(figures, 'corpus_vs_builds_alone', ratio)}", flush=True)
    if unexpected:
        print(f"corpus: {len(unexpected)} answer(s) got another verdict than their category's:")
        for line in unexpected:
            print(f"corpus:   {line}")
    figures["corpus"] = {
        "answers": len(rows), "problems": manifest["problems"], "wall_s": scored.wall_s, "answers_per_hour": rate,
        "jobs": args.jobs, "verdicts": verdicts(rows), "stage_seconds": dict(stages), "build_s": builds,
        "builds_fresh": sum(1 for r in rows if fresh_build_s(r)), "builds_cached": cached, "judge_s": judging,
        "timed_out_s": timeouts, "baselines_s": baselines, "baseline_stage_seconds": spent_on_baselines,
        "build_limited_wall_s": build_limited, "builds_alone_wall_s": builds_alone, "ratio": ratio,
        "judge_tail_s": tail,
        **timeline(scored), "unexpected": unexpected,
        "per_category": {k: {**v, "verdicts": dict(v["verdicts"]), "expected": EXPECTED[k]} for k, v in per.items()},
    }


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _minus(total: float, *parts: float | None) -> float | None:
    return None if any(part is None for part in parts) else total - sum(parts)


# ---- main -------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="all",
                        help="seeds, rescore, corpus, or all; several with commas (seeds,rescore) [all]")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None,
                        help="answers' flavour and evalkit's --device [cuda when torch sees a GPU, else cpu]")
    parser.add_argument("--problems", type=Path, default=None,
                        help="the corpus's problems [problems/ on cuda, tests/fixtures/problems on cpu]; the "
                             "seeds always use problems/")
    parser.add_argument("--answers", type=int, default=64, help="answers in the corpus [64]")
    parser.add_argument("--seed", type=int, default=0, help="shuffles the corpus's categories and names its builds")
    parser.add_argument("--cache-hits", action="store_true",
                        help="answers of one category and problem share their code (later ones hit the build "
                             "cache) [every answer is a distinct build]")
    parser.add_argument("--jobs", type=int, default=None,
                        help="evalkit score --jobs [the cores the run leaves to building: all but one]")
    parser.add_argument("--timeout", type=float, default=None,
                        help="evalkit score --timeout for every run [unset: evalkit's derived limits]")
    parser.add_argument("--extra", default="", help="further evalkit score options, one string: --extra='--gpus 1'")
    parser.add_argument("--keep", type=Path, default=None, help="keep the reports, logs and corpus in this folder")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--generate-only", type=Path, default=None, metavar="DIR",
                        help="write the corpus to DIR (and DIR/_corpus.json), score nothing")
    args = parser.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if shutil.which("nvidia-smi") and _torch_sees_cuda() else "cpu"
    if args.problems is None:
        args.problems = SHIPPED_PROBLEMS if args.device == "cuda" else CPU_PROBLEMS
    args.problems = args.problems.resolve()
    if not args.problems.is_dir():
        parser.error(f"--problems {args.problems}: no such folder")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: the folder is not empty (each run writes fresh reports there)")
    if args.jobs is None:
        args.jobs = max(1, (os.cpu_count() or 2) - 1)
    if args.answers < 1 or args.jobs < 1:
        parser.error("--answers and --jobs must be at least 1")
    suites = {word.strip() for word in args.suite.split(",")}
    if not suites <= {"seeds", "rescore", "corpus", "all"}:
        parser.error(f"--suite {args.suite!r}: choose from seeds, rescore, corpus, all (several with commas)")
    args.suites = {"seeds", "rescore", "corpus"} if "all" in suites else suites
    return args


def python_bytecode() -> str:
    """Whether Python processes here load torch from bytecode (a condition every start-up time depends on)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    origin = Path(spec.origin) if spec and spec.origin else None
    cached = bool(origin and (origin.parent / "__pycache__").is_dir())
    writes = "not written (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "written when missing"
    return f"torch {'has' if cached else 'has no'} compiled bytecode; new bytecode {writes}"


def _torch_sees_cuda() -> bool:
    probe = [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"]
    try:
        return subprocess.run(probe, capture_output=True, text=True, timeout=120).stdout.strip() == "True"
    except (OSError, subprocess.SubprocessError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.generate_only is not None:
        manifest = make_corpus(args.generate_only.resolve(), args.problems, args.device, args.answers, args.seed,
                               args.cache_hits)
        print(f"wrote {args.answers} answers ({args.device}) to {args.generate_only / RUN_NAME}: {manifest['counts']}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="evalkit-throughput-"))
    work.chmod(0o755)  # the sandbox user must reach the build caches inside (evalkit warns otherwise)
    reports = args.keep.resolve() if args.keep else work / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    run = Runner(args, work, reports)
    figures: dict[str, Any] = {"device": args.device, "jobs": args.jobs, "cores": os.cpu_count(),
                               "problems": repo_relative(args.problems), "extra": args.extra, "timeout": args.timeout,
                               "started": datetime.now().isoformat(timespec="seconds")}
    figures["python_bytecode"] = python_bytecode()
    print(f"throughput: device {args.device}, --jobs {args.jobs} of {os.cpu_count()} cores, suites "
          f"{','.join(s for s in ('seeds', 'rescore', 'corpus') if s in args.suites)}"
          + (f", extra {args.extra!r}" if args.extra else ""), flush=True)
    print(f"throughput: Python bytecode: {figures['python_bytecode']} (without it every process that imports "
          f"torch compiles it from source: seconds per judge and per worker)", flush=True)
    try:
        cache = seeds_suite(run, figures) if "seeds" in args.suites else None
        if "rescore" in args.suites:
            rescore_suite(run, figures, cache)
        if "corpus" in args.suites:
            corpus_suite(run, figures)
    except BenchError as err:
        print(f"throughput: {err}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
    missed = [name for name, t in figures.get("targets", {}).items() if not t["met"]]
    print(f"targets (one H200): {len(figures.get('targets', {})) - len(missed)} met"
          + (f", missed: {', '.join(missed)}" if missed else ""))
    if args.keep:
        print(f"reports, logs and corpus kept in {reports}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
