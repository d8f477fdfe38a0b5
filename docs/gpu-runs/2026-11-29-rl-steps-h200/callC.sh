#!/usr/bin/env bash
# Call C (issue 43, item 5 "before" at groups of 8): one judge on the GPU; a cold step at groups of 4 fills the
# cache, then one warm step at groups of 8, with each answer's stage seconds. The GPU's memory is sampled every 2 s.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 2000 > $OUT/gpu_memory.txt &
ans=/tmp/ans; cache=/tmp/rlcache
for p in problems/*/; do n=$(basename $p); mkdir -p $ans/$n; cp $p/solutions/*.py $ans/$n/; cp submissions/seeds/$n/* $ans/$n/; done
rl() {  # NAME GROUP STEPS EXTRA TIMEOUT [AGAINST]
  timeout "$5" python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group $2 --steps $3 \
    --extra "$4" --json $OUT/$1.json ${6:+--against $OUT/$6.json} 2>&1 | sed "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> $OUT/serve.txt; rm -f $OUT/$1.serve.log
  echo "$1 done at $SECONDS s" >> $OUT/steps.log
}
rl judges1_g4 4 1 "--judges 1" 235
rl judges1_g8_warm 8 1 "--judges 1" 300
kill %1
