#!/usr/bin/env bash
# Call C (issue 43, item 1: does the overlap move a speedup?): benchmarks/fidelity.py on the shipped problems' curated
# solutions, evalkit's speedups beside the in-process method's (CUDA events around each forward), in one call: first
# with two judges on the GPU, then with one, on one build cache. Each has its own in-process rounds.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
for judges in 2 1; do
  echo "judges $judges starts at $SECONDS s" >> $OUT/fidelity.log
  timeout $((judges == 2 ? 340 : 215)) python3 benchmarks/fidelity.py --set problems --runs 1 --rounds 2 \
    --extra "--judges $judges" --keep /tmp/fidelity-judges$judges --json $OUT/fidelity_judges$judges.json 2>&1 \
    | grep -v "UserWarning\|_conversion_method" >> $OUT/fidelity.log
done
grep -h contended_gpu /tmp/fidelity-judges*/*/set*/results.jsonl 2>/dev/null | wc -l | sed 's/^/rows flagged contended_gpu: /' >> $OUT/fidelity.log
