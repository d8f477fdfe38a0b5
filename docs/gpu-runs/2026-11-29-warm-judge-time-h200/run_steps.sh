#!/usr/bin/env bash
# The lines calls C and D share (call C ran its copy inline; factored here after the run, unchanged but for ROOT
# and GROUP as arguments): `source` it from the repository root, then `run NAME ROOT GROUP STEPS` per run, then
# `finish`. One judge, --timing-trials 30; each step cut short after 200 s (what was back is written, with the
# answers still out). The GPU's memory is sampled every 2 s beside every run.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../2026-11-29-judges-share-h200/rl_steps.sh"
run() {  # NAME ROOT GROUP STEPS: ROOT's rl_step.py and evalkit (a tree carried beside this one, or this one)
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  PYTHONPATH=/tmp/site:$2 timeout 330 python3 $2/benchmarks/rl_step.py --device cuda --answers $ans --cache $cache \
    --problems $PWD/problems --group $3 --steps $4 --step-limit 200 --extra "--judges 1 --timing-trials 30" \
    --json $OUT/$1.json 2>&1 | sed -u "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
