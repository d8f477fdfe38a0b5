#!/usr/bin/env bash
# With the exports asked once per allocation: benchmarks/fidelity.py, one evalkit run at the defaults (cold), the
# in-process rounds, then one run with 100 ms requests, beside the same in-process figures, in one call.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv; nproc; } > $OUT/environment.txt
python3 benchmarks/fidelity.py --set problems/ --runs 1 --rounds 2 --baselines eager \
  --against "--request-length-ms 100" --json $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
