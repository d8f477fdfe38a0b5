"""Benchmark: `evalkit serve` driven as a GRPO trainer drives its reward service. Prints the figures.

Starts `python3 -m evalkit serve` (the CLI only) and runs STEPS steps; each step sends every problem's reference
as text (`reference_code`, as an RL dataset carries it) with its group of answers, one `POST /v1/batch` per
problem, all at once, then polls every batch until it is done. Printed per step: the time to the first reward
(the first row of any batch), the step's wall time, rewards per minute, the verdicts, and the server's resident
memory (its process and every child's) after the step, with the bytes of the rows it keeps for polls (bounded by
`evalkit serve --kept-mib`). A later step sends the same texts again: its builds and
baselines are cached, so it shows what a warm reward service costs, and its memory shows whether the server grows.

Answers come from ANSWERS/<problem>/<file> (`.py`, `.md` or `.txt`, each one answer), for the problems of
PROBLEMS that have any; `--group G` takes G answers a problem (cycling through the files).

    python3 benchmarks/rl_step.py [--problems problems/] [--answers BENCH_ANSWERS] [--steps 3] [--group 8]
        [--device cuda|cpu] [--extra='--timing-trials 20'] [--cache DIR] [--json FILE] [--against FILE]
        [--step-limit SECONDS]

`--cache DIR` keeps the server's cache (builds, baselines) in DIR, so a later run with other options starts warm;
without it every run starts from an empty one. Each step's figures include the sum of its rows' stage seconds
(where a reward's time went) and its correct rows' speedups; `--against FILE` (another run's `--json`) prints, per
answer judged correct in both, how far this run's speedup over eager lies from that run's: whether an option moved
a speedup. `--step-limit S` cuts a step short after S seconds: its figures are those of the rewards back, with the
answers still out (`outstanding`, per problem), and no later step runs. So a run with a time limit records where it
stood, instead of being killed with nothing written. The server's log is kept beside `--json` (else in a file of
the system's temporary folder); a step whose verdicts differ from the first step's is named at the end, with it.
On a CUDA machine with `nvidia-smi`, each step also records the GPU's busy fraction and memory, sampled every
0.5 s over the step (`gpu`, by the sampler `evalkit score` uses, `evalkit.schedule.gpu_busy`): whether judges that
overlap their stages keep the GPU busier, or only take turns on it. Each step records the CPU seconds the server's
process used in it (`cpu_s.server`: its threads, the judge's among them where one judge runs in the server) and those
of its children that ended in it (`cpu_s.ended_children`: the answers' workers, builds): set against the step's
wall time, whether the judge's own process is what holds a step.

On a CPU machine: `--device cpu --problems tests/fixtures/judge_problems --answers
tests/fixtures/judge_submissions/fixtures`. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from evalkit.schedule.gpu_busy import GpuBusySampler, device_ids

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.2
GPU_SAMPLE_MS = 500


def groups(problems: Path, answers: Path, size: int, distinct: bool = False) -> dict[str, tuple[str, list[str]]]:
    """problem id -> (its reference's text, ``size`` answer texts cycling through its answer files; ``distinct``:
    each one's code made a text of its own, ``rollout``)."""
    if not answers.is_dir():
        sys.exit(f"rl_step: --answers {answers} is no folder: give one holding ANSWERS/<problem>/<answer files>")
    found = {}
    for folder in sorted(p for p in answers.iterdir() if p.is_dir()):
        reference = problems / folder.name / "reference.py"
        files = sorted(f for f in folder.iterdir() if f.suffix in (".py", ".md", ".txt"))
        if reference.is_file() and files:
            texts = [files[n % len(files)].read_text() for n in range(size)]
            texts = [rollout(text, n) for n, text in enumerate(texts)] if distinct else texts
            found[folder.name] = (reference.read_text(), texts)
    if not found:
        sys.exit(f"rl_step: no answers under {answers}/<problem>/ for a problem of {problems}")
    return found


def rollout(text: str, place: int) -> str:
    """``text`` with a comment naming its ``place`` in the group at the end of the code evalkit extracts from it: an
    RL group's rollouts are distinct texts, each built on its own, where a group cycling through a few files sends the
    same code again (one build, one cache entry: what a judge that overlaps answers serializes)."""
    from evalkit.intake.extract import extract

    code = extract(text).code
    if not code or text.count(code) != 1:
        return text
    return text.replace(code, f"{code.rstrip()}\n# rollout {place}\n", 1)


def call(url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


def kept_rows_mib(base: str) -> float:
    """The rows the server keeps for polls, in MiB: part of its memory by design, bounded (``--kept-mib``)."""
    return call(f"{base}/v1/health").get("kept_bytes", 0) / 2**20


def resident_mib(pid: int) -> float:
    """The resident memory of ``pid`` and every descendant, in MiB (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    family, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in family} - family
        family |= more
        grew = bool(more)
    total_kib = 0
    for member in family:
        try:
            status = (Path("/proc") / str(member) / "status").read_text()
        except OSError:
            continue
        total_kib += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kib / 1024


def cpu_seconds(pid: int) -> tuple[float, float]:
    """The CPU seconds ``pid`` has used (its threads', the judge's among them where it runs in the server) and those
    of the children it has reaped (ended workers and builds, with what they reaped), from /proc/PID/stat."""
    fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])  # fields 14-17 of proc(5)
    return (utime + stime) / tick, (cutime + cstime) / tick


def start_server(args: argparse.Namespace, cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "evalkit", "serve", "--port", str(port), "--device", args.device,
               "--problems", str(args.problems), "--cache-dir", str(cache), *shlex.split(args.extra)]
    with log.open("w") as out:  # its line per request: a pipe nobody reads would fill and stop it
        server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=out, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"rl_step: evalkit serve ended ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            call(f"{base}/v1/health")
            return server, base
        except (OSError, urllib.error.URLError):
            time.sleep(0.5)
    server.kill()
    sys.exit("rl_step: evalkit serve did not answer /v1/health within 300 s")


def step(base: str, work: dict[str, tuple[str, list[str]]], limit_s: float = math.inf) -> dict[str, Any]:
    """One step: every problem's group sent at once, polled until every reward is back, or until ``limit_s`` has
    passed; then the step is cut short, its figures those of the rewards back, with the answers still out."""
    start = time.monotonic()
    ids = {call(f"{base}/v1/batch", {"items": [{"reference_code": reference, "answer": text} for text in texts]})["id"]:
           name for name, (reference, texts) in work.items()}
    first_s, rows, done = None, {batch_id: [] for batch_id in ids}, set()
    while True:
        for batch_id in set(ids) - done:
            state = call(f"{base}/v1/batch/{batch_id}")
            rows[batch_id] = state["rows"]
            if state["rows"] and first_s is None:
                first_s = time.monotonic() - start
            if state["done"]:
                done.add(batch_id)
        if len(done) == len(ids) or time.monotonic() - start >= limit_s:
            break
        time.sleep(POLL_S)
    wall_s = time.monotonic() - start
    figures = step_figures([{**row, "problem": ids[batch_id]} for batch_id, batch in rows.items() for row in batch],
                           wall_s, first_s)
    if len(done) < len(ids):
        figures["last_reward_s"] = None
        figures["outstanding"] = {ids[batch_id]: outstanding(len(work[ids[batch_id]][1]), rows[batch_id])
                                  for batch_id in ids if batch_id not in done}
    return figures


def outstanding(size: int, rows: list[dict[str, Any]]) -> list[int]:
    """The items of a batch of ``size`` answers whose rewards are not back among ``rows``."""
    return sorted(set(range(size)) - {row["item"] for row in rows})


def step_figures(decided: list[dict[str, Any]], wall_s: float, first_s: float | None) -> dict[str, Any]:
    """A step's figures from the rows back (``decided``) after ``wall_s`` seconds."""
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in decided:
        rows_of.setdefault(row["problem"], []).append(row)
    by_problem = {problem: {"answers": len(rows), "correct": sum(r["verdict"] == "correct" for r in rows),
                            **stage_sums(rows)} for problem, rows in sorted(rows_of.items())}
    return {"wall_s": wall_s, "last_reward_s": wall_s, "first_reward_s": first_s, "rewards": len(decided),
            "rewards_per_minute": len(decided) / wall_s * 60, "verdicts": dict(Counter(r["verdict"] for r in decided)),
            "feedback_chars_median": statistics.median(len(r.get("feedback") or "") for r in decided) if decided else None,
            "stage_seconds": stage_sums(decided), "stage_seconds_by_problem": by_problem,
            "flags": dict(Counter(flag for r in decided for flag in r.get("flags") or [])),
            "reasons": dict(Counter(f"{r['verdict']}: {r.get('reason', '')[:200]}" for r in decided
                                    if r["verdict"] != "correct")),
            "speedups": {answer_key(row): speedup_figures(row) for row in decided if row["verdict"] == "correct"},
            "answers": {answer_key(row): answer_figures(row) for row in decided}}


def stage_sums(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The rows' stage seconds summed by stage, largest first: where the judge's time went."""
    stages: Counter[str] = Counter()
    for row in rows:
        stages.update({name: seconds for name, seconds in (row.get("stage_seconds") or {}).items()})
    return {name: round(seconds, 2) for name, seconds in stages.most_common()}


def answer_figures(row: dict[str, Any]) -> dict[str, Any]:
    """Where one answer's time went: its stages, its judge, and what ended its timing after how many requests, in how
    many windows (a noisy one is timed again), with the part of a request subtracted per call and its spread."""
    timing = row.get("timing") or {}
    return {"verdict": row["verdict"], "judge": row.get("judge"), "stage_seconds": row.get("stage_seconds"),
            **{key: timing.get(key) for key in ("requests", "calls_per_request", "stopped_by", "median_ms", "attempts",
                                                "overhead_ms", "jitter_ms")}}


def answer_key(row: dict[str, Any]) -> str:
    """An answer's name across runs: its problem and its place in the problem's group."""
    return f"{row['problem']}#{row['item']}"


def speedup_figures(row: dict[str, Any]) -> list[float | None]:
    """A correct row's speedup over eager with its interval's ends."""
    low, high = row.get("speedup_vs_eager_ci") or (None, None)
    return [row.get("speedup_vs_eager"), low, high]


def compare(steps: list[dict[str, Any]], other: dict[str, Any]) -> None:
    """Per answer judged correct in the last step of both runs, this run's speedup against the other's."""
    mine, theirs = steps[-1]["speedups"], other["steps"][-1]["speedups"]
    shared = sorted(key for key in mine if key in theirs and mine[key][0] and theirs[key][0])
    gaps = []
    for key in shared:
        gap = mine[key][0] / theirs[key][0] - 1
        gaps.append(gap)
        print(f"  {key:48} {mine[key][0]:7.3f} vs {theirs[key][0]:7.3f}  ({gap:+.1%})")
    if gaps:
        print(f"speedups against the other run: {len(gaps)} answers, median {statistics.median(gaps):+.1%}, "
              f"largest {max(gaps, key=abs):+.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=ROOT / "problems")
    parser.add_argument("--answers", type=Path, required=True, help="ANSWERS/<problem>/<answer files>")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--group", type=int, default=8, help="answers a problem, each step")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--extra", default="", help="further `evalkit serve` options, as one string")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="the server's cache folder, kept (default: a new one)")
    parser.add_argument("--against", type=Path, default=None, help="another run's --json: compare the speedups")
    parser.add_argument("--distinct", action="store_true",
                        help="make each answer's code a text of its own (a comment naming its place), as an RL "
                             "group's rollouts are: every answer builds on its own")
    parser.add_argument("--step-limit", type=float, default=math.inf,
                        help="seconds a step may take: then it is cut short, its answers still out recorded, and no "
                             "later step runs (default: none)")
    args = parser.parse_args()
    if not args.step_limit > 0:  # a NaN too
        parser.error(f"--step-limit must be a number of seconds > 0, got {args.step_limit}")
    work = groups(args.problems, args.answers, args.group, args.distinct)
    other = json.loads(args.against.read_text()) if args.against and args.against.is_file() else None
    if args.against and other is None:
        print(f"rl_step: {args.against} does not exist (that run did not finish): no comparison", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `timeout` still stops the server (``finally``)
    with tempfile.TemporaryDirectory(prefix="evalkit-rl-step-") as scratch:
        log = args.json.with_suffix(".serve.log") if args.json else kept_file(".serve.log")
        server, base = start_server(args, args.cache or Path(scratch) / "cache", log)
        gpus = device_ids([0]) if args.device == "cuda" else {}
        try:
            with GpuBusySampler(gpus, sample_ms=GPU_SAMPLE_MS) as sampler:
                steps = run_steps(args, base, work, server.pid, sampler)
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
    growth = steps[-1]["server_rss_mib"] - steps[0]["server_rss_mib"] if len(steps) > 1 else 0.0
    print(f"rl_step: {len(work)} problems x {args.group} answers x {len(steps)} steps; server memory from the first "
          f"step to the last: {growth:+.0f} MiB")
    moved = moved_verdicts(steps)
    if moved:
        print(f"rl_step: the verdicts of step(s) {', '.join(map(str, moved))} differ from step 1's, for the same "
              f"answers; the server's log says why: {log}")
    if other is not None:
        compare(steps, other)
    if args.json:
        write_json(args, len(work), steps)


def run_steps(args: argparse.Namespace, base: str, work: dict[str, tuple[str, list[str]]], server_pid: int,
              sampler: GpuBusySampler) -> list[dict[str, Any]]:
    """The steps, each one's figures printed (and written to ``--json``) as it ends, the GPU's over that step alone;
    a step cut short is the last."""
    steps: list[dict[str, Any]] = []
    used = cpu_seconds(server_pid)
    for number in range(1, args.steps + 1):
        figures = step(base, work, args.step_limit)
        figures["server_rss_mib"] = resident_mib(server_pid)
        figures["kept_rows_mib"] = kept_rows_mib(base)
        figures["gpu"] = (sampler.window_figures() or {}).get("0")
        before, used = used, cpu_seconds(server_pid)
        figures["cpu_s"] = {"server": used[0] - before[0], "ended_children": used[1] - before[1]}
        steps.append(figures)
        first = f"{figures['first_reward_s']:.2f} s" if figures["first_reward_s"] is not None else "none"
        print(f"step {number}: {figures['rewards']} rewards in {figures['wall_s']:.1f} s "
              f"({figures['rewards_per_minute']:.1f}/min), first after {first}, "
              f"server {figures['server_rss_mib']:.0f} MiB (rows kept {figures['kept_rows_mib']:.1f}); "
              f"{figures['verdicts']}; flags {figures['flags']}\n"
              f"  stage seconds {figures['stage_seconds']}\n"
              + "".join(f"    {problem}: {stages}\n" for problem, stages in figures["stage_seconds_by_problem"].items())
              + f"  CPU seconds {figures['cpu_s']}"
              + (f"\n  GPU {figures['gpu']}" if figures["gpu"] else ""), flush=True)
        if args.json:  # after every step: a run cut short keeps the steps it finished
            write_json(args, len(work), steps)
        if "outstanding" in figures:
            print(f"step {number} cut short after {args.step_limit:g} s; answers still out: {figures['outstanding']}",
                  flush=True)
            break
    return steps


def kept_file(suffix: str) -> Path:
    """A new file that outlasts the run (the server's log, without ``--json``): a step gone wrong is read there."""
    handle, name = tempfile.mkstemp(prefix="evalkit-rl-step-", suffix=suffix)
    os.close(handle)
    return Path(name)


def moved_verdicts(steps: list[dict[str, Any]]) -> list[int]:
    """The numbers of the steps whose verdicts' counts differ from the first step's: each step judges the same
    answers, so a step's verdicts should never move (a step cut short is not compared)."""
    first = steps[0]["verdicts"] if steps else {}
    return [number for number, figures in enumerate(steps, 1)
            if "outstanding" not in figures and figures["verdicts"] != first]


def write_json(args: argparse.Namespace, problems: int, steps: list[dict[str, Any]]) -> None:
    growth = steps[-1]["server_rss_mib"] - steps[0]["server_rss_mib"]
    args.json.write_text(json.dumps({"problems": problems, "group": args.group, "extra": args.extra, "steps": steps,
                                     "memory_growth_mib": growth}, indent=2))


if __name__ == "__main__":
    main()
