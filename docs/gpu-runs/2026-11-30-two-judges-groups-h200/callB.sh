#!/usr/bin/env bash
# Call B, on the machine call A left warm, this tree: two judges at the fewest timed requests (10: the default
# --min-timing-trials), two steps; then one judge at --timing-trials 30 on groups of 8 and of 16, a new server and
# one step each (issue 43, item 5, "after").
source "$(dirname "$0")/steps.sh"
run b_j2_t10 $PWD 4 2 100 "--judges 2 --timing-trials 10"
run b_after_g8 $PWD 8 1 200 "--judges 1 --timing-trials 30"
run b_after_g16 $PWD 16 1 280 "--judges 1 --timing-trials 30"
finish_record
