#!/usr/bin/env bash
# Call 3, on the machine call 2 left warm: this tree again, two judges on a new server, three steps (its figures
# again, after the tree before ran).
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt  # call 2's
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run new_j2_b $PWD 4 3 "--judges 2 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
