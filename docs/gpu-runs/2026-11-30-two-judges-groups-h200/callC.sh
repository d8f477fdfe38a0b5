#!/usr/bin/env bash
# Call C, on the machine call B left warm: the tree before issue 43's work (96525f2, carried as old/, with this
# tree's benchmarks/rl_step.py, which drives the same HTTP API and can cut a step short), one judge at
# --timing-trials 30 on groups of 8 and of 16, a new server and one step each (issue 43, item 5, "before").
source "$(dirname "$0")/steps.sh"
run c_before_g8 $PWD/old 8 1 230 "--judges 1 --timing-trials 30"
run c_before_g16 $PWD/old 16 1 280 "--judges 1 --timing-trials 30"
finish_record
