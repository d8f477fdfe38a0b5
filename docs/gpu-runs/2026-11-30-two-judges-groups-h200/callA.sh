#!/usr/bin/env bash
# Call A (issue 43, item 1), on a fresh machine, this tree: one judge fills the build cache and the baselines in one
# cold step; then two judges (a judge waits for a build's entry outside its GPU use, b1a94bb) on a new server, three
# steps at --timing-trials 30.
source "$(dirname "$0")/steps.sh"
run a_cold_j1 $PWD 4 1 200 "--judges 1 --timing-trials 30"
run a_j2_t30 $PWD 4 3 110 "--judges 2 --timing-trials 30"
finish_record
