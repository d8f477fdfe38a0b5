"""Does evalkit's speedup equal what the field measures in one process? Times the same answers both ways, in one call.

1. **evalkit**: `python3 -m evalkit score SET --problems PROBLEMS` (the CLI only, as a user runs it) `--runs` times
   (default 3) into fresh report folders, its baselines timed again each time, for every SET given (`--set`, several
   allowed: the curated solutions of `problems/` and the microsecond fixture of `benchmarks/fixtures/`).
2. **In one process, the field's way** (KernelBench's: `benchmarks/fidelity_in_process.py`, nothing imported from evalkit): for each
   answer evalkit judged correct in the first run, a fresh Python process loads the problem's `Model` and the
   answer's `ModelNew` (the code evalkit extracted; each extension it builds with `load_inline` is the library evalkit
   built for it, the same binary, loaded from evalkit's build folder, so nothing is built again), both constructed under one seed with the reference's weights copied in where they fit,
   in the problem's precision, on one set of inputs from `get_inputs()`; it times each with device events around
   every forward and a synchronize after it (on a CPU, the host clock), after 5 warm-up calls, and takes the mean of
   100 calls (1000 when a call of the reference takes under 0.1 ms); with `--compile`, `torch.compile(Model)`
   likewise. `--rounds` rounds (default 3) in that process, the reference and the answer in turn.
3. **Printed** per answer: evalkit's speedup vs eager in each run (its 95% interval's half-width beside it), the
   in-process speedups, evalkit / in-process (median over the runs against median over the rounds), the farthest run
   from the runs' median, and how many runs lie inside the other runs' intervals; per run, where the answer's and its
   baseline's requests went beyond their events (`timing.request_parts_ms`: until the reply, the freeze, the idle
   probe); the same for `torch.compile` where both were measured. Then the targets (issue 41), each "met" or
   "MISSED" (`--check`: a miss exits 1, by the main setting's runs):

   - agreement: evalkit / in-process within 2% on millisecond answers, 5% on microsecond ones (the reference under
     0.1 ms a call), for eager and compile;
   - reproducible: every run within 2% of the runs' median;
   - honest intervals: each run inside the other runs' intervals in at least 5 of 6 cases, per answer;
   - narrow intervals: half-width at most 3% on millisecond answers, 10% on microsecond ones.

4. **With other settings** (`--against OPTIONS`, repeatable, e.g. `--against "--judges 2"`): each run of the main
   setting (`--extra`) is followed by one run with each, beside the same in-process figures, and each answer's
   speedup under them is printed as a share of the main setting's: whether the options move a speedup, measured in
   one call.

`--json FILE` is written after every run, so a call cut short keeps what it measured.

    python3 benchmarks/fidelity.py [--set problems/ --set benchmarks/fixtures/] [--runs 3] [--rounds 3]
        [--baselines eager|eager,compile] [--compile] [--device cuda|cpu] [--extra OPTIONS] [--against OPTIONS]
        [--keep DIR] [--json FILE] [--check]

On a CPU (where both sides run too, slower and noisier): `python3 benchmarks/fidelity.py --device cpu --set
tests/fixtures/fidelity_problems --runs 2 --rounds 2`. Run from the repository root.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from reproducibility import inside_others  # noqa: E402  (how many runs lie inside the other runs' intervals)

MICRO_MS = 0.1  # a reference call under this is a microsecond answer: looser targets, more calls in one process
TARGETS = {"agreement": (0.02, 0.05), "reproducible": (0.02, 0.02), "half_width": (0.03, 0.10)}  # (ms, micro)
INSIDE_AT_LEAST = 5 / 6
IN_PROCESS_LIMIT_S = 120  # one answer's process: loading (no build) and its rounds

# The field's method, in a fresh process per answer (its rounds in turn): argv[1] is a JSON job, stdout one JSON line.
IN_PROCESS = ROOT / "benchmarks" / "fidelity_in_process.py"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", dest="sets", help="a problems folder whose curated solutions are "
                        "judged (its own --problems); repeatable [problems/ and benchmarks/fixtures/]")
    parser.add_argument("--runs", type=int, default=3, help="evalkit runs [3]")
    parser.add_argument("--rounds", type=int, default=3, help="in-process rounds in each answer's process [3]")
    parser.add_argument("--baselines", default="eager", help="evalkit's baselines [eager]")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile in one process")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--calls", type=int, default=100, help="timed calls a process [100]")
    parser.add_argument("--micro-calls", type=int, default=1000, help="... for a microsecond reference [1000]")
    parser.add_argument("--distinct", type=int, default=0, help="diagnosis, for a microsecond problem: also time N "
                        "calls on distinct inputs with every output kept, as evalkit's worker calls them [0: not]")
    parser.add_argument("--variants", type=lambda text: [v for v in text.split(",") if v], default=[],
                        help="diagnosis: also time both models in one process paced other ways, e.g. "
                        "kb,gaps,blocks,evalkit (kb: the field's loop again; gaps: the GPU idle --gap-ms before "
                        "each call; blocks: calls in evalkit's requests of K, idle before each; evalkit: blocks with "
                        "the L2 flushed, outputs kept, inputs alternating) [none]")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="the idle gap of --variants [20]")
    parser.add_argument("--variant-calls", type=int, default=100, help="timed calls a variant and model [100]")
    parser.add_argument("--extra", default="", help="more `evalkit score` options, e.g. '--timing-budget 5'; a single "
                        "option with '=': --extra=--overlap")
    parser.add_argument("--against", action="append", default=[], help="other `evalkit score` options to run too, "
                        "each run alternated with --extra's, beside the same in-process figures, e.g. '--judges 2'; "
                        "a single option with '=': --against=--overlap (repeatable) [none]")
    parser.add_argument("--keep", type=Path, help="keep the report folders here")
    parser.add_argument("--json", type=Path, help="write the figures here, after every run")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    args.sets = args.sets or ["problems/", "benchmarks/fixtures/"]
    if args.device == "cuda" and os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # one GPU: both methods on the same one
    return args


def score(args: argparse.Namespace, where: Path, extra: str) -> list[dict[str, Any]]:
    """One evalkit run over every set with the options ``extra``: its correct rows' figures, and every row's
    verdict."""
    rows: list[dict[str, Any]] = []
    for number, folder in enumerate(args.sets):
        out = where / f"set{number}"
        command = [sys.executable, "-m", "evalkit", "score", folder, "--problems", folder, "--out", str(out),
                   "--baselines", args.baselines, "--device", args.device, "--remeasure-baselines", "--no-progress",
                   "-q", *extra.split()]
        done = subprocess.run(command, cwd=ROOT, text=True, capture_output=True)
        if done.returncode != 0:
            sys.exit(f"fidelity.py: evalkit score {folder} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
        for line in (out / "results.jsonl").read_text().splitlines():
            if line.strip():
                rows.append({**json.loads(line), "set": folder})
    return rows


def in_process(args: argparse.Namespace, row: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The answer of ``row`` and its reference timed the field's way in a fresh process: one figure a round."""
    with tempfile.TemporaryDirectory() as scratch:
        answer = Path(scratch) / "answer.py"
        answer.write_text(row["extraction"]["code"])
        job = {"device": args.device, "reference": str(ROOT / row["set"] / row["problem"] / "reference.py"),
               "answer": str(answer), "precision": row.get("precision") or "fp32", "seed": seed, "warmup": 5,
               "calls": args.calls, "micro_calls": args.micro_calls, "micro_ms": MICRO_MS, "compile": args.compile,
               "rounds": args.rounds, "distinct": args.distinct, "variants": args.variants, "gap_ms": args.gap_ms,
               "variant_calls": args.variant_calls, "block": (row.get("timing") or {}).get("calls_per_request") or 1}
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor")}
        extensions = (row.get("build") or {}).get("extension_dir")
        if extensions:  # where evalkit built it: the answer's load_inline loads that library (``built_inline``)
            env.update({"TORCH_EXTENSIONS_DIR": extensions, "MAX_JOBS": "4", **arch_setting(args.device)})
        try:
            done = subprocess.run([sys.executable, str(IN_PROCESS), json.dumps(job)], cwd=scratch, env=env,
                                  text=True, capture_output=True, timeout=IN_PROCESS_LIMIT_S)
        except subprocess.TimeoutExpired:
            return [{"error": f"no figure within {IN_PROCESS_LIMIT_S} s (an extension built again?)"}]
    if done.returncode != 0:
        return [{"error": (done.stderr or done.stdout)[-600:]}]
    return json.loads(done.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=None)
