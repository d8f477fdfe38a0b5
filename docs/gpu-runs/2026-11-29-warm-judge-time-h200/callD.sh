#!/usr/bin/env bash
# Call D (issue 43, item 5): rl_step with this tree at groups of 8 and 16, one judge, --timing-trials 30: groups of 8
# cold then warm on one server, then groups of 16 on that cache with a new server; each step cut short after 200 s
# (what was back is written, with the answers still out). The GPU's memory is sampled every 2 s beside it.
set -uo pipefail
source "$(dirname "$0")/../2026-11-29-judges-share-h200/rl_steps.sh"
run() {  # NAME GROUP STEPS
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  timeout 330 python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group $2 --steps $3 \
    --step-limit 200 --extra "--judges 1 --timing-trials 30" --json $OUT/$1.json 2>&1 | sed -u "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
run after_g8 8 2
run after_g16 16 1
finish
mv $OUT/steps.log $OUT/steps.txt
