#!/usr/bin/env bash
# Call A (issue 43, item 1): why two judges' warm step on one server did not end (2026-11-29-judges-share-h200).
# The freeze's cost on this machine first (benchmarks/freeze_latency.py); then rl_step with two judges and
# --timing-trials 30, groups of 4, a cold step then a warm one on the same server, each cut short after STEP_LIMIT_S.
# Once the warm step has run WATCH_S seconds, the server and its judge processes are sent the stacks signal (SIGUSR2)
# twice, 20 s apart: each writes every thread's stack to the serve log, kept here (its request lines dropped).
set -uo pipefail
source "$(dirname "$0")/../2026-11-29-judges-share-h200/rl_steps.sh"
STEP_LIMIT_S=${STEP_LIMIT_S:-230} WATCH_S=${WATCH_S:-100}
timeout 60 python3 benchmarks/freeze_latency.py --rounds 300 > $OUT/freeze_latency.txt 2>&1
name=judges2_t30_g4
watch_warm_step() {
  until grep -q "^$name: step 1:" $OUT/steps.log 2>/dev/null; do sleep 1; done
  sleep "$WATCH_S"
  for round in 1 2; do
    grep -q "^$name: step 2:" $OUT/steps.log && return
    echo "stacks signal $round at $SECONDS s" >> $OUT/steps.log
    pkill -USR2 -f "evalkit serve"; pkill -USR2 -f "evalkit.schedule.judge_process"
    sleep 20
  done
}
watch_warm_step &
echo "$name starts at $SECONDS s" >> $OUT/steps.log
timeout 540 python3 benchmarks/rl_step.py --device cuda --answers $ans --cache $cache --group 4 --steps 2 \
  --step-limit "$STEP_LIMIT_S" --extra "--judges 2 --timing-trials 30" --json $OUT/$name.json 2>&1 \
  | sed "s/^/$name: /" >> $OUT/steps.log
grep -v "GET /v1\|POST /v1" $OUT/$name.serve.log | cut -c1-400 | tail -c 400000 > $OUT/${name}_serve.txt
rm -f $OUT/$name.serve.log
sed "s/^/$name /" /tmp/gpu_memory.txt >> /tmp/gpu_memory_all.txt
cp $OUT/${name}_serve.txt /tmp/serve.txt
finish
mv $OUT/steps.log $OUT/steps.txt
