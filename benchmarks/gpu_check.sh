#!/usr/bin/env bash
# Run on a GPU machine, from the repository root, with evalkit's dependencies installed (python3 -m pip install
# -e . keeps a CUDA torch already there): bash benchmarks/gpu_check.sh STAGE (see docs/gpu-runs/README.md).
# Stages: seeds, cuda-tests, isolation, all (those three), curated (evalkit score problems/: the curated
# solutions), load (benchmarks/timing_under_load.py), throughput (benchmarks/throughput.py, every suite),
# repro (benchmarks/reproducibility.py: the curated solutions scored REPRO_RUNS times, default 3, on every GPU,
# or on the GPUs REPRO_GPUS names, e.g. REPRO_GPUS=0,1),
# contention (benchmarks/gpu_contention.py: what the judge's probe sees of another process's GPU work).
# variance (benchmarks/worker_variance.py: what moves a fresh worker's kernel times).
# fidelity (benchmarks/fidelity.py: evalkit's speedups beside the in-process method's, FIDELITY_RUNS runs, default 3,
# FIDELITY_EXTRA more options, e.g. "--baselines eager,compile --compile").
# judges (issue 43: two judges per GPU): the fidelity benchmark with one judge and with --judges 2 (does the overlap
# move a speedup?), then benchmarks/rl_step.py (the curated solutions and seeds as answers) with one judge and with
# --judges 2 (rewards a minute), on the first GPU; a step cut short after RL_STEP_LIMIT_S (default 300) seconds.
# overlap (issue 43: one judge overlapping answers): the fidelity benchmark with each run followed by one with
# --overlap (does it move a speedup?), then benchmarks/rl_step.py --distinct (each answer a text of its own, as an RL
# group's rollouts are) at group 8: a cold step, then a new server without and one with --overlap, on the first GPU.
# cold (issue 43: a cold step within 1.3x of its builds alone): benchmarks/builds_alone.py (the builds of
# rl_step.py's answers at group 8, distinct texts, nothing judged), then rl_step.py's cold step on an empty cache.
# trade (issue 43: what the settings that trade precision for throughput buy): rl_step.py at group 8 (cycling answers,
# as the issue's target step), one judge, two steps on a new server for each setting of TRADE_SETTINGS (settings
# separated by ";", default "--timing-trials 10;--timing-trials 10 --timing-checks 3"), in
# that order, on a cache kept across calls (/tmp/evalkit-trade-cache: a first call builds, so run it twice).
# attacks (the cuda tests of the timing attacks alone: tests/end_to_end/test_cuda_timing.py's attack fixture).
# Everything worth keeping is written under $OUT (default /tmp/out).
set -uo pipefail
# .whl/ is optional (ignored by git): a GPU machine with no package registry may carry the wheels it lacks
# (e.g. jsonlines) in .whl/ at the repository root; they are installed into /tmp/site first. Without .whl/
# nothing is installed, and the dependencies must already be there.
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PATH="/tmp/site/bin:$PATH"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# evalkit's dependencies (pyproject.toml): name each one that does not import, and say how to get it.
missing=$(python3 - <<'EOF'
import importlib, sys
modules = ["click", "jsonlines", "tqdm", "torch"] + (["tomli"] if sys.version_info < (3, 11) else [])
failed = []
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as err:  # ImportError, or a broken install raising anything else
        failed.append(f"{name} ({type(err).__name__}: {err})")
print("; ".join(failed))
EOF
)
if [ -n "$missing" ]; then
  echo "gpu_check.sh: evalkit's dependencies do not import: $missing." >&2
  echo "  Install them: python3 -m pip install -e . (from the repository root; a CUDA torch already installed is kept)," >&2
  echo "  or, on a machine without a package registry, put their wheels in .whl/ at the repository root and run again." >&2
  exit 1
