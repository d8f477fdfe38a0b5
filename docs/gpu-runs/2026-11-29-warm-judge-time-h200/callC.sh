#!/usr/bin/env bash
# Call C (issue 43, item 1): the judge before and after keeping its problems through a step (193546b: past a memory
# bound the largest kept problem goes, and a text problem's next reference worker is started ahead), in one call.
# rl_step at groups of 4 (run_steps.sh): the tree before (`old/`, a `git archive` of eaa5ccd carried beside the
# tree) cold then warm on one server; then this tree on that cache, a new server, two warm steps.
source "$(dirname "$0")/run_steps.sh"
run before_g4 $PWD/old 4 2
run after_g4 $PWD 4 2
finish
mv $OUT/steps.log $OUT/steps.txt
