#!/usr/bin/env bash
# The harness's exports asked once per allocation (SegmentExporter, 4ae41d9) against once per request (the tree before
# it: OLD_FILES holds evalkit/sandbox/cuda_buffers.py and evalkit/sandbox/untrusted/outputs.py as at fdac1a8, e.g.
# from `git show fdac1a8:PATH`): the GPU tests of the exporter, then `evalkit score problems/` (the curated
# solutions, eager baselines timed again each run, one judge) alternated between the two trees until PLACER_LIMIT_S
# (default 430) seconds have passed; each run's rows packed into $OUT/runs.tar.gz.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv; nproc; } > $OUT/environment.txt
PYTHONPATH=/tmp/site:$PWD python3 -m pytest -q -p no:cacheprovider -m cuda tests/sandbox/test_cuda_buffers.py \
  tests/sandbox/test_output_places.py > $OUT/cuda_tests.txt 2>&1
for name in old new; do
  mkdir -p /tmp/variants/$name && cp -r evalkit pyproject.toml /tmp/variants/$name/
done
cp ${OLD_FILES:-scratch_old}/evalkit/sandbox/cuda_buffers.py /tmp/variants/old/evalkit/sandbox/
cp ${OLD_FILES:-scratch_old}/evalkit/sandbox/untrusted/outputs.py /tmp/variants/old/evalkit/sandbox/untrusted/
mkdir -p /tmp/rows
number=0
for name in ${SEQUENCE:-new old new old new}; do
  number=$((number + 1))
  [ $SECONDS -lt ${PLACER_LIMIT_S:-430} ] || break
  (cd /tmp/variants/$name && PYTHONPATH=/tmp/site:$PWD timeout $(( ${PLACER_LIMIT_S:-430} + 110 - SECONDS )) \
     python3 -m evalkit score $OLDPWD/problems --problems $OLDPWD/problems --out /tmp/placer$number \
     --baselines eager --device cuda --remeasure-baselines --no-progress -q > /tmp/placer$number.log 2>&1)
  cp /tmp/placer$number/results.jsonl /tmp/rows/run${number}_$name.jsonl 2>/dev/null
  echo "run $number ($name) done at $SECONDS s: $(tail -1 /tmp/placer$number.log)" >> $OUT/runs.txt
done
tar -czf $OUT/runs.tar.gz -C /tmp/rows .