fi
command -v ninja >/dev/null || echo "gpu_check.sh: warning: no ninja on PATH (pip install ninja): torch cannot build the C++/CUDA answers" >&2
export EVALKIT_CACHE=/tmp/evalkit-cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$OUT/environment.txt"
stage=${1:-all}
run_dir=$(mktemp -d)  # a fresh report folder per stage, so a machine reused between runs never resumes an old one
rl_answers() {  # the answers of benchmarks/rl_step.py: every problem's curated solutions and seed answers; prints the folder
  local answers=$run_dir/rl-answers problem name
  for problem in problems/*/; do
    name=$(basename "$problem"); mkdir -p "$answers/$name"
    cp "$problem"solutions/*.py "$answers/$name/" 2>/dev/null; cp submissions/seeds/"$name"/* "$answers/$name/" 2>/dev/null
  done
  echo "$answers"
}
if [ "$stage" = all ] || [ "$stage" = seeds ]; then
  python3 -m evalkit score submissions/ --out "$run_dir/seeds" --jobs 8 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tee "$OUT/seeds_score.log"
  cp "$run_dir/seeds/results.jsonl" "$OUT/seeds_results.jsonl"; cp "$run_dir/seeds"/summary.json "$OUT/seeds_summary.json"; cp "$run_dir/seeds"/baselines.json "$OUT/seeds_baselines.json"
fi
if [ "$stage" = all ] || [ "$stage" = cuda-tests ]; then
  python3 -m pytest -q -m cuda tests -p no:cacheprovider -rA 2>&1 | tee "$OUT/pytest_cuda.log"
fi
if [ "$stage" = all ] || [ "$stage" = cuda-tests ]; then
  # The same fixtures once more (builds are cached now), keeping the rows for the record.
  python3 -m evalkit score tests/fixtures/cuda_submissions --problems tests/fixtures/judge_problems --out "$run_dir/cudafx" \
    --baselines eager --timeout 30 --timing-trials 20 --seed 3 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tail -5
  cp "$run_dir/cudafx"/results.jsonl "$OUT/cuda_fixtures_results.jsonl"
fi
if [ "$stage" = all ] || [ "$stage" = isolation ]; then
  # Issue 10 on a GPU: the isolation attacks judged on cuda, and the CUDA faults with no --timeout, so the
  # time limits derived from each reference bound the endless kernel.
  python3 -m evalkit score tests/fixtures/isolation_submissions --problems tests/fixtures/judge_problems \
    --out "$run_dir/isolation" --baselines eager --timing-trials 20 --seed 4 --jobs 4 > "$OUT/isolation_score.log" 2>&1
  echo "isolation run exit code: $?" | tee -a "$OUT/isolation_score.log"
  cp "$run_dir/isolation"/results.jsonl "$OUT/isolation_results.jsonl"
  python3 -m evalkit score tests/fixtures/cuda_submissions --problems tests/fixtures/judge_problems --out "$run_dir/faults" \
    --baselines eager --timing-trials 20 --seed 3 > "$OUT/faults_score.log" 2>&1
  echo "faults run exit code: $?" | tee -a "$OUT/faults_score.log"
  cp "$run_dir/faults"/results.jsonl "$OUT/faults_results.jsonl"
  python3 - "$run_dir" <<'EOF' | tee "$OUT/isolation_summary.txt"
import json, pathlib, sys
for name in ("isolation", "faults"):
    for line in (pathlib.Path(sys.argv[1]) / name / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        print(f"{name:9} {r['sample']:24} {r['verdict']:15} {sum(r['stage_seconds'].values()):7.1f}s  {r['reason'][:90]}")
def sandboxed(entry):
    try:
        return b"EVALKIT_SANDBOX_ID=" in (entry / "environ").read_bytes()
    except OSError:
        return False
left = [p.name for p in pathlib.Path("/proc").iterdir() if p.name.isdigit() and sandboxed(p)]
print("sandbox processes left:", left)
print("/dev/shm/evalkit-attack exists:", pathlib.Path("/dev/shm/evalkit-attack").exists())
EOF
fi
if [ "$stage" = curated ]; then
  python3 -m evalkit score problems/ --out "$run_dir/curated" --jobs 8 2>&1 | tr '\r' '\n' | grep -v '^evalkit' | tee "$OUT/curated_score.log"
  cp "$run_dir/curated"/results.jsonl "$OUT/curated_results.jsonl"; cp "$run_dir/curated"/summary.json "$OUT/curated_summary.json"; cp "$run_dir/curated"/baselines.json "$OUT/curated_baselines.json"
fi
if [ "$stage" = load ]; then
  python3 benchmarks/timing_under_load.py --rounds 2 --builds 16 2>&1 | tee "$OUT/timing_under_load.log"
fi
if [ "$stage" = throughput ]; then
  python3 benchmarks/throughput.py --suite all --keep "$run_dir/throughput" --json "$OUT/throughput_figures.json" 2>&1 | tee "$OUT/throughput.log"
fi
if [ "$stage" = repro ]; then
  python3 benchmarks/reproducibility.py --runs "${REPRO_RUNS:-3}" ${REPRO_GPUS:+--gpus "$REPRO_GPUS"} --keep "$run_dir/repro" --json "$OUT/reproducibility.json" \
    ${REPRO_EXTRA:+--extra="$REPRO_EXTRA"} 2>&1 | tee "$OUT/reproducibility.log"
  (cd "$run_dir/repro" && tar czf "$OUT/reproducibility_rows.tar.gz" */results.jsonl */baselines.json)
fi
if [ "$stage" = contention ]; then
  python3 benchmarks/gpu_contention.py 2>&1 | tee "$OUT/gpu_contention.log"
