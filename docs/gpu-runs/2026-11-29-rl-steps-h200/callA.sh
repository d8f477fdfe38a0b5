#!/usr/bin/env bash
# Call A (issue 43, item 5 "before"): rl_step on main with one judge per GPU: groups of 4, cold then warm, then a
# warm step at groups of 8 from the same cache. The GPU's memory is sampled every 2 s beside it.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; git log -1 --format=%h 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 2000 > $OUT/gpu_memory.txt &
ans=/tmp/ans; cache=/tmp/rlcache
for p in problems/*/; do n=$(basename $p); mkdir -p $ans/$n; cp $p/solutions/*.py $ans/$n/; cp submissions/seeds/$n/* $ans/$n/; done
rl() {  # NAME GROUP STEPS EXTRA TIMEOUT [AGAINST]
  timeout "$5" python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group $2 --steps $3 \
    --extra "$4" --json $OUT/$1.json ${6:+--against $OUT/$6.json} > $OUT/$1.log 2>&1
}
rl before_g4 4 2 "--judges 1" 380
rl before_g8_warm 8 1 "--judges 1" 170 before_g4
kill %1
