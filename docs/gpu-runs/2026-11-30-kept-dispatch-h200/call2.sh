#!/usr/bin/env bash
# Call 2, on the machine call 1 left warm: the tree before (23bc37e, carried as old/), two judges on a new server,
# three steps, as call 1's.
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt  # call 1's
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run old_j2 $PWD/old 4 3 "--judges 2 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
