#!/usr/bin/env bash
# What calls 2-5 share (factored here after the run, unchanged): `warm_run.sh NAME ROOT JUDGES` runs ROOT's
# rl_step.py (this tree, or one carried beside it) on a new server, three steps, groups of 4, on the machine the call
# before left warm (the call before's memory samples and serve lines cleared first).
rm -f /tmp/gpu_memory_all.txt /tmp/serve.txt
source "$(dirname "$0")/../2026-11-30-judges-pause-h200/run_steps.sh"
STACKS_AT_S=600
run "$1" "$2" 4 3 "--judges $3 --timing-trials 30"
finish
mv $OUT/steps.log $OUT/steps.txt
