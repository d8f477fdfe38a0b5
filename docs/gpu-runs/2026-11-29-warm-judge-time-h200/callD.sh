#!/usr/bin/env bash
# Call D (issue 43, item 5): rl_step with this tree (run_steps.sh) at groups of 8, cold then warm on one server, then
# at groups of 16 on that cache with a new server.
source "$(dirname "$0")/run_steps.sh"
run after_g8 $PWD 8 2
run after_g16 $PWD 16 1
finish
mv $OUT/steps.log $OUT/steps.txt
