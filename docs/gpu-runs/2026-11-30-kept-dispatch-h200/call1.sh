#!/usr/bin/env bash
# Call 1 (issue 43, item 1), on a fresh machine: this tree (6954c46, a judge takes its kept problems' answers first).
# One judge fills the build cache and the baselines in one cold step; then two judges on a new server, three steps
# (a new server on a warm cache, then two warm steps on the same server).
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run cold_j1 $PWD 4 1 "--judges 1 --timing-trials 30"
run new_j2_a $PWD 4 3 "--judges 2 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