def arch_setting(device: str) -> dict[str, str]:
    """``TORCH_CUDA_ARCH_LIST`` as evalkit's builds set it (the GPU's own capability), so that torch finds the build
    evalkit made up to date; {} on a CPU. Asked of a process of its own: this one holds no CUDA context while evalkit
    times."""
    if device != "cuda":
        return {}
    asked = subprocess.run([sys.executable, "-c", "import torch; print('%d.%d' % torch.cuda.get_device_capability())"],
                           capture_output=True, text=True, check=True)
    return {"TORCH_CUDA_ARCH_LIST": asked.stdout.strip().splitlines()[-1]}


def key(row: dict[str, Any]) -> str:
    return f"{row['problem']}/{row['sample']}"


def half_width(row: dict[str, Any], kind: str) -> float | None:
    interval, value = row.get(f"speedup_vs_{kind}_ci"), row.get(f"speedup_vs_{kind}")
    return (interval[1] - interval[0]) / 2 / value if interval and value else None


def summarize(runs: list[list[dict[str, Any]]], rounds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per answer judged correct in every run: both methods' figures and how they compare."""
    answers: dict[str, Any] = {}
    for name in {key(row) for run in runs for row in run}:
        rows = [next((r for r in run if key(r) == name), None) for run in runs]
        if any(r is None or r.get("verdict") != "correct" or not r.get("speedup_vs_eager") for r in rows):
            answers[name] = {"verdicts": [r.get("verdict") if r else None for r in rows]}
            continue
        timed = [r for r in rounds.get(name, []) if "error" not in r]
        answers[name] = figures(rows, timed, [r["error"] for r in rounds.get(name, []) if "error" in r])
    return answers


def figures(rows: list[dict[str, Any]], timed: list[dict[str, Any]], errors: list[str]) -> dict[str, Any]:
    micro = bool(timed) and statistics.median(r["reference_ms"] for r in timed) < MICRO_MS
    found: dict[str, Any] = {"micro": micro, "errors": errors[:1]}
    for kind, side in (("eager", "reference_ms"), ("compile", "compile_ms")):
        speedups = [r.get(f"speedup_vs_{kind}") for r in rows]
        if not all(speedups):
            continue
        own = [r[side] / r["answer_ms"] for r in timed if r.get(side)]
        entry: dict[str, Any] = {"evalkit": speedups, "in_process": own,
                                 "half_width": [half_width(r, kind) for r in rows],
                                 "from_median": max(abs(s / statistics.median(speedups) - 1) for s in speedups),
                                 "inside": inside_others(speedups, [r.get(f"speedup_vs_{kind}_ci") for r in rows])}
        if own:
            entry["agreement"] = statistics.median(speedups) / statistics.median(own)
        found[kind] = entry
    found["evalkit_ms"] = [r["timing"]["median_ms"] for r in rows]
    found["in_process_ms"] = [r["answer_ms"] for r in timed]
    found["reference_in_process_ms"] = [r["reference_ms"] for r in timed]
    found["overhead_ms"] = [r["timing"].get("overhead_ms") for r in rows]
    found["distinct_ms"] = [[r.get("distinct_reference_ms"), r.get("distinct_answer_ms")] for r in timed
                            if "distinct_answer_ms" in r]
    found["claimed_ms"] = [r["timing"].get("claimed_median_ms") for r in rows]
    found["request_parts_ms"] = [[r["timing"].get("request_parts_ms"), (r["timing"].get("partner") or {}).get(
        "request_parts_ms")] for r in rows]
    found["variants"] = {name[:-len("_reference_ms")]: variant(timed, name[:-len("_reference_ms")])
                         for name in (timed[0] if timed else {}) if name.endswith("_reference_ms")}
    return found


def variant(timed: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """One pacing's figures over the rounds: both models' medians and the speedup they give."""
    reference = statistics.median(r[f"{name}_reference_ms"] for r in timed)
    answer = statistics.median(r[f"{name}_answer_ms"] for r in timed)
    return {"reference_ms": reference, "answer_ms": answer, "speedup": reference / answer}


def verdicts(answers: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target: its worst case over the answers and whether it is met."""
    worst: dict[str, float] = {"agreement": 0.0, "reproducible": 0.0, "half_width": 0.0}
    met = {name: True for name in worst} | {"inside": True}
    fewest_inside = 1.0
    for found in answers.values():
        which = 1 if found.get("micro") else 0
        for kind in ("eager", "compile"):
            entry = found.get(kind)
            if not entry:
                continue
            checks = {"agreement": abs(entry["agreement"] - 1) if "agreement" in entry else None,
                      "reproducible": entry["from_median"],
                      "half_width": max((h for h in entry["half_width"] if h is not None), default=None)}
            for name, value in checks.items():
                if value is None:
                    continue
                worst[name] = max(worst[name], value)
                met[name] = met[name] and value <= TARGETS[name][which]
            hits, total = entry["inside"]
            if total:
                fewest_inside = min(fewest_inside, hits / total)
                met["inside"] = met["inside"] and hits / total >= INSIDE_AT_LEAST - 1e-9
    return {**{name: {"worst": worst[name], "met": met[name]} for name in worst},
            "inside": {"worst": fewest_inside, "met": met["inside"]}}


def print_report(answers: dict[str, Any], targets: dict[str, Any], seconds: float) -> None:
    print(f"\nfidelity: {len(answers)} answers, {seconds:.0f} s")
    for name, found in sorted(answers.items()):
        if "verdicts" in found:
            print(f"  {name}: not correct in every run ({', '.join(map(str, found['verdicts']))})")
            continue
        for kind in ("eager", "compile"):
            entry = found.get(kind)
            if not entry:
                continue
            runs = ", ".join(f"{s:.3f}x ±{(h or 0) * 100:.1f}%" for s, h in zip(entry["evalkit"], entry["half_width"]))
            own = ", ".join(f"{s:.3f}x" for s in entry["in_process"]) or "none"
            ratio = f"{entry['agreement']:.3f}" if "agreement" in entry else "-"
            hits, total = entry["inside"]
            print(f"  {name} vs {kind}{' (micro)' if found['micro'] else ''}: evalkit {runs} | in-process {own} | "
                  f"evalkit/in-process {ratio} | farthest run {entry['from_median'] * 100:.1f}% | inside {hits}/{total}")
        ms = lambda values: "/".join(f"{v:.4g}" for v in values if v is not None) or "-"  # noqa: E731
        print(f"    ms a call: evalkit {ms(found['evalkit_ms'])} (its worker's own events {ms(found['claimed_ms'])}, "
              f"subtracted {ms(found['overhead_ms'])}); in one process {ms(found['in_process_ms'])}, the reference "
              f"{ms(found['reference_in_process_ms'])}" + (f"; on distinct inputs (reference, answer) "
                                                            f"{ms(found['distinct_ms'][0])}" if found['distinct_ms'] else ""))
        for answer, baseline in found.get("request_parts_ms", []):
            if answer and baseline:
                print("    a request beyond its events, ms (answer, baseline): " + ", ".join(
                    f"{part} {answer[part + '_ms'] or 0:.3f}, {baseline[part + '_ms'] or 0:.3f}"
                    for part in ("reply_beyond_events", "freeze", "idle")))
        for name, paced in found["variants"].items():
            print(f"    paced {name}: reference {paced['reference_ms']:.4g} ms, answer {paced['answer_ms']:.4g} ms, "
                  f"{paced['speedup']:.3f}x")
        if found["errors"]:
            print(f"    in-process failed: {found['errors'][0][-200:]}")
    for name, target in targets.items():
        shown = f"{target['worst'] * 100:.2f}%" if name != "inside" else f"{target['worst'] * 6:.1f}/6"
        print(f"target {name}: worst {shown} {'met' if target['met'] else 'MISSED'}")


def against_main(main: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    """Per answer timed under both settings: the median of the other setting's speedups vs eager over the main
    setting's (1.0: the other options moved nothing)."""
    moved = {}
    for name, found in main.items():
        ours, theirs = found.get("eager"), other.get(name, {}).get("eager")
        if ours and theirs:
            moved[name] = statistics.median(theirs["evalkit"]) / statistics.median(ours["evalkit"])
    return moved


def in_process_rounds(args: argparse.Namespace, rows: list[dict[str, Any]], started: float) -> dict[str, Any]:
    """The in-process method's rounds for every answer of ``rows`` judged correct."""
    rounds: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("verdict") == "correct":
            rounds[key(row)] = in_process(args, row, seed=0)
            print(f"  {key(row)} timed in one process ({time.monotonic() - started:.0f} s)", flush=True)
    print(f"{args.rounds} rounds timed in one process ({time.monotonic() - started:.0f} s)", flush=True)
    return rounds


def figures_of(runs: dict[str, list[list[dict[str, Any]]]], rounds: dict[str, Any],
               args: argparse.Namespace) -> dict[str, Any]:
    """What ``--json`` holds: the main setting's answers and targets, then each ``--against``'s beside them."""
    main = summarize(runs[args.extra], rounds)
    found: dict[str, Any] = {"runs_done": len(runs[args.extra]), "runs": args.runs, "options": args.extra,
                             "answers": main, "targets": verdicts(main), "against": []}
    for extra in args.against:
        answers = summarize(runs[extra], rounds)
        found["against"].append({"options": extra, "runs_done": len(runs[extra]), "answers": answers,
                                 "targets": verdicts(answers), "against_main": against_main(main, answers)})
    return found


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    where = args.keep or Path(tempfile.mkdtemp(prefix="fidelity-"))
    runs: dict[str, list[list[dict[str, Any]]]] = {extra: [] for extra in [args.extra, *args.against]}
    rounds: dict[str, list[dict[str, Any]]] = {}
    for number in range(args.runs):
        for index, extra in enumerate(runs):  # alternated: no setting gets the machine's quieter minutes
            folder = f"run{number + 1}" + (f"-against{index}" if index else "")
            runs[extra].append(score(args, where / folder, extra))
            print(f"run {number + 1} of {args.runs} scored{f' with {extra!r}' if index else ''} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
            if number == 0 and index == 0:
                rounds = in_process_rounds(args, runs[extra][-1], started)
            found = figures_of(runs, rounds, args)
            if args.json:
                args.json.write_text(json.dumps(found, indent=1))
    print_report(found["answers"], found["targets"], time.monotonic() - started)
    for other in found["against"]:
        print(f"\nwith {other['options']!r}:")
        print_report(other["answers"], other["targets"], time.monotonic() - started)
        for name, ratio in sorted(other["against_main"].items()):
            print(f"  {name}: speedup vs eager {ratio:.3f}x of the main setting's ({args.extra or 'the defaults'})")
    if args.check and not all(t["met"] for t in found["targets"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
