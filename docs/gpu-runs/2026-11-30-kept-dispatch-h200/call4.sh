#!/usr/bin/env bash
# Call 4, on the machine call 3 left warm: this tree, one judge on a new server, three steps (one judge beside the
# two judges of calls 1-3, on one machine).
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt  # call 3's
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run new_j1 $PWD 4 3 "--judges 1 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
