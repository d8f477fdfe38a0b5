#!/usr/bin/env bash
# Call 3 (issue 43), after the fix of the judge processes' CUDA context: rl_step with four judges on the GPU, three
# steps (the first cold: builds and baselines; then warm twice), one H200.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
ans=/tmp/ans
for p in problems/*/; do n=$(basename $p); mkdir -p $ans/$n; cp $p/solutions/*.py $ans/$n/; cp submissions/seeds/$n/* $ans/$n/; done
timeout 270 python3 benchmarks/rl_step.py --device cuda --answers $ans --cache /tmp/rlcache --group 4 --steps 3 \
  --extra "--judges 4" --json $OUT/judges4_g4.json 2>&1 | tee $OUT/judges4_g4.log
