#!/usr/bin/env bash
# What this record's calls share: `source` it from the repository root, then `run NAME ROOT GROUP STEPS LIMIT EXTRA`
# per run, then `finish`. The wheels, the answers and the GPU's memory sampled every 2 s come from
# ../2026-11-29-judges-share-h200/rl_steps.sh. Each run is a new `evalkit serve` of ROOT (this tree, or one carried
# beside it) on the cache the runs before filled, with ROOT's problems; each step is cut short after LIMIT seconds
# (what was back is written, the answers still out named). The serve log's warnings are kept, the judge processes'
# ("evalkit judge: ...", which carry no level name) among them.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../2026-11-29-judges-share-h200/rl_steps.sh"
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt
run() {  # NAME ROOT GROUP STEPS LIMIT EXTRA
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  PYTHONPATH=/tmp/site:$2 timeout $(( $4 * $5 + 60 )) python3 $2/benchmarks/rl_step.py --device cuda --answers $ans \
    --cache $cache --problems $2/problems --group $3 --steps $4 --step-limit $5 --extra "$6" --json $OUT/$1.json 2>&1 \
    | sed -u "s/^/$1: /" >> $OUT/steps.log
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
finish_record() {  # the shared `finish`, then the judges' own warnings beside the other kept lines
  finish
  grep "evalkit judge:" /tmp/serve.txt | grep -v -i "warn\|error\|held\|contended\|memory" | head -200 \
    >> $OUT/serve_warnings.txt
  mv $OUT/steps.log $OUT/steps.txt
}
