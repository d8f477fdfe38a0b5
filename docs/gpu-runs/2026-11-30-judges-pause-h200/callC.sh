#!/usr/bin/env bash
# Call C (issue 43, items 1 and 5), on the machine call B left warm (its build cache and baselines): this tree, a
# new server for each run: two judges at groups of 4, two steps (the stacks asked for 40 s into the second); then one
# judge at groups of 8, two steps.
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt  # call B's
source "$(dirname "$0")/run_steps.sh"
run after_j2_g4 $PWD 4 2 "--judges 2 --timing-trials 30"
STACKS_AT_S=600
run after_j1_g8 $PWD 8 2 "--judges 1 --timing-trials 30"
finish; keep_stacks
mv $OUT/steps.log $OUT/steps.txt
