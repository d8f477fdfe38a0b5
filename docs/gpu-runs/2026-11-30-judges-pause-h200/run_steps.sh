#!/usr/bin/env bash
# The lines this record's calls share: `source` it from the repository root, then `run NAME ROOT GROUP STEPS EXTRA`
# per run, then `finish` (from 2026-11-29-judges-share-h200/rl_steps.sh: the wheels, the answers, the GPU's memory
# sampled every 2 s). Each step is cut short after 200 s (what was back is written, with the answers still out).
# Once a run's second step has run STACKS_AT_S seconds, every judge process writes its threads' stacks to the serve
# log (SIGUSR2), which is kept.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../2026-11-29-judges-share-h200/rl_steps.sh"
STACKS_AT_S=${STACKS_AT_S:-40}
stacks_in_step_2() {  # NAME
  until grep -q "^$1: step 1:" $OUT/steps.log 2>/dev/null; do sleep 1; done
  sleep "$STACKS_AT_S"
  grep -q "^$1: step 2:" $OUT/steps.log || { echo "$1: stacks signal at $SECONDS s" >> $OUT/steps.log;
    pkill -USR2 -f "evalkit.schedule.judge_process"; }
}
run() {  # NAME ROOT GROUP STEPS EXTRA: ROOT's rl_step.py and evalkit (a tree carried beside this one, or this one)
  echo "$1 starts at $SECONDS s" >> $OUT/steps.log
  stacks_in_step_2 "$1" & local watcher=$!
  PYTHONPATH=/tmp/site:$2 timeout 420 python3 $2/benchmarks/rl_step.py --device cuda --answers $ans --cache $cache \
    --problems $PWD/problems --group $3 --steps $4 --step-limit 200 --extra "$5" \
    --json $OUT/$1.json 2>&1 | sed -u "s/^/$1: /" >> $OUT/steps.log
  kill $watcher 2>/dev/null
  grep -v "GET /v1\|POST /v1" $OUT/$1.serve.log | cut -c1-400 | sed "s/^/$1: /" >> /tmp/serve.txt; rm -f $OUT/$1.serve.log
  sed "s/^/$1 /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt; : > /tmp/gpu_memory.txt
}
keep_stacks() {  # the stacks' lines of the serve logs, this checkout's path named as the project names it
  grep -A60 "Thread 0x\|Current thread" /tmp/serve.txt | sed "s#$PWD/##g" | cut -c1-300 | head -4000 > $OUT/stacks.txt
}
