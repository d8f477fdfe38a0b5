#!/usr/bin/env bash
# One call on the 4-GPU host, at commit 66a6318 (clean tree): issue 26's repro on GPUs 0,1 (half the cores) beside,
# on GPUs 2,3 (the other half), `pytest -m cuda` and then a bf16 run of the CUDA fixtures, each side time-boxed.
# Run from the repository root; $OUT set. Adapted from ../2026-11-27-four-gpu-host-h200/call1.sh (no .head/).
set -u
export OUT
rec=$(dirname "$0")
mkdir -p "$OUT/repro" "$OUT/tests"
host="$OUT/host.txt"
read -r A B < <(python3 $rec/split_cpus.py)
{ date -u; echo "commit $(git rev-parse HEAD 2>/dev/null || echo '(no .git here)')"; nvidia-smi -L
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  nvidia-smi topo -m; echo "nproc $(nproc)"; lscpu | grep -E 'Model name|Socket|Thread|Core|NUMA'
  echo "repro cpus: $A"; echo "tests cpus: $B"; free -g | head -2; } > "$host" 2>&1
echo "repro start $(date -u +%s)" >> "$host"
( OUT=$OUT/repro REPRO_RUNS=${REPRO_RUNS:-2} REPRO_GPUS=0,1 timeout -k 5 ${T_REPRO:-540} taskset -c "$A" \
    bash benchmarks/gpu_check.sh repro > /tmp/repro_stage.out 2>&1; echo "repro rc $? end $(date -u +%s)" >> "$host" ) &
sleep 12
echo "tests start $(date -u +%s)" >> "$host"
# Side B: its own wheel folder (no race with side A's install into /tmp/site) and its own build cache.
( python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-b .whl/*.whl
  export PYTHONPATH=/tmp/site-b:$PWD EVALKIT_CACHE=/tmp/evalkit-cache-b PYTHONUNBUFFERED=1
  timeout -k 5 ${T_TESTS:-540} taskset -c "$B" bash -c '
    t0=$(date +%s)
    CUDA_VISIBLE_DEVICES=2,3 python3 -m pytest -q -m cuda tests -p no:cacheprovider -rA --durations=25 > "$OUT/tests/pytest_cuda.log" 2>&1
    echo "pytest rc $? after $(( $(date +%s) - t0 )) s"
    echo "bf16 start $(date -u +%s)"
    CUDA_VISIBLE_DEVICES=2 python3 -m evalkit score tests/fixtures/cuda_submissions --problems tests/fixtures/judge_problems \
      --out /tmp/bf16 --precision bf16 --baselines eager --timeout 30 --timing-trials 20 --seed 3 2>&1 | tr "\r" "\n" | grep -v "^evalkit" | tail -15
    echo "bf16 rc ${PIPESTATUS[0]} end $(date -u +%s)"' > "$OUT/tests/stage.out" 2>&1
  echo "tests rc $? end $(date -u +%s)" >> "$host"
  cp /tmp/bf16/results.jsonl "$OUT/tests/bf16_results.jsonl" 2>/dev/null ) &
wait
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$host" 2>&1
rows="$OUT/repro/reproducibility_rows.tar.gz"
if [ -f "$rows" ] && [ "$(stat -c %s "$rows")" -gt 716800 ]; then echo "rows tarball $(stat -c %s "$rows") B: dropped" >> "$host"; rm -f "$rows"; fi
cat "$host"; echo "=== repro"; tail -30 /tmp/repro_stage.out; echo "=== side B"; cat "$OUT/tests/stage.out"
echo "=== pytest"; grep -E "^(PASSED|FAILED|ERROR)|passed|failed|Error" "$OUT/tests/pytest_cuda.log" | tail -60
echo "=== bf16"; python3 - "$OUT/tests/bf16_results.jsonl" <<'PY'
import json, sys
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError as err:
    sys.exit(f"no bf16 rows: {err}")
for line in lines:
    r = json.loads(line)
    print(f"{r['sample']:24} {r['verdict']:14} {r.get('precision')!s:5} {','.join(r.get('flags') or [])!s:28} {r['reason'][:100]}")
PY
