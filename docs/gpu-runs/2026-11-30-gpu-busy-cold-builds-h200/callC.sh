#!/usr/bin/env bash
# Call C, on the machine call B left warm, this tree: two judges at --timing-trials 10 on call A's cache (a new
# server, two steps); then the cold step again at --jobs 8 and at the default, each on a new, empty cache: the
# second run of each, for their spread.
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
run c_j2_t10 $PWD 4 2 80 "--judges 2 --timing-trials 10"
cache=/tmp/rlcache_c_jobs8
[ $SECONDS -lt 230 ] && run c_cold_jobs8 $PWD 4 1 170 "--judges 1 --timing-trials 30 --jobs 8"
cache=/tmp/rlcache_c_default
[ $SECONDS -lt 400 ] && run c_cold_default $PWD 4 1 170 "--judges 1 --timing-trials 30"
finish_record
