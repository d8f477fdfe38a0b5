#!/usr/bin/env bash
# Call 3: how far one judge's runs part from each other, beside two judges', on one machine: `evalkit score problems/`
# (the curated solutions, eager baselines timed again each run) with the SEQUENCE of settings given (default: one
# judge cold, then one judge, two judges, one judge, two judges, alternated), each run's rows to $OUT, until
# REPRO_LIMIT_S (default 430) seconds have passed.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 EVALKIT_CACHE=/tmp/evalkit-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv; nproc; } > $OUT/call3_environment.txt
number=0
for judges in ${SEQUENCE:-1 1 2 1 2}; do
  number=$((number + 1))
  [ $SECONDS -lt ${REPRO_LIMIT_S:-430} ] || break
  timeout $(( ${REPRO_LIMIT_S:-430} + 120 - SECONDS )) python3 -m evalkit score problems --problems problems \
    --out /tmp/repro$number --baselines eager --device cuda --remeasure-baselines --no-progress -q --judges $judges \
    > /dev/null 2>&1
  cp /tmp/repro$number/results.jsonl $OUT/call3_run${number}_judges$judges.jsonl 2>/dev/null
  echo "run $number (--judges $judges) done at $SECONDS s" >> $OUT/call3_runs.txt
done
