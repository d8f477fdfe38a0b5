#!/usr/bin/env bash
# Call C (issue 43, item 1): the judge before and after keeping its problems through a step (193546b: past a memory
# bound the largest kept problem goes, and a text problem's next reference worker is started ahead), in one call.
# rl_step, one judge, --timing-trials 30, groups of 4: the tree before (`old/`, a `git archive` of eaa5ccd carried
# beside the tree) cold then warm on one server; then this tree on that cache, a new server, two warm steps.
set -uo pipefail
source "$(dirname "$0")/../2026-11-29-judges-share-h200/rl_steps.sh"
run() {  # NAME ROOT STEPS
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  PYTHONPATH=/tmp/site:$2 timeout 300 python3 $2/benchmarks/rl_step.py --device cuda --answers $ans --cache $cache \
    --problems $PWD/problems --group 4 --steps $3 --step-limit 200 --extra "--judges 1 --timing-trials 30" \
    --json $OUT/$1.json 2>&1 | sed -u "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
run before_g4 $PWD/old 2
run after_g4 $PWD 2
finish
mv $OUT/steps.log $OUT/steps.txt
