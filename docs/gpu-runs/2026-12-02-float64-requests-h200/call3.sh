#!/usr/bin/env bash
# The final tree on the H200: float64_costs.py on every shipped problem with the one-pass comparison (call 1 had
# PyTorch's chunked one), then the whole `pytest -m cuda` (verbose, so a time-boxed run still says what passed).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
python3 benchmarks/float64_costs.py problems/* --calls 5 --json $OUT/float64_fused_all.json > $OUT/float64_fused_all.txt 2>&1
timeout -k 5 $(( 560 - SECONDS )) python3 -m pytest -v -m cuda tests -p no:cacheprovider -rA --durations=15 \
  > $OUT/pytest_cuda.log 2>&1; echo "pytest rc $? after $SECONDS s" >> $OUT/pytest_cuda.log
