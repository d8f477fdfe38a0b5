#!/usr/bin/env bash
# Call 1 on the 4-GPU host: issue 26's repro on GPUs 0,1 (half the cores) beside `pytest -m cuda` (gpu_check.sh
# cuda-tests) on GPUs 2,3 (the other half), at once, each time-boxed. Run from the repository root; $OUT set.
set -u
# The committed tree (.head/: `git archive HEAD evalkit tests`, carried): uncommitted edits of evalkit/ or tests/
# in the sending checkout are replaced on the device by HEAD's files.
if [ -f .head/COMMIT ]; then rm -rf evalkit tests && cp -a .head/evalkit .head/tests . && echo "evalkit/, tests/ at $(cat .head/COMMIT)"; fi
rec=$(dirname "$0")
mkdir -p "$OUT/repro" "$OUT/tests"
host="$OUT/host.txt"
read -r A B < <(python3 $rec/split_cpus.py)
{ date -u; echo "evalkit/, tests/ at $(cat .head/COMMIT 2>/dev/null)"; nvidia-smi -L; nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
  nvidia-smi topo -m; echo "nproc $(nproc)"; lscpu | grep -E 'Model name|Socket|Thread|Core|NUMA'
  echo "repro cpus: $A"; echo "tests cpus: $B"; free -g | head -2; } > "$host" 2>&1
echo "repro start $(date -u +%s)" >> "$host"
( OUT=$OUT/repro REPRO_RUNS=${REPRO_RUNS:-2} REPRO_GPUS=0,1 timeout -k 5 ${T_REPRO:-560} taskset -c "$A" \
    bash benchmarks/gpu_check.sh repro > "$OUT/repro/stage.out" 2>&1; echo "repro rc $? end $(date -u +%s)" >> "$host" ) &
sleep 12  # the wheels go into /tmp/site once before the second stage installs them again
echo "tests start $(date -u +%s)" >> "$host"
( OUT=$OUT/tests CUDA_VISIBLE_DEVICES=2,3 PYTEST_ADDOPTS="-vv --durations=25" timeout -k 5 ${T_TESTS:-560} taskset -c "$B" \
    bash benchmarks/gpu_check.sh cuda-tests > "$OUT/tests/stage.out" 2>&1; echo "tests rc $? end $(date -u +%s)" >> "$host" ) &
wait
rm -f "$OUT/repro/stage.out" "$OUT/tests/environment.txt"  # 8 files come back at most; tests/stage.out keeps the fixtures tail
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$host" 2>&1
cat "$host"; tail -25 "$OUT/repro/reproducibility.log"; grep -E "^(PASSED|FAILED|ERROR)|passed|failed" "$OUT/tests/pytest_cuda.log" | tail -40
