#!/usr/bin/env bash
# Device call 3 (one H200): benchmarks/fidelity.py on this tree, 2 runs (the device time left), the in-process method in the same call
# (3 rounds, and a diagnosis on 64 distinct inputs), the GPU's clocks sampled every 100 ms meanwhile. Under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 EVALKIT_CACHE=$PWD/.devcache/cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$OUT/environment.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw --format=csv -lms 100 > /tmp/clocks.csv &
clocks=$!
timeout 390 python3 benchmarks/fidelity.py --runs 2 --rounds 3 --distinct 64 --keep /tmp/after \
  --json "$OUT/fidelity.json" 2>&1 | grep -v "UserWarning\|_conversion_method" | tee "$OUT/fidelity.log"
kill $clocks
gzip -c /tmp/clocks.csv > "$OUT/clocks.csv.gz"
for n in 1 2; do cat /tmp/after/run$n/set*/results.jsonl > "$OUT/run${n}_rows.jsonl" 2>/dev/null; done
