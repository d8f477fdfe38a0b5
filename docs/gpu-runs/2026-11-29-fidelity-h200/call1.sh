#!/usr/bin/env bash
# Device call 1 (one H200): benchmarks/fidelity.py on this tree (builds every answer, one evalkit run, the in-process
# rounds), then on main at 00811a8 (".before/", the same benchmark and fixture copied in; builds shared through one
# cache), one run and its in-process rounds. Writes under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 EVALKIT_CACHE=$PWD/.devcache/cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv; nproc;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } | tee "$OUT/environment.txt"
here=$PWD
PYTHONPATH=$here:/tmp/site timeout 420 python3 benchmarks/fidelity.py --runs 1 --rounds 3 --keep /tmp/after \
  --json "$OUT/after_run1.json" 2>&1 | tee "$OUT/after_run1.log"
cp /tmp/after/run1/set0/results.jsonl "$OUT/after_run1_curated.jsonl" 2>/dev/null
cp /tmp/after/run1/set1/results.jsonl "$OUT/after_run1_micro.jsonl" 2>/dev/null
cd .before && PYTHONPATH=$here/.before:/tmp/site timeout 240 python3 benchmarks/fidelity.py --runs 1 --rounds 3 \
  --keep /tmp/before --json "$OUT/before.json" 2>&1 | tee "$OUT/before.log"
