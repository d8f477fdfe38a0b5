#!/usr/bin/env bash
# Call 1 (issue 43): rl_step before (one judge per GPU) and with four judges on the GPU, in one call, one H200.
# The first run is cold (builds, baselines) and fills the cache every later run starts from.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
ans=/tmp/ans; cache=/tmp/rlcache
for p in problems/*/; do n=$(basename $p); mkdir -p $ans/$n; cp $p/solutions/*.py $ans/$n/; cp submissions/seeds/$n/* $ans/$n/; done
rl() {  # NAME GROUP STEPS EXTRA [AGAINST]
  timeout "$5" python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group $2 --steps $3 \
    --extra "$4" --json $OUT/$1.json ${6:+--against $OUT/$6.json} 2>&1 | tee $OUT/$1.log
}
rl before_g4 4 2 "--judges 1" 240
rl judges4_g8 8 2 "--judges 4" 170 before_g4
rl judges4_p3_g8 8 2 "--judges 4 --timing-precision 0.03" 140 judges4_g8
