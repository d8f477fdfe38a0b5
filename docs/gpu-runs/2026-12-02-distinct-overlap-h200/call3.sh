#!/usr/bin/env bash
# Call 3, a fresh machine: benchmarks/fidelity.py on the curated solutions, each run at the defaults followed by one
# with --overlap, beside the same in-process figures (does the overlap move a speedup?), cut at 430 s (call 4); the `cuda`
# tests of the GPU's judges and of the CUDA buffers (changed since their last GPU run), in the time left.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c 'import torch; print("torch", torch.__version__)'; nproc; } > $OUT/environment.txt
timeout -k 10 430 python3 benchmarks/fidelity.py --runs 2 --rounds 2 --against=--overlap --keep /tmp/fidelity \
  --json $OUT/fidelity_overlap.json > $OUT/fidelity_overlap.txt 2>&1
echo "fidelity exit code: $? at $SECONDS s" >> $OUT/fidelity_overlap.txt
[ -z "${SKIP_TESTS:-}" ] && timeout -k 5 $(( 575 - SECONDS )) python3 -m pytest -v -m cuda tests/sandbox/test_cuda_buffers.py \
  tests/schedule/test_judges.py -p no:cacheprovider -rA > $OUT/pytest_cuda.txt 2>&1
echo "pytest exit code: $? at $SECONDS s" >> $OUT/pytest_cuda.txt
