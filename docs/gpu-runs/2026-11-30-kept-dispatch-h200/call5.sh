#!/usr/bin/env bash
# Call 5, on the machine call 4 left warm: the tree before (23bc37e, carried as old/), one judge on a new server, three steps (call 4's run with the
# tree before).
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt  # call 4's
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run old_j1 $PWD/old 4 3 "--judges 1 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
