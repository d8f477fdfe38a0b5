#!/usr/bin/env bash
# Call A (issue 43, item 1): two judges on one GPU, before and after a stage stands aside for another judge's timing
# between its requests (gpu_gate: a nested use is a pause point). rl_step, groups of 4, `--judges 2 --timing-trials
# 30`: the tree before (`old/`, a `git archive` of b28b38a carried beside the tree) cold then warm on one server;
# then this tree on that cache, a new server, two steps.
source "$(dirname "$0")/run_steps.sh"
run before_j2_g4 $PWD/old 4 2 "--judges 2 --timing-trials 30"
run after_j2_g4 $PWD 4 2 "--judges 2 --timing-trials 30"
finish; keep_stacks
mv $OUT/steps.log $OUT/steps.txt
