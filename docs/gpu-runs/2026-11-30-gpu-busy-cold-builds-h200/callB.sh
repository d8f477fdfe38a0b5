#!/usr/bin/env bash
# Call B, on the machine call A left warm, this tree: two judges on call A's cache, a new server and two steps at
# --timing-trials 30, with the GPU's busy fraction; then one judge's cold step on a new, empty cache with --jobs 8
# (call A's cold step ran at the default, one build per core left).
source "$(dirname "$0")/../2026-11-30-two-judges-groups-h200/steps.sh"
run b_j2_t30 $PWD 4 2 110 "--judges 2 --timing-trials 30"
cache=/tmp/rlcache_jobs8
[ $SECONDS -lt 360 ] && run b_cold_jobs8 $PWD 4 1 200 "--judges 1 --timing-trials 30 --jobs 8"
finish_record
