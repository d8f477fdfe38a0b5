#!/usr/bin/env bash
# The lines calls A and B of this record share (they ran inline in each; factored here after the run, unchanged):
# `source` it from the repository root, then `rl NAME GROUP STEPS EXTRA TIMEOUT [AGAINST]` per run, then `finish`.
# The GPU's memory is sampled every 2 s beside every run.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 2000 > /tmp/gpu_memory.txt &
ans=/tmp/ans; cache=/tmp/rlcache
for p in problems/*/; do n=$(basename $p); mkdir -p $ans/$n; cp $p/solutions/*.py $ans/$n/; cp submissions/seeds/$n/* $ans/$n/; done
rl() {  # NAME GROUP STEPS EXTRA TIMEOUT [AGAINST]
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  timeout "$5" python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group $2 --steps $3 \
    --extra "$4" --json $OUT/$1.json ${6:+--against $OUT/$6.json} 2>&1 | sed "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-600 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
finish() {
  kill %1
  grep -i "warn\|error\|held\|contended\|memory" /tmp/serve.txt | head -300 > $OUT/serve_warnings.txt
  python3 - <<'PY' > $OUT/gpu_memory_summary.txt
import collections, statistics
runs = collections.defaultdict(list)
for line in open("/tmp/gpu_memory_all.txt"):
    name, rest = line.split(" ", 1)
    runs[name].append(float(rest.split(",")[1].split()[0]) / 1024)
for name, v in runs.items():
    v.sort(); print(f"{name}: {len(v)} samples, GiB median {statistics.median(v):.1f} p90 {v[int(.9*len(v))-1]:.1f} max {v[-1]:.1f}")
PY
}
