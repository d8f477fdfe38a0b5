#!/usr/bin/env bash
# Call 2: call 1 again in the other order, the cold step first and its builds alone after (each on a new empty cache),
# so that neither side always runs second on a machine whose files are already read.
set -uo pipefail
source <(sed -n '/^set -uo/,/^rl_answers() {/p' benchmarks/gpu_check.sh | sed '$d')
answers=$run_dir/rl-answers
for problem in problems/*/; do name=$(basename "$problem"); mkdir -p "$answers/$name"
  cp "$problem"solutions/*.py "$answers/$name/" 2>/dev/null; cp submissions/seeds/"$name"/* "$answers/$name/" 2>/dev/null; done
export CUDA_VISIBLE_DEVICES=0
timeout 330 python3 benchmarks/rl_step.py --device cuda --answers "$answers" --distinct --steps 1 --group 8 \
  --extra "--timing-trials 10" --step-limit 300 --cache "$run_dir/rl-cold" --json "$OUT/rl_step_cold2.json" 2>&1 | tee "$OUT/rl_step_cold2.log"
timeout $(( 590 - SECONDS )) python3 benchmarks/builds_alone.py --answers "$answers" --distinct --group 8 \
  --cache "$run_dir/builds-alone" --json "$OUT/builds_alone2.json" 2>&1 | tee "$OUT/builds_alone2.log"
