#!/usr/bin/env bash
# Call A (issue 43, item 1), on a fresh machine, this tree, one judge: a cold step (fills the build cache and the
# baselines; the builds at the default --jobs), then two runs on that cache, each a new server and two steps, at
# --timing-trials 30 and 10. Every step records the GPU's busy fraction and memory (rl_step.py's `gpu`). A run
# starts only while the call has time left for it.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
run a_cold_j1 $PWD 4 1 200 "--judges 1 --timing-trials 30"
[ $SECONDS -lt 330 ] && run a_j1_t30 $PWD 4 2 90 "--judges 1 --timing-trials 30"
[ $SECONDS -lt 440 ] && run a_j1_t10 $PWD 4 2 70 "--judges 1 --timing-trials 10"
finish_record
