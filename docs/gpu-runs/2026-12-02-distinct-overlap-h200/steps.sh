#!/usr/bin/env bash
# What this record's calls share: `source` it from the repository root, then `run NAME STEPS LIMIT EXTRA [AGAINST]`
# per run, then `finish_record`. Each run is a new `evalkit serve` of this tree on one cache (the cold run fills it),
# benchmarks/rl_step.py at group 8 with --distinct (each answer's code a text of its own, as an RL group's rollouts
# are), one judge, --timing-trials 10; each step cut short after LIMIT seconds. The wheels, the answers and the GPU's
# memory sampled every 2 s come from ../2026-11-29-judges-share-h200/rl_steps.sh.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../2026-11-29-judges-share-h200/rl_steps.sh"
cache=/tmp/rlcache_distinct
run() {  # NAME STEPS LIMIT EXTRA [AGAINST]
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  timeout $(( $2 * $3 + 60 )) python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --distinct \
    --group 8 --steps $2 --step-limit $3 --extra "--judges 1 --timing-trials 10 $4" --json $OUT/$1.json \
    ${5:+--against $OUT/$5.json} 2>&1 | sed -u "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
finish_record() {  # the shared `finish`, then the judges' own lines beside the kept warnings
  finish
  grep "evalkit judge:" /tmp/serve.txt | grep -v -i "warn\|error\|held\|contended\|memory" | head -200 \
    >> $OUT/serve_warnings.txt
  mv $OUT/steps.log $OUT/steps.txt
}