fi
if [ "$stage" = variance ]; then
  # benchmarks/worker_variance.py: fresh processes, tensors re-placed, on the curated solutions that moved most.
  export TORCH_EXTENSIONS_DIR=$run_dir/extensions
  for pair in "conv2d_asymmetric_input_asymmetric_kernel fp16_implicit_gemm" "conv2d_gelu_globalavgpool tf32_fused_conv_fastgelu_mean" \
              "alexnet_conv1 tf32_implicit_gemm"; do
    set -- $pair
    for solution in "$2" eager; do
      python3 benchmarks/worker_variance.py "problems/$1" --solution "$solution" 2>&1 | tee -a "$OUT/worker_variance.txt"
    done
  done
fi
if [ "$stage" = fidelity ]; then
  python3 benchmarks/fidelity.py --runs "${FIDELITY_RUNS:-3}" --keep "$run_dir/fidelity" --json "$OUT/fidelity.json" \
    ${FIDELITY_EXTRA:-} 2>&1 | tee "$OUT/fidelity.log"
fi
if [ "$stage" = judges ]; then
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  for judges in 1 2; do
    python3 benchmarks/fidelity.py --runs "${FIDELITY_RUNS:-3}" --keep "$run_dir/fidelity-judges$judges" \
      --json "$OUT/fidelity_judges$judges.json" --extra "--judges $judges" 2>&1 | tee "$OUT/fidelity_judges$judges.log"
  done
  answers=$(rl_answers)
  for judges in 1 2; do  # one cache: the second run's first step is warm too; its speedups compared with the first's
    python3 benchmarks/rl_step.py --device cuda --answers "$answers" --steps 2 --group 4 --extra "--judges $judges" \
      --step-limit "${RL_STEP_LIMIT_S:-300}" \
      --cache "$run_dir/rl-cache" ${against:+--against "$against"} \
      --json "$OUT/rl_step_judges$judges.json" 2>&1 | tee "$OUT/rl_step_judges$judges.log"
    against=$OUT/rl_step_judges$judges.json
  done
  grep -h contended_gpu "$run_dir"/fidelity-judges*/*/set*/results.jsonl 2>/dev/null | wc -l | sed 's/^/rows flagged contended_gpu: /' | tee "$OUT/judges_contended.txt"
fi
if [ "$stage" = cold ]; then
  # Issue 43's cold step against its builds alone: benchmarks/builds_alone.py (the same answers' builds, nothing judged,
  # in a cache of their own), then rl_step.py's cold step on an empty cache, one judge, group 8, distinct texts.
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  answers=$(rl_answers)
  python3 benchmarks/builds_alone.py --answers "$answers" --distinct --group 8 --cache "$run_dir/builds-alone" \
    --json "$OUT/builds_alone.json" 2>&1 | tee "$OUT/builds_alone.log"
  python3 benchmarks/rl_step.py --device cuda --answers "$answers" --distinct --steps 1 --group 8 \
    --extra "--timing-trials 10" --step-limit "${RL_STEP_LIMIT_S:-400}" --cache "$run_dir/rl-cold" \
    --json "$OUT/rl_step_cold.json" 2>&1 | tee "$OUT/rl_step_cold.log"
fi
if [ "$stage" = trade ]; then
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  answers=$(rl_answers)
  IFS=';' read -ra settings <<< "${TRADE_SETTINGS:---timing-trials 10;--timing-trials 10 --timing-checks 3}"
  for extra in "${settings[@]}"; do
    name=$(echo "$extra" | tr -c 'a-z0-9\n' '_')
    python3 benchmarks/rl_step.py --device cuda --answers "$answers" --steps 2 --group 8 --extra "$extra" \
      --step-limit "${RL_STEP_LIMIT_S:-200}" --cache /tmp/evalkit-trade-cache \
      --json "$OUT/rl_step_trade$name.json" 2>&1 | tee "$OUT/rl_step_trade$name.log"
  done
fi
if [ "$stage" = attacks ]; then
  python3 -m pytest -q -m cuda tests/end_to_end/test_cuda_timing.py -k "clock or predicted or fp16 or cudnn" \
    -p no:cacheprovider -rA 2>&1 | tee "$OUT/pytest_cuda_attacks.log"
fi
if [ "$stage" = overlap ]; then
  export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  python3 benchmarks/fidelity.py --runs "${FIDELITY_RUNS:-2}" --against=--overlap --keep "$run_dir/fidelity" \
    --json "$OUT/fidelity_overlap.json" 2>&1 | tee "$OUT/fidelity_overlap.log"
  answers=$(rl_answers)
  for setting in cold no-overlap overlap; do  # one cache: the cold step builds every answer once
    steps=2; extra="--timing-trials 10 --$setting"
    if [ "$setting" = cold ]; then steps=1; extra="--timing-trials 10"; fi
    python3 benchmarks/rl_step.py --device cuda --answers "$answers" --distinct --steps $steps --group 8 \
      --extra "$extra" --step-limit "${RL_STEP_LIMIT_S:-300}" --cache "$run_dir/rl-cache" \
      --json "$OUT/rl_step_$setting.json" 2>&1 | tee "$OUT/rl_step_$setting.log"
  done
fi
